// Commands (proto/cmd.schema.json): their names, and their arguments as
// types, so every program reads and builds them the same way.

/// The command names the programs act on.
public enum CommandName {
    /// Who lifts what at a station (`AthleteAssign`).
    public static let athleteAssign = "athlete.assign"
    /// Nobody is at the station any more: its set ends, its rest and plan stop, and what
    /// the station measures from then on belongs to no athlete (no arguments).
    public static let athleteUnassign = "athlete.unassign"
    /// A whole training plan for a station (the notifier's workout flow).
    public static let planAssign = "plan.assign"
    /// Ends the open set now.
    public static let setEnd = "set.end"
    /// The load changed mid-session (`load_kg`).
    public static let setLoad = "set.load"
    /// Starts a posture calibration (`PostureCalibrate`).
    public static let postureCalibrate = "posture.calibrate"
    /// Pauses the station's rest timer.
    public static let restPause = "rest.pause"
    /// Resumes a paused rest timer.
    public static let restResume = "rest.resume"
    /// Ends the rest now.
    public static let restSkip = "rest.skip"
    /// Adds to (or, negative, takes from) the rest (`RestExtend`).
    public static let restExtend = "rest.extend"
    /// Carries the station's pending load advice into its plan (no arguments).
    public static let adviceAccept = "advice.accept"
    /// The rest-timer commands, all for the notifier.
    public static let rest: Set<String> = [restPause, restResume, restSkip, restExtend]
    /// Every command a vbt program acts on: the ones declared (`specs`).
    public static let all: Set<String> = Set(specs.map(\.name))

    /// Checks `args` against the declaration of `command` (`specs`): arguments it does not
    /// take, wrong types and values out of bounds are refused, naming the argument. A command
    /// no vbt program acts on is left alone (programs ignore commands they do not know).
    public static func checkArguments(_ command: String, _ args: JSONObject) throws(PayloadError) {
        try spec(command)?.check(args)
    }
}

/// `set.load`'s arguments: the load now on the bar.
public struct SetLoad: Sendable, Equatable {
    public var loadKg: Double

    /// Creates the arguments.
    public init(loadKg: Double) { self.loadKg = loadKg }

    /// Reads the arguments, naming what is wrong.
    public init(args: JSONObject) throws(PayloadError) {
        let load = try args.number("load_kg")
        guard load >= 0, load <= 1_000 else { throw PayloadError("load_kg must be 0 to 1000") }
        loadKg = load
        try CommandName.checkArguments(CommandName.setLoad, args)
    }

    /// The arguments as a command carries them.
    public var args: JSONObject { JSONObject([("load_kg", .number(loadKg))]) }
}

/// `posture.calibrate`'s arguments: whose posture, recorded for how long.
public struct PostureCalibrate: Sendable, Equatable {
    /// The athlete (default: the station's athlete, else the station).
    public var athlete: String?
    /// How long the athlete sits or stands well, s (default 10, kept within 0.5-600).
    public var seconds: Double?

    /// Creates the arguments.
    public init(athlete: String?, seconds: Double?) { (self.athlete, self.seconds) = (athlete, seconds) }

    /// Reads the arguments, naming what is wrong.
    public init(args: JSONObject) throws(PayloadError) {
        athlete = try args.optionalString("athlete")
        seconds = try args.optionalNumber("seconds")
        try CommandName.checkArguments(CommandName.postureCalibrate, args)
    }

    /// The arguments as a command carries them.
    public var args: JSONObject {
        var fields: [(key: String, value: JSONValue)] = []
        if let athlete { fields.append(("athlete", .string(athlete))) }
        if let seconds { fields.append(("seconds", .number(seconds))) }
        return JSONObject(fields)
    }
}

/// `rest.extend`'s arguments: seconds to add to the rest (negative: to take off).
public struct RestExtend: Sendable, Equatable {
    public var seconds: Double

    /// Creates the arguments.
    public init(seconds: Double) { self.seconds = seconds }

    /// Reads the arguments, naming what is wrong.
    public init(args: JSONObject) throws(PayloadError) {
        guard let seconds = try args.optionalNumber("seconds"), seconds.isFinite, abs(seconds) <= 3600 else {
            throw PayloadError("rest.extend needs args.seconds between -3600 and 3600")
        }
        self.seconds = seconds
        try CommandName.checkArguments(CommandName.restExtend, args)
    }

    /// The arguments as a command carries them.
    public var args: JSONObject { JSONObject([("seconds", .number(seconds))]) }
}

/// `athlete.assign`'s arguments: who lifts what at a station, and how the
/// detector and the notifier should treat their sets. Every field is optional
/// on the wire; one of the wrong type makes the whole command an error that
/// names it (a program then says so, and changes nothing).
public struct AthleteAssign: Sendable, Equatable {
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    /// The rest after each set, seconds.
    public var restS: Double?
    /// Velocity loss that stops a set, percent.
    public var vlThresholdPct: Double?
    /// What velocity loss is measured against: `fastest` or `first`.
    public var vlReference: String?
    /// The velocity zone the athlete trains in.
    public var targetZone: String?
    /// The athlete's own ROM for the exercise, mm.
    public var romMm: Double?
    /// The exercise's mean velocity at 1RM, m/s, for an exercise the detector has no profile
    /// of (one added to the gym's catalogue).
    public var mvtMps: Double?
    /// The prescribed tempo, "E-B-C-T" (e.g. "3-1-X-0"): each rep is judged against it.
    public var tempo: String?

    /// Creates arguments.
    public init(
        athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil, restS: Double? = nil,
        vlThresholdPct: Double? = nil, vlReference: String? = nil, targetZone: String? = nil, romMm: Double? = nil, mvtMps: Double? = nil,
        tempo: String? = nil
    ) {
        self.tempo = tempo
        (self.athlete, self.exercise, self.loadKg, self.restS) = (athlete, exercise, loadKg, restS)
        (self.vlThresholdPct, self.vlReference, self.targetZone, self.romMm, self.mvtMps) = (vlThresholdPct, vlReference, targetZone, romMm, mvtMps)
    }

    /// Reads a command's arguments.
    public init(args: JSONObject) throws(PayloadError) {
        athlete = try args.optionalString("athlete")
        exercise = try args.optionalString("exercise")
        loadKg = try args.optionalNumber("load_kg")
        restS = try args.optionalNumber("rest_s")
        vlThresholdPct = try args.optionalNumber("vl_threshold_pct")
        vlReference = try args.optionalString("vl_reference")
        targetZone = try args.optionalString("target_zone")
        romMm = try args.optionalNumber("rom_mm")
        mvtMps = try args.optionalNumber("mvt_mps")
        if let mvtMps, !(0.05...1.5).contains(mvtMps) { throw PayloadError("mvt_mps must be 0.05 to 1.5 m/s") }
        tempo = try args.optionalString("tempo")
        try CommandName.checkArguments(CommandName.athleteAssign, args)
    }

    /// The arguments as a command carries them.
    public var args: JSONObject {
        var fields: [(key: String, value: JSONValue)] = []
        if let athlete { fields.append(("athlete", .string(athlete))) }
        if let exercise { fields.append(("exercise", .string(exercise))) }
        if let loadKg { fields.append(("load_kg", .number(loadKg))) }
        if let restS { fields.append(("rest_s", .number(restS))) }
        if let vlThresholdPct { fields.append(("vl_threshold_pct", .number(vlThresholdPct))) }
        if let vlReference { fields.append(("vl_reference", .string(vlReference))) }
        if let targetZone { fields.append(("target_zone", .string(targetZone))) }
        if let romMm { fields.append(("rom_mm", .number(romMm))) }
        if let mvtMps { fields.append(("mvt_mps", .number(mvtMps))) }
        if let tempo { fields.append(("tempo", .string(tempo))) }
        return JSONObject(fields)
    }
}

/// A training plan: exercises in order. The one plan type: the recorder
/// stores it (`plan.create`, proto/query.md), a station is given it
/// (`plan.assign`), the notifier walks the athlete through it.
public struct Plan: Sendable, Codable, Equatable {
    /// The plan's id (`plan` in `plan.assign`, where it may be left out).
    public var id: String?
    public var athlete: String?
    public var items: [PlanItem]

    /// Creates a plan.
    public init(id: String?, athlete: String? = nil, items: [PlanItem]) { (self.id, self.athlete, self.items) = (id, athlete, items) }

    /// Reads `plan.assign`'s arguments (`athlete` required, `plan`, `exercises`), saying what is wrong in words an operator can act on.
    public init(assignArgs args: JSONObject) throws(PayloadError) {
        athlete = try args.string("athlete")
        id = try args.optionalString("plan")
        guard case .array(let entries)? = args["exercises"], !entries.isEmpty else {
            throw PayloadError("exercises must be a non-empty array of {exercise, sets, reps, rest_s, load_kg, loads_kg, target_mean_velocity_mps}")
        }
        var list: [PlanItem] = []
        for (index, entry) in entries.enumerated() {
            guard case .object(let fields) = entry else { throw PayloadError("exercises[\(index)] must be an object") }
            let exercise = try fields.string("exercise")
            let sets = try fields.integer("sets"), reps = try fields.integer("reps")
            let rest = try fields.optionalNumber("rest_s"), load = try fields.optionalNumber("load_kg")
            guard sets >= 1, reps >= 1 else { throw PayloadError("exercises[\(index)] (\(exercise)): sets and reps must be 1 or more") }
            if let rest, !(rest >= 0 && rest <= 3600) { throw PayloadError("exercises[\(index)] (\(exercise)): rest_s must be 0 to 3600") }
            if let load, !(load >= 0 && load <= 1_000) { throw PayloadError("exercises[\(index)] (\(exercise)): load_kg must be 0 to 1000") }
            var loads: [Double]?
            if let given = fields["loads_kg"] {
                guard case .array(let values) = given, values.count == sets else {
                    throw PayloadError("exercises[\(index)] (\(exercise)): loads_kg must be an array of one load per set (\(sets))")
                }
                loads = try values.map { value throws(PayloadError) -> Double in
                    guard case .number(let kg) = value, kg >= 0, kg <= 1_000 else {
                        throw PayloadError("exercises[\(index)] (\(exercise)): each of loads_kg must be 0 to 1000")
                    }
                    return kg
                }
            }
            let target = try fields.optionalNumber("target_mean_velocity_mps")
            if let target, !(target > 0 && target <= 3) {
                throw PayloadError("exercises[\(index)] (\(exercise)): target_mean_velocity_mps must be above 0 and at most 3")
            }
            let unit = try fields.optionalString("load_unit")
            var item = PlanItem(
                exercise: exercise, sets: sets, reps: reps, restS: rest, loadKg: load ?? loads?.first, loadsKg: loads,
                loadPctE1rm: try fields.optionalNumber("load_pct_e1rm"), loadUnit: unit == "lb" ? "lb" : nil, targetMeanVelocityMps: target)
            if try fields.optionalString("advice") == "auto" { item.autoAdvice = true }
            if let written = try fields.optionalString("tempo") {
                guard let tempo = Tempo(written) else {
                    throw PayloadError("exercises[\(index)] (\(exercise)): tempo must be E-B-C-T, each seconds (0-30) or X, like 3-1-X-0")
                }
                item.tempo = tempo.text
            }
            list.append(item)
        }
        items = list
        try CommandName.checkArguments(CommandName.planAssign, args)
    }

    /// The plan as `plan.assign`'s arguments for `athlete`.
    public func assignArgs(athlete: String) -> JSONObject {
        var fields: [(key: String, value: JSONValue)] = [("athlete", .string(athlete))]
        if let id { fields.append(("plan", .string(id))) }
        fields.append(
            (
                "exercises",
                .array(
                    items.map { item in
                        var entry: [(key: String, value: JSONValue)] = [
                            ("exercise", .string(item.exercise)), ("sets", .number(Double(item.sets))),
                            ("reps", .number(Double(item.reps))),
                        ]
                        if let rest = item.restS { entry.append(("rest_s", .number(rest))) }
                        if let load = item.loadKg { entry.append(("load_kg", .number(load))) }
                        if let loads = item.loadsKg { entry.append(("loads_kg", .array(loads.map { .number($0) }))) }
                        if let pct = item.loadPctE1rm { entry.append(("load_pct_e1rm", .number(pct))) }
                        if let unit = item.loadUnit { entry.append(("load_unit", .string(unit))) }
                        if let target = item.targetMeanVelocityMps { entry.append(("target_mean_velocity_mps", .number(target))) }
                        if item.autoAdvice == true { entry.append(("advice", .string("auto"))) }
                        if let tempo = item.tempo { entry.append(("tempo", .string(tempo))) }
                        return .object(JSONObject(entry))
                    })
            ))
        return JSONObject(fields)
    }
}

/// One exercise of a plan.
public struct PlanItem: Sendable, Codable, Equatable {
    public var exercise: String
    public var sets: Int
    public var reps: Int
    /// The rest after each set, s; nil: the exercise's default.
    public var restS: Double?
    /// The load, kg (with `loadsKg`: the first set's).
    public var loadKg: Double?
    /// One load per set, kg, when they differ (as many as `sets`).
    public var loadsKg: [Double]?
    /// The load as a percentage of the athlete's current e1RM in this exercise: resolved to
    /// `loadKg` when the plan starts (`Plan.resolvingLoads`).
    public var loadPctE1rm: Double?
    /// The unit the coach wrote the loads in: `lb` (loads are still kg here), nil for kg.
    public var loadUnit: String?
    /// The mean velocity each rep should reach, m/s.
    public var targetMeanVelocityMps: Double?
    /// Apply the notifier's load advice without asking (`!auto` in `vbt plan create`).
    public var autoAdvice: Bool?
    /// The tempo each rep should follow, "E-B-C-T" in its dashed form (`Tempo.text`).
    public var tempo: String?

    /// Creates an item.
    public init(
        exercise: String, sets: Int, reps: Int, restS: Double? = nil, loadKg: Double? = nil, loadsKg: [Double]? = nil, loadPctE1rm: Double? = nil,
        loadUnit: String? = nil, targetMeanVelocityMps: Double? = nil
    ) {
        (self.exercise, self.sets, self.reps, self.restS, self.loadKg) = (exercise, sets, reps, restS, loadKg)
        (self.loadsKg, self.loadPctE1rm, self.loadUnit, self.targetMeanVelocityMps) = (loadsKg, loadPctE1rm, loadUnit, targetMeanVelocityMps)
    }

    /// The load of set `number` (1-based), kg.
    public func loadKg(set number: Int) -> Double? {
        if let loadsKg, loadsKg.indices.contains(number - 1) { return loadsKg[number - 1] }
        return loadKg
    }

    enum CodingKeys: String, CodingKey {
        case exercise, sets, reps
        case restS = "rest_s"
        case loadKg = "load_kg"
        case loadsKg = "loads_kg"
        case loadPctE1rm = "load_pct_e1rm"
        case loadUnit = "load_unit"
        case targetMeanVelocityMps = "target_mean_velocity_mps"
        case autoAdvice = "auto_advice"
        case tempo
    }
}
