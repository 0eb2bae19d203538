import Foundation
import Logging

/// A gym's history as the uplink reads it: rows in the order of a key that only grows (SQLite's
/// rowid: the recorder is the one writer, so a row with a higher rowid was committed no earlier).
/// Values are text (nil for NULL) as PostgreSQL reads them.
public protocol GymSource {
    /// At most `limit` rows with a rowid above `after`, in rowid order.
    func rows(of table: ChainTable, after: Int64, limit: Int) throws -> [(rowid: Int64, values: [String?])]
    /// At most `limit` rows with a rowid above `after` and at most `upTo` that `table.refresh` picks with `cutoff`.
    func refreshRows(of table: ChainTable, cutoff: Double, after: Int64, upTo: Int64, limit: Int) throws -> [(rowid: Int64, values: [String?])]
    /// How many rows have a rowid above `after`, and the time column of the first of them.
    func backlog(of table: ChainTable, after: Int64) throws -> (rows: Int, oldest: Double?)
}

/// What one cycle did and what is left.
public struct UplinkStatus: Sendable {
    /// Rows sent this cycle per table (new rows, not refreshes).
    public var sent: [String: Int] = [:]
    /// Rows sent again this cycle so the chain follows the gym's edits.
    public var refreshed = 0
    /// Rows in the gym's store not yet in the chain store.
    public var backlog = 0
    /// Seconds since the oldest row not yet in the chain store was written (0 with no backlog).
    public var lagS = 0.0
}

/// Copies one gym's rows to the chain store, exactly once in effect: each batch is one PostgreSQL
/// transaction that writes the rows (a row already there is a no-op) and moves the table's cursor,
/// so a crash at any moment leaves either both or neither, and a batch sent twice changes nothing.
/// Memory holds one batch; the gym's SQLite is the only queue.
public final class Uplink {
    public let gym: String
    let source: any GymSource
    let batch: Int
    let refreshWindowS: Double
    let logger: Logger

    public init(gym: String, source: any GymSource, batch: Int, refreshWindowS: Double, logger: Logger) {
        self.gym = gym
        self.source = source
        self.batch = batch
        self.refreshWindowS = refreshWindowS
        self.logger = logger
    }

    /// Sends everything new, table by table in `ChainTable.all`'s order, then the recent rows again;
    /// stops early when `stop` says so (between batches).
    public func cycle(_ db: PostgresConnection, now: Double, stop: () -> Bool = { false }) throws -> UplinkStatus {
        var status = UplinkStatus()
        for table in ChainTable.all {
            var sent = 0
            while !stop() {
                let count = try sendBatch(table, db)
                sent += count
                if count < batch { break }
            }
            status.sent[table.name] = sent
        }
        if !stop() { status.refreshed = try refresh(db, now: now, stop: stop) }
        (status.backlog, status.lagS) = try measure(db, now: now)
        return status
    }

    /// The backlog (rows above this gym's cursors) and the lag (seconds since the oldest of them
    /// was written, 0 with none) at `now`, without sending anything.
    public func measure(_ db: PostgresConnection, now: Double) throws -> (backlog: Int, lagS: Double) {
        let cursors = try self.cursors(db)
        var backlog = 0
        var oldest: Double?
        for table in ChainTable.all {
            let (rows, first) = try source.backlog(of: table, after: cursors[table.name] ?? 0)
            backlog += rows
            if let first { oldest = min(oldest ?? first, first) }
        }
        return (backlog, oldest.map { max(0, now - $0) } ?? 0)
    }

    /// One batch of `table`: the cursor is read and locked inside the transaction, so two uplinks
    /// of one gym at once take turns and the second sends nothing the first sent.
    func sendBatch(_ table: ChainTable, _ db: PostgresConnection) throws -> Int {
        try db.transaction {
            try db.execute("INSERT INTO cursors (gym, tbl, last_rowid) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING", [gym, table.name])
            let locked = try db.execute("SELECT last_rowid FROM cursors WHERE gym = $1 AND tbl = $2 FOR UPDATE", [gym, table.name])
            guard let text = locked.rows.first?.first ?? nil, let cursor = Int64(text) else {
                throw PostgresError("no cursor row for \(gym)/\(table.name): does this role belong to gym \(gym)?")
            }
            let rows = try source.rows(of: table, after: cursor, limit: batch)
            guard let last = rows.last?.rowid else { return 0 }
            if let apply = table.apply {
                for row in rows { try db.execute(apply, [gym] + row.values) }
            } else {
                try db.execute(table.upsert(rows: rows.count), [gym] + rows.flatMap(\.values))
            }
            try db.execute(
                "UPDATE cursors SET last_rowid = $3, updated_ts = now() WHERE gym = $1 AND tbl = $2", [gym, table.name, String(last)])
            logger.debug(
                "batch sent", metadata: ["table": "\(table.name)", "rows": "\(rows.count)", "from": "\(rows[0].rowid)", "to": "\(last)"])
            return rows.count
        }
    }

    /// Sends again the rows of changing tables that the refresh window covers, up to each table's
    /// cursor, a batch per transaction; unchanged rows write nothing.
    func refresh(_ db: PostgresConnection, now: Double, stop: () -> Bool) throws -> Int {
        let cursors = try self.cursors(db)
        var total = 0
        for table in ChainTable.all {
            if case .never = table.refresh { continue }
            let upTo = cursors[table.name] ?? 0
            var after: Int64 = 0
            while !stop() {
                let rows = try source.refreshRows(of: table, cutoff: now - refreshWindowS, after: after, upTo: upTo, limit: batch)
                guard let last = rows.last?.rowid else { break }
                _ = try db.transaction { try db.execute(table.upsert(rows: rows.count), [gym] + rows.flatMap(\.values)) }
                total += rows.count
                after = last
            }
        }
        return total
    }

    /// This gym's cursor per table.
    public func cursors(_ db: PostgresConnection) throws -> [String: Int64] {
        var cursors: [String: Int64] = [:]
        for row in try db.execute("SELECT tbl, last_rowid FROM cursors WHERE gym = $1", [gym]).rows {
            if let table = row[0], let value = row[1].flatMap({ Int64($0) }) { cursors[table] = value }
        }
        return cursors
    }
}
