import ArgumentParser
import Dispatch
import Glibc
import Logging
import VBTBus
import VBTCommandLine
import VBTSensors
import VBTWire

@main
struct SensorBridge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sensor-bridge",
        abstract: "Reads one station's sensors and publishes sample and status messages on the bus.",
        discussion: """
            Sources (a station may combine --serial and --ble; --replay and --simulate stand alone):
              --ble witmotion[:NAMEPREFIX|@ADDRESS]   WitMotion IMU over BLE (name starts with WT)
              --ble posture[:NAMEPREFIX|@ADDRESS]     posture wearable over BLE (name contains Arduino)
              --serial PATH --protocol witmotion|arduino-distance [--baud N]
              --replay FILE [--speed X] [--loop] [--stations N [--stagger S]] [--t0 T]
              --simulate [--exercise squat|bench|deadlift|press] [--load-kg KG] [--seed N] [--mode M] [--t0 T] ...
            Simulation modes (--mode M, repeatable; truth as a reference transducer sees it):
              short-rom        every rep's ROM --rom-mm (250), the lockout unchanged
              shrinking-depth  ROM shrinking over each set, --depth-mm FIRST:LAST
              sticking         velocity dips to 0.02-0.1 m/s for 0.2-0.6 s mid-rise
              paused           a 3 s descent, a 1-3 s pause at the bottom (3-1-X)
              creep            the bar creeps on 4-8 mm over 0.45-0.65 s at lockout
              overshoot        reps of 0.6 m/s+ rise 10-25 mm past the top, settle
              video            the distance a 30 fps video track: 2-4 mm, jumps
              ble-bursts       a 99 Hz WitMotion over BLE: bursts of 4 every 31 ms
              imu-10hz         a 10 Hz IMU, each reading the mean over its period
            A missing adapter or device is reported in one line saying what to do, and the bridge
            keeps retrying (3 quick tries 2 s apart, then backing off). Readings are batched per
            message: at most --batch-size readings, none waiting longer than --batch-delay. By default
            (0) a reading leaves at once when the bridge is idle, and what arrives while it is busy
            publishing leaves together: messages grow only under load.
            SIGUSR1 ends a replay or a simulation (a --loop one too) as if it had run out: with
            --journal and --linger the bridge then answers replay requests that long before it exits
            (vbt loadtest --journal stops its replay so).
            """,
        version: versionText("sensor-bridge"))

    @Option(
        help:
            "The station these sensors belong to, e.g. rack-01. A replay keeps the recorded names; there it names the bridge (its heartbeat bridge-NAME and journal), so each station computer replaying its own station is known apart."
    )
    var station: String?

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions

    // BLE
    @Option(name: .customLong("ble"), help: "A BLE sensor: witmotion or posture, optionally :NAMEPREFIX or @ADDRESS. Repeatable.")
    var ble: [String] = []

    @Option(help: "The HCI adapter index (hci0 is 0).")
    var adapter: Int = 0

    // Serial
    @Option(help: "A serial device path, e.g. /dev/ttyUSB0.")
    var serial: String?

    @Option(name: .customLong("protocol"), help: "The serial device's protocol: witmotion or arduino-distance.")
    var serialProtocol: String?

    @Option(help: "Serial baud rate.")
    var baud: Int = 115_200

    // Replay
    @Option(help: "Replay a recording (JSON Lines written by `vbt record`).")
    var replay: String?

    @Option(help: "Replay or simulation speed: 1 real time, 0 as fast as possible.")
    var speed: Double = 1

    @Flag(help: "Replay or simulate again from the start when done, forever.")
    var loop = false

    @Option(help: "Replay: publish every recorded station N times as <station>-1 ... <station>-N.")
    var stations: Int = 1

    @Option(
        help:
            "Replay with --stations N: spread the copies' starts over S seconds (copy k of N starts (k-1)/N of S late), as a gym's stations never lift in lockstep; 0 publishes every copy of a message at once."
    )
    var stagger: Double = 0

    @Option(
        name: .customLong("t0"),
        help:
            "Replay or simulation: place the first reading at T (Unix seconds) instead of now; the pace is unchanged. Two runs with the same --t0 give the same reading times, so the same rep ids (keep T within the hour: the rep-detector skips readings an hour off their message's time)."
    )
    var t0: Double?

    @Option(help: "Replay: the message types to publish, comma-separated.")
    var replayTypes: String = "sample,status"

    @Option(
        help:
            "When a replay or simulation ends, keep sending heartbeats and answering replay requests this many seconds before exiting, so consumers fetch what they missed (needs --journal)."
    )
    var linger: Double = 0

    @Option(
        help: "Seconds to wait at start for a subscriber to this station's samples, so the first messages are not published into the void (0: do not wait).")
    var waitSubscribers: Double = 5

    // Simulator
    @Flag(help: "Simulate an athlete at --station (no hardware needed).")
    var simulate = false

    @Option(help: "Simulated exercise: squat, bench, deadlift or press (a shoulder press, the bar picked up to the shoulders before each set).")
    var exercise: String = "squat"

    @Option(help: "Simulated load in kg.")
    var loadKg: Double = 100

    @Option(help: "Simulated athlete's 1RM in kg.")
    var oneRepMaxKg: Double = 140

    @OptionGroup var journalOptions: JournalOptions

    @Option(help: "Simulation seed: the same seed gives the same session.")
    var seed: UInt64 = 1

    @Option(help: "Simulated sets.")
    var sets: Int = 3

    @Option(help: "Simulated reps per set.")
    var reps: Int = 6

    @Option(help: "Simulated rest between sets, seconds.")
    var rest: Double = 60

    @Option(help: "Simulated laser readings per second (0: no laser).")
    var distanceRate: Double = 50

    @Option(help: "IMU readings per second: the rate asked of a WitMotion sensor (10, 20, 50, 100, 200), or simulated (0: none).")
    var imuRate: Double = 100

    @Option(help: "Simulated posture wearable readings per second (0: none); sits well 20 s, then slouches 8 s in every 40.")
    var postureRate: Double = 0

    @Flag(
        help:
            "Simulate real sensors' faults: uneven timing (+-60 %), gaps up to 100 ms, repeated and out-of-order readings, distance spikes and readings with no return, a phone-grade IMU (gain and offsets off, no angles)."
    )
    var realSensors = false

    @Option(
        help:
            "Simulation: write the ground truth of every rep to FILE as reference labels (CSV: station,t_top,mean_velocity_mps,peak_velocity_mps; proto/labels.md), for `vbt eval`."
    )
    var truth: String?

    @Option(help: "Simulated athlete name for the envelope's athlete field.")
    var athlete: String?

    @Option(
        name: .customLong("mode"),
        help: ArgumentHelp(
            "Simulation: what real lifts and sensors do beyond the default athlete, repeatable (listed above).",
            valueName: SimulationMode.allCases.map(\.rawValue).joined(separator: "|")))
    var modes: [String] = []

    @Option(help: "Simulation: every rep's ROM in mm, the lockout where the catalogue's is (--mode short-rom; 250 unless given).")
    var romMm: Double?

    @Option(help: "Simulation: each set's ROM from FIRST to LAST mm, e.g. 600:400 (--mode shrinking-depth; the ROM to 2/3 of it unless given).")
    var depthMm: String?

    // Batching
    @Option(help: "Most readings in one sample message.")
    var batchSize: Int = 16

    @Option(help: "Longest a reading may wait for others to share its message, seconds (0: none waits).")
    var batchDelay: Double = 0

    func validate() throws {
        let standalone = [replay != nil, simulate].filter { $0 }.count
        let live = (serial != nil ? 1 : 0) + ble.count
        guard standalone + (live > 0 ? 1 : 0) == 1 else {
            throw ValidationError("choose the sensors: --ble and/or --serial, or --replay FILE, or --simulate")
        }
        if replay == nil {
            guard let station, (try? splitTopic(Array(SampleMessage.topic(station: station).utf8))) != nil else {
                throw ValidationError("--station NAME is required (letters, digits, '-', e.g. rack-01)")
            }
        }
        if serial != nil {
            guard let serialProtocol, SerialProtocol(rawValue: serialProtocol) != nil else {
                throw ValidationError("--serial needs --protocol witmotion or --protocol arduino-distance")
            }
            guard SerialPort.baudRates[baud] != nil else {
                throw ValidationError("--baud \(baud) is not supported; use one of \(SerialPort.baudRates.keys.sorted())")
            }
        }
        for spec in ble {
            do { _ = try BLESensorSpec(parsing: spec) } catch { throw ValidationError(error.message) }
        }
        guard imuRate.isFinite, imuRate >= 0, imuRate <= 1000, distanceRate.isFinite, distanceRate >= 0, distanceRate <= 1000,
            postureRate.isFinite, postureRate >= 0, postureRate <= 1000
        else {
            throw ValidationError("--imu-rate, --distance-rate and --posture-rate must be between 0 and 1000")
        }
        if !ble.isEmpty, WitMotion.rateCodes[Int(imuRate)] == nil {
            throw ValidationError("--imu-rate for a WitMotion sensor must be one of \(WitMotion.rateCodes.keys.sorted())")
        }
        guard speed >= 0 else { throw ValidationError("--speed must be 0 (as fast as possible) or more") }
        if let t0 {
            guard replay != nil || simulate else { throw ValidationError("--t0 places a replay or a simulation in time: add --replay FILE or --simulate") }
            guard t0.isFinite, t0 > 0 else { throw ValidationError("--t0 must be a time in Unix seconds, e.g. \(Int(wallClockSeconds()))") }
        }
        guard linger.isFinite, linger >= 0, linger <= 86_400 else { throw ValidationError("--linger must be between 0 and 86400 seconds") }
        if linger > 0, journalOptions.noJournal {
            throw ValidationError("--linger keeps answering replay requests from the journal: drop --no-journal")
        }
        guard stations >= 1, stations <= 1000 else { throw ValidationError("--stations must be between 1 and 1000") }
        guard stagger.isFinite, stagger >= 0, stagger <= 3_600 else { throw ValidationError("--stagger must be between 0 and 3600 seconds") }
        if stagger > 0, replay == nil || stations < 2 || speed == 0 {
            throw ValidationError("--stagger spreads a paced replay's copies: add --replay FILE --stations N (N of 2 or more), at a --speed above 0")
        }
        guard batchSize >= 1, batchSize <= 1000 else { throw ValidationError("--batch-size must be between 1 and 1000") }
        guard batchDelay >= 0, batchDelay <= 1 else { throw ValidationError("--batch-delay must be between 0 and 1 second") }
        if !simulate, realSensors || truth != nil || !modes.isEmpty || romMm != nil || depthMm != nil {
            throw ValidationError("--real-sensors, --truth, --mode, --rom-mm and --depth-mm describe a simulation: add --simulate")
        }
        for mode in modes where SimulationMode(rawValue: mode) == nil {
            throw ValidationError("--mode must be one of \(SimulationMode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if let romMm, !(romMm.isFinite && romMm >= 50 && romMm <= 1500) {
            throw ValidationError("--rom-mm must be between 50 and 1500")
        }
        if let depthMm, Self.depthRange(depthMm) == nil {
            throw ValidationError("--depth-mm must be FIRST:LAST in mm, each between 50 and 1500, e.g. 600:400")
        }
        if simulate {
            guard SimExercise.all[exercise] != nil else {
                throw ValidationError("--exercise must be one of \(SimExercise.all.keys.sorted().joined(separator: ", "))")
            }
            guard sets >= 1, reps >= 1, rest >= 0, loadKg > 0, oneRepMaxKg >= loadKg else {
                throw ValidationError("--sets and --reps must be 1 or more, --rest 0 or more, and 0 < --load-kg <= --one-rep-max-kg")
            }
            guard distanceRate >= 0, imuRate >= 0, postureRate >= 0, distanceRate + imuRate + postureRate > 0 else {
                throw ValidationError("--distance-rate, --imu-rate and --posture-rate must be 0 or more, and not all 0")
            }
        }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "sensor-bridge", format: logging.format)
        let config = bus.config
        var policy = BatchPolicy()
        policy.maxReadings = batchSize
        policy.maxDelayS = batchDelay

        var sources: [any SensorSource] = []
        var finite = 0
        var firstTopic: String?
        if let replay {
            let recording: Recording
            do {
                recording = try Recording(path: replay, types: Set(replayTypes.split(separator: ",").map(String.init)))
            } catch {
                reportProblem("sensor-bridge: \(error.message)")
                throw ExitCode.failure
            }
            if recording.skippedLines > 0 || !recording.skippedTypes.isEmpty {
                logger.warning(
                    "replay skips part of the recording",
                    metadata: [
                        "bad_lines": "\(recording.skippedLines)",
                        "other_types": "\(recording.skippedTypes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))",
                    ])
            }
            let source = ReplaySource(path: replay, recording: recording, speed: speed, loop: loop, stations: stations, startT: t0, stagger: stagger)
            firstTopic = recording.messages.first.map { "\($0.type).\(source.copies(of: $0.station)[0])" }
            sources.append(source)
            finite = 1  // a --loop replay ends on SIGUSR1
        } else if simulate, let station {
            var sim = SimulationConfig()
            sim.station = station
            sim.athlete = athlete
            sim.exercise = SimExercise.all[exercise]!
            sim.loadKg = loadKg
            sim.oneRepMaxKg = oneRepMaxKg
            sim.seed = seed
            sim.sets = sets
            sim.repsPerSet = reps
            sim.restS = rest
            sim.distanceRateHz = distanceRate
            sim.imuRateHz = imuRate
            sim.postureRateHz = postureRate
            sim.speed = speed
            sim.forever = loop
            sim.startT = t0
            if realSensors { sim.faults = .realWorld }
            // --rom-mm and --depth-mm first: the modes keep what is set.
            if let romMm { sim.modes.romMm = romMm }
            if let depthMm, let (first, last) = Self.depthRange(depthMm) { sim.modes.shrinkingDepth = .init(firstMm: first, lastMm: last) }
            for mode in modes.compactMap(SimulationMode.init(rawValue:)) { mode.apply(to: &sim) }
            var truthFile: TruthWriter?
            if let truth {
                do {
                    truthFile = try TruthWriter(path: truth)
                } catch {
                    reportProblem("sensor-bridge: \(error.message)")
                    throw ExitCode.failure
                }
            }
            sources.append(SimulatorSource(config: sim, truth: truthFile))
            finite = 1  // a --loop simulation ends on SIGUSR1
        } else if let station {
            if let serial, let serialProtocol, let proto = SerialProtocol(rawValue: serialProtocol) {
                sources.append(SerialSource(path: serial, proto: proto, baud: baud, station: station))
            }
            for spec in ble {
                var sensor = try BLESensorSpec(parsing: spec)
                sensor.rateHz = Int(imuRate)
                sources.append(BLESource(spec: sensor, adapter: adapter, station: station))
            }
        }

        let queue = EventQueue()
        let stop = StopFlag()
        // The sources stop on this one: set with `stop`, or alone by SIGUSR1 (a replay or a simulation
        // ends as if it had run out, and the bridge lingers, answering replay requests, if asked to).
        let endSources = StopFlag()
        let endOnSignal = finite > 0 ? Self.endSources(on: SIGUSR1, endSources, logger: logger) : nil
        defer { endOnSignal?.cancel() }
        let wait = waitSubscribers
        let publisherTopic = firstTopic ?? station.map { SampleMessage.topic(station: $0) }
        let sourceList = sources
        let finiteSources = finite
        let lingerS = linger
        let busConfig = config, batchPolicy = policy
        // Live bridges say they are alive; a replay, a load generator and not a station, says so as
        // `bridge-replay`, or as its --station's bridge (consumers keep one replay endpoint per name:
        // replays on several computers under one name had them ask one computer for another's
        // streams and count its "not held" lost). The heartbeat says where to ask for what was
        // missed, or, without a journal, that nothing can be asked for: a consumer then gives up a
        // hole in the replay's streams at once instead of waiting for an offer that never comes.
        let heartbeatName = station.map { "bridge-\($0)" } ?? (replay == nil ? nil : "bridge-replay")
        let journalPlan = journalOptions.plan(defaultFolder: "data/journal/" + (heartbeatName ?? "sensor-bridge"))
        try await runProgram(
            "sensor-bridge", logger: logger, hint: "check VBT_PUB_ENDPOINT and that vbt-bus is running",
            onShutdown: {
                stop.set()
                endSources.set()
            }
        ) {
            context in
            let bridge = try BridgePublisher(context: context, config: busConfig, queue: queue, policy: batchPolicy, logger: logger)
            if let name = heartbeatName { bridge.heartbeat = HeartbeatSchedule(role: "sensor-bridge", name: name) }
            if let (settings, endpoint) = journalPlan {
                try openJournal("sensor-bridge", endpoint: endpoint) { try bridge.startJournal(settings, endpoint: endpoint) }
                logger.info("journalling", metadata: ["folder": "\(settings.directory)", "replay_endpoint": "\(endpoint)"])
            }
            if let topic = publisherTopic, wait > 0, try !bridge.waitForSubscriber(topic: topic, timeoutS: wait) {
                logger.warning("no subscriber yet; publishing anyway", metadata: ["zmq.topic": "\(topic)"])
            }
            let threads = sourceList.map { $0.start(into: queue, stop: endSources, logger: logger) }
            // Every source is stopped and waited for (each reads with a timeout, so it ends within it).
            defer {
                stop.set()
                endSources.set()
                for thread in threads where !thread.join(timeoutS: 5) {
                    logger.warning("sensor source still running at exit", metadata: ["source": "\(thread.name)"])
                }
            }
            try bridge.run(stop: stop, finiteSources: finiteSources, lingerS: lingerS)
        }
    }

    /// `FIRST:LAST` in mm, each 50-1500.
    static func depthRange(_ text: String) -> (Double, Double)? {
        let parts = text.split(separator: ":").compactMap { Double($0) }
        guard parts.count == 2, parts.allSatisfy({ $0.isFinite && $0 >= 50 && $0 <= 1500 }) else { return nil }
        return (parts[0], parts[1])
    }

    /// Sets `flag` when `signal` comes (its default action, ending the process, is turned off): kept
    /// alive by the caller while the sources run.
    static func endSources(on signal: Int32, _ flag: StopFlag, logger: Logger) -> any DispatchSourceSignal {
        Glibc.signal(signal, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
        source.setEventHandler {
            logger.info("asked to end the replay or simulation (SIGUSR1)")
            flag.set()
        }
        source.resume()
        return source
    }
}
