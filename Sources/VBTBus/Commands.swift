// Commands (proto/cmd.schema.json): their names, and their arguments as
// types, so every program reads and builds them the same way.

/// The command names the programs act on.
public enum CommandName {
    /// Who lifts what at a station (`AthleteAssign`).
    public static let athleteAssign = "athlete.assign"
    /// A whole training plan for a station (the notifier's workout flow).
    public static let planAssign = "plan.assign"
    /// Ends the open set now.
    public static let setEnd = "set.end"
    /// The load changed mid-session (`load_kg`).
    public static let setLoad = "set.load"
    /// Starts a posture calibration (`athlete`, `seconds`).
    public static let postureCalibrate = "posture.calibrate"
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

    /// Creates arguments.
    public init(athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil, restS: Double? = nil,
                vlThresholdPct: Double? = nil, vlReference: String? = nil, targetZone: String? = nil, romMm: Double? = nil) {
        (self.athlete, self.exercise, self.loadKg, self.restS) = (athlete, exercise, loadKg, restS)
        (self.vlThresholdPct, self.vlReference, self.targetZone, self.romMm) = (vlThresholdPct, vlReference, targetZone, romMm)
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
        return JSONObject(fields)
    }
}
