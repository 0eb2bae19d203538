import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

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
public final class PostureRuntime: BusRole {
    package let subscriber: Subscriber
    package internal(set) var publisher: Publisher
    let clock: any BusClock
    let transport: any BusTransport
    package var replay: ReplayServer?
    package let logger: Logger
    let settings: PostureSettings
    let storePath: String?
    var store = CalibrationStore()
    var trackers: [String: PostureTracker] = [:]
    var warnedUncalibrated: Set<String> = []
    var heartbeat = HeartbeatSchedule(role: "posture-evaluator", name: "posture-evaluator")
    /// Asks the session-recorder for calibrations this evaluator has not seen (made elsewhere, or before a reinstall).
    let recorder: QueryClient?
    /// Questions to the recorder not yet answered, by id.
    var calibrationRequests: [String: (station: String, athlete: String, deadline: Double)] = [:]
    /// How long an unanswered question is remembered.
    static let recorderTimeoutS = 10.0
    /// Every followed station's sample stream in order, holes fetched from the bridges' journals.
    package var input: InOrderInput
    /// The stations whose samples come here: those with a posture wearable.
    let followed = FollowedStations()
    var checkpoint: CheckpointFile?
    var checkpointDue = 0.0
    var changed = false
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
    func saveCheckpoint(now: Double) {
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
        try heartbeat.tick(self)
        try replay?.serve()
        collectReplies()
        for message in input.poll() { try handle(message) }
        let now = clock.monotonicSeconds()
        if changed, now >= checkpointDue { saveCheckpoint(now: now) }
        try subscriber.forEachQueued(waitingMs: timeoutMs, upTo: Self.batch) { try take($0) }
    }

    /// One message received: a sample through the in-order input, a heartbeat noted.
    func take(_ message: BusMessage) throws {
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
    func follow(_ station: String) {
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
    func requestCalibration(athlete: String, station: String) {
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
    func collectReplies() {
        guard let recorder, !calibrationRequests.isEmpty else { return }
        while let reply = try? recorder.nextReply() {
            guard let request = calibrationRequests.removeValue(forKey: reply.id) else { continue }
            do {
                guard let stored = try QueryClient.decode(reply.data, of: .calibrationGet) else {
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

}
