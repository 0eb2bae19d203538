// `make bench`: envelope codec rates and end-to-end bus throughput for
// 200-byte messages, each beside a baseline measured in the same run:
// - codec: the bus's own JSON path vs Foundation's JSONEncoder/JSONDecoder;
// - bus: typed Publisher -> Forwarder -> Subscriber (stamp, encode, forward,
//   decode, check, count) vs raw libzmq XPUB -> zmq_proxy(XSUB/XPUB) -> SUB
//   moving the same bytes with no JSON at all;
// - store (StoreBench.swift): raw readings persisted through Ingestor.flush vs
//   a raw SQLite prepared INSERT of the same rows, and query latency through
//   QueryService.handle on a year of a 40-athlete gym;
// - detector-feed (DetectorBench.swift): StationDetector.feed's readings per second
//   beside decoding the same readings, and reading -> rep latency in processing time
//   (beside an ordinary call's) and in reading time.
// Each figure is the median of several runs; the machine is noisy, so the
// ratios matter more than the absolute numbers.

import CZeroMQ
import Dispatch
import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTDetectorRole
import VBTForwarder
import VBTPosture
import VBTSensors
import VBTTesting
import VBTWire

let arguments = CommandLine.arguments
func option(_ name: String, _ fallback: Int) -> Int {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else {
        return fallback
    }
    return value
}
if let index = arguments.firstIndex(of: "--detector-memory-child"), index + 1 < arguments.count, let stations = Int(arguments[index + 1]) {
    detectorMemoryChild(stations: stations, snapshots: arguments.contains("--snapshots"), reps: arguments.contains("--reps"), loops: option("--loops", 1))
    exit(0)
}
if arguments.contains("--help") {
    print(
        """
        USAGE: vbt-bench [--messages N] [--runs R] [--detector-only] [--only SECTION]...
                         [--store-readings N] [--store-sensors LIST] [--query-runs Q] [--rack-stations N]

        --detector-only: only rep detection and posture evaluation.
        --only SECTION: only the named sections (repeatable): codec, bus, detector
          (rep detection and posture), detector-feed (StationDetector.feed over the
          real-sensor sessions: throughput beside decoding, and reading -> rep latency in
          processing and reading time), runtime (of the detector section, only the rep-detector
          runtime at make run's rack, at the load test's rate), store, recorder (the
          session-recorder's whole loop at the load test's rate), recovery (the
          recorder fetching what it missed from a journal). Default: all of them.
        --store-readings N: raw readings per store run and sensor (default 200000).
        --store-sensors LIST: imu, distance or imu,distance (default imu: the largest rows).
        --query-runs Q: timed calls per store query (default 50).
        --rack-stations N: stations of the rep-detector runtime at make run's rack
          (default 500; fewer for a run under valgrind, which counts instructions
          where this machine has no counters of its own).

        Prints envelope encode/decode rates (beside Foundation's JSON coders) and
        end-to-end bus throughput for 200-byte messages (beside raw libzmq through
        zmq_proxy), and rep detection: readings per second per core and the time
        to turn a rep's completing reading into the rep, as medians over R runs,
        and the detector's memory a station (in a child process of its own).
        Store: raw readings persisted per second (Ingestor.flush beside a raw
        SQLite prepared INSERT) and query latency through QueryService.handle.
        Build with -c release (make bench does).
        """)
    exit(0)
}
let busMessages = option("--messages", 300_000)
let runs = option("--runs", 5)
let rackStations = option("--rack-stations", 500)
let codecIterations = 200_000
let sectionNames: Set<String> = ["codec", "bus", "detector", "detector-feed", "runtime", "store", "recorder", "recovery"]
var chosenSections: Set<String> = []
for (index, argument) in arguments.enumerated() where argument == "--only" {
    guard index + 1 < arguments.count, sectionNames.contains(arguments[index + 1]) else {
        print("vbt-bench: --only needs one of \(sectionNames.sorted().joined(separator: ", "))")
        exit(2)
    }
    chosenSections.insert(arguments[index + 1])
}
if arguments.contains("--detector-only") { chosenSections.formUnion(["detector", "detector-feed"]) }
let onlySections = chosenSections
func wants(_ section: String) -> Bool { onlySections.isEmpty || onlySections.contains(section) }

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func rate(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
    let start = monotonicSeconds()
    try body()
    return Double(count) / (monotonicSeconds() - start)
}

func format(_ perSecond: Double) -> String {
    perSecond >= 1e6 ? String(format: "%.2f M/s", perSecond / 1e6) : String(format: "%.0f k/s", perSecond / 1e3)
}

func column(_ text: String, _ width: Int = 13) -> String {
    text + String(repeating: " ", count: max(1, width - text.count))
}

// MARK: The message: one distance reading, ~200 bytes on the wire.

let payload = SampleMessage(
    .distance([
        SampleMessage.DistanceReading(t: 1_763_812_345.123456, distanceMm: 512.5)
    ]))
var probe = EnvelopeStamper(program: "vbt-bench")
let sampleFrames = try probe.encode(payload, station: "rack-01", ts: wallClockSeconds())
let messageBytes = sampleFrames.topic.count + sampleFrames.body.count

/// The same message as a Codable struct, for the Foundation baseline.
struct FoundationSample: Codable {
    struct Reading: Codable {
        var t: Double
        var distance_mm: Double
    }
    var v: Int, type: String, station: String, src: String, seq: Int, ts: Double
    var sensor: String, samples: [Reading]
}
let foundationSample = try JSONDecoder().decode(FoundationSample.self, from: Data(sampleFrames.body))

/// Messages as the simulated bridges of `make run` send them under the load test (two or three
/// readings a message, full-precision IMU values): an IMU sample and a laser's, for the rep-detector's
/// way with them (envelope checked, readings located, then built).
let trafficFrames: [(topic: [UInt8], body: [UInt8])] = try {
    var stamper = EnvelopeStamper(program: "vbt-bench")
    let t0 = 1_795_910_515.744538
    let imu = SampleMessage(
        .imu(
            (0..<3).map { i in
                let k = Double(i)
                return SampleMessage.IMUReading(
                    t: t0 + 0.01 * k, accG: Vector3(0.01611328125 + k / 512, 0.06005859375, 1.00927734375 - k / 1024),
                    gyroDps: Vector3(0.6103515625, 0.1220703125 * k, -0.1220703125), angleDeg: Vector3(2.9718017578125, -0.560302734375, 30.1959228515625))
            }), device: "sim")
    let distance = SampleMessage(
        .distance(
            (0..<2).map { i in
                SampleMessage.DistanceReading(t: t0 + 0.02 * Double(i), distanceMm: 591.9 + Double(i) * 0.7, state: .idle, accG: Vector3(0.143, 0.261, 1.027))
            }), device: "sim")
    return [
        try stamper.encode(imu, station: "bench-0417", ts: t0 + 0.03), try stamper.encode(distance, station: "rack-0417", ts: t0 + 0.04),
    ]
}()

// MARK: Codec

func codecRates() throws -> (
    encode: Double, decode: Double, deferred: Double, located: Double, traffic: Double, trafficLocated: Double, trafficSkipped: Double,
    foundationEncode: Double, foundationDecode: Double
) {
    var stamper = EnvelopeStamper(program: "vbt-bench")
    var bytes = 0
    let encode = try rate(codecIterations) {
        for _ in 0..<codecIterations {
            bytes &+= try stamper.encode(payload, station: "rack-01", ts: 1_763_812_345.5).body.count
        }
    }
    var readings = 0
    let decode = try rate(codecIterations) {
        for _ in 0..<codecIterations {
            let message = try decodeMessage(topic: sampleFrames.topic, body: sampleFrames.body, samples: .built)
            readings &+= try message.payload(as: SampleMessage.self).readings.count
        }
    }
    // What a consumer does with another sensor's sample: envelope and sensor read, readings checked, not built.
    let deferred = try rate(codecIterations) {
        for _ in 0..<codecIterations {
            let message = try decodeMessage(topic: sampleFrames.topic, body: sampleFrames.body)
            if case .string(let sensor)? = message.field("sensor") { readings &+= sensor.utf8.count }
        }
    }
    // The posture-evaluator's way with it: the envelope checked, the readings only located (SampleReadings.located).
    let located = try rate(codecIterations) {
        for _ in 0..<codecIterations {
            let message = try decodeMessage(topic: sampleFrames.topic, body: sampleFrames.body, samples: .located)
            if case .string(let sensor)? = message.field("sensor") { readings &+= sensor.utf8.count }
        }
    }
    // The rep-detector's way with the load test's traffic: envelope checked, readings located, then built.
    let trafficIterations = codecIterations / 2
    let traffic = try rate(trafficIterations * trafficFrames.count) {
        for _ in 0..<trafficIterations {
            for frames in trafficFrames {
                let message = try decodeMessage(topic: frames.topic, body: frames.body, samples: .located)
                readings &+= try message.payload(as: SampleMessage.self).readings.count
            }
        }
    }
    // The posture-evaluator's way with the same traffic (another sensor's samples): the generic
    // way (envelope checked, readings located) beside its own (only the envelope read: decodeSkippedSample).
    let postureSensors: Set<String> = [SampleMessage.postureSensor]
    let trafficLocated = try rate(trafficIterations * trafficFrames.count) {
        for _ in 0..<trafficIterations {
            for frames in trafficFrames {
                let message = try decodeMessage(topic: frames.topic, body: frames.body, samples: .located)
                if case .string(let sensor)? = message.field("sensor") { readings &+= sensor.utf8.count }
            }
        }
    }
    let trafficSkipped = rate(trafficIterations * trafficFrames.count) {
        for _ in 0..<trafficIterations {
            for frames in trafficFrames {
                guard let message = decodeSkippedSample(topic: frames.topic, body: frames.body, using: postureSensors) else { fatalError("not skipped") }
                if case .string(let sensor)? = message.field("sensor") { readings &+= sensor.utf8.count }
            }
        }
    }
    let encoder = JSONEncoder()
    let decoder = JSONDecoder()
    let foundationIterations = codecIterations / 4
    let foundationEncode = try rate(foundationIterations) {
        for _ in 0..<foundationIterations { bytes &+= try encoder.encode(foundationSample).count }
    }
    let data = Data(sampleFrames.body)
    let foundationDecode = try rate(foundationIterations) {
        for _ in 0..<foundationIterations { readings &+= try decoder.decode(FoundationSample.self, from: data).samples.count }
    }
    precondition(bytes > 0 && readings > 0)
    return (encode, decode, deferred, located, traffic, trafficLocated, trafficSkipped, foundationEncode, foundationDecode)
}

// MARK: Bus

func endpoints() -> BusConfig {
    var config = freeBusConfig()
    config.highWaterMark = 0  // the benchmark measures throughput, not drops
    return config
}

/// Starts `body` on its own thread; the returned semaphore is signalled when it ends.
func spawn(_ name: String, _ body: @escaping @Sendable () throws -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        do { try body() } catch { fatalError("\(name): \(error)") }
        done.signal()
    }
    thread.name = name
    thread.start()
    return done
}

/// Raw libzmq: XPUB -> zmq_proxy(XSUB, XPUB) -> SUB, 200-byte two-frame messages, no JSON.
func rawBusRate(messages: Int) -> Double {
    let config = endpoints()
    let proxyContext = ZMQContext()
    let ready = DispatchSemaphore(value: 0)
    let proxyDone = spawn("raw.proxy") {
        let front = try ZMQSocket(proxyContext, .xsub, lingerMs: 0)
        let back = try ZMQSocket(proxyContext, .xpub, lingerMs: 0)
        try front.setHighWaterMark(0)
        try back.setHighWaterMark(0)
        try front.bind(config.pubEndpoint)
        try back.bind(config.subEndpoint)
        ready.signal()
        _ = zmq_proxy(front.handleForBenchmark, back.handleForBenchmark, nil)
    }
    ready.wait()
    let subscribed = DispatchSemaphore(value: 0)
    let result = ResultBox()
    let subContext = ZMQContext()
    let subDone = spawn("raw.sub") {
        let socket = try ZMQSocket(subContext, .sub, lingerMs: 0)
        try socket.setHighWaterMark(0)
        try socket.subscribe("")
        try socket.connect(config.subEndpoint)
        subscribed.signal()
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        var received = 0
        var started = 0.0
        while received < messages {
            // Two frames per message, read straight from zmq_msg_t without copying.
            guard zmq_msg_recv(&msg, socket.handleForBenchmark, 0) >= 0 else { continue }
            if zmq_msg_more(&msg) != 0 { continue }
            if received == 0 { started = monotonicSeconds() }
            received += 1
        }
        zmq_msg_close(&msg)
        result.set(Double(messages - 1) / (monotonicSeconds() - started))
    }
    subscribed.wait()
    let pubContext = ZMQContext()
    let pubDone = spawn("raw.pub") {
        let socket = try ZMQSocket(pubContext, .xpub, lingerMs: 10_000)
        try socket.setHighWaterMark(0)
        try socket.setReceiveTimeout(ms: 10_000)
        try socket.connect(config.pubEndpoint)
        // Wait for the forwarded subscription, as the typed publisher does.
        while try socket.receive(maxFrames: 1) == nil {}
        let topic = sampleFrames.topic
        let body = sampleFrames.body
        topic.withUnsafeBytes { topicBuffer in
            body.withUnsafeBytes { bodyBuffer in
                for _ in 0..<messages {
                    zmq_send(socket.handleForBenchmark, topicBuffer.baseAddress, topicBuffer.count, ZMQ_SNDMORE)
                    zmq_send(socket.handleForBenchmark, bodyBuffer.baseAddress, bodyBuffer.count, 0)
                }
            }
        }
    }
    subDone.wait()
    pubDone.wait()
    proxyContext.shutdown()
    proxyDone.wait()
    return result.value
}

/// The typed path: Publisher (stamp + encode) -> Forwarder -> Subscriber (decode, check, count) + payload decode.
/// With `journal`, the publisher journals every message into that folder first (fsync every 50 ms).
/// With `keys` (a folder `benchKeys` filled), every connection is CURVE and the bus checks each message's role.
func typedBusRate(messages: Int, journal: String? = nil, keys: String? = nil) -> Double {
    let plain = endpoints()
    func secured(_ client: String?) -> BusConfig {
        var config = plain
        if let keys { config.security = benchSecurity(keys, client: client) }
        return config
    }
    let config = secured(nil), pubConfig = secured("bench-bridge"), subConfig = secured("bench-viewer")
    let busContext = ZMQContext()
    var logger = Logger(label: "vbt-bench")
    logger.logLevel = .error
    let ready = DispatchSemaphore(value: 0)
    let busDone = spawn("typed.bus") { [logger] in
        var configuration = Forwarder.Configuration()
        configuration.bus = config
        let forwarder = try Forwarder(context: busContext, configuration: configuration, logger: logger)
        ready.signal()
        try forwarder.run()
    }
    ready.wait()
    let subscribed = DispatchSemaphore(value: 0)
    let result = ResultBox()
    let subContext = ZMQContext()
    let subDone = spawn("typed.sub") { [logger] in
        let subscriber = try Subscriber(context: subContext, config: subConfig, prefixes: ["sample."], logger: logger)
        subscribed.signal()
        var received = 0
        var started = 0.0
        var readings = 0
        while received < messages {
            guard let message = try subscriber.next() else { continue }
            readings += try message.payload(as: SampleMessage.self).readings.count
            if received == 0 { started = monotonicSeconds() }
            received += 1
        }
        precondition(subscriber.stats.totals.gaps == 0 && readings == messages)
        result.set(Double(messages - 1) / (monotonicSeconds() - started))
    }
    subscribed.wait()
    let pubContext = ZMQContext()
    let pubDone = spawn("typed.pub") {
        let publisher = try Publisher(context: pubContext, config: pubConfig, program: "vbt-bench", lingerMs: 10_000)
        if let journal { publisher.journal = try Journal(settings: JournalSettings(directory: journal), instance: publisher.stamper.instance) }
        guard try publisher.waitForSubscriber(topic: "sample.rack-01", timeoutS: 10) else { fatalError("no subscriber") }
        for _ in 0..<messages { try publisher.publish(payload, station: "rack-01") }
    }
    subDone.wait()
    pubDone.wait()
    busContext.shutdown()
    busDone.wait()
    return result.value
}

/// Makes the installation's keys in `folder` for the secured bus benchmark: a
/// bridge of rack-01 publishes, a viewer subscribes.
func makeBenchKeys(_ folder: String) throws {
    try FileManager.default.createDirectory(atPath: folder + "/authorized", withIntermediateDirectories: true)
    try Certificate.generate(metadata: ["name": "server"]).write(base: folder + "/server", comment: "vbt-bench")
    for (name, role) in [("bench-bridge", PeerRole.bridge(station: "rack-01")), ("bench-viewer", .viewer)] {
        let certificate = try Certificate.generate(metadata: role.metadata.merging(["name": name]) { a, _ in a })
        try certificate.write(base: folder + "/" + name, comment: "vbt-bench")
        try certificate.publicOnly.write(base: folder + "/authorized/" + name, comment: "vbt-bench")
    }
}

/// The bus's keys (`client` nil) or a client's, from `makeBenchKeys`'s folder.
func benchSecurity(_ folder: String, client: String?) -> BusSecurity {
    var security = BusSecurity()
    do {
        if let client {
            security.certificate = try Certificate.load(path: folder + "/" + client + ".key_secret")
            security.serverKey = try Certificate.load(path: folder + "/server.key").publicKey
        } else {
            security.serverCertificate = try Certificate.load(path: folder + "/server.key_secret")
            security.authorizedFolder = folder + "/authorized"
        }
    } catch {
        fatalError("vbt-bench keys: \(error)")
    }
    return security
}

/// Journal appends alone, one core: stamp-free records of the bus message's size, fsync every 50 ms.
func journalAppendRate(messages: Int, directory: String) throws -> Double {
    var stamper = EnvelopeStamper(program: "vbt-bench")
    let journal = try Journal(settings: JournalSettings(directory: directory), instance: stamper.instance)
    let frames = try stamper.encode(payload, station: "rack-01", ts: wallClockSeconds())
    let started = monotonicSeconds()
    for seq in 1...UInt64(messages) {
        try journal.append(src: stamper.lastSrc, seq: seq, ts: 0, topic: frames.topic, body: frames.body)
        try journal.tick()
    }
    try journal.sync()
    return Double(messages) / (monotonicSeconds() - started)
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0.0
    func set(_ value: Double) { lock.withLock { stored = value } }
    var value: Double { lock.withLock { stored } }
}

// MARK: Rep detection

/// Which sensor a detector benchmark feeds.
enum DetectorSensor: CaseIterable {
    /// The laser unit with its accelerometer (fused), the laser alone, the bar IMU;
    /// and the simulator's real-sensor modes (SensorFaults.realWorld): a 20 Hz
    /// lidar with spikes and dropouts, a phone-grade 60 Hz IMU without angles.
    case laserFused, laserAlone, imu, lidarReal, phoneIMU

    var isIMU: Bool { self == .imu || self == .phoneIMU }
}

/// One reading of a simulated session: the laser's distance and the unit's
/// accelerometer, or the IMU's acceleration, gyro and angles (when sent).
struct BenchReading {
    var t: Double
    var distanceMm = 0.0
    var acc: (Double, Double, Double)? = nil
    var gyro: (Double, Double, Double)? = nil
    var angles: (Double, Double)? = nil
}

/// Readings of a simulated session (3 sets of 6 squats) for the detector benchmark.
func sessionReadings(_ sensor: DetectorSensor, heavyDeadlift: Bool = false) -> [BenchReading] {
    var config = SimulationConfig()
    config.restS = 20
    config.laserAccelerometer = sensor == .laserFused
    if heavyDeadlift {
        // 2.5 s concentric phases: the widest windows.
        config.exercise = .deadlift
        config.loadKg = 170
        config.oneRepMaxKg = 180
    }
    if sensor == .lidarReal || sensor == .phoneIMU {
        config.faults = .realWorld
        config.laserAccelerometer = false
        config.distanceRateHz = sensor == .lidarReal ? 20 : 0
        config.distanceNoiseMm = 4
        config.imuRateHz = sensor == .phoneIMU ? 60 : 0
        var sensors = SimulatedSensors(config)
        let origin = 1_763_812_345.0
        if sensor == .phoneIMU {
            return sensors.imuStream(wallOrigin: origin).map {
                BenchReading(t: $0.t, acc: ($0.accG.x, $0.accG.y, $0.accG.z), gyro: ($0.gyroDps.x, $0.gyroDps.y, $0.gyroDps.z))
            }
        }
        return sensors.distanceStream(wallOrigin: origin).map { BenchReading(t: $0.t, distanceMm: $0.distanceMm) }
    }
    var sensors = SimulatedSensors(config)
    var readings: [BenchReading] = []
    let step = sensor == .imu ? 1 / config.imuRateHz : 1 / config.distanceRateHz
    var t = 0.0
    while t <= sensors.timeline.duration {
        if sensor == .imu {
            let r = sensors.imu(at: t, wallOrigin: 1_763_812_345)
            readings.append(
                BenchReading(
                    t: r.t, acc: (r.accG.x, r.accG.y, r.accG.z), gyro: (r.gyroDps.x, r.gyroDps.y, r.gyroDps.z),
                    angles: r.angleDeg.map { ($0.x, $0.y) }))
        } else {
            let r = sensors.distance(at: t, wallOrigin: 1_763_812_345)
            readings.append(BenchReading(t: r.t, distanceMm: r.distanceMm, acc: r.accG.map { ($0.x, $0.y, $0.z) }))
        }
        t += step
    }
    return readings
}

/// Feeds a session through one station's detector: (readings per second, per-rep completion times in µs).
func detectorRun(_ readings: [BenchReading], _ sensor: DetectorSensor) -> (rate: Double, completionUs: [Double], reps: Int) {
    var detector = StationDetector(station: "bench")
    var completion: [Double] = []
    var reps = 0
    let start = monotonicSeconds()
    for r in readings {
        let before = monotonicSeconds()
        let outputs =
            sensor.isIMU
            ? detector.feedIMU(t: r.t, accG: r.acc!, gyroDps: r.gyro, angleDeg: r.angles)
            : detector.feedDistance(t: r.t, distanceMm: r.distanceMm, accG: r.acc)
        let found = outputs.filter { if case .rep = $0 { true } else { false } }.count
        if found > 0 {
            completion.append((monotonicSeconds() - before) * 1e6)
            reps += found
        }
    }
    return (Double(readings.count) / (monotonicSeconds() - start), completion, reps)
}

func detectorReport() {
    print("")
    print("rep detection, one station, one core (simulated sessions of 3 x 6: squats at 70 % 1RM; deadlifts at 95 %;")
    print("  real-sensor modes: spikes, no-return readings, uneven timing, gaps, repeats, an IMU without angles)")
    let cases: [(DetectorSensor, Bool, String)] = [
        (.laserFused, false, "laser + unit's accelerometer, 50 Hz"), (.laserAlone, false, "laser alone, 50 Hz               "),
        (.imu, false, "bar IMU, 100 Hz                  "), (.laserFused, true, "laser + acc., deadlift 95 % 1RM  "),
        (.laserAlone, true, "laser alone, deadlift 95 % 1RM   "),
        (.lidarReal, false, "lidar 20 Hz, real-sensor faults  "), (.phoneIMU, false, "phone IMU 60 Hz, no angles, faults"),
    ]
    for (sensor, heavy, label) in cases {
        let readings = sessionReadings(sensor, heavyDeadlift: heavy)
        var rates: [Double] = [], completions: [Double] = []
        var reps = 0
        for _ in 0..<runs {
            let run = detectorRun(readings, sensor)
            rates.append(run.rate)
            completions += run.completionUs
            reps = run.reps
        }
        let sorted = completions.sorted()
        let p99 = sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
        print(
            "  \(label)  \(format(median(rates))) readings   \(reps) reps; "
                + String(format: "completing reading -> rep: median %.0f us, p99 %.0f us (seed: 45 ms)", median(completions), p99))
    }
}

/// The rep-detector's runtime over the in-memory bus with `stations` stations at once: every
/// sample message goes through the runtime's per-station state, as in a gym's detector process.
/// Returns readings per second through the runtime (its steps alone are timed).
/// With `journal`, as a gym's detector runs (`--journal`): what it publishes journalled, its state
/// checkpointed; the in-memory clock moves with the readings (0.1 s a message).
func detectorRuntimeRate(
    stations: Int, messages: [SampleMessage], journal: Bool = false
) throws -> (readingsPerS: Double, reps: Int, checkpoints: Int, checkpointBytes: Int) {
    let quiet = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
    let bus = MemoryBus()
    var options = DetectorOptions()
    options.patternsPath = nil
    options.askRecorder = false
    let folder = NSTemporaryDirectory() + "vbt-bench-detector-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: folder) }
    if journal { options.journal = (JournalSettings(directory: folder), "memory://rep-detector/replay") }
    let runtime = try DetectorRuntime(transport: bus, queryEndpoint: "memory", options: options, logger: quiet)
    let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: quiet)
    let player = try Publisher(transport: bus, program: "bench")
    try bus.heartbeat()
    var stepping = 0.0
    var readings = 0, repCount = 0
    for message in messages {
        guard let last = message.readings.times.last else { continue }
        for station in 0..<stations { try player.publish(message, station: "rack-\(station)", ts: last) }
        readings += message.readings.times.count * stations
        let started = DispatchTime.now().uptimeNanoseconds
        while bus.queued > 0 {
            try runtime.step(timeoutMs: 0)
            while try reps.next(timeoutMs: 0) != nil { repCount += 1 }
        }
        stepping += Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        if journal { bus.manualClock.advance(0.1) }
    }
    let checkpointBytes = (try? FileManager.default.attributesOfItem(atPath: folder + "/checkpoint.json")[.size] as? Int) ?? 0
    return (Double(readings) / stepping, repCount, runtime.checkpoints, checkpointBytes)
}

/// `make run`'s squat rack's sample messages, interleaved in time as its bridge sends them:
/// every 40 ms the laser's 2 readings and the bar IMU's 4, every 200 ms the posture wearable's 4.
func rackMessages() -> [SampleMessage] {
    var config = SimulationConfig()
    config.sets = 2
    config.repsPerSet = 5
    config.restS = 8
    var sensors = SimulatedSensors(config)
    let origin = Date().timeIntervalSince1970
    var messages: [SampleMessage] = []
    var t = 0.0
    var tick = 0
    while t <= sensors.timeline.duration {
        messages.append(SampleMessage(.distance([0, 0.02].map { sensors.distance(at: t + $0, wallOrigin: origin) })))
        messages.append(SampleMessage(.imu([0, 0.01, 0.02, 0.03].map { sensors.imu(at: t + $0, wallOrigin: origin) })))
        if tick % 5 == 4 { messages.append(SampleMessage(.posture([0, 0.05, 0.1, 0.15].map { sensors.posture(at: t - 0.16 + $0, wallOrigin: origin) }))) }
        tick += 1
        t += 0.04
    }
    return messages
}

func detectorRuntimeReport() throws {
    // A simulated session per station: 2 sets of 5 squats, the laser at 50 Hz, 5 readings a message.
    var config = SimulationConfig()
    config.sets = 2
    config.repsPerSet = 5
    config.restS = 8
    config.imuRateHz = 0
    var sensors = SimulatedSensors(config)
    let messages = sensors.distanceMessages(perMessage: 5, wallOrigin: Date().timeIntervalSince1970)
    print("")
    print("rep-detector runtime, N stations at once over the in-memory bus (one core; each station a session of 2 x 5 squats,")
    print("  laser 50 Hz, 5 readings a message); the baseline is the same readings through one station's detector alone")
    var baseline: [Double] = []
    for _ in 0..<runs { baseline.append(try detectorRuntimeRate(stations: 1, messages: messages).readingsPerS) }
    print("  1 station     \(format(median(baseline))) readings")
    for stations in [100, 500] {
        let (rate, reps) = try medianRate(stations: stations, messages)
        print(
            "  \(stationColumn(stations)) stations  \(format(rate)) readings   "
                + String(format: "%.2f of one station's rate; %d reps (%d a station)", rate / median(baseline), reps, reps / stations))
    }
    try rackRuntimeReport()
    for stations in [20, 100] {
        var rates: [Double] = []
        var last = (readingsPerS: 0.0, reps: 0, checkpoints: 0, checkpointBytes: 0)
        for _ in 0..<runs {
            last = try detectorRuntimeRate(stations: stations, messages: messages, journal: true)
            rates.append(last.readingsPerS)
        }
        print(
            "  \(stationColumn(stations)) stations, --journal  \(format(median(rates))) readings   "
                + String(
                    format: "%.2f of one station's rate; %d checkpoints in %.0f s of readings, the last %.1f MB", median(rates) / median(baseline),
                    last.checkpoints, Double(messages.count) * 0.1, Double(last.checkpointBytes) / 1e6))
    }
}

/// make run's squat rack as a bridge sends it under the load test: the laser at 50 Hz with its
/// accelerometer, 2 readings a message; the bar IMU at 100 Hz, 4 a message; the posture
/// wearable at 20 Hz, 4 a message. 55 messages and 170 readings a second a station: most
/// of the bytes are the IMU's, unused while the laser speaks, and the posture's are not the
/// detector's at all.
func rackRuntimeReport() throws {
    let rack = rackMessages()
    var rackBaseline: [Double] = []
    for _ in 0..<runs { rackBaseline.append(try detectorRuntimeRate(stations: 1, messages: rack).readingsPerS) }
    print("  make run's rack (laser 2, IMU 4, posture 4 readings a message; 55 messages a second):")
    print("  1 station     \(format(median(rackBaseline))) readings")
    let (rackRate, rackReps) = try medianRate(stations: rackStations, rack)
    print(
        "  \(stationColumn(rackStations)) stations  \(format(rackRate)) readings   "
            + String(
                format: "%.2f of one station's rate; %d reps (%d a station); %.1f us a message", rackRate / median(rackBaseline), rackReps,
                rackReps / rackStations, 1e6 / (rackRate / (170.0 / 55))))
}

/// A station count as the runtime's rows print it, in a column four wide.
private func stationColumn(_ stations: Int) -> String {
    String(stations).padding(toLength: 4, withPad: " ", startingAt: 0)
}

/// Median readings a second over `runs` runs of the rep-detector runtime at `stations`, and the reps of the last.
func medianRate(stations: Int, _ messages: [SampleMessage]) throws -> (readingsPerS: Double, reps: Int) {
    var rates: [Double] = []
    var reps = 0
    for _ in 0..<runs {
        let run = try detectorRuntimeRate(stations: stations, messages: messages)
        rates.append(run.readingsPerS)
        reps = run.reps
    }
    return (median(rates), reps)
}

// MARK: Posture

func postureReport() {
    var random = SeededGenerator(seed: 9)
    func reading(tilt: Double) -> (Vector3, Vector3) {
        (
            Vector3(9.81 * sin(tilt) + random.normal(sd: 0.05), random.normal(sd: 0.05), 9.81 * cos(tilt) + random.normal(sd: 0.05)),
            Vector3(30 + 40 * sin(tilt) + random.normal(sd: 0.5), -10 + random.normal(sd: 0.5), -40 * cos(tilt) + random.normal(sd: 0.5))
        )
    }
    let calibrationData = (0..<500).map { _ in reading(tilt: 0) }
    let calibration = PostureCalibration.fit(athlete: "bench", acc: calibrationData.map(\.0), mag: calibrationData.map(\.1), at: 0)
    let stream = (0..<200_000).map { i in reading(tilt: (i / 5_000) % 2 == 0 ? 0 : 0.5) }
    var rates: [Double] = []
    var fits: [Double] = []
    for _ in 0..<runs {
        var tracker = PostureTracker(station: "bench")
        tracker.apply(calibration)
        var reports = 0
        rates.append(
            rate(stream.count) {
                for (i, (acc, mag)) in stream.enumerated() { reports += tracker.feed(t: Double(i) * 0.02, acc: acc, mag: mag).count }
            })
        precondition(reports > 0)
        fits.append(
            rate(1_000) {
                for _ in 0..<1_000 { _ = PostureCalibration.fit(athlete: "bench", acc: calibrationData.map(\.0), mag: calibrationData.map(\.1), at: 0) }
            })
    }
    print("")
    print("posture, one station, one core")
    print("  readings evaluated (both densities, hysteresis, bounded reports)   \(format(median(rates)))")
    print(String(format: "  calibrations fitted from 500 readings                              %.0f /s", median(fits)))
}

// MARK: Report

if !arguments.contains("--detector-only") {
    print("vbt-bench: libzmq \(ZMQContext.version), message \(messageBytes) bytes (topic + JSON), \(runs) runs, medians")
}
if wants("codec") {
    var encodes: [Double] = [], decodes: [Double] = [], deferreds: [Double] = [], locateds: [Double] = [], traffics: [Double] = []
    var trafficLocateds: [Double] = [], trafficSkippeds: [Double] = []
    var foundationEncodes: [Double] = [], foundationDecodes: [Double] = []
    for _ in 0..<runs {
        let rates = try codecRates()
        encodes.append(rates.encode); decodes.append(rates.decode); deferreds.append(rates.deferred); locateds.append(rates.located)
        traffics.append(rates.traffic)
        trafficLocateds.append(rates.trafficLocated)
        trafficSkippeds.append(rates.trafficSkipped)
        foundationEncodes.append(rates.foundationEncode); foundationDecodes.append(rates.foundationDecode)
    }
    print("")
    print("envelope codec (one core)            vbt          Foundation   ratio")
    print(
        "  encode (stamp + write)             " + column(format(median(encodes))) + column(format(median(foundationEncodes)))
            + String(format: "%.1fx", median(encodes) / median(foundationEncodes)))
    print(
        "  decode (parse + check + payload)   " + column(format(median(decodes))) + column(format(median(foundationDecodes)))
            + String(format: "%.1fx", median(decodes) / median(foundationDecodes)))
    print(
        "  decode, readings checked not built " + column(format(median(deferreds))) + column(format(median(foundationDecodes)))
            + String(format: "%.1fx", median(deferreds) / median(foundationDecodes)))
    print(
        "  decode, readings only located      " + column(format(median(locateds))) + column(format(median(foundationDecodes)))
            + String(format: "%.1fx", median(locateds) / median(foundationDecodes)))
    print(
        "  decode as the rep-detector does, \(trafficFrames.map { $0.body.count }.map(String.init).joined(separator: " and ")) bytes (IMU, laser): "
            + format(median(traffics)))
    print(
        "  the same dropped by the posture-evaluator: envelope checked, readings located " + format(median(trafficLocateds))
            + "; only the envelope read (decodeSkippedSample) " + format(median(trafficSkippeds))
            + String(format: ", %.1fx", median(trafficSkippeds) / median(trafficLocateds)))
}

if wants("bus") {
    var raw: [Double] = [], typed: [Double] = [], journalled: [Double] = [], appends: [Double] = [], secured: [Double] = []
    let journalRoot = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-bench-journal-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: journalRoot) }
    try makeBenchKeys(journalRoot + "/keys")
    for run in 0..<runs {
        raw.append(rawBusRate(messages: busMessages))
        typed.append(typedBusRate(messages: busMessages))
        secured.append(typedBusRate(messages: busMessages, keys: journalRoot + "/keys"))
        journalled.append(typedBusRate(messages: busMessages, journal: journalRoot + "/bus-\(run)"))
        appends.append(try journalAppendRate(messages: busMessages, directory: journalRoot + "/append-\(run)"))
    }
    print("")
    print("bus end to end, \(busMessages) msgs/run, TCP loopback, pub -> forwarder -> sub (3 threads, 2 cores)")
    print("  raw libzmq (XPUB -> zmq_proxy -> SUB, no JSON)   \(format(median(raw)))   runs: \(raw.map(format).joined(separator: ", "))")
    print("  vbt typed (Publisher -> Forwarder -> Subscriber) \(format(median(typed)))   runs: \(typed.map(format).joined(separator: ", "))")
    print(String(format: "  typed / raw = %.2f (aim: at least 0.25)", median(typed) / median(raw)))
    print("  vbt typed over CURVE, roles checked per message \(format(median(secured)))   runs: \(secured.map(format).joined(separator: ", "))")
    print(String(format: "  CURVE / plaintext = %.2f", median(secured) / median(typed)))
    print("  vbt typed, the publisher journalling         \(format(median(journalled)))   runs: \(journalled.map(format).joined(separator: ", "))")
    print(String(format: "  journalled / typed = %.2f", median(journalled) / median(typed)))
    let readingsPerMessage = Double(payload.readings.count)
    print(
        "  journal append alone (one core, fsync every 50 ms) \(format(median(appends)))   "
            + String(
                format: "%.2f µs a message, %.3f µs a reading (%d readings a message)", 1e6 / median(appends), 1e6 / median(appends) / readingsPerMessage,
                Int(readingsPerMessage)))
}

if wants("detector") {
    detectorReport()
    detectorMemoryReport()
    try detectorRuntimeReport()
    postureReport()
} else if wants("runtime") {
    print("")
    print("rep-detector runtime over the in-memory bus (one core)")
    try rackRuntimeReport()
}

if wants("detector-feed") {
    try detectorFeedReport(runs: runs)
}

if wants("store") {
    var storeOptions = StoreBenchOptions()
    storeOptions.runs = runs
    storeOptions.readings = option("--store-readings", storeOptions.readings)
    storeOptions.queryRuns = option("--query-runs", storeOptions.queryRuns)
    if let index = arguments.firstIndex(of: "--store-sensors"), index + 1 < arguments.count {
        storeOptions.sensors = arguments[index + 1].split(separator: ",").map(String.init)
        guard !storeOptions.sensors.isEmpty, storeOptions.sensors.allSatisfy({ ["imu", "distance"].contains($0) }) else {
            print("vbt-bench: --store-sensors takes imu, distance or imu,distance")
            exit(2)
        }
    }
    try storeReport(storeOptions)
}

if wants("recorder") {
    try recorderReport(runs: runs)
}

if wants("recovery") {
    let recovery = try recoveryRates(messages: 20_000, runs: runs)
    print("")
    print("recorder recovery: 20,000 missed sample messages fetched from the producer's journal and stored (in-process, the work alone)")
    print("  \(format(median(recovery)))   runs: \(recovery.map(format).joined(separator: ", "))")
    let reads = try journalRangeReads(streams: 1_000, perStream: 100, hole: 80, reads: 100)
    print("journal range read, 80 records of one stream among 1,000 interleaved (100 MB; median of 100 reads)")
    print(
        String(
            format: "  exact index %.3f ms a read; nearest 32nd record, then past the other streams' (the baseline) %.2f ms; %.0fx", reads.exact, reads.strided,
            reads.strided / max(reads.exact, 1e-6)))
}
