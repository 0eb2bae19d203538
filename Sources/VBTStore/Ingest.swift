import Foundation
import GRDB
import GRDBSQLite
import Logging
import VBTBus
import VBTQuery
import VBTWire

/// Turns bus messages into rows. Messages are queued and written in batches,
/// one transaction each; a batch that fails for a passing reason (disk full,
/// read-only, locked) stays queued and is retried, so nothing the recorder
/// received is lost while the cause lasts, and nothing already stored is
/// touched (a failed transaction rolls back whole). Each message is written in
/// its own savepoint, so one row the schema refuses costs only that row.
///
/// Idempotent: per stream (`src`) the last stored `seq` is kept in `sources`,
/// and the holes below it (`seq` ranges that never arrived) in
/// `source_holes`; a message at or below the last `seq` is stored only when it
/// fills a hole (fetched from the producer's journal, or late), else it is a
/// duplicate. Reps are also unique by `rep_id`, so a rep published twice
/// (around a detector hand-over) is stored once.
public final class Ingestor {
    public let store: TrainingStore
    private let logger: Logger
    public private(set) var counters = IngestCounters()
    private var pending: [BusMessage] = []
    /// The last stored `seq` per stream, as committed.
    private var lastSeq: [String: UInt64] = [:]
    /// The holes per stream, as committed (every stream's, loaded once).
    private var holes: [String: [ClosedRange<UInt64>]] = [:]
    private var holesLoaded = false
    /// Most messages held while the database is unavailable (raw samples go first).
    /// Beyond it the oldest are dropped from memory: the stream's progress stays
    /// below them, so they become a hole or a silent tail and are fetched again
    /// from their producer's journal once the database is back. Memory stays
    /// bounded however long the disk is full.
    public var maxPending = 50_000
    /// A batch at least this big was a backlog (the disk stalled, or the loop fell behind): the
    /// queue is not kept at its size, and the recorder gives back the memory that held it.
    public static let backlogMessages = 20_000
    /// Per stream, the lowest seq dropped from memory that is not yet a hole in the database.
    private var shedFrom: [String: UInt64] = [:]
    /// Streams the last written batch touched: what the next batch's tables are sized for.
    private var lastBatchStreams = 0

    /// Types kept in the database.
    public static let keptTypes = Set(
        ([
            SampleMessage.self, RepMessage.self, SetMessage.self, RejectedMessage.self, ProfileMessage.self,
            CommandMessage.self, CalibrationMessage.self, PostureMessage.self, AlertMessage.self,
        ]
            as [any BusPayload.Type]).map { $0.type })

    /// Creates an ingestor writing to `store`.
    public init(store: TrainingStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Messages waiting to be written.
    public var pendingCount: Int { pending.count }

    /// The last seq of `src` this recorder holds, given `received` (the last it
    /// received): lower when messages were dropped from memory and not yet
    /// written, so a producer's heartbeat shows them as a tail to fetch.
    public func lastSeqHeld(_ src: String, received: UInt64?) -> UInt64? {
        guard let shed = shedFrom[src] else { return received }
        let pendingLast = pending.lazy.filter { $0.envelope.src == src }.map(\.envelope.seq).max()
        // What is still queued above the dropped ones will leave a hole below it when written.
        if let pendingLast, pendingLast > shed { return received }
        return shed - 1
    }

    /// A tail fetched for `src` is recorded: what was dropped from memory is now a hole.
    public func tailRecorded(_ src: String) { shedFrom[src] = nil }

    /// Whether messages of `type` are kept (so their streams are tracked, and their holes fetched).
    public func keeps(type: String) -> Bool {
        // Samples, nearly every message, decided without hashing their type.
        if type == SampleMessage.type { return store.settings.sampleRetentionDays > 0 }
        return Self.keptTypes.contains(type)
    }

    /// Whether the stream `src` (`<instance>/<type>.<station>`) is one this recorder keeps.
    public func keeps(src: String) -> Bool {
        guard let slash = src.firstIndex(of: "/") else { return false }
        let topic = src[src.index(after: slash)...]
        return keeps(type: String(topic.prefix { $0 != "." }))
    }

    /// Queues a message (or counts it as ignored when it is not kept).
    public func enqueue(_ message: BusMessage) {
        let type = message.envelope.type
        guard keeps(type: type) else {
            counters.ignored += 1
            return
        }
        // Only changes of posture are history; the rest of the live stream still
        // moves the stream's progress (or each change would look like a hole).
        pending.append(message)
        if pending.count > maxPending { shed() }
    }

    /// The database has been unavailable so long the queue is full: drop raw
    /// samples first (the history of reps and sets matters more), oldest first.
    private func shed() {
        let excess = pending.count - maxPending
        var dropped = 0
        pending.removeAll { message in
            guard dropped < max(excess, maxPending / 10), message.envelope.type == SampleMessage.type else { return false }
            dropped += 1
            noteShed(message)
            return true
        }
        if dropped > 0 {
            counters.droppedSamples += dropped
            logger.error(
                "database unavailable too long; oldest raw samples dropped from memory, to be fetched again from the producers' journals",
                metadata: ["dropped": "\(dropped)", "pending": "\(pending.count)"])
        }
        if pending.count > maxPending {
            let drop = pending.count - maxPending
            for message in pending.prefix(drop) { noteShed(message) }
            pending.removeFirst(drop)
            counters.droppedOther += drop
            logger.error(
                "database unavailable too long; oldest messages dropped from memory, to be fetched again from the producers' journals",
                metadata: ["dropped": "\(drop)"])
        }
    }

    private func noteShed(_ message: BusMessage) {
        let src = message.envelope.src, seq = message.envelope.seq
        shedFrom[src] = min(shedFrom[src] ?? seq, seq)
    }

    /// Writes everything queued in one transaction. On failure the queue is
    /// kept (to retry) and the classified error thrown.
    @discardableResult
    public func flush() throws(StoreError) -> Int {
        guard !pending.isEmpty else { return 0 }
        try loadHoles()
        let batch = pending
        var result = BatchResult()
        do {
            try store.reopeningOnce { queue in
                try queue.writeWithoutTransaction { db in
                    result = BatchResult()
                    // As many streams as the last batch had, most likely: the table made that size at
                    // once, not grown by doubling (each growth hashed every stream's name again).
                    result.progress.reserveCapacity(self.lastBatchStreams)
                    try db.inTransaction(.immediate) {
                        try self.apply(batch, db: db, into: &result)
                        return .commit
                    }
                }
            }
        } catch {
            counters.failedWrites += 1
            // A failure that says nothing about the disk (not full, read-only, locked, damaged) is
            // some message's fault: find it by writing one message per transaction, so one
            // bad message cannot hold the whole queue back.
            if error.kind == .constraint || error.kind == .other, batch.count > 1 { return try isolate() }
            throw error
        }
        // A backlog's queue is not kept at its size (it was a hundred thousand messages at a stall of the disk).
        pending.removeAll(keepingCapacity: batch.count < Self.backlogMessages)
        for (src, progress) in result.progress where progress.touched {
            lastSeq[src] = progress.lastSeq
            // Written above what was dropped from memory: the dropped ones are a hole now.
            if let shed = shedFrom[src], progress.lastSeq > shed { shedFrom[src] = nil }
        }
        for (src, list) in result.holes { holes[src] = list.isEmpty ? nil : list }
        lastBatchStreams = min(result.progress.count, 100_000)
        counters.recovered += result.recovered
        for (type, count) in result.stored { counters.stored[type, default: 0] += count }
        counters.sampleRows += result.sampleRows
        counters.duplicates += result.duplicates
        counters.refused += result.refused
        counters.ignored += result.ignored
        return batch.count
    }

    /// Writes the queue one message per transaction; a message that fails for a reason of
    /// its own is dropped (logged, counted refused), a disk-level failure stops and keeps the rest.
    private func isolate() throws(StoreError) -> Int {
        let all = pending
        var written = 0
        for (index, message) in all.enumerated() {
            pending = [message]
            do {
                written += try flush()
            } catch  where error.kind == .constraint || error.kind == .other {
                counters.refused += 1
                logger.error(
                    "message could not be stored; skipped",
                    metadata: ["zmq.topic": "\(message.topic)", "src": "\(message.envelope.src)", "error": "\(error.message)"])
            } catch {
                pending = Array(all[index...])
                throw error
            }
        }
        pending.removeAll(keepingCapacity: true)
        return written
    }

    struct Progress {
        var topic: String
        var lastSeq: UInt64
        var stored = 0
        var gaps = 0
        var missing = 0
        var lastTs: Double
        /// A message of the batch moved it (an entry made for a duplicate alone writes nothing).
        var touched = false
    }

    struct BatchResult {
        var progress: [String: Progress] = [:]
        /// The holes of the streams this batch touched, as they will be once it commits.
        var holes: [String: [ClosedRange<UInt64>]] = [:]
        var recovered = 0
        var stored: [String: Int] = [:]
        var sampleRows = 0
        var duplicates = 0
        var ignored = 0
        var refused = 0
    }

    private func apply(_ batch: [BusMessage], db: Database, into result: inout BatchResult) throws {
        // The batch's readings, a row per station's sensor, written after its other messages.
        var samples = SampleRows(expectedRows: lastBatchStreams)
        var storedSamples = 0
        for message in batch {
            let envelope = message.envelope
            // The stream's progress in this batch, found once and changed in place (a lookup to read
            // it, one to write it back and one for the stored seq were a third of the hashing of a
            // recorder's message; docs/decisions/0036-recorder-ingest.md).
            let slot: Dictionary<String, Progress>.Index
            let known: UInt64?
            if let found = result.progress.index(forKey: envelope.src) {
                (slot, known) = (found, result.progress.values[found].lastSeq)
            } else {
                known = try lastStoredSeq(envelope.src, db: db)
                result.progress[envelope.src] = Progress(topic: message.topic, lastSeq: known ?? 0, lastTs: envelope.ts)
                slot = result.progress.index(forKey: envelope.src)!
            }
            var fillsHole = false
            if let known, envelope.seq <= known {
                var list = result.holes[envelope.src] ?? holes[envelope.src] ?? []
                guard list.fill(envelope.seq) else {
                    result.duplicates += 1
                    continue
                }
                result.holes[envelope.src] = list
                fillsHole = true
            }
            var stored = true
            var refused = false
            if Self.isProgressOnly(message) {
                stored = false
                result.ignored += 1
            } else if envelope.type == SampleMessage.type {
                if let rows = samples.add(message) {
                    result.sampleRows += rows
                } else {
                    result.refused += 1
                    (stored, refused) = (false, true)
                    logger.error(
                        "sample message without a usable samples array; skipped", metadata: ["zmq.topic": "\(message.topic)", "src": "\(envelope.src)"])
                }
            } else {
                do {
                    try db.inSavepoint {
                        stored = try self.insert(message, db: db)
                        return .commit
                    }
                } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                    result.refused += 1
                    (stored, refused) = (false, true)
                    logger.error(
                        "message refused by the schema; skipped",
                        metadata: [
                            "zmq.topic": "\(message.topic)", "src": "\(envelope.src)", "seq": "\(envelope.seq)", "error": "\(error.message ?? "")",
                        ])
                } catch let error where !(error is DatabaseError) {
                    // The envelope was fine but the type's fields are not (a producer's bug): skip this one message.
                    result.refused += 1
                    (stored, refused) = (false, true)
                    logger.error("message fields unusable; skipped", metadata: ["zmq.topic": "\(message.topic)", "error": "\(error)"])
                }
            }
            if stored, envelope.type == SampleMessage.type {
                storedSamples += 1
            } else if stored {
                result.stored[envelope.type, default: 0] += 1
            } else if !refused, envelope.type == RepMessage.type {
                result.duplicates += 1
            }
            // Nothing was added to the dictionary since `slot` was found: it still holds.
            var progress = result.progress.values[slot]
            if fillsHole {
                result.recovered += 1
            } else {
                // What was skipped is a hole to fill (a new stream first seen late counts from 1).
                let expected = (known ?? 0) + 1
                if envelope.seq > expected {
                    if known != nil {
                        progress.gaps += 1
                        progress.missing += Int(envelope.seq - expected)
                    }
                    var list = result.holes[envelope.src] ?? holes[envelope.src] ?? []
                    list.append(expected...(envelope.seq - 1))
                    result.holes[envelope.src] = list
                }
                progress.lastSeq = envelope.seq
                progress.lastTs = envelope.ts
            }
            progress.stored += stored ? 1 : 0
            progress.touched = true
            result.progress.values[slot] = progress
        }
        if storedSamples > 0 { result.stored[SampleMessage.type, default: 0] += storedSamples }
        try samples.write(db: db)
        // Prepared once (a batch of a busy gym touches thousands of streams: preparing the
        // statement for each was a twentieth of the recorder's time).
        let upsert = try db.cachedStatement(
            sql: """
                INSERT INTO sources (src, topic, last_seq, stored, gaps, missing, last_ts) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(src) DO UPDATE SET last_seq = excluded.last_seq, stored = stored + excluded.stored,
                    gaps = gaps + excluded.gaps, missing = missing + excluded.missing, last_ts = excluded.last_ts
                """)
        // Bound through the C API, as the readings' rows are: `execute(arguments:)` made an array of
        // boxed values for every stream, a sixteenth of the recorder's loop).
        let handle = upsert.sqliteStatement
        for (src, p) in result.progress where p.touched {
            sqlite3_reset(handle)
            bindText(handle, 1, src)
            bindText(handle, 2, p.topic)
            sqlite3_bind_int64(handle, 3, Int64(p.lastSeq))
            sqlite3_bind_int64(handle, 4, Int64(p.stored))
            sqlite3_bind_int64(handle, 5, Int64(p.gaps))
            sqlite3_bind_int64(handle, 6, Int64(p.missing))
            sqlite3_bind_double(handle, 7, p.lastTs)
            try stepOnce(handle, db: db)
        }
        for (src, list) in result.holes { try Self.writeHoles(src, from: holes[src] ?? [], to: list, db: db) }
    }

    /// A command's arguments as the JSON text the `assignments` table keeps.
    static func jsonText(_ object: JSONObject) -> String {
        var writer = JSONWriter()
        writer.value(.object(object))
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// A message of a kept stream that is not history itself (a posture reading
    /// that is no change): it moves its stream's progress and nothing else.
    static func isProgressOnly(_ message: BusMessage) -> Bool {
        message.envelope.type == PostureMessage.type && message.fields["changed"] != .bool(true)
    }

    /// Changes a stream's rows of `source_holes` from `old` (as committed) to `new`: only the
    /// holes that changed are written. Rewriting a stream's every hole whenever one changed was a
    /// tenth of the recorder's time at 1,000 stations, and grew with the holes (a recorder the bus
    /// disconnected every few seconds gains a hole a stream each time).
    private static func writeHoles(_ src: String, from old: [ClosedRange<UInt64>], to new: [ClosedRange<UInt64>], db: Database) throws {
        // A hole is keyed by its stream and first seq (the table's primary key).
        var ends: [UInt64: UInt64] = [:]
        ends.reserveCapacity(new.count)
        for hole in new { ends[hole.lowerBound] = hole.upperBound }
        var kept: Set<UInt64> = []
        for hole in old {
            switch ends[hole.lowerBound] {
            case nil:
                try db.cachedStatement(sql: "DELETE FROM source_holes WHERE src = ? AND from_seq = ?").execute(arguments: [
                    src, Int64(hole.lowerBound),
                ])
            case let end? where end != hole.upperBound:
                try db.cachedStatement(sql: "UPDATE source_holes SET to_seq = ? WHERE src = ? AND from_seq = ?").execute(arguments: [
                    Int64(end), src, Int64(hole.lowerBound),
                ])
                kept.insert(hole.lowerBound)
            default:
                kept.insert(hole.lowerBound)
            }
        }
        let insert = try db.cachedStatement(sql: "INSERT INTO source_holes (src, from_seq, to_seq) VALUES (?, ?, ?)")
        for hole in new where !kept.contains(hole.lowerBound) {
            try insert.execute(arguments: [src, Int64(hole.lowerBound), Int64(hole.upperBound)])
        }
    }

    private func loadHoles() throws(StoreError) {
        guard !holesLoaded else { return }
        holes = try store.read { db in
            var loaded: [String: [ClosedRange<UInt64>]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT src, from_seq, to_seq FROM source_holes ORDER BY src, from_seq") {
                let from: Int64 = row["from_seq"], to: Int64 = row["to_seq"]
                loaded[row["src"], default: []].append(UInt64(from)...UInt64(to))
            }
            return loaded
        }
        holesLoaded = true
    }

    // MARK: Recovery

    /// Every stream's holes, as committed: what to fetch from the producers' journals.
    public func streamHoles() throws(StoreError) -> [String: [ClosedRange<UInt64>]] {
        try loadHoles()
        return holes
    }

    /// Messages of kept streams missed and still waited for: the seqs in their holes, as committed.
    /// A hole stays here while a journal may yet fill it, within the recovery's bounded wait
    /// (`HolePatience`); past it, it is given up (`giveUpHoles`) and counted lost.
    public var outstanding: Int {
        guard (try? loadHoles()) != nil else { return 0 }
        var total = 0
        for (src, list) in holes where keeps(src: src) { for hole in list { total += hole.count } }
        return total
    }

    /// The last `seq` stored for `src` (nil: a stream never stored).
    public func storedLastSeq(_ src: String) throws(StoreError) -> UInt64? {
        if let seq = lastSeq[src] { return seq }
        return try store.read { db in try self.lastStoredSeq(src, db: db) }
    }

    /// A stream whose producer said it published through `through`, of which the messages
    /// after `after` never came; `producer` (the heartbeat's station) answers for it.
    public struct Tail: Sendable {
        public var src: String
        public var topic: String
        public var after: UInt64
        public var through: UInt64
        public var ts: Double
        public var producer: String?

        public init(src: String, topic: String, after: UInt64, through: UInt64, ts: Double, producer: String? = nil) {
            (self.src, self.topic, self.after, self.through, self.ts, self.producer) = (src, topic, after, through, ts, producer)
        }
    }

    /// A stream's producer said it published through `through`, but the
    /// messages after `after` never came: they become a hole to fetch, and the
    /// stream's progress moves to `through`. Call with nothing pending (what
    /// is queued would otherwise look like a duplicate of the hole's end).
    public func addTail(src: String, topic: String, after: UInt64, through: UInt64, ts: Double) throws(StoreError) {
        try addTails([Tail(src: src, topic: topic, after: after, through: through, ts: ts)])
    }

    /// Records `tails` (`addTail`) and their producers in one transaction: a recorder the bus
    /// disconnected learns of a thousand at one heartbeat, and a transaction each (two, with
    /// the producer) was a fifth of its time at 800 stations.
    public func addTails(_ tails: [Tail]) throws(StoreError) {
        precondition(pending.isEmpty, "flush before recording a tail")
        guard !tails.isEmpty else { return }
        try loadHoles()
        // Only what lies above each stream's progress (an earlier tail of the same stream may already hold the rest).
        var added: [(tail: Tail, after: UInt64)] = []
        var updated = holes
        // Where a stream's earlier tail in this call ended (a list names each stream once, as a
        // heartbeat does; looked up, not searched, for a thousand of them).
        var reached: [String: UInt64] = [:]
        for tail in tails {
            let after = max(tail.after, try storedLastSeq(tail.src) ?? 0, reached[tail.src] ?? 0)
            reached[tail.src] = max(reached[tail.src] ?? 0, tail.through)
            guard tail.through > after else {
                added.append((tail, tail.through))  // its producer is still written
                continue
            }
            var list = updated[tail.src] ?? []
            list.append((after + 1)...tail.through)
            updated[tail.src] = list
            added.append((tail, after))
        }
        try store.write { db in
            let upsert = try db.cachedStatement(
                sql: """
                    INSERT INTO sources (src, topic, last_seq, stored, gaps, missing, last_ts) VALUES (?, ?, ?, 0, 1, ?, ?)
                    ON CONFLICT(src) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq), gaps = gaps + 1,
                        missing = missing + excluded.missing, last_ts = max(last_ts, excluded.last_ts)
                    """)
            let producer = try db.cachedStatement(sql: "UPDATE sources SET producer = ? WHERE src = ?")
            for (tail, after) in added {
                if tail.through > after {
                    try upsert.execute(arguments: [tail.src, tail.topic, Int64(tail.through), Int(tail.through - after), tail.ts])
                }
                if let name = tail.producer { try producer.execute(arguments: [name, tail.src]) }
            }
            // Each stream's holes once, as they end up (a stream named twice is written once).
            for src in Set(added.lazy.filter { $0.tail.through > $0.after }.map(\.tail.src)) {
                try Self.writeHoles(src, from: self.holes[src] ?? [], to: updated[src] ?? [], db: db)
            }
        }
        holes = updated
        for (tail, after) in added where tail.through > after { lastSeq[tail.src] = max(lastSeq[tail.src] ?? 0, tail.through) }
    }

    /// Messages of `src` no journal holds any more: counted lost, the hole closed.
    public func markLost(src: String, range: ClosedRange<UInt64>) throws(StoreError) {
        try loadHoles()
        var list: [ClosedRange<UInt64>] = []
        var lost = 0
        for hole in holes[src] ?? [] {
            guard hole.overlaps(range) else {
                list.append(hole)
                continue
            }
            lost += Int(min(hole.upperBound, range.upperBound) - max(hole.lowerBound, range.lowerBound) + 1)
            if hole.lowerBound < range.lowerBound { list.append(hole.lowerBound...(range.lowerBound - 1)) }
            if range.upperBound < hole.upperBound { list.append((range.upperBound + 1)...hole.upperBound) }
        }
        guard lost > 0 else { return }
        try store.write { db in
            try db.execute(sql: "UPDATE sources SET lost = lost + ? WHERE src = ?", arguments: [lost, src])
            try Self.writeHoles(src, from: self.holes[src] ?? [], to: list, db: db)
        }
        holes[src] = list.isEmpty ? nil : list
        counters.lost += lost
    }

    /// Gives up every hole of `sources`, in one transaction, counted lost; returns how many
    /// messages. For streams whose producer keeps no journal (its heartbeat offers none): a
    /// bus that sheds a slow recorder leaves a hole in each of a thousand stations' streams at
    /// once, and one write each would be a thousand transactions.
    public func giveUpHoles(of sources: [String]) throws(StoreError) -> Int {
        try loadHoles()
        let given = sources.compactMap { src in holes[src].map { (src: src, list: $0, lost: $0.reduce(0) { $0 + $1.count }) } }
        guard !given.isEmpty else { return 0 }
        try store.write { db in
            for (src, list, lost) in given {
                try db.execute(sql: "UPDATE sources SET lost = lost + ? WHERE src = ?", arguments: [lost, src])
                try Self.writeHoles(src, from: list, to: [], db: db)
            }
        }
        for (src, _, _) in given { holes[src] = nil }
        let total = given.reduce(0) { $0 + $1.lost }
        counters.lost += total
        return total
    }

    /// Remembers which producer (its heartbeat's station) answers for `src`.
    public func setProducer(src: String, producer: String) throws(StoreError) {
        try store.write { db in try db.execute(sql: "UPDATE sources SET producer = ? WHERE src = ?", arguments: [producer, src]) }
    }

    /// The producer remembered for each stream that has one.
    public func producers() throws(StoreError) -> [String: String] {
        try store.read { db in
            Dictionary(
                try Row.fetchAll(db, sql: "SELECT src, producer FROM sources WHERE producer IS NOT NULL").map { ($0["src"], $0["producer"]) },
                uniquingKeysWith: { first, _ in first })
        }
    }

    private func lastStoredSeq(_ src: String, db: Database) throws -> UInt64? {
        if let seq = lastSeq[src] { return seq }
        guard let seq = try Int64.fetchOne(db.cachedStatement(sql: "SELECT last_seq FROM sources WHERE src = ?"), arguments: [src]) else { return nil }
        lastSeq[src] = UInt64(seq)
        return UInt64(seq)
    }

    /// The readings of one batch of messages (a transaction), one row of `sample_batches` per
    /// station's sensor (schema `v8-sample-batches`): each reading's JSON exactly as the bridge
    /// sent it, so nothing of it is lost. The hot path of the recorder: a reading is sliced out
    /// of the received frame, never built or formatted, and only its `t` is read. A station's
    /// sensor sends some 25 messages a second, so a batch's row holds the readings of a few
    /// (a row and an index entry per message was most of the recorder's SQLite time at 1,000
    /// stations; docs/decisions/0036-recorder-ingest.md). A row's readings are in time order and within `rowSpanS` of each
    /// other: a message older than the row's latest reading (fetched again from a journal, say)
    /// or past that span starts a row of its own, so a row's `t` (retention deletes by it) is
    /// never far from any of its readings'. A lone message's array, with all its readings kept,
    /// is bound straight from the frame (no copy).
    struct SampleRows {
        /// The most seconds between the earliest and the latest reading of a row.
        static let rowSpanS = 1.0

        /// A row to write: its readings, the frames they lie in, in the order received.
        private struct Row {
            var station: String
            var sensor: String
            var parts: [(body: [UInt8], slices: [Range<Int>], whole: Range<Int>?)] = []
            var count = 0
            var earliest: Double
            var latest: Double
        }
        private struct Key: Hashable {
            var station: String
            var sensor: String
        }
        private var rows: [Row] = []
        private var index: [Key: Int] = [:]

        /// Rows for `expectedRows` stations' sensors made room for at once.
        init(expectedRows: Int = 0) {
            rows.reserveCapacity(expectedRows)
            index.reserveCapacity(expectedRows)
        }

        /// Takes a sample message's readings; returns how many are kept (a reading without a
        /// usable `t` is left out), or nil when it has no usable readings array (refused).
        mutating func add(_ message: BusMessage) -> Int? {
            // The readings' places come from the parse that checked the frame (BusMessage.deferred): no tree
            // of them is built.
            guard let sensor = message.sensor else { return nil }
            let slices: [Range<Int>]
            var whole: Range<Int>?
            if let deferred = message.deferred, deferred.key == "samples", let elements = deferred.elements {
                (slices, whole) = (elements, deferred.range)
            } else if case .array? = message.fields["samples"], let elements = RawJSON.arrayElements(message.body, key: "samples") {
                slices = elements
            } else {
                return nil
            }
            var (earliest, latest) = (Double.infinity, -Double.infinity)
            // The readings kept, once one is left out (else all of them, and no array is made).
            var some: [Range<Int>]?
            if let times = message.readingTimesOnReceipt, times.count == slices.count, times.allSatisfy(\.isFinite) {
                // Every reading has its time, read in the pass that checked the frame (frames as
                // bridges write them); else each reading is searched once, below.
                for t in times { (earliest, latest) = (min(earliest, t), max(latest, t)) }
            } else {
                for (index, slice) in slices.enumerated() {
                    // The frame was checked whole when it was received: the search stops at `t`.
                    guard case .number(let t)? = try? JSONParser.member("t", ofObjectAt: slice, in: message.body, checked: true), t.isFinite else {
                        if some == nil { some = Array(slices[..<index]) }
                        continue
                    }
                    (earliest, latest) = (min(earliest, t), max(latest, t))
                    some?.append(slice)
                }
            }
            if some != nil { whole = nil }
            let kept = some ?? slices
            guard !kept.isEmpty else { return 0 }
            let key = Key(station: message.envelope.station, sensor: sensor)
            let at: Int
            if let known = index[key], earliest >= rows[known].latest, latest - rows[known].earliest <= Self.rowSpanS {
                at = known
            } else {
                at = rows.count
                index[key] = at
                var row = Row(station: key.station, sensor: sensor, earliest: earliest, latest: latest)
                // A station's sensor sends a few messages a batch: room for them at once.
                row.parts.reserveCapacity(8)
                rows.append(row)
            }
            rows[at].parts.append((message.body, kept, whole))
            rows[at].count += kept.count
            rows[at].latest = max(rows[at].latest, latest)
            return kept.count
        }

        /// Writes the rows, numbered on from the table's last reading.
        func write(db: Database) throws {
            guard !rows.isEmpty else { return }
            var readingsEnd = try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) FROM sample_batches") ?? 0
            let statement = try db.cachedStatement(sql: "INSERT INTO sample_batches (id, station, sensor, t, n, data) VALUES (?, ?, ?, ?, ?, ?)")
            let handle = statement.sqliteStatement
            var text: [UInt8] = []
            for row in rows {
                sqlite3_reset(handle)
                sqlite3_bind_int64(handle, 1, readingsEnd + Int64(row.count))
                bindText(handle, 2, row.station)
                bindText(handle, 3, row.sensor)
                sqlite3_bind_double(handle, 4, row.latest)
                sqlite3_bind_int64(handle, 5, Int64(row.count))
                let code: Int32
                if row.parts.count == 1, let whole = row.parts[0].whole {
                    code = row.parts[0].body.withUnsafeBufferPointer { body in
                        sqlite3_bind_text(
                            handle, 6, UnsafeRawPointer(body.baseAddress! + whole.lowerBound).assumingMemoryBound(to: CChar.self),
                            Int32(whole.count), nil)  // SQLITE_STATIC: the frame outlives the step
                        return sqlite3_step(handle)
                    }
                } else {
                    // The readings of several messages, or some left out: an array of their own.
                    text.removeAll(keepingCapacity: true)
                    text.append(UInt8(ascii: "["))
                    for part in row.parts {
                        for slice in part.slices {
                            if text.count > 1 { text.append(UInt8(ascii: ",")) }
                            text.append(contentsOf: part.body[slice])
                        }
                    }
                    text.append(UInt8(ascii: "]"))
                    code = text.withUnsafeBufferPointer { bytes in
                        sqlite3_bind_text(
                            handle, 6, UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
                        return sqlite3_step(handle)
                    }
                }
                try finish(handle, code, db: db)
                readingsEnd += Int64(row.count)
            }
        }
    }

    /// A rep's own columns, from its field table (`RepMessage.fields`): a field added there is stored
    /// in its column (named in its migration) with no other change here.
    static let repColumns = RepMessage.fields.storedColumns()
    /// The rep's row: the envelope's columns, then its own; a repeated rep adds nothing.
    static let repInsert =
        "INSERT INTO reps (station, athlete, src, seq, ts, \(repColumns.compactMap(\.column).joined(separator: ", "))) VALUES (?, ?, ?, ?, ?"
        + String(repeating: ", ?", count: repColumns.count) + ") ON CONFLICT(id) DO NOTHING"

    /// Writes one non-sample message; returns false when it added nothing (a repeated rep).
    /// Its statements are prepared once (`cachedStatement`): compiled for every message, they and
    /// the savepoint around them were 16 % of the recorder's time at 400 stations, 4.5 % once
    /// prepared.
    private func insert(_ message: BusMessage, db: Database) throws -> Bool {
        let envelope = message.envelope
        let station = envelope.station
        switch envelope.type {
        case RepMessage.type:
            let rep = try message.payload(as: RepMessage.self)
            try ensureSet(id: rep.setId, station: station, athlete: envelope.athlete, exercise: rep.exercise, loadKg: rep.loadKg, ts: envelope.ts, db: db)
            var arguments: [(any DatabaseValueConvertible)?] = [station, envelope.athlete, envelope.src, Int64(envelope.seq), envelope.ts]
            for field in Self.repColumns { arguments.append(field.stored(rep).databaseValue) }
            try db.cachedStatement(sql: Self.repInsert).execute(arguments: StatementArguments(arguments))
            guard db.changesCount > 0 else { return false }
            try db.cachedStatement(sql: "UPDATE sets SET reps = max(reps, ?) WHERE id = ?").execute(arguments: [rep.index, rep.setId])
        case SetMessage.type:
            let set = try message.payload(as: SetMessage.self)
            try ensureSet(id: set.setId, station: station, athlete: envelope.athlete, exercise: set.exercise, loadKg: set.loadKg, ts: envelope.ts, db: db)
            if set.event == .end {
                try db.cachedStatement(
                    sql: """
                        UPDATE sets SET ended_ts = ?, reps = coalesce(?, reps), reason = ?, best_mean_velocity_mps = ?,
                            velocity_loss_pct = ?, exercise = coalesce(exercise, ?), load_kg = coalesce(load_kg, ?)
                        WHERE id = ?
                        """
                ).execute(
                    arguments: [
                        envelope.ts, set.reps, set.reason?.rawValue, set.bestMeanVelocityMps, set.velocityLossPct,
                        set.exercise, set.loadKg, set.setId,
                    ])
                try touchSession(ofSet: set.setId, ts: envelope.ts, db: db)
                try Self.storeReadiness(ofSet: set.setId, ts: envelope.ts, db: db)
            }
        case RejectedMessage.type:
            let rejected = try message.payload(as: RejectedMessage.self)
            try db.cachedStatement(
                sql: """
                    INSERT INTO rejected (src, seq, station, athlete, reason, detail, rom_mm, concentric_s, mean_velocity_mps, t_end, detector)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """
            ).execute(
                arguments: [
                    envelope.src, Int64(envelope.seq), station, envelope.athlete, rejected.reason, rejected.detail,
                    rejected.romMm, rejected.concentricS, rejected.meanVelocityMps, rejected.tEnd, rejected.detector,
                ])
        case ProfileMessage.type:
            let profile = try message.payload(as: ProfileMessage.self)
            try db.cachedStatement(
                sql: """
                    INSERT INTO profiles (src, seq, station, athlete, exercise, ts, intercept_mps, slope_mps_per_kg, r2, mvt_mps, e1rm_kg)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """
            ).execute(
                arguments: [
                    envelope.src, Int64(envelope.seq), station, envelope.athlete, profile.exercise, envelope.ts,
                    profile.interceptMps, profile.slopeMpsPerKg, profile.r2, profile.mvtMps, profile.e1rmKg,
                ])
        case CommandMessage.type:
            let command = try message.payload(as: CommandMessage.self)
            let athlete: String?, exercise: String?, loadKg: Double?, plan: String?
            // The whole command is kept with the assignment: a rep-detector that was down when it
            // came catches up on it from here (`assignment.get`, docs/programs/rep-detector.md).
            var args: JSONObject? = command.args
            switch command.name {
            case .athleteAssign:
                let assign = try AthleteAssign(args: command.args)
                (athlete, exercise, loadKg, plan) = (assign.athlete, assign.exercise, assign.loadKg, nil)
            case .athleteUnassign:
                // Nobody at the station from now on: an assignment of no one.
                (athlete, exercise, loadKg, plan, args) = (nil, nil, nil, nil, nil)
            case .planAssign:
                // The plan itself is the notifier's; the recorder keeps who and which plan.
                let assigned = try Plan(assignArgs: command.args)
                (athlete, exercise, loadKg, plan) = (assigned.athlete, nil, nil, assigned.id)
            case .setLoad:
                // The station's assignment with the new load: a new row, so the assignment the
                // detector would hold after the command is the latest one stored. One the
                // detector refuses changes nothing here either. A row from before v14 has no
                // command and no arguments: its athlete and exercise stand for them.
                guard let load = try? SetLoad(args: command.args).loadKg else { return false }
                let before = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT athlete, exercise, plan, args FROM assignments
                        WHERE station = ? AND (command IS NULL OR command IN ('athlete.assign', 'athlete.unassign', 'set.load'))
                        ORDER BY ts DESC, id DESC LIMIT 1
                        """,
                    arguments: [station])
                var assignArgs =
                    (before?["args"] as String?).flatMap { text -> JSONObject? in
                        guard case .object(let object)? = try? JSONParser.parse(Array(text.utf8)) else { return nil }
                        return object
                    }
                    ?? JSONObject(
                        [("athlete", before?["athlete"] as String?), ("exercise", before?["exercise"] as String?)].compactMap { key, value in
                            value.map { (key: key, value: JSONValue.string($0)) }
                        })
                assignArgs.fields.removeAll { $0.key == "load_kg" }
                assignArgs.fields.append((key: "load_kg", value: .number(load)))
                (athlete, exercise, loadKg, plan, args) = (before?["athlete"], before?["exercise"], load, before?["plan"], assignArgs)
            default:
                return false
            }
            try db.cachedStatement(
                sql: "INSERT INTO assignments (station, athlete, exercise, load_kg, plan, ts, cmd_id, command, args) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ).execute(
                arguments: [
                    // The envelope's athlete stands in for an assignment's unnamed one, not for nobody.
                    station, command.name == .athleteAssign || command.name == .planAssign ? athlete ?? envelope.athlete : athlete,
                    exercise, loadKg, plan, envelope.ts,
                    command.id, command.command, args.map(Self.jsonText),
                ])
        case CalibrationMessage.type:
            guard case .string(let json)? = message.fields["json"] else { throw PayloadError("calibration without its json field") }
            try db.cachedStatement(
                sql: "INSERT INTO calibrations (athlete, ts, station, json) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ).execute(
                arguments: [envelope.athlete ?? station, envelope.ts, station, json])
        case PostureMessage.type:
            guard case .bool(let correct)? = message.fields["correct"] else { throw PayloadError("posture without correct") }
            try db.cachedStatement(
                sql: "INSERT INTO posture_changes (src, seq, station, athlete, t, correct, bad_for_s) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ).execute(
                arguments: [
                    envelope.src, Int64(envelope.seq), station, envelope.athlete, try message.fields.number("t"), correct,
                    try message.fields.optionalNumber("bad_for_s") ?? 0,
                ])
        case AlertMessage.type:
            try db.cachedStatement(
                sql: "INSERT INTO alerts (src, seq, station, athlete, ts, json) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ).execute(
                arguments: [envelope.src, Int64(envelope.seq), station, envelope.athlete, envelope.ts, String(decoding: message.body, as: UTF8.self)])
        default:
            return false
        }
        return true
    }

    /// Creates the set (and finds or opens its session) the first time it is mentioned.
    private func ensureSet(id: String, station: String, athlete: String?, exercise: String?, loadKg: Double?, ts: Double, db: Database) throws {
        if try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM sets WHERE id = ?"), arguments: [id]) == true {
            try touchSession(ofSet: id, ts: ts, db: db)
            return
        }
        let session: Int64
        if let open = try Int64.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT id FROM sessions WHERE station = ? AND athlete IS ? AND ended_ts >= ? ORDER BY ended_ts DESC LIMIT 1
                    """), arguments: [station, athlete, ts - store.settings.sessionGapS])
        {
            session = open
            try db.cachedStatement(sql: "UPDATE sessions SET ended_ts = max(ended_ts, ?) WHERE id = ?").execute(arguments: [ts, open])
        } else {
            try db.cachedStatement(sql: "INSERT INTO sessions (station, athlete, started_ts, ended_ts) VALUES (?, ?, ?, ?)").execute(arguments: [
                station, athlete, ts, ts,
            ])
            session = db.lastInsertedRowID
        }
        try db.cachedStatement(
            sql: "INSERT INTO sets (id, session, station, athlete, exercise, load_kg, started_ts) VALUES (?, ?, ?, ?, ?, ?, ?)"
        ).execute(
            arguments: [id, session, station, athlete, exercise, loadKg, ts])
    }

    private func touchSession(ofSet id: String, ts: Double, db: Database) throws {
        try db.cachedStatement(sql: "UPDATE sessions SET ended_ts = max(ended_ts, ?) WHERE id = (SELECT session FROM sets WHERE id = ?)").execute(arguments: [
            ts, id,
        ])
    }

    /// Forgets the progress of streams silent for `silentForS` (every process start, every `vbt`
    /// command is a stream: kept forever they would grow without end, and an instance id drawn
    /// again years later would look like a repeat). Their messages stay stored; repeats are
    /// still caught by the tables' own keys (rep_id, set_id, src+seq). Returns streams forgotten.
    @discardableResult
    public func forgetSilentStreams(silentForS: Double = 7 * 86_400, now: Double = wallClockSeconds()) throws(StoreError) -> Int {
        let forgotten = try store.write { db -> Int in
            try db.execute(sql: "DELETE FROM sources WHERE last_ts < ?", arguments: [now - silentForS])
            let count = db.changesCount
            try db.execute(sql: "DELETE FROM source_holes WHERE src NOT IN (SELECT src FROM sources)")
            return count
        }
        if forgotten > 0 {
            // Reloaded from the database as streams speak again.
            lastSeq.removeAll()
            holesLoaded = false
        }
        return forgotten
    }

    /// Deletes raw readings older than the retention period (in chunks of `chunk` sample
    /// messages, so a big backlog never holds the write lock for long). Returns the sample
    /// messages (rows of `sample_batches`) deleted.
    @discardableResult
    public func pruneSamples(now: Double = wallClockSeconds(), chunk: Int = 20_000, maxChunks: Int = .max) throws(StoreError) -> Int {
        let cutoff = now - store.settings.sampleRetentionDays * 86_400
        var total = 0
        for _ in 0..<maxChunks {
            let deleted = try store.write { db -> Int in
                try db.execute(
                    sql: "DELETE FROM sample_batches WHERE id IN (SELECT id FROM sample_batches WHERE t < ? LIMIT ?)", arguments: [cutoff, chunk])
                return db.changesCount
            }
            total += deleted
            if deleted < chunk { return total }
        }
        return total
    }
}

// MARK: Readiness

extension Ingestor {
    /// Earlier sessions begun less than this before a session are not its history (a second
    /// visit the same day is already tired).
    static let readinessGapS = 8.0 * 3_600

    /// Each set's load and best rep (the set's own figure, else its fastest stored rep) of one
    /// athlete's exercise, for sessions `filter` selects, in the order they were done.
    private static func readinessSets(_ filter: String, _ arguments: StatementArguments, db: Database) throws -> [(Int64, Readiness.SetBest)] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT s.session, s.load_kg,
                    coalesce(s.best_mean_velocity_mps, (SELECT max(r.mean_velocity_mps) FROM reps r WHERE r.set_id = s.id)) AS best
                FROM sets s WHERE s.athlete = :athlete AND s.exercise = :exercise AND s.load_kg > 0 AND s.ended_ts IS NOT NULL AND \(filter)
                ORDER BY s.started_ts, s.id
                """, arguments: arguments
        ).compactMap { row in
            guard let best: Double = row["best"] else { return nil }
            return (row["session"], Readiness.SetBest(loadKg: row["load_kg"], bestMeanVelocityMps: best))
        }
    }

    /// Computes and stores the readiness of the session and exercise of a set that just ended,
    /// while it is one of the session's first `Readiness.firstSets` loaded sets of the exercise
    /// (docs/detection.md, "Readiness"); later sets leave the stored figure as it is.
    static func storeReadiness(ofSet id: String, ts: Double, db: Database) throws {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT s.session, s.athlete, s.exercise, s.load_kg, n.started_ts FROM sets s JOIN sessions n ON n.id = s.session WHERE s.id = ?
                    """, arguments: [id]),
            let athlete: String = row["athlete"], let exercise: String = row["exercise"], let load: Double = row["load_kg"], load > 0
        else { return }
        let session: Int64 = row["session"]
        let started: Double = row["started_ts"]
        let args: [String: (any DatabaseValueConvertible)?] = ["athlete": athlete, "exercise": exercise, "session": session]
        let today = try readinessSets("s.session = :session", StatementArguments(args), db: db).map(\.1)
        guard today.count <= Readiness.firstSets else { return }
        var history: [Int64: [Readiness.SetBest]] = [:]
        var order: [Int64] = []
        let earlier = try readinessSets(
            """
            s.session IN (SELECT id FROM sessions WHERE athlete = :athlete AND started_ts < :before
                          AND id IN (SELECT session FROM sets WHERE athlete = :athlete AND exercise = :exercise AND load_kg > 0)
                          ORDER BY started_ts DESC LIMIT :window)
            """, StatementArguments(args.merging(["before": started - readinessGapS, "window": Readiness.windowSessions]) { $1 }), db: db)
        for (session, set) in earlier {
            if history[session] == nil { order.append(session) }
            history[session, default: []].append(set)
        }
        let mvt =
            try Double.fetchOne(db, sql: "SELECT mvt_mps FROM exercises WHERE id = ?", arguments: [exercise])
            ?? Double.fetchOne(db, sql: "SELECT mvt_mps FROM exercises WHERE id = 'generic'") ?? 0.30
        let result = Readiness.assess(today: today, history: order.map { history[$0] ?? [] }, mvtMps: mvt)
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO readiness (session, exercise, athlete, ts, verdict, score_pct, typical_error_pct, swc_pct,
                    standard_error_pct, within_noise, sets, past_sessions, intercept_mps, slope_mps_per_kg)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                session, exercise, athlete, ts, result.verdict.rawValue, result.scorePct, result.typicalErrorPct, result.swcPct,
                result.standardErrorPct, result.withinNoise, result.sets, result.pastSessions, result.interceptMps, result.slopeMpsPerKg,
            ])
    }
}

/// Binds `text` to parameter `index` of a statement bound through the C API.
private func bindText(_ handle: SQLiteStatement, _ index: Int32, _ text: String) {
    // SQLITE_TRANSIENT: SQLite copies the text, which lives only for this call.
    sqlite3_bind_text(handle, index, text, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
}

/// Runs a statement bound through the C API, which writes and returns no row, and leaves it
/// reset with no bindings; throws SQLite's error as GRDB reports one.
private func stepOnce(_ handle: SQLiteStatement, db: Database) throws {
    try finish(handle, sqlite3_step(handle), db: db)
}

/// Leaves a statement that has been stepped (with `code`) reset with no bindings; throws
/// SQLite's error, as GRDB reports one, unless it is done.
private func finish(_ handle: SQLiteStatement, _ code: Int32, db: Database) throws {
    sqlite3_reset(handle)
    sqlite3_clear_bindings(handle)
    guard code == SQLITE_DONE else {
        throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
    }
}

extension Ingestor: RecoveryCounts {
    public var recoveredMessages: Int { counters.recovered }
    public var lostMessages: Int { counters.lost }
}

extension ColumnValue {
    /// The value as SQLite stores it.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let value): value.databaseValue
        case .real(let value): value.databaseValue
        case .text(let value): value.databaseValue
        }
    }
}
