import Foundation
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// What a consumer that resumes after a crash checkpoints: its own state, the
/// input position reached in each stream, where those streams' producers
/// answer, and the last seq of each of its output topics.
public struct ConsumerCheckpoint<State: Codable>: Codable {
    /// The instance whose streams a restored process continues.
    public var instance: String
    /// When it was written (wall clock).
    public var savedTs: Double
    /// The last seq published per output topic.
    public var outputs: [String: UInt64]
    /// The last seq processed per input stream.
    public var inputs: [String: UInt64]
    /// Per input stream its producer, and where each producer answers replay requests.
    public var producers: [String: String]
    public var endpoints: [String: String]
    /// Its place among the checkpoints its writer wrote (`CheckpointWriter`): of the
    /// regular file and the command file, the higher is the newer. Nil in files from
    /// before the command file existed.
    public var generation: UInt64?
    /// The consumer's own state.
    public var state: State

    /// Creates a checkpoint of `publisher`'s streams, `input`'s positions and producers, and `state`.
    public init(publisher: Publisher, input: InOrderInput, inputs: [String: UInt64]? = nil, state: State) {
        instance = publisher.stamper.instance
        savedTs = publisher.clock.wallSeconds()
        outputs = publisher.stamper.positions
        self.inputs = inputs ?? input.positions
        producers = input.producers
        endpoints = input.endpoints
        self.state = state
    }

    /// Encodes it (infinities and NaN, which states hold, as strings).
    public func encoded() throws -> [UInt8] { Array(try Self.encoder.encode(self)) }

    /// Writes it to `file`, the same bytes as `encoded()`, a state element at
    /// a time when the state is an array (only one element's encoding is in
    /// memory at once).
    public func write<Element: Codable>(to file: CheckpointFile) throws where State == [Element] {
        var elements = state.makeIterator()
        try write(to: file) { elements.next() }
    }

    /// Writes it as `write(to:)` does, letting go of each state element once it is
    /// encoded, and leaves the state empty. A snapshot of a state the loop goes on
    /// changing shares the loop's storage only until the loop's next change to it
    /// (Window.swift): held whole for a write's length, on a busy machine seconds, it
    /// would keep a second copy of most of the state.
    public mutating func writeReleasing<Element: Codable>(to file: CheckpointFile) throws where State == [Element] {
        var elements = state
        state = []
        elements.reverse()
        try write(to: file) { elements.popLast() }
    }

    /// Writes the head, then each element `next` gives until nil.
    private func write<Element: Codable>(to file: CheckpointFile, next: () -> Element?) throws where State == [Element] {
        var head = self
        head.state = []
        let encoder = Self.encoder
        let whole = try head.encoded()
        // Keys are sorted and `state` is the last: the head ends `"state":[]}`.
        let tail = Array(#""state":[]}"#.utf8)
        guard whole.count > tail.count, Array(whole.suffix(tail.count)) == tail else {
            var all = self
            all.state = []
            while let element = next() { all.state.append(element) }
            return try file.write(try all.encoded())
        }
        try file.write { emit in
            try emit(Array(whole.dropLast(2)))  // through `[`
            var first = true
            while let element = next() {
                if !first { try emit([UInt8(ascii: ",")]) }
                first = false
                try emit(Array(try encoder.encode(element)))
            }
            try emit(Array("]}".utf8))
        }
    }

    /// Reads the checkpoint in `file`; nil when there is none.
    public static func load(_ file: CheckpointFile) throws -> Self? {
        guard let bytes = try file.read() else { return nil }
        return try decoder.decode(Self.self, from: Data(bytes))
    }

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return decoder
    }
}

extension ConsumerCheckpoint: Sendable where State: Sendable {}

/// Runs a consumer's file writes on a thread of its own, so its loop never
/// waits for the encoding or the disk: the loop hands over a job that holds
/// a snapshot (the state is values, so a snapshot is a copy-on-write
/// reference, not a copy) and goes on. Only the newest job matters: one
/// handed over while another runs replaces any still waiting. The thread is
/// started when a job comes and ends when none is left.
///
/// Off the loop because an fsync under the recorder's writes takes
/// milliseconds at a thousand stations, and the reps behind it would wait.
public final class BackgroundWriter: @unchecked Sendable {
    /// The thread's name.
    public let name: String
    private let background: Bool
    private let condition = NSCondition()
    private var next: (@Sendable () throws -> Void)?
    private var running = false
    private var failure: String?
    private var lastDuration = 0.0
    private var lastCPU = 0.0

    /// A writer whose thread is called `name`; `background` runs it under
    /// SCHED_IDLE (`runThreadInBackground`), for jobs that take a core for long.
    public init(name: String, background: Bool) { (self.name, self.background) = (name, background) }

    /// Hands `job` over to be run, and returns at once.
    public func submit(_ job: @escaping @Sendable () throws -> Void) {
        condition.lock()
        defer { condition.unlock() }
        next = job
        guard !running else { return }
        running = true
        let thread = Thread { [self] in
            // Never on the rep path's real-time priority (`RealtimeScheduling`), which a new thread inherits.
            if background { runThreadInBackground() } else { RealtimeScheduling.leave() }
            drain()
        }
        thread.name = name
        thread.start()
    }

    private func drain() {
        while true {
            condition.lock()
            guard let job = next else {
                running = false
                condition.broadcast()
                condition.unlock()
                return
            }
            next = nil
            condition.unlock()
            let started = DispatchTime.now().uptimeNanoseconds
            let startedCPU = threadCPUSeconds()
            var failed: String?
            do { try job() } catch { failed = "\(error)" }
            condition.lock()
            lastDuration = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            lastCPU = threadCPUSeconds() - startedCPU
            if let failed { failure = failed }
            condition.unlock()
        }
    }

    /// Whether a job is running or waiting to run.
    public var isBusy: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// Waits until every job handed over has run (or has failed).
    public func wait() {
        condition.lock()
        while running { condition.wait() }
        condition.unlock()
    }

    /// How long the last job took, seconds.
    public var lastDurationS: Double {
        condition.lock()
        defer { condition.unlock() }
        return lastDuration
    }

    /// The processor time the last job took, seconds: on a busy machine a background
    /// job's wall time is mostly waiting for a core, which costs the others nothing.
    public var lastCPUSeconds: Double {
        condition.lock()
        defer { condition.unlock() }
        return lastCPU
    }

    /// Why the last failed job failed, once; nil when none has since asked.
    public func takeFailure() -> String? {
        condition.lock()
        defer { condition.unlock() }
        defer { failure = nil }
        return failure
    }
}

/// Writes a consumer's checkpoints with `BackgroundWriter`s: a thousand
/// stations' detector state takes a second to write, and even at nine the
/// fsync alone would be the slowest reps' wait.
///
/// The regular checkpoints go to `file` from a thread in the background
/// (`runThreadInBackground`), so a write of tens of MB takes the time the bus and
/// the consumers leave rather than a core they need; the loop waits longer for the
/// next (`lastCPUSeconds`). The figures: docs/decisions/0035-detector-memory-and-checkpoints.md.
///
/// A command is kept by no journal, and its sender takes the answer as "done", so a
/// consumer answers a command only once a checkpoint holding it is on disk
/// (`submitNow`, `isWritten`). Such a checkpoint goes to `commandFile` from a thread
/// at normal priority: a background thread can wait for a core for as long as the
/// machine is busy (a build beside a gym's programs once held one for over a minute),
/// and the answer would wait with it. Two files, so neither writer ever replaces the
/// other's newer checkpoint; `load` takes the newer of the two by `generation`.
public final class CheckpointWriter<Element: Codable & Sendable>: @unchecked Sendable {
    /// The file the regular checkpoints are written to.
    public let file: CheckpointFile
    /// The file the checkpoints that answer commands are written to, beside `file`.
    public let commandFile: CheckpointFile
    private let writer = BackgroundWriter(name: "vbt.checkpoint", background: true)
    private let commandWriter = BackgroundWriter(name: "vbt.checkpoint.now", background: false)
    private let lock = NSLock()
    private var generation: UInt64 = 0
    private var written: UInt64 = 0
    /// Runs before each regular write (tests hold the background writer with it, as a busy machine would).
    var beforeRegularWrite: (@Sendable () -> Void)?

    /// A writer of `file`, and of its command file beside it (`checkpoint.json` → `checkpoint.command.json`).
    public init(file: CheckpointFile) {
        self.file = file
        let base = file.path.hasSuffix(".json") ? String(file.path.dropLast(5)) : file.path
        commandFile = CheckpointFile(path: base + ".command.json")
    }

    /// The newer of the two files' checkpoints (nil when neither exists); the next written is newer still.
    /// Read an element at a time (`loadElements`), and with both files there, only the newer's
    /// elements are decoded: a gym's detector state is tens of MB, and each held whole once more
    /// is as much again at the restarted process's peak.
    public func load() throws -> ConsumerCheckpoint<[Element]>? {
        var newestFile = file
        if FileManager.default.fileExists(atPath: commandFile.path) {
            let regular = try ConsumerCheckpoint<[Element]>.loadHead(file)
            let command = try ConsumerCheckpoint<[Element]>.loadHead(commandFile)
            if let command, regular == nil || (command.generation ?? 0) > (regular?.generation ?? 0) { newestFile = commandFile }
        }
        let newest = try ConsumerCheckpoint<[Element]>.loadElements(newestFile)
        lock.withLock { generation = max(generation, newest?.generation ?? 0) }
        return newest
    }

    private func numbered(_ checkpoint: ConsumerCheckpoint<[Element]>) -> ConsumerCheckpoint<[Element]> {
        var checkpoint = checkpoint
        checkpoint.generation = lock.withLock {
            generation += 1
            return generation
        }
        return checkpoint
    }

    /// Whether a regular checkpoint handed over is still being written (or waits to be).
    /// A consumer hands over the next only when it is not: each one held is a snapshot
    /// of the state, and the loop's changes since copy what they touch.
    public var isWritingRegular: Bool { writer.isBusy }

    /// Hands `checkpoint` over to be written in the background, and returns at once.
    /// The writer holds the only copy and lets go of each station's state once written
    /// (`writeReleasing`); one replaced before its turn is let go whole.
    public func submit(_ checkpoint: ConsumerCheckpoint<[Element]>) {
        let handed = Handed(numbered(checkpoint))
        writer.submit { [file, beforeRegularWrite] in
            beforeRegularWrite?()
            guard var checkpoint = handed.take() else { return }
            try checkpoint.writeReleasing(to: file)
        }
    }

    /// Hands `checkpoint` over to be written at once at normal priority, and returns
    /// its generation: `isWritten` says when it (or a newer one) is on disk.
    public func submitNow(_ checkpoint: ConsumerCheckpoint<[Element]>) -> UInt64 {
        let checkpoint = numbered(checkpoint)
        let number = checkpoint.generation ?? 0
        commandWriter.submit { [self] in
            try checkpoint.write(to: commandFile)
            lock.withLock { written = max(written, number) }
        }
        return number
    }

    /// Whether the checkpoint `submitNow` numbered `generation`, or a newer one, is on disk.
    public func isWritten(_ generation: UInt64) -> Bool { lock.withLock { written >= generation } }

    /// Waits until every checkpoint handed over is written (or has failed).
    public func wait() {
        writer.wait()
        commandWriter.wait()
    }

    /// How long the last regular write took, seconds.
    public var lastDurationS: Double { writer.lastDurationS }

    /// The processor time the last regular write took, seconds.
    public var lastCPUSeconds: Double { writer.lastCPUSeconds }

    /// Why the last failed write failed, once; nil when none has since asked.
    public func takeFailure() -> String? { commandWriter.takeFailure() ?? writer.takeFailure() }
}

/// A consumer's checkpoint: one file written whole and durably (a temporary
/// file, fsync, rename over the old one, fsync of the folder), so a crash or
/// a power cut leaves the previous checkpoint or the new one, never part of
/// one. Written by hand because Foundation's atomic write takes the whole file
/// at once (a big checkpoint is written in pieces) and does not fsync the folder.
public struct CheckpointFile: Sendable {
    /// The file.
    public let path: String

    /// A checkpoint at `path` (its folder must exist when writing).
    public init(path: String) { self.path = path }

    /// Replaces the checkpoint with `bytes`.
    public func write(_ bytes: [UInt8]) throws {
        try write { emit in try emit(bytes) }
    }

    /// Replaces the checkpoint with the pieces `produce` emits, in order: a
    /// big checkpoint is never whole in memory (a thousand stations' detector
    /// state encoded at once would take the rep-detector near a gigabyte).
    public func write(_ produce: (_ emit: ([UInt8]) throws -> Void) throws -> Void) throws {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw JournalError("cannot write the checkpoint \(temporary): \(String(cString: strerror(errno)))") }
        do {
            try produce { bytes in
                var written = 0
                while written < bytes.count {
                    let result = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                    if result < 0 {
                        if errno == EINTR { continue }
                        throw JournalError("checkpoint write failed (\(temporary)): \(String(cString: strerror(errno))); is the disk full?")
                    }
                    written += result
                }
            }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        let synced = fdatasync(fd) == 0
        close(fd)
        guard synced, rename(temporary, path) == 0 else {
            throw JournalError("checkpoint not saved (\(path)): \(String(cString: strerror(errno)))")
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let dirFd = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFd >= 0 {
            _ = fsync(dirFd)
            close(dirFd)
        }
    }

    /// The checkpoint's bytes, or nil when there is none.
    public func read() throws(JournalError) -> [UInt8]? {
        var bytes: [UInt8] = []
        do {
            guard try readChunks({ bytes.append(contentsOf: $0) }) else { return nil }
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError("cannot read the checkpoint \(path): \(error)")
        }
        return bytes
    }

    /// Hands `take` the file's bytes a 64 KiB chunk at a time; false when there is no file.
    func readChunks(_ take: (UnsafeBufferPointer<UInt8>) throws -> Void) throws -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return false }
            throw JournalError("cannot read the checkpoint \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw JournalError("cannot read the checkpoint \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { return true }
            try chunk.withUnsafeBufferPointer { try take(UnsafeBufferPointer(rebasing: $0[..<count])) }
        }
    }
}

/// Where a producer's output streams stood when its state was saved: a
/// restarted process continues them (`Publisher.resume(afterSaved:identity:)`).
public struct OutputPositions: Sendable, Codable, Equatable {
    /// The instance whose streams go on.
    public var instance: String
    /// The last seq published per topic.
    public var positions: [String: UInt64]

    /// The positions of `publisher`'s streams now.
    public init(_ publisher: Publisher) {
        instance = publisher.stamper.instance
        positions = publisher.stamper.positions
    }
}

/// Moves the calling thread to Linux's SCHED_IDLE policy, "for running very
/// low priority background jobs" (sched(7)): it runs when the cores have
/// nothing else to run, and shares them at a small weight when they never
/// do. Anyone may lower their own threads; a failure leaves the thread as it
/// was, which costs only latency elsewhere.
public func runThreadInBackground() {
    #if os(Linux)
    // SCHED_IDLE is 5 in the kernel's ABI (include/uapi/linux/sched.h); glibc declares it only under _GNU_SOURCE.
    let schedIdle: Int32 = 5
    var parameters = sched_param()
    parameters.sched_priority = 0
    _ = pthread_setschedparam(pthread_self(), schedIdle, &parameters)
    #endif
}

/// The calling thread's processor time so far, seconds.
func threadCPUSeconds() -> Double {
    var spec = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec) == 0 else { return 0 }
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// A value handed to another thread once: `take` gives it and keeps nothing, so the
/// taker holds the only copy.
private final class Handed<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?

    init(_ value: Value) { self.value = value }

    func take() -> Value? {
        lock.withLock {
            defer { value = nil }
            return value
        }
    }
}
