import Foundation
import Logging
import VBTBus
import VBTDetection
import VBTQuery
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// The rep-detector process's loop: one thread owns the subscriber and the
/// publisher sockets; detectors are plain values per station.
///
/// Hand-over (`--takeover`): the new process subscribes first and buffers
/// every input message; once it holds some, it publishes `takeover.detector`
/// with the first sequence number it holds per input stream. The running
/// process keeps processing until it has passed those points (so no message
/// falls between the two), stops, publishes each station's complete detector
/// state (`handoff.<station>`) and then `handoff.detector` with the last
/// sequence number it processed per stream, and exits 0. The new process
/// restores the states and processes its buffer from just after those
/// positions. Detection is a pure function of the readings, so the rep stream
/// is the same as if one process had done it all, even mid-rep. The protocol's
/// phases and timeouts are `Handover`'s, a value fed messages and time; this
/// runtime carries out what it asks (publishing, the journal, the logs).
///
/// Crash recovery (`--journal`): every station's state, with the input
/// position reached in each stream and the output streams' seqs, is
/// checkpointed into the journal's folder (`checkpoint.json`) every
/// `checkpointIntervalS` while readings come (longer when the state is big)
/// and after every command. A detector started on a folder with a checkpoint takes the
/// crashed instance's name, restores the states, fetches every reading since
/// from the bridges' journals (`InOrderInput`) and detects again; what it
/// detects again up to what the crashed process had published keeps its seq
/// and is not sent twice (`Publisher.resume`), so consumers see one stream
/// with the same reps, ids and metrics as without the crash.
public final class DetectorRuntime: BusRole {
    let options: DetectorOptions
    package let logger: Logger
    package let subscriber: Subscriber
    package let publisher: Publisher
    let clock: any BusClock
    let transport: any BusTransport
    package var replay: ReplayServer?
    /// Each station's detector and when its input last arrived: one look-up of the station a
    /// message (two tables of it were a fifth of the runtime's hash look-ups).
    var stations: [String: Station] = [:]
    struct Station {
        /// The station's detector, out of line: a dictionary holds its values in its buckets, many
        /// of them empty, and a detector is some 1.4 KB (docs/performance.md).
        var detector: StationDetector {
            get { boxed.value }
            _modify {
                if !isKnownUniquelyReferenced(&boxed) { boxed = Boxed(value: boxed.value) }
                yield &boxed.value
            }
        }
        private var boxed: Boxed
        /// A detector on the heap, shared by copies of its `Station` until one of them changes it.
        final class Boxed { var value: StationDetector; init(value: StationDetector) { self.value = value } }
        /// When a message of the station last came (monotonic); nil for a station handed over
        /// and not heard from since, which is never ended as silent.
        var arrived: Double?
        /// The newest laser reading time fed, and the newest bar IMU reading time received.
        var laserT = -Double.infinity
        var imuT = -Double.infinity
        /// IMU messages waiting for the laser to pass their last reading (`imuWaitS`), oldest first.
        var heldIMU: [(message: BusMessage, lastT: Double)] = []
        /// The readings were ended (`finish`) when the station went silent, and none came since.
        var ended = false
        /// The recorder was asked for the station's assignment in this process's life (or the
        /// station was handed over, its assignment with it): `requestAssignment`.
        var asked = false
        /// The envelope `ts` of the newest sample message fed in this process's life.
        var fedTs = -Double.infinity
        /// The recorder's assignment, missed by this detector, waiting for the station's first
        /// sample message sent at or after it (`caughtUp`).
        var missed: AssignmentRecord?

        init(detector: StationDetector, arrived: Double?, asked: Bool = false) {
            (boxed, self.arrived, self.asked) = (Boxed(value: detector), arrived, asked)
        }
    }
    /// The last seq processed of each input stream the in-order input does not keep (commands,
    /// and a stream restored or handed over before the input delivered any of it).
    var positions: [String: Int] = [:]

    /// The last seq processed of each input stream: the in-order input's or `positions`, the further.
    var processed: [String: Int] {
        var all = positions
        for (src, seq) in input.positions { all[src] = max(all[src] ?? 0, Int(seq)) }
        return all
    }

    /// `processed` of one stream.
    func position(of src: String) -> Int { max(positions[src] ?? 0, input.position(of: src).map { Int($0) } ?? 0) }
    /// Each input stream's position, looked at once a minute: a stream that has not moved for
    /// an hour is forgotten (not a time written for each message: one hash of the stream's
    /// name less a message).
    var stillStreams = StillCounts()
    var nextStreamLook = 0.0
    /// Streams whose position stood still this long are forgotten, s.
    static let forgetStreamAfterS = 3_600.0
    /// A station whose bridge has stopped heartbeating (its link down, say) is not ended as silent
    /// for this long: its readings may be on their way, and a set ended before they come would be
    /// measured otherwise than the athlete lifted it. A heartbeat gap over `bridgeGapS` is unheard.
    static let unheardBridgeWaitS = 120.0
    static let bridgeGapS = 3.0
    /// Readings that resume `idleTimeoutS` of reading time after the last end them by reading time
    /// (`StationDetector.resumed`); the wall clock ends a silent station's readings this much later,
    /// so a message delivered a little late never ends readings the reading time would not.
    static let silenceMarginS = 2.0
    /// When each station's own bridge (heartbeat `bridge-<station>`) was last heard, monotonic;
    /// removed when it says it stops.
    var bridgeHeard: [String: Double] = [:]
    /// The input streams whose positions are kept (for tests).
    var streamsKept: Set<String> { Set(processed.keys) }
    /// The last seq processed of each input stream, as a checkpoint keeps it (for tests).
    var positionsKept: [String: Int] { processed }
    /// Where a live hand-over stands: none, taking over, handing over, or handed over.
    var handover: Handover<StationDetector>
    /// The learned patterns, kept in step with the stations, the recorder and their file.
    var patterns: PatternSync
    /// The session-recorder keeps every detector's patterns: a new machine or a lost file starts from them.
    let recorder: QueryClient?
    /// The questions for stations' assignments, while unanswered, by id: the station and when to give up.
    var assignmentRequests: [String: (station: String, deadline: Double)] = [:]
    /// Stations first seen since the last message, to be asked for their assignments.
    var stationsToAsk: [String] = []
    /// An assignment question went unanswered (said once: the recorder is down or far).
    var assignmentsUnanswered = false
    /// Learned patterns offered to the recorder and not yet confirmed, by request id: when to
    /// stop waiting. Every confirmation is read: one left unread stays in the socket's queue,
    /// holding its share of a receive buffer (a thousand sets ending held megabytes).
    var patternOffers: [String: Double] = [:]
    /// Offers the recorder refused, or that went unanswered or could not be sent (`patternsNotKept`).
    var patternsNotKeptCount = 0
    /// How many stations hold a `missed` assignment (none: no look-up per message).
    var missedWaiting = 0
    /// Readings skipped for a time far from their message's `ts`.
    var badTimes = 0
    var heartbeat: HeartbeatSchedule
    /// Every sample stream's messages in order, holes fetched from the bridges' journals.
    package var input: InOrderInput
    /// The input streams recovery follows: this detector's stations' samples.
    let wants: (String) -> Bool
    /// Writes the checkpoints off the loop (nil without a journal).
    let checkpointWriter: CheckpointWriter<StationDetector>?
    /// The restored checkpoint's output positions, applied once the journal is open.
    var resumeOutputs: [String: UInt64]?
    /// When the next checkpoint is due (monotonic), and whether anything changed since the last.
    var checkpointDue = 0.0
    /// Answers to commands, held until a checkpoint holding the command is on disk (the
    /// generation `submitNow` gave it; nil until that checkpoint is handed over).
    var heldAcks: [(ack: AckMessage, station: String, athlete: String?, generation: UInt64?)] = []
    /// Writes the patterns file off the loop: its fsync, behind the recorder's writes, stalled the loop.
    let patternsWriter = BackgroundWriter(name: "vbt.patterns", background: false)
    /// The checkpoint waits at least this many times as long as the last one took to write.
    static let checkpointShare = 20.0
    var changed = false
    /// Checkpoints handed to the writer, and whether this process began from one.
    public internal(set) var checkpoints = 0
    public private(set) var restored = false

    /// The instance name, written into every rep's `detector` field.
    public var instance: String { publisher.stamper.instance }

    /// Connects to the bus.
    public convenience init(context: ZMQContext, config: BusConfig, options: DetectorOptions, logger: Logger) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), queryEndpoint: config.queryEndpoint, options: options, logger: logger)
    }

    /// Connects on `transport` (its clock is the detector's); the recorder is asked at `queryEndpoint`.
    public init(transport: any BusTransport, queryEndpoint: String, options: DetectorOptions, logger: Logger) throws(ZMQError) {
        self.options = options
        self.logger = logger
        clock = transport.clock
        self.transport = transport
        subscriber = try Subscriber(
            transport: transport,
            prefixes: MessageTypes.prefixes(SampleMessage.self, CommandMessage.self, TakeoverMessage.self, HandoffMessage.self, HeartbeatMessage.self),
            // A shard's samples come routed to it by the bus (`ShardRoute`), not every station's.
            route: options.stations.routePrefix,
            // On the rep's path: the bus at its memory budget disconnects it last.
            priority: .realtime, logger: logger)
        // Of the bar IMU's readings only their times are read as they are received, the rest
        // checked as they are built, when used: they are not while the laser speaks (most of the
        // bytes of a station with both). Checking them on receipt as well was a second
        // pass over every sample (some 8 % of the detector's time at 1,000 stations); what it
        // builds and finds malformed is counted as the subscriber counts it (`process`). A
        // laser's readings, each of them used, are read whole as they are received. Both in the
        // envelope's pass: located, then read again, they were two fifths of the decoding
        // (docs/decisions/0034-wire-codec-hot-paths.md). A wearable's samples are read only as far
        // as their envelope (counted for their streams); with --stations or --shard, other
        // stations' are dropped unread and uncounted (`Subscriber.sampleStations`).
        subscriber.samples = .read([SampleMessage.distanceSensor], times: [SampleMessage.imuSensor])
        subscriber.sampleSensors = [SampleMessage.distanceSensor, SampleMessage.imuSensor]
        if !options.stations.servesAll { subscriber.sampleStations = { [stations = options.stations] in stations.serves($0) } }
        heartbeat = options.stations.heartbeat(subscribes: subscriber.subscribedPrefixes)
        let checkpoint = options.journal.map { CheckpointFile(path: $0.settings.directory + "/checkpoint.json") }
        checkpointWriter = checkpoint.map { CheckpointWriter(file: $0) }
        var saved: ConsumerCheckpoint<[StationDetector]>?
        if !options.takeover, let checkpoint, let checkpointWriter {
            do { saved = try checkpointWriter.load() } catch {
                logger.error(
                    "checkpoint unreadable; starting fresh (what the crashed detector had not published is not detected again)",
                    metadata: ["path": "\(checkpoint.path)", "error": "\(error)"])
            }
        }
        publisher = try Publisher(transport: transport, program: "rep-detector", instance: saved?.instance)
        let selection = options.stations
        wants = { (topic: String) in
            topic.hasPrefix(SampleMessage.topicPrefix) && selection.serves(String(topic.dropFirst(SampleMessage.topicPrefix.utf8.count)))
        }
        input = InOrderInput(
            transport: transport, logger: logger, settings: options.recovery, wants: wants, positions: saved?.inputs,
            producers: saved?.producers ?? [:], endpoints: saved?.endpoints ?? [:])
        if let saved {
            restored = true
            resumeOutputs = saved.outputs
            positions = saved.inputs.mapValues { Int($0) }
            let now = clock.monotonicSeconds()
            for detector in saved.state {
                var restoredDetector = detector
                restoredDetector.settings = options.settings
                stations[detector.station] = Station(detector: restoredDetector, arrived: now)
            }
        }
        handover = Handover(instance: publisher.stamper.instance, takingOver: options.takeover, timeoutS: options.takeoverTimeoutS)
        var library = PatternLibrary()
        if let path = options.patternsPath {
            do {
                library = try PatternLibrary.load(path: path)
            } catch {
                logger.warning("pattern library unreadable; starting without patterns", metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
        patterns = PatternSync(library: library, filed: options.patternsPath != nil)
        recorder = options.askRecorder ? try? QueryClient(transport: transport, endpoint: queryEndpoint, timeoutS: options.recorderTimeoutS) : nil
        if patterns.asksRecorder { requestPatterns() }
        // A command published while this detector was down reached no one: the restored
        // stations' assignments are checked against the recorder's at once (`requestAssignment`).
        for station in stations.keys.sorted() {
            stations[station]?.asked = true
            requestAssignment(of: station)
        }
        if let saved {
            logger.notice(
                "restored from the checkpoint; fetching the readings since from the bridges' journals",
                metadata: ["instance": "\(saved.instance)", "stations": "\(saved.state.count)", "saved_ts": "\(saved.savedTs)"])
        }
    }

    /// Opens the journal when one is asked for: at the first step of a
    /// detector starting fresh (a journal that cannot be opened stops it), or
    /// on completing a takeover (the old detector holds the folder until it
    /// exits, just after its hand-over: waited for; failing that, detection
    /// goes on and the error is logged).
    func startJournal(lockWaitS: Double) throws {
        guard let plan = options.journal, replay == nil else { return }
        do {
            replay = try ProducerJournal(settings: plan.settings, endpoint: plan.endpoint, publisher: publisher, transport: transport, lockWaitS: lockWaitS)
                .replay
            if let outputs = resumeOutputs {
                // Heartbeats are made afresh; everything else is detected again, identically.
                publisher.resume(positions: outputs, regenerated: { !$0.hasPrefix(HeartbeatMessage.topicPrefix) })
                resumeOutputs = nil
            }
            logger.info("journalling", metadata: ["folder": "\(plan.settings.directory)", "replay_endpoint": "\(plan.endpoint)"])
        } catch  where lockWaitS > 0 {
            logger.error(
                "no journal after the takeover: what is published cannot be fetched again",
                metadata: ["folder": "\(plan.settings.directory)", "error": "\(error)"])
        }
    }

    /// When the housekeeping (silent stations, patterns) is next due; whether the journal was tried.
    var nextHousekeeping: Double?
    var journalTried = false

    deinit {
        finishPatterns()
        finishCheckpoints()
    }
}
