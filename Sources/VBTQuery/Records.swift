import Foundation
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
    public init(
        id: String, name: String, sex: String? = nil, birthYear: Int? = nil, heightCm: Double? = nil, goalWeightKg: Double? = nil, weightKg: Double? = nil
    ) {
        (self.id, self.name, self.sex, self.birthYear, self.heightCm, self.goalWeightKg, self.weightKg) = (
            id, name, sex, birthYear, heightCm, goalWeightKg, weightKg
        )
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

    /// Creates a value.
    public init(ts: Double, weightKg: Double) {
        self.ts = ts
        self.weightKg = weightKg
    }
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
    /// When the athlete was archived (hidden from lists, history kept); nil while active.
    public var archivedTs: Double?

    enum CodingKeys: String, CodingKey {
        case id, name, sex, bmi, sessions, sets, reps
        case archivedTs = "archived_ts"
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

    /// Creates a value.
    public init(
        id: String, name: String, sex: String? = nil, birthYear: Int? = nil, heightCm: Double? = nil, goalWeightKg: Double? = nil, weightKg: Double? = nil,
        bmi: Double? = nil, weighIns: [WeighIn], sessions: Int, sets: Int, reps: Int, archivedTs: Double? = nil
    ) {
        self.archivedTs = archivedTs
        self.id = id
        self.name = name
        self.sex = sex
        self.birthYear = birthYear
        self.heightCm = heightCm
        self.goalWeightKg = goalWeightKg
        self.weightKg = weightKg
        self.bmi = bmi
        self.weighIns = weighIns
        self.sessions = sessions
        self.sets = sets
        self.reps = reps
    }
}

extension PlanItem {
    /// One pound in kilograms, exactly (the international pound of 1959).
    public static let kgPerLb = 0.45359237

    /// Parses `EXERCISE:SETSxREPS[@LOAD][~TARGETmps][/RESTs]`, e.g. `squat:3x5@100kg/180s`. LOAD is
    /// `100kg`, `225lb`, `80%` (of the athlete's e1RM, resolved when the plan starts), or one load
    /// per set (`60,62.5,65kg`, as many as the sets); a bare number is in `unit` (`kg` or `lb`).
    /// `~0.75mps` (or `@0.75mps` alone) is a mean-velocity target per rep; a zone `~0.70-0.80mps`
    /// aims at its middle. A trailing `!auto` applies the notifier's load advice without asking.
    /// `:3-1-X-0` after the rest (or the load) prescribes each rep's tempo (`Tempo`).
    /// Without a rest, `defaultRestS` is used. Errors name the expected form.
    public static func parse(_ text: String, unit: String = "kg", defaultRestS: (String) -> Double?) throws(StoreError) -> PlanItem {
        let form =
            "expected EXERCISE:SETSxREPS[@LOAD][~TARGETmps][/RESTs][:TEMPO][!auto] with LOAD 100kg, 225lb, 80% or 60,62.5,65kg and TEMPO like 3-1-X-0, e.g. squat:3x5@100kg/180s"
        var text = text
        var auto = false
        if text.lowercased().hasSuffix("!auto") {
            auto = true
            text = String(text.dropLast(5))
        }
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty else { throw StoreError(.invalid, "'\(text)': \(form)") }
        var rest = parts[1]
        var tempo: Tempo?
        if let colon = rest.lastIndex(of: ":") {
            let written = String(rest[rest.index(after: colon)...])
            guard let read = Tempo(written) else {
                throw StoreError(.invalid, "'\(text)': tempo '\(written)' must be four phases E-B-C-T, each seconds (0-30) or X, like 3-1-X-0; \(form)")
            }
            tempo = read
            rest = String(rest[..<colon])
        }
        var restS: Double?
        if let slash = rest.firstIndex(of: "/") {
            let value = rest[rest.index(after: slash)...].lowercased().replacingOccurrences(of: "s", with: "")
            guard let seconds = Double(value) else { throw StoreError(.invalid, "'\(text)': rest '\(value)' is not a number of seconds; \(form)") }
            restS = seconds
            rest = String(rest[..<slash])
        }
        var target: Double?
        func velocity(_ value: Substring) throws(StoreError) -> Double {
            let number = value.lowercased().hasSuffix("mps") ? value.dropLast(3) : value[...]
            // A zone: its middle is the target.
            let ends = number.split(separator: "-", omittingEmptySubsequences: false).compactMap { Double($0) }
            if ends.count == 2, number.split(separator: "-", omittingEmptySubsequences: false).count == 2 {
                guard ends[0] > 0, ends[0] < ends[1], ends[1] <= 3 else {
                    throw StoreError(.invalid, "'\(text)': zone '\(value)' must be LOW-HIGH m/s with 0 < LOW < HIGH <= 3; \(form)")
                }
                return (ends[0] + ends[1]) / 2
            }
            guard let mps = Double(number), mps > 0, mps <= 3 else {
                throw StoreError(.invalid, "'\(text)': target '\(value)' is not a mean velocity like 0.75mps; \(form)")
            }
            return mps
        }
        if let tilde = rest.firstIndex(of: "~") {
            target = try velocity(rest[rest.index(after: tilde)...])
            rest = String(rest[..<tilde])
        }
        var loadKg: Double?, loadsKg: [Double]?, loadPct: Double?, loadUnit: String?
        if let at = rest.firstIndex(of: "@") {
            let value = rest[rest.index(after: at)...].lowercased()
            rest = String(rest[..<at])
            if value.hasSuffix("mps") {
                guard target == nil else { throw StoreError(.invalid, "'\(text)': two velocity targets; \(form)") }
                target = try velocity(value[...])
            } else if value.hasSuffix("%") {
                guard let pct = Double(value.dropLast()), pct > 0, pct <= 120 else {
                    throw StoreError(.invalid, "'\(text)': '\(value)' is not a percentage of e1RM above 0 and at most 120; \(form)")
                }
                loadPct = pct
                loadUnit = unit == "lb" ? "lb" : nil
            } else {
                // Each load may carry its unit; a bare one takes the last unit written, else the plan's.
                let units = ["kg", "lb"]
                let written = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                let named = Set(written.compactMap { load in units.first { load.hasSuffix($0) } })
                guard named.count <= 1 else { throw StoreError(.invalid, "'\(text)': loads in both kg and lb; write them in one unit; \(form)") }
                let itemUnit = named.first ?? unit
                var kgs: [Double] = []
                for load in written {
                    let number = units.first { load.hasSuffix($0) }.map { String(load.dropLast($0.count)) } ?? load
                    guard let amount = Double(number), amount >= 0 else {
                        throw StoreError(.invalid, "'\(text)': load '\(load)' is not a number of \(itemUnit); \(form)")
                    }
                    kgs.append(itemUnit == "lb" ? amount * kgPerLb : amount)
                }
                loadKg = kgs[0]
                loadUnit = itemUnit == "lb" ? "lb" : nil
                if kgs.count > 1 { loadsKg = kgs }
            }
        }
        let counts = rest.lowercased().split(separator: "x").map { Int($0) }
        guard counts.count == 2, let sets = counts[0], let reps = counts[1] else {
            throw StoreError(.invalid, "'\(text)': sets and reps '\(rest)' must be like 3x5; \(form)")
        }
        if let loadsKg, loadsKg.count != sets {
            throw StoreError(.invalid, "'\(text)': \(loadsKg.count) loads for \(sets) sets; give one load per set, or one for all")
        }
        let exercise = parts[0]
        guard let fallback = restS ?? defaultRestS(exercise) else {
            throw StoreError(.invalid, "'\(text)': unknown exercise '\(exercise)'; see vbt exercise list")
        }
        guard !auto || target != nil else { throw StoreError(.invalid, "'\(text)': !auto needs a velocity target (~0.75mps) to advise on; \(form)") }
        var item = PlanItem(
            exercise: exercise, sets: sets, reps: reps, restS: fallback, loadKg: loadKg, loadsKg: loadsKg, loadPctE1rm: loadPct, loadUnit: loadUnit,
            targetMeanVelocityMps: target)
        if auto { item.autoAdvice = true }
        item.tempo = tempo?.text
        return item
    }

    /// The loads as the coach wrote them: `100 kg`, `225 lb`, `60, 62.5, 65 kg`, `80% e1RM`
    /// (with the resolved load once known: `80% e1RM = 120 kg`), or `-`.
    public var loadWords: String {
        let lb = loadUnit == "lb"
        func amount(_ kg: Double) -> String {
            let value = lb ? kg / Self.kgPerLb : kg
            // Pounds come back from kg with float noise: 225 lb is 102.05828325 kg.
            return String(format: "%g", (value * 1_000).rounded() / 1_000)
        }
        let unit = lb ? "lb" : "kg"
        let loads = (loadsKg ?? loadKg.map { [$0] })?.map(amount).joined(separator: ", ").appending(" \(unit)")
        if let pct = loadPctE1rm { return String(format: "%g%% e1RM", pct) + (loads.map { " = \($0)" } ?? "") }
        return loads ?? "-"
    }
}

/// `exercise.add`: a new exercise for the catalogue.
public struct ExerciseInput: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    /// Default: empty.
    public var description: String?
    public var expectedRomMm: Double
    public var mvtMps: Double
    /// Default: 120 s, as the generic lift.
    public var defaultRestS: Double?

    /// Creates an input.
    public init(id: String, name: String, description: String? = nil, expectedRomMm: Double, mvtMps: Double, defaultRestS: Double? = nil) {
        (self.id, self.name, self.description) = (id, name, description)
        (self.expectedRomMm, self.mvtMps, self.defaultRestS) = (expectedRomMm, mvtMps, defaultRestS)
    }

    /// The catalogue's field names.
    typealias CodingKeys = ExerciseRecord.CodingKeys
}

/// `set.annotate`: the athlete's RPE and a coach's note on a stored set.
public struct AnnotateArgs: Codable, Sendable, Equatable {
    public var set: String
    /// Rate of perceived exertion, 1-10 in steps of 0.5.
    public var rpe: Double?
    /// Up to 500 characters.
    public var note: String?
    /// Empties the RPE and the note first (then `rpe` and `note`, when given, are set).
    public var clear: Bool?

    /// Creates the arguments.
    public init(set: String, rpe: Double? = nil, note: String? = nil, clear: Bool? = nil) {
        (self.set, self.rpe, self.note, self.clear) = (set, rpe, note, clear)
    }
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
    /// The command that made it (`athlete.assign`, `athlete.unassign`, `plan.assign`, `set.load`);
    /// nil for one stored before the recorder kept it.
    public var command: String?
    /// The assignment's whole arguments, as `athlete.assign` takes them (for `set.load`, the
    /// assignment before with the new load): what a detector that missed the command applies.
    public var args: JSONObject?

    enum CodingKeys: String, CodingKey {
        case station, athlete, exercise, plan, ts, command, args
        case loadKg = "load_kg"
        case cmdId = "cmd_id"
    }

    /// Creates a value.
    public init(
        station: String, athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil, plan: String? = nil, ts: Double, cmdId: String? = nil,
        command: String? = nil, args: JSONObject? = nil
    ) {
        self.station = station
        self.athlete = athlete
        self.exercise = exercise
        self.loadKg = loadKg
        self.plan = plan
        self.ts = ts
        self.cmdId = cmdId
        self.command = command
        self.args = args
    }

    /// Reads a record; one from a recorder before `command` and `args` has neither.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        station = try c.decode(String.self, forKey: .station)
        athlete = try c.decodeIfPresent(String.self, forKey: .athlete)
        exercise = try c.decodeIfPresent(String.self, forKey: .exercise)
        loadKg = try c.decodeIfPresent(Double.self, forKey: .loadKg)
        plan = try c.decodeIfPresent(String.self, forKey: .plan)
        ts = try c.decode(Double.self, forKey: .ts)
        cmdId = try c.decodeIfPresent(String.self, forKey: .cmdId)
        command = try c.decodeIfPresent(String.self, forKey: .command)
        if case .object(let object)? = try c.decodeIfPresent(CodableJSON.self, forKey: .args)?.value { args = object }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(station, forKey: .station)
        try c.encodeIfPresent(athlete, forKey: .athlete)
        try c.encodeIfPresent(exercise, forKey: .exercise)
        try c.encodeIfPresent(loadKg, forKey: .loadKg)
        try c.encodeIfPresent(plan, forKey: .plan)
        try c.encode(ts, forKey: .ts)
        try c.encodeIfPresent(cmdId, forKey: .cmdId)
        try c.encodeIfPresent(command, forKey: .command)
        try c.encodeIfPresent(args.map { CodableJSON(value: .object($0)) }, forKey: .args)
    }
}

/// A bus JSON value carried through Foundation's coders as the same JSON.
struct CodableJSON: Codable {
    var value: JSONValue

    init(value: JSONValue) { self.value = value }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            value = .object(JSONObject(try object.allKeys.map { ($0.stringValue, try object.decode(CodableJSON.self, forKey: $0).value) }))
        } else if var array = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !array.isAtEnd { elements.append(try array.decode(CodableJSON.self).value) }
            value = .array(elements)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                value = .null
            } else if let flag = try? single.decode(Bool.self) {
                value = .bool(flag)
            } else if let number = try? single.decode(Double.self) {
                value = .number(number)
            } else {
                value = .string(try single.decode(String.self))
            }
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let flag):
            var single = encoder.singleValueContainer()
            try single.encode(flag)
        case .number(let number):
            var single = encoder.singleValueContainer()
            try single.encode(number)
        case .string(let text):
            var single = encoder.singleValueContainer()
            try single.encode(text)
        case .array(let elements):
            var array = encoder.unkeyedContainer()
            for element in elements { try array.encode(CodableJSON(value: element)) }
        case .object(let object):
            var keyed = encoder.container(keyedBy: Key.self)
            for field in object.fields { try keyed.encode(CodableJSON(value: field.value), forKey: Key(stringValue: field.key)) }
        }
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
    /// The athlete's rate of perceived exertion (`set.annotate`), 1-10.
    public var rpe: Double?
    /// A coach's note (`set.annotate`).
    public var note: String?

    enum CodingKeys: String, CodingKey {
        case id, session, station, athlete, exercise, reps, reason, rpe, note
        case loadKg = "load_kg"
        case startedTs = "started_ts"
        case endedTs = "ended_ts"
        case bestMeanVelocityMps = "best_mean_velocity_mps"
        case velocityLossPct = "velocity_loss_pct"
    }

    /// Creates a value.
    public init(
        id: String, session: Int64, station: String, athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil, startedTs: Double,
        endedTs: Double? = nil, reps: Int, reason: String? = nil, bestMeanVelocityMps: Double? = nil, velocityLossPct: Double? = nil,
        rpe: Double? = nil, note: String? = nil
    ) {
        self.rpe = rpe
        self.note = note
        self.id = id
        self.session = session
        self.station = station
        self.athlete = athlete
        self.exercise = exercise
        self.loadKg = loadKg
        self.startedTs = startedTs
        self.endedTs = endedTs
        self.reps = reps
        self.reason = reason
        self.bestMeanVelocityMps = bestMeanVelocityMps
        self.velocityLossPct = velocityLossPct
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

        /// Creates a value.
        public init(loadKg: Double, bestMeanVelocityMps: Double, reps: Int) {
            self.loadKg = loadKg
            self.bestMeanVelocityMps = bestMeanVelocityMps
            self.reps = reps
        }
    }

    /// The estimated 1RM on one day (`E1RMEstimator.daily`): the line through the fastest rep at
    /// each load that day, where it meets the exercise's MVT, and what it came from.
    public struct E1RM: Codable, Sendable, Equatable {
        /// The day, `YYYY-MM-DD` in the asker's time zone.
        public var day: String
        /// The day's last rep (Unix seconds).
        public var ts: Double
        public var e1rmKg: Double
        /// Fit quality of the load-velocity line behind it.
        public var r2: Double
        /// The points fitted: each load that day, lightest first, and its fastest rep's mean velocity.
        public var loadsKg: [Double]
        public var meanVelocitiesMps: [Double]
        /// The line: v = intercept + slope x load.
        public var interceptMps: Double
        public var slopeMpsPerKg: Double
        /// The exercise's MVT the line was read at.
        public var mvtMps: Double
        /// Why not to trust it (`reliable` when empty).
        public var warnings: [E1RMWarning]
        enum CodingKeys: String, CodingKey {
            case day, ts, r2, warnings, reliable
            case e1rmKg = "e1rm_kg"
            case loadsKg = "loads_kg"
            case meanVelocitiesMps = "mean_velocities_mps"
            case interceptMps = "intercept_mps"
            case slopeMpsPerKg = "slope_mps_per_kg"
            case mvtMps = "mvt_mps"
        }

        /// Creates a value.
        public init(
            day: String, ts: Double, e1rmKg: Double, r2: Double, loadsKg: [Double] = [], meanVelocitiesMps: [Double] = [], interceptMps: Double = 0,
            slopeMpsPerKg: Double = 0, mvtMps: Double = 0, warnings: [E1RMWarning] = []
        ) {
            (self.day, self.ts, self.e1rmKg, self.r2) = (day, ts, e1rmKg, r2)
            (self.loadsKg, self.meanVelocitiesMps, self.interceptMps, self.slopeMpsPerKg) = (loadsKg, meanVelocitiesMps, interceptMps, slopeMpsPerKg)
            (self.mvtMps, self.warnings) = (mvtMps, warnings)
        }

        /// Reads a value; one from a recorder before the fit's details were sent has none of them.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            day = try c.decode(String.self, forKey: .day)
            ts = try c.decode(Double.self, forKey: .ts)
            e1rmKg = try c.decode(Double.self, forKey: .e1rmKg)
            r2 = try c.decode(Double.self, forKey: .r2)
            loadsKg = try c.decodeIfPresent([Double].self, forKey: .loadsKg) ?? []
            meanVelocitiesMps = try c.decodeIfPresent([Double].self, forKey: .meanVelocitiesMps) ?? []
            interceptMps = try c.decodeIfPresent(Double.self, forKey: .interceptMps) ?? 0
            slopeMpsPerKg = try c.decodeIfPresent(Double.self, forKey: .slopeMpsPerKg) ?? 0
            mvtMps = try c.decodeIfPresent(Double.self, forKey: .mvtMps) ?? 0
            warnings = try c.decodeIfPresent([E1RMWarning].self, forKey: .warnings) ?? []
        }

        /// Writes every field and `reliable` (no warnings), so a script need not know the rules.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(day, forKey: .day)
            try c.encode(ts, forKey: .ts)
            try c.encode(e1rmKg, forKey: .e1rmKg)
            try c.encode(r2, forKey: .r2)
            try c.encode(loadsKg, forKey: .loadsKg)
            try c.encode(meanVelocitiesMps, forKey: .meanVelocitiesMps)
            try c.encode(interceptMps, forKey: .interceptMps)
            try c.encode(slopeMpsPerKg, forKey: .slopeMpsPerKg)
            try c.encode(mvtMps, forKey: .mvtMps)
            try c.encode(warnings, forKey: .warnings)
            try c.encode(warnings.isEmpty, forKey: .reliable)
        }
    }

    public var exercise: String
    public var bestByLoad: [BestAtLoad]
    public var e1rm: [E1RM]

    enum CodingKeys: String, CodingKey {
        case exercise, e1rm
        case bestByLoad = "best_by_load"
    }

    /// Creates a value.
    public init(exercise: String, bestByLoad: [BestAtLoad], e1rm: [E1RM]) {
        self.exercise = exercise
        self.bestByLoad = bestByLoad
        self.e1rm = e1rm
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

    /// Creates a value.
    public init(athlete: String, exercises: [ExerciseProgress], bodyWeight: [WeighIn]) {
        self.athlete = athlete
        self.exercises = exercises
        self.bodyWeight = bodyWeight
    }
}

/// One day of the weekly statistics.
public struct DayStats: Codable, Sendable, Equatable {
    /// `YYYY-MM-DD` of a Unix time shifted by a UTC offset.
    public static func day(_ ts: Double, offset: Double) -> String {
        // Times come from the bus and from callers: anything outside years 1970-5138 is not a day.
        guard ts + offset >= 0, ts + offset < 1e11 else { return "-" }
        let days = Int(floor((ts + offset) / 86_400))
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        return String(format: "%04d-%02d-%02d", y, m, d)
    }

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

    /// Creates a value.
    public init(day: String, sets: Int, reps: Int, volumeKg: Double, timeUnderTensionS: Double) {
        self.day = day
        self.sets = sets
        self.reps = reps
        self.volumeKg = volumeKg
        self.timeUnderTensionS = timeUnderTensionS
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

    /// Creates a value.
    public init(athlete: String? = nil, days: [DayStats], totals: DayStats, mostTrainedExercise: String? = nil) {
        self.athlete = athlete
        self.days = days
        self.totals = totals
        self.mostTrainedExercise = mostTrainedExercise
    }
}

/// A page of one table, for exports.
public struct TablePage: Codable, Sendable, Equatable {
    /// The tables `export.page` reads, each saying whether it has an `athlete` column.
    public static let tables: [String: Bool] = [
        "athletes": false, "weigh_ins": true, "sessions": true, "sets": true, "reps": true, "rejected": true,
        "profiles": true, "posture_changes": true, "alerts": true, "assignments": true, "plans": true, "plan_items": false,
    ]

    public var table: String
    public var columns: [String]
    public var rows: [[Cell]]
    /// Pass as `after` for the next page; nil on the last page.
    public var next: Int64?

    /// Creates a value.
    public init(table: String, columns: [String], rows: [[Cell]], next: Int64? = nil) {
        self.table = table
        self.columns = columns
        self.rows = rows
        self.next = next
    }
}

/// One value of a row: null, integer, real or text.
public enum Cell: Codable, Sendable, Equatable {
    case null
    case int(Int64)
    case real(Double)
    case text(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .real(value)
        } else {
            self = .text(try container.decode(String.self))
        }
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
        case .text(let raw):
            // A text starting like a formula (=, +, -, @, tab, CR) would run as one in a
            // spreadsheet (OWASP, "CSV Injection"): a leading apostrophe keeps it text.
            let value = raw.first.map { "=+-@\t\r".contains($0) } == true ? "'" + raw : raw
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

    /// Creates a stored calibration.
    public init(athlete: String, ts: Double, station: String, json: String) {
        (self.athlete, self.ts, self.station, self.json) = (athlete, ts, station, json)
    }
}

/// A stored detector pattern (the detector's JSON, verbatim).
public struct StoredPattern: Codable, Sendable, Equatable {
    public var exercise: String
    public var name: String
    public var ts: Double
    public var json: String

    /// Creates a stored pattern.
    public init(exercise: String, name: String, ts: Double, json: String) {
        (self.exercise, self.name, self.ts, self.json) = (exercise, name, ts, json)
    }
}

/// The recorder's own state, for `vbt` and monitoring.
public struct RecorderStatus: Codable, Sendable, Equatable {
    public var database: String
    public var schema: [String]
    public var counters: IngestCounters
    /// What the recorder's bus subscriber counted (duplicates by `src`+`seq` are dropped there already),
    /// with what was lost for good and what its holes still lack (`outstanding`), as its heartbeat says.
    public var inputs: InputCounters
    public var pending: Int
    /// The last write error, while it lasts.
    public var lastError: String?
    public var rows: [String: Int]

    enum CodingKeys: String, CodingKey {
        case database, schema, counters, inputs, pending, rows
        case lastError = "last_error"
    }

    /// Creates a value.
    public init(
        database: String, schema: [String], counters: IngestCounters, inputs: InputCounters, pending: Int, lastError: String? = nil, rows: [String: Int]
    ) {
        self.database = database
        self.schema = schema
        self.counters = counters
        self.inputs = inputs
        self.pending = pending
        self.lastError = lastError
        self.rows = rows
    }
}

/// What the ingestor did, for the recorder's heartbeat and logs.
public struct IngestCounters: Sendable, Equatable, Codable {
    /// Messages stored, by type.
    public var stored: [String: Int] = [:]
    /// Raw readings stored (one row each).
    public var sampleRows = 0
    /// Messages already in the database (same `src` and `seq`, or the same `rep_id`): not stored again.
    public var duplicates = 0
    /// Messages the schema refused (a constraint): logged and skipped, the rest of the batch is stored.
    public var refused = 0
    /// Messages of types the recorder does not keep (heartbeats, hand-overs, timers).
    public var ignored = 0
    /// Raw-sample messages dropped from memory because the database was unavailable for
    /// too long: they become holes, fetched again from the producers' journals once it is back
    /// (what no journal holds is then counted in `lost`).
    public var droppedSamples = 0
    /// Other messages dropped from memory for the same reason (only after every raw sample was dropped first).
    public var droppedOther = 0
    /// Batches that failed and were kept to retry.
    public var failedWrites = 0
    /// Messages that filled a hole (fetched from a producer's journal, or late).
    public var recovered = 0
    /// Messages a stream lacks that no journal holds any more: lost for good.
    public var lost = 0

    /// Empty counters.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case stored, duplicates, refused, ignored, recovered, lost
        case sampleRows = "sample_rows"
        case droppedSamples = "dropped_samples"
        case droppedOther = "dropped_other"
        case failedWrites = "failed_writes"
    }
}
