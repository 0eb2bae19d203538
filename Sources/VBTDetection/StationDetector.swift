import Foundation
import VBTQuery
import VBTWire

// One station's detector: a value fed readings in time order (and commands),
// returning reps, rejections and set events. Everything it knows is in its
// Codable state, so a running detector can hand a station over to another
// process mid-rep and the other continues exactly where it stopped.

/// What the detector knows about an exercise.
public struct ExerciseProfile: Sendable, Codable, Equatable {
    public var name: String
    /// Expected bar travel of a full rep (a starting point; the athlete's own is learned).
    public var romMm: Double
    /// Mean velocity at 1RM (minimal velocity threshold), for e1RM.
    public var mvtMps: Double

    /// The built-in catalogue (MVTs: González-Badillo & Sánchez-Medina 2010, Int J Sports Med 31(5), bench 0.17; Sánchez-Medina et al. 2017, Int J Sports Med 38(3), squat 0.30; ROMs typical of an adult).
    public static let catalogue: [String: ExerciseProfile] = [
        "squat": .init(name: "squat", romMm: 600, mvtMps: 0.30),
        "bench": .init(name: "bench", romMm: 450, mvtMps: 0.17),
        "deadlift": .init(name: "deadlift", romMm: 550, mvtMps: 0.15),
        "generic": .init(name: "generic", romMm: 500, mvtMps: 0.30),
    ]
    /// Used when a station has no assignment.
    public static let defaultExercise = "generic"
}

/// A velocity zone (the README's defaults; configurable).
public struct VelocityZone: Sendable, Codable, Equatable {
    public var name: String
    /// Lower bound of mean velocity, m/s (inclusive).
    public var fromMps: Double
    /// Shortest believable concentric phase when this is the target zone.
    public var minConcentricS: Double

    /// max strength < 0.30, strength 0.30-0.50, strength-speed 0.50-0.75, speed 0.75-1.00, max speed > 1.00.
    public static let defaults: [VelocityZone] = [
        .init(name: "max-strength", fromMps: 0, minConcentricS: 0.5),
        .init(name: "strength", fromMps: 0.30, minConcentricS: 0.4),
        .init(name: "strength-speed", fromMps: 0.50, minConcentricS: 0.3),
        .init(name: "speed", fromMps: 0.75, minConcentricS: 0.2),
        .init(name: "max-speed", fromMps: 1.00, minConcentricS: 0.15),
    ]

    /// The zone a mean velocity falls in.
    public static func zone(for velocity: Double, in zones: [VelocityZone] = defaults) -> VelocityZone {
        zones.last { velocity >= $0.fromMps } ?? zones[0]
    }
}

/// Who lifts what at a station (from an `athlete.assign` command).
public struct Assignment: Sendable, Codable, Equatable {
    public var athlete: String?
    public var exercise = ExerciseProfile.defaultExercise
    public var loadKg: Double?
    /// Velocity loss that stops the set.
    public var velocityLossThresholdPct = 20.0
    /// The reference rep for velocity loss: the fastest so far, or the first.
    public var velocityLossReference = VelocityLossReference.fastest
    /// The zone the athlete trains in; sets the minimum concentric duration.
    public var targetZone: String?
    /// The athlete's own ROM for the exercise, when known.
    public var romMm: Double?
    /// The exercise's MVT, for an exercise without a built-in profile.
    public var mvtMps: Double?
    /// The prescribed tempo, "E-B-C-T" (Phases.swift): each rep is judged against it.
    public var tempo: Tempo?
    /// Creates the defaults.
    public init() {}
}

/// Which rep velocity loss is measured against.
public enum VelocityLossReference: String, Sendable, Codable { case fastest, first }

/// Tunables with their defaults (README, "rep-detector").
public struct DetectorSettings: Sendable, Codable, Equatable {
    /// A set ends after this long without a rep (reading time).
    public var idleTimeoutS = 10.0
    /// Shortest time between one rep's end and the next rep's start.
    public var refractoryS = 0.25
    /// Turning-point hysteresis (movements smaller than this are not rises).
    public var hysteresisM = 0.04
    /// A pause this long at the top completes a rep.
    public var settleS = 0.15
    /// ROM tolerance: expected x (1 +- this) +- 10 mm.
    public var romTolerance = 0.15
    /// Rises smaller than this share of the expected ROM are movements (un-racking,
    /// re-racking, walk-outs), not rep attempts: ignored without a rejection.
    public var attemptShare = 0.3
    /// The minimum concentric duration without a target zone.
    public var defaultMinConcentricS = 0.15
    /// EMA factor for the distance sensor's state machine (0.3).
    public var emaAlpha = 0.3
    public var zones = VelocityZone.defaults
    /// Creates the defaults.
    public init() {}
}

/// A rep as published.
public struct DetectedRep: Sendable, Codable, Equatable {
    public var station: String
    public var setId: String
    public var repId: String
    public var index: Int
    public var measurement: RepMeasurement
    public var velocityLossPct: Double
    public var zone: String
    /// The reading that completed the rep.
    public var tEnd: Double
    public var exercise: String
    public var loadKg: Double?
    public var athlete: String?
    public var sensor: String
    /// The phases that led into the concentric one (Phases.swift); nil where no descent was seen.
    public var phases: RepPhases?
    /// The prescribed tempo and whether the rep met it, when one was prescribed.
    public var tempo: Tempo?
    public var tempoVerdict: TempoVerdict?
}

/// A rep attempt that did not count, and why.
public struct RejectedRep: Sendable, Codable, Equatable {
    public var station: String
    public var reason: String
    public var detail: String
    public var measurement: RepMeasurement
    public var tEnd: Double
    public var sensor: String
}

/// A set's start or end.
public struct SetEvent: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable { case start, end }
    public enum Reason: String, Sendable, Codable { case idle, velocityLoss = "velocity-loss", command }
    public var station: String
    public var setId: String
    public var kind: Kind
    public var reason: Reason?
    public var reps: Int
    public var bestMeanVelocityMps: Double?
    public var velocityLossPct: Double?
    public var exercise: String
    public var loadKg: Double?
    public var athlete: String?
    /// Reading time of the event.
    public var t: Double
}

/// A load-velocity profile: v = intercept + slope x load over the fastest
/// rep at each load, and the load where the line meets the exercise's MVT.
public struct LoadVelocityProfile: Sendable, Codable, Equatable {
    public var station: String
    public var athlete: String?
    public var exercise: String
    /// (load kg, best mean velocity m/s), one per load, lightest first.
    public var points: [Point]
    public var interceptMps: Double
    public var slopeMpsPerKg: Double
    /// Coefficient of determination of the fit (1 = every point on the line).
    public var r2: Double
    public var mvtMps: Double
    /// Estimated 1RM: (MVT - intercept) / slope; nil unless velocity falls with load and the
    /// line is above the MVT at no load.
    public var e1rmKg: Double?

    public struct Point: Sendable, Codable, Equatable {
        public var loadKg: Double
        public var meanVelocityMps: Double
        /// Creates a point.
        public init(loadKg: Double, meanVelocityMps: Double) { (self.loadKg, self.meanVelocityMps) = (loadKg, meanVelocityMps) }
    }

    /// Fits `points` (at least two different loads; nil otherwise) with the one e1RM estimator
    /// (`E1RMEstimator`, docs/detection.md "e1RM"), so the profile message gives the number the
    /// recorder's `progress` gives for the same reps.
    public static func fit(station: String, athlete: String?, exercise: ExerciseProfile, points: [Point]) -> LoadVelocityProfile? {
        guard
            let fit = E1RMEstimator.fit(
                points: points.map { LoadVelocityFit.Point(loadKg: $0.loadKg, meanVelocityMps: $0.meanVelocityMps) }, mvtMps: exercise.mvtMps)
        else { return nil }
        return LoadVelocityProfile(
            station: station, athlete: athlete, exercise: exercise.name,
            points: fit.points.map { Point(loadKg: $0.loadKg, meanVelocityMps: $0.meanVelocityMps) }, interceptMps: fit.interceptMps,
            slopeMpsPerKg: fit.slopeMpsPerKg, r2: fit.r2, mvtMps: exercise.mvtMps, e1rmKg: fit.e1rmKg)
    }
}

/// What feeding the detector produced.
public enum DetectorOutput: Sendable, Equatable {
    case rep(DetectedRep)
    case rejected(RejectedRep)
    case set(SetEvent)
    /// The load-velocity profile after a set at a new load, from two loads on.
    case profile(LoadVelocityProfile)
    /// A pattern learned from a finished set (to be stored).
    case pattern(RepPattern)
}

/// The detector of one station.
public struct StationDetector: Sendable, Codable {
    public let station: String
    public var settings: DetectorSettings
    public var assignment = Assignment()
    private var distance: DistanceTracker
    private var imu: IMUTracker
    /// Reading time of the last distance reading: while the laser speaks, the IMU is not used.
    private var lastDistanceT = -Double.infinity
    private var openSet: OpenSet?
    /// A rise waiting for what follows it (see `returnShare`).
    private var pending: Pending?
    /// A rise shorter than a rep that ended in a pause: held a moment in case the bar goes on up
    /// without coming down first (a grinder past its sticking point), when the two are one rep.
    private var held: Pending?
    /// Where (m, the bar IMU's height) a held IMU rise stopped when it was judged with the bar
    /// still there: a rise from there went on up from a stall (`rackRiseShare`). Cleared by the
    /// next IMU rise.
    private var stalledTopM: Double?
    /// How low the bar has gone since the pending rise's peak, kept between readings. Not
    /// checkpointed: a restored station looks back over its points once.
    private var pendingLow: PendingLow?
    /// The athlete's ROM learned from accepted reps, per exercise.
    private var learnedRomMm: [String: Double] = [:]
    /// How uncertain each learned ROM is (the sensor's, one standard deviation, mm).
    private var learnedRomSdMm: [String: Double] = [:]
    /// ROMs of the attempts since the last rep that fell outside the learned ROM, per exercise.
    private var romMisses: [String: [Double]] = [:]
    /// Whether each of those attempts had a rep's shape (`repShaped`), in the same order.
    private var romMissShapes: [String: [Bool]] = [:]
    private var lastRepEndT = -Double.infinity
    /// Learned patterns (all exercises): the runtime's pattern library, given again when it changes.
    /// Not checkpointed: the library has a file of its own, and written into each of a thousand
    /// stations it would be a sixth of the rep-detector's checkpoint.
    public var patterns: [RepPattern] = []
    /// Which version of its pattern library the runtime last gave (`patterns`); not checkpointed,
    /// so a restored or handed-over station is given the library anew.
    public var patternsVersion = -1
    /// Patterns this station learned since it was made, used from its next set on whether or
    /// not the runtime has given its library again yet (so live and `vbt eval` match).
    private var ownPatterns: [RepPattern] = []
    /// Fastest mean velocity per load, per athlete (or station) and exercise, this session.
    private var profilePoints: [String: [Double: Double]] = [:]
    /// Reading time of the newest reading seen.
    public private(set) var lastReadingT = -Double.infinity
    /// The last command that changed the assignment (its envelope `ts` and id): a stored
    /// assignment newer than it is one this detector missed (Feeding.swift, `catchUp`).
    public var lastCommand: AppliedCommand?

    struct OpenSet: Sendable, Codable {
        var setId: String
        var reps: [Double]  // mean velocities
        var curves: [[Double]] = []  // each rep's velocity curve, for pattern learning
        var lastRepT: Double
        var startT: Double
    }

    /// What a checkpoint or a hand-over keeps: everything but the patterns (see `patterns`).
    private enum CodingKeys: String, CodingKey {
        case station, settings, assignment, distance, imu, lastDistanceT, openSet, pending, held, learnedRomMm, learnedRomSdMm, romMisses
        case romMissShapes, lastRepEndT, profilePoints, lastReadingT, lastCommand, stalledTopM
    }

    /// Reads a checkpoint or a hand-over; one an earlier build wrote holds no `held` rise, no `lastCommand`, no `stalledTopM`
    /// and no `romMissShapes`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        station = try c.decode(String.self, forKey: .station)
        settings = try c.decode(DetectorSettings.self, forKey: .settings)
        assignment = try c.decode(Assignment.self, forKey: .assignment)
        distance = try c.decode(DistanceTracker.self, forKey: .distance)
        imu = try c.decode(IMUTracker.self, forKey: .imu)
        lastDistanceT = try c.decode(Double.self, forKey: .lastDistanceT)
        openSet = try c.decodeIfPresent(OpenSet.self, forKey: .openSet)
        pending = try c.decodeIfPresent(Pending.self, forKey: .pending)
        held = try c.decodeIfPresent(Pending.self, forKey: .held)
        learnedRomMm = try c.decode([String: Double].self, forKey: .learnedRomMm)
        learnedRomSdMm = try c.decode([String: Double].self, forKey: .learnedRomSdMm)
        romMisses = try c.decode([String: [Double]].self, forKey: .romMisses)
        romMissShapes = try c.decodeIfPresent([String: [Bool]].self, forKey: .romMissShapes) ?? [:]
        lastRepEndT = try c.decode(Double.self, forKey: .lastRepEndT)
        profilePoints = try c.decode([String: [Double: Double]].self, forKey: .profilePoints)
        lastReadingT = try c.decode(Double.self, forKey: .lastReadingT)
        // A state written before it was kept has none: any stored assignment is then newer.
        lastCommand = try c.decodeIfPresent(AppliedCommand.self, forKey: .lastCommand)
        stalledTopM = try c.decodeIfPresent(Double.self, forKey: .stalledTopM)
    }

    /// Creates a detector for `station`.
    public init(station: String, settings: DetectorSettings = DetectorSettings()) {
        self.station = station
        self.settings = settings
        distance = DistanceTracker(settings: settings)
        imu = IMUTracker(settings: settings)
    }

    /// Whether a set is open.
    public var setIsOpen: Bool { openSet != nil }

    // MARK: Feeding

    /// Feeds one laser reading (bar height rises with the distance), with the
    /// laser unit's accelerometer when it sends one (any units: see Fusion.swift).
    public mutating func feedDistance(t: Double, distanceMm: Double, accG: (Double, Double, Double)? = nil) -> [DetectorOutput] {
        guard t > lastDistanceT else { return [] }  // repeated or out-of-order reading
        var out = closeIdleSet(at: t)
        lastReadingT = max(lastReadingT, t)
        lastDistanceT = t
        for (candidate, trace, endpoints) in distance.feed(t: t, distanceMm: distanceMm, accG: accG, previousTopT: previousTopT) {
            out += arrive(Pending(candidate: candidate, trace: trace, endpoints: endpoints, sensor: "distance"))
        }
        out += resolveHeld(at: t)
        out += resolvePending(by: .distance, at: t)
        return out
    }

    /// The readings have ended (the end of a recording): a rise in progress is complete where
    /// it stands, a held one is judged, and one still waiting for its lowering is no rep. Every
    /// attempt the readings hold is then a rep or a rejection.
    public mutating func finish(at t: Double) -> [DetectorOutput] {
        var out: [DetectorOutput] = []
        for (candidate, trace, endpoints) in distance.finish(at: t, previousTopT: previousTopT) {
            out += arrive(Pending(candidate: candidate, trace: trace, endpoints: endpoints, sensor: "distance"))
        }
        if let waiting = held {
            held = nil
            out += consider(waiting, atOnce: waiting.atOnce ?? false)
        }
        if let waiting = pending {
            pending = nil
            out += notARep(waiting, because: "it was neither lowered into nor lowered from before the readings ended")
        }
        return out
    }

    /// Whether an IMU reading at `t` would be used: only while no laser has spoken for 2 s.
    public func usesIMU(at t: Double) -> Bool { t - lastDistanceT > 2 }

    /// What feeding IMU readings at `times` does while the laser speaks (`usesIMU` false for
    /// each; their values are not used): the station's reading time moves on, and a set idle
    /// long enough ends. The runtime then need not build the readings.
    public mutating func feedUnusedIMU(times: [Double]) -> [DetectorOutput] {
        var out: [DetectorOutput] = []
        for t in times {
            out += closeIdleSet(at: t)
            lastReadingT = max(lastReadingT, t)
        }
        return out
    }

    /// Feeds one IMU reading (used only while no laser speaks at the station):
    /// acceleration in any units, the gyro in degrees per second when sent,
    /// roll and pitch when the sensor computes them.
    public mutating func feedIMU(
        t: Double, accG: (Double, Double, Double), gyroDps: (Double, Double, Double)? = nil,
        angleDeg: (Double, Double)? = nil
    ) -> [DetectorOutput] {
        var out = closeIdleSet(at: t)
        lastReadingT = max(lastReadingT, t)
        guard usesIMU(at: t) else { return out }
        for rise in imu.feed(t: t, accG: accG, gyroDps: gyroDps, angleDeg: angleDeg) { out += arriveIMU(rise) }
        out += resolveHeldIMU(at: t)
        out += resolvePending(by: .imu, at: t)
        return out
    }

    /// An IMU rise: held when it may be the first part of a grinder (as the laser's, `arrive`), and
    /// taken as the rest of the held one when the bar went on up from it without coming down,
    /// measured over both movements and the crawl between (`IMURise.continued`); else considered.
    private mutating func arriveIMU(_ rise: IMURise) -> [DetectorOutput] {
        var out: [DetectorOutput] = []
        // The bar stopped partway up (a held rise) and went on up from there without coming down.
        let valleyM = rise.candidate.peakM - rise.candidate.riseM
        var wentOnUp = stalledTopM.map { valleyM >= $0 - settings.hysteresisM } ?? false
        stalledTopM = nil
        if let earlier = held, earlier.sensor == "imu" {
            held = nil
            wentOnUp = wentOnUp || valleyM >= earlier.candidate.peakM - settings.hysteresisM
            if let whole = rise.continued, whole.candidate.valleyT == earlier.candidate.valleyT,
                valleyM >= earlier.candidate.peakM - settings.hysteresisM,
                rise.candidate.peakM >= earlier.candidate.peakM + stickingFurtherM(after: earlier.candidate.riseM)
            {
                let pending = Pending(
                    candidate: whole.candidate, trace: whole.trace, endpoints: .fittedPositions, sensor: "imu", atOnce: earlier.atOnce)
                return consider(pending, atOnce: earlier.atOnce ?? false)
            }
            out += consider(earlier, atOnce: earlier.atOnce ?? false)
        }
        let fromTheFloor = rise.fromLowest && Self.pulledFromTheFloor.contains(exercise.name)
        // A rise of a rep's size counts from the rack with no lowering seen, unless it went on up
        // from where the bar stopped partway (`rackRiseShare`).
        let repSized = !wentOnUp && rise.candidate.riseM * 1000 >= Self.rackRiseShare * expectedRomMm
        let fromTheRack = Self.takenFromTheRack.contains(exercise.name) && (rise.candidate.descentBeforeM >= settings.hysteresisM || repSized)
        let atOnce = fromTheFloor || fromTheRack
        let pending = Pending(candidate: rise.candidate, trace: rise.trace, endpoints: .fittedPositions, sensor: "imu", atOnce: atOnce)
        // As the laser's: only a rise that would be judged at its top is held (one that waits for
        // its lowering is no grinder's first part), and only one that ended at a rest.
        let loweredInto = atOnce || rise.candidate.descentBeforeM >= Self.imuLoweredIntoShare * rise.candidate.riseM
        if rise.endsAtRest, loweredInto, rise.candidate.endedInPause, rise.candidate.riseM * 1000 < Self.holdShare * expectedRomMm {
            held = pending
            return out
        }
        return out + consider(pending, atOnce: atOnce)
    }

    /// Judges the held IMU rise once the bar has come down from it, or has stayed at rest for
    /// `holdS` after it; while the bar moves on it waits for the rise that ends that movement.
    private mutating func resolveHeldIMU(at t: Double) -> [DetectorOutput] {
        guard let waiting = held, waiting.sensor == "imu" else { return [] }
        var since = LowestHeight(after: waiting.candidate.peakT)
        let cameDown = (imu.lowest(&since) ?? .infinity) <= waiting.candidate.peakM - settings.hysteresisM
        let waited = t - waiting.candidate.completedT
        // A grinder's crawl can read as a rest, and the rest of its rise then comes in the movement
        // after it, which the tracker gives only once that movement ends, after the bar has come
        // down into the next rep: the bar having gone on up first, the hold waits for that rise.
        let further = stickingFurtherM(after: waiting.candidate.riseM)
        let wentOnUp = cameDown && (imu.highest(after: waiting.candidate.peakT) ?? -.infinity) >= waiting.candidate.peakM + further
        guard (cameDown && !wentOnUp) || (waited > Self.holdS && imu.isResting) || waited > Self.holdLimitS else { return [] }
        held = nil
        stalledTopM = cameDown ? nil : waiting.candidate.peakM
        return consider(waiting, atOnce: waiting.atOnce ?? false)
    }

    /// Judges the pending rise by how low the bar has gone since its peak, as `sensor`'s
    /// tracker saw it: from where the last look stopped, unless the rise or the sensor is new.
    private mutating func resolvePending(by sensor: PendingLow.Sensor, at t: Double) -> [DetectorOutput] {
        guard let waiting = pending else { return [] }
        var lowest = PendingLow(sensor: sensor, height: LowestHeight(after: waiting.candidate.peakT))
        if let known = pendingLow, known.sensor == sensor, known.height.after == waiting.candidate.peakT { lowest = known }
        let low = sensor == .distance ? distance.lowest(&lowest.height) : imu.lowest(&lowest.height)
        pendingLow = lowest
        guard let low else { return [] }
        return resolvePending(lowest: low, at: t)
    }

    /// How low the bar has gone since the pending rise's peak, by the tracker that reads it.
    struct PendingLow: Sendable, Equatable {
        enum Sensor: Sendable { case distance, imu }
        var sensor: Sensor
        var height: LowestHeight
    }

    // MARK: Rep or another movement

    /// A rise waiting to be told from another movement by what follows it.
    struct Pending: Sendable, Codable {
        var candidate: ConcentricCandidate
        var trace: [KinematicSample]
        var endpoints: ConcentricEndpoints
        var sensor: String
        /// Judged at its top, not waiting for its lowering (an IMU's rise, `feedIMU`); nil: no.
        var atOnce: Bool?
    }

    /// A rep's rise and the lowering that goes with it are about the same
    /// size: a rep that starts at the top (squat, bench) was lowered into by
    /// at least this share of its rise; one that starts at the bottom (press,
    /// deadlift) is lowered again by as much. A rise with neither, such as
    /// picking the bar up to the shoulders before a press (it stays there and
    /// is pressed on from there), is not a rep, however big.
    static let returnShare = 0.6
    /// The bar IMU sees a slow lowering only in part: a 3-1-X descent is quiet in every window and
    /// its integral may rest before the bottom, so the lowering into a rep can read as well under
    /// 0.6 of it. A rise it saw lowered into by this share is a rep's: a pick-up has nothing lowered
    /// before it but its own dip (a hang clean's, about 0.1 m of a 0.4-0.5 m rise, under a quarter).
    static let imuLoweredIntoShare = 0.3
    /// Exercises whose every rep is a pull from a dead stop on the floor (or the blocks or pins it
    /// is set up on): a rise from the lowest the bar has been is the lift itself, so the first rep
    /// of a set is a rep at its top, not when its lowering comes. Nothing lifted to the shoulders
    /// passes for one: a clean from the floor moves the bar about twice a deadlift's ROM (out of
    /// its band), and one from the hang starts at a lockout, not at the lowest.
    static let pulledFromTheFloor: Set<String> = ["deadlift"]
    /// Exercises taken out of a rack (or handed off) at the top, every rep lowered from there and
    /// driven back up: the squat and the bench press. At such a station the bar is not picked up
    /// from below (to the back or the chest), and every rise but the un-rack's begins at the
    /// bottom of a lowering; the un-rack lifts the bar off the hooks where it rested, lowered into
    /// by nothing. So a rise the bar IMU saw lowered into by at least the turning points'
    /// hysteresis is judged at its top (the ROM band then tells a rep from anything else), however
    /// little of that lowering the IMU saw: a 3-1-X descent is quiet in every window and its
    /// integral often comes to rest partway down, so a rep's rise can read as lowered into by
    /// under `imuLoweredIntoShare` of it. (A front squat, which may be cleaned to the shoulders
    /// first, is not among them.)
    static let takenFromTheRack: Set<String> = ["squat", "bench"]
    /// At such a station a rise of at least this share of the ROM expected is judged at its top
    /// however little lowering the bar IMU saw before it: the rack's hooks hold the bar a few
    /// centimetres below the lockout, so the un-rack lifts it by far less, and a bar can be under
    /// most of a rep's range only by being lowered there (unseen: a 3-1-X descent and the pause
    /// after it can both read as rest) or set on the pins or safeties, from which a rise is a rep.
    /// Not a rise from where a held one stopped (`held`) with no lowering between: the bar got
    /// there by rising, and stopped there for longer than a crawl (a stall, not a rep's bottom).
    static let rackRiseShare = 0.7
    /// A rise not lowered from within this long is no rep.
    static let pendingLimitS = 20.0

    /// How long a rise shorter than a rep that ended in a pause is held (`held`), seconds.
    static let holdS = 0.5
    /// A rise under this share of the ROM expected ending in a pause is held: grinders stick
    /// around the middle of their range; a rep of the athlete's own ROM is never held.
    static let holdShare = 0.7
    /// Longest a held rise waits while the bar goes on up from it, seconds.
    static let holdLimitS = 10.0
    /// The bar's mean height over the last `goingOnS` this far above the held rise's top: it is
    /// going on up (well past a lidar's noise, averaged).
    static let goingOnM = 0.015
    static let goingOnS = 0.15

    /// A rise the tracker found: held when it may be the first part of a grinder, joined to
    /// the held one when it goes on up from it, else considered.
    private mutating func arrive(_ rise: Pending) -> [DetectorOutput] {
        var rise = rise
        var out: [DetectorOutput] = []
        if let earlier = held {
            held = nil
            let valleyM = rise.candidate.peakM - rise.candidate.riseM
            if valleyM >= earlier.candidate.peakM - settings.hysteresisM, let joined = joined(earlier, rise) {
                rise = joined
            } else {
                out += consider(earlier)
            }
        }
        // Only a rise lowered into is held: one that was not (a pick-up to the shoulders) waits
        // for its lowering anyway, and must not be joined to the press that follows it.
        let loweredInto = rise.candidate.descentBeforeM >= Self.returnShare * rise.candidate.riseM
        if rise.sensor == "distance", loweredInto, rise.candidate.endedInPause, rise.candidate.riseM * 1000 < Self.holdShare * expectedRomMm {
            held = rise
            return out
        }
        return out + consider(rise)
    }

    /// The held rise and the one that went on up from it as one rise, measured anew over both.
    private func joined(_ earlier: Pending, _ later: Pending) -> Pending? {
        guard let (trace, endpoints) = distance.trace(from: earlier.candidate.valleyT - 0.5, to: later.candidate.completedT) else { return nil }
        var candidate = later.candidate
        candidate.valleyT = earlier.candidate.valleyT
        candidate.riseM = later.candidate.peakM - (earlier.candidate.peakM - earlier.candidate.riseM)
        candidate.descentBeforeM = earlier.candidate.descentBeforeM
        return Pending(candidate: candidate, trace: trace, endpoints: endpoints, sensor: later.sensor)
    }

    /// Judges the held rise once the bar has come down from it, or has stayed where it stopped
    /// for `holdS`; while the bar goes on up it waits for the rest of the rise (`arrive`).
    private mutating func resolveHeld(at t: Double) -> [DetectorOutput] {
        guard let waiting = held else { return [] }
        var since = LowestHeight(after: waiting.candidate.peakT)
        let low = distance.lowest(&since)
        let cameDown = (low ?? .infinity) <= waiting.candidate.peakM - settings.hysteresisM
        let wentOnUp = (distance.recentMean(overS: Self.goingOnS) ?? -.infinity) >= waiting.candidate.peakM + Self.goingOnM
        let waited = t - waiting.candidate.completedT
        guard cameDown || (waited > Self.holdS && !wentOnUp) || waited > Self.holdLimitS else { return [] }
        held = nil
        return consider(waiting)
    }

    /// The ROM this station's athlete is expected to move in the exercise: the coach's, else
    /// learned from their reps, else the catalogue's.
    private var expectedRomMm: Double { assignment.romMm ?? learnedRomMm[romKey] ?? exercise.romMm }

    /// Whose ROM is learned: the athlete's (else the station's) in the exercise.
    private var romKey: String { "\(assignment.athlete ?? station)|\(exercise.name)" }

    /// Whose lifting a pattern learned here is, and whose patterns relax this station's reps.
    private var patternOwner: String { assignment.athlete ?? station }

    /// Judges a rise at once when it was lowered into, or when the caller says it need not wait
    /// (`atOnce`: a pull from the floor in a lift that starts there, `pulledFromTheFloor`, or an
    /// IMU's rise in a lift taken from the rack, `takenFromTheRack`); otherwise waits for what follows.
    private mutating func consider(_ rise: Pending, atOnce: Bool = false) -> [DetectorOutput] {
        var out: [DetectorOutput] = []
        if let waiting = pending {
            pending = nil
            // Lowered from before this rise began: the waiting rise was a rep that starts at the bottom.
            if rise.candidate.descentBeforeM >= Self.returnShare * waiting.candidate.riseM {
                var decided = waiting
                decided.candidate.completedT = rise.candidate.valleyT
                out += judge(decided)
            } else {
                out += notARep(waiting, because: "it was neither lowered into nor lowered from before the next rise")
            }
        }
        if atOnce || rise.candidate.descentBeforeM >= (rise.sensor == "imu" ? Self.imuLoweredIntoShare : Self.returnShare) * rise.candidate.riseM {
            out += judge(rise)
        } else {
            pending = rise
        }
        return out
    }

    /// Judges the waiting rise once the bar has come down from it (`lowest`
    /// since its top), as of the reading at `t`, which completes it.
    private mutating func resolvePending(lowest: Double, at t: Double) -> [DetectorOutput] {
        guard var waiting = pending else { return [] }
        if lowest <= waiting.candidate.peakM - Self.returnShare * waiting.candidate.riseM {
            pending = nil
            waiting.candidate.completedT = t
            return judge(waiting)
        }
        if t - waiting.candidate.completedT > Self.pendingLimitS {
            pending = nil
            return notARep(waiting, because: String(format: "it was neither lowered into nor lowered from within %.0f s", Self.pendingLimitS))
        }
        return []
    }

    /// A rise that is no rep (un-racking, re-racking, a walk-out, a lift to the shoulders),
    /// published as a rejection so that no movement of the bar goes unaccounted for.
    private func notARep(_ rise: Pending, because why: String) -> [DetectorOutput] {
        let measurement = measure(rise)
        let detail = String(format: "a rise of %.0f mm: not a rep, as %@", rise.candidate.riseM * 1000, why)
        let rejected = RejectedRep(
            station: station, reason: "not-a-rep", detail: detail, measurement: measurement, tEnd: rise.candidate.completedT, sensor: rise.sensor)
        return [.rejected(rejected)]
    }

    /// The rise measured as a rep is, or, where its trace cannot say (too few readings, no clear
    /// turning point), from its turning points as the tracker found them.
    private func measure(_ rise: Pending) -> RepMeasurement {
        let candidate = rise.candidate
        if let measured = measureConcentric(
            rise.trace, valleyT: candidate.valleyT, peakT: candidate.peakT, loadKg: assignment.loadKg, endpoints: rise.endpoints,
            measuredPositions: rise.sensor == "distance",
            loweredByM: candidate.descentBeforeM >= Self.returnShare * candidate.riseM ? candidate.descentBeforeM : nil)
        {
            return measured
        }
        let duration = max(candidate.peakT - candidate.valleyT, 1e-3)
        let mean = candidate.riseM / duration
        return RepMeasurement(
            concentricStartT: candidate.valleyT, concentricEndT: candidate.peakT, peakSampleT: candidate.peakT, meanVelocityMps: mean,
            peakVelocityMps: rise.trace.map(\.velocityMps).max() ?? mean, meanPropulsiveVelocityMps: mean, romMm: candidate.riseM * 1000,
            concentricS: duration, timeToPeakS: duration / 2, meanPowerW: nil)
    }

    /// Ends an open set because of a command.
    public mutating func endSet(reason: SetEvent.Reason, at t: Double) -> [DetectorOutput] {
        guard let set = openSet else { return [] }
        openSet = nil
        var out: [DetectorOutput] = [.set(setEvent(set, kind: .end, reason: reason, at: t))]
        // A set of 3 reps or more becomes a pattern of how this athlete lifts this exercise.
        if set.curves.count >= 3 {
            let curve = (0..<RepPattern.length).map { k in set.curves.reduce(0) { $0 + $1[k] } / Double(set.curves.count) }
            let pattern = RepPattern(
                exercise: exercise.name, curve: curve, loadKg: assignment.loadKg, reps: set.curves.count, recordedT: t, owner: patternOwner)
            ownPatterns.append(pattern)
            if ownPatterns.count > PatternLibrary.perOwner { ownPatterns.removeFirst() }
            out.append(.pattern(pattern))
        }
        if let load = assignment.loadKg, let best = set.reps.max() {
            let key = "\(assignment.athlete ?? station)|\(exercise.name)"
            var points = profilePoints[key] ?? [:]
            points[load] = max(points[load] ?? 0, best)
            profilePoints[key] = points
            let list = points.sorted { $0.key < $1.key }.map { LoadVelocityProfile.Point(loadKg: $0.key, meanVelocityMps: $0.value) }
            if let profile = LoadVelocityProfile.fit(station: station, athlete: assignment.athlete, exercise: exercise, points: list) {
                out.append(.profile(profile))
            }
        }
        return out
    }

    /// Ends the open set when the station has been idle (by reading time, or by
    /// wall time when the caller sees the station has gone silent).
    public mutating func closeIdleSet(at t: Double) -> [DetectorOutput] {
        guard let set = openSet, t - set.lastRepT >= settings.idleTimeoutS else { return [] }
        return endSet(reason: .idle, at: t)
    }

    // MARK: Judging

    /// The assigned exercise's profile: a built-in one, or one the detector has none of (the
    /// gym added it), under its own name, with the ROM and MVT the assignment gives (else the
    /// generic ones), so its reps, patterns and profiles are its own.
    private var exercise: ExerciseProfile {
        if let known = ExerciseProfile.catalogue[assignment.exercise] { return known }
        let generic = ExerciseProfile.catalogue[ExerciseProfile.defaultExercise]!
        return ExerciseProfile(name: assignment.exercise, romMm: assignment.romMm ?? generic.romMm, mvtMps: assignment.mvtMps ?? generic.mvtMps)
    }

    private mutating func judge(_ rise: Pending) -> [DetectorOutput] {
        let (candidate, sensor) = (rise.candidate, rise.sensor)
        let expected = expectedRomMm
        let measurement = measure(rise)
        // Pattern learning: a live curve that matches how this athlete lifts relaxes the thresholds.
        let curve = RepPattern.curve(rise.trace, from: measurement.concentricStartT, to: measurement.concentricEndT)
        let owner = patternOwner
        let matched =
            curve.map { curve in
                (ownPatterns + patterns).filter { $0.exercise == exercise.name && $0.owner == owner }
                    .contains { $0.score(against: curve, loadKg: assignment.loadKg, now: candidate.completedT) >= RepPattern.adoptionScore }
            } ?? false
        let amplitude = matched ? 0.8 : 1.0, duration = matched ? 0.7 : 1.0
        func reject(_ reason: String, _ detail: String) -> [DetectorOutput] {
            [.rejected(RejectedRep(station: station, reason: reason, detail: detail, measurement: measurement, tEnd: candidate.completedT, sensor: sensor))]
        }
        // Movements far below a rep (un-racking, re-racking, walk-outs, bar bounces) are no attempt.
        guard candidate.riseM * 1000 >= amplitude * settings.attemptShare * expected else {
            return notARep(rise, because: String(format: "it is under %.0f %% of the %.0f mm a rep moves", settings.attemptShare * 100, expected))
        }
        // The band a rep's ROM falls in. The athlete's own reps set it, following a depth that
        // changes over a set; a coach's ROM holds as given; the catalogue's is only a prior, wide
        // enough for the shortest lifters (an arched bench press moves 0.2 m of a catalogue 0.45).
        let learned = learnedRomMm[romKey]
        let coach = assignment.romMm
        // A sensor whose heights are uncertain widens the band (within reason); a ROM learned
        // from such a sensor is as uncertain as its reps were.
        let learnedSd = coach == nil ? learnedRomSdMm[romKey] ?? 0 : 0
        let riseSd = candidate.riseUncertaintyM * 1000
        let noise = min(3 * (riseSd * riseSd + learnedSd * learnedSd).squareRoot(), Self.noiseShareLimit * expected)
        let (lowShare, highShare, margin) =
            coach != nil
            ? (1 - settings.romTolerance, 1 + settings.romTolerance, 10.0)
            : learned != nil ? (Self.learnedLowShare, Self.learnedHighShare, 10.0) : (Self.priorLowShare, Self.priorHighShare, 0.0)
        let low = (expected * lowShare - margin) * amplitude - noise
        let high = expected * highShare + margin + noise
        if measurement.romMm < low || measurement.romMm > high {
            // Consistent attempts outside the band mean the ROM is wrong (a changed stance, a
            // coach's ROM for someone else).
            if !relearnRom(measurement.romMm, sdMm: riseSd, repShaped: Self.isRepShaped(candidate)) {
                if measurement.romMm < low {
                    return reject("partial", String(format: "ROM %.0f mm below %.0f mm", measurement.romMm, low))
                }
                return reject("rom-too-long", String(format: "ROM %.0f mm above %.0f mm", measurement.romMm, high))
            }
        }
        if measurement.meanVelocityMps < Self.slowestShareOfMVT * exercise.mvtMps {
            return reject("too-slow", String(format: "mean velocity %.2f m/s, under half the %.2f m/s of a 1RM", measurement.meanVelocityMps, exercise.mvtMps))
        }
        let minimum =
            (assignment.targetZone.flatMap { name in settings.zones.first { $0.name == name }?.minConcentricS }
                ?? settings.defaultMinConcentricS) * duration
        if measurement.concentricS < minimum {
            return reject("too-fast", String(format: "concentric %.2f s shorter than %.2f s", measurement.concentricS, minimum))
        }
        if measurement.concentricStartT - lastRepEndT < settings.refractoryS {
            return reject("refractory", String(format: "started %.2f s after the previous rep", measurement.concentricStartT - lastRepEndT))
        }
        return accept(measurement, romSdMm: riseSd, curve: curve, completedT: candidate.completedT, sensor: sensor, phases: phases(of: rise, measurement))
    }

    /// The phases that led into the rep's concentric phase: from the laser's readings, or the
    /// IMU's movement (which holds the descent only when no rest split it from the rise).
    private func phases(of rise: Pending, _ measurement: RepMeasurement) -> RepPhases? {
        // Most of a laser's reps have theirs from the descent found as they rose (`PhasesAhead`).
        if rise.sensor == "distance",
            let known = distance.phasesAhead(concentricStartT: measurement.concentricStartT, romM: measurement.romMm / 1000, previousTopT: previousTopT)
        {
            return known
        }
        let from = phasesSpanStart(concentricStartT: measurement.concentricStartT, previousTopT: previousTopT)
        let readings =
            rise.sensor == "distance"
            ? distance.heights(from: from, to: measurement.concentricStartT + 0.3)
            : rise.trace.map { (t: $0.t, m: $0.positionM) }
        return measurePhases(readings, concentricStartT: measurement.concentricStartT, romM: measurement.romMm / 1000, previousTopT: previousTopT)
    }

    /// The top of the previous rep of the open set, after which the descent into the next is
    /// looked for (nil: no set open, so the next rep is a set's first).
    private var previousTopT: Double? { openSet != nil ? lastRepEndT : nil }

    /// A sensor's noise widens the ROM band by at most this share of the ROM.
    static let noiseShareLimit = 0.25
    /// With a ROM learned from the athlete's reps, a rep moves at least this share of it: a
    /// partial rep (a failed one, a half squat) is well short of it, while depth that shrinks
    /// as a lifter tires moves a little each rep and the learned ROM follows it.
    static let learnedLowShare = 0.6
    /// ... and at most this share (an IMU's ROM, integrated twice, varies 30-50 % in a set).
    static let learnedHighShare = 1.6
    /// With only the catalogue's ROM, a rep moves at least this share of it: the shortest
    /// real lifts (an arched bench press, 0.2 m of 0.45) pass; a movement of a third does not.
    static let priorLowShare = 0.4
    /// ... and at most this share.
    static let priorHighShare = 1.6
    /// Slower than this share of the exercise's 1RM velocity is no lift (a
    /// walk-out, an adjustment): nobody completes a rep that slowly.
    static let slowestShareOfMVT = 0.5
    /// Attempts outside the learned ROM that agree with each other this
    /// closely, this many in a row, replace it.
    static let relearnAfter = 3
    /// ... or this many against the catalogue's prior alone, when each was a rep's shape: lowered
    /// into about as far as it rose (0.6-1.67 times), which an un-rack, a re-rack or a grinder's
    /// first part is not. A box squat's or a board press's set then loses its first rep to the
    /// prior, not its first two.
    static let relearnShapedAfter = 2

    /// Whether a rise was lowered into about as far as it went up (`relearnShapedAfter`).
    static func isRepShaped(_ candidate: ConcentricCandidate) -> Bool {
        candidate.descentBeforeM >= returnShare * candidate.riseM && candidate.descentBeforeM * returnShare <= candidate.riseM
    }

    /// Records an attempt whose ROM fell outside the band; true when it and
    /// the ones before it agree, so their ROM is learned in place of the learned
    /// one or the catalogue's prior, and the attempt counts: a pin squat of a
    /// third of the catalogue's ROM is not locked out. A ROM the coach assigned is
    /// never replaced.
    private mutating func relearnRom(_ romMm: Double, sdMm: Double, repShaped: Bool) -> Bool {
        guard assignment.romMm == nil else { return false }
        var misses = (romMisses[romKey] ?? []) + [romMm]
        misses = Array(misses.suffix(Self.relearnAfter))
        romMisses[romKey] = misses
        // A checkpoint of an earlier build kept no shapes: its misses count as not rep-shaped.
        let earlier = (romMissShapes[romKey] ?? []).suffix(misses.count - 1)
        let shapes = Array(repeating: false, count: misses.count - 1 - earlier.count) + earlier + [repShaped]
        romMissShapes[romKey] = shapes
        let needed = learnedRomMm[romKey] == nil && shapes.suffix(Self.relearnShapedAfter).allSatisfy({ $0 }) ? Self.relearnShapedAfter : Self.relearnAfter
        let agreeing = Array(misses.suffix(needed))
        guard agreeing.count == needed else { return false }
        let sorted = agreeing.sorted()
        let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        // Within the tolerance, and three of the sensor's standard deviations of a rise beyond it:
        // a 10 Hz bar IMU's full reps spread over a third of their ROM, and a wrong learned ROM
        // they could not agree under would lock every one of them out.
        let agreeMm = settings.romTolerance * median + 10 + 3 * sdMm
        guard agreeing.allSatisfy({ abs($0 - median) <= agreeMm }) else { return false }
        learnedRomMm[romKey] = median
        learnedRomSdMm[romKey] = sdMm
        return true
    }

    private mutating func accept(
        _ measurement: RepMeasurement, romSdMm: Double, curve: [Double]?, completedT: Double, sensor: String, phases: RepPhases? = nil
    ) -> [DetectorOutput] {
        var out: [DetectorOutput] = []
        romMisses[romKey] = nil
        romMissShapes[romKey] = nil
        lastRepEndT = measurement.concentricEndT
        // Half of each new rep: the learned ROM follows a depth that changes over a set. The first
        // is learned only within the catalogue's prior: one under it came in on the sensor's
        // uncertainty alone (a 10 Hz bar IMU's un-rack read as a 100 mm rep), and learned, it
        // would lock the set's full reps out; the prior stands until a rep within it, or three
        // agreeing attempts (`relearnRom`), teaches the athlete's ROM.
        if learnedRomMm[romKey] != nil || assignment.romMm != nil || measurement.romMm >= Self.priorLowShare * exercise.romMm {
            learnedRomMm[romKey] = learnedRomMm[romKey].map { 0.5 * $0 + 0.5 * measurement.romMm } ?? measurement.romMm
            learnedRomSdMm[romKey] = learnedRomSdMm[romKey].map { 0.5 * $0 + 0.5 * romSdMm } ?? romSdMm
        }
        if openSet == nil {
            let set = OpenSet(
                setId: "\(station)-set-\(microseconds(measurement.peakSampleT))", reps: [], lastRepT: completedT, startT: measurement.concentricStartT)
            openSet = set
            out.append(.set(setEvent(set, kind: .start, reason: nil, at: measurement.concentricStartT)))
        }
        guard var set = openSet else { return out }
        set.reps.append(measurement.meanVelocityMps)
        if let curve { set.curves.append(curve) }
        set.lastRepT = completedT
        openSet = set
        let loss = velocityLoss(set.reps)
        out.append(
            .rep(
                DetectedRep(
                    station: station, setId: set.setId, repId: "\(station)-\(microseconds(measurement.peakSampleT))", index: set.reps.count,
                    measurement: measurement, velocityLossPct: loss,
                    zone: VelocityZone.zone(for: measurement.meanVelocityMps, in: settings.zones).name,
                    tEnd: completedT, exercise: exercise.name, loadKg: assignment.loadKg, athlete: assignment.athlete, sensor: sensor,
                    phases: phases, tempo: assignment.tempo, tempoVerdict: assignment.tempo?.judge(phases, concentricS: measurement.concentricS))))
        if set.reps.count > 1, loss >= assignment.velocityLossThresholdPct {
            out += endSet(reason: .velocityLoss, at: completedT)
        }
        return out
    }

    private func velocityLoss(_ velocities: [Double]) -> Double {
        guard let last = velocities.last else { return 0 }
        let reference = assignment.velocityLossReference == .first ? velocities[0] : velocities.max()!
        return reference > 0 ? max(0, (reference - last) / reference * 100) : 0
    }

    private func setEvent(_ set: OpenSet, kind: SetEvent.Kind, reason: SetEvent.Reason?, at t: Double) -> SetEvent {
        SetEvent(
            station: station, setId: set.setId, kind: kind, reason: reason, reps: set.reps.count,
            bestMeanVelocityMps: kind == .end ? set.reps.max() : nil,
            velocityLossPct: kind == .end ? velocityLoss(set.reps) : nil,
            exercise: exercise.name, loadKg: assignment.loadKg, athlete: assignment.athlete, t: t)
    }
}

/// Microseconds as an integer, for ids built from reading times.
func microseconds(_ t: Double) -> Int64 {
    let us = (t * 1e6).rounded()
    return us.isFinite ? Int64(max(-9e18, min(9e18, us))) : 0
}

extension StationDetector.Pending {
    private enum CodingKeys: String, CodingKey { case candidate, trace, endpoints, sensor }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        candidate = try container.decode(ConcentricCandidate.self, forKey: .candidate)
        trace = try container.decodeRows(.trace, width: 4) { row in
            KinematicSample(t: row[0], positionM: row[1], velocityMps: row[2], accelerationMps2: row[3])
        }
        endpoints = try container.decode(ConcentricEndpoints.self, forKey: .endpoints)
        sensor = try container.decode(String.self, forKey: .sensor)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(candidate, forKey: .candidate)
        try container.encode(
            PackedRows(trace, width: 4) { sample, out in out += [sample.t, sample.positionM, sample.velocityMps, sample.accelerationMps2] },
            forKey: .trace)
        try container.encode(endpoints, forKey: .endpoints)
        try container.encode(sensor, forKey: .sensor)
    }
}
