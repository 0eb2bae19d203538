// The rep detector's messages (proto/rep, set, rejected, takeover, handoff).

/// A rep's measured figures: what the detector measures of a concentric phase and the rep
/// message carries as it is (the detector's `RepMeasurement` holds one). A figure added here and
/// in `RepMessage.fields` is measured, published, decoded and stored with no other mapping.
public struct RepFigures: Sendable, Equatable, Codable {
    /// Mean concentric velocity: displacement / duration.
    public var meanVelocityMps: Double
    /// Highest instantaneous velocity in the concentric phase.
    public var peakVelocityMps: Double
    /// Mean velocity until the bar first decelerates faster than gravity (a < -g).
    public var meanPropulsiveVelocityMps: Double
    /// Bar travel of the concentric phase.
    public var romMm: Double
    /// Duration of the concentric phase.
    public var concentricS: Double
    /// From the concentric phase's start to its peak velocity.
    public var timeToPeakS: Double
    /// Mean of m (a + g) v over the concentric phase, when the load is known.
    public var meanPowerW: Double?
    /// Highest m (a + g) v in the concentric phase, when the load is known.
    public var peakPowerW: Double? = nil

    /// Creates the figures.
    public init(
        meanVelocityMps: Double, peakVelocityMps: Double, meanPropulsiveVelocityMps: Double, romMm: Double, concentricS: Double,
        timeToPeakS: Double, meanPowerW: Double? = nil
    ) {
        (self.meanVelocityMps, self.peakVelocityMps, self.meanPropulsiveVelocityMps) = (meanVelocityMps, peakVelocityMps, meanPropulsiveVelocityMps)
        (self.romMm, self.concentricS, self.timeToPeakS, self.meanPowerW) = (romMm, concentricS, timeToPeakS, meanPowerW)
    }
}

/// `rep`: one counted repetition with its metrics. Its fields are declared once, in `fields`;
/// the measured figures (`figures`) read as the rep's own (`rep.meanVelocityMps`).
@dynamicMemberLookup
public struct RepMessage: BusPayload, Equatable {
    public static let type = "rep"
    public var setId: String
    /// Deterministic: `<station>-<microseconds of the rep's highest sample>`.
    public var repId: String
    public var index: Int
    /// What the detector measured of the concentric phase.
    public var figures: RepFigures
    public var velocityLossPct: Double
    /// Reading time of the sample that completed the rep.
    public var tEnd: Double
    /// The detector instance that published it.
    public var detector: String
    /// Reading times of the concentric phase's start and end (absent from
    /// older detectors; never invented when absent).
    public var concentricStartT: Double?
    public var concentricEndT: Double?
    public var exercise: String?
    public var loadKg: Double?
    public var zone: String?
    /// `distance` or `imu`.
    public var sensor: String?
    /// Reading time of the last reading of the sample message whose arrival
    /// let the detector count the rep: `t_end`, or later when the detector
    /// needed readings past it (its smoothing). Absent for a rep a command made.
    public var tInput: Double?
    /// When the detector took the sample message holding the completing reading from its input
    /// (Unix seconds, its computer's clock): with the envelope's `ts`, the detector's own share of
    /// the rep's latency (`vbt loadtest`'s stages). Absent for a rep a command made.
    public var receivedTs: Double?
    /// Seconds between the completing reading's own time (`t_input`, else `t_end`) and the rep's
    /// publication, when over `lateAfterS`: the readings reached the detector late (fetched from
    /// the bridge's journal after an outage, or the detector catching up after a restart). Nil
    /// for a live rep; written as `late: true` with `late_s`.
    public var lateS: Double?
    /// The phases that led into the concentric one (docs/detection.md "Phases and tempo"), all
    /// absent where the detector saw no descent and from detectors before them: the descent's
    /// duration and mean speed (positive, m/s), the pause at the bottom, and the pause at the
    /// top after the previous rep of the set (absent on a set's first rep).
    public var eccentricS: Double?
    public var eccentricMeanMps: Double?
    public var pauseBottomS: Double?
    public var pauseTopS: Double?
    /// The prescribed tempo ("3-1-X-0"), whether the rep met it (absent when no phase could be
    /// judged) and the phases that missed (`eccentric`, `pause_bottom`, `concentric`, `pause_top`).
    public var tempo: String?
    public var tempoMet: Bool?
    public var tempoMissed: [String]?

    /// The fields in wire order (proto/rep.schema.json): the decoder, the encoder and the
    /// recorder's row (the column is the key unless a row names another, or none) come from
    /// here. Times keep microseconds (6 decimals), `late_s` milliseconds.
    public static let fields: [PayloadField<RepMessage>] = [
        .string("set_id", \.setId),
        .string("rep_id", \.repId, column: .named("id")),
        .integer("index", \.index, column: .named("idx")),
        .number("mean_velocity_mps", \.figures.meanVelocityMps),
        .number("peak_velocity_mps", \.figures.peakVelocityMps),
        .number("mean_propulsive_velocity_mps", \.figures.meanPropulsiveVelocityMps),
        .number("rom_mm", \.figures.romMm),
        .number("concentric_s", \.figures.concentricS),
        .number("time_to_peak_s", \.figures.timeToPeakS),
        .number("velocity_loss_pct", \.velocityLossPct),
        .number("t_end", \.tEnd, decimals: 6),
        .string("detector", \.detector),
        .optionalNumber("concentric_start_t", \.concentricStartT, column: .none),
        .optionalNumber("concentric_end_t", \.concentricEndT, column: .none),
        .optionalString("exercise", \.exercise),
        .optionalNumber("load_kg", \.loadKg),
        .optionalString("zone", \.zone),
        .optionalNumber("mean_power_w", \.figures.meanPowerW),
        .optionalNumber("peak_power_w", \.figures.peakPowerW),
        .optionalString("sensor", \.sensor),
        .optionalNumber("t_input", \.tInput, decimals: 6, column: .none),
        .optionalNumber("received_ts", \.receivedTs, decimals: 6, column: .none),
        .optionalNumber("late_s", \.lateS, decimals: 3, marker: "late"),
        .optionalNumber("eccentric_s", \.eccentricS),
        .optionalNumber("eccentric_mean_mps", \.eccentricMeanMps),
        .optionalNumber("pause_bottom_s", \.pauseBottomS),
        .optionalNumber("pause_top_s", \.pauseTopS),
        .optionalString("tempo", \.tempo),
        .optionalFlag("tempo_met", \.tempoMet),
        .optionalStrings("tempo_missed", \.tempoMissed),
    ]

    /// A rep's figure, as if it were the rep's own property.
    public subscript<T>(dynamicMember path: WritableKeyPath<RepFigures, T>) -> T {
        get { figures[keyPath: path] }
        set { figures[keyPath: path] = newValue }
    }

    /// A rep published more than this long after its completing reading is late. Live, a rep
    /// reaches the bus a few tens of milliseconds after that reading (docs/performance.md), and
    /// the gym's computers keep their clocks within milliseconds of each other (NTP): one second
    /// leaves room for both, and is well under what a coach notices as "just now".
    public static let lateAfterS = 1.0

    /// Whether the rep came late (`lateS` set).
    public var isLate: Bool { lateS != nil }

    /// Marks the rep late when `publishedAt` (Unix seconds) is more than `lateAfterS` after its
    /// completing reading; clears the mark otherwise.
    public mutating func markLateness(publishedAt: Double) {
        let delay = publishedAt - (tInput ?? tEnd)
        lateS = delay > Self.lateAfterS ? delay : nil
    }

    /// Creates a rep message from the detector's figures.
    public init(
        setId: String, repId: String, index: Int, figures: RepFigures, velocityLossPct: Double, tEnd: Double, detector: String,
        concentricStartT: Double?, concentricEndT: Double?, exercise: String? = nil, loadKg: Double? = nil, zone: String? = nil,
        sensor: String? = nil
    ) {
        (self.setId, self.repId, self.index, self.figures, self.velocityLossPct) = (setId, repId, index, figures, velocityLossPct)
        (self.tEnd, self.detector, self.concentricStartT, self.concentricEndT) = (tEnd, detector, concentricStartT, concentricEndT)
        (self.exercise, self.loadKg, self.zone, self.sensor) = (exercise, loadKg, zone, sensor)
    }

    /// Creates a rep message.
    public init(
        setId: String, repId: String, index: Int, meanVelocityMps: Double, peakVelocityMps: Double,
        meanPropulsiveVelocityMps: Double, romMm: Double, concentricS: Double, timeToPeakS: Double,
        velocityLossPct: Double, tEnd: Double, detector: String, concentricStartT: Double?, concentricEndT: Double?,
        exercise: String? = nil, loadKg: Double? = nil, zone: String? = nil, meanPowerW: Double? = nil, sensor: String? = nil
    ) {
        let figures = RepFigures(
            meanVelocityMps: meanVelocityMps, peakVelocityMps: peakVelocityMps, meanPropulsiveVelocityMps: meanPropulsiveVelocityMps,
            romMm: romMm, concentricS: concentricS, timeToPeakS: timeToPeakS, meanPowerW: meanPowerW)
        self.init(
            setId: setId, repId: repId, index: index, figures: figures, velocityLossPct: velocityLossPct, tEnd: tEnd, detector: detector,
            concentricStartT: concentricStartT, concentricEndT: concentricEndT, exercise: exercise, loadKg: loadKg, zone: zone, sensor: sensor)
    }

    /// What the table reads into: every required field is overwritten, every optional one starts absent.
    private static let blank = RepMessage(
        setId: "", repId: "", index: 0,
        figures: RepFigures(meanVelocityMps: 0, peakVelocityMps: 0, meanPropulsiveVelocityMps: 0, romMm: 0, concentricS: 0, timeToPeakS: 0),
        velocityLossPct: 0, tEnd: 0, detector: "", concentricStartT: nil, concentricEndT: nil)

    public init(fields: JSONObject) throws(PayloadError) {
        self = try Self.fields.read(into: Self.blank, from: fields)
        // `late_s` counts only with `late: true` (the schema asks for both or neither).
        let late = try fields.optionalFlag("late") == true
        guard late == (lateS != nil) else { throw PayloadError("late and late_s come together") }
        if let lateS, lateS < 0 { throw PayloadError("late_s must not be negative") }
    }

    public func write(to writer: inout JSONWriter) {
        Self.fields.write(self, to: &writer)
    }
}

/// `set`: a set started or ended.
public struct SetMessage: BusPayload, Equatable {
    public static let type = "set"
    public enum Event: String, Sendable { case start, end }
    public enum Reason: String, Sendable { case idle, velocityLoss = "velocity-loss", command }
    public var setId: String
    public var event: Event
    public var reps: Int?
    public var reason: Reason?
    public var bestMeanVelocityMps: Double?
    public var velocityLossPct: Double?
    public var exercise: String?
    public var loadKg: Double?

    /// Creates a set message.
    public init(
        setId: String, event: Event, reps: Int? = nil, reason: Reason? = nil, bestMeanVelocityMps: Double? = nil,
        velocityLossPct: Double? = nil, exercise: String? = nil, loadKg: Double? = nil
    ) {
        (self.setId, self.event, self.reps, self.reason, self.bestMeanVelocityMps) = (setId, event, reps, reason, bestMeanVelocityMps)
        (self.velocityLossPct, self.exercise, self.loadKg) = (velocityLossPct, exercise, loadKg)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        setId = try fields.string("set_id")
        event = try fields.choice("event", Event.self)
        reps = try fields.optionalInteger("reps")
        reason = try fields.optionalChoice("reason", Reason.self)
        bestMeanVelocityMps = try fields.optionalNumber("best_mean_velocity_mps")
        velocityLossPct = try fields.optionalNumber("velocity_loss_pct")
        exercise = try fields.optionalString("exercise")
        loadKg = try fields.optionalNumber("load_kg")
        if event == .end, reps == nil || reason == nil || velocityLossPct == nil {
            throw PayloadError("a set end needs reps, reason and velocity_loss_pct")
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("set_id", setId)
        writer.field("event", event.rawValue)
        if let reps { writer.field("reps", reps) }
        writer.optionalField("reason", reason?.rawValue)
        // A set that ended without a rep has no best velocity: 0 says "none" where the schema needs a number.
        if event == .end { writer.field("best_mean_velocity_mps", bestMeanVelocityMps ?? 0) }
        writer.optionalField("velocity_loss_pct", velocityLossPct)
        writer.optionalField("exercise", exercise)
        writer.optionalField("load_kg", loadKg)
    }
}

/// `rejected`: a rep attempt that did not count, with the reason.
public struct RejectedMessage: BusPayload, Equatable {
    public static let type = "rejected"
    /// `partial`, `rom-too-long`, `too-fast`, `too-slow` or `refractory`.
    public var reason: String
    /// Human-readable detail, with the numbers.
    public var detail: String
    public var romMm: Double
    public var concentricS: Double
    public var meanVelocityMps: Double
    public var tEnd: Double
    public var detector: String
    public var sensor: String?

    /// Creates a rejection.
    public init(reason: String, detail: String, romMm: Double, concentricS: Double, meanVelocityMps: Double, tEnd: Double, detector: String, sensor: String?) {
        (self.reason, self.detail, self.romMm, self.concentricS, self.meanVelocityMps, self.tEnd, self.detector, self.sensor) =
            (reason, detail, romMm, concentricS, meanVelocityMps, tEnd, detector, sensor)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        reason = try fields.string("reason")
        detail = try fields.string("detail")
        romMm = try fields.number("rom_mm")
        concentricS = try fields.number("concentric_s")
        meanVelocityMps = try fields.number("mean_velocity_mps")
        tEnd = try fields.number("t_end")
        detector = try fields.string("detector")
        sensor = try fields.optionalString("sensor")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("reason", reason)
        writer.field("detail", detail)
        writer.field("rom_mm", romMm)
        writer.field("concentric_s", concentricS)
        writer.field("mean_velocity_mps", meanVelocityMps)
        writer.key("t_end"); writer.fixed(tEnd, decimals: 6)
        writer.field("detector", detector)
        writer.optionalField("sensor", sensor)
    }
}

/// `profile`: an athlete's load-velocity profile for an exercise.
public struct ProfileMessage: BusPayload, Equatable {
    public static let type = "profile"
    public var exercise: String
    /// The loads with a set this session, lightest first.
    public var loadsKg: [Double]
    /// The fastest mean velocity at each of those loads.
    public var meanVelocitiesMps: [Double]
    public var interceptMps: Double
    public var slopeMpsPerKg: Double
    public var r2: Double
    /// The minimal velocity threshold used for e1RM.
    public var mvtMps: Double
    public var e1rmKg: Double?

    /// Creates a profile message.
    public init(
        exercise: String, loadsKg: [Double], meanVelocitiesMps: [Double], interceptMps: Double, slopeMpsPerKg: Double,
        r2: Double, mvtMps: Double, e1rmKg: Double?
    ) {
        (self.exercise, self.loadsKg, self.meanVelocitiesMps, self.interceptMps) = (exercise, loadsKg, meanVelocitiesMps, interceptMps)
        (self.slopeMpsPerKg, self.r2, self.mvtMps, self.e1rmKg) = (slopeMpsPerKg, r2, mvtMps, e1rmKg)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        exercise = try fields.string("exercise")
        loadsKg = try fields.numbers("loads_kg")
        meanVelocitiesMps = try fields.numbers("mean_velocities_mps")
        interceptMps = try fields.number("intercept_mps")
        slopeMpsPerKg = try fields.number("slope_mps_per_kg")
        r2 = try fields.number("r2")
        mvtMps = try fields.number("mvt_mps")
        e1rmKg = try fields.optionalNumber("e1rm_kg")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("exercise", exercise)
        writer.key("loads_kg"); writer.numbers(loadsKg)
        writer.key("mean_velocities_mps"); writer.numbers(meanVelocitiesMps)
        writer.field("intercept_mps", interceptMps)
        writer.field("slope_mps_per_kg", slopeMpsPerKg)
        writer.field("r2", r2)
        writer.field("mvt_mps", mvtMps)
        writer.optionalField("e1rm_kg", e1rmKg)
    }
}

/// `takeover`: a new detector asks the running one to hand its stations over.
public struct TakeoverMessage: BusPayload, Equatable {
    public static let type = "takeover"
    /// The new detector's instance.
    public var instance: String
    /// The stations it serves (its --stations glob): only a detector serving the same stations hands over.
    public var stations: String
    /// Its --shard (`K/N`) when several detectors split the gym; nil (absent) for one that does
    /// not. Only a detector with the same glob and the same shard hands over.
    public var shard: String?
    /// The first sequence number it holds, per input stream: the old one must
    /// process at least up to the one before, so nothing falls between them.
    public var firstSeq: [String: Int]

    /// Creates a request.
    public init(instance: String, stations: String, shard: String? = nil, firstSeq: [String: Int]) {
        (self.instance, self.stations, self.shard, self.firstSeq) = (instance, stations, shard, firstSeq)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        instance = try fields.string("instance")
        stations = try fields.string("stations")
        shard = try fields.optionalString("shard")
        firstSeq = try fields.seqMap("first_seq")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("instance", instance)
        writer.field("stations", stations)
        writer.optionalField("shard", shard)
        writer.writeSeqMap("first_seq", firstSeq)
    }
}

/// `handoff`: the running detector's state for one station, or (station
/// `detector`, `done` true) the end of the hand-over with the input positions.
public struct HandoffMessage: BusPayload, Equatable {
    public static let type = "handoff"
    /// The detector handing over.
    public var from: String
    /// The detector taking over.
    public var to: String
    /// The station's detector state (JSON text), absent on the final message.
    public var state: String?
    /// True on the final message.
    public var done: Bool
    /// On the final message: the last sequence number processed per input stream.
    public var positions: [String: Int]

    /// Creates a hand-over message.
    public init(from: String, to: String, state: String?, done: Bool, positions: [String: Int]) {
        (self.from, self.to, self.state, self.done, self.positions) = (from, to, state, done, positions)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        from = try fields.string("from")
        to = try fields.string("to")
        state = try fields.optionalString("state")
        guard case .bool(let flag)? = fields["done"] else { throw PayloadError("done must be a boolean") }
        done = flag
        positions = try fields.seqMap("positions")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("from", from)
        writer.field("to", to)
        writer.optionalField("state", state)
        writer.key("done"); writer.bool(done)
        writer.writeSeqMap("positions", positions)
    }
}

extension JSONObject {
    /// A required array of numbers.
    func numbers(_ key: String) throws(PayloadError) -> [Double] {
        guard case .array(let items)? = self[key] else { throw PayloadError("\(key) must be an array of numbers") }
        var values: [Double] = []
        for item in items {
            guard case .number(let value) = item else { throw PayloadError("\(key) must be an array of numbers") }
            values.append(value)
        }
        return values
    }

    /// An object of stream name -> sequence number.
    func seqMap(_ key: String) throws(PayloadError) -> [String: Int] {
        guard let object = try optionalObject(key) else { return [:] }
        var map: [String: Int] = [:]
        for field in object.fields {
            guard case .number(let value) = field.value, value == value.rounded(), value >= 0, value <= 9_007_199_254_740_991 else {
                throw PayloadError("\(key) holds sequence numbers (whole numbers from 0 to 2^53)")
            }
            map[field.key] = Int(value)
        }
        return map
    }
}

extension JSONWriter {
    mutating func writeSeqMap(_ key: StaticString, _ map: [String: Int]) {
        self.key(key)
        beginObject()
        for (name, value) in map.sorted(by: { $0.key < $1.key }) {
            self.key(name)
            int(value)
        }
        endObject()
    }
}
