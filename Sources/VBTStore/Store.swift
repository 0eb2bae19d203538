import Foundation
import GRDB
import VBTQuery

/// Where the database is and how it behaves. Every default is documented.
public struct StoreSettings: Sendable, Equatable {
    /// The SQLite file. Env `VBT_DB`, default `data/vbt.sqlite` (proto/README.md, "Wire format").
    public var path = "data/vbt.sqlite"
    /// Raw readings older than this many days are deleted; 0 keeps no raw readings at all.
    public var sampleRetentionDays = 7.0
    /// How long a write waits for another process's lock before the batch is retried later, s.
    /// Short, so a locked database never stops the recorder from reading the bus.
    public var busyTimeoutS = 0.2
    /// A station's sets belong to one session until it has been idle this long, s.
    public var sessionGapS = 3_600.0
    /// Pages of write-ahead log after which a write copies the log into the database itself
    /// (`PRAGMA wal_autocheckpoint`): SQLite's 1,000 (about 4 MB) where nothing else
    /// checkpoints; the recorder, whose `WALCheckpointer` does it from a thread of its own,
    /// sets 10,000 (about 40 MB), reached only if that thread falls behind.
    public var walPagesBeforeWriterCopies = 1_000
    /// The page size of a database file this creates, bytes (`PRAGMA page_size`, a power of two
    /// from 512 to 65,536; sqlite.org/pragma.html#pragma_page_size). A file keeps the size it was
    /// created with (a `VACUUM` out of WAL mode changes it). 16 KiB, not SQLite's 4: the recorder
    /// writes some 40 MB of raw readings a second at 1,000 stations, every page twice (the log,
    /// then the file), and a page is a write each time; at 16 KiB its loop spends 15 % less a
    /// message (`vbt-bench --only recorder`), and the store's queries are as fast.
    public var pageSizeBytes = 16_384

    /// The defaults, with `VBT_DB` applied.
    public init() {
        if let path = ProcessInfo.processInfo.environment["VBT_DB"], !path.isEmpty { self.path = path }
    }
}

extension StoreError {
    /// Classifies a GRDB error, naming the file and what to do.
    public static func from(_ error: any Error, path: String) -> StoreError {
        if let error = error as? StoreError { return error }
        guard let error = error as? DatabaseError else { return StoreError(.other, "\(path): \(error)") }
        let detail = error.message ?? "\(error.resultCode)"
        switch error.resultCode {
        case .SQLITE_FULL:
            return StoreError(.diskFull, "database disk is full (\(path)): free space on that disk; unwritten messages are kept in memory and retried")
        case .SQLITE_READONLY:
            return StoreError(.readOnly, "database is read-only (\(path)): make the file and its folder writable by the recorder; writes are retried")
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return StoreError(.locked, "database is locked by another process (\(path)): end that process's transaction; writes are retried")
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            return StoreError(.cannotOpen, "cannot open the database (\(path)): check the folder exists and is writable; \(detail)")
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return StoreError(.corrupt, "the database file is damaged or not a vbt database (\(path)): restore a backup or move it away; \(detail)")
        case .SQLITE_CONSTRAINT:
            return StoreError(.constraint, "rejected by the schema: \(detail)")
        case .SQLITE_IOERR:
            // A full disk often shows as an I/O error on the WAL or journal.
            return StoreError(.diskFull, "database I/O error (\(path)): check the disk has space and is healthy; \(detail); writes are retried")
        default:
            return StoreError(.other, "database error (\(path)): \(detail)")
        }
    }
}

/// The gym's history: one SQLite file, opened in WAL mode and migrated to the current schema.
/// Owned by one thread (the recorder's loop, a CLI command, a test).
public final class TrainingStore {
    public let settings: StoreSettings
    /// The open connection; nil while the file cannot be opened (then every access tries again).
    private var queue: DatabaseQueue?
    /// Why the file could not be opened at start, when the store was allowed to open it later.
    public private(set) var openError: StoreError?

    /// Opens (creating the file and folder if needed) and migrates. With `openLater`, a
    /// passing trouble (a read-only or full disk, a lock, a missing mount) is kept in
    /// `openError` and the file opened at the first access that can; anything else
    /// (a damaged file, not a database) is thrown at once.
    public init(settings: StoreSettings, openLater: Bool = false) throws(StoreError) {
        self.settings = settings
        do {
            queue = try Self.open(settings)
        } catch {
            guard openLater, error.isTransient else { throw error }
            openError = error
        }
    }

    /// The open connection, opening the file first if it is not open yet.
    public var db: DatabaseQueue {
        get throws(StoreError) {
            if let queue { return queue }
            try reopen()
            return queue!
        }
    }

    /// Opens the database again (after a read-only or unopenable file was fixed). The old
    /// connection is closed first: SQLite shares a file's lock and WAL index between the
    /// connections of one process, so a new one would inherit the old read-only state.
    public func reopen() throws(StoreError) {
        try? queue?.close()
        queue = nil
        queue = try Self.open(settings)
        openError = nil
    }

    static func open(_ settings: StoreSettings) throws(StoreError) -> DatabaseQueue {
        do {
            let folder = URL(fileURLWithPath: settings.path).deletingLastPathComponent()
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.busyMode = .timeout(settings.busyTimeoutS)
            configuration.foreignKeysEnabled = true
            configuration.label = "vbt"
            configuration.prepareDatabase { db in
                // WAL: readers (vbt, exports, sqlite3) never block the recorder's writes.
                // Before anything is written: a new file takes it, an existing one keeps its own.
                try db.execute(sql: "PRAGMA page_size = \(settings.pageSizeBytes)")
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(settings.walPagesBeforeWriterCopies)")
            }
            let queue = try DatabaseQueue(path: settings.path, configuration: configuration)
            try Schema.migrator.migrate(queue)
            return queue
        } catch {
            throw StoreError.from(error, path: settings.path)
        }
    }

    /// Runs `body` in one write transaction, with errors classified. A file
    /// that was read-only or could not be opened is opened afresh once first:
    /// the operator may have fixed it since.
    public func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        try reopeningOnce { db in try db.write(body) }
    }

    /// Runs `access` on the database; after a read-only or open failure, reopens and tries once more.
    public func reopeningOnce<T>(_ access: (DatabaseQueue) throws -> T) throws(StoreError) -> T {
        let current = try db
        do { return try access(current) } catch {
            let failure = StoreError.from(error, path: settings.path)
            guard failure.kind == .readOnly || failure.kind == .cannotOpen else { throw failure }
            try reopen()
            do { return try access(try db) } catch { throw StoreError.from(error, path: settings.path) }
        }
    }

    /// Runs `body` for reading, with errors classified.
    public func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        let current = try db
        do { return try current.read(body) } catch { throw StoreError.from(error, path: settings.path) }
    }

    /// The migrations applied to this database, oldest first.
    public func appliedMigrations() throws(StoreError) -> [String] {
        try read { db in try Schema.migrator.appliedMigrations(db) }
    }
}
