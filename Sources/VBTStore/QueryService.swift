import Foundation
import VBTBus
import VBTWire

// The request/reply protocol of the recorder's query endpoint (proto/query.md):
// a request is one JSON object {"id", "query", "args"}; the reply is
// {"id", "ok": true, "result": ...} or {"id", "ok": false, "error": {"kind", "message"}}.

/// A query's name and correlation id, read before its arguments.
struct QueryHead: Decodable {
    var id: String?
    var query: String
}

/// A query's arguments, decoded into the type the query expects.
struct QueryArgs<A: Decodable>: Decodable {
    var args: A
}

/// Arguments that may be left out entirely, but are checked strictly when given.
struct OptionalQueryArgs<A: Decodable>: Decodable {
    var args: A?
}

/// No arguments.
public struct NoArgs: Codable, Sendable { public init() {} }

/// Arguments naming one thing by id.
public struct IdArgs: Codable, Sendable {
    public var id: String
    public init(id: String) { self.id = id }
}

/// `athlete.weigh_in`.
public struct WeighInArgs: Codable, Sendable {
    public var id: String
    public var weightKg: Double
    public var ts: Double?
    public init(id: String, weightKg: Double, ts: Double? = nil) { (self.id, self.weightKg, self.ts) = (id, weightKg, ts) }
    enum CodingKeys: String, CodingKey { case id, ts; case weightKg = "weight_kg" }
}

/// `history`.
public struct HistoryArgs: Codable, Sendable {
    public var athlete: String?
    public var station: String?
    public var exercise: String?
    public var limit: Int?
    public init(athlete: String? = nil, station: String? = nil, exercise: String? = nil, limit: Int? = nil) {
        (self.athlete, self.station, self.exercise, self.limit) = (athlete, station, exercise, limit)
    }
}

/// `progress`.
public struct ProgressArgs: Codable, Sendable {
    public var athlete: String
    public var exercise: String?
    public var utcOffsetS: Int?
    public init(athlete: String, exercise: String? = nil, utcOffsetS: Int? = nil) { (self.athlete, self.exercise, self.utcOffsetS) = (athlete, exercise, utcOffsetS) }
    enum CodingKeys: String, CodingKey { case athlete, exercise; case utcOffsetS = "utc_offset_s" }
}

/// `stats.week`.
public struct WeekArgs: Codable, Sendable {
    public var athlete: String?
    public var now: Double?
    public var utcOffsetS: Int?
    public init(athlete: String? = nil, now: Double? = nil, utcOffsetS: Int? = nil) { (self.athlete, self.now, self.utcOffsetS) = (athlete, now, utcOffsetS) }
    enum CodingKeys: String, CodingKey { case athlete, now; case utcOffsetS = "utc_offset_s" }
}

/// `export.page`.
public struct PageArgs: Codable, Sendable {
    public var table: String
    public var athlete: String?
    public var after: Int64?
    public var limit: Int?
    public init(table: String, athlete: String? = nil, after: Int64? = nil, limit: Int? = nil) { (self.table, self.athlete, self.after, self.limit) = (table, athlete, after, limit) }
}

/// `assignment.get`.
public struct StationArgs: Codable, Sendable {
    public var station: String
    public init(station: String) { self.station = station }
}

/// `calibration.get`.
public struct AthleteArgs: Codable, Sendable {
    public var athlete: String
    public init(athlete: String) { self.athlete = athlete }
}

/// `pattern.list`.
public struct ExerciseFilterArgs: Codable, Sendable {
    public var exercise: String?
    public init(exercise: String? = nil) { self.exercise = exercise }
}

/// Answers queries against a store. Pure request bytes in, reply bytes out, so
/// it is tested without sockets and served by any transport.
public struct QueryService {
    public let store: TrainingStore
    /// Supplies the recorder's live status (`status` query).
    public var status: () -> RecorderStatus?

    /// Creates a service over `store`.
    public init(store: TrainingStore, status: @escaping () -> RecorderStatus? = { nil }) {
        self.store = store
        self.status = status
    }

    /// The queries there are.
    public static let queries = [
        "athlete.add", "athlete.list", "athlete.show", "athlete.weigh_in", "exercise.list", "exercise.show",
        "plan.create", "plan.show", "plan.list", "assignment.get", "calibration.get", "pattern.list", "pattern.put",
        "history", "progress", "stats.week", "export.page", "status",
    ]

    /// One answered request, for the caller's log: the reply and what it was about.
    public struct Answer {
        public var reply: Data
        /// The request's correlation id and query, when it had them.
        public var id: String?
        public var query: String?
        /// Set when the reply is an error.
        public var failure: QueryFailure?
    }

    /// Answers one request. Never throws: a bad request gets an error reply naming what to fix.
    public func handle(_ request: Data) -> Data { answer(request).reply }

    /// Answers one request, saying what it was (for logs with the correlation id).
    public func answer(_ request: Data) -> Answer {
        let decoder = JSONDecoder()
        guard let head = try? decoder.decode(QueryHead.self, from: request) else {
            let failure = QueryFailure(kind: "bad-request", message: "a request is one JSON object {\"id\": \"...\", \"query\": \"...\", \"args\": {...}}")
            return Answer(reply: reply(id: nil, failure: failure), failure: failure)
        }
        do {
            func optionalArgs<A: Decodable>(_ type: A.Type, default value: A) throws -> A {
                do { return try decoder.decode(OptionalQueryArgs<A>.self, from: request).args ?? value } catch {
                    throw StoreError(.invalid, "arguments of \(head.query) do not fit: \(describeDecodingError(error)); see proto/query.md")
                }
            }
            func args<A: Decodable>(_ type: A.Type) throws -> A {
                do { return try decoder.decode(QueryArgs<A>.self, from: request).args } catch {
                    throw StoreError(.invalid, "arguments of \(head.query) do not fit: \(describeDecodingError(error)); see proto/query.md")
                }
            }
            let result: any Encodable
            switch head.query {
            case "athlete.add": result = try store.addAthlete(try args(AthleteInput.self))
            case "athlete.list": result = try store.athletes()
            case "athlete.show": result = try store.athlete(try args(IdArgs.self).id)
            case "athlete.weigh_in":
                let a = try args(WeighInArgs.self)
                result = try store.weighIn(athlete: a.id, weightKg: a.weightKg, ts: a.ts ?? Date().timeIntervalSince1970)
            case "exercise.list": result = try store.exercises()
            case "exercise.show": result = try store.exercise(try args(IdArgs.self).id)
            case "plan.create": result = try store.createPlan(try args(Plan.self))
            case "plan.show": result = try store.plan(try args(IdArgs.self).id)
            case "plan.list": result = try store.plans()
            case "assignment.get": result = Optional(try store.assignment(station: try args(StationArgs.self).station))
            case "calibration.get": result = Optional(try store.calibration(athlete: try args(AthleteArgs.self).athlete))
            case "pattern.list": result = try store.patterns(exercise: try optionalArgs(ExerciseFilterArgs.self, default: ExerciseFilterArgs()).exercise)
            case "pattern.put":
                let pattern = try args(StoredPattern.self)
                try store.putPattern(pattern)
                result = pattern
            case "history":
                let a = try optionalArgs(HistoryArgs.self, default: HistoryArgs())
                result = try store.history(athlete: a.athlete, station: a.station, exercise: a.exercise, limit: a.limit ?? 20)
            case "progress":
                let a = try args(ProgressArgs.self)
                result = try store.progress(athlete: a.athlete, exercise: a.exercise, utcOffsetS: a.utcOffsetS ?? 0)
            case "stats.week":
                let a = try optionalArgs(WeekArgs.self, default: WeekArgs())
                result = try store.weekStats(athlete: a.athlete, now: a.now ?? Date().timeIntervalSince1970, utcOffsetS: a.utcOffsetS ?? 0)
            case "export.page":
                let a = try args(PageArgs.self)
                result = try store.page(table: a.table, athlete: a.athlete, after: a.after, limit: a.limit ?? 1000)
            case "status":
                guard let status = status() else { throw StoreError(.invalid, "status is only known by a running recorder") }
                result = status
            default:
                throw StoreError(.invalid, "unknown query '\(head.query)'; known: \(Self.queries.joined(separator: ", "))")
            }
            return Answer(reply: reply(id: head.id, result: result), id: head.id, query: head.query)
        } catch let error as StoreError {
            let failure = QueryFailure(kind: error.kind.rawValue, message: error.message)
            return Answer(reply: reply(id: head.id, failure: failure), id: head.id, query: head.query, failure: failure)
        } catch {
            let failure = QueryFailure(kind: "other", message: "\(error)")
            return Answer(reply: reply(id: head.id, failure: failure), id: head.id, query: head.query, failure: failure)
        }
    }

    private struct Success<R: Encodable>: Encodable {
        var id: String?
        var ok = true
        var result: R
    }

    private struct Failure: Encodable {
        var id: String?
        var ok = false
        var error: QueryFailure
    }

    private func reply(id: String?, result: any Encodable) -> Data {
        func encode<R: Encodable>(_ value: R) -> Data {
            (try? Self.encoder.encode(Success(id: id, result: value)))
                ?? reply(id: id, failure: QueryFailure(kind: "other", message: "the result could not be encoded as JSON"))
        }
        return encode(result)
    }

    private func reply(id: String?, failure: QueryFailure) -> Data {
        (try? Self.encoder.encode(Failure(id: id, error: failure))) ?? Data("{\"ok\":false}".utf8)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return encoder
    }()
}
