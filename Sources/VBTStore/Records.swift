import Foundation
import VBTBus
import VBTWire

// The values queries take and return. They travel as JSON on the query
// endpoint (proto/query.md), with the same snake_case names and units in the
// names as the bus.

/// An athlete as entered.
public struct AthleteInput: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var sex: String?
    public var birthYear: Int?
    public var heightCm: Double?
    public var goalWeightKg: Double?
    /// A first weigh-in, if given.
    public var weightKg: Double?

    /// Creates an input.
    public init(id: String, name: String, sex: String? = nil, birthYear: Int? = nil, heightCm: Double? = nil, goalWeightKg: Double? = nil, weightKg: Double? = nil) {
        (self.id, self.name, self.sex, self.birthYear, self.heightCm, self.goalWeightKg, self.weightKg) = (id, name, sex, birthYear, heightCm, goalWeightKg, weightKg)
    }

    enum CodingKeys: String, CodingKey {
        case id, name, sex
        case birthYear = "birth_year"
        case heightCm = "height_cm"
        case goalWeightKg = "goal_weight_kg"
        case weightKg = "weight_kg"
    }
}

/// One body-weight measurement.
public struct WeighIn: Codable, Sendable, Equatable {
    public var ts: Double
    public var weightKg: Double
    enum CodingKeys: String, CodingKey { case ts; case weightKg = "weight_kg" }
}

/// An athlete with what is known about them.
public struct AthleteProfile: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var sex: String?
    public var birthYear: Int?
    public var heightCm: Double?
    public var goalWeightKg: Double?
    /// The latest weigh-in, kg.
    public var weightKg: Double?
    /// kg / m², from the latest weigh-in and the height.
    public var bmi: Double?
    public var weighIns: [WeighIn]
    public var sessions: Int
    public var sets: Int
    public var reps: Int

    enum CodingKeys: String, CodingKey {
        case id, name, sex, bmi, sessions, sets, reps
        case birthYear = "birth_year"
        case heightCm = "height_cm"
        case goalWeightKg = "goal_weight_kg"
        case weightKg = "weight_kg"
        case weighIns = "weigh_ins"
    }

    /// BMI = kg / m²; nil without both numbers.
    public static func bmi(weightKg: Double?, heightCm: Double?) -> Double? {
        guard let weightKg, let heightCm, heightCm > 0 else { return nil }
        let metres = heightCm / 100
        return weightKg / (metres * metres)
    }
}

/// One exercise of a plan.
public struct PlanItem: Codable, Sendable, Equatable {
    public var exercise: String
    public var sets: Int
    public var reps: Int
    public var restS: Double
    public var loadKg: Double?

    /// Creates an item.
    public init(exercise: String, sets: Int, reps: Int, restS: Double, loadKg: Double? = nil) {
        (self.exercise, self.sets, self.reps, self.restS, self.loadKg) = (exercise, sets, reps, restS, loadKg)
    }

    enum CodingKeys: String, CodingKey {
        case exercise, sets, reps
        case restS = "rest_s"
        case loadKg = "load_kg"
    }

    /// Parses `EXERCISE:SETSxREPS[@LOADkg][/RESTs]`, e.g. `squat:3x5@100kg/180s`;
    /// without a rest, `defaultRestS` is used. Errors name the expected form.
    public static func parse(_ text: String, defaultRestS: (String) -> Double?) throws(StoreError) -> PlanItem {
        let form = "expected EXERCISE:SETSxREPS[@LOADkg][/RESTs], e.g. squat:3x5@100kg/180s"
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty else { throw StoreError(.invalid, "'\(text)': \(form)") }
        var rest = parts[1]
        var restS: Double?
        if let slash = rest.firstIndex(of: "/") {
            let value = rest[rest.index(after: slash)...].lowercased().replacingOccurrences(of: "s", with: "")
            guard let seconds = Double(value) else { throw StoreError(.invalid, "'\(text)': rest '\(value)' is not a number of seconds; \(form)") }
            restS = seconds
            rest = String(rest[..<slash])
        }
        var loadKg: Double?
        if let at = rest.firstIndex(of: "@") {
            let value = rest[rest.index(after: at)...].lowercased().replacingOccurrences(of: "kg", with: "")
            guard let load = Double(value) else { throw StoreError(.invalid, "'\(text)': load '\(value)' is not a number of kg; \(form)") }
            loadKg = load
            rest = String(rest[..<at])
        }
        let counts = rest.lowercased().split(separator: "x").map { Int($0) }
        guard counts.count == 2, let sets = counts[0], let reps = counts[1] else {
            throw StoreError(.invalid, "'\(text)': sets and reps '\(rest)' must be like 3x5; \(form)")
        }
        let exercise = parts[0]
        guard let fallback = restS ?? defaultRestS(exercise) else {
            throw StoreError(.invalid, "'\(text)': unknown exercise '\(exercise)'; see vbt exercise list")
        }
        return PlanItem(exercise: exercise, sets: sets, reps: reps, restS: fallback, loadKg: loadKg)
    }
}

/// A training plan: ordered exercises.
public struct Plan: Codable, Sendable, Equatable {
    public var id: String
    public var athlete: String?
    public var items: [PlanItem]

    /// Creates a plan.
    public init(id: String, athlete: String? = nil, items: [PlanItem]) { (self.id, self.athlete, self.items) = (id, athlete, items) }
}

/// A station's current assignment, as the last `athlete.assign` or `plan.assign` command said.
public struct AssignmentRecord: Codable, Sendable, Equatable {
    public var station: String
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    public var plan: String?
    public var ts: Double
    /// The command's correlation id (who sent it can wait for exactly this one).
    public var cmdId: String?

    enum CodingKeys: String, CodingKey {
        case station, athlete, exercise, plan, ts
        case loadKg = "load_kg"
        case cmdId = "cmd_id"
    }
}

/// One set in the history.
public struct SetSummary: Codable, Sendable, Equatable {
    public var id: String
    public var session: Int64
    public var station: String
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    public var startedTs: Double
    public var endedTs: Double?
    public var reps: Int
    public var reason: String?
    public var bestMeanVelocityMps: Double?
    public var velocityLossPct: Double?

    enum CodingKeys: String, CodingKey {
        case id, session, station, athlete, exercise, reps, reason
        case loadKg = "load_kg"
        case startedTs = "started_ts"
        case endedTs = "ended_ts"
        case bestMeanVelocityMps = "best_mean_velocity_mps"
        case velocityLossPct = "velocity_loss_pct"
    }
}

/// An athlete's progress in one exercise.
public struct ExerciseProgress: Codable, Sendable, Equatable {
    /// The best mean velocity ever reached at one load.
    public struct BestAtLoad: Codable, Sendable, Equatable {
        public var loadKg: Double
        public var bestMeanVelocityMps: Double
        public var reps: Int
        enum CodingKeys: String, CodingKey {
            case reps
            case loadKg = "load_kg"
            case bestMeanVelocityMps = "best_mean_velocity_mps"
        }
    }

    /// The estimated 1RM on one day.
    public struct E1RM: Codable, Sendable, Equatable {
        /// The day, `YYYY-MM-DD` in the asker's time zone.
        public var day: String
        public var ts: Double
        public var e1rmKg: Double
        /// Fit quality of the load-velocity line behind it.
        public var r2: Double
        enum CodingKeys: String, CodingKey {
            case day, ts, r2
            case e1rmKg = "e1rm_kg"
        }
    }

    public var exercise: String
    public var bestByLoad: [BestAtLoad]
    public var e1rm: [E1RM]

    enum CodingKeys: String, CodingKey {
        case exercise, e1rm
        case bestByLoad = "best_by_load"
    }
}

/// Everything `vbt progress` shows.
public struct ProgressReport: Codable, Sendable, Equatable {
    public var athlete: String
    public var exercises: [ExerciseProgress]
    public var bodyWeight: [WeighIn]

    enum CodingKeys: String, CodingKey {
        case athlete, exercises
        case bodyWeight = "body_weight"
    }
}

/// One day of the weekly statistics.
public struct DayStats: Codable, Sendable, Equatable {
    /// `YYYY-MM-DD` in the asker's time zone.
    public var day: String
    public var sets: Int
    public var reps: Int
    /// Sum of the load of every rep, kg.
    public var volumeKg: Double
    /// Sum of the reps' concentric durations (what the sensors measure), s.
    public var timeUnderTensionS: Double

    enum CodingKeys: String, CodingKey {
        case day, sets, reps
        case volumeKg = "volume_kg"
        case timeUnderTensionS = "time_under_tension_s"
    }
}

/// The last 7 days.
public struct WeekStats: Codable, Sendable, Equatable {
    public var athlete: String?
    /// Oldest first, today last; days without training are present with zeros.
    public var days: [DayStats]
    public var totals: DayStats
    /// By number of sets (then volume); nil in an empty week.
    public var mostTrainedExercise: String?

    enum CodingKeys: String, CodingKey {
        case athlete, days, totals
        case mostTrainedExercise = "most_trained_exercise"
    }
}

/// A page of one table, for exports.
public struct TablePage: Codable, Sendable, Equatable {
    public var table: String
    public var columns: [String]
    public var rows: [[Cell]]
    /// Pass as `after` for the next page; nil on the last page.
    public var next: Int64?
}

/// One value of a row: null, integer, real or text.
public enum Cell: Codable, Sendable, Equatable {
    case null
    case int(Int64)
    case real(Double)
    case text(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Int64.self) { self = .int(value) }
        else if let value = try? container.decode(Double.self) { self = .real(value) }
        else { self = .text(try container.decode(String.self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .int(let value): try container.encode(value)
        case .real(let value): try container.encode(value)
        case .text(let value): try container.encode(value)
        }
    }

    /// The value as a CSV field (RFC 4180 quoting when needed).
    public var csv: String {
        switch self {
        case .null: return ""
        case .int(let value): return String(value)
        case .real(let value): return "\(value)"
        case .text(let value):
            guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
            return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }
    }
}

/// A stored calibration (the posture evaluator's JSON, verbatim).
public struct StoredCalibration: Codable, Sendable, Equatable {
    public var athlete: String
    public var ts: Double
    public var station: String
    public var json: String
}

/// A stored detector pattern (the detector's JSON, verbatim).
public struct StoredPattern: Codable, Sendable, Equatable {
    public var exercise: String
    public var name: String
    public var ts: Double
    public var json: String
}

/// The recorder's own state, for `vbt` and monitoring.
public struct RecorderStatus: Codable, Sendable, Equatable {
    public var database: String
    public var schema: [String]
    public var counters: IngestCounters
    /// What the recorder's bus subscriber counted (duplicates by `src`+`seq` are dropped there already).
    public var inputs: InputCounters
    public var pending: Int
    /// The last write error, while it lasts.
    public var lastError: String?
    public var rows: [String: Int]

    enum CodingKeys: String, CodingKey {
        case database, schema, counters, inputs, pending, rows
        case lastError = "last_error"
    }
}
