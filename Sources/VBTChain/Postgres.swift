import CPostgres
import Foundation

/// What went wrong talking to PostgreSQL: libpq's message, and the SQLSTATE when the server sent one.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The five-character SQLSTATE (e.g. 42501, insufficient privilege), nil for a connection error.
    public let sqlState: String?
    /// True when trying again cannot help (a schema this build does not write, the wrong role):
    /// an uplink stops instead of retrying.
    public let isPermanent: Bool

    public init(_ description: String, sqlState: String? = nil, permanent: Bool = false) {
        self.description = description
        self.sqlState = sqlState
        self.isPermanent = permanent
    }
}

/// Where the chain store is and how this side proves who it is. TLS is always verify-full: the
/// server's certificate must chain to `sslRootCert` and name `host`; a Unix-socket host (a path)
/// is this computer only, where libpq uses no TLS.
public struct ChainEndpoint: Sendable {
    public var url: String?
    public var host: String?
    public var port: Int?
    public var dbname: String?
    public var user: String?
    public var sslRootCert: String?
    public var sslCert: String?
    public var sslKey: String?
    public var applicationName = "vbt"
    public var connectTimeoutS = 10
    /// Seconds after which a connection whose packets go unanswered (a link that drops them, as a
    /// dead Wi-Fi does, rather than refusing) fails instead of waiting for TCP's own timeout
    /// (about 15 minutes): tcp_user_timeout for unacknowledged data, keepalives for a connection
    /// waiting on an answer. 0 leaves both to the system. Unix sockets ignore them.
    public var deadLinkS = 15

    public init() {}

    /// libpq's keywords and values, in the order libpq applies them: the URL first (expanded),
    /// then each option given, then sslmode=verify-full last so nothing can weaken it.
    func parameters() throws -> [(String, String)] {
        var pairs: [(String, String)] = []
        if let url {
            try Self.refuseWeakSSL(in: url)
            pairs.append(("dbname", url))
        }
        if let host { pairs.append(("host", host)) }
        if let port { pairs.append(("port", String(port))) }
        if let dbname { pairs.append(("dbname", dbname)) }
        if let user { pairs.append(("user", user)) }
        if let sslRootCert { pairs.append(("sslrootcert", sslRootCert)) }
        if let sslCert { pairs.append(("sslcert", sslCert)) }
        if let sslKey { pairs.append(("sslkey", sslKey)) }
        pairs.append(("application_name", applicationName))
        pairs.append(("connect_timeout", String(connectTimeoutS)))
        pairs += deadLinkParameters()
        pairs.append(("sslmode", "verify-full"))
        return pairs
    }

    /// Keepalive probes start after a third of `deadLinkS` idle and four unanswered ones (a sixth
    /// apart) end the connection, so probing also ends within the bound; sent data unacknowledged
    /// for `deadLinkS` ends it too. After the URL, so a URL cannot lengthen the bound.
    func deadLinkParameters() -> [(String, String)] {
        guard deadLinkS > 0 else { return [] }
        return [
            ("keepalives", "1"), ("keepalives_idle", String(max(1, deadLinkS / 3))),
            ("keepalives_interval", String(max(1, deadLinkS / 6))), ("keepalives_count", "4"),
            ("tcp_user_timeout", String(deadLinkS * 1_000)),
        ]
    }

    /// A URL that asks for any sslmode but verify-full is refused rather than silently overridden.
    static func refuseWeakSSL(in url: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            let message = error.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "unreadable"
            if let error { PQfreemem(error) }
            throw PostgresError("--chain-url: \(message)")
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "sslmode", let value = option.pointee.val {
                let mode = String(cString: value)
                guard mode == "verify-full" else {
                    throw PostgresError("--chain-url asks for sslmode=\(mode); the chain takes verify-full only (drop sslmode from the URL)")
                }
            }
            option += 1
        }
    }
}

/// One connection to PostgreSQL through libpq, used by one thread at a time.
public final class PostgresConnection {
    private let connection: OpaquePointer

    /// Connects, or throws libpq's reason (an unverifiable certificate, a refused role, a port nobody answers).
    public init(_ endpoint: ChainEndpoint) throws {
        let pairs = try endpoint.parameters()
        let keywords = pairs.map { strdup($0.0) } + [nil]
        let values = pairs.map { strdup($0.1) } + [nil]
        defer { for pointer in keywords + values { free(pointer) } }
        let made = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keys in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { vals in
                PQconnectdbParams(keys.baseAddress, vals.baseAddress, 1)
            }
        }
        guard let made else { throw PostgresError("libpq could not allocate a connection") }
        guard PQstatus(made) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(made)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(made)
            throw PostgresError(message)
        }
        connection = made
    }

    deinit { PQfinish(connection) }

    /// Whether this connection runs over TLS (false only on a Unix socket).
    public var usesTLS: Bool { PQsslInUse(connection) == 1 }

    /// The server's version as libpq reports it, e.g. 150018.
    public var serverVersion: Int { Int(PQserverVersion(connection)) }

    /// Runs one statement with text parameters ($1, $2, ...; nil is NULL), or without parameters a
    /// script of several; returns the rows (text values, nil for NULL) and the rows it changed.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws -> (rows: [[String?]], changed: Int) {
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(connection, sql)
        } else {
            let copies = parameters.map { $0.map { strdup($0) } ?? nil }
            defer { for pointer in copies { free(pointer) } }
            result = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                PQexecParams(connection, sql, Int32(values.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        guard let result else { throw PostgresError(String(cString: PQerrorMessage(connection))) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(message.isEmpty ? "the connection to the chain store broke" : message, sqlState: state)
        }
        var rows: [[String?]] = []
        let count = PQntuples(result), fields = PQnfields(result)
        rows.reserveCapacity(Int(count))
        for row in 0..<count {
            rows.append(
                (0..<fields).map { field in
                    PQgetisnull(result, row, field) == 1 ? nil : String(cString: PQgetvalue(result, row, field))
                })
        }
        return (rows, Int(String(cString: PQcmdTuples(result))) ?? 0)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }
}
