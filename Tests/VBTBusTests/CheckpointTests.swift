import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus

@Suite("checkpoint files")
struct CheckpointTests {
    struct Station: Codable, Equatable {
        var name: String
        var best: Double
        var points: [Double]
    }

    /// What a checkpoint takes its output and input positions from, over the in-memory bus.
    static func streams() throws -> (Publisher, InOrderInput) {
        let bus = MemoryBus()
        let input = InOrderInput(transport: bus, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, wants: { _ in true })
        return (try Publisher(transport: bus, program: "rep-detector"), input)
    }

    @Test("a checkpoint written an element at a time is byte for byte the one encoded whole, and reads back")
    func streamedEqualsWhole() throws {
        let dir = try TemporaryDirectory()
        let (publisher, input) = try Self.streams()
        // Infinities (written as strings), a slash and quotes (escaped), an empty element list too.
        let stations = (1...40).map { Station(name: "rack-\($0)/\"x\"", best: $0 % 2 == 0 ? .infinity : Double($0), points: (0..<$0).map(Double.init)) }
        for state in [stations, []] {
            let checkpoint = ConsumerCheckpoint(publisher: publisher, input: input, inputs: ["a/sample.rack-1": 7], state: state)
            let file = CheckpointFile(path: dir.path("checkpoint.json"))
            try checkpoint.write(to: file)
            #expect(try file.read() == checkpoint.encoded())
            #expect(try ConsumerCheckpoint<[Station]>.load(file)?.state == state)
        }
    }

    /// How many `Held` elements are alive, and how many each encoding saw alive.
    final class Liveness: @unchecked Sendable {
        let lock = NSLock()
        var alive = 0
        var seenWhileEncoding: [Int] = []
    }

    /// A state element whose storage counts itself alive in `Liveness` until let go.
    struct Held: Codable, Sendable {
        final class Storage: @unchecked Sendable {
            let liveness: Liveness
            let number: Int
            init(_ liveness: Liveness, _ number: Int) {
                (self.liveness, self.number) = (liveness, number)
                liveness.lock.withLock { liveness.alive += 1 }
            }
            deinit { liveness.lock.withLock { liveness.alive -= 1 } }
        }
        let storage: Storage

        init(_ liveness: Liveness, _ number: Int) { storage = Storage(liveness, number) }
        init(from decoder: any Decoder) throws { throw JournalError("written only") }
        func encode(to encoder: any Encoder) throws {
            let liveness = storage.liveness
            liveness.lock.withLock { liveness.seenWhileEncoding.append(liveness.alive) }
            var container = encoder.singleValueContainer()
            try container.encode(storage.number)
        }
    }

    @Test("a checkpoint written releasing is the same bytes, and lets go of each element once it is written")
    func writtenReleasing() throws {
        let dir = try TemporaryDirectory()
        let (publisher, input) = try Self.streams()
        let liveness = Liveness()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        var checkpoint = ConsumerCheckpoint(publisher: publisher, input: input, state: (0..<10).map { Held(liveness, $0) })
        try checkpoint.write(to: file)
        let whole = try file.read()
        #expect(liveness.seenWhileEncoding == Array(repeating: 10, count: 10), "write(to:) keeps every element")
        liveness.seenWhileEncoding = []
        try checkpoint.writeReleasing(to: file)
        #expect(try file.read() == whole, "the same bytes, elements in the same order")
        #expect(liveness.seenWhileEncoding == Array((1...10).reversed()), "each let go once written: \(liveness.seenWhileEncoding)")
        #expect(checkpoint.state.isEmpty && liveness.alive == 0)
    }

    @Test("the checkpoint writer is busy while a regular checkpoint is written, and holds no copy of one it replaced or wrote")
    func writerBusyAndLettingGo() throws {
        let dir = try TemporaryDirectory()
        let (publisher, input) = try Self.streams()
        let liveness = Liveness()
        let writer = CheckpointWriter<Held>(file: CheckpointFile(path: dir.path("checkpoint.json")))
        let held = NSCondition()
        nonisolated(unsafe) var release = false
        nonisolated(unsafe) var entered = false
        writer.beforeRegularWrite = {
            held.lock()
            entered = true
            held.broadcast()
            while !release { held.wait() }
            held.unlock()
        }
        #expect(!writer.isWritingRegular)
        writer.submit(ConsumerCheckpoint(publisher: publisher, input: input, state: (0..<5).map { Held(liveness, $0) }))
        #expect(writer.isWritingRegular, "held in its write, as a busy machine holds the background thread")
        held.lock()
        while !entered { held.wait() }
        held.unlock()
        // One handed over meanwhile waits; a newer one replaces it, which is let go at once.
        writer.submit(ConsumerCheckpoint(publisher: publisher, input: input, state: (5..<10).map { Held(liveness, $0) }))
        writer.submit(ConsumerCheckpoint(publisher: publisher, input: input, state: (10..<15).map { Held(liveness, $0) }))
        #expect(liveness.lock.withLock { liveness.alive } == 10, "the replaced checkpoint's 5 elements are let go")
        held.lock()
        release = true
        held.broadcast()
        held.unlock()
        writer.wait()
        #expect(!writer.isWritingRegular)
        #expect(liveness.alive == 0, "nothing written is kept")
        #expect(try String(decoding: writer.file.read() ?? [], as: UTF8.self).hasSuffix(#""state":[10,11,12,13,14]}"#))
    }

    @Test("the checkpoint writer: once it is done the file is the newest checkpoint handed over, and a failure is told once")
    func writer() throws {
        let dir = try TemporaryDirectory()
        let (publisher, input) = try Self.streams()
        let writer = CheckpointWriter<Station>(file: CheckpointFile(path: dir.path("checkpoint.json")))
        var newest: ConsumerCheckpoint<[Station]>?
        for count in 1...50 {
            let state = (0..<count).map { Station(name: "rack-\($0)", best: Double(count), points: Array(repeating: 0.5, count: 2_000)) }
            newest = ConsumerCheckpoint(publisher: publisher, input: input, inputs: ["a/sample.rack-1": UInt64(count)], state: state)
            writer.submit(newest!)
        }
        writer.wait()
        var numbered = try #require(newest)
        numbered.generation = 50
        #expect(try writer.file.read() == numbered.encoded(), "the newest, numbered in the order handed over")
        #expect(writer.takeFailure() == nil)
        #expect(writer.lastDurationS > 0)

        // A checkpoint written at once (a command's) goes to a file of its own; the newer of the two is loaded.
        let command = try #require(newest)
        let generation = writer.submitNow(command)
        writer.wait()
        #expect(generation == 51 && writer.isWritten(51) && !writer.isWritten(52))
        #expect(try writer.load()?.generation == 51)
        writer.submit(command)
        writer.wait()
        let again = CheckpointWriter<Station>(file: writer.file)
        #expect(try again.load()?.generation == 52, "the regular file is newer again")
        #expect(again.submitNow(command) == 53, "a writer started on the files numbers after the newest")
        again.wait()

        let lost = CheckpointWriter<Station>(file: CheckpointFile(path: dir.path("no-such-folder/checkpoint.json")))
        lost.submit(try #require(newest))
        lost.wait()
        #expect(lost.takeFailure()?.contains("no-such-folder") == true)
        #expect(lost.takeFailure() == nil)
    }

    @Test("the background writer: submit returns while a job runs, a job waiting is replaced by a newer one, wait waits for the last")
    func backgroundWriter() throws {
        final class Log: @unchecked Sendable {
            let lock = NSCondition()
            var ran: [Int] = []
            var release = false
        }
        let log = Log()
        let writer = BackgroundWriter(name: "vbt.test", background: false)
        @Sendable func job(_ number: Int) -> @Sendable () throws -> Void {
            {
                log.lock.lock()
                defer { log.lock.unlock() }
                while !log.release { log.lock.wait() }  // the disk is slow: held until released
                log.ran.append(number)
            }
        }
        writer.submit(job(1))
        // Returned at once although job 1 is held; 2 and 3 wait, and 3 replaces 2.
        writer.submit(job(2))
        writer.submit(job(3))
        log.lock.lock()
        let before = log.ran
        log.release = true
        log.lock.broadcast()
        log.lock.unlock()
        writer.wait()
        #expect(before.isEmpty)
        #expect(log.ran == [1, 3] || log.ran == [3], "the newest only, after any already running (\(log.ran))")
        writer.submit { throw JournalError("disk full") }
        writer.wait()
        #expect(writer.takeFailure() == "disk full")
        #expect(writer.takeFailure() == nil)
    }

    @Test("a thread sent to the background runs under SCHED_IDLE, and the others keep their policy")
    func backgroundThread() throws {
        final class Policies: @unchecked Sendable {
            let done = NSCondition()
            var seen: (before: Int32, after: Int32)?
        }
        let policies = Policies()
        @Sendable func policy() -> Int32 {
            var policy: Int32 = -1
            var parameters = sched_param()
            _ = pthread_getschedparam(pthread_self(), &policy, &parameters)
            return policy
        }
        let thread = Thread {
            let before = policy()
            runThreadInBackground()
            policies.done.lock()
            policies.seen = (before, policy())
            policies.done.broadcast()
            policies.done.unlock()
        }
        thread.start()
        policies.done.lock()
        while policies.seen == nil { policies.done.wait() }
        policies.done.unlock()
        #expect(policies.seen?.before == SCHED_OTHER)
        #expect(policies.seen?.after == 5, "SCHED_IDLE")
        #expect(policy() == SCHED_OTHER, "the caller's own thread is untouched")
    }

    @Test(
        "a writer started from a real-time thread (the rep path's SCHED_RR) runs its jobs under the normal scheduler, a background one under SCHED_IDLE; the starting thread stays real-time",
        .enabled(if: mayUseRealtime, "SCHED_RR needs root or an RLIMIT_RTPRIO"),
        arguments: [false, true]
    )
    func writerLeavesRealtime(background: Bool) throws {
        final class Seen: @unchecked Sendable {
            let done = NSCondition()
            var starter: String?
            var job: String?
            var jobPolicy: Int32?
            var permitted = true
        }
        let seen = Seen()
        let writer = BackgroundWriter(name: "vbt.test", background: background)
        let thread = Thread {
            var parameters = sched_param()
            parameters.sched_priority = 1
            seen.permitted = pthread_setschedparam(pthread_self(), SCHED_RR, &parameters) == 0
            if seen.permitted {
                writer.submit {
                    seen.done.lock()
                    seen.job = RealtimeScheduling.describe(0)
                    seen.jobPolicy = sched_getscheduler(0)
                    seen.done.unlock()
                }
                writer.wait()
            }
            seen.done.lock()
            seen.starter = RealtimeScheduling.describe(0)
            seen.done.broadcast()
            seen.done.unlock()
        }
        thread.start()
        seen.done.lock()
        while seen.starter == nil { seen.done.wait() }
        seen.done.unlock()
        // SCHED_RR takes CAP_SYS_NICE or an RLIMIT_RTPRIO: without either there is nothing to leave.
        try #require(seen.permitted, "this user may not use SCHED_RR")
        #expect(seen.starter == "rr:1")
        #expect(seen.job == "other")
        #expect(seen.jobPolicy == (background ? 5 : SCHED_OTHER), "SCHED_IDLE is 5: \(String(describing: seen.jobPolicy))")
    }

    @Test("a background writer started from a thread of the normal scheduler runs its jobs under SCHED_IDLE too")
    func backgroundWriterIdlesOutsideRealtime() throws {
        final class Seen: @unchecked Sendable {
            let done = NSCondition()
            var policy: Int32?
        }
        let seen = Seen()
        let writer = BackgroundWriter(name: "vbt.test", background: true)
        let thread = Thread {
            RealtimeScheduling.leave()
            writer.submit {
                seen.done.lock()
                seen.policy = sched_getscheduler(0)
                seen.done.broadcast()
                seen.done.unlock()
            }
        }
        thread.start()
        seen.done.lock()
        while seen.policy == nil { seen.done.wait() }
        seen.done.unlock()
        writer.wait()
        #expect(seen.policy == 5, "SCHED_IDLE")
    }

    @Test("a checkpoint that cannot be written leaves the previous one")
    func failedWriteKeepsPrevious() throws {
        let dir = try TemporaryDirectory()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        try file.write(Array("previous".utf8))
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try file.write { emit in
                try emit(Array("half of the new".utf8))
                throw Refused()
            }
        }
        #expect(try file.read() == Array("previous".utf8))
        #expect(!FileManager.default.fileExists(atPath: dir.path("checkpoint.json.tmp")))
    }

    @Test("a journal's background sync reports a failure once, and syncs a real file")
    func backgroundSync() throws {
        let syncer = BackgroundSync()
        #expect(!syncer.start(-1), "no descriptor to sync")
        #expect(syncer.takeFailure() != nil)
        #expect(syncer.takeFailure() == nil, "told once")
        let dir = try TemporaryDirectory()
        let fd = open(dir.path("file"), O_WRONLY | O_CREAT, 0o644)
        defer { close(fd) }
        #expect(fd >= 0)
        // Started, or the previous one still running: either way no failure comes of a real file.
        var started = false
        for _ in 0..<1_000 where !started { started = syncer.start(fd) }
        #expect(started)
        while !syncer.start(fd) {}  // the first has finished once another may start
        #expect(syncer.takeFailure() == nil)
    }
}

/// Whether this user may put a thread under SCHED_RR (root, or an RLIMIT_RTPRIO above 0).
let mayUseRealtime: Bool = {
    // RLIMIT_RTPRIO is 14 in the kernel's ABI (include/uapi/asm-generic/resource.h); Swift's Glibc does not declare it.
    let rlimitRealtimePriority = __rlimit_resource_t(14)
    var limit = rlimit()
    return geteuid() == 0 || (getrlimit(rlimitRealtimePriority, &limit) == 0 && limit.rlim_cur > 0)
}()
