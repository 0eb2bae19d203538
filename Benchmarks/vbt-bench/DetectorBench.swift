import Foundation
import VBTBus
import VBTDetection
import VBTSensors
import VBTWire

// `--only detector-feed`: StationDetector.feed over the real-sensor sessions of
// PublishLatencyTests (every exercise at two loads, seeds 951-952: 16 stations a
// sensor, SensorFaults.realWorld), the stations' readings interleaved in reading
// time, one reading a call as the rep-detector feeds a message's readings. Three
// figures a sensor, each beside a baseline from the same run:
// - throughput: readings per second through feed, beside the same readings
//   decoded from the bridge's sample messages (5 readings a message) as the
//   rep-detector decodes them, and beside a bare walk that only copies each
//   reading's fields into what feed passes on (the floor: the loop and the copies).
//   The spike gate alone would be the closer baseline, but it is not public API;
// - processing time: the wall time of the feed call that completes a rep
//   (p50/p99/max), beside the median wall time of every other feed call;
// - reading time: how long after the rep's top (`concentricEndT`) the reading
//   that gave the rep was taken (p50/p99/max; the same figures as the test's).

/// The sensors of the real-sensor sessions, as PublishLatencyTests names them, and the laser with
/// its unit's accelerometer, as the load test's rack has it: each rep's rise and phases fused
/// (a Kalman smoother over the phases' span, up to 15 s before a set's first rep).
enum FeedSensor: String, CaseIterable {
    case laser50 = "laser 50 Hz", laserAcc50 = "laser+acc 50 Hz", lidar20 = "lidar 20 Hz", imu60 = "phone IMU 60 Hz"
}

/// One reading of one station, ready for `feed`: its reading time, and the readings value holding it alone.
struct StationReading {
    var station: Int
    var t: Double
    var readings: SampleMessage.Readings
}

/// A sensor's sessions: every station's readings interleaved in reading time, what each
/// station's detector is told (exercise, load), and the sessions as the bridge sends them
/// (JSON sample messages of 5 readings) for the decoding baseline.
struct FeedSessions {
    var readings: [StationReading] = []
    var assignments: [Assignment] = []
    var frames: [(topic: [UInt8], body: [UInt8])] = []
    var endT = 0.0
}

/// The real-sensor sessions of `sensor`, as RealSensorTests' `score` builds them.
func feedSessions(_ sensor: FeedSensor) throws -> FeedSessions {
    let exercises: [(exercise: SimExercise, load: Double, oneRM: Double)] = [
        (.squat, 60, 140), (.squat, 120, 140), (.bench, 50, 100), (.bench, 85, 100),
        (.deadliftFromFloor, 120, 180), (.deadliftFromFloor, 165, 180), (.press, 30, 60), (.press, 50, 60),
    ]
    let origin = 1_763_812_345.0
    var sessions = FeedSessions()
    var stamper = EnvelopeStamper(program: "vbt-bench")
    for seed: UInt64 in [951, 952] {
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
            config.laserAccelerometer = sensor == .laserAcc50
            config.distanceRateHz = sensor == .laser50 || sensor == .laserAcc50 ? 50 : sensor == .lidar20 ? 20 : 0
            config.distanceNoiseMm = sensor == .lidar20 ? 4 : 2
            config.imuRateHz = sensor == .imu60 ? 60 : 0
            var sensors = SimulatedSensors(config)
            var assignment = Assignment()
            assignment.exercise = c.exercise.name
            assignment.loadKg = c.load
            assignment.velocityLossThresholdPct = 100
            let station = sessions.assignments.count
            sessions.assignments.append(assignment)
            sessions.endT = max(sessions.endT, origin + sensors.timeline.duration)
            let name = "rack-\(station)"
            if sensor == .imu60 {
                let stream = sensors.imuStream(wallOrigin: origin)
                sessions.readings += stream.map { StationReading(station: station, t: $0.t, readings: .imu([$0])) }
                for start in stride(from: 0, to: stream.count, by: 5) {
                    let batch = Array(stream[start..<min(start + 5, stream.count)])
                    sessions.frames.append(try stamper.encode(SampleMessage(.imu(batch), device: "sim"), station: name, ts: batch.last!.t))
                }
            } else {
                let stream = sensors.distanceStream(wallOrigin: origin)
                sessions.readings += stream.map { StationReading(station: station, t: $0.t, readings: .distance([$0])) }
                for start in stride(from: 0, to: stream.count, by: 5) {
                    let batch = Array(stream[start..<min(start + 5, stream.count)])
                    sessions.frames.append(try stamper.encode(SampleMessage(.distance(batch), device: "sim"), station: name, ts: batch.last!.t))
                }
            }
        }
    }
    // Interleaved as a gym's detector receives them: by when each reading can arrive (the latest
    // reading time its station has delivered so far), so each station's own order, repeats and
    // swaps included, is kept.
    var arrival: [Double] = []
    var latest: [Int: Double] = [:]
    for reading in sessions.readings {
        latest[reading.station] = max(latest[reading.station] ?? -.infinity, reading.t)
        arrival.append(latest[reading.station]!)
    }
    sessions.readings = sessions.readings.indices.sorted { (arrival[$0], $0) < (arrival[$1], $1) }.map { sessions.readings[$0] }
    return sessions
}

/// A detector for each station, told its exercise and load.
private func freshDetectors(_ sessions: FeedSessions) -> [StationDetector] {
    sessions.assignments.enumerated().map { station, assignment in
        var detector = StationDetector(station: "rack-\(station)")
        detector.assignment = assignment
        return detector
    }
}

/// Readings a second through `feed`, untimed per call; and the reps given.
func feedRate(_ sessions: FeedSessions) -> (perS: Double, reps: Int) {
    var detectors = freshDetectors(sessions)
    var reps = 0
    let start = monotonicSeconds()
    for reading in sessions.readings {
        for output in detectors[reading.station].feed(reading.readings) {
            if case .rep = output { reps += 1 }
        }
    }
    let perS = Double(sessions.readings.count) / (monotonicSeconds() - start)
    for station in detectors.indices { _ = detectors[station].finish(at: sessions.endT) }
    return (perS, reps)
}

/// Readings a second decoded from the bridge's messages as the rep-detector decodes them
/// (envelope checked, readings located, then built).
func decodeRate(_ sessions: FeedSessions) throws -> Double {
    var readings = 0
    let start = monotonicSeconds()
    for frames in sessions.frames {
        let message = try decodeMessage(topic: frames.topic, body: frames.body, samples: .located)
        readings += try message.payload(as: SampleMessage.self).readings.count
    }
    let perS = Double(readings) / (monotonicSeconds() - start)
    precondition(readings == sessions.readings.count)
    return perS
}

/// Readings a second through a bare walk: each reading's fields copied into the
/// values `feed` passes on, and summed so that none is optimised away.
func walkRate(_ sessions: FeedSessions) -> Double {
    var sum = 0.0
    let start = monotonicSeconds()
    for reading in sessions.readings {
        switch reading.readings {
        case .distance(let list):
            for r in list {
                let acc = r.accG.map { ($0.x, $0.y, $0.z) }
                sum += r.t + r.distanceMm + (acc?.0 ?? 0)
            }
        case .imu(let list):
            for r in list {
                let acc = (r.accG.x, r.accG.y, r.accG.z)
                let gyro = (r.gyroDps.x, r.gyroDps.y, r.gyroDps.z)
                let angles = r.angleDeg.map { ($0.x, $0.y) }
                sum += r.t + acc.0 + acc.1 + acc.2 + gyro.0 + (angles?.0 ?? 0)
            }
        case .posture:
            break
        }
    }
    let perS = Double(sessions.readings.count) / (monotonicSeconds() - start)
    precondition(sum != 0)
    return perS
}

/// Every feed call timed: the wall time of the calls that gave a rep and of the others (µs),
/// and each rep's latency in reading time (s).
func feedLatencies(_ sessions: FeedSessions) -> (completingUs: [Double], ordinaryUs: [Double], readingS: [Double]) {
    var detectors = freshDetectors(sessions)
    var completing: [Double] = [], ordinary: [Double] = [], reading: [Double] = []
    ordinary.reserveCapacity(sessions.readings.count)
    for r in sessions.readings {
        let before = monotonicSeconds()
        let outputs = detectors[r.station].feed(r.readings)
        let us = (monotonicSeconds() - before) * 1e6
        var gave = false
        for output in outputs {
            guard case .rep(let rep) = output else { continue }
            gave = true
            reading.append(r.t - rep.measurement.concentricEndT)
        }
        if gave { completing.append(us) } else { ordinary.append(us) }
    }
    return (completing, ordinary, reading)
}

/// The value below which `share` of `values` lie (nearest rank).
func percentile(_ values: [Double], _ share: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * share).rounded(.up)) - 1))]
}

/// The section's report: every sensor's figures, each a median over `runs` runs.
func detectorFeedReport(runs: Int) throws {
    print("")
    print("StationDetector.feed, real-sensor sessions (every exercise at 2 loads, seeds 951-952: 16 stations a sensor, interleaved in")
    print("  reading time, one reading a call; spikes, no-return readings, uneven timing, gaps, repeats, an IMU without angles); one core")
    print("  throughput: readings/s through feed, beside the same readings decoded from the bridge's messages (5 a message) as the")
    print("  rep-detector does, and a bare walk copying each reading's fields (the floor)")
    var latencyRows: [String] = []
    for sensor in FeedSensor.allCases {
        let sessions = try feedSessions(sensor)
        var feeds: [Double] = [], decodes: [Double] = [], walks: [Double] = []
        var reps = 0
        var completing: [Double] = [], ordinary: [Double] = [], reading: [Double] = []
        for _ in 0..<runs {
            let fed = feedRate(sessions)
            feeds.append(fed.perS)
            reps = fed.reps
            decodes.append(try decodeRate(sessions))
            walks.append(walkRate(sessions))
            let latencies = feedLatencies(sessions)
            completing += latencies.completingUs
            ordinary += latencies.ordinaryUs
            reading = latencies.readingS  // the same every run: reading time
        }
        let label = sensor.rawValue.padding(toLength: 16, withPad: " ", startingAt: 0)
        print(
            "  \(label) feed \(column(format(median(feeds)), 11)) decode \(column(format(median(decodes)), 11)) walk \(column(format(median(walks)), 11))"
                + String(
                    format: "feed / decode %.2f, feed / walk %.3f; %d readings, %d reps", median(feeds) / median(decodes), median(feeds) / median(walks),
                    sessions.readings.count, reps))
        let otherMean = ordinary.reduce(0, +) / Double(max(1, ordinary.count))
        latencyRows.append(
            "  \(label) "
                + String(
                    format: "completing call p50 %.0f, p99 %.0f, max %.0f us; other calls median %.2f us (%.0fx), mean %.2f us",
                    percentile(completing, 0.5), percentile(completing, 0.99), completing.max() ?? .nan, median(ordinary),
                    percentile(completing, 0.5) / median(ordinary), otherMean)
                + String(
                    format: " | reading time p50 %.3f, p99 %.3f, max %.3f s", percentile(reading, 0.5), percentile(reading, 0.99), reading.max() ?? .nan))
    }
    print("  reading -> rep: wall time of the feed call that gives a rep beside the other calls' (all runs' calls); and how long")
    print("  after the rep's top the reading that gave it was taken (reading time, the same every run; the IMU is asked for p99 <= 0.5 s)")
    for row in latencyRows { print(row) }
}
