// The recorder section of `make bench` (vbt-bench --only recorder): the session-recorder's
// whole path for one message at the load test's rate, the cost that decides how many stations
// one recorder keeps up with. RecorderRuntime runs over the in-memory bus (VBTTesting's
// MemoryBus, a test double for libzmq: socket time is the bus section's), so each message
// is checked (decodeMessage), counted per stream (Subscriber), noted for its station
// (StationSightings), queued and written in batches (RecorderSettings.flushAtMessages; Ingestor,
// a fresh SQLite file, its log copied by the recorder's WALCheckpointer on a thread of its own). The traffic is `make run`'s bridges' under that load: per station, a bar IMU's
// message of three readings and a laser's of two, at 1,000 stations. The baseline in the
// same run is the check alone (decodeMessage of the same frames, as the recorder asks).

import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTStore
import VBTTesting
import VBTWire

/// The frames of `rounds` rounds at `stations` stations: an IMU message then a laser's per
/// station and round, stamped as each bridge would (one stream per station and sensor type).
private func recorderTraffic(stations: Int, rounds: Int) throws -> (frames: [[[UInt8]]], readings: Int) {
    var stamper = EnvelopeStamper(program: "sensor-bridge", instance: "sensor-bridge-bench0002")
    let t0 = 1_795_910_515.744538
    var frames: [[[UInt8]]] = []
    frames.reserveCapacity(stations * rounds * 2)
    var readings = 0
    for round in 0..<rounds {
        let start = t0 + 0.03 * Double(round)
        for station in 0..<stations {
            // Values that differ from message to message, with a WitMotion's full precision.
            let k = Double((round * 31 + station * 17) % 97)
            let imu = SampleMessage(
                .imu(
                    (0..<3).map { i in
                        SampleMessage.IMUReading(
                            t: start + 0.01 * Double(i), accG: Vector3(0.01611328125 + k / 4096, 0.06005859375 - Double(i) / 2048, 1.00927734375 - k / 8192),
                            gyroDps: Vector3(0.6103515625 * k, 0.1220703125 * Double(i), -0.1220703125),
                            angleDeg: Vector3(2.9718017578125, -0.560302734375 + k / 64, 30.1959228515625))
                    }), device: "sim")
            let distance = SampleMessage(
                .distance(
                    (0..<2).map { i in
                        SampleMessage.DistanceReading(
                            t: start + 0.02 * Double(i), distanceMm: 591.9 + k * 0.7, state: .idle, accG: Vector3(0.143, 0.261 + k / 1000, 1.027))
                    }), device: "sim")
            let name = String(format: "rack-%04d", station)
            for payload in [imu, distance] {
                let encoded = try stamper.encode(payload, station: name, ts: start + 0.03)
                frames.append([encoded.topic, encoded.body])
            }
            readings += 5
        }
    }
    return (frames, readings)
}

/// CPU time of the whole process so far (every thread's, user and system), s.
private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Messages a second through the recorder's loop (one core, its stepping only), the CPU time a
/// message of every thread from the store's opening to its checkpointer's stop (the log's copy
/// into the database included), and the readings stored.
private func recorderRate(_ frames: [[[UInt8]]], readings: Int, folder: String) throws -> (perS: Double, cpuUs: Double, stored: Int) {
    let cpuStart = processCPUSeconds()
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    var storeSettings = StoreSettings()
    storeSettings.path = folder + "/recorder.sqlite"
    storeSettings.sampleRetentionDays = 7
    let store = try TrainingStore(settings: storeSettings)
    let bus = MemoryBus()
    let checkpointer = WALCheckpointer(path: storeSettings.path, logger: quiet)
    checkpointer.start()
    let settings = RecorderSettings()
    let runtime = try RecorderRuntime(transport: bus, store: store, settings: settings, logger: quiet)
    try bus.heartbeat()
    try runtime.step(maxWaitMs: 0)
    var elapsed = 0.0
    let chunk = 2_000
    var index = 0
    while index < frames.count {
        for frame in frames[index..<min(frames.count, index + chunk)] { bus.inject(frame) }
        index += chunk
        // A chunk is what arrives in some 30 ms at 1,000 stations.
        bus.manualClock.advance(0.03)
        let started = monotonicSeconds()
        while bus.queued > 0 || runtime.pendingCount >= settings.flushAtMessages { try runtime.step(maxWaitMs: 0) }
        elapsed += monotonicSeconds() - started
    }
    // What is left waits for its flush interval.
    bus.manualClock.advance(1)
    let started = monotonicSeconds()
    try runtime.step(maxWaitMs: 0)
    elapsed += monotonicSeconds() - started
    precondition(runtime.pendingCount == 0 && runtime.counters.sampleRows == readings, "stored \(runtime.counters.sampleRows) of \(readings) readings")
    // What the log still holds is copied now, as the thread would at its next turn.
    checkpointer.stop()
    let (logFrames, copied) = try checkpointer.checkpointOnce()
    precondition(copied == logFrames, "the log's last copy: \(copied) of \(logFrames) frames")
    let cpuUs = (processCPUSeconds() - cpuStart) * 1e6 / Double(frames.count)
    return (Double(frames.count) / elapsed, cpuUs, runtime.counters.sampleRows)
}

/// Messages a second through decodeMessage alone, as the recorder's subscriber checks them.
private func recorderDecodeRate(_ frames: [[[UInt8]]]) throws -> Double {
    var sensors = 0
    let perS = try rate(frames.count) {
        for frame in frames {
            let message = try decodeMessage(topic: frame[0], body: frame[1])
            if case .string(let sensor)? = message.field("sensor") { sensors &+= sensor.utf8.count }
        }
    }
    precondition(sensors > 0)
    return perS
}

func recorderReport(runs: Int) throws {
    let stations = 1_000, rounds = 40
    let (frames, readings) = try recorderTraffic(stations: stations, rounds: rounds)
    let bytes = frames.reduce(0) { $0 + $1[1].count } / frames.count
    var whole: [Double] = [], cpu: [Double] = [], decode: [Double] = []
    for run in 0..<runs {
        let folder = NSTemporaryDirectory() + "vbt-bench-recorder-\(getpid())-\(run)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let run = try recorderRate(frames, readings: readings, folder: folder)
        whole.append(run.perS)
        cpu.append(run.cpuUs)
        decode.append(try recorderDecodeRate(frames))
    }
    print("")
    print("session-recorder, one core: \(stations) stations' IMU (3 readings) and laser (2) messages, \(frames.count) of ~\(bytes) B,")
    print("  over the in-memory bus into a fresh SQLite file, batches of \(RecorderSettings().flushAtMessages); \(runs) runs, medians")
    print("                                       messages     us a message")
    print("  whole loop (RecorderRuntime.step)    " + column(format(median(whole))) + String(format: "%.2f", 1e6 / median(whole)))
    print("  the check alone (decodeMessage)      " + column(format(median(decode))) + String(format: "%.2f", 1e6 / median(decode)))
    print(String(format: "  CPU a message, every thread (the log's copy into the database included): %.2f us", median(cpu)))
    print("      runs whole: \(whole.map(format).joined(separator: ", "));  decode: \(decode.map(format).joined(separator: ", "))")
}
