import Foundation
import VBTBus

// The client side of the session-recorder's query endpoint (proto/query.md):
// any program can ask without linking the store.

/// Asks the session-recorder over its query endpoint. Owned by one thread.
///
/// A DEALER socket with a deadline per request: a recorder that is down or
/// busy gives a clear error after `timeoutS`, never a hang.
public final class QueryClient {
    private let link: any FrameLink
    private let clock: any BusClock
    private let endpoint: String
    private let timeoutS: Double
    private var counter = 0
    private let prefix = "q-\(String(UInt32.random(in: .min ... .max), radix: 16))"

    /// Connects to `config.queryEndpoint` (nothing is sent yet).
    public convenience init(context: ZMQContext, config: BusConfig, timeoutS: Double = 5) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), endpoint: config.queryEndpoint, timeoutS: timeoutS)
    }

    /// Connects on `transport`; `endpoint` names it in errors.
    public init(transport: any BusTransport, endpoint: String, timeoutS: Double = 5) throws(ZMQError) {
        link = try transport.queryClientLink()
        clock = transport.clock
        self.endpoint = endpoint
        self.timeoutS = timeoutS
    }

    /// Sends `query` with `args` and decodes its result.
    public func ask<A, R>(_ query: Query<A, R>, _ args: A) throws -> R {
        try Self.decode(try askRaw(query, args), of: query)
    }

    /// A reply to `query` as its result, or the recorder's refusal as a `QueryError`.
    public static func decode<A, R>(_ data: Data, of query: Query<A, R>) throws -> R {
        let name = query.name.rawValue
        let decoded: QueryReply<R>
        do { decoded = try JSONDecoder().decode(QueryReply<R>.self, from: data) } catch {
            throw QueryError(kind: "bad-reply", message: "the recorder's reply to \(name) did not fit: \(describeDecodingError(error))")
        }
        guard decoded.ok else {
            throw QueryError(kind: decoded.error?.kind ?? "other", message: decoded.error?.message ?? "the recorder refused \(name)")
        }
        if let result = decoded.result { return result }
        throw QueryError(kind: "bad-reply", message: "the recorder's reply to \(name) had no result")
    }

    /// Sends a request without waiting; its reply comes from `nextReply`, which the
    /// caller reads (a reply left unread stays queued on the socket). Returns the
    /// request's id. For a program whose loop must never wait on another process
    /// (the rep-detector, the posture evaluator).
    public func request<A, R>(_ query: Query<A, R>, _ args: A) throws -> String {
        counter += 1
        let id = "\(prefix)-\(counter)"
        let body = try JSONEncoder().encode(QueryRequest(id: id, query: query.name.rawValue, args: args))
        guard try link.send([[], Array(body)], dontWait: true) else {
            throw QueryError(kind: "busy", message: "could not queue \(query.name.rawValue) for the session-recorder at \(endpoint)")
        }
        return id
    }

    /// A reply that has arrived, with the id of its request; nil when none
    /// has (never waits). Replies without an id are skipped.
    public func nextReply() throws -> (id: String, data: Data)? {
        while let reply = try link.receive(timeoutMs: 0, maxFrames: 3), let frame = reply.frames.last {
            let data = Data(frame)
            if let head = try? JSONDecoder().decode(ReplyHead.self, from: data), let id = head.id { return (id, data) }
        }
        return nil
    }

    /// Sends one request and returns the reply's bytes (for a caller that keeps them,
    /// as the console's cache does; `decode` reads them).
    public func askRaw<A, R>(_ query: Query<A, R>, _ args: A) throws -> Data {
        counter += 1
        let id = "\(prefix)-\(counter)"
        let body = try JSONEncoder().encode(QueryRequest(id: id, query: query.name.rawValue, args: args))
        try link.send([[], Array(body)], dontWait: false)
        let deadline = clock.monotonicSeconds() + timeoutS
        while true {
            let remaining = deadline - clock.monotonicSeconds()
            let reply = remaining > 0 ? try link.receive(timeoutMs: Int32(remaining * 1000) + 1, maxFrames: 3) : nil
            guard let reply, let frame = reply.frames.last else {
                // A link that does not wait has nothing more to give.
                if remaining > 0 && link.waits { continue }
                throw QueryError(
                    kind: "timeout",
                    message: "no answer from session-recorder at \(endpoint) within \(Int(timeoutS)) s: is it running? (VBT_QUERY_ENDPOINT, --query-endpoint)")
            }
            // Replies to an earlier request that timed out are skipped by id.
            if let head = try? JSONDecoder().decode(ReplyHead.self, from: Data(frame)), head.id != nil, head.id != id { continue }
            return Data(frame)
        }
    }
}

/// A query that failed: the recorder's reason, or why it could not be asked.
public struct QueryError: Error, Sendable, CustomStringConvertible {
    public var kind: String
    public var message: String
    public var description: String { message }
    /// Creates an error.
    public init(kind: String, message: String) { (self.kind, self.message) = (kind, message) }
}

struct QueryRequest<B: Encodable>: Encodable {
    var id: String
    var query: String
    var args: B
}

struct QueryReply<R: Decodable>: Decodable {
    var ok: Bool
    var result: R?
    var error: QueryFailure?

    enum CodingKeys: String, CodingKey { case ok, result, error }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ok = try container.decode(Bool.self, forKey: .ok)
        // Decoded as R itself when present: a `null` result then fits an optional R (as .some(nil)).
        result = container.contains(.result) ? try container.decode(R.self, forKey: .result) : nil
        error = try container.decodeIfPresent(QueryFailure.self, forKey: .error)
    }
}

struct ReplyHead: Decodable { var id: String? }

/// A reply's error.
public struct QueryFailure: Codable, Sendable, Equatable {
    public var kind: String
    public var message: String
    /// Creates a failure.
    public init(kind: String, message: String) { (self.kind, self.message) = (kind, message) }
}

/// A decoding error in one line: which field, what was wrong.
public func describeDecodingError(_ error: any Error) -> String {
    guard let error = error as? DecodingError else { return "\(error)" }
    func path(_ context: DecodingError.Context) -> String {
        context.codingPath.map(\.stringValue).filter { $0 != "args" }.joined(separator: ".")
    }
    switch error {
    case .keyNotFound(let key, let context): return "missing \(([path(context)] + [key.stringValue]).filter { !$0.isEmpty }.joined(separator: "."))"
    case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)) has the wrong type"
    case .dataCorrupted(let context): return "\(path(context)): \(context.debugDescription)"
    @unknown default: return "\(error)"
    }
}
