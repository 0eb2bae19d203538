import GRDB
import VBTChain

/// The gym's SQLite store, read only: the uplink never writes the recorder's file, and reads
/// while the recorder writes (WAL readers do not block the writer).
final class GymStore: GymSource {
    let pool: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "vbt-uplink"
        pool = try DatabasePool(path: path, configuration: configuration)
    }

    func rows(of table: ChainTable, after: Int64, limit: Int) throws -> [(rowid: Int64, values: [String?])] {
        guard try has(table) else { return [] }
        return try fetch(table, where: "rowid > ?", [after], limit: limit)
    }

    /// False for erasures in a store a recorder older than `v15-erasure-digest` wrote (or none):
    /// they carry no digest and wait there until the recorder is upgraded. Every other table must be there.
    func has(_ table: ChainTable) throws -> Bool {
        guard table.name == "erasures" else { return true }
        return try pool.read { db in
            try db.tableExists("erasures") && db.columns(in: "erasures").contains { $0.name == "athlete_sha256" }
        }
    }

    func refreshRows(
        of table: ChainTable, cutoff: Double, after: Int64, upTo: Int64, limit: Int
    ) throws
        -> [(rowid: Int64, values: [String?])]
    {
        switch table.refresh {
        case .never: return []
        case .all: return try fetch(table, where: "rowid > ? AND rowid <= ?", [after, upTo], limit: limit)
        case .since(let condition):
            return try fetch(table, where: "rowid > ? AND rowid <= ? AND (\(condition))", [after, upTo, cutoff], limit: limit)
        }
    }

    func backlog(of table: ChainTable, after: Int64) throws -> (rows: Int, oldest: Double?) {
        guard try has(table) else { return (0, nil) }
        return try pool.read { db in
            let rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.name) WHERE rowid > ?", arguments: [after]) ?? 0
            let oldest = try Double.fetchOne(
                db, sql: "SELECT \(table.timeColumn) FROM \(table.name) WHERE rowid > ? ORDER BY rowid LIMIT 1", arguments: [after])
            return (rows, oldest)
        }
    }

    /// Rows in rowid order with their values as PostgreSQL text: integers and reals in Swift's
    /// shortest form that reads back to the same number, text as it is, NULL as nil.
    func fetch(
        _ table: ChainTable, where condition: String, _ arguments: [any DatabaseValueConvertible], limit: Int
    ) throws
        -> [(rowid: Int64, values: [String?])]
    {
        let sql = "SELECT rowid, \(table.columns.joined(separator: ", ")) FROM \(table.name) WHERE \(condition) ORDER BY rowid LIMIT \(limit)"
        return try pool.read { db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map { row in
                let rowid: Int64 = row[0]
                let values: [String?] = (1...table.columns.count).map { index in
                    let value: DatabaseValue = row[index]
                    switch value.storage {
                    case .null: return nil
                    case .int64(let value): return String(value)
                    case .double(let value): return "\(value)"
                    case .string(let value): return value
                    case .blob: return nil
                    }
                }
                return (rowid, values)
            }
        }
    }
}
