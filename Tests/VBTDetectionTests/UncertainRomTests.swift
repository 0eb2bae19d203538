import Foundation
import Testing
import VBTWire

@testable import VBTDetection
@testable import VBTSensors

/// What a station learns of its athlete's ROM, where a sensor is uncertain: a 10 Hz bar IMU (each
/// reading the mean over its period, the real-world faults) reads a bench press's un-rack as a short
/// rep and its full reps anywhere from 0.3 to 0.7 m. Neither may lock the set's reps out.
@Suite("learning the ROM from an uncertain sensor")
struct UncertainRomTests {
    /// The reps found in a bench press session (2 sets of 5 at 50 or 85 kg) with a 10 Hz bar IMU,
    /// matched to the true reps by their tops, and the true reps' count.
    static func benchAt10Hz(seed: UInt64, exercise index: Int) -> (found: Int, truth: Int, rejected: [String]) {
        var config = RealSensorTests.session(.imu60, RealSensorTests.exercises[index], seed: seed)
        SimulationMode.imu10Hz.apply(to: &config)
        let (outputs, sensors) = RealSensorTests.detect(config, sensor: .imu60)
        let origin = RealSensorTests.origin
        let tops = reps(outputs).map { $0.measurement.concentricEndT - origin }
        let found = sensors.timeline.reps.filter { truth in tops.contains { abs($0 - truth.concentricEndS) <= 0.5 } }.count
        let rejected = rejections(outputs).map { "\($0.reason) \(Int($0.measurement.romMm)) mm" }
        return (found, sensors.timeline.reps.count, rejected)
    }

    // Before: 0 of 10 in both; now 5 and 9. The un-rack, read as a 100-160 mm rep inside the
    // catalogue band's allowance for the sensor, was learned as the ROM, and every full rep was then
    // `rom-too-long`; three of them never agreed within 15 % to be learned instead.
    @Test(
        "a 10 Hz bar IMU's un-rack read as a short rep does not lock a bench press's full reps out: half of them or more are found",
        arguments: [(UInt64(1075), 2), (1076, 3)])
    func unrackTeachesNoRom(seed: UInt64, exercise: Int) {
        let (found, truth, rejected) = Self.benchAt10Hz(seed: seed, exercise: exercise)
        print("bench at 10 Hz, seed \(seed): \(found) of \(truth)")
        #expect(found >= truth / 2, "\(found) of \(truth) reps; rejected: \(rejected.joined(separator: ", "))")
    }
}
