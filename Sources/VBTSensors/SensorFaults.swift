import Foundation
import Synchronization
import VBTBus
import VBTWire

// What real sensors do that the simulator's tidy ones don't, so the detector
// can be held to it with ground truth. Each fault is one that recordings of
// real lifts show:
// - a bar IMU at about 60 Hz, readings 11-71 ms apart, reading 1.021-1.027 g
//   at rest, sending acceleration and gyro but no angles;
// - a 20 Hz lidar, and over a dark mat spikes: jumps of 0.1-0.3 s at an
//   apparent 1.5-5 m/s, and readings with no return at all;
// - readings repeated or delivered out of order by the link;
// - the bar picked up to the shoulders before a set (SimExercise.press).

/// The faults a simulated session's sensors show (none by default).
public struct SensorFaults: Sendable, Equatable {
    /// Each reading is taken up to this share of a period early or late.
    public var timingJitter = 0.0
    /// Chance per reading that the link drops the readings after it (a gap
    /// of at most `maxGapS`).
    public var gapChance = 0.0
    /// Longest gap between two delivered readings that a drop makes, seconds.
    public var maxGapS = 0.1
    /// Chance per reading that it is delivered twice.
    public var repeatChance = 0.0
    /// Chance per reading that it arrives after the next one.
    public var swapChance = 0.0
    /// Distance spikes per minute (a dark mat, a reflective plate).
    public var spikesPerMinute = 0.0
    /// Chance per distance reading that it has no return (sent as 0 mm).
    public var noReturnChance = 0.0
    /// The IMU is a phone-grade part: gain and offsets off (1.021-1.027 g at
    /// rest), 0.02 g noise, gyro bias, no angles, mounted at an angle on a bar
    /// that turns in the hands.
    public var phoneGradeIMU = false

    /// Creates no faults.
    public init() {}

    /// Everything at once, at the levels real recordings show.
    public static let realWorld: SensorFaults = {
        var faults = SensorFaults()
        faults.timingJitter = 0.6
        faults.gapChance = 0.01
        faults.repeatChance = 0.005
        faults.swapChance = 0.005
        faults.spikesPerMinute = 6
        faults.noReturnChance = 0.005
        faults.phoneGradeIMU = true
        return faults
    }()

    /// Whether any fault is on.
    public var any: Bool { self != SensorFaults() }
}

/// A gap, a spike: when the stream misbehaves.
struct DistanceSpike: Sendable {
    var start: Double, end: Double, offsetMm: Double
}

extension SensorFaults {
    /// Reading times of a sensor at `rateHz` over `duration` seconds, and the
    /// order they are delivered in: indices into the times, repeated for a
    /// repeated reading, swapped for an out-of-order one.
    func schedule(rateHz: Double, duration: Double, random: inout SeededGenerator) -> (times: [Double], delivery: [Int]) {
        guard rateHz > 0 else { return ([], []) }
        let period = 1 / rateHz
        var times: [Double] = []
        var k = 0
        while Double(k) * period <= duration {
            let jitter = timingJitter > 0 ? Double.random(in: -timingJitter...timingJitter, using: &random) : 0
            let t = max(0, (Double(k) + jitter) * period)
            times.append(t)
            k += 1
            // A drop: the next readings never arrive (the gap stays within maxGapS).
            if gapChance > 0, Double.random(in: 0..<1, using: &random) < gapChance {
                let most = max(0, Int((maxGapS * rateHz).rounded(.down)) - 2)
                if most > 0 { k += Int.random(in: 1...most, using: &random) }
            }
        }
        // Jitter may reorder neighbours in time; sensor time is what it is.
        times.sort()
        var delivery: [Int] = []
        delivery.reserveCapacity(times.count)
        var index = 0
        while index < times.count {
            if swapChance > 0, index + 1 < times.count, Double.random(in: 0..<1, using: &random) < swapChance {
                delivery += [index + 1, index]
                index += 2
                continue
            }
            delivery.append(index)
            if repeatChance > 0, Double.random(in: 0..<1, using: &random) < repeatChance { delivery.append(index) }
            index += 1
        }
        return (times, delivery)
    }

    /// Spikes over a session: Poisson arrivals, each 0.1-0.3 s long, the
    /// reading jumping by what 1.5-5 m/s would move in one period.
    func spikes(duration: Double, rateHz: Double, random: inout SeededGenerator) -> [DistanceSpike] {
        guard spikesPerMinute > 0, rateHz > 0 else { return [] }
        var spikes: [DistanceSpike] = []
        var t = 0.0
        while true {
            t += -log(Double.random(in: Double.ulpOfOne..<1, using: &random)) * 60 / spikesPerMinute
            guard t < duration else { return spikes }
            let length = Double.random(in: 0.1...0.3, using: &random)
            let jump = Double.random(in: 1.5...5, using: &random) / rateHz * 1000
            spikes.append(DistanceSpike(start: t, end: t + length, offsetMm: Bool.random(using: &random) ? jump : -jump))
            t += length
        }
    }
}

extension SimulatedSensors {
    /// Every laser reading of the session in the order a bridge would deliver
    /// them, with the configured faults.
    public mutating func distanceStream(wallOrigin: Double) -> [SampleMessage.DistanceReading] {
        if let video = config.modes.videoTrack { return videoStream(video, wallOrigin: wallOrigin) }
        var faultRandom = SeededGenerator(seed: config.seed ^ 0xFA17)
        let faults = config.faults
        let (times, delivery) = faults.schedule(rateHz: config.distanceRateHz, duration: timeline.duration, random: &faultRandom)
        let spikes = faults.spikes(duration: timeline.duration, rateHz: config.distanceRateHz, random: &faultRandom)
        var spike = 0
        let readings = times.map { t -> SampleMessage.DistanceReading in
            var reading = distance(at: t, wallOrigin: wallOrigin)
            while spike < spikes.count, spikes[spike].end < t { spike += 1 }
            if spike < spikes.count, spikes[spike].start <= t {
                reading.distanceMm = max(0, ((reading.distanceMm + spikes[spike].offsetMm) * 10).rounded() / 10)
            }
            if faults.noReturnChance > 0, Double.random(in: 0..<1, using: &faultRandom) < faults.noReturnChance {
                reading.distanceMm = 0
                reading.state = nil
            }
            return reading
        }
        return delivery.map { readings[$0] }
    }

    /// Every IMU reading of the session in delivery order, with the configured faults.
    /// With `modes.imuBursts`, the bursts' readings in order (the bursts replace the faults' timing).
    public mutating func imuStream(wallOrigin: Double) -> [SampleMessage.IMUReading] {
        if config.modes.imuBursts != nil { return imuBursts(wallOrigin: wallOrigin).flatMap(\.readings) }
        var faultRandom = SeededGenerator(seed: config.seed ^ 0x1A0F)
        let (times, delivery) = config.faults.schedule(rateHz: config.imuRateHz, duration: timeline.duration, random: &faultRandom)
        let readings = times.map { imu(at: $0, wallOrigin: wallOrigin) }
        return delivery.map { readings[$0] }
    }

    /// A phone-grade IMU's reading: mounted 25 degrees rolled and 12 pitched
    /// on a bar that turns slowly in the hands, gain 1.024 with offsets of
    /// about 0.01 g (so 1.021-1.027 g at rest), 0.02 g noise per axis, gyro
    /// with a bias of about 1 dps and 0.5 dps noise, and no angles; its
    /// acceleration filtered to the output rate (the mean over a period).
    mutating func phoneGradeIMU(at t: Double, wallOrigin: Double) -> SampleMessage.IMUReading {
        // A MEMS part filters to its output rate: each reading is the mean
        // acceleration over the period before it, not an instant's.
        let period = 1 / max(1, config.imuRateHz)
        let meanAcceleration = (timeline.state(at: t).velocityMps - timeline.state(at: t - period).velocityMps) / period
        let d = Double.pi / 180
        // Euler angles (roll about x, pitch about y, yaw about z) and their rates.
        let roll = 25 + 8 * sin(0.3 * 2 * .pi * t), rollRate = 8 * 0.3 * 2 * .pi * cos(0.3 * 2 * .pi * t)
        let pitch = -12 + 3 * sin(0.17 * 2 * .pi * t + 1), pitchRate = 3 * 0.17 * 2 * .pi * cos(0.17 * 2 * .pi * t + 1)
        let yaw = 60 + 5 * t, yawRate = 5.0
        let world = Vector3(0, 0, 1 + meanAcceleration / 9.80665)
        var acc = worldToSensor(world, rollDeg: roll, pitchDeg: pitch, yawDeg: yaw)
        let gain = 1.024, offset = Vector3(0.01, -0.008, 0.012), noise = 0.02
        acc = Vector3(
            gain * acc.x + offset.x + random.normal(sd: noise), gain * acc.y + offset.y + random.normal(sd: noise),
            gain * acc.z + offset.z + random.normal(sd: noise))
        // Body rates of R = Rz(yaw) Ry(pitch) Rx(roll): what a gyro measures.
        let (phi, theta) = (roll * d, pitch * d)
        let body = Vector3(
            rollRate - yawRate * sin(theta),
            pitchRate * cos(phi) + yawRate * cos(theta) * sin(phi),
            -pitchRate * sin(phi) + yawRate * cos(theta) * cos(phi))
        let gyro = Vector3(body.x + 0.8 + random.normal(sd: 0.5), body.y - 1.2 + random.normal(sd: 0.5), body.z + 0.5 + random.normal(sd: 0.5))
        func printed(_ v: Vector3, _ step: Double) -> Vector3 {
            Vector3((v.x / step).rounded() * step, (v.y / step).rounded() * step, (v.z / step).rounded() * step)
        }
        return .init(t: ((wallOrigin + t) * 1e6).rounded() / 1e6, accG: printed(acc, 0.0001), gyroDps: printed(gyro, 0.01), angleDeg: nil)
    }
}

/// Writes reference labels (proto/labels.md): one CSV row per simulated rep,
/// `station,t_top,mean_velocity_mps,peak_velocity_mps`, `t_top` in the
/// readings' time. Each row is flushed as written, so the file is complete
/// for every pass that has begun.
public final class TruthWriter: Sendable {
    // Only the simulator source's thread writes; the mutex keeps that honest.
    private let file: Mutex<UnsafeMutablePointer<FILE>>

    /// Creates (or truncates) `path` and writes the header.
    public init(path: String) throws(RecordingError) {
        guard let file = fopen(path, "w") else {
            throw RecordingError("cannot write \(path): \(String(cString: strerror(errno))); check the folder exists and is writable")
        }
        fputs("station,t_top,mean_velocity_mps,peak_velocity_mps\n", file)
        fflush(file)
        self.file = Mutex(file)
    }

    deinit { file.withLock { _ = fclose($0) } }

    /// The rows of `reps`, whose times count from `origin` (Unix seconds).
    public func append(station: String, reps: [SimulatedRep], origin: Double) throws(RecordingError) {
        let lines = reps.map {
            "\(station),\(String(format: "%.6f", origin + $0.concentricEndS)),\(String(format: "%.4f", $0.meanVelocityMps)),\(String(format: "%.4f", $0.peakVelocityMps))\n"
        }
        let written = file.withLock { file -> Bool in
            defer { fflush(file) }
            return lines.allSatisfy { fputs($0, file) >= 0 }
        }
        guard written else { throw RecordingError("ground truth write failed: \(String(cString: strerror(errno))); is the disk full?") }
    }
}
