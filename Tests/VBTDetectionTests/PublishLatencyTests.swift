import Foundation
import Testing
import VBTWire

@testable import VBTDetection
@testable import VBTSensors

/// How long after a rep's top the detector gives the rep, in reading time: the
/// time of the reading whose feeding produced the rep, less the rep's top
/// (`concentricEndT`). Reading time, not processing time, so the figures are the
/// same on any machine and the test is not timed (`make bench` times the calls).
@Suite("Rep latency in reading time")
struct PublishLatencyTests {
    /// Why a rep came out more than 0.5 s after its top, by the true rep it matches (top within 0.5 s).
    enum Late: String, CaseIterable {
        /// The first rep of a press set: it waits for its lowering to be told from a pick-up.
        case pressFirst = "a press set's first rep"
        /// The bar stayed at the top under 0.5 s (or the set's last rep, whose next move is no rep's
        /// lowering): no rest at the top ends its movement there.
        case noRestAtTop = "no rest at its top"
        /// Within 0.7 s: a rise that ends slowly is at rest 0.4 s (the window) after it stops.
        case slowEnd = "a slow end, within 0.7 s"
        case other = "none of these"
    }

    /// Latencies of every rep the detector gave over the real-sensor sessions
    /// (every exercise of RealSensorTests, seeds 951-952), seconds, sorted; the
    /// reps that came out only when the readings ended; and the reps more than
    /// 0.5 s late, by why.
    static func latencies(_ sensor: RealSensorTests.Sensor) -> (seconds: [Double], atEnd: Int, late: [Late: [Double]]) {
        var seconds: [Double] = []
        var atEnd = 0
        var late: [Late: [Double]] = [:]
        for seed: UInt64 in [951, 952] {
            for c in RealSensorTests.exercises {
                let config = RealSensorTests.session(sensor, c, seed: seed)
                var sensors = SimulatedSensors(config)
                var detector = StationDetector(station: config.station)
                detector.assignment.exercise = c.exercise.name
                detector.assignment.loadKg = c.load
                detector.assignment.velocityLossThresholdPct = 100
                let origin = 1_763_812_345.0
                // Each reading alone, as the rep-detector feeds a message's readings one by one.
                let fed: [(t: Double, readings: SampleMessage.Readings)] =
                    sensor == .imu60
                    ? sensors.imuStream(wallOrigin: origin).map { ($0.t, .imu([$0])) }
                    : sensors.distanceStream(wallOrigin: origin).map { ($0.t, .distance([$0])) }
                let truths = sensors.timeline.reps
                for reading in fed {
                    for rep in reps(detector.feed(reading.readings)) {
                        let latency = reading.t - rep.measurement.concentricEndT
                        seconds.append(latency)
                        guard latency > 0.5 else { continue }
                        let top = rep.measurement.concentricEndT - origin
                        let index = truths.indices.min { abs(truths[$0].concentricEndS - top) < abs(truths[$1].concentricEndS - top) }
                        var why = Late.other
                        if let i = index, abs(truths[i].concentricEndS - top) <= 0.5 {
                            let truth = truths[i]
                            let next = truths.indices.contains(i + 1) && truths[i + 1].set == truth.set ? truths[i + 1] : nil
                            let atTop = next?.eccentricStartS.map { $0 - truth.concentricEndS }
                            if c.exercise.name == "press" && truth.index == 1 {
                                why = .pressFirst
                            } else if atTop.map({ $0 < 0.5 }) ?? true {
                                why = .noRestAtTop
                            } else if latency <= 0.7 {
                                why = .slowEnd
                            }
                        }
                        late[why, default: []].append(latency)
                    }
                }
                let end = origin + sensors.timeline.duration
                atEnd += reps(detector.finish(at: end)).count + reps(detector.closeIdleSet(at: end + 60)).count
            }
        }
        return (seconds.sorted(), atEnd, late)
    }

    /// The value below which `share` of the sorted `values` lie (nearest rank).
    static func percentile(_ values: [Double], _ share: Double) -> Double {
        values[min(values.count - 1, max(0, Int((Double(values.count) * share).rounded(.up)) - 1))]
    }

    // Figures from `swift test --filter PublishLatencyTests` (printed), reading time, 160 reps each:
    // laser 50 Hz p50 0.277, p90 0.683, p99 1.709, max 1.742 s;
    // lidar 20 Hz p50 0.664, p90 1.187, p99 1.725, max 1.851 s;
    // phone-grade IMU 60 Hz p50 0.424, p90 0.488, p99 3.248, max 4.479 s.
    // The late reps are the first of a deadlift or press set by distance (1-1.8 s), and by the IMU
    // the first of a press set (1.3-1.7 s: a press from the shoulders cannot be told from a
    // pick-up at its top) and reps whose top has no rest before the descent (7 of 160, often a
    // set's last, 1.9-4.5 s); one more (0.59 s) ends slowly. The test names each late IMU rep's case. A deadlift's first rep, a pull from the floor, comes out at its top
    // by the IMU. The laser's and lidar's bound is today's p99 with a margin, so a change that
    // holds reps longer fails; the IMU's is the 0.5 s asked of it, not met today
    // (docs/detection.md, "Accuracy on real-sensor faults").
    @Test(
        "reps from real-sensor sessions (every exercise, seeds 951-952) come out after their top, none held to the readings' end, p99 in reading time within the sensor's bound (IMU: 0.5 s)",
        arguments: [(RealSensorTests.Sensor.laser50, 2.0), (.lidar20, 2.0), (.imu60, 0.5)])
    func latency(sensor: RealSensorTests.Sensor, p99BoundS: Double) {
        let (seconds, atEnd, late) = Self.latencies(sensor)
        #expect(seconds.count >= 150, "reps given while reading: \(seconds.count) of 160")
        guard let first = seconds.first, let max = seconds.last else { return }
        let p50 = Self.percentile(seconds, 0.5)
        let p90 = Self.percentile(seconds, 0.9)
        let p99 = Self.percentile(seconds, 0.99)
        let figures = String(format: "p50 %.3f s, p90 %.3f s, p99 %.3f s, max %.3f s", p50, p90, p99, max)
        print("rep latency \(sensor) (reading time): \(seconds.count) reps, \(figures); \(atEnd) at the end")
        for why in Late.allCases where sensor == .imu60 {
            guard let times = late[why] else { continue }
            let range = String(format: "%.2f-%.2f s", times.min()!, times.max()!)
            print("rep latency \(sensor): \(times.count) over 0.5 s by \(why.rawValue), \(range)")
        }
        // A rep is measured from readings up to its top, so it cannot come out before it.
        #expect(first >= 0, "a rep came out \(-first) s before its top")
        #expect(atEnd == 0, "reps held until the readings ended: \(atEnd)")
        if sensor == .imu60 {
            // Every IMU rep later than 0.5 s is one that waits for its lowering or has no rest at its
            // top (docs/detection.md); the others come out within it (p99).
            #expect(late[.other] == nil, "IMU reps over 0.5 s late for no known reason: \(late[.other] ?? [])")
            var others = seconds
            for latency in (late[.pressFirst] ?? []) + (late[.noRestAtTop] ?? []) {
                if let i = others.firstIndex(of: latency) { others.remove(at: i) }
            }
            #expect(Self.percentile(others, 0.99) <= p99BoundS, "p99 of the \(others.count) reps that neither wait nor lack a rest: \(others.suffix(3))")
            withKnownIssue("phone-grade IMU 60 Hz: p99 3.25 s in reading time, over the 0.5 s asked (first reps of press sets, tops without a rest)") {
                #expect(p99 <= p99BoundS, "p99 \(p99) s")
            }
        } else {
            #expect(p99 <= p99BoundS, "p99 \(p99) s")
        }
    }
}
