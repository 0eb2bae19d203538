import Foundation

// The request/reply protocol of the recorder's query endpoint (proto/query.md):
// a request is one JSON object {"id", "query", "args"}; the reply is
// {"id", "ok": true, "result": ...} or {"id", "ok": false, "error": {"kind", "message"}}.

/// The queries there are (proto/query.md), by the name a request carries.
public enum QueryName: String, Sendable, CaseIterable {
    case athleteAdd = "athlete.add"
    case athleteList = "athlete.list"
    case athleteShow = "athlete.show"
    case athleteWeighIn = "athlete.weigh_in"
    case athleteEdit = "athlete.edit"
    case athleteArchive = "athlete.archive"
    case athleteErase = "athlete.erase"
    case setReassign = "set.reassign"
    case setAnnotate = "set.annotate"
    case exerciseList = "exercise.list"
    case exerciseShow = "exercise.show"
    case exerciseAdd = "exercise.add"
    case planCreate = "plan.create"
    case planShow = "plan.show"
    case planList = "plan.list"
    case assignmentGet = "assignment.get"
    case stationList = "station.list"
    case stationAdd = "station.add"
    case stationRename = "station.rename"
    case stationRemove = "station.remove"
    case calibrationGet = "calibration.get"
    case patternList = "pattern.list"
    case patternPut = "pattern.put"
    case history
    case progress
    case report
    case statsWeek = "stats.week"
    case exportPage = "export.page"
    case status
    case backup
    case readiness
}

/// A query's name and correlation id, read before its arguments.
package struct QueryHead: Decodable {
    package var id: String?
    package var query: String
}

/// A query's arguments, decoded into the type the query expects.
package struct QueryArgs<A: Decodable>: Decodable {
    package var args: A
}

/// Arguments that may be left out entirely, but are checked strictly when given.
package struct OptionalQueryArgs<A: Decodable>: Decodable {
    package var args: A?
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
    public init(athlete: String, exercise: String? = nil, utcOffsetS: Int? = nil) {
        (self.athlete, self.exercise, self.utcOffsetS) = (athlete, exercise, utcOffsetS)
    }
    enum CodingKeys: String, CodingKey { case athlete, exercise; case utcOffsetS = "utc_offset_s" }
}

/// `report`: one athlete's local day (`date` `YYYY-MM-DD`; nil: the day of their latest set)
/// and the weeks of e1RM trend before it (default 8).
public struct ReportArgs: Codable, Sendable {
    public var athlete: String
    public var date: String?
    public var utcOffsetS: Int?
    public var weeks: Int?
    public init(athlete: String, date: String? = nil, utcOffsetS: Int? = nil, weeks: Int? = nil) {
        (self.athlete, self.date, self.utcOffsetS, self.weeks) = (athlete, date, utcOffsetS, weeks)
    }
    enum CodingKeys: String, CodingKey { case athlete, date, weeks; case utcOffsetS = "utc_offset_s" }
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
    public init(table: String, athlete: String? = nil, after: Int64? = nil, limit: Int? = nil) {
        (self.table, self.athlete, self.after, self.limit) = (table, athlete, after, limit)
    }
}

/// `assignment.get`.
public struct StationArgs: Codable, Sendable {
    public var station: String
    /// `assignment.get` only: the assignment made by this command, rather than the latest.
    public var cmdId: String?
    public init(station: String, cmdId: String? = nil) { (self.station, self.cmdId) = (station, cmdId) }
    enum CodingKeys: String, CodingKey { case station; case cmdId = "cmd_id" }
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

/// `backup`'s argument: the backup file's name in the recorder's backup folder.
public struct BackupArgs: Codable, Sendable {
    public var name: String
    public init(name: String) { self.name = name }
}

/// What `backup` made: where, how big, checked, and what it holds.
public struct BackupResult: Codable, Sendable, Equatable {
    /// The file on the recorder's computer.
    public var path: String
    public var bytes: Int
    /// `PRAGMA integrity_check` of the copy: "ok".
    public var integrity: String
    /// Rows per table in the copy (as `status`'s `rows`).
    public var rows: [String: Int]
    /// When the copy was taken (UTC seconds): it holds everything stored before.
    public var ts: Double

    public init(path: String, bytes: Int, integrity: String, rows: [String: Int], ts: Double) {
        (self.path, self.bytes, self.integrity, self.rows, self.ts) = (path, bytes, integrity, rows, ts)
    }
}

/// `athlete.edit`: the fields to change; `clear` names the optional ones to empty
/// (`sex`, `birth_year`, `height_cm`, `goal_weight_kg`).
public struct AthleteEditArgs: Codable, Sendable {
    public var id: String
    public var name: String?
    public var sex: String?
    public var birthYear: Int?
    public var heightCm: Double?
    public var goalWeightKg: Double?
    public var clear: [String]?

    public init(
        id: String, name: String? = nil, sex: String? = nil, birthYear: Int? = nil, heightCm: Double? = nil, goalWeightKg: Double? = nil,
        clear: [String]? = nil
    ) {
        (self.id, self.name, self.sex, self.birthYear, self.heightCm, self.goalWeightKg, self.clear) = (
            id, name, sex, birthYear, heightCm, goalWeightKg, clear
        )
    }

    enum CodingKeys: String, CodingKey {
        case id, name, sex, clear
        case birthYear = "birth_year"
        case heightCm = "height_cm"
        case goalWeightKg = "goal_weight_kg"
    }
}

/// `athlete.archive`: archived (hidden from `athlete.list` unless asked for) or back.
public struct ArchiveArgs: Codable, Sendable {
    public var id: String
    public var archived: Bool
    public init(id: String, archived: Bool) { (self.id, self.archived) = (id, archived) }
}

/// `athlete.list`'s optional argument.
public struct AthleteListArgs: Codable, Sendable {
    public var includeArchived: Bool?
    public init(includeArchived: Bool? = nil) { self.includeArchived = includeArchived }
    enum CodingKeys: String, CodingKey { case includeArchived = "include_archived" }
}

/// `athlete.erase`: `confirm` must repeat the id (an erasure cannot be undone).
public struct EraseArgs: Codable, Sendable {
    public var id: String
    public var confirm: String
    public init(id: String, confirm: String) { (self.id, self.confirm) = (id, confirm) }
}

/// What an erasure did: the pseudonym the training history now carries, and the rows changed per table.
public struct EraseResult: Codable, Sendable, Equatable {
    public var pseudonym: String
    public var rows: [String: Int]
    public init(pseudonym: String, rows: [String: Int]) { (self.pseudonym, self.rows) = (pseudonym, rows) }
}

/// `set.reassign`: the set (and its reps) attributed to another athlete, exercise or load.
public struct ReassignArgs: Codable, Sendable {
    public var set: String
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    public init(set: String, athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil) {
        (self.set, self.athlete, self.exercise, self.loadKg) = (set, athlete, exercise, loadKg)
    }
    enum CodingKeys: String, CodingKey {
        case set, athlete, exercise
        case loadKg = "load_kg"
    }
}

/// `readiness`: one athlete's stored readiness, newest first, optionally of one exercise and of
/// sessions begun in [since_ts, until_ts) (Unix seconds).
public struct ReadinessArgs: Codable, Sendable {
    public var athlete: String
    public var exercise: String?
    public var sinceTs: Double?
    public var untilTs: Double?
    public var limit: Int?
    public init(athlete: String, exercise: String? = nil, sinceTs: Double? = nil, untilTs: Double? = nil, limit: Int? = nil) {
        (self.athlete, self.exercise, self.sinceTs, self.untilTs, self.limit) = (athlete, exercise, sinceTs, untilTs, limit)
    }
    enum CodingKeys: String, CodingKey {
        case athlete, exercise, limit
        case sinceTs = "since_ts"
        case untilTs = "until_ts"
    }
}

/// One session's readiness in one exercise as the recorder stored it (docs/detection.md, "Readiness").
public struct SessionReadiness: Codable, Sendable, Equatable {
    public var session: Int64
    public var exercise: String
    public var athlete: String
    /// When the session began, and when the figure was computed (the end of the last set it read).
    public var sessionStartedTs: Double
    public var ts: Double
    public var assessment: ReadinessAssessment
    /// As every place shows it: `96 % (as usual)`.
    public var text: String

    public init(session: Int64, exercise: String, athlete: String, sessionStartedTs: Double, ts: Double, assessment: ReadinessAssessment) {
        (self.session, self.exercise, self.athlete, self.sessionStartedTs, self.ts) = (session, exercise, athlete, sessionStartedTs, ts)
        (self.assessment, self.text) = (assessment, assessment.text)
    }

    enum CodingKeys: String, CodingKey {
        case session, exercise, athlete, ts, assessment, text
        case sessionStartedTs = "session_started_ts"
    }
}
