import Foundation
import VBTWire

// What recordings of real lifts show that the simulator's default athlete
// does not: ranges of motion other than the catalogue's, depth that shrinks
// as the lifter tires, sticking points, slow tempos with long pauses, a bar
// that creeps on at lockout or overshoots its top, a bar tracked from phone
// video, and a WitMotion whose readings come over BLE in bursts. Each is off
// by default; without them a seed gives the session it always gave.
//
// Ground truth follows a reference transducer: the concentric phase runs from
// the instant the bar's velocity leaves zero at the bottom to the instant it
// is zero again at the top (an overshoot's top is its highest point; lockout
// creep, a few mm at a few mm/s after the drive has brought the bar to rest,
// is the lockout, after it); ROM is the height gained between them, mean
// velocity ROM / duration, peak velocity the highest in between.

/// The simulator's optional behaviours (`SimulationConfig.modes`); all off by default.
public struct SimulationModes: Sendable, Equatable {
    /// Every rep's ROM, mm, instead of the catalogue's (an arched bench press, a short lifter, a pin
    /// press: 200-300 mm against the bench's 420). The top (lockout) stays where the catalogue's is,
    /// so the bottom is higher. nil: the exercise's.
    public var romMm: Double?
    /// Depth that shrinks over each set as the lifter tires (nil: none).
    public var shrinkingDepth: ShrinkingDepth?
    /// A sticking point in the rise (nil: none).
    public var stickingPoint: StickingPoint?
    /// A slow descent and a long pause at the bottom, every rep (nil: the default athlete's).
    public var tempo: Tempo?
    /// The bar creeping on a few mm after the main rise (nil: none).
    public var lockoutCreep: LockoutCreep?
    /// A fast rep's bar rising past its final top and settling back (nil: none).
    public var overshoot: Overshoot?
    /// The distance sensor is a bar tracked in phone video (nil: the laser).
    public var videoTrack: VideoTrack?
    /// The IMU is a WitMotion over BLE whose readings arrive in bursts (nil: each on time).
    public var imuBursts: IMUBursts?
    /// Each IMU reading is the mean acceleration over the period before it, as a MEMS part
    /// filtering to a low output rate reports it (false: the instant's).
    public var imuMeanOverPeriod = false

    /// Creates no modes.
    public init() {}

    /// Whether any mode is on.
    public var any: Bool { self != SimulationModes() }

    /// ROM shrinking linearly over a set: the first rep's `firstMm`, the last's `lastMm`.
    public struct ShrinkingDepth: Sendable, Equatable {
        /// The first rep's ROM, mm.
        public var firstMm: Double
        /// The last rep's ROM, mm.
        public var lastMm: Double
        /// Creates a shrinking depth, e.g. a squat 600 -> 400 mm.
        public init(firstMm: Double, lastMm: Double) { (self.firstMm, self.lastMm) = (firstMm, lastMm) }
        /// The ROM of rep `rep` (1-based) of `count`.
        public func romMm(rep: Int, of count: Int) -> Double {
            count > 1 ? firstMm + (lastMm - firstMm) * Double(rep - 1) / Double(count - 1) : firstMm
        }
    }

    /// A heavy rep's velocity falling towards zero mid-rise, without reversing, then rising again:
    /// accelerate, cruise, slow to the stall, crawl, accelerate, cruise, slow to the top. The moving
    /// parts take the time the whole rise would at the load's velocity; the crawl adds its own, so
    /// a sticking rep is slower than it would have been.
    public struct StickingPoint: Sendable, Equatable {
        /// The velocity the bar crawls at, m/s (drawn per rep).
        public var velocityMps: ClosedRange<Double> = 0.02...0.1
        /// How long it crawls, seconds (drawn per rep).
        public var durationS: ClosedRange<Double> = 0.2...0.6
        /// Only the last rep of each set sticks (false: every rep).
        public var lastRepOnly = false
        /// Creates the defaults: 0.02-0.1 m/s for 0.2-0.6 s, every rep.
        public init() {}
    }

    /// A "3-1-X" tempo: the descent takes `eccentricS`, the pause at the bottom is drawn from
    /// `pauseS`, then the rise; no rep is touch-and-go.
    public struct Tempo: Sendable, Equatable {
        /// The descent, seconds.
        public var eccentricS = 3.0
        /// The pause at the bottom, seconds.
        public var pauseS: ClosedRange<Double> = 1...3
        /// The pause at the top between reps, seconds (nil: the default athlete's breath).
        public var topPauseS: ClosedRange<Double>?
        /// Creates the defaults: 3 s down, 1-3 s paused.
        public init() {}
    }

    /// After the drive has brought the bar to rest at the top, it stands a moment and then creeps
    /// on a few mm as the lifter finishes locking out: the lockout, not the concentric phase (a
    /// transducer ends the phase where the velocity first reaches zero at the top).
    public struct LockoutCreep: Sendable, Equatable {
        /// How far, mm (drawn per rep).
        public var distanceMm: ClosedRange<Double> = 4...8
        /// Over how long, seconds (drawn per rep).
        public var durationS: ClosedRange<Double> = 0.45...0.65
        /// How long the bar stands between the drive and the creep, seconds (drawn per rep).
        public var stillS: ClosedRange<Double> = 0.05...0.15
        /// Creates the defaults: 4-8 mm over 0.45-0.65 s, 0.05-0.15 s after the drive stops.
        public init() {}
    }

    /// A fast rep's bar rising past its final top and settling back down to it.
    public struct Overshoot: Sendable, Equatable {
        /// How far past the top, mm (drawn per rep).
        public var distanceMm: ClosedRange<Double> = 10...25
        /// How long the settling back takes, seconds (drawn per rep).
        public var settleS: ClosedRange<Double> = 0.25...0.45
        /// Only reps at least this fast (mean velocity, m/s) overshoot; slower ones creep if
        /// `lockoutCreep` is on.
        public var minVelocityMps = 0.6
        /// Creates the defaults: 10-25 mm, settled in 0.25-0.45 s, reps of 0.6 m/s and faster.
        public init() {}
    }

    /// A bar position tracked in phone video: frames at `rateHz`, the tracker's noise, and now and
    /// then a jump onto another feature (a plate's edge, a hand) for a moment. No state guess and no
    /// accelerometer.
    public struct VideoTrack: Sendable, Equatable {
        /// Frames a second.
        public var rateHz = 30.0
        /// The tracker's noise (standard deviation), mm, drawn once a session.
        public var noiseMm: ClosedRange<Double> = 2...4
        /// Tracking jumps a minute.
        public var jumpsPerMinute = 3.0
        /// How far a jump lands off the bar, mm (either way).
        public var jumpMm: ClosedRange<Double> = 15...60
        /// How long the tracker stays off, seconds.
        public var jumpS: ClosedRange<Double> = 0.03...0.3
        /// Creates the defaults: 30 fps, 2-4 mm noise, 3 jumps a minute of 15-60 mm for 1-9 frames.
        public init() {}
    }

    /// A WitMotion WT901 over BLE: it samples on its own clock (a little off the rate asked),
    /// queues readings in groups, and each group leaves at the next connection event; an event
    /// the radio misses sends its groups with the next one. The bridge stamps them as
    /// `SensorClock` does, from their arrival.
    public struct IMUBursts: Sendable, Equatable {
        /// The sensor's clock against the rate asked (0.99: 99 Hz when 100 is asked).
        public var clockRatio = 0.99
        /// Readings a group.
        public var groupSize = 4
        /// The connection interval, seconds.
        public var connectionIntervalS = 0.031
        /// Chance that a connection event carries nothing (its groups go with the next).
        public var missedEventChance = 0.08
        /// From the connection event to the bridge reading the notification, seconds.
        public var latencyS: ClosedRange<Double> = 0.0005...0.003
        /// Stamp each reading at its arrival, 1 us apart (a naive bridge) rather than as
        /// `SensorClock` spreads them.
        public var stampedAtArrival = false
        /// Creates the defaults: 99 Hz in groups of 4 every 31 ms, 8 % of events missed.
        public init() {}
    }
}

/// A mode by name, as `sensor-bridge --mode` takes it.
public enum SimulationMode: String, Sendable, CaseIterable {
    /// A ROM of 250 mm (`--rom-mm` sets another).
    case shortROM = "short-rom"
    /// Depth shrinking to two thirds over each set (`--depth-mm FIRST:LAST` sets it).
    case shrinkingDepth = "shrinking-depth"
    /// A sticking point in every rep.
    case sticking
    /// A 3 s descent and a 1-3 s pause at the bottom.
    case paused
    /// Lockout creep.
    case creep
    /// Overshoot of fast reps.
    case overshoot
    /// The distance sensor is a 30 fps video track.
    case video
    /// The IMU's readings arrive in BLE bursts.
    case bleBursts = "ble-bursts"
    /// A 10 Hz IMU, each reading the mean over its period.
    case imu10Hz = "imu-10hz"

    /// Turns the mode on in `config`.
    public func apply(to config: inout SimulationConfig) {
        switch self {
        case .shortROM: config.modes.romMm = config.modes.romMm ?? 250
        case .shrinkingDepth:
            if config.modes.shrinkingDepth == nil {
                let rom = config.effectiveExercise.romMm
                config.modes.shrinkingDepth = .init(firstMm: rom, lastMm: rom * 2 / 3)
            }
        case .sticking: config.modes.stickingPoint = .init()
        case .paused: config.modes.tempo = .init()
        case .creep: config.modes.lockoutCreep = .init()
        case .overshoot: config.modes.overshoot = .init()
        case .video: config.modes.videoTrack = .init()
        case .bleBursts: config.modes.imuBursts = .init()
        case .imu10Hz:
            config.imuRateHz = 10
            config.modes.imuMeanOverPeriod = true
        }
    }
}

extension SimulationConfig {
    /// The exercise as simulated: with `modes.romMm`, its ROM, the bottom raised to keep the lockout
    /// where the catalogue's is.
    public var effectiveExercise: SimExercise {
        guard let rom = modes.romMm else { return exercise }
        var shortened = exercise
        shortened.bottomDistanceMm += exercise.romMm - rom
        shortened.romMm = rom
        return shortened
    }

    /// Distance readings a second: the video's frame rate with `modes.videoTrack`, else the laser's.
    public var distanceReadingRateHz: Double { modes.videoTrack?.rateHz ?? distanceRateHz }
}

extension BarTimeline.Segment {
    /// Position (mm), velocity and acceleration `x` (0-1) of the way through a velocity ramp:
    /// v = v0 + (v1 - v0) (1 - cos(pi x)) / 2, integrated exactly.
    func rampState(_ x: Double) -> (positionMm: Double, velocityMps: Double, accelerationMps2: Double) {
        let dv = v1 - v0
        let position = from + 1000 * duration * (v0 * x + dv / 2 * (x - sin(.pi * x) / .pi))
        let velocity = v0 + dv * (1 - cos(.pi * x)) / 2
        let acceleration = x >= 1 ? 0 : dv * .pi / (2 * duration) * sin(.pi * x)
        return (position, velocity, acceleration)
    }
}

extension BarTimeline {
    /// A velocity ramp from `v0` to `v1` m/s over `seconds`, from the last segment's end.
    mutating func ramp(_ v0: Double, _ v1: Double, _ seconds: Double) {
        let from = segments.last?.to ?? 0
        let to = from + 1000 * seconds * (v0 + v1) / 2
        segments.append(Segment(start: duration, duration: seconds, from: from, to: to, ramp: true, v0: v0, v1: v1))
        duration += seconds
    }

    /// A rep's rise from `from` to `to` (mm) at mean velocity `velocity`, shaped by `modes`, and its
    /// ground truth. Without a sticking point, creep or overshoot it is `lift`'s.
    mutating func rise(
        from: Double, to: Double, velocity: Double, set: Int, index: Int, of count: Int, touchAndGo: Bool, modes: SimulationModes,
        random: inout SeededGenerator
    ) {
        let sticks = modes.stickingPoint.map { !$0.lastRepOnly || index == count } ?? false
        let overshoots = modes.overshoot.map { velocity >= $0.minVelocityMps } ?? false
        let creeps = modes.lockoutCreep != nil && !overshoots
        guard sticks || overshoots || creeps else {
            lift(from: from, to: to, velocity: velocity, set: set, index: index, touchAndGo: touchAndGo)
            return
        }
        let overshootMm = overshoots ? Double.random(in: modes.overshoot!.distanceMm, using: &random) : 0
        let top = to + overshootMm
        let start = duration, firstSegment = segments.count
        var peak = 0.0
        var creepM = 0.0, creepS = 0.0, stillS = 0.0
        if creeps, let creep = modes.lockoutCreep {
            creepM = Double.random(in: creep.distanceMm, using: &random) / 1000
            creepS = Double.random(in: creep.durationS, using: &random)
            stillS = Double.random(in: creep.stillS, using: &random)
        }
        if sticks, let sticking = modes.stickingPoint {
            // The rise is a chain of velocity ramps; the main part's durations are fixed by the mean
            // velocity and the peaks solved for so the chain covers the ROM exactly. Each ramp covers
            // its duration times the mean of its end velocities. With creep, the drive ends at
            // rest `creepM` short of the top, and the creep comes after it (below).
            let mainM = (top - from) / 1000 - creepM
            // The moving parts take what the whole rise would at `velocity`; a stall adds its time.
            let movingS = mainM / velocity
            var stall = Double.random(in: sticking.velocityMps, using: &random)
            let stallS = Double.random(in: sticking.durationS, using: &random)
            // Before the stall 40 % of the moving time, after it 60 %: each part speeds up (30 %),
            // cruises (30 %) and slows (40 %); the first peak is 0.85 of the second.
            let (before, after, share) = (0.4 * movingS, 0.6 * movingS, 0.85)
            let perPeak = share * before * (0.15 + 0.3 + 0.2) + after * (0.15 + 0.3 + 0.2)
            func secondPeak(_ stall: Double) -> Double {
                (mainM - stall * (0.2 * before + stallS + 0.15 * after)) / perPeak
            }
            if secondPeak(stall) < 2 * stall {  // a rise too short for the crawl asked: crawl slower
                stall = mainM / (2 * perPeak + 0.2 * before + stallS + 0.15 * after)
            }
            let second = secondPeak(stall), first = share * second
            ramp(0, first, 0.3 * before)
            ramp(first, first, 0.3 * before)
            ramp(first, stall, 0.4 * before)
            ramp(stall, stall, stallS)
            ramp(stall, second, 0.3 * after)
            ramp(second, second, 0.3 * after)
            ramp(second, 0, 0.4 * after)
            peak = second
            // Ramps land within rounding of the drive's top; the next segments start from it exactly.
            segments[segments.count - 1].to = top - 1000 * creepM
        } else {
            // The default's drive (with creep, `creepM` short of the top), so that creep is all
            // this rep adds to it.
            let driveTop = top - 1000 * creepM
            let concentricS = (driveTop - from) / 1000 / velocity
            move(from, driveTop, concentricS)
            peak = (driveTop - from) / 1000 / concentricS * .pi / 2
        }
        let end = duration
        let romMm = segments[segments.count - 1].to - segments[firstSegment].from
        reps.append(
            SimulatedRep(
                set: set, index: index, concentricStartS: start, concentricEndS: end, meanVelocityMps: romMm / 1000 / (end - start),
                peakVelocityMps: peak, romMm: romMm, touchAndGo: touchAndGo))
        if creeps {
            // The lockout: the bar stands, then creeps up `creepM` and comes to rest again, its
            // velocity rising and falling along half cosines (peak 2 creepM / creepS).
            let at = segments[segments.count - 1].to
            segments.append(Segment(start: duration, duration: stillS, from: at, to: at))
            duration += stillS
            ramp(0, 2 * creepM / creepS, creepS / 2)
            ramp(2 * creepM / creepS, 0, creepS / 2)
            segments[segments.count - 1].to = top
        }
        if overshoots { move(top, to, Double.random(in: modes.overshoot!.settleS, using: &random)) }
    }
}

/// One delivery of IMU readings: when they reached the bridge (session seconds) and the readings
/// as stamped.
public struct IMUBurst: Sendable {
    /// Arrival at the bridge, seconds from the session start.
    public var arrivalS: Double
    /// The readings, oldest first, `t` as the bridge stamped them (wall seconds).
    public var readings: [SampleMessage.IMUReading]
    /// When the sensor took each reading (session seconds).
    public var sampledS: [Double]
}

extension SimulatedSensors {
    /// The video track's frames (`modes.videoTrack`): the bar's height plus the tracker's noise and
    /// jumps, no state guess and no accelerometer; the faults' timing applies.
    mutating func videoStream(_ video: SimulationModes.VideoTrack, wallOrigin: Double) -> [SampleMessage.DistanceReading] {
        var faultRandom = SeededGenerator(seed: config.seed ^ 0xFA17)
        var videoRandom = SeededGenerator(seed: config.seed ^ 0x71DE0)
        let (times, delivery) = config.faults.schedule(rateHz: video.rateHz, duration: timeline.duration, random: &faultRandom)
        let noiseMm = Double.random(in: video.noiseMm, using: &videoRandom)
        // Jumps: Poisson arrivals, each an offset held for a moment.
        var jumps: [DistanceSpike] = []
        if video.jumpsPerMinute > 0 {
            var t = 0.0
            while true {
                t += -log(Double.random(in: Double.ulpOfOne..<1, using: &videoRandom)) * 60 / video.jumpsPerMinute
                guard t < timeline.duration else { break }
                let length = Double.random(in: video.jumpS, using: &videoRandom)
                let size = Double.random(in: video.jumpMm, using: &videoRandom)
                jumps.append(DistanceSpike(start: t, end: t + length, offsetMm: Bool.random(using: &videoRandom) ? size : -size))
                t += length
            }
        }
        var jump = 0
        let bottom = config.effectiveExercise.bottomDistanceMm
        let readings = times.map { t -> SampleMessage.DistanceReading in
            var mm = bottom + timeline.state(at: t).positionMm + videoRandom.normal(sd: noiseMm)
            while jump < jumps.count, jumps[jump].end < t { jump += 1 }
            if jump < jumps.count, jumps[jump].start <= t { mm += jumps[jump].offsetMm }
            return .init(t: ((wallOrigin + t) * 1e6).rounded() / 1e6, distanceMm: max(0, (mm * 10).rounded() / 10), state: nil, accG: nil)
        }
        return delivery.map { readings[$0] }
    }

    /// The IMU's deliveries with `modes.imuBursts`: readings taken on the sensor's own clock,
    /// queued in groups, each group sent at the first connection event after it is complete (an
    /// event missed sends its groups with the next), stamped on arrival by a `SensorClock` asked
    /// for `imuRateHz` (or 1 us apart, with `stampedAtArrival`).
    public mutating func imuBursts(wallOrigin: Double) -> [IMUBurst] {
        guard let bursts = config.modes.imuBursts, config.imuRateHz > 0 else { return [] }
        var burstRandom = SeededGenerator(seed: config.seed ^ 0xB1E5)
        let period = 1 / (config.imuRateHz * bursts.clockRatio)
        let group = max(1, bursts.groupSize)
        let phase = Double.random(in: 0..<bursts.connectionIntervalS, using: &burstRandom)
        var clock = SensorClock(nominalRateHz: config.imuRateHz)
        var naive = MonotonicStamper()
        var deliveries: [IMUBurst] = []
        var event = 0  // the next connection event that may carry something
        var k = 0
        while Double(k + group - 1) * period <= timeline.duration {
            let sampled = (k..<(k + group)).map { Double($0) * period }
            k += group
            let complete = sampled[group - 1]
            event = max(event, Int(((complete - phase) / bursts.connectionIntervalS).rounded(.up)))
            while Double.random(in: 0..<1, using: &burstRandom) < bursts.missedEventChance { event += 1 }
            let arrival = phase + Double(event) * bursts.connectionIntervalS + Double.random(in: bursts.latencyS, using: &burstRandom)
            if let lastDelivery = deliveries.last, lastDelivery.arrivalS >= phase + Double(event) * bursts.connectionIntervalS {
                // The same connection event: one burst.
                deliveries[deliveries.count - 1].sampledS += sampled
            } else {
                deliveries.append(IMUBurst(arrivalS: arrival, readings: [], sampledS: sampled))
            }
        }
        for index in deliveries.indices {
            let arrivalWall = wallOrigin + deliveries[index].arrivalS
            let count = deliveries[index].sampledS.count
            let stamps =
                bursts.stampedAtArrival
                ? (0..<count).map { _ in naive.stamp(arrivalWall) } : clock.stamp(arrivalS: arrivalWall, count: count)
            deliveries[index].readings = zip(stamps, deliveries[index].sampledS).map { stamp, sampled in
                var reading = imu(at: sampled, wallOrigin: wallOrigin)
                reading.t = stamp
                return reading
            }
        }
        return deliveries
    }

    /// The bar's mean acceleration over the IMU's period before `t`, m/s^2 (a part filtering to its
    /// output rate).
    func meanIMUAcceleration(at t: Double) -> Double {
        let period = 1 / max(1, config.imuRateHz)
        return (timeline.state(at: t).velocityMps - timeline.state(at: t - period).velocityMps) / period
    }
}
