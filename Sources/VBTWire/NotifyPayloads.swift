// The notifier's messages (proto/timer, alert, workout). Each mirrors its
// schema; units are in the field names.

/// `timer`: a station's rest timer, every second while it runs or is paused, and on every change.
public struct TimerMessage: BusPayload, Equatable, Codable {
    public static let type = "timer"

    /// `running`, `paused`, or how it ended: `over` (ran out), `skipped`, `cancelled` (a new set began).
    public enum State: String, Sendable, Codable { case running, paused, over, skipped, cancelled }

    /// `<station>-rest-<milliseconds of its start>`: the same timer in every tick.
    public var timerId: String
    public var state: State
    /// The whole rest, extensions included.
    public var durationS: Double
    public var remainingS: Double
    /// Wall clock (Unix seconds) the rest ends at, while running.
    public var endsAt: Double?
    /// The set whose end started the rest.
    public var setId: String?
    /// The exercise just done.
    public var exercise: String?

    /// Creates a timer message.
    public init(
        timerId: String, state: State, durationS: Double, remainingS: Double, endsAt: Double? = nil,
        setId: String? = nil, exercise: String? = nil
    ) {
        (self.timerId, self.state, self.durationS, self.remainingS, self.endsAt, self.setId, self.exercise) =
            (timerId, state, durationS, remainingS, endsAt, setId, exercise)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        timerId = try fields.string("timer_id")
        state = try fields.choice("state", State.self)
        durationS = try fields.number("duration_s")
        remainingS = try fields.number("remaining_s")
        endsAt = try fields.optionalNumber("ends_at")
        setId = try fields.optionalString("set_id")
        exercise = try fields.optionalString("exercise")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("timer_id", timerId)
        writer.field("state", state.rawValue)
        writer.key("duration_s"); writer.fixed(durationS, decimals: 3)
        writer.key("remaining_s"); writer.fixed(remainingS, decimals: 3)
        if let endsAt { writer.key("ends_at"); writer.fixed(endsAt, decimals: 3) }
        writer.optionalField("set_id", setId)
        writer.optionalField("exercise", exercise)
    }
}

/// `alert`: a threshold crossed, a reminder that it still is, or that it is over; or a one-off notice.
public struct AlertMessage: BusPayload, Equatable, Codable {
    public static let type = "alert"

    /// What the alert is about.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case velocityLoss = "velocity-loss"
        case posture
        case sensorDisconnected = "sensor-disconnected"
        case sensorRate = "sensor-rate"
        case heartbeatMissing = "heartbeat-missing"
        case restOver = "rest-over"
        case dataLost = "data-lost"
    }

    /// How urgent.
    public enum Severity: String, Sendable, Codable { case info, warning, critical }

    /// `raised`: the condition began; `repeat`: still true (rate limited reminder);
    /// `cleared`: over; `notice`: a one-off event with nothing to clear.
    public enum State: String, Sendable, Codable { case raised, `repeat`, cleared, notice }

    /// The condition's identity, the same in its raise, repeats and clear: `<station>/<kind>[/<subject>]`.
    public var alertId: String
    public var kind: Kind
    public var severity: Severity
    public var state: State
    /// Plain words for a person, saying what happened and what to do.
    public var message: String
    /// When the condition began (Unix seconds).
    public var since: Double
    /// Repeats held back by the rate limit since the last published message.
    public var suppressed: Int
    /// The station (or program) it is about; the topic's station.
    public var station: String
    /// The athlete at the station, when known (the envelope's `athlete`).
    public var athlete: String?
    // Kind-specific numbers (units in the names).
    public var setId: String?
    public var velocityLossPct: Double?
    public var thresholdPct: Double?
    public var badForS: Double?
    public var limitS: Double?
    public var sensor: String?
    public var rateHz: Double?
    public var expectedRateHz: Double?
    /// The silent program (`heartbeat-missing`): the heartbeat's station, e.g. `rep-detector`.
    public var program: String?
    public var silentS: Double?

    /// Creates an alert.
    public init(
        alertId: String, kind: Kind, severity: Severity, state: State, message: String, since: Double,
        station: String, athlete: String? = nil, suppressed: Int = 0
    ) {
        (self.alertId, self.kind, self.severity, self.state, self.message) = (alertId, kind, severity, state, message)
        (self.since, self.station, self.athlete, self.suppressed) = (since, station, athlete, suppressed)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        alertId = try fields.string("alert_id")
        kind = try fields.choice("kind", Kind.self)
        severity = try fields.choice("severity", Severity.self)
        state = try fields.choice("state", State.self)
        message = try fields.string("message")
        since = try fields.number("since")
        suppressed = try fields.optionalInteger("suppressed") ?? 0
        station = try fields.optionalString("station") ?? ""
        athlete = try fields.optionalString("athlete")
        setId = try fields.optionalString("set_id")
        velocityLossPct = try fields.optionalNumber("velocity_loss_pct")
        thresholdPct = try fields.optionalNumber("threshold_pct")
        badForS = try fields.optionalNumber("bad_for_s")
        limitS = try fields.optionalNumber("limit_s")
        sensor = try fields.optionalString("sensor")
        rateHz = try fields.optionalNumber("rate_hz")
        expectedRateHz = try fields.optionalNumber("expected_rate_hz")
        program = try fields.optionalString("program")
        silentS = try fields.optionalNumber("silent_s")
    }

    /// The station and athlete travel in the envelope; the rest here.
    public func write(to writer: inout JSONWriter) {
        writer.field("alert_id", alertId)
        writer.field("kind", kind.rawValue)
        writer.field("severity", severity.rawValue)
        writer.field("state", state.rawValue)
        writer.field("message", message)
        writer.key("since"); writer.fixed(since, decimals: 3)
        writer.field("suppressed", suppressed)
        writer.optionalField("set_id", setId)
        writer.optionalField("velocity_loss_pct", velocityLossPct)
        writer.optionalField("threshold_pct", thresholdPct)
        if let badForS { writer.key("bad_for_s"); writer.fixed(badForS, decimals: 3) }
        writer.optionalField("limit_s", limitS)
        writer.optionalField("sensor", sensor)
        writer.optionalField("rate_hz", rateHz)
        writer.optionalField("expected_rate_hz", expectedRateHz)
        writer.optionalField("program", program)
        if let silentS { writer.key("silent_s"); writer.fixed(silentS, decimals: 3) }
    }

    /// The alert as one JSON object with its envelope-like fields, for the webhook.
    public func webhookBody(ts: Double) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.field("type", Self.type)
        writer.field("station", station)
        if let athlete { writer.field("athlete", athlete) }
        writer.key("ts"); writer.fixed(ts, decimals: 6)
        write(to: &writer)
        writer.endObject()
        return writer.bytes
    }
}

/// `workout`: where a station's live workout stands: athlete, plan, exercise,
/// set n of N, target reps and load, and whether the athlete rests, is ready, or is done.
public struct WorkoutMessage: BusPayload, Equatable, Codable {
    public static let type = "workout"

    /// `ready`: the next set may start; `resting`: a rest timer runs; `done`: the plan is finished.
    public enum State: String, Sendable, Codable { case ready, resting, done }

    /// What just happened: `plan-assigned`, `athlete-assigned`, `set-ended`, `rest-over`,
    /// `rest-skipped`, `set-started` (a set began during the rest), `plan-done`, `snapshot` (periodic).
    public var event: String
    public var state: State
    public var plan: String?
    public var exercise: String?
    public var loadKg: Double?
    /// The set to do next (while ready) or just done (while resting), 1-based.
    public var set: Int
    /// Sets planned for this exercise (absent without a plan).
    public var sets: Int?
    /// Target reps per set (absent without a plan).
    public var reps: Int?
    /// Position in the plan, 1-based, and the plan's length.
    public var exerciseIndex: Int?
    public var exercises: Int?
    /// Sets ended at this station since the athlete or plan was assigned.
    public var setsDone: Int
    /// The rest after each set of this exercise.
    public var restS: Double
    /// The velocity-loss threshold alerts use.
    public var vlThresholdPct: Double
    /// The next exercise of the plan, if any (for the display during the last rest).
    public var nextExercise: String?
    /// With a plan that sets one: the mean velocity each rep should reach, m/s.
    public var targetMeanVelocityMps: Double?
    /// With a velocity target, after a set with a next set to come: the next set's load advice.
    public var advice: Advice?

    /// Load advice for the next set (docs/detection.md, "Load advice").
    public struct Advice: Sendable, Equatable, Codable {
        /// The set it is for, 1-based.
        public var forSet: Int
        /// The suggested load, kg, rounded to the gym's plate step; nil when there is none (`reason`).
        public var loadKg: Double?
        /// `today-fit` or `profile-offset`; nil without a load.
        public var method: String?
        /// Distinct loads of today's sets it used.
        public var loads: Int
        /// The velocity it aims at, m/s.
        public var targetMps: Double
        /// Do one set fewer than planned.
        public var fewerSets: Bool
        public var fewerSetsReason: String?
        /// How the load was derived, or why there is none.
        public var reason: String
        /// Carried into the plan (accepted with `advice.accept`, or by a plan item marked `!auto`).
        public var applied: Bool

        enum CodingKeys: String, CodingKey {
            case method, loads, reason, applied
            case forSet = "for_set"
            case loadKg = "load_kg"
            case targetMps = "target_mps"
            case fewerSets = "fewer_sets"
            case fewerSetsReason = "fewer_sets_reason"
        }

        /// Creates advice.
        public init(
            forSet: Int, loadKg: Double?, method: String?, loads: Int, targetMps: Double, fewerSets: Bool, fewerSetsReason: String?,
            reason: String, applied: Bool
        ) {
            (self.forSet, self.loadKg, self.method, self.loads, self.targetMps) = (forSet, loadKg, method, loads, targetMps)
            (self.fewerSets, self.fewerSetsReason, self.reason, self.applied) = (fewerSets, fewerSetsReason, reason, applied)
        }

        init(fields: JSONObject) throws(PayloadError) {
            forSet = try fields.integer("for_set")
            loadKg = try fields.optionalNumber("load_kg")
            method = try fields.optionalString("method")
            loads = try fields.integer("loads")
            targetMps = try fields.number("target_mps")
            fewerSets = fields["fewer_sets"] == .bool(true)
            fewerSetsReason = try fields.optionalString("fewer_sets_reason")
            reason = try fields.string("reason")
            applied = fields["applied"] == .bool(true)
        }

        func write(to writer: inout JSONWriter) {
            writer.beginObject()
            writer.field("for_set", forSet)
            writer.optionalField("load_kg", loadKg)
            writer.optionalField("method", method)
            writer.field("loads", loads)
            writer.field("target_mps", targetMps)
            writer.key("fewer_sets")
            writer.bool(fewerSets)
            writer.optionalField("fewer_sets_reason", fewerSetsReason)
            writer.field("reason", reason)
            writer.key("applied")
            writer.bool(applied)
            writer.endObject()
        }
    }

    /// Creates a workout message.
    public init(
        event: String, state: State, plan: String?, exercise: String?, loadKg: Double?, set: Int, sets: Int?, reps: Int?,
        exerciseIndex: Int?, exercises: Int?, setsDone: Int, restS: Double, vlThresholdPct: Double, nextExercise: String?
    ) {
        (self.event, self.state, self.plan, self.exercise, self.loadKg, self.set, self.sets) = (event, state, plan, exercise, loadKg, set, sets)
        (self.reps, self.exerciseIndex, self.exercises, self.setsDone, self.restS) = (reps, exerciseIndex, exercises, setsDone, restS)
        (self.vlThresholdPct, self.nextExercise) = (vlThresholdPct, nextExercise)
    }

    /// The message with a mean-velocity target.
    public func targeting(_ mps: Double?) -> WorkoutMessage {
        var message = self
        message.targetMeanVelocityMps = mps
        return message
    }

    public init(fields: JSONObject) throws(PayloadError) {
        event = try fields.string("event")
        state = try fields.choice("state", State.self)
        plan = try fields.optionalString("plan")
        exercise = try fields.optionalString("exercise")
        loadKg = try fields.optionalNumber("load_kg")
        set = try fields.integer("set")
        sets = try fields.optionalInteger("sets")
        reps = try fields.optionalInteger("reps")
        exerciseIndex = try fields.optionalInteger("exercise_index")
        exercises = try fields.optionalInteger("exercises")
        setsDone = try fields.integer("sets_done")
        restS = try fields.number("rest_s")
        vlThresholdPct = try fields.number("vl_threshold_pct")
        nextExercise = try fields.optionalString("next_exercise")
        targetMeanVelocityMps = try fields.optionalNumber("target_mean_velocity_mps")
        if let object = try fields.optionalObject("advice") { advice = try Advice(fields: object) }
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("event", event)
        writer.field("state", state.rawValue)
        writer.optionalField("plan", plan)
        writer.optionalField("exercise", exercise)
        writer.optionalField("load_kg", loadKg)
        writer.field("set", set)
        if let sets { writer.field("sets", sets) }
        if let reps { writer.field("reps", reps) }
        if let exerciseIndex { writer.field("exercise_index", exerciseIndex) }
        if let exercises { writer.field("exercises", exercises) }
        writer.field("sets_done", setsDone)
        writer.field("rest_s", restS)
        writer.field("vl_threshold_pct", vlThresholdPct)
        writer.optionalField("next_exercise", nextExercise)
        writer.optionalField("target_mean_velocity_mps", targetMeanVelocityMps)
        if let advice {
            writer.key("advice")
            advice.write(to: &writer)
        }
    }
}
