// Why a request to the store failed: the `kind` a failed query reply carries
// (proto/query.md, "Errors") and a message that says what to do.

/// Why the store could not do something, in words that say what to do.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of trouble: decides whether retrying can help.
    public enum Kind: String, Sendable {
        /// The disk is full: free space; the recorder keeps what it has not written and retries.
        case diskFull = "disk-full"
        /// The file or its folder cannot be written.
        case readOnly = "read-only"
        /// Another process holds the database's write lock.
        case locked
        /// The file cannot be opened (missing folder, permissions).
        case cannotOpen = "cannot-open"
        /// The database file is damaged or not a database.
        case corrupt
        /// A row broke a rule of the schema (this row only).
        case constraint
        /// A request was wrong (unknown athlete, bad plan): the caller must change it.
        case invalid
        /// Something else from SQLite.
        case other
    }

    public var kind: Kind
    public var message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) { (self.kind, self.message) = (kind, message) }

    /// Whether the same write may succeed later without anyone changing the data.
    public var isTransient: Bool { [.diskFull, .readOnly, .locked, .cannotOpen, .other].contains(kind) }

    public var description: String { message }
}
