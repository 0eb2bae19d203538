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
            guard let name = QueryName(rawValue: head.query) else {
                throw StoreError(.invalid, "unknown query '\(head.query)'; known: \(Self.queries.joined(separator: ", "))")
            }
            let result: any Encodable
            switch name {
            case .athleteAdd: result = try store.addAthlete(try args(AthleteInput.self))
            case .athleteList:
                result = try store.athletes(includeArchived: try optionalArgs(AthleteListArgs.self, default: AthleteListArgs()).includeArchived ?? false)
            case .athleteEdit: result = try store.editAthlete(try args(AthleteEditArgs.self))
            case .athleteArchive:
                let a = try args(ArchiveArgs.self)
                result = try store.archiveAthlete(a.id, archived: a.archived)
            case .athleteErase:
                let a = try args(EraseArgs.self)
                result = try store.eraseAthlete(a.id, confirm: a.confirm)
            case .setReassign: result = try store.reassignSet(try args(ReassignArgs.self))
            case .setAnnotate: result = try store.annotateSet(try args(AnnotateArgs.self))
            case .exerciseAdd: result = try store.addExercise(try args(ExerciseInput.self))
            case .athleteShow: result = try store.athlete(try args(IdArgs.self).id)
            case .athleteWeighIn:
                let a = try args(WeighInArgs.self)
                result = try store.weighIn(athlete: a.id, weightKg: a.weightKg, ts: a.ts ?? Date().timeIntervalSince1970)
            case .exerciseList: result = try store.exercises()
            case .exerciseShow: result = try store.exercise(try args(IdArgs.self).id)
            case .planCreate: result = try store.createPlan(try args(Plan.self))
            case .planShow: result = try store.plan(try args(IdArgs.self).id)
            case .planList: result = try store.plans()
            case .assignmentGet:
                let a = try args(StationArgs.self)
                result = Optional(try store.assignment(station: a.station, cmdId: a.cmdId))
            case .stationList: result = try store.stations(now: now(), sightings: sightings)
            case .stationAdd: result = try store.addStation(try args(StationAddArgs.self), now: now(), sightings: sightings)
            case .stationRename: result = try store.renameStation(try args(StationRenameArgs.self), now: now(), sightings: sightings)
            case .stationRemove: result = try store.removeStation(try args(StationNameArgs.self).name, now: now(), sightings: sightings)
            case .calibrationGet: result = Optional(try store.calibration(athlete: try args(AthleteArgs.self).athlete))
            case .patternList: result = try store.patterns(exercise: try optionalArgs(ExerciseFilterArgs.self, default: ExerciseFilterArgs()).exercise)
            case .patternPut:
                let pattern = try args(StoredPattern.self)
                try store.putPattern(pattern)
                result = pattern
            case .history:
                let a = try optionalArgs(HistoryArgs.self, default: HistoryArgs())
                result = try store.history(athlete: a.athlete, station: a.station, exercise: a.exercise, limit: a.limit ?? 20)
            case .progress:
                let a = try args(ProgressArgs.self)
                result = try store.progress(athlete: a.athlete, exercise: a.exercise, utcOffsetS: a.utcOffsetS ?? 0)
            case .report:
                let a = try args(ReportArgs.self)
                result = try store.report(athlete: a.athlete, date: a.date, utcOffsetS: a.utcOffsetS ?? 0, weeks: a.weeks ?? 8)
            case .statsWeek:
                let a = try optionalArgs(WeekArgs.self, default: WeekArgs())
                result = try store.weekStats(athlete: a.athlete, now: a.now ?? Date().timeIntervalSince1970, utcOffsetS: a.utcOffsetS ?? 0)
            case .exportPage:
                let a = try args(PageArgs.self)
                result = try store.page(table: a.table, athlete: a.athlete, after: a.after, limit: a.limit ?? 1000)
            case .status:
                guard let status = status() else { throw StoreError(.invalid, "status is only known by a running recorder") }
                result = status
            case .backup: result = try store.backup(name: try args(BackupArgs.self).name)
            case .readiness:
                let a = try args(ReadinessArgs.self)
                result = try store.readiness(athlete: a.athlete, exercise: a.exercise, sinceTs: a.sinceTs, untilTs: a.untilTs, limit: a.limit ?? 20)
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
