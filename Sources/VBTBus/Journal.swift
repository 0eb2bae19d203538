import Foundation
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// A producer's journal: every message it publishes, appended to files, so a
// consumer that missed some (a crash, a restart, an overload) can ask for
// them again. The ZeroMQ Guide's reliable pub-sub patterns (Clone, with
// sequence numbers and replay from the producer) are the model.
//
// Written by hand: no library in the dependency set keeps an append-only,
// size- and age-bounded log of opaque frames readable by (stream, seq)
// range. SQLite could, at several times the cost per message, and it would
// put the store's library into every producer.
//
// Files: `<dir>/<instance>-<index>.journal`, one writer per process (its
// instance name is unique per start), read by that process for every file in
// the folder, so a restarted producer still answers for the streams of the
// process before it. A record:
//
//     u32 record length (everything after this field)
//     u32 CRC-32 (IEEE) of everything after this field
//     u64 seq, f64 ts (little-endian)
//     u16 src length, u16 topic length, u32 body length
//     src, topic, body bytes
//
// A record that is cut short or fails its CRC ends its file: a torn tail from
// a crash is cut off when the journal opens, and nothing after it is trusted.
//
// A journal may hold many streams interleaved (a rep-detector's outputs for a
// thousand stations; `vbt loadtest --journal`'s replay of as many). A range of
// one stream is then read record by record from an index of where each of its
// records begins, not by walking past every other stream's records between:
// the file being written keeps that index as it grows, a closed file's is
// built on the first read that needs it (a pass over its record headers) and
// the last few are kept (a recorder fetching a thousand streams' holes after a
// stall would otherwise make its producer walk the same files once per stream).

/// How a journal is kept.
public struct JournalSettings: Sendable, Equatable {
    /// The folder (created if missing).
    public var directory: String
    /// Records older than this are deleted (whole files, oldest first), s.
    public var maxAgeS = 1_800.0
    /// The folder never holds more than this many bytes (whole files, oldest first).
    public var maxBytes = 1 << 30
    /// A file is closed and a new one begun at this size.
    public var segmentBytes = 64 << 20
    /// Appended records reach the disk (write and fdatasync) at least this often, s.
    public var syncIntervalS = 0.05
    /// Read a range of a stream by an index of where each of its records begins (in files holding
    /// many streams); off, from the nearest of every `indexStride`-th (the benchmark's baseline).
    public var exactIndex = true

    /// Settings for `directory`, with the defaults: at most 30 minutes or 1 GiB, whichever is smaller.
    public init(directory: String) { self.directory = directory }
}

/// A journal that cannot be used, saying what to do.
public struct JournalError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// One message read back from a journal.
public struct JournalRecord: Sendable, Equatable {
    public var src: String
    public var seq: UInt64
    public var ts: Double
    public var topic: [UInt8]
    public var body: [UInt8]

    /// Creates a record.
    public init(src: String, seq: UInt64, ts: Double, topic: [UInt8], body: [UInt8]) {
        (self.src, self.seq, self.ts, self.topic, self.body) = (src, seq, ts, topic, body)
    }
}

/// The append-only journal of one producer. Owned by one thread.
public final class Journal {
    /// What a file holds, for finding a range without reading every file.
    struct Segment {
        var path: String
        var bytes: Int
        var firstTs: Double
        var lastTs: Double
        /// Per stream: the first and last seq in this file.
        var streams: [String: ClosedRange<UInt64>]
        /// Per stream: where some of its records begin (every `indexStride`-th, the first
        /// included), so a range is read from near its start, not from the file's.
        var index: [String: [(seq: UInt64, offset: Int)]] = [:]
        /// Per stream: records since its last index entry.
        var sinceIndexed: [String: Int] = [:]
        /// Whether `index` holds every record (the file being written), not every `indexStride`-th.
        var exact = false

        mutating func note(src: String, seq: UInt64, offset: Int) {
            if exact {
                index[src, default: []].append((seq, offset))
                return
            }
            let count = sinceIndexed[src, default: Journal.indexStride]
            if count >= Journal.indexStride {
                index[src, default: []].append((seq, offset))
                sinceIndexed[src] = 1
            } else {
                sinceIndexed[src] = count + 1
            }
        }

        /// Keeps every `indexStride`-th entry: a closed file's exact index would hold memory for every
        /// record (the exact one goes to the journal's cache of recent files instead).
        mutating func thin() {
            guard exact else { return }
            exact = false
            for (src, entries) in index {
                index[src] = Swift.stride(from: 0, to: entries.count, by: Journal.indexStride).map { entries[$0] }
                sinceIndexed[src] = (entries.count - 1) % Journal.indexStride + 1
            }
        }

        /// Where to begin reading `src` for seqs from `from` on.
        func start(of src: String, from: UInt64) -> Int {
            guard let entries = index[src], var found = entries.first?.offset else { return 0 }
            var low = 0, high = entries.count - 1
            while low <= high {
                let middle = (low + high) / 2
                if entries[middle].seq <= from {
                    found = entries[middle].offset
                    low = middle + 1
                } else {
                    high = middle - 1
                }
            }
            return found
        }
    }

    /// Records of a stream between two index entries.
    static let indexStride = 32
    /// Streams a closed file must hold for its exact index to be built when read.
    static let exactIndexStreams = 8
    /// Closed files whose exact index is kept (a 64 MiB file of 1 KB records: about 1 MB each).
    static let exactIndexCache = 4

    public let settings: JournalSettings
    private let clock: any BusClock
    private let instance: String
    private var segments: [Segment] = []
    private var fd: Int32 = -1
    private var lockFd: Int32 = -1
    /// The exact indexes of closed files recently read or closed, by path, the most recent last.
    private var exactIndexes: [(path: String, index: [String: [(seq: UInt64, offset: Int)]])] = []
    private var index = 0
    private var buffer: [UInt8] = []
    /// Written to the kernel since the last `fdatasync`.
    private var unsynced = false
    /// Where `tick`'s syncs run.
    private let syncer = BackgroundSync()
    private var nextSync: Double
    /// Bytes of torn tails cut off at open, and records in them lost.
    public private(set) var repairedBytes = 0
    /// Records appended by this process.
    public private(set) var appended = 0
    /// Files deleted for age or size.
    public private(set) var pruned = 0

    /// Opens (creating) the folder, reads what earlier processes left (cutting
    /// off torn tails) and begins a file for `instance`. When another process
    /// holds the folder, waits up to `lockWaitS` for it to let go (a process
    /// taking over from one that is about to exit).
    public init(settings: JournalSettings, instance: String, clock: any BusClock = SystemClock(), lockWaitS: Double = 0) throws(JournalError) {
        self.settings = settings
        self.instance = instance
        self.clock = clock
        nextSync = clock.monotonicSeconds() + settings.syncIntervalS
        do {
            try FileManager.default.createDirectory(atPath: settings.directory, withIntermediateDirectories: true)
        } catch {
            throw JournalError("cannot create the journal folder \(settings.directory): \(error); give a writable folder with --journal DIR, or --no-journal")
        }
        // One process at a time per folder: a second one would cut the first's open file as a torn tail.
        lockFd = open(settings.directory + "/journal.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        let lockDeadline = VBTBus.monotonicSeconds() + lockWaitS
        while lockFd >= 0, flock(lockFd, LOCK_EX | LOCK_NB) != 0, VBTBus.monotonicSeconds() < lockDeadline { usleep(20_000) }
        guard lockFd >= 0, flock(lockFd, LOCK_EX | LOCK_NB) == 0 else {
            throw JournalError(
                "the journal folder \(settings.directory) is in use by another process: give each producer a folder of its own with --journal DIR")
        }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: settings.directory) } catch {
            throw JournalError("cannot read the journal folder \(settings.directory): \(error)")
        }
        for name in names where name.hasSuffix(".journal") {
            let path = settings.directory + "/" + name
            if let segment = try scan(path) { segments.append(segment) }
        }
        segments.sort { ($0.firstTs, $0.path) < ($1.firstTs, $1.path) }
        try openNext()
    }

    deinit {
        try? sync()
        if fd >= 0 { close(fd) }
        if lockFd >= 0 { close(lockFd) }  // releases the folder
    }

    /// Every stream the journal holds, with the first and last seq kept.
    public var streams: [String: ClosedRange<UInt64>] {
        var all: [String: ClosedRange<UInt64>] = [:]
        for segment in segments {
            for (src, range) in segment.streams {
                if let known = all[src] {
                    all[src] = min(known.lowerBound, range.lowerBound)...max(known.upperBound, range.upperBound)
                } else {
                    all[src] = range
                }
            }
        }
        return all
    }

    /// The streams of the newest files not named by `excluded`, at most `limit`
    /// of them, each with the last seq kept: an earlier process's streams,
    /// which a restarted producer still answers for.
    public func recentStreams(excluding excluded: (String) -> Bool, limit: Int) -> [String: UInt64] {
        var found: [String: UInt64] = [:]
        for segment in segments.reversed() {
            for (src, range) in segment.streams where !excluded(src) {
                if let known = found[src] {
                    found[src] = max(known, range.upperBound)
                } else if found.count < limit {
                    found[src] = range.upperBound
                }
            }
            if found.count >= limit { break }
        }
        return found
    }

    /// The first and last seq of `src` the journal holds (nil: none), without merging every stream.
    public func range(of src: String) -> ClosedRange<UInt64>? {
        var found: ClosedRange<UInt64>?
        for segment in segments {
            guard let range = segment.streams[src] else { continue }
            found = found.map { min($0.lowerBound, range.lowerBound)...max($0.upperBound, range.upperBound) } ?? range
        }
        return found
    }

    /// Bytes in the folder's journal files (what is still buffered included).
    public var totalBytes: Int { segments.reduce(0) { $0 + $1.bytes } }

    /// Appends one published message. It is handed to the kernel at once (a
    /// process killed right after still leaves it in the file: the journal
    /// holds everything its producer sent) and reaches the disk at the next
    /// `sync` (at most `syncIntervalS` later when the caller calls `tick`).
    public func append(src: String, seq: UInt64, ts: Double, topic: [UInt8], body: [UInt8]) throws(JournalError) {
        let srcCount = src.utf8.count
        guard srcCount <= Int(UInt16.max), topic.count <= Int(UInt16.max) else {
            throw JournalError("a stream name or topic longer than 65535 bytes cannot be journalled")
        }
        let length = 4 + 8 + 8 + 2 + 2 + 4 + srcCount + topic.count + body.count
        let start = buffer.count
        Self.put(UInt32(length), into: &buffer)
        Self.put(UInt32(0), into: &buffer)  // the CRC, filled in below
        Self.put(seq, into: &buffer)
        Self.put(ts.bitPattern, into: &buffer)
        Self.put(UInt16(srcCount), into: &buffer)
        Self.put(UInt16(topic.count), into: &buffer)
        Self.put(UInt32(body.count), into: &buffer)
        buffer.append(contentsOf: src.utf8)
        buffer.append(contentsOf: topic)
        buffer.append(contentsOf: body)
        buffer.withUnsafeMutableBufferPointer { bytes in
            let crc = CRC32.checksum(UnsafeBufferPointer(rebasing: bytes[(start + 8)...]))
            withUnsafeBytes(of: crc.littleEndian) { for (offset, byte) in $0.enumerated() { bytes[start + 4 + offset] = byte } }
        }
        appended += 1
        // In place: a copy of the segment would copy its table of streams on every append.
        let last = segments.count - 1
        segments[last].note(src: src, seq: seq, offset: segments[last].bytes)
        segments[last].bytes += buffer.count - start
        if segments[last].firstTs == 0 { segments[last].firstTs = ts }
        if ts > segments[last].lastTs { segments[last].lastTs = ts }
        if let range = segments[last].streams[src] {
            if seq < range.lowerBound || seq > range.upperBound { segments[last].streams[src] = min(range.lowerBound, seq)...max(range.upperBound, seq) }
        } else {
            segments[last].streams[src] = seq...seq
        }
        if segments[last].bytes >= settings.segmentBytes {
            try sync()
            try openNext()
            prune()
        } else {
            try writeOut()
        }
    }

    /// Syncs when it is due; call it from the loop (cheap when it is not). What
    /// was appended is handed to the kernel here, and its `fdatasync` runs on
    /// another thread: one can take tens of milliseconds, and the loop's next
    /// message would wait for it (reps of 9 stations came 20 ms late that way).
    /// A sync that failed is thrown by the next tick.
    public func tick() throws(JournalError) {
        let now = clock.monotonicSeconds()
        guard now >= nextSync else { return }
        nextSync = now + settings.syncIntervalS
        try writeOut()
        if let failure = syncer.takeFailure() {
            unsynced = true
            throw JournalError("journal sync failed (\(segments.last?.path ?? "")): \(failure)")
        }
        if unsynced, syncer.start(fd) { unsynced = false }
        prune()
    }

    /// Writes what is buffered and waits until the disk has it.
    public func sync() throws(JournalError) {
        try writeOut()
        guard unsynced else { return }
        unsynced = false
        guard fdatasync(fd) == 0 else {
            throw JournalError("journal sync failed (\(segments.last?.path ?? "")): \(String(cString: strerror(errno)))")
        }
    }

    /// Hands what is buffered to the kernel (no wait for the disk).
    private func writeOut() throws(JournalError) {
        guard !buffer.isEmpty else { return }
        var written = 0
        while written < buffer.count {
            let result = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if result < 0 {
                if errno == EINTR { continue }
                let reason = errno
                buffer.removeFirst(written)  // what the kernel took is not written again
                if written > 0 { unsynced = true }
                errno = reason
                throw JournalError("journal write failed (\(segments.last?.path ?? "")): \(String(cString: strerror(errno))); is the disk full?")
            }
            written += result
        }
        buffer.removeAll(keepingCapacity: true)
        unsynced = true
    }

    /// The records of stream `src` from `from` through `to` (inclusive), in
    /// seq order, at most `limit` of them. What is only buffered is handed to
    /// the kernel first, so everything appended can be read.
    public func read(src: String, from: UInt64, to: UInt64, limit: Int = .max) throws(JournalError) -> [JournalRecord] {
        try writeOut()  // the kernel has it: readable, on the disk or not yet
        var found: [JournalRecord] = []
        let wanted = Array(src.utf8)
        for position in segments.indices {
            guard let range = segments[position].streams[src], range.overlaps(from...max(from, to)) else { continue }
            let segment = segments[position]
            // A stream's records are in seq order within a file.
            if let entries = try exactIndex(position)?[src] {
                // Where each record of the range begins: read those alone.
                var low = 0, high = entries.count
                while low < high {
                    let middle = (low + high) / 2
                    if entries[middle].seq < from { low = middle + 1 } else { high = middle }
                }
                var offsets: [Int] = []
                while low < entries.count, entries[low].seq <= to, found.count + offsets.count < limit {
                    offsets.append(entries[low].offset)
                    low += 1
                }
                try Self.records(in: segment.path, at: offsets) { found.append($0) }
            } else {
                // Read from the index entry at or before `from`, and stop past `to`; other streams'
                // records are skipped unparsed.
                try Self.records(in: segment.path, from: segment.start(of: src, from: from), src: wanted) { record, _ in
                    if record.seq > to { return false }
                    if record.seq >= from { found.append(record) }
                    return found.count < limit
                }
            }
            if found.count >= limit { break }
        }
        found.sort { $0.seq < $1.seq }
        return Array(found.prefix(limit))
    }

    /// Every record's offset per stream in the file at `position`, when it is known or worth building:
    /// the file being written keeps it; a closed file's is built from its record headers if the file
    /// holds many streams (with a few, reading from the nearest index entry skips little).
    private func exactIndex(_ position: Int) throws(JournalError) -> [String: [(seq: UInt64, offset: Int)]]? {
        let segment = segments[position]
        guard settings.exactIndex else { return nil }
        if segment.exact { return segment.index }
        if let cached = exactIndexes.firstIndex(where: { $0.path == segment.path }) {
            let entry = exactIndexes.remove(at: cached)
            exactIndexes.append(entry)
            return entry.index
        }
        guard segment.streams.count >= Self.exactIndexStreams else { return nil }
        var built: [String: [(seq: UInt64, offset: Int)]] = [:]
        try Self.headers(in: segment.path, upTo: segment.bytes) { src, seq, offset in built[src, default: []].append((seq, offset)) }
        keepExactIndex(path: segment.path, built)
        return built
    }

    private func keepExactIndex(path: String, _ index: [String: [(seq: UInt64, offset: Int)]]) {
        exactIndexes.append((path, index))
        if exactIndexes.count > Self.exactIndexCache { exactIndexes.removeFirst() }
    }

    // MARK: Files

    private func openNext() throws(JournalError) {
        if fd >= 0 { close(fd) }
        if let last = segments.indices.last, segments[last].exact {
            // Closed: its exact index moves to the cache of recent files (a consumer that fell behind
            // asks for what is in them first), and the file keeps a thinned one.
            keepExactIndex(path: segments[last].path, segments[last].index)
            segments[last].thin()
        }
        var path: String
        repeat {
            index += 1
            path = settings.directory + "/" + instance + "-" + String(index) + ".journal"
        } while FileManager.default.fileExists(atPath: path)
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw JournalError("cannot create the journal file \(path): \(String(cString: strerror(errno))); check the folder is writable")
        }
        segments.append(Segment(path: path, bytes: 0, firstTs: 0, lastTs: 0, streams: [:], exact: settings.exactIndex))
    }

    /// Deletes the oldest files while the folder is over its size, or their newest record is over its age.
    private func prune() {
        let now = clock.wallSeconds()
        while segments.count > 1 {
            let oldest = segments[0]
            let overSize = totalBytes > settings.maxBytes
            let overAge = oldest.lastTs > 0 && now - oldest.lastTs > settings.maxAgeS
            guard overSize || overAge else { return }
            unlink(oldest.path)
            segments.removeFirst()
            exactIndexes.removeAll { $0.path == oldest.path }
            pruned += 1
        }
    }

    /// Reads a file's summary; a torn or corrupt tail is cut off. Nil for a file with no record.
    private func scan(_ path: String) throws(JournalError) -> Segment? {
        var segment = Segment(path: path, bytes: 0, firstTs: 0, lastTs: 0, streams: [:])
        var good = 0
        let size = try Self.records(in: path) { record, offset in
            segment.note(src: record.src, seq: record.seq, offset: offset)
            if segment.firstTs == 0 { segment.firstTs = record.ts }
            segment.lastTs = max(segment.lastTs, record.ts)
            if let range = segment.streams[record.src] {
                segment.streams[record.src] = min(range.lowerBound, record.seq)...max(range.upperBound, record.seq)
            } else {
                segment.streams[record.src] = record.seq...record.seq
            }
            good += 1
            return true
        } validBytes: {
            segment.bytes = $0
        }
        if segment.bytes < size {
            repairedBytes += size - segment.bytes
            truncate(path, off_t(segment.bytes))
        }
        guard good > 0 else {
            unlink(path)
            return nil
        }
        return segment
    }

    /// Calls `body` for each whole, checked record of the file; returns the file's size.
    @discardableResult
    /// With `src`, only that stream's records are checked and passed (the others are skipped
    /// unread: the file was checked when the journal opened, or written by this process);
    /// reading begins at byte `start`. `body` gets each record and where it begins.
    static func records(
        in path: String, from start: Int = 0, src: [UInt8]? = nil, _ body: (JournalRecord, Int) -> Bool, validBytes: (Int) -> Void = { _ in }
    ) throws(JournalError) -> Int {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) } catch {
            throw JournalError("cannot read the journal file \(path): \(error)")
        }
        var offset = start
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            while offset + 8 <= bytes.count {
                let length = Int(Self.get(UInt32.self, bytes, offset))
                let end = offset + 4 + length
                guard length >= 28, end <= bytes.count else { break }
                if let src {
                    let srcCount = Int(Self.get(UInt16.self, bytes, offset + 24))
                    guard offset + 32 + srcCount <= end else { break }
                    if !src.elementsEqual(bytes[(offset + 32)..<(offset + 32 + srcCount)]) {
                        offset = end
                        continue
                    }
                }
                guard let (record, _) = Self.record(at: offset, in: bytes) else { break }
                let begin = offset
                offset = end
                guard body(record, begin) else { break }
            }
        }
        validBytes(offset)
        return data.count
    }

    /// The checked records beginning at `offsets` of the file (each where an exact index says one
    /// begins), in that order; a record that is not whole or fails its checksum ends the reading.
    static func records(in path: String, at offsets: [Int], _ body: (JournalRecord) -> Void) throws(JournalError) {
        guard !offsets.isEmpty else { return }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) } catch {
            throw JournalError("cannot read the journal file \(path): \(error)")
        }
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            for offset in offsets {
                guard let (record, _) = Self.record(at: offset, in: bytes) else { return }
                body(record)
            }
        }
    }

    /// Each record's stream, seq and offset in the first `upTo` bytes of the file, from the record
    /// headers alone (the file was checked when the journal opened, or written by this process).
    static func headers(in path: String, upTo limit: Int, _ body: (String, UInt64, Int) -> Void) throws(JournalError) {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) } catch {
            throw JournalError("cannot read the journal file \(path): \(error)")
        }
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            let count = min(limit, bytes.count)
            var offset = 0
            while offset + 32 <= count {
                let end = offset + 4 + Int(Self.get(UInt32.self, bytes, offset))
                let srcCount = Int(Self.get(UInt16.self, bytes, offset + 24))
                guard end <= count, offset + 32 + srcCount <= end else { return }
                body(
                    String(decoding: UnsafeBufferPointer(rebasing: bytes[(offset + 32)..<(offset + 32 + srcCount)]), as: UTF8.self),
                    Self.get(UInt64.self, bytes, offset + 8), offset)
                offset = end
            }
        }
    }

    /// The whole, checked record beginning at `offset`, and where it ends; nil when it is cut short or fails its checksum.
    private static func record(at offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (JournalRecord, Int)? {
        guard offset >= 0, offset + 8 <= bytes.count else { return nil }
        let length = Int(Self.get(UInt32.self, bytes, offset))
        let end = offset + 4 + length
        guard length >= 28, end <= bytes.count else { return nil }
        let crc = Self.get(UInt32.self, bytes, offset + 4)
        guard CRC32.checksum(UnsafeBufferPointer(rebasing: bytes[(offset + 8)..<end])) == crc else { return nil }
        let seq = Self.get(UInt64.self, bytes, offset + 8)
        let ts = Double(bitPattern: Self.get(UInt64.self, bytes, offset + 16))
        let srcCount = Int(Self.get(UInt16.self, bytes, offset + 24))
        let topicCount = Int(Self.get(UInt16.self, bytes, offset + 26))
        let bodyCount = Int(Self.get(UInt32.self, bytes, offset + 28))
        let fields = offset + 32
        guard fields + srcCount + topicCount + bodyCount == end else { return nil }
        let record = JournalRecord(
            src: String(decoding: bytes[fields..<(fields + srcCount)], as: UTF8.self), seq: seq, ts: ts,
            topic: Array(bytes[(fields + srcCount)..<(fields + srcCount + topicCount)]),
            body: Array(bytes[(fields + srcCount + topicCount)..<end]))
        return (record, end)
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func get<T: FixedWidthInteger>(_: T.Type, _ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int) -> T {
        var value: T = 0
        withUnsafeMutableBytes(of: &value) {
            $0.copyMemory(from: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[offset..<(offset + MemoryLayout<T>.size)])))
        }
        return T(littleEndian: value)
    }
}

/// CRC-32 (IEEE 802.3, the polynomial zlib and PNG use; check value of
/// "123456789" 0xCBF43926), eight bytes a step with eight tables ("slicing by
/// 8", Kounavis and Berry, Intel 2005). By hand: Foundation's zlib is
/// private to it, and the tables are a few lines.
enum CRC32 {
    /// Table k at [k * 256 ..< (k + 1) * 256]: table 0 is the byte-at-a-time table.
    static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var value = UInt32(index)
            for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            tables[index] = value
        }
        for k in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(k - 1) * 256 + index]
                tables[k * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static func checksum(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        tables.withUnsafeBufferPointer { t in
            var i = 0
            let count = bytes.count
            while i + 8 <= count {
                let one = (UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24) ^ crc
                let two = UInt32(bytes[i + 4]) | UInt32(bytes[i + 5]) << 8 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 24
                crc = t[1792 + Int(one & 0xFF)] ^ t[1536 + Int((one >> 8) & 0xFF)] ^ t[1280 + Int((one >> 16) & 0xFF)] ^ t[1024 + Int(one >> 24)]
                crc ^= t[768 + Int(two & 0xFF)] ^ t[512 + Int((two >> 8) & 0xFF)] ^ t[256 + Int((two >> 16) & 0xFF)] ^ t[Int(two >> 24)]
                i += 8
            }
            while i < count {
                crc = t[Int((crc ^ UInt32(bytes[i])) & 0xFF)] ^ (crc >> 8)
                i += 1
            }
        }
        return crc ^ 0xFFFF_FFFF
    }
}

/// One `fdatasync` at a time on a thread of its own, of a duplicate of the
/// file's descriptor (the owner may close its own meanwhile: a segment ends).
final class BackgroundSync: @unchecked Sendable {
    private let queue = DispatchQueue(label: "vbt.journal.sync")
    private let lock = NSLock()
    private var pending = false
    private var failure: String?

    /// Starts syncing `fd`'s file; false when the previous sync is still running (try again later).
    func start(_ fd: Int32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !pending else { return false }
        let copy = dup(fd)
        guard copy >= 0 else {
            failure = String(cString: strerror(errno))
            return false
        }
        pending = true
        queue.async {
            let synced = fdatasync(copy) == 0
            let reason = synced ? nil : String(cString: strerror(errno))
            close(copy)
            self.lock.lock()
            self.pending = false
            if let reason { self.failure = reason }
            self.lock.unlock()
        }
        return true
    }

    /// The last failure, once.
    func takeFailure() -> String? {
        lock.lock()
        defer { lock.unlock() }
        defer { failure = nil }
        return failure
    }
}
