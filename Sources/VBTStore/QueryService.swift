import Foundation
import VBTBus
import VBTQuery
import VBTWire

// The server side of the query endpoint (proto/query.md); the protocol's
// types are VBTQuery's.

/// Answers queries against a store. Pure request bytes in, reply bytes out, so
/// it is tested without sockets and served by any transport.
public struct QueryService {
    public let store: TrainingStore
    /// Supplies the recorder's live status (`status` query).
    public var status: () -> RecorderStatus?
    /// The stations heard since the recorder started (the registry is written every few seconds).
    public var sightings: StationSightings?
    /// The wall clock (a test's clock in tests).
    public var now: () -> Double

    /// Creates a service over `store`.
    public init(
        store: TrainingStore, status: @escaping () -> RecorderStatus? = { nil }, sightings: StationSightings? = nil,
        now: @escaping () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.store = store
        self.status = status
        self.sightings = sightings
        self.now = now
    }

    /// The queries there are.
    public static let queries = QueryName.allCases.map(\.rawValue)

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

    /// Who asks: anyone (plaintext on this computer, or in-process), or an
    /// authenticated peer (nil: its key was revoked since it connected).
    public enum Access {
        case anyone
        case peer(AuthorizedPeer?)
    }

    /// The queries that change what is stored; the rest only read.
    public static let writes: Set<QueryName> = [
        .athleteAdd, .athleteWeighIn, .athleteEdit, .athleteArchive, .athleteErase, .setReassign, .setAnnotate, .exerciseAdd, .planCreate, .patternPut,
        .backup, .stationAdd, .stationRename, .stationRemove,
    ]

    /// Answers one request, saying what it was (for logs with the correlation id).
    public func answer(_ request: Data, access: Access = .anyone) -> Answer {
        let decoder = JSONDecoder()
        guard let head = try? decoder.decode(QueryHead.self, from: request) else {
            let failure = QueryFailure(kind: "bad-request", message: "a request is one JSON object {\"id\": \"...\", \"query\": \"...\", \"args\": {...}}")
            return Answer(reply: reply(id: nil, failure: failure), failure: failure)
        }
        if case .peer(let peer) = access, let refusal = Self.refusal(of: head.query, by: peer) {
            let failure = QueryFailure(kind: "forbidden", message: refusal)
            return Answer(reply: reply(id: head.id, failure: failure), id: head.id, query: head.query, failure: failure)
        }
        do {
            guard let name = QueryName(rawValue: head.query), let handler = Self.handlers[name] else {
                throw StoreError(.invalid, "unknown query '\(head.query)'; known: \(Self.queries.joined(separator: ", "))")
            }
            return Answer(reply: try handler.answer(self, request, head.id), id: head.id, query: head.query)
        } catch let error as StoreError {
            let failure = QueryFailure(kind: error.kind.rawValue, message: error.message)
            return Answer(reply: reply(id: head.id, failure: failure), id: head.id, query: head.query, failure: failure)
        } catch {
            let failure = QueryFailure(kind: "other", message: "\(error)")
            return Answer(reply: reply(id: head.id, failure: failure), id: head.id, query: head.query, failure: failure)
        }
    }

    /// One query's typed handler: reads the request's arguments as the query's
    /// `Arguments`, answers, and encodes its `Result` as the reply.
    struct Handler: Sendable {
        let name: QueryName
        let answer: @Sendable (_ service: QueryService, _ request: Data, _ id: String?) throws -> Data
    }

    /// A handler whose arguments are required, or, with `omitted`, may be left out
    /// (then `omitted`; still checked strictly when given).
    static func serve<A, R>(_ query: Query<A, R>, omitted: A? = nil, _ body: @escaping @Sendable (QueryService, A) throws -> R) -> Handler {
        Handler(name: query.name) { service, request, id in
            let args: A
            do {
                if let omitted {
                    args = try JSONDecoder().decode(OptionalQueryArgs<A>.self, from: request).args ?? omitted
                } else {
                    args = try JSONDecoder().decode(QueryArgs<A>.self, from: request).args
                }
            } catch {
                throw StoreError(.invalid, "arguments of \(query.name.rawValue) do not fit: \(describeDecodingError(error)); see proto/query.md")
            }
            return service.reply(id: id, result: try body(service, args))
        }
    }

    /// A handler for a query that takes no arguments: whatever `args` holds is not read.
    static func serve<R>(_ query: Query<NoArgs, R>, _ body: @escaping @Sendable (QueryService) throws -> R) -> Handler {
        Handler(name: query.name) { service, _, id in service.reply(id: id, result: try body(service)) }
    }

    /// Every query's handler, one per `QueryName` (a test holds this): the compiler checks
    /// that each takes its query's arguments and returns its result.
    static let table: [Handler] = [
        serve(.athleteAdd) { try $0.store.addAthlete($1) },
        serve(.athleteList, omitted: AthleteListArgs()) { try $0.store.athletes(includeArchived: $1.includeArchived ?? false) },
        serve(.athleteShow) { try $0.store.athlete($1.id) },
        serve(.athleteWeighIn) { try $0.store.weighIn(athlete: $1.id, weightKg: $1.weightKg, ts: $1.ts ?? Date().timeIntervalSince1970) },
        serve(.athleteEdit) { try $0.store.editAthlete($1) },
        serve(.athleteArchive) { try $0.store.archiveAthlete($1.id, archived: $1.archived) },
        serve(.athleteErase) { try $0.store.eraseAthlete($1.id, confirm: $1.confirm) },
        serve(.setReassign) { try $0.store.reassignSet($1) },
        serve(.setAnnotate) { try $0.store.annotateSet($1) },
        serve(.exerciseList) { try $0.store.exercises() },
        serve(.exerciseShow) { try $0.store.exercise($1.id) },
        serve(.exerciseAdd) { try $0.store.addExercise($1) },
        serve(.planCreate) { try $0.store.createPlan($1) },
        serve(.planShow) { try $0.store.plan($1.id) },
        serve(.planList) { try $0.store.plans() },
        serve(.assignmentGet) { try $0.store.assignment(station: $1.station, cmdId: $1.cmdId) },
        serve(.stationList) { try $0.store.stations(now: $0.now(), sightings: $0.sightings) },
        serve(.stationAdd) { try $0.store.addStation($1, now: $0.now(), sightings: $0.sightings) },
        serve(.stationRename) { try $0.store.renameStation($1, now: $0.now(), sightings: $0.sightings) },
        serve(.stationRemove) { try $0.store.removeStation($1.name, now: $0.now(), sightings: $0.sightings) },
        serve(.calibrationGet) { try $0.store.calibration(athlete: $1.athlete) },
        serve(.patternList, omitted: ExerciseFilterArgs()) { try $0.store.patterns(exercise: $1.exercise) },
        serve(.patternPut) { service, pattern in
            try service.store.putPattern(pattern)
            return pattern
        },
        serve(.history, omitted: HistoryArgs()) {
            try $0.store.history(athlete: $1.athlete, station: $1.station, exercise: $1.exercise, limit: $1.limit ?? 20)
        },
        serve(.progress) { try $0.store.progress(athlete: $1.athlete, exercise: $1.exercise, utcOffsetS: $1.utcOffsetS ?? 0) },
        serve(.report) { try $0.store.report(athlete: $1.athlete, date: $1.date, utcOffsetS: $1.utcOffsetS ?? 0, weeks: $1.weeks ?? 8) },
        serve(.statsWeek, omitted: WeekArgs()) {
            try $0.store.weekStats(athlete: $1.athlete, now: $1.now ?? Date().timeIntervalSince1970, utcOffsetS: $1.utcOffsetS ?? 0)
        },
        serve(.exportPage) { try $0.store.page(table: $1.table, athlete: $1.athlete, after: $1.after, limit: $1.limit ?? 1000) },
        serve(.status) { service in
            guard let status = service.status() else { throw StoreError(.invalid, "status is only known by a running recorder") }
            return status
        },
        serve(.backup) { try $0.store.backup(name: $1.name) },
        serve(.readiness) {
            try $0.store.readiness(athlete: $1.athlete, exercise: $1.exercise, sinceTs: $1.sinceTs, untilTs: $1.untilTs, limit: $1.limit ?? 20)
        },
    ]

    /// The handlers by name (the first, should a name be served twice).
    static let handlers = Dictionary(table.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

    /// Why `peer` may not ask `query`, or nil when it may (proto/security.md).
    static func refusal(of query: String, by peer: AuthorizedPeer?) -> String? {
        guard let peer else { return "this key has been revoked" }
        guard peer.role.mayQuery else { return "\(peer.name) (\(peer.role)) may not use the query endpoint" }
        if let name = QueryName(rawValue: query), writes.contains(name), !peer.role.mayWriteQueries {
            return "\(peer.name) (\(peer.role)) may only read: \(query) changes what is stored (coach or service keys may)"
        }
        return nil
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

    fileprivate func reply<R: Encodable>(id: String?, result: R) -> Data {
        (try? Self.encoder.encode(Success(id: id, result: result)))
            ?? reply(id: id, failure: QueryFailure(kind: "other", message: "the result could not be encoded as JSON"))
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
