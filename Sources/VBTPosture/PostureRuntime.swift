import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

/// How the posture evaluator behaves.
public struct PostureSettings: Sendable, Codable, Equatable {
    /// A new state must hold this long (reading time) before it is reported: noise does not flap.
    public var hysteresisS = 0.5
    /// Bad posture held this long is "sustained" (the notifier alerts on it).
    public var sustainedBadS = 5.0
    /// Most posture messages per second per station (state changes always go out at once).
    public var maxRateHz = 5.0
    /// Creates the defaults.
    public init() {}
}

/// One station's posture state: calibration, collection, hysteresis.
/// Codable: the evaluator checkpoints it.
public struct PostureTracker: Sendable, Codable {
    public let station: String
    public var settings: PostureSettings
    public var athlete: String?
    public private(set) var calibration: PostureCalibration?
    private var collecting: Collection?
    private var reported: Bool?
    private var candidate: Candidate?
    private var badSince: Double?
    private var lastPublishedT = -Double.infinity

    /// A state seen but not yet held for the hysteresis, and since when.
    struct Candidate: Sendable, Codable {
        var correct: Bool
        var since: Double
    }

    struct Collection: Sendable, Codable {
        var athlete: String
        var seconds: Double
        var startT: Double?
        var acc: [Vector3] = []
        var mag: [Vector3] = []
    }

    /// Creates a tracker.
    public init(station: String, settings: PostureSettings = PostureSettings()) {
        self.station = station
        self.settings = settings
    }

    /// What feeding produced.
    public enum Output: Sendable, Equatable {
        case posture(PostureReport)
        case calibrated(PostureCalibration)
    }

    /// Whether a calibration is collecting readings.
    var isCalibrating: Bool { collecting != nil }

    /// Starts collecting `seconds` of readings for `athlete`'s calibration.
    public mutating func startCalibration(athlete: String, seconds: Double) {
        collecting = Collection(athlete: athlete, seconds: seconds)
    }

    /// Uses `calibration` from now on (an assignment, or one arriving mid-stream): the state starts over.
    public mutating func apply(_ calibration: PostureCalibration) {
        self.calibration = calibration
        athlete = calibration.athlete
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// Nobody at the station any more: nothing is judged until someone is assigned or calibrated.
    public mutating func unassign() {
        athlete = nil
        calibration = nil
        collecting = nil
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// A new athlete without a stored calibration: nothing is judged until they calibrate.
    public mutating func clearCalibration(athlete: String) {
        self.athlete = athlete
        calibration = nil
        reported = nil
        candidate = nil
        badSince = nil
    }

    /// Feeds one reading.
    public mutating func feed(t: Double, acc: Vector3, mag: Vector3) -> [Output] {
        var out: [Output] = []
        if var collection = collecting {
            let start = collection.startT ?? t
            collection.startT = start
            collection.acc.append(acc)
            collection.mag.append(mag)
            if t - start >= collection.seconds {
                let made = PostureCalibration.fit(athlete: collection.athlete, acc: collection.acc, mag: collection.mag, at: t)
                collecting = nil
                // Only an assignment changes who is at the station: another athlete's calibration
                // is kept for them (and published), the station's athlete keeps theirs.
                if athlete == nil || athlete == made.athlete { apply(made) }
                out.append(.calibrated(made))
            } else {
                collecting = collection
            }
            return out
        }
        guard let calibration else { return out }
        let result = calibration.evaluate(acc: acc, mag: mag)
        // Hysteresis: a new state counts once it has held for hysteresisS.
        var changed = false
        if reported == nil {
            reported = result.correct
            changed = true
        } else if result.correct != reported {
            if let held = candidate, held.correct == result.correct {
                if t - held.since >= settings.hysteresisS {
                    reported = result.correct
                    candidate = nil
                    changed = true
                }
            } else {
                candidate = Candidate(correct: result.correct, since: t)
            }
        } else {
            candidate = nil
        }
        let correct = reported ?? result.correct
        if correct { badSince = nil } else if badSince == nil { badSince = candidateStart(t) }
        guard changed || t - lastPublishedT >= 1 / settings.maxRateHz else { return out }
        lastPublishedT = t
        let badFor = badSince.map { t - $0 } ?? 0
        out.append(
            .posture(
                PostureReport(
                    station: station, athlete: athlete, correct: correct, changed: changed,
                    accDensity: result.accDensity, magDensity: result.magDensity,
                    accThreshold: calibration.acc.threshold, magThreshold: calibration.mag.threshold,
                    badForS: badFor, sustainedBad: badFor >= settings.sustainedBadS, t: t)))
        return out
    }

    /// When the current bad stretch began: the candidate's start if it just flipped.
    private func candidateStart(_ t: Double) -> Double { t - settings.hysteresisS }

}

/// One evaluated moment of a station's posture.
public struct PostureReport: Sendable, Equatable {
    public var station: String
    public var athlete: String?
    public var correct: Bool
    /// The state just changed (after the hysteresis).
    public var changed: Bool
    public var accDensity: Double
    public var magDensity: Double
    public var accThreshold: Double
    public var magThreshold: Double
    /// How long the posture has been bad, seconds (0 when correct).
    public var badForS: Double
    /// Bad for at least the configured limit.
    public var sustainedBad: Bool
    /// Reading time.
    public var t: Double
}

/// The stations a posture-evaluator receives samples from, shared with its
/// in-order input (which fetches only their streams' holes).
final class FollowedStations {
    var names: Set<String> = []

    /// Whether a stream of `topic` is one to follow.
    func wants(_ topic: String) -> Bool {
        topic.hasPrefix(SampleMessage.topicPrefix) && names.contains(String(topic.dropFirst(SampleMessage.topicPrefix.count)))
    }

    /// The station of a sample stream's source (`<instance>/sample.<station>`), or nil for another stream.
    static func station(ofStream src: String) -> String? {
        let topic = streamTopic(src)
        guard topic.hasPrefix(SampleMessage.topicPrefix) else { return nil }
        return String(topic.dropFirst(SampleMessage.topicPrefix.count))
    }
}

/// Calibrations by athlete, kept in a JSON file so they survive restarts.
public struct CalibrationStore: Sendable, Codable, Equatable, JSONFileStored {
    public var byAthlete: [String: PostureCalibration] = [:]

    /// An empty store.
    public init() {}
}

/// The posture-evaluator process's loop (one thread owns both sockets).
///
/// Crash recovery (with a journal): as the rep detector does, every
/// station's tracker, the input positions and the output seqs are
/// checkpointed into the journal's folder every `checkpointIntervalS` while
/// readings come and after every command; an evaluator started on a folder
/// with a checkpoint continues the crashed instance's streams, fetches the
/// readings since from the bridges' journals and evaluates them again, what
/// was already published not sent twice.
public final class PostureRuntime {
    private let subscriber: Subscriber
    private var publisher: Publisher
    private let clock: any BusClock
    private let transport: any BusTransport
    private var replay: ReplayServer?
    private let logger: Logger
    private let settings: PostureSettings
    private let storePath: String?
    private var store = CalibrationStore()
    private var trackers: [String: PostureTracker] = [:]
    private var warnedUncalibrated: Set<String> = []
    private var heartbeat = HeartbeatSchedule(role: "posture-evaluator", name: "posture-evaluator")
    /// Asks the session-recorder for calibrations this evaluator has not seen (made elsewhere, or before a reinstall).
    private let recorder: QueryClient?
    /// Questions to the recorder not yet answered, by id.
    private var calibrationRequests: [String: (station: String, athlete: String, deadline: Double)] = [:]
    /// How long an unanswered question is remembered.
    static let recorderTimeoutS = 10.0
    /// Every followed station's sample stream in order, holes fetched from the bridges' journals.
    private var input: InOrderInput
    /// The stations whose samples come here: those with a posture wearable.
    private let followed = FollowedStations()
    private var checkpoint: CheckpointFile?
    private var checkpointDue = 0.0
    private var changed = false
    /// Longest time between checkpoints while readings come.
    public var checkpointIntervalS = 2.0
    /// Whether this process began from a checkpoint, and checkpoints written.
    public private(set) var restored = false
    public private(set) var checkpoints = 0
    /// What recovery fetched, and what it could not.
    public var recovery: InOrderInput.Counters { input.counters }
    /// Whether some input stream waits for messages being fetched.
    public var isCatchingUp: Bool { input.isRecovering }
    /// The stations whose samples are evaluated (`follow`).
    var followedStations: Set<String> { followed.names }
    /// Messages received per topic (every source's summed).
    var receivedByTopic: [String: Int] {
        subscriber.stats.sources.reduce(into: [:]) { counts, source in
            counts[String(streamTopic(source.key)), default: 0] += source.value.received
        }
    }

    /// Connects to the bus and loads the stored calibrations.
    public convenience init(context: ZMQContext, config: BusConfig, settings: PostureSettings, storePath: String?, logger: Logger) throws(ZMQError) {
        try self.init(
            transport: ZMQTransport(context: context, config: config), queryEndpoint: config.queryEndpoint,
            settings: settings, storePath: storePath, logger: logger)
    }

    /// Connects on `transport` (its clock is the evaluator's); the recorder is asked at `queryEndpoint`.
    public init(transport: any BusTransport, queryEndpoint: String, settings: PostureSettings, storePath: String?, logger: Logger) throws(ZMQError) {
        // Samples come only from the stations that have a posture wearable (`follow`), learned from their
        // status: at 1,000 stations fifteen samples in sixteen are other sensors', and receiving and
        // dropping them was most of the evaluator's time.
        subscriber = try Subscriber(
            transport: transport, prefixes: MessageTypes.prefixes(StatusMessage.self, CommandMessage.self, HeartbeatMessage.self), logger: logger)
        // A followed station's other sensors' samples still come: read only as far as their envelope. A
        // posture sample's readings, each of them used, are read as they are received, in one pass
        // with the envelope (`SampleReadings.read`), not located and then read again.
        subscriber.samples = .read([SampleMessage.postureSensor])
        subscriber.sampleSensors = [SampleMessage.postureSensor]
        // Off the rep's path: woken a few hundred times a second, not for every sample (`Subscriber.gatherS`).
        subscriber.gatherS = 0.003
        heartbeat.subscribes = subscriber.subscribedPrefixes
        input = InOrderInput(transport: transport, logger: logger, wants: followed.wants)
        publisher = try Publisher(transport: transport, program: "posture-evaluator")
        clock = transport.clock
        self.transport = transport
        self.settings = settings
        self.storePath = storePath
        self.logger = logger
        recorder = try? QueryClient(transport: transport, endpoint: queryEndpoint, timeoutS: Self.recorderTimeoutS)
        if let storePath {
            do { store = try CalibrationStore.load(path: storePath) } catch {
                logger.warning("calibration store unreadable; starting empty", metadata: ["path": "\(storePath)", "error": "\(error)"])
            }
        }
    }

    /// Journals what is published (posture states, calibrations) into
    /// `settings.directory` and answers replay requests on `endpoint`.
    /// A checkpoint in the folder (a crashed evaluator's) is restored first:
    /// call this before the first `step`.
    public func startJournal(_ settings: JournalSettings, endpoint: String) throws {
        let file = CheckpointFile(path: settings.directory + "/checkpoint.json")
        checkpoint = file
        var saved: ConsumerCheckpoint<[PostureTracker]>?
        do { saved = try ConsumerCheckpoint.load(file) } catch {
            logger.error("checkpoint unreadable; starting fresh", metadata: ["path": "\(file.path)", "error": "\(error)"])
        }
        if let saved {
            publisher = try Publisher(transport: transport, program: "posture-evaluator", instance: saved.instance)
            for var tracker in saved.state {
                tracker.settings = self.settings
                trackers[tracker.station] = tracker
            }
            input = InOrderInput(
                transport: transport, logger: logger, wants: followed.wants, positions: saved.inputs,
                producers: saved.producers, endpoints: saved.endpoints)
            // The stations followed before: those of the sample streams it had reached, and those calibrating (asked
            // before their first reading came). Not every tracker's: a command makes one at any station.
            let calibrating = saved.state.filter(\.isCalibrating).map(\.station)
            for station in saved.inputs.keys.compactMap(FollowedStations.station(ofStream:)) + calibrating { follow(station) }
            restored = true
        }
        replay = try ProducerJournal(settings: settings, endpoint: endpoint, publisher: publisher, transport: transport).replay
        if let saved {
            publisher.resume(positions: saved.outputs, regenerated: { !$0.hasPrefix(HeartbeatMessage.topicPrefix) })
            logger.notice(
                "restored from the checkpoint; fetching the readings since from the bridges' journals",
                metadata: ["instance": "\(saved.instance)", "stations": "\(saved.state.count)", "saved_ts": "\(saved.savedTs)"])
        }
        logger.info("journalling", metadata: ["folder": "\(settings.directory)", "replay_endpoint": "\(endpoint)"])
    }

    /// Writes the trackers, input positions and output seqs (a failure is logged and retried).
    private func saveCheckpoint(now: Double) {
        guard let checkpoint else { return }
        checkpointDue = now + checkpointIntervalS
        do {
            let state = ConsumerCheckpoint(publisher: publisher, input: input, state: trackers.keys.sorted().compactMap { trackers[$0] })
            try state.write(to: checkpoint)
            changed = false
            checkpoints += 1
        } catch {
            logger.error("checkpoint not written; retrying", metadata: ["path": "\(checkpoint.path)", "error": "\(error)"])
        }
    }

    /// Publishes; a message that cannot be encoded is logged and dropped (`Publisher.send`).
    private func send<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil) throws {
        try publisher.send(payload, station: station, athlete: athlete, logger: logger)
    }

    /// What the heartbeat says of the input (summed over every stream, so only when one is due).
    private var inputCounters: InputCounters { subscriber.stats.inputs(recovery: input) }

    /// Runs until `stop` is set; checkpoints on the way out, so an evaluator stopped as asked and
    /// started again knows every stream it had reached and counts nothing it took as missed.
    public func run(stop: StopFlag) throws {
        logger.info("posture evaluator running", metadata: ["calibrations": "\(store.byAthlete.count)"])
        defer { saveCheckpoint(now: clock.monotonicSeconds()) }
        while !stop.isSet { try step() }
    }

    /// Messages taken in one step at most: the heartbeat, recovery and replies are looked at
    /// once a step, not once a message (most messages are other sensors' and cost a few µs).
    static let batch = 64

    /// One pass of the loop: the heartbeat, the recorder's replies, and the
    /// input messages queued (waiting up to `timeoutMs` on sockets for the
    /// first; at most `batch`).
    public func step(timeoutMs: Int32 = 200) throws {
        try heartbeat.tick(publisher, inputs: inputCounters, replay: replay)
        try replay?.serve()
        collectReplies()
        for message in input.poll() { try handle(message) }
        let now = clock.monotonicSeconds()
        if changed, now >= checkpointDue { saveCheckpoint(now: now) }
        try subscriber.forEachQueued(waitingMs: timeoutMs, upTo: Self.batch) { try take($0) }
    }

    /// One message received: a sample through the in-order input, a heartbeat noted.
    private func take(_ message: BusMessage) throws {
        switch message.envelope.type {
        case SampleMessage.type:
            // A station's prefix also matches longer names (`sample.rack-1`, `sample.rack-10`): only followed ones go on.
            guard followed.names.contains(message.envelope.station) else { return }
            try input.accept(message) { try handle($0) }
        case StatusMessage.type:
            if message.field("sensor") == .string(SampleMessage.postureSensor) { follow(message.envelope.station) }
        case HeartbeatMessage.type:
            input.note(heartbeat: message)
        default:
            try handle(message)
        }
    }

    /// Receives `station`'s samples from now on: a bridge said it has a posture
    /// wearable there (its `status`, sent as the link comes up, before any
    /// reading, and every few seconds while it streams), or a calibration was
    /// asked for there. A station once followed stays followed.
    private func follow(_ station: String) {
        guard followed.names.insert(station).inserted else { return }
        do {
            try subscriber.subscribe(SampleMessage.topic(station: station))
            heartbeat.subscribes = subscriber.subscribedPrefixes
            logger.info("following a posture wearable's station", metadata: ["station": "\(station)"])
        } catch {
            followed.names.remove(station)
            logger.error("could not subscribe to a posture wearable's station", metadata: ["station": "\(station)", "error": "\(error)"])
        }
    }

    /// Asks the recorder for `athlete`'s latest calibration, for `station`.
    /// The loop never waits: `collectReplies` applies it when it comes.
    private func requestCalibration(athlete: String, station: String) {
        guard let recorder else { return }
        do {
            let id = try recorder.request(.calibrationGet, AthleteArgs(athlete: athlete))
            calibrationRequests[id] = (station, athlete, clock.monotonicSeconds() + Self.recorderTimeoutS)
        } catch {
            logger.info("no calibration from the session-recorder", metadata: ["athlete": "\(athlete)", "reason": "\(error)"])
        }
    }

    /// Applies the calibrations the recorder has sent (never waits): kept
    /// locally from then on, and used at the station if the same athlete is
    /// still there with none. Questions unanswered for long are forgotten.
    private func collectReplies() {
        guard let recorder, !calibrationRequests.isEmpty else { return }
        while let reply = try? recorder.nextReply() {
            guard let request = calibrationRequests.removeValue(forKey: reply.id) else { continue }
            do {
                guard let stored = try QueryClient.decode(reply.data, of: .calibrationGet, as: StoredCalibration?.self) else {
                    logger.info("no calibration at the session-recorder either", metadata: ["athlete": "\(request.athlete)"])
                    continue
                }
                let calibration = try JSONDecoder().decode(PostureCalibration.self, from: Data(stored.json.utf8))
                // One made here meanwhile is newer.
                if store.byAthlete[request.athlete] == nil {
                    store.byAthlete[request.athlete] = calibration
                    if let storePath { try? store.save(path: storePath) }
                }
                logger.info("posture calibration fetched from the session-recorder", metadata: ["athlete": "\(request.athlete)"])
                var state = tracker(request.station)
                if state.athlete == request.athlete, state.calibration == nil, let current = store.byAthlete[request.athlete] {
                    state.apply(current)
                    trackers[request.station] = state
                    logger.info("posture calibration loaded", metadata: ["station": "\(request.station)", "athlete": "\(request.athlete)"])
                }
            } catch {
                logger.info("no calibration from the session-recorder", metadata: ["athlete": "\(request.athlete)", "reason": "\(error)"])
            }
        }
        let now = clock.monotonicSeconds()
        for (id, request) in calibrationRequests where now > request.deadline {
            calibrationRequests[id] = nil
            logger.info(
                "no calibration from the session-recorder",
                metadata: ["athlete": "\(request.athlete)", "reason": "no answer within \(Self.recorderTimeoutS) s"])
        }
    }

    private func tracker(_ station: String) -> PostureTracker {
        trackers[station] ?? PostureTracker(station: station, settings: settings)
    }

    /// One input message, in its stream's order.
    private func handle(_ message: BusMessage) throws {
        let station = message.envelope.station
        changed = true
        if message.envelope.type == CommandMessage.type {
            checkpointDue = 0  // a command is kept by no journal: checkpointed at once
            guard let command = try? message.payload(as: CommandMessage.self),
                command.target == "*" || command.target == "posture-evaluator"
            else { return }
            var state = tracker(station)
            switch command.name {
            case .postureCalibrate:
                let calibrate: PostureCalibrate
                do { calibrate = try PostureCalibrate(args: command.args) } catch {
                    logger.warning(
                        "command not carried out", metadata: ["station": "\(station)", "command": "\(command.command)", "reason": "\(error)"])
                    try send(AckMessage(answering: command, program: "posture-evaluator", refusal: "posture.calibrate: \(error)"), station: station)
                    return
                }
                follow(station)
                let athlete = calibrate.athlete ?? state.athlete ?? station
                let seconds = calibrate.seconds ?? 10
                state.startCalibration(athlete: athlete, seconds: min(600, max(0.5, seconds)))
                logger.info(
                    "posture calibration started",
                    metadata: ["station": "\(station)", "athlete": "\(athlete)", "seconds": "\(seconds)", "correlation_id": "\(command.id)"])
                // Done means started: the calibration message follows when the seconds are over.
                let detail = "calibrating \(athlete) for \(String(format: "%g", min(600, max(0.5, seconds)))) s"
                try send(AckMessage(answering: command, program: "posture-evaluator", refusal: nil, detail: detail), station: station, athlete: athlete)
            case .athleteAssign:
                guard let athlete = (try? AthleteAssign(args: command.args))?.athlete else { break }
                if let stored = store.byAthlete[athlete] {
                    state.apply(stored)
                    logger.info("posture calibration loaded", metadata: ["station": "\(station)", "athlete": "\(athlete)"])
                } else {
                    // Never judge one athlete with another's model; the recorder may know theirs.
                    state.clearCalibration(athlete: athlete)
                    requestCalibration(athlete: athlete, station: station)
                    logger.info(
                        "no posture calibration here for this athlete; asking the session-recorder (or calibrate with vbt posture calibrate)",
                        metadata: ["station": "\(station)", "athlete": "\(athlete)"])
                }
            case .athleteUnassign:
                state.unassign()
                logger.info("station unassigned", metadata: ["station": "\(station)", "correlation_id": "\(command.id)"])
            default:
                break
            }
            trackers[station] = state
            return
        }
        // Most samples are other sensors': their readings are never built, nor checked (`Subscriber.sampleSensors`).
        guard message.envelope.type == SampleMessage.type, message.sensor == SampleMessage.postureSensor else { return }
        let readings: [SampleMessage.PostureReading]
        do {
            guard case .posture(let posture) = try message.payload(as: SampleMessage.self).readings else { return }
            readings = posture
        } catch {
            // Counted and logged as the subscriber counts what it refuses on receipt (not a line per message).
            subscriber.countMalformed(error, topic: message.topic)
            return
        }
        var state = tracker(station)
        var outputs: [PostureTracker.Output] = []
        for reading in readings { outputs += state.feed(t: reading.t, acc: reading.acc, mag: reading.mag) }
        trackers[station] = state
        if state.calibration == nil, !warnedUncalibrated.contains(station), !outputs.contains(where: { if case .calibrated = $0 { true } else { false } }) {
            warnedUncalibrated.insert(station)
            logger.info("posture readings without a calibration; send posture.calibrate or assign a calibrated athlete", metadata: ["station": "\(station)"])
        }
        for output in outputs {
            switch output {
            case .calibrated(let calibration):
                store.byAthlete[calibration.athlete] = calibration
                if let storePath {
                    do { try store.save(path: storePath) } catch {
                        logger.error("calibration not saved", metadata: ["path": "\(storePath)", "error": "\(error)"])
                    }
                }
                for (sensor, fit) in [("acc", calibration.acc), ("mag", calibration.mag)] where !fit.fromData {
                    logger.warning("default calibration used", metadata: ["station": "\(station)", "sensor": "\(sensor)", "reason": "\(fit.reason ?? "")"])
                }
                try send(CalibrationMessage(calibration), station: station, athlete: calibration.athlete)
            case .posture(let report):
                try send(PostureMessage(report), station: station, athlete: report.athlete)
            }
        }
    }
}

extension PostureMessage {
    /// The message of a report (the station and athlete travel in the envelope).
    public init(_ report: PostureReport) {
        self.init(
            correct: report.correct, changed: report.changed, accDensity: report.accDensity, magDensity: report.magDensity,
            accThreshold: report.accThreshold, magThreshold: report.magThreshold, badForS: report.badForS,
            sustainedBad: report.sustainedBad, t: report.t)
    }
}

extension CalibrationMessage {
    /// The message of a calibration: both fits, and the whole model as JSON text
    /// with sorted keys (the same calibration, the same text).
    public init(_ calibration: PostureCalibration) {
        func fit(_ sensor: SensorCalibration) -> Fit {
            Fit(
                mean: sensor.mean, covariance: sensor.covariance, determinant: sensor.determinant, inverse: sensor.inverse,
                eigenvalues: sensor.eigenvalues, sigma: sensor.sigma, threshold: sensor.threshold, fromData: sensor.fromData,
                reason: sensor.reason, samples: sensor.samples)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = (try? encoder.encode(calibration)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        self.init(acc: fit(calibration.acc), mag: fit(calibration.mag), json: json)
    }

    /// The model it carries, if its JSON text is one this build reads.
    public var calibration: PostureCalibration? {
        try? JSONDecoder().decode(PostureCalibration.self, from: Data(json.utf8))
    }
}
