import Foundation
import Testing
import VBTBus
@testable import VBTDetection
@testable import VBTSensors

/// The simulator's real-sensor mode (SensorFaults.realWorld) against the
/// detector, with ground truth, on seeds not used in development.
@Suite("Real sensors: faults, ground truth, unseen seeds")
struct RealSensorTests {
    enum Sensor: String, CustomStringConvertible {
        /// Laser alone at 50 Hz, with spikes and no-return readings.
        case laser50
        /// Lidar at 20 Hz (no accelerometer), with spikes and no-return readings.
        case lidar20
        /// Phone-grade IMU at 60 Hz: acceleration and gyro only, offsets off 1 g, uneven timing.
        case imu60
        var description: String { rawValue }
    }

    struct Score {
        var truePositives = 0, falsePositives = 0, falseNegatives = 0
        var errors: [Double] = []
        var pickupReps = 0
        var detail = ""
        var f1: Double {
            let p = Double(truePositives) / Double(max(1, truePositives + falsePositives))
            let r = Double(truePositives) / Double(max(1, truePositives + falseNegatives))
            return p + r > 0 ? 2 * p * r / (p + r) : 0
        }
        var mae: Double { errors.isEmpty ? .infinity : errors.reduce(0, +) / Double(errors.count) }
    }

    static let exercises: [(exercise: SimExercise, load: Double, oneRM: Double)] = [
        (.squat, 60, 140), (.squat, 120, 140), (.bench, 50, 100), (.bench, 85, 100),
        (.deadliftFromFloor, 120, 180), (.deadliftFromFloor, 165, 180), (.press, 30, 60), (.press, 50, 60),
    ]

    /// Runs every exercise with `sensor` on `seeds` and scores the reps by
    /// matching each to the true rep whose top is nearest (within 0.5 s).
    static func score(_ sensor: Sensor, seeds: [UInt64]) -> Score {
        var score = Score()
        for seed in seeds {
            for c in exercises {
                var config = SimulationConfig()
                config.exercise = c.exercise
                config.loadKg = c.load
                config.oneRepMaxKg = c.oneRM
                config.seed = seed
                config.sets = 2
                config.repsPerSet = 5
                config.restS = 20
                config.faults = .realWorld
                config.laserAccelerometer = false
                config.distanceRateHz = sensor == .laser50 ? 50 : sensor == .lidar20 ? 20 : 0
                config.distanceNoiseMm = sensor == .lidar20 ? 4 : 2
                config.imuRateHz = sensor == .imu60 ? 60 : 0
                var sensors = SimulatedSensors(config)
                var detector = StationDetector(station: config.station)
                detector.assignment.exercise = c.exercise.name
                detector.assignment.loadKg = c.load
                detector.assignment.velocityLossThresholdPct = 100
                let origin = 1_763_812_345.0
                var outputs: [DetectorOutput] = []
                if sensor == .imu60 {
                    for r in sensors.imuStream(wallOrigin: origin) { outputs += detector.feed(.imu([r])) }
                } else {
                    for r in sensors.distanceStream(wallOrigin: origin) { outputs += detector.feed(.distance([r])) }
                }
                outputs += detector.closeIdleSet(at: origin + sensors.timeline.duration + 60)
                var found = reps(outputs)
                var matched = 0
                for truth in sensors.timeline.reps {
                    let top = origin + truth.concentricEndS
                    guard let best = found.indices.min(by: { abs(found[$0].measurement.concentricEndT - top) < abs(found[$1].measurement.concentricEndT - top) }),
                          abs(found[best].measurement.concentricEndT - top) <= 0.5 else {
                        score.falseNegatives += 1
                        continue
                    }
                    score.errors.append(abs(found[best].measurement.meanVelocityMps - truth.meanVelocityMps))
                    found.remove(at: best)
                    matched += 1
                }
                score.truePositives += matched
                score.falsePositives += found.count
                for pickup in sensors.timeline.pickups {
                    score.pickupReps += found.filter { $0.measurement.concentricEndT >= origin + pickup.lowerBound - 0.5 && $0.measurement.concentricEndT <= origin + pickup.upperBound + 0.5 }.count
                }
                if matched != sensors.timeline.reps.count || !found.isEmpty {
                    let why = rejections(outputs).map { "\($0.reason)(\(String(format: "%.0f", $0.measurement.romMm)))" }.joined(separator: " ")
                    score.detail += "\(c.exercise.name) \(c.load) kg seed \(seed): \(matched)/\(sensors.timeline.reps.count), \(found.count) extra; rejected: \(why)\n"
                }
            }
        }
        return score
    }

    static func check(_ score: Score, maxMAE: Double, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(score.f1 >= 0.99, "F1 \(score.f1): \(score.detail)", sourceLocation: sourceLocation)
        #expect(score.mae <= maxMAE, "mean absolute error \(score.mae) m/s", sourceLocation: sourceLocation)
        #expect(score.pickupReps == 0, sourceLocation: sourceLocation)
    }

    @Test("laser at 50 Hz with spikes, no-return readings, uneven timing, gaps, repeats: rep F1 >= 0.99, MAE <= 0.02 m/s, no rep for a pick-up to the shoulders")
    func laser() {
        Self.check(Self.score(.laser50, seeds: [901, 902]), maxMAE: 0.02)
    }

    // Not there yet (issue 14 stays open): at 20 Hz a spike or a gap next to a
    // turning point still costs a rep now and then (F1 0.987 on these seeds,
    // MAE 0.022); a phone-grade IMU without angles is found 1 rep in 5. The
    // figures are printed so each change shows where it stands.
    @Test("lidar at 20 Hz and a phone-grade IMU at 60 Hz without angles: F1 >= 0.99 and MAE <= 0.03 / 0.05 m/s (known to fall short)",
          arguments: [(Sensor.lidar20, 0.03), (Sensor.imu60, 0.05)])
    func notYet(sensor: Sensor, maxMAE: Double) {
        let score = Self.score(sensor, seeds: [901, 902])
        print("real \(sensor): F1 \(score.f1) TP \(score.truePositives) FP \(score.falsePositives) FN \(score.falseNegatives) MAE \(score.mae)")
        withKnownIssue("issue 14: not yet at the target for \(sensor)", isIntermittent: true) {
            Self.check(score, maxMAE: maxMAE)
        }
    }
}

@Suite("Spike gate")
struct SpikeGateTests {
    /// A bar rising at 0.5 m/s, read at 20 Hz with 2 mm of noise, from 1.0 m.
    func readings(_ count: Int) -> [(t: Double, m: Double)] {
        var random = SeededGenerator(seed: 5)
        var list: [(t: Double, m: Double)] = []
        for k in 0..<count {
            let t = Double(k) * 0.05
            list.append((t, 1.0 + 0.5 * t + random.normal(sd: 0.002)))
        }
        return list
    }

    @Test("a 0.2 s jump of 150 mm and back, in mid-movement, is dropped and counted; no-return readings too; the rest pass in order")
    func spikeDropped() {
        var gate = SpikeGate()
        var passed: [Double] = []
        for (k, r) in readings(40).enumerated() {
            let m = (20..<24).contains(k) ? r.m + 0.15 : k == 30 ? 0 : r.m
            passed += gate.feed(t: r.t, m: m).map(\.t)
        }
        #expect(gate.dropped == 5)
        #expect(passed == readings(40).enumerated().filter { !(20..<24).contains($0.offset) && $0.offset != 30 }.map(\.element.t))
    }

    @Test("a jump that stays (the sensor moved) is passed on whole after 0.35 s; nothing dropped")
    func realJumpKept() {
        var gate = SpikeGate()
        var passed: [SpikeGate.Reading] = []
        for (k, r) in readings(40).enumerated() { passed += gate.feed(t: r.t, m: k >= 20 ? r.m + 0.15 : r.m) }
        #expect(gate.dropped == 0)
        #expect(passed.count == 40)
        #expect(passed.map(\.t) == readings(40).map(\.t))
    }
}
