import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTPosture

/// Upright readings: gravity mostly on z, the field steady, with noise (deterministic).
func readings(_ count: Int, tiltDeg: Double = 0, seed: Int = 1) -> (acc: [Vector3], mag: [Vector3]) {
    var acc: [Vector3] = [], mag: [Vector3] = []
    var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15
    func noise() -> Double {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Double(state >> 11) / Double(1 << 53) - 0.5
    }
    let tilt = tiltDeg * .pi / 180
    for _ in 0..<count {
        acc.append(Vector3(9.81 * sin(tilt) + 0.2 * noise(), 0.2 * noise(), 9.81 * cos(tilt) + 0.2 * noise()))
        mag.append(Vector3(30 + 40 * sin(tilt) + 2 * noise(), -10 + 2 * noise(), -40 * cos(tilt) + 2 * noise()))
    }
    return (acc, mag)
}

@Suite("Posture calibration edge cases")
struct CalibrationEdgeTests {
    @Test("identical samples: singular covariance, the default with the reason")
    func identical() {
        let fit = SensorCalibration.fit(Array(repeating: Vector3(1, 2, 3), count: 50))
        #expect(!fit.fromData)
        #expect(fit.reason?.contains("determinant") == true)
        #expect(fit.mean == [1, 2, 3], "the default still centres on the data")
        #expect(fit.threshold > 0 && fit.threshold.isFinite)
    }

    @Test("fewer than 4 samples: the default, saying how many are needed")
    func tooFew() {
        let fit = SensorCalibration.fit([Vector3(1, 2, 3), Vector3(1, 2, 4), Vector3(2, 2, 3)])
        #expect(!fit.fromData)
        #expect(fit.reason?.contains("at least 4") == true)
    }

    @Test("NaN and infinite readings: the default; NaN input to density never gives NaN")
    func nan() {
        var data = readings(50).acc
        data[10] = Vector3(.nan, 0, 0)
        #expect(!SensorCalibration.fit(data).fromData)
        data[10] = Vector3(.infinity, 0, 0)
        #expect(!SensorCalibration.fit(data).fromData)
        let good = SensorCalibration.fit(readings(50).acc)
        #expect(good.fromData)
        for x in [[Double.nan, 0, 0], [.infinity, 1, 1], [-.infinity, 0, 0]] {
            let density = good.density(x)
            #expect(density.isFinite && density > 0)
        }
    }

    @Test("1e12 values: no overflow, no NaN; far readings get the guarded small density")
    func huge() {
        let scaled = readings(100).acc.map { Vector3($0.x * 1e12, $0.y * 1e12, $0.z * 1e12) }
        let fit = SensorCalibration.fit(scaled)
        #expect(fit.threshold.isFinite && !fit.threshold.isNaN)
        #expect(fit.density([1e12, 1e12, 1e12]).isFinite)
        let normal = SensorCalibration.fit(readings(100).acc)
        #expect(normal.density([1e12, 0, 0]) == 1e-10, "a difference beyond 1e6 is the guarded value")
        #expect(normal.density([50, 50, 50]) == 1e-50, "an exponent below -100 is the guarded value")
    }
}

@Suite("Posture evaluation")
struct PostureEvaluationTests {
    func calibrated() -> PostureTracker {
        var tracker = PostureTracker(station: "desk-1")
        tracker.startCalibration(athlete: "ana", seconds: 2)
        let upright = readings(120)
        var t = 1_000.0
        for (a, m) in zip(upright.acc, upright.mag) {
            _ = tracker.feed(t: t, acc: a, mag: m)
            t += 0.02
        }
        return tracker
    }

    func feed(_ tracker: inout PostureTracker, tiltDeg: Double, seconds: Double, from start: Double) -> [PostureReport] {
        let count = Int(seconds / 0.02)
        let data = readings(count, tiltDeg: tiltDeg, seed: Int(start))
        var reports: [PostureReport] = []
        for (i, (a, m)) in zip(data.acc, data.mag).enumerated() {
            for output in tracker.feed(t: start + Double(i) * 0.02, acc: a, mag: m) {
                if case .posture(let report) = output { reports.append(report) }
            }
        }
        return reports
    }

    @Test("another athlete calibrated at a station keeps the station's athlete and model; unassigned, nothing is judged")
    func calibrationIsTheAthletes() {
        var tracker = calibrated()
        let anas = tracker.calibration
        #expect(tracker.athlete == "ana")
        tracker.startCalibration(athlete: "ben", seconds: 2)
        let leaning = readings(120, tiltDeg: 25, seed: 7)
        var made: PostureCalibration?
        for (i, (a, m)) in zip(leaning.acc, leaning.mag).enumerated() {
            for output in tracker.feed(t: 3_000 + Double(i) * 0.02, acc: a, mag: m) {
                if case .calibrated(let calibration) = output { made = calibration }
            }
        }
        #expect(made?.athlete == "ben", "ben's calibration is made (and published, and stored for him)")
        #expect(tracker.athlete == "ana" && tracker.calibration == anas, "ana is still the one judged, with her own model")
        #expect(feed(&tracker, tiltDeg: 0, seconds: 1, from: 4_000).allSatisfy { $0.correct && $0.athlete == "ana" })
        tracker.unassign()
        #expect(tracker.athlete == nil && tracker.calibration == nil)
        #expect(feed(&tracker, tiltDeg: 30, seconds: 1, from: 5_000).isEmpty)
    }

    @Test("calibrate, slouch, sit straight: the state follows, changes are flagged once, sustained bad after 5 s")
    func follows() {
        var tracker = calibrated()
        #expect(tracker.calibration?.acc.fromData == true && tracker.calibration?.mag.fromData == true)
        let upright = feed(&tracker, tiltDeg: 0, seconds: 2, from: 2_000)
        #expect(upright.allSatisfy { $0.correct })
        let slouch = feed(&tracker, tiltDeg: 25, seconds: 7, from: 2_002)
        #expect(slouch.last?.correct == false)
        #expect(slouch.filter { $0.changed }.count == 1, "one change, after the hysteresis")
        #expect(slouch.last?.sustainedBad == true)
        #expect(slouch.contains { !$0.correct && !$0.sustainedBad }, "not sustained at first")
        let straight = feed(&tracker, tiltDeg: 0, seconds: 2, from: 2_009)
        #expect(straight.last?.correct == true && straight.last?.badForS == 0)
        #expect(straight.filter { $0.changed }.count == 1)
        // Bounded rate: at most 5 a second plus changes (50 readings a second in).
        #expect(slouch.count <= 7 * 5 + 2)
    }

    @Test("noise does not flap: a single odd reading does not change the state")
    func hysteresis() {
        var tracker = calibrated()
        _ = feed(&tracker, tiltDeg: 0, seconds: 1, from: 3_000)
        _ = feed(&tracker, tiltDeg: 40, seconds: 0.04, from: 3_001)
        let after = feed(&tracker, tiltDeg: 0, seconds: 1, from: 3_001.04)
        #expect(after.allSatisfy { $0.correct && !$0.changed })
    }

    @Test("a calibration that arrives mid-stream takes over at once and the state starts over")
    func midStream() {
        var tracker = calibrated()
        _ = feed(&tracker, tiltDeg: 25, seconds: 2, from: 4_000)
        // The athlete's posture is calibrated leaning: leaning is now correct.
        let leaning = readings(120, tiltDeg: 25)
        tracker.apply(PostureCalibration.fit(athlete: "ana", acc: leaning.acc, mag: leaning.mag, at: 4_002))
        let reports = feed(&tracker, tiltDeg: 25, seconds: 1, from: 4_002)
        #expect(reports.first?.changed == true && reports.allSatisfy { $0.correct })
    }

    @Test("calibrations survive a save and a load")
    func store() throws {
        var store = CalibrationStore()
        let data = readings(100)
        store.byAthlete["ana"] = PostureCalibration.fit(athlete: "ana", acc: data.acc, mag: data.mag, at: 1)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-cal-\(UUID().uuidString)/c.json").path
        try store.save(path: path)
        let loaded = try CalibrationStore.load(path: path)
        #expect(loaded == store)
    }
}

@Suite("Posture assignments")
struct PostureAssignmentTests {
    @Test("a new athlete without a calibration is not judged with the previous athlete's model")
    func newAthlete() {
        var tracker = PostureTracker(station: "desk-1")
        let data = readings(100)
        tracker.apply(PostureCalibration.fit(athlete: "ana", acc: data.acc, mag: data.mag, at: 1))
        #expect(!tracker.feed(t: 10, acc: data.acc[0], mag: data.mag[0]).isEmpty)
        tracker.clearCalibration(athlete: "ben")
        #expect(tracker.calibration == nil && tracker.athlete == "ben")
        #expect(tracker.feed(t: 11, acc: data.acc[1], mag: data.mag[1]).isEmpty)
    }
}
