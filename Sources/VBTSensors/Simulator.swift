import Foundation
import Logging
import VBTBus
import VBTWire

// A deterministic synthetic athlete: sets of an exercise at a load, with
// realistic bar paths, fatigue (velocity loss across reps), pauses and
// touch-and-go, un-racking and re-racking, and sensor noise, seen by a laser
// distance sensor and a bar-mounted IMU. The same seed gives the same
// readings (relative to the start time); the ground truth of every rep is
// kept so detectors can be checked against it.

/// SplitMix64: small, fast, seedable; the simulator and the tests share it.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// Creates a generator from `seed`.
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A normally distributed value (Box-Muller).
    public mutating func normal(mean: Double = 0, sd: Double) -> Double {
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let u2 = Double.random(in: 0..<1, using: &self)
        return mean + sd * (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }
}

/// An exercise as the simulator needs it (the detector catalogue's figures: ExerciseProfile.catalogue).
public struct SimExercise: Sendable, Equatable {
    public var name: String
    /// Bar travel of a full rep.
    public var romMm: Double
    /// Mean velocity at 1RM (minimal velocity threshold).
    public var mvtMps: Double
    /// Distance from the laser to the bar at the bottom of the rep.
    public var bottomDistanceMm: Double
    /// Whether a rep starts at the bottom (press from the shoulders, deadlift
    /// from the floor: lift, then lower) rather than at the top (squat,
    /// bench: lower, then lift).
    public var startsAtBottom = false
    /// How far below the rep's bottom the bar waits between sets, to be
    /// picked up before each set (a press: from hip height to the shoulders
    /// in a quarter second, a rise as big as a rep that is not one). 0: none.
    public var pickupMm = 0.0

    public static let squat = SimExercise(name: "squat", romMm: 600, mvtMps: 0.30, bottomDistanceMm: 300)
    public static let bench = SimExercise(name: "bench", romMm: 420, mvtMps: 0.17, bottomDistanceMm: 130)
    public static let deadlift = SimExercise(name: "deadlift", romMm: 550, mvtMps: 0.15, bottomDistanceMm: 250)
    /// A deadlift as lifted: from the floor, lowered back to it after each rep.
    public static let deadliftFromFloor = SimExercise(name: "deadlift", romMm: 550, mvtMps: 0.15, bottomDistanceMm: 250, startsAtBottom: true)
    /// A standing shoulder press, the bar picked up to the shoulders before
    /// every set (heights of a bar-mounted lidar: 526 mm at the hips, 944 at
    /// the shoulders). MVT about 0.19 m/s (Balsalobre-Fernandez et al. 2018,
    /// J Strength Cond Res 32(5), on the standing military press).
    public static let press = SimExercise(name: "press", romMm: 550, mvtMps: 0.19, bottomDistanceMm: 944, startsAtBottom: true, pickupMm: 418)
    /// Every exercise the simulator knows, by name.
    public static let all: [String: SimExercise] = ["squat": squat, "bench": bench, "deadlift": deadlift, "press": press]
}

/// What the simulated athlete does.
public struct SimulationConfig: Sendable {
    public var station = "rack-01"
    public var athlete: String?
    public var exercise = SimExercise.squat
    public var loadKg = 100.0
    /// The athlete's 1RM for the exercise; with the load it sets the first rep's velocity.
    public var oneRepMaxKg = 140.0
    public var seed: UInt64 = 1
    public var sets = 3
    public var repsPerSet = 6
    public var restS = 60.0
    /// Readings per second of the laser (0: no laser).
    public var distanceRateHz = 50.0
    /// Standard deviation of the laser's noise (the Arduino sensor's is about 2 mm).
    public var distanceNoiseMm = 2.0
    /// Whether the laser unit sends its accelerometer (`A:` in its lines). The
    /// unit hangs from the bar, laser to the floor, so it feels the bar's
    /// acceleration; it is tilted, its axes are offset and its gain is off,
    /// as an uncalibrated board's are.
    public var laserAccelerometer = true
    /// Standard deviation of each axis of that accelerometer, g.
    public var laserAccelerometerNoiseG = 0.01
    /// How much earlier than the distance the accelerometer is read, seconds
    /// (negative: later). The VL53L0X ranges over most of a period while the
    /// accelerometer is read at once, so the two are rarely exactly in step.
    public var laserAccelerometerLeadS = 0.0
    /// Whether the laser unit rides the bar (false: it stands on the floor
    /// looking up, and its accelerometer feels gravity only).
    public var laserUnitOnBar = true
    /// Readings per second of the bar IMU (0: no IMU).
    public var imuRateHz = 100.0
    /// Readings per second of a posture wearable (0: none). The athlete sits
    /// well for the first 20 s (time to calibrate), then slouches 8 s in every 40.
    public var postureRateHz = 0.0
    /// Share of reps done touch-and-go (no pause at the bottom).
    public var touchAndGoShare = 0.3
    /// What real sensors do that tidy ones don't (none by default; `.realWorld` for all of it).
    public var faults = SensorFaults()
    /// What real lifts and real sensors do beyond the defaults: short ROMs, shrinking depth,
    /// sticking points, tempo, lockout creep, overshoot, a video track, BLE bursts (none by default).
    public var modes = SimulationModes()
    /// Time factor: 1 real time, 0 as fast as possible.
    public var speed = 1.0
    /// Repeat the whole session forever (`make run`).
    public var forever = false
    /// Where the session's first reading is placed, Unix seconds (nil: when it starts). Sensor
    /// time runs from there, so two runs with the same start give the same reading times.
    public var startT: Double?
    /// Creates the defaults.
    public init() {}
}

/// The ground truth of one simulated rep.
public struct SimulatedRep: Sendable, Equatable {
    public var set: Int
    public var index: Int
    /// Seconds from the session start.
    public var concentricStartS: Double
    public var concentricEndS: Double
    public var meanVelocityMps: Double
    public var peakVelocityMps: Double
    public var romMm: Double
    public var touchAndGo: Bool
    /// The descent that led into the concentric phase, seconds from the session start: where
    /// the bar left the top and where it reached the bottom (nil: none, a set's first rep of
    /// a lift that starts at the bottom). The pause at the bottom runs from its end to
    /// `concentricStartS`.
    public var eccentricStartS: Double?
    public var eccentricEndS: Double?
    /// The pause at the top after the previous rep of the set, up to this rep's descent, seconds
    /// (nil on a set's first rep): each rep carries the phases that led into it, as the
    /// detector's do (docs/detection.md "Phases and tempo").
    public var pauseTopS: Double?
}

/// The bar's path as a list of segments; position, velocity and acceleration
/// are exact at any time.
public struct BarTimeline: Sendable {
    struct Segment: Sendable {
        var start: Double
        var duration: Double
        var from: Double  // mm above the bottom of the rep
        var to: Double
        /// A velocity ramp (`SimulationModes`' shaped rises): velocity goes from
        /// `v0` to `v1` m/s along half a cosine; false: a move from rest to rest.
        var ramp = false
        var v0 = 0.0
        var v1 = 0.0
    }

    var segments: [Segment] = []
    /// Every rep, in order.
    public internal(set) var reps: [SimulatedRep] = []
    /// When the bar was picked up before a set (seconds from the start): rises that are no rep.
    public internal(set) var pickups: [ClosedRange<Double>] = []
    /// Total length in seconds.
    public internal(set) var duration = 0.0

    /// Builds the session of `config` from its seed.
    public init(_ config: SimulationConfig) {
        var random = SeededGenerator(seed: config.seed)
        // The modes draw from their own generator: without them the session is as it always was.
        var modeRandom = SeededGenerator(seed: config.seed ^ 0x30DE5)
        let modes = config.modes
        let rom = config.effectiveExercise.romMm
        let rackHeight = rom + 40  // the bar sits in the hooks a little above the top of the rep
        let intensity = min(1, max(0.2, config.loadKg / config.oneRepMaxKg))
        // Near-linear load-velocity relation: 1.6 m/s unloaded down to MVT at 1RM.
        let firstVelocity = config.exercise.mvtMps + (1.6 - config.exercise.mvtMps) * (1 - intensity)
        if config.exercise.startsAtBottom {
            buildBottomStart(config, random: &random, modeRandom: &modeRandom, firstVelocity: firstVelocity)
            return
        }
        hold(rackHeight, 2.0)
        for set in 1...max(1, config.sets) {
            // Un-rack: lift off the hooks, walk out (small wobble), settle at the top.
            move(rackHeight, rackHeight + 35, 0.5)
            move(rackHeight + 35, rom + 10, 0.8)
            move(rom + 10, rom - 8, 0.4)
            move(rom - 8, rom, 0.5)
            hold(rom, 1.0 + random.normal(sd: 0.1).magnitude)
            let lossPerRep = 0.02 + 0.02 * Double.random(in: 0...1, using: &random)
            let count = max(1, config.repsPerSet)
            for index in 1...count {
                var depth = rom * (1 + random.normal(sd: 0.01))
                if let fade = modes.shrinkingDepth { depth *= fade.romMm(rep: index, of: count) / rom }
                var eccentricS = 1.0 + 0.3 * Double.random(in: 0...1, using: &random)
                var touchAndGo = index > 1 && Double.random(in: 0...1, using: &random) < config.touchAndGoShare
                if let tempo = modes.tempo {
                    eccentricS = tempo.eccentricS
                    touchAndGo = false
                }
                let descent = (start: duration, end: duration + eccentricS)
                move(rom, rom - depth, eccentricS)
                if !touchAndGo {
                    var pauseS = 0.2 + 0.5 * Double.random(in: 0...1, using: &random)
                    if let tempo = modes.tempo { pauseS = Double.random(in: tempo.pauseS, using: &modeRandom) }
                    hold(rom - depth, pauseS)
                }
                let velocity = max(
                    config.exercise.mvtMps * 0.8,
                    firstVelocity * (1 - lossPerRep * Double(index - 1)) * (1 + random.normal(sd: 0.015)))
                rise(
                    from: rom - depth, to: rom, velocity: velocity, set: set, index: index, of: count, touchAndGo: touchAndGo, modes: modes,
                    random: &modeRandom)
                markPhases(descent, previousTop: index > 1 ? reps.dropLast().last?.concentricEndS : nil)
                // Touch-and-go is at the bottom; at the top the lifter still breathes between reps.
                var topS = 0.4 + 0.8 * Double.random(in: 0...1, using: &random)
                if let top = modes.tempo?.topPauseS { topS = Double.random(in: top, using: &modeRandom) }
                hold(rom, topS)
            }
            // Re-rack and rest.
            move(rom, rackHeight + 35, 0.7)
            move(rackHeight + 35, rackHeight, 0.4)
            hold(rackHeight, set < config.sets ? config.restS : 3.0)
        }
    }

    /// Sets of reps that start at the bottom (a press, a deadlift from the
    /// floor): lift, a moment at the top, lower; before each set the bar may
    /// be picked up from below (`pickupMm`) and after it put back there.
    private mutating func buildBottomStart(
        _ config: SimulationConfig, random: inout SeededGenerator, modeRandom: inout SeededGenerator, firstVelocity: Double
    ) {
        let modes = config.modes
        let rom = config.effectiveExercise.romMm, pickup = config.exercise.pickupMm
        let rest = -pickup  // where the bar waits between sets
        hold(rest, 2.0)
        for set in 1...max(1, config.sets) {
            if pickup > 0 {
                // A quick pick-up (a clean to the shoulders), then settle.
                let start = duration
                move(rest, 0, 0.25 + 0.15 * Double.random(in: 0...1, using: &random))
                pickups.append(start...duration)
                hold(0, 1.0 + 0.5 * Double.random(in: 0...1, using: &random))
            } else {
                hold(0, 0.5)
            }
            let lossPerRep = 0.02 + 0.02 * Double.random(in: 0...1, using: &random)
            let count = max(1, config.repsPerSet)
            var descent: (start: Double, end: Double)?
            for index in 1...count {
                var height = rom * (1 + random.normal(sd: 0.01))
                if let fade = modes.shrinkingDepth { height *= fade.romMm(rep: index, of: count) / rom }
                let velocity = max(
                    config.exercise.mvtMps * 0.8,
                    firstVelocity * (1 - lossPerRep * Double(index - 1)) * (1 + random.normal(sd: 0.015)))
                var touchAndGo = index > 1 && Double.random(in: 0...1, using: &random) < config.touchAndGoShare
                if modes.tempo != nil { touchAndGo = false }
                if index > 1, !touchAndGo {
                    var pauseS = 0.3 + 0.6 * Double.random(in: 0...1, using: &random)
                    if let tempo = modes.tempo { pauseS = Double.random(in: tempo.pauseS, using: &modeRandom) }
                    hold(0, pauseS)
                }
                rise(
                    from: 0, to: height, velocity: velocity, set: set, index: index, of: count, touchAndGo: touchAndGo, modes: modes,
                    random: &modeRandom)
                if let descent { markPhases(descent, previousTop: reps.dropLast().last?.concentricEndS) }
                var topS = 0.3 + 0.7 * Double.random(in: 0...1, using: &random)
                if let top = modes.tempo?.topPauseS { topS = Double.random(in: top, using: &modeRandom) }
                hold(height, topS)
                var eccentricS = 1.0 + 0.4 * Double.random(in: 0...1, using: &random)
                if let tempo = modes.tempo { eccentricS = tempo.eccentricS }
                descent = (duration, duration + eccentricS)
                move(height, 0, eccentricS)
            }
            hold(0, 0.5)
            if pickup > 0 { move(0, rest, 0.8) }
            hold(rest, set < config.sets ? config.restS : 3.0)
        }
    }

    /// A concentric phase at `velocity` (mean), recorded as a rep.
    mutating func lift(from: Double, to: Double, velocity: Double, set: Int, index: Int, touchAndGo: Bool) {
        let rom = to - from
        let concentricS = rom / 1000 / velocity
        let start = duration
        move(from, to, concentricS)
        reps.append(
            SimulatedRep(
                set: set, index: index, concentricStartS: start, concentricEndS: duration,
                meanVelocityMps: rom / 1000 / concentricS, peakVelocityMps: rom / 1000 / concentricS * .pi / 2,
                romMm: rom, touchAndGo: touchAndGo))
    }

    /// Gives the newest rep the descent that led into it and the pause at the top before that.
    private mutating func markPhases(_ descent: (start: Double, end: Double), previousTop: Double?) {
        guard !reps.isEmpty else { return }
        reps[reps.count - 1].eccentricStartS = descent.start
        reps[reps.count - 1].eccentricEndS = descent.end
        reps[reps.count - 1].pauseTopS = previousTop.map { descent.start - $0 }
    }

    mutating func hold(_ position: Double, _ seconds: Double) {
        segments.append(Segment(start: duration, duration: seconds, from: position, to: position))
        duration += seconds
    }

    /// A smooth move: position follows half a cosine, so velocity is a sine arch
    /// (peak = mean x pi/2) and acceleration is continuous inside the move.
    mutating func move(_ from: Double, _ to: Double, _ seconds: Double) {
        segments.append(Segment(start: duration, duration: seconds, from: from, to: to))
        duration += seconds
    }

    private func segment(at t: Double) -> Segment {
        var low = 0, high = segments.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if segments[mid].start <= t { low = mid } else { high = mid - 1 }
        }
        return segments[low]
    }

    /// Bar height in mm above the rep's bottom, velocity in m/s and acceleration in m/s^2 at `t`.
    public func state(at t: Double) -> (positionMm: Double, velocityMps: Double, accelerationMps2: Double) {
        let s = segment(at: min(max(t, 0), duration))
        let x = min(max((t - s.start) / s.duration, 0), 1)
        if s.ramp { return s.rampState(x) }
        let span = s.to - s.from
        let position = s.from + span * (1 - cos(.pi * x)) / 2
        let velocity = span / 1000 * .pi / (2 * s.duration) * sin(.pi * x)
        let acceleration = span / 1000 * .pi * .pi / (2 * s.duration * s.duration) * cos(.pi * x)
        return (position, x >= 1 ? 0 : velocity, x >= 1 ? 0 : acceleration)
    }
}

/// Rotates a world-frame vector into the sensor frame for WitMotion-style
/// angles: roll about x, pitch about y, yaw about z, R = Rz(yaw) Ry(pitch) Rx(roll)
/// maps sensor to world, so sensor = R^T world.
public func worldToSensor(_ v: Vector3, rollDeg: Double, pitchDeg: Double, yawDeg: Double) -> Vector3 {
    let (r, p, y) = (rollDeg * .pi / 180, pitchDeg * .pi / 180, yawDeg * .pi / 180)
    // R^T = Rx^T Ry^T Rz^T
    let x1 = cos(y) * v.x + sin(y) * v.y, y1 = -sin(y) * v.x + cos(y) * v.y, z1 = v.z
    let x2 = cos(p) * x1 - sin(p) * z1, y2 = y1, z2 = sin(p) * x1 + cos(p) * z1
    let x3 = x2, y3 = cos(r) * y2 + sin(r) * z2, z3 = -sin(r) * y2 + cos(r) * z2
    return Vector3(x3, y3, z3)
}

/// Produces the readings of a simulated session.
public struct SimulatedSensors: Sendable {
    public let config: SimulationConfig
    public let timeline: BarTimeline
    var random: SeededGenerator
    /// The laser unit's accelerometer draws from its own generator, so the
    /// laser's noise is the same with or without it.
    private var boardRandom: SeededGenerator

    /// Creates the sensors of `config`.
    public init(_ config: SimulationConfig) {
        self.config = config
        timeline = BarTimeline(config)
        random = SeededGenerator(seed: config.seed ^ 0x5EED)
        boardRandom = SeededGenerator(seed: config.seed ^ 0xB0A2D)
    }

    /// The laser reading at session time `t` (noise `distanceNoiseMm`, the
    /// Arduino's phase guess, and its accelerometer unless turned off).
    public mutating func distance(at t: Double, wallOrigin: Double) -> SampleMessage.DistanceReading {
        let state = timeline.state(at: t)
        let phase: SampleMessage.DistanceReading.State =
            state.velocityMps > 0.05 ? .concentric : state.velocityMps < -0.05 ? .eccentric : .idle
        let mm = config.effectiveExercise.bottomDistanceMm + state.positionMm + random.normal(sd: config.distanceNoiseMm)
        return .init(
            t: ((wallOrigin + t) * 1e6).rounded() / 1e6, distanceMm: (mm * 10).rounded() / 10, state: phase,
            accG: config.laserAccelerometer ? boardAcceleration(at: t - config.laserAccelerometerLeadS) : nil)
    }

    /// The laser unit's accelerometer at `t`, in g: the bar's mean acceleration
    /// over the reading period before `t` (the part averages between reads),
    /// plus gravity, seen through the board's tilt (it sways a little on its
    /// strap), with a gain error, offsets and noise on each axis, printed to
    /// three decimals.
    private mutating func boardAcceleration(at t: Double) -> Vector3 {
        let period = 1 / max(1, config.distanceRateHz)
        let mean = config.laserUnitOnBar ? (timeline.state(at: t).velocityMps - timeline.state(at: t - period).velocityMps) / period : 0
        let world = Vector3(0, 0, 1 + mean / 9.80665)
        var acc = worldToSensor(world, rollDeg: 12 + 3 * sin(0.9 * t), pitchDeg: -7 + 2 * sin(1.3 * t + 2), yawDeg: 40)
        let gain = 1.03, offset = Vector3(0.02, -0.015, 0.03), sd = config.laserAccelerometerNoiseG
        acc = Vector3(
            gain * acc.x + offset.x + boardRandom.normal(sd: sd), gain * acc.y + offset.y + boardRandom.normal(sd: sd),
            gain * acc.z + offset.z + boardRandom.normal(sd: sd))
        return Vector3((acc.x * 1000).rounded() / 1000, (acc.y * 1000).rounded() / 1000, (acc.z * 1000).rounded() / 1000)
    }

    /// The bar IMU reading at session time `t`: gravity plus bar acceleration,
    /// seen through a small tilt; gyro is the tilt's rate; all with noise.
    public mutating func imu(at t: Double, wallOrigin: Double) -> SampleMessage.IMUReading {
        if config.faults.phoneGradeIMU { return phoneGradeIMU(at: t, wallOrigin: wallOrigin) }
        var state = timeline.state(at: t)
        if config.modes.imuMeanOverPeriod { state.accelerationMps2 = meanIMUAcceleration(at: t) }
        let roll = 2.0 + 1.5 * sin(0.7 * t), pitch = -1.5 + 1.0 * sin(0.45 * t + 1), yaw = 30 + 0.2 * t
        let rollRate = 1.5 * 0.7 * cos(0.7 * t), pitchRate = 1.0 * 0.45 * cos(0.45 * t + 1), yawRate = 0.2
        let world = Vector3(0, 0, 1 + state.accelerationMps2 / 9.80665)
        var acc = worldToSensor(world, rollDeg: roll, pitchDeg: pitch, yawDeg: yaw)
        acc = Vector3(acc.x + random.normal(sd: 0.01), acc.y + random.normal(sd: 0.01), acc.z + random.normal(sd: 0.01))
        let gyro = Vector3(rollRate + random.normal(sd: 0.3), pitchRate + random.normal(sd: 0.3), yawRate + random.normal(sd: 0.3))
        let angle = Vector3(roll + random.normal(sd: 0.05), pitch + random.normal(sd: 0.05), yaw.truncatingRemainder(dividingBy: 360))
        // Quantised to the sensor's int16 steps, as a WitMotion reports them.
        func quantised(_ v: Vector3, _ step: Double) -> Vector3 {
            Vector3((v.x / step).rounded() * step, (v.y / step).rounded() * step, (v.z / step).rounded() * step)
        }
        return .init(
            t: ((wallOrigin + t) * 1e6).rounded() / 1e6, accG: quantised(acc, WitMotionDecoder.accScale),
            gyroDps: quantised(gyro, WitMotionDecoder.gyroScale), angleDeg: quantised(angle, WitMotionDecoder.angleScale))
    }
}

extension SimulatedSensors {
    /// The whole session's laser readings, `perMessage` readings a `sample` message (IMU and
    /// posture aside): what the detector's tests and benchmarks feed it.
    public mutating func distanceMessages(perMessage: Int, wallOrigin: Double) -> [SampleMessage] {
        var messages: [SampleMessage] = []
        var batch: [SampleMessage.DistanceReading] = []
        if config.modes.videoTrack != nil {
            let stream = distanceStream(wallOrigin: wallOrigin)
            return stride(from: 0, to: stream.count, by: perMessage).map {
                SampleMessage(.distance(Array(stream[$0..<min($0 + perMessage, stream.count)])), device: "sim")
            }
        }
        var t = 0.0
        while t <= timeline.duration {
            batch.append(distance(at: t, wallOrigin: wallOrigin))
            if batch.count == perMessage {
                messages.append(SampleMessage(.distance(batch), device: "sim"))
                batch = []
            }
            t += 1 / config.distanceRateHz
        }
        return messages
    }
}

extension SimulatedSensors {
    /// How far the athlete leans at session time `t`, degrees.
    public static func slouchDeg(at t: Double) -> Double {
        guard t >= 20 else { return 0 }
        let phase = (t - 20).truncatingRemainder(dividingBy: 40)
        switch phase {
        case 20..<21: return 25 * (phase - 20)  // leaning in over a second
        case 21..<28: return 25
        case 28..<29: return 25 * (29 - phase)
        default: return 0
        }
    }

    /// The posture wearable's reading at session time `t` (sensor units: m/s^2 and uT).
    public mutating func posture(at t: Double, wallOrigin: Double) -> SampleMessage.PostureReading {
        let tilt = Self.slouchDeg(at: t) * .pi / 180
        let acc = Vector3(9.81 * sin(tilt) + random.normal(sd: 0.05), random.normal(sd: 0.05), 9.81 * cos(tilt) + random.normal(sd: 0.05))
        let mag = Vector3(30 + 40 * sin(tilt) + random.normal(sd: 0.5), -10 + random.normal(sd: 0.5), -40 * cos(tilt) + random.normal(sd: 0.5))
        return .init(t: ((wallOrigin + t) * 1e6).rounded() / 1e6, acc: acc, mag: mag)
    }
}

/// The simulator as a bridge source.
public struct SimulatorSource: SensorSource {
    public let config: SimulationConfig
    /// Where the ground truth of every simulated rep goes, when asked for.
    public let truth: TruthWriter?
    public var name: String { "simulator:\(config.station)" }

    /// Creates the source.
    public init(config: SimulationConfig, truth: TruthWriter? = nil) {
        self.config = config
        self.truth = truth
    }

    public func run(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        var pass = 0
        var origin = config.startT ?? wallClockSeconds()
        let device = "sim"
        if config.distanceReadingRateHz > 0 {
            queue.push(
                .status(station: config.station, StatusMessage(state: .connected, sensor: "distance", device: device, rateHz: config.distanceReadingRateHz)))
        }
        if config.imuRateHz > 0 {
            queue.push(.status(station: config.station, StatusMessage(state: .connected, sensor: "imu", device: device, rateHz: config.imuRateHz)))
        }
        if config.postureRateHz > 0 {
            queue.push(.status(station: config.station, StatusMessage(state: .connected, sensor: "posture", device: device, rateHz: config.postureRateHz)))
        }
        repeat {
            var passConfig = config
            passConfig.seed = config.seed &+ UInt64(pass)
            var sensors = SimulatedSensors(passConfig)
            let duration = sensors.timeline.duration
            logger.info(
                "simulated session",
                metadata: [
                    "station": "\(config.station)", "exercise": "\(config.exercise.name)", "load_kg": "\(config.loadKg)",
                    "sets": "\(config.sets)", "reps": "\(sensors.timeline.reps.count)", "seconds": "\(Int(duration))",
                ])
            do {
                try truth?.append(station: config.station, reps: sensors.timeline.reps, origin: origin)
            } catch {
                logger.error("ground truth not written", metadata: ["error": "\(error.message)"])
            }
            let startedAt = monotonicSeconds()

            // Every reading of the pass, in delivery order, paced by sensor time
            // (a late or repeated reading goes out when its neighbours do).
            enum Due {
                case distance(SampleMessage.DistanceReading), imu(SampleMessage.IMUReading), imuBurst([SampleMessage.IMUReading])
                case posture(SampleMessage.PostureReading), status
            }
            var due: [(at: Double, what: Due)] = []
            var paceAt = 0.0
            for r in sensors.distanceStream(wallOrigin: origin) { paceAt = max(paceAt, r.t - origin); due.append((paceAt, .distance(r))) }
            paceAt = 0
            if config.modes.imuBursts != nil {
                // A burst goes out as it arrived: its readings together.
                for burst in sensors.imuBursts(wallOrigin: origin) { due.append((burst.arrivalS, .imuBurst(burst.readings))) }
            } else {
                for r in sensors.imuStream(wallOrigin: origin) { paceAt = max(paceAt, r.t - origin); due.append((paceAt, .imu(r))) }
            }
            if config.postureRateHz > 0 {
                var t = 0.0
                while t <= duration { due.append((t, .posture(sensors.posture(at: t, wallOrigin: origin)))); t += 1 / config.postureRateHz }
            }
            // A streaming report every 5 s, as real sources send.
            var report = 5.0
            while report <= duration { due.append((report, .status)); report += 5 }
            due = due.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
            for (at, what) in due {
                if stop.isSet { break }
                if config.speed > 0 {
                    let wait = startedAt + at / config.speed - monotonicSeconds()
                    if wait > 0, !stop.sleep(wait) { break }
                }
                switch what {
                case .distance(let r): queue.push(.readings(station: config.station, device: device, .distance([r])))
                case .imu(let r): queue.push(.readings(station: config.station, device: device, .imu([r])))
                case .imuBurst(let readings): queue.push(.readings(station: config.station, device: device, .imu(readings)))
                case .posture(let r): queue.push(.readings(station: config.station, device: device, .posture([r])))
                case .status:
                    for (sensor, rate) in [("distance", config.distanceReadingRateHz), ("imu", config.imuRateHz), ("posture", config.postureRateHz)]
                    where rate > 0 {
                        queue.push(
                            .status(station: config.station, StatusMessage(state: .streaming, sensor: sensor, device: device, rateHz: rate, batteryPct: 100)))
                    }
                }
            }
            let distanceStep = config.distanceReadingRateHz > 0 ? 1 / config.distanceReadingRateHz : .infinity
            let imuStep = config.imuRateHz > 0 ? 1 / config.imuRateHz : .infinity
            let postureStep = config.postureRateHz > 0 ? 1 / config.postureRateHz : .infinity
            origin += duration + min(distanceStep, imuStep, postureStep)
            pass += 1
        } while config.forever && !stop.isSet
        queue.push(.finished(source: name))
    }
}
