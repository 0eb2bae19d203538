import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// How a rep-detector process runs.
public struct DetectorOptions: Sendable {
    /// Stations to serve, a shell glob (`*`, `rack-*`).
    public var stationsGlob = "*"
    /// Take over from a running detector instead of starting fresh.
    public var takeover = false
    /// Longest wait for the running detector's hand-over before starting fresh.
    public var takeoverTimeoutS = 10.0
    public var settings = DetectorSettings()
    /// The pattern library's file (learned patterns survive restarts); nil keeps them in memory.
    public var patternsPath: String? = "data/patterns.json"
    /// Share learned patterns with the session-recorder (and start from its patterns when the file has none).
    public var askRecorder = true
    /// How long an unanswered question to the recorder is remembered. The
    /// loop never waits for the answer: it detects on, and uses it when it comes.
    public var recorderTimeoutS = 10.0
    /// Journal what is published (reps, sets, rejections, profiles) and answer replay requests (nil: no journal).
    /// With a journal, each station's state is also checkpointed into its folder, and restored after a crash.
    public var journal: (settings: JournalSettings, endpoint: String)?
    /// Longest time between checkpoints while readings come (one is also written after every command and every set the wall clock ends).
    public var checkpointIntervalS = 2.0
    /// How input holes are fetched from the producers' journals.
    public var recovery = InOrderInput.Settings()
    /// Creates the defaults.
    public init() {}
}

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
/// is the same as if one process had done it all, even mid-rep.
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
public final class DetectorRuntime {
    private let options: DetectorOptions
    private let logger: Logger
    private let subscriber: Subscriber
    private let publisher: Publisher
    private let clock: any BusClock
    private let transport: any BusTransport
    private var replay: ReplayServer?
    /// Each station's detector and when its input last arrived: one look-up of the station a
    /// message (two tables of it were a fifth of the runtime's hash look-ups).
    private var stations: [String: Station] = [:]
    private struct Station {
        var detector: StationDetector
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
    }
    /// The last seq processed of each input stream the in-order input does not keep (commands,
    /// and a stream restored or handed over before the input delivered any of it).
    private var positions: [String: Int] = [:]

    /// The last seq processed of each input stream: the in-order input's or `positions`, the further.
    private var processed: [String: Int] {
        var all = positions
        for (src, seq) in input.positions { all[src] = max(all[src] ?? 0, Int(seq)) }
        return all
    }

    /// `processed` of one stream.
    private func position(of src: String) -> Int { max(positions[src] ?? 0, input.position(of: src).map { Int($0) } ?? 0) }
    /// Each input stream's position, looked at once a minute: a stream that has not moved for
    /// an hour is forgotten (not a time written for each message: one hash of the stream's
    /// name less a message).
    private var stillStreams = StillCounts()
    private var nextStreamLook = 0.0
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
    private var bridgeHeard: [String: Double] = [:]
    /// The input streams whose positions are kept (for tests).
    var streamsKept: Set<String> { Set(processed.keys) }
    /// The last seq processed of each input stream, as a checkpoint keeps it (for tests).
    var positionsKept: [String: Int] { processed }
    private var mode: Mode
    private let encoder = JSONEncoder()
    private let decoder = JSONDecoder()
    private var library = PatternLibrary()
    /// The session-recorder keeps every detector's patterns: a new machine or a lost file starts from them.
    private let recorder: QueryClient?
    /// The question for the recorder's patterns, while unanswered: its id and when to give up.
    private var patternsRequest: (id: String, deadline: Double)?
    /// The questions for stations' assignments, while unanswered, by id: the station and when to give up.
    private var assignmentRequests: [String: (station: String, deadline: Double)] = [:]
    /// Stations first seen since the last message, to be asked for their assignments.
    private var stationsToAsk: [String] = []
    /// An assignment question went unanswered (said once: the recorder is down or far).
    private var assignmentsUnanswered = false
    /// How many stations hold a `missed` assignment (none: no look-up per message).
    private var missedWaiting = 0
    /// Readings skipped for a time far from their message's `ts`.
    private var badTimes = 0
    /// How far a reading's time may be from its message's send time.
    static let maxReadingSkewS = 3_600.0
    private var heartbeat = HeartbeatSchedule(role: "rep-detector", name: "rep-detector")
    /// Every sample stream's messages in order, holes fetched from the bridges' journals.
    private var input: InOrderInput
    /// The input streams recovery follows: this detector's stations' samples.
    private let wants: (String) -> Bool
    /// Writes the checkpoints off the loop (nil without a journal).
    let checkpointWriter: CheckpointWriter<StationDetector>?
    /// The restored checkpoint's output positions, applied once the journal is open.
    private var resumeOutputs: [String: UInt64]?
    /// When the next checkpoint is due (monotonic), and whether anything changed since the last.
    private var checkpointDue = 0.0
    /// Answers to commands, held until a checkpoint holding the command is on disk (the
    /// generation `submitNow` gave it; nil until that checkpoint is handed over).
    private var heldAcks: [(ack: AckMessage, station: String, athlete: String?, generation: UInt64?)] = []
    /// A pattern was learned since the patterns file was last written.
    private var patternsUnsaved = false
    /// Writes the patterns file off the loop: its fsync, behind the recorder's writes, stalled the loop.
    private let patternsWriter = BackgroundWriter(name: "vbt.patterns", background: false)
    /// The library's patterns, as given to each station, and the version they are (`libraryChanged`).
    private var sharedPatterns: [RepPattern] = []
    private var patternsVersion = 0
    /// The checkpoint waits at least this many times as long as the last one took to write.
    static let checkpointShare = 20.0
    private var changed = false
    /// Checkpoints handed to the writer, and whether this process began from one.
    public private(set) var checkpoints = 0
    public private(set) var restored = false

    /// The instance name, written into every rep's `detector` field.
    public var instance: String { publisher.stamper.instance }

    private enum Mode {
        case active
        case takingOver(buffer: [BusMessage], requested: Bool, deadline: Double, states: [String: StationDetector])
        case handingOver(to: String, targets: [String: Int], deadline: Double)
        case finished
    }

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
            // On the rep's path: the bus at its memory budget disconnects it last.
            priority: .realtime, logger: logger)
        // Of the bar IMU's readings only their times are read as they are received, the rest
        // checked as they are built, when used: they are not while the laser speaks (most of the
        // bytes of a station with both). Checking them on receipt as well was a second
        // pass over every sample (some 8 % of the detector's time at 1,000 stations); what it
        // builds and finds malformed is counted as the subscriber counts it (`process`). A
        // laser's readings, each of them used, are read whole as they are received. Both in the
        // envelope's pass: located, then read again, they were two fifths of the decoding
        // (docs/decisions/0034-wire-codec-hot-paths.md). A wearable's are not the detector's: its samples are read only
        // as far as their envelope.
        subscriber.samples = .read([SampleMessage.distanceSensor], times: [SampleMessage.imuSensor])
        subscriber.sampleSensors = [SampleMessage.distanceSensor, SampleMessage.imuSensor]
        heartbeat.subscribes = subscriber.subscribedPrefixes
        // Detector state holds infinities ("no rep yet"); JSON has no such numbers.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
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
        let glob = options.stationsGlob
        wants = { (topic: String) in
            topic.hasPrefix(SampleMessage.topicPrefix) && fnmatch(glob, String(topic.dropFirst(SampleMessage.topicPrefix.utf8.count)), 0) == 0
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
        mode = options.takeover ? .takingOver(buffer: [], requested: false, deadline: .infinity, states: [:]) : .active
        encoder.outputFormatting = [.sortedKeys]
        if let path = options.patternsPath {
            do {
                library = try PatternLibrary.load(path: path)
            } catch {
                logger.warning("pattern library unreadable; starting without patterns", metadata: ["path": "\(path)", "error": "\(error)"])
            }
        }
        recorder = options.askRecorder ? try? QueryClient(transport: transport, endpoint: queryEndpoint, timeoutS: options.recorderTimeoutS) : nil
        if library.patterns.isEmpty { requestPatterns() }
        libraryChanged()
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
    private func startJournal(lockWaitS: Double) throws {
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

    /// Publishes; a message that cannot be encoded is logged and dropped (`Publisher.send`).
    private func send<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil) throws {
        try publisher.send(payload, station: station, athlete: athlete, logger: logger)
    }

    /// Runs until `stop` is set or, after handing over, until done.
    public func run(stop: StopFlag) throws {
        logger.info("rep detector running", metadata: ["instance": "\(instance)", "stations": "\(options.stationsGlob)", "takeover": "\(options.takeover)"])
        defer {
            savePatterns()
            finishPatterns()
            finishCheckpoints()
        }
        // Answers held for a checkpoint are sent the step after it is written: no long waits then.
        while !stop.isSet, !isFinished { try step(timeoutMs: heldAcks.isEmpty ? 100 : 5) }
    }

    /// Whether this detector has handed over and is done.
    public var isFinished: Bool {
        if case .finished = mode { return true }
        return false
    }

    /// Whether some input stream waits for messages being fetched from a journal.
    public var isCatchingUp: Bool { input.isRecovering }

    /// What recovery fetched, and what it could not.
    public var recovery: InOrderInput.Counters { input.counters }

    /// Whether this detector is detecting (not waiting for a hand-over, not handed over).
    public var isActive: Bool {
        if case .active = mode { return true }
        return false
    }

    private var nextHousekeeping: Double?
    private var journalTried = false

    /// Messages taken in one step at most: some 64 × 12 µs at 1,000 stations, so
    /// the heartbeat and recovery are never held up by more than a millisecond or so.
    static let batch = 64

    /// One pass of the loop: the input messages queued (waiting up to `timeoutMs`
    /// on sockets for the first; at most `batch`), the recorder's replies, the
    /// hand-over, the heartbeat, and once a second the silent stations.
    public func step(timeoutMs: Int32 = 100) throws {
        guard !isFinished else { return }
        if case .active = mode, options.journal != nil, replay == nil, !journalTried {
            journalTried = true
            try startJournal(lockWaitS: 0)
        }
        // What is queued is taken, up to a batch, before the rest of the step (recovery,
        // replies, heartbeat, checkpoints), whose look is per step, not per message.
        try subscriber.forEachQueued(waitingMs: timeoutMs, upTo: Self.batch) { try handle($0) }
        if isActive || isHandingOver {
            for message in input.poll() { try processAndHandOver(message, inOrder: true) }
        }
        try collectReplies()
        try progressTakeover()
        try heartbeat.tick(publisher, inputs: inputCounters, replay: replay)
        try replay?.serve()
        let now = clock.monotonicSeconds()
        if let checkpointWriter, let failure = checkpointWriter.takeFailure() {
            logger.error("checkpoint not written; retrying", metadata: ["path": "\(checkpointWriter.file.path)", "error": "\(failure)"])
            changed = true
            // Answers waiting for a write that failed wait for the next, made at once.
            for index in heldAcks.indices where heldAcks[index].generation.map(checkpointWriter.isWritten) == false {
                heldAcks[index].generation = nil
                checkpointDue = 0
            }
        }
        if changed, now >= checkpointDue { saveCheckpoint(now: now) }
        try answerCommands()
        let due = nextHousekeeping ?? now + 1  // the first a second after the first step
        nextHousekeeping = due
        if now >= due {
            nextHousekeeping = now + 1
            try closeSilentStations()
            savePatterns()
        }
    }

    private var isHandingOver: Bool {
        if case .handingOver = mode { return true }
        return false
    }

    /// What the heartbeat says of the input: the subscriber's counters and what recovery could not fetch.
    var inputCounters: InputCounters { subscriber.stats.inputs(recovery: input) }

    /// Hands every station's state, the input positions and the output seqs
    /// to the checkpoint writer (never fatal: a failed write is logged and
    /// the next one comes when it is due). With commands waiting for their
    /// answers, at once and at normal priority (`CheckpointWriter.submitNow`).
    private func saveCheckpoint(now: Double) {
        guard let checkpointWriter, replay != nil, isActive else { return }
        let checkpoint = ConsumerCheckpoint(
            publisher: publisher, input: input, inputs: processed.mapValues { UInt64($0) },
            state: stations.keys.sorted().compactMap { stations[$0]?.detector })
        if heldAcks.contains(where: { $0.generation == nil }) {
            let generation = checkpointWriter.submitNow(checkpoint)
            for index in heldAcks.indices where heldAcks[index].generation == nil { heldAcks[index].generation = generation }
        } else {
            checkpointWriter.submit(checkpoint)
        }
        changed = false
        checkpoints += 1
        // At most a twentieth of a core goes to checkpoints: with many stations the state is
        // big, and the next checkpoint waits longer (after a crash, more is fetched again from
        // the bridges' journals; nothing is lost). Processor time, not wall time: on a busy
        // machine the background writer waits for a core, which costs nobody, and waiting
        // twenty times that left a crashed detector a minute of readings to fetch again.
        checkpointDue = now + max(options.checkpointIntervalS, Self.checkpointShare * checkpointWriter.lastCPUSeconds)
    }

    /// Waits until the checkpoints handed over are written: before this process
    /// ends or hands its stations over, so none is written after.
    private func finishCheckpoints() {
        guard let checkpointWriter else { return }
        checkpointWriter.wait()
        if let failure = checkpointWriter.takeFailure() {
            logger.error("checkpoint not written", metadata: ["path": "\(checkpointWriter.file.path)", "error": "\(failure)"])
        }
        try? answerCommands()
    }

    /// Sends the answers whose commands a checkpoint on disk holds: a command is kept by
    /// no journal, so "done" is said only once a crash could no longer lose it. A failed
    /// write is written again at the next step (`step` marks the state changed).
    private func answerCommands() throws {
        guard !heldAcks.isEmpty else { return }
        var waiting: [(ack: AckMessage, station: String, athlete: String?, generation: UInt64?)] = []
        for held in heldAcks {
            if let generation = held.generation, checkpointWriter?.isWritten(generation) != false {
                try send(held.ack, station: held.station, athlete: held.athlete)
            } else {
                waiting.append(held)
            }
        }
        heldAcks = waiting
    }

    deinit {
        finishPatterns()
        finishCheckpoints()
    }

    // MARK: Messages

    private func processAndHandOver(_ message: BusMessage, inOrder: Bool = false) throws {
        try process(message, inOrder: inOrder)
        try finishHandoverIfReady()
    }

    private func handle(_ message: BusMessage) throws {
        switch message.envelope.type {
        case SampleMessage.type, CommandMessage.type:
            guard matches(message.envelope.station) else { return }
            if case .takingOver(var buffer, let requested, let deadline, let states) = mode {
                buffer.append(message)
                mode = .takingOver(buffer: buffer, requested: requested, deadline: deadline, states: states)
                return
            }
            if case .active = mode {} else if case .handingOver = mode {} else { return }
            if message.envelope.type == SampleMessage.type {
                try input.accept(message) { try processAndHandOver($0, inOrder: true) }
            } else {
                try processAndHandOver(message)
            }
        case HeartbeatMessage.type:
            input.note(heartbeat: message)
            let name = message.envelope.station
            if name.hasPrefix("bridge-") {
                let station = String(name.dropFirst("bridge-".count))
                let stopping = (try? message.payload(as: HeartbeatMessage.self))?.stopping == true
                bridgeHeard[station] = stopping ? nil : clock.monotonicSeconds()
            }
        case TakeoverMessage.type:
            // Only the detector serving the same stations hands over: a gym split
            // between detectors replaces them one at a time.
            guard let request = try? message.payload(as: TakeoverMessage.self), request.instance != instance,
                request.stations == options.stationsGlob
            else { return }
            if case .active = mode {
                logger.info("takeover requested", metadata: ["by": "\(request.instance)"])
                mode = .handingOver(to: request.instance, targets: request.firstSeq, deadline: clock.monotonicSeconds() + 5)
                try finishHandoverIfReady()
            }
        case HandoffMessage.type:
            guard let handoff = try? message.payload(as: HandoffMessage.self), handoff.to == instance,
                case .takingOver(let buffer, let requested, let deadline, var states) = mode
            else { return }
            if let state = handoff.state, let detector = try? decoder.decode(StationDetector.self, from: Data(state.utf8)) {
                states[detector.station] = detector
            }
            mode = .takingOver(buffer: buffer, requested: requested, deadline: deadline, states: states)
            if handoff.done { try completeTakeover(states: states, positions: handoff.positions, from: handoff.from) }
        default:
            return
        }
    }

    private func matches(_ station: String) -> Bool {
        // Every station (the default), decided without handing both strings to C for every message.
        options.stationsGlob == "*" || fnmatch(options.stationsGlob, station, 0) == 0
    }

    /// Feeds one input message to its station's detector and publishes what comes out; false
    /// when its stream had passed it already. `inOrder`: the in-order input delivered it, which
    /// delivers each message of a stream once, in order, from the positions it was given, and
    /// keeps the stream's position (`processed`); any other message's is kept in `positions`.
    @discardableResult
    private func process(_ message: BusMessage, inOrder: Bool = false) throws -> Bool {
        let station = message.envelope.station
        // A stream position already processed (restored from a hand-over) is skipped (one
        // look-up: the position is read and moved on in place). A sample in order is not looked
        // up again: at 1,000 stations a table of a thousand streams, each look-up a few cache
        // misses (`vbt-bench --only runtime --rack-stations 1000`).
        if !inOrder { guard Self.moveOn(&positions[message.envelope.src, default: 0], to: Int(message.envelope.seq)) else { return false } }
        let now = clock.monotonicSeconds()
        var command: CommandMessage?
        if message.envelope.type == CommandMessage.type {
            guard let decoded = try? message.payload(as: CommandMessage.self), decoded.target == "*" || decoded.target == "rep-detector" else {
                // Another program's command still says the station is there.
                stations[station]?.arrived = now
                return true
            }
            command = decoded
        }
        defer {
            // A station first heard of in this process's life: its assignment is asked for.
            while let asked = stationsToAsk.popLast() { requestAssignment(of: asked) }
        }
        // A missed assignment applies before the first readings sent at or after it.
        if missedWaiting > 0, command == nil, let missed = stations[station]?.missed, message.envelope.ts >= missed.ts {
            try applyMissed(at: station)
        }
        // When this message was taken from the input: a rep it completes carries it (`received_ts`).
        let received = clock.wallSeconds()
        // Fed in place in the dictionary (its buffers have one owner and are changed where
        // they lie): nothing else may hold the station's detector meanwhile (a second
        // reference would make the first append copy its buffers).
        let (outputs, inputT, ack, athleteBefore, athleteAfter) = arrive(at: station, now: now) {
            feedInTimeOrder(message, command: command, into: &$0)
        }
        changed = true
        // A command is kept by no journal: checkpointed at once. What readings made (reps, set
        // boundaries) is made again from the bridges' journals after a crash, and what was
        // already published is not sent twice (Publisher.resume): the regular checkpoint is
        // enough (one at every set boundary would be a whole checkpoint of every station, many
        // a second in a busy gym).
        if message.envelope.type == CommandMessage.type { checkpointDue = 0 }
        for output in outputs {
            if case .pattern(let pattern) = output {
                learn(pattern)
            } else {
                try publish(output, athlete: athleteBefore, inputT: inputT, receivedTs: inputT == nil ? nil : received)
            }
        }
        // The answer after what the command made (a set's end before "done"), and after a
        // checkpoint holding the command is on disk (`answerCommands`); without one, at once.
        if let ack {
            if checkpointWriter != nil, replay != nil, isActive {
                heldAcks.append((ack, station, athleteAfter, nil))
            } else {
                try send(ack, station: station, athlete: athleteAfter)
            }
        }
        return true
    }

    /// Moves a stream's position on to `seq`; false when `seq` was processed already.
    private static func moveOn(_ position: inout Int, to seq: Int) -> Bool {
        guard seq > position else { return false }
        position = seq
        return true
    }

    /// A station's bar IMU readings wait, at most this long in reading time, for its laser's
    /// readings of the same time: which of the two is used (`StationDetector.usesIMU`) then
    /// depends on the readings alone, not on which stream's message came first.
    static let imuWaitS = 2.0

    /// What one message makes of a station: fed in reading-time order across its sensors.
    /// The laser's readings go on at once; an IMU message waits until the laser has passed its
    /// last reading, or until the IMU is `imuWaitS` past it (the laser has stopped, or trails
    /// beyond the bound), and is fed then, in arrival order. A station with no laser waits for
    /// nothing. Commands and other sensors go on at once.
    private func feedInTimeOrder(
        _ message: BusMessage, command: CommandMessage?, into slot: inout Station
    ) -> (
        outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?
    ) {
        let sensor = command == nil ? message.sensor : nil
        if command == nil { slot.fedTs = max(slot.fedTs, message.envelope.ts) }
        if sensor == SampleMessage.imuSensor, slot.laserT > -.infinity {
            guard let lastT = message.readingTimes()?.max() ?? (try? message.payload(as: SampleMessage.self))?.readings.latestTime else {
                return feed(message, command: command, into: &slot.detector)
            }
            slot.imuT = max(slot.imuT, lastT)
            if slot.heldIMU.isEmpty, lastT <= slot.laserT { return feed(message, command: command, into: &slot.detector) }
            slot.heldIMU.append((message, lastT))
            let athlete = slot.detector.assignment.athlete
            var result: (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?) =
                ([], nil, nil, athlete, athlete)
            releaseIMU(of: &slot, into: &result)
            return result
        }
        var result = feed(message, command: command, into: &slot.detector)
        if sensor == SampleMessage.distanceSensor, let t = result.inputT {
            slot.laserT = max(slot.laserT, t)
            releaseIMU(of: &slot, into: &result)
        }
        return result
    }

    /// Feeds the held IMU messages the laser has passed (or, with `all`, every one: the
    /// readings have ended), adding what they make to `result`.
    private func releaseIMU(
        of slot: inout Station, all: Bool = false,
        into result: inout (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?)
    ) {
        let passed = max(slot.laserT, slot.imuT - Self.imuWaitS)
        while let first = slot.heldIMU.first, all || first.lastT <= passed {
            slot.heldIMU.removeFirst()
            let made = feed(first.message, command: nil, into: &slot.detector)
            result.outputs += made.outputs
            result.inputT = [result.inputT, made.inputT].compactMap { $0 }.max()
            result.athleteAfter = made.athleteAfter
        }
    }

    /// What one message (a sample, or a command for this detector) makes of a station's
    /// detector: the outputs, the newest reading time fed, the command's answer, and the
    /// athlete at the station before and after (a set ended by athlete.unassign is still the
    /// athlete's before).
    private func feed(
        _ message: BusMessage, command: CommandMessage?, into detector: inout StationDetector
    ) -> (
        outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?
    ) {
        if detector.patternsVersion != patternsVersion {
            detector.patterns = sharedPatterns
            detector.patternsVersion = patternsVersion
        }
        let athleteBefore = detector.assignment.athlete
        var outputs: [DetectorOutput] = []
        var inputT: Double?
        var ack: AckMessage?
        let sensor = message.sensor
        if let command {
            (outputs, ack) = apply(command, ts: message.envelope.ts, to: &detector)
        } else if sensor == SampleMessage.postureSensor {
            // Not the detector's (StationDetector.feed): not decoded into readings.
        } else {
            // A reading time far from when it was sent (a broken clock, a bad
            // replay) would stall the station or worse: such readings are skipped.
            let ts = message.envelope.ts
            let station = message.envelope.station
            func sane(_ t: Double) -> Bool {
                guard abs(t - ts) <= Self.maxReadingSkewS else {
                    badTimes += 1
                    if badTimes == 1 || badTimes % 1000 == 0 {
                        logger.warning(
                            "readings with implausible times skipped",
                            metadata: ["station": "\(station)", "t": "\(t)", "ts": "\(ts)", "count": "\(badTimes)"])
                    }
                    return false
                }
                return true
            }
            if sensor == SampleMessage.imuSensor, let times = message.readingTimes(),
                !times.contains(where: detector.usesIMU(at:))
            {
                // The laser speaks at this station: of the IMU's readings only their times count.
                outputs = detector.feedUnusedIMU(times: times.filter(sane))
                inputT = times.max()
            } else {
                do {
                    let sample = try message.payload(as: SampleMessage.self)
                    outputs = detector.feed(sample.readings, usable: sane)
                    inputT = sample.readings.latestTime
                } catch {
                    // Counted and logged as the subscriber counts what it refuses on receipt (not a line per message).
                    subscriber.countMalformed(error, topic: message.topic)
                }
            }
        }
        return (outputs, inputT, ack, athleteBefore, detector.assignment.athlete)
    }

    /// Notes a message's arrival at `station` (its detector made if new) and changes its detector
    /// where it lies, in one look-up.
    private func arrive<T>(at station: String, now: Double, _ change: (inout Station) -> T) -> T {
        func arrived(_ slot: inout Station) -> T {
            slot.arrived = now
            slot.ended = false
            if !slot.asked {
                slot.asked = true
                stationsToAsk.append(station)
            }
            return change(&slot)
        }
        return arrived(&stations[station, default: Station(detector: StationDetector(station: station, settings: options.settings), arrived: now)])
    }

    /// Makes the library's patterns the ones every station is given: each station takes them
    /// when it is next fed (`process`), not all at once (a thousand stations end their sets
    /// within seconds, and each set of 3 reps or more is a pattern learned: giving each to
    /// every station would be a million updates a wave).
    private func libraryChanged() {
        sharedPatterns = library.patterns.values.flatMap { $0 }
        patternsVersion += 1
    }

    /// Asks the recorder for the patterns it holds (once, at start, when this
    /// detector has none). The answer is taken by `collectReplies` whenever it
    /// comes: the loop never waits for it.
    private func requestPatterns() {
        guard let recorder else { return }
        do {
            patternsRequest = (try recorder.request(.patternList, ExerciseFilterArgs()), clock.monotonicSeconds() + options.recorderTimeoutS)
        } catch {
            logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"])
        }
    }

    /// Asks the recorder for a station's latest assignment, once in this process's life, at start
    /// for a restored station, else when its first message comes. The answer is taken by
    /// `collectReplies` whenever it comes (the loop never waits): readings that come before it
    /// are detected under the assignment the station holds, as they would be without a recorder.
    private func requestAssignment(of station: String) {
        guard let recorder else { return }
        do {
            let id = try recorder.request(.assignmentGet, StationArgs(station: station))
            assignmentRequests[id] = (station, clock.monotonicSeconds() + options.recorderTimeoutS)
        } catch {
            assignmentsNotAnswered(reason: "\(error)")
        }
    }

    /// Says once that assignments are not checked against the recorder's.
    private func assignmentsNotAnswered(reason: String) {
        guard !assignmentsUnanswered else { return }
        assignmentsUnanswered = true
        logger.warning(
            "no assignment from the session-recorder; stations keep the assignment they hold (a command published while this detector was down is not caught up)",
            metadata: ["reason": "\(reason)"])
    }

    /// Takes the recorder's latest assignment of `station`: when this detector missed it (newer
    /// than the last command it applied, and another command: `StationDetector.missedCommand`),
    /// it is applied where the command would have been, before the station's first sample
    /// message sent at or after it. At once when the readings fed have passed it; otherwise (a
    /// restored station whose readings since the checkpoint are still to come from the bridges'
    /// journals) when such a message comes, so readings sent before it keep the assignment
    /// they were lifted under.
    private func caughtUp(_ stored: AssignmentRecord?, station: String) throws {
        guard let stored, isActive || isHandingOver, let slot = stations[station], slot.detector.missedCommand(stored) != nil else { return }
        if slot.missed == nil { missedWaiting += 1 }
        stations[station]?.missed = stored
        if slot.fedTs >= stored.ts { try applyMissed(at: station) }
    }

    /// Applies the station's missed assignment (`caughtUp`), as the command would have been
    /// applied; checkpointed at once, as a command is.
    private func applyMissed(at station: String) throws {
        guard let stored = stations[station]?.missed, let athleteBefore = stations[station].map({ $0.detector.assignment.athlete }) else { return }
        stations[station]?.missed = nil
        missedWaiting -= 1
        let result: (command: CommandMessage, outputs: [DetectorOutput])?
        do { result = try stations[station]?.detector.catchUp(on: stored) } catch {
            logger.warning(
                "stored assignment not applied", metadata: ["station": "\(station)", "correlation_id": "\(stored.cmdId ?? "")", "error": "\(error)"])
            return
        }
        // A command applied since (newer) has made it moot.
        guard let (command, outputs) = result else { return }
        changed = true
        checkpointDue = 0
        logger.notice(
            "assignment caught up from the recorder",
            metadata: [
                "station": "\(station)", "correlation_id": "\(command.id)", "command": "\(stored.command ?? "")",
                "athlete": "\(stations[station]?.detector.assignment.athlete ?? "")", "ts": "\(stored.ts)",
            ])
        for output in outputs {
            if case .pattern(let pattern) = output { learn(pattern) } else { try publish(output, athlete: athleteBefore) }
        }
    }

    /// Takes whatever the recorder has answered (never waits); forgets a
    /// question unanswered for `recorderTimeoutS`.
    private func collectReplies() throws {
        guard let recorder, patternsRequest != nil || !assignmentRequests.isEmpty else { return }
        // Assignments are applied once the replies are read: what they make is published, and
        // a failure to publish is the loop's, not the recorder's.
        var assignments: [(station: String, stored: AssignmentRecord?)] = []
        do {
            while let reply = try recorder.nextReply() {
                if let asked = assignmentRequests.removeValue(forKey: reply.id) {
                    do {
                        assignments.append((asked.station, try QueryClient.decode(reply.data, of: .assignmentGet, as: AssignmentRecord?.self)))
                    } catch {
                        assignmentsNotAnswered(reason: "\(error)")
                    }
                    continue
                }
                guard let request = patternsRequest, reply.id == request.id else { continue }  // a pattern.put's confirmation
                patternsRequest = nil
                do {
                    let stored = try QueryClient.decode(reply.data, of: .patternList, as: [StoredPattern].self)
                    var added = 0
                    for item in stored {
                        if let pattern = try? JSONDecoder().decode(RepPattern.self, from: Data(item.json.utf8)) {
                            library.add(pattern)
                            added += 1
                        }
                    }
                    if added > 0 { libraryChanged() }
                    logger.info("patterns fetched from the session-recorder", metadata: ["patterns": "\(stored.count)"])
                } catch {
                    logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"])
                }
            }
        } catch {
            if patternsRequest != nil { logger.info("no patterns from the session-recorder", metadata: ["reason": "\(error)"]) }
            if !assignmentRequests.isEmpty { assignmentsNotAnswered(reason: "\(error)") }
            (patternsRequest, assignmentRequests) = (nil, [:])
        }
        for (station, stored) in assignments { try caughtUp(stored, station: station) }
        let now = clock.monotonicSeconds()
        if let request = patternsRequest, now > request.deadline {
            patternsRequest = nil
            logger.info("no patterns from the session-recorder", metadata: ["reason": "no answer within \(options.recorderTimeoutS) s; detecting without them"])
        }
        let expired = assignmentRequests.filter { now > $0.value.deadline }
        if !expired.isEmpty {
            for id in expired.keys { assignmentRequests[id] = nil }
            assignmentsNotAnswered(reason: "no answer within \(options.recorderTimeoutS) s")
        }
    }

    /// Stores a learned pattern and gives every station the new library.
    private func learn(_ pattern: RepPattern) {
        library.add(pattern)
        if let recorder, let json = try? encoder.encode(pattern) {
            // Not waited for: the detector's loop never blocks on the recorder.
            recorder.post(
                .patternPut,
                StoredPattern(
                    exercise: pattern.exercise, name: "\(pattern.exercise)-\(Int64(pattern.recordedT * 1e6))",
                    ts: pattern.recordedT, json: String(decoding: json, as: UTF8.self)))
        }
        libraryChanged()
        // Written with the next housekeeping, at most once a second (a thousand stations end
        // dozens of sets a second: the whole file each time was a tenth of the detector's work).
        patternsUnsaved = options.patternsPath != nil
        logger.info("pattern learned", metadata: ["exercise": "\(pattern.exercise)", "reps": "\(pattern.reps)"])
    }

    /// Hands the library to the patterns writer when a pattern was learned
    /// (the file is written on its thread; a failed write is logged and retried
    /// with the next housekeeping).
    private func savePatterns() {
        if let failure = patternsWriter.takeFailure() {
            logger.error("patterns not saved; retrying", metadata: ["path": "\(options.patternsPath ?? "")", "error": "\(failure)"])
            patternsUnsaved = options.patternsPath != nil
        }
        guard patternsUnsaved, let path = options.patternsPath else { return }
        patternsUnsaved = false
        let library = self.library
        patternsWriter.submit { try library.save(path: path) }
    }

    /// Waits until the patterns handed over are written: before this process ends (and in tests).
    func finishPatterns() {
        patternsWriter.wait()
        if let failure = patternsWriter.takeFailure() {
            logger.error("patterns not saved", metadata: ["path": "\(options.patternsPath ?? "")", "error": "\(failure)"])
        }
    }

    /// Applies a command; the outputs it made and the answer to it (nil for a command the
    /// detector does not act on).
    private func apply(_ command: CommandMessage, ts: Double, to detector: inout StationDetector) -> (outputs: [DetectorOutput], ack: AckMessage?) {
        guard Command.isActedOn(command.command, by: "rep-detector") else { return ([], nil) }
        func answer(refusal: String?, detail: String? = nil) -> AckMessage {
            if let refusal {
                logger.warning(
                    "command not carried out",
                    metadata: [
                        "station": "\(detector.station)", "command": "\(command.command)",
                        "correlation_id": "\(command.id)", "reason": "\(refusal)",
                    ])
            }
            return AckMessage(answering: command, program: "rep-detector", refusal: refusal, detail: detail)
        }
        let outputs: [DetectorOutput]
        do { outputs = try detector.apply(command, ts: ts) } catch { return ([], answer(refusal: "\(command.command): \(error)")) }
        switch command.name {
        case .athleteAssign:
            let assignment = detector.assignment
            logger.info(
                "station assigned",
                metadata: [
                    "station": "\(detector.station)", "athlete": "\(assignment.athlete ?? "")", "exercise": "\(assignment.exercise)",
                    "correlation_id": "\(command.id)",
                ])
            let load = assignment.loadKg.map { String(format: " at %g kg", $0) } ?? ""
            return (outputs, answer(refusal: nil, detail: "\(assignment.exercise)\(load)\(assignment.athlete.map { " for \($0)" } ?? "")"))
        case .athleteUnassign:
            logger.info("station unassigned", metadata: ["station": "\(detector.station)", "correlation_id": "\(command.id)"])
            let ended = outputs.contains { if case .set = $0 { true } else { false } }
            return (outputs, answer(refusal: nil, detail: ended ? "the set in progress ended" : "nobody at \(detector.station)"))
        case .setEnd:
            let ended = outputs.contains { if case .set = $0 { true } else { false } }
            return (outputs, answer(refusal: ended ? nil : "no set in progress at \(detector.station)"))
        default:
            return (outputs, answer(refusal: nil))
        }
    }

    /// Publishes what a station's detector made; `inputT` is the last reading time of the sample message it came
    /// from, and `receivedTs` when that message was taken from the input.
    private func publish(_ output: DetectorOutput, athlete: String?, inputT: Double? = nil, receivedTs: Double? = nil) throws {
        switch output {
        case .rep(let rep):
            let m = rep.measurement
            var message = RepMessage(
                setId: rep.setId, repId: rep.repId, index: rep.index, meanVelocityMps: m.meanVelocityMps,
                peakVelocityMps: m.peakVelocityMps, meanPropulsiveVelocityMps: m.meanPropulsiveVelocityMps, romMm: m.romMm,
                concentricS: m.concentricS, timeToPeakS: m.timeToPeakS, velocityLossPct: rep.velocityLossPct, tEnd: rep.tEnd,
                detector: instance, concentricStartT: m.concentricStartT, concentricEndT: m.concentricEndT,
                exercise: rep.exercise, loadKg: rep.loadKg, zone: rep.zone, meanPowerW: m.meanPowerW, sensor: rep.sensor)
            message.tInput = inputT.map { max($0, rep.tEnd) }
            message.receivedTs = receivedTs
            if let phases = rep.phases {
                (message.eccentricS, message.eccentricMeanMps) = (phases.eccentricS, phases.eccentricMeanMps)
                (message.pauseBottomS, message.pauseTopS) = (phases.pauseBottomS, phases.pauseTopS)
            }
            (message.tempo, message.tempoMet) = (rep.tempo?.text, rep.tempoVerdict?.met)
            message.tempoMissed = rep.tempoVerdict.map { $0.missed.map(\.rawValue) }
            // Late when its readings came late (a journal fetch after an outage, a restart's catch-up,
            // a rise judged only when the station fell silent): marked so, never passed off as live.
            message.markLateness(publishedAt: clock.wallSeconds())
            try send(message, station: rep.station, athlete: athlete)
        case .rejected(let rejected):
            let m = rejected.measurement
            try send(
                RejectedMessage(
                    reason: rejected.reason, detail: rejected.detail, romMm: m.romMm, concentricS: m.concentricS,
                    meanVelocityMps: m.meanVelocityMps, tEnd: rejected.tEnd, detector: instance, sensor: rejected.sensor),
                station: rejected.station, athlete: athlete)
        case .set(let event):
            try send(
                SetMessage(
                    setId: event.setId, event: event.kind == .start ? .start : .end, reps: event.kind == .end ? event.reps : nil,
                    reason: event.reason.flatMap { SetMessage.Reason(rawValue: $0.rawValue) },
                    bestMeanVelocityMps: event.bestMeanVelocityMps, velocityLossPct: event.velocityLossPct,
                    exercise: event.exercise, loadKg: event.loadKg),
                station: event.station, athlete: event.athlete)
        case .pattern:
            return  // stored by the runtime, not published
        case .profile(let profile):
            try send(
                ProfileMessage(
                    exercise: profile.exercise, loadsKg: profile.points.map(\.loadKg), meanVelocitiesMps: profile.points.map(\.meanVelocityMps),
                    interceptMps: profile.interceptMps, slopeMpsPerKg: profile.slopeMpsPerKg, r2: profile.r2, mvtMps: profile.mvtMps,
                    e1rmKg: profile.e1rmKg), station: profile.station, athlete: profile.athlete)
        }
    }

    /// Ends the readings of stations silent for `idleTimeoutS` of wall time (their rises
    /// judged, their sets ended), and forgets input streams that ended long ago.
    private func closeSilentStations() throws {
        guard case .active = mode else { return }
        let now = clock.monotonicSeconds()
        if now >= nextStreamLook {
            nextStreamLook = now + 60
            for src in stillStreams.stale(processed, now: now, afterS: Self.forgetStreamAfterS) {
                positions[src] = nil
                input.forget(src)
            }
        }
        let silent = stations.compactMap { station, slot -> (String, Double)? in
            guard let arrived = slot.arrived, now - arrived >= options.settings.idleTimeoutS + Self.silenceMarginS, !slot.ended else { return nil }
            // Its bridge unheard too: cut off, not done; waited for a while longer.
            if let heard = bridgeHeard[station], now - heard > Self.bridgeGapS, now - arrived < Self.unheardBridgeWaitS { return nil }
            return (station, arrived)
        }
        for (station, arrived) in silent {
            // A station whose readings are being fetched is not silent.
            guard !input.isRecovering(topic: SampleMessage.topic(station: station)), var slot = stations[station] else { continue }
            // Its readings have ended, as a recording's do at its end (`vbt eval`): the IMU
            // readings held for the laser are fed, and a rise in progress, held or waiting
            // for its lowering is judged where it stands, so every movement is accounted for.
            var released: (outputs: [DetectorOutput], inputT: Double?, ack: AckMessage?, athleteBefore: String?, athleteAfter: String?) =
                ([], nil, nil, nil, nil)
            releaseIMU(of: &slot, all: true, into: &released)
            var outputs = released.outputs
            outputs += slot.detector.finish(at: slot.detector.lastReadingT)
            outputs += slot.detector.closeIdleSet(at: slot.detector.lastReadingT + (now - arrived))
            slot.ended = true
            let detector = slot.detector
            stations[station] = slot
            // Ended by the wall clock, which no journal replays: checkpointed at once.
            if !outputs.isEmpty { checkpointDue = 0 }
            for output in outputs {
                if case .pattern(let pattern) = output { learn(pattern) } else { try publish(output, athlete: detector.assignment.athlete) }
            }
        }
    }

    // MARK: Hand-over

    /// The old side: once every stream has passed the new detector's first point, hand over.
    private func finishHandoverIfReady() throws {
        guard case .handingOver(let to, let targets, let deadline) = mode else { return }
        let ready = targets.allSatisfy { src, first in position(of: src) >= first - 1 }
        guard ready || clock.monotonicSeconds() >= deadline else { return }
        if !ready { logger.warning("handing over before reaching every stream's point", metadata: ["to": "\(to)"]) }
        // The successor asks the recorder for no handed-over station: what this one caught up
        // on and has not applied yet (no reading since) is applied now, and goes with the state.
        if missedWaiting > 0 {
            for station in stations.keys.sorted() where stations[station]?.missed != nil { try applyMissed(at: station) }
        }
        // Encode everything first: a state that cannot go on the wire aborts the
        // hand-over and this detector keeps running (the new one says so after its timeout).
        var messages: [(HandoffMessage, String)] = []
        do {
            for (station, slot) in stations.sorted(by: { $0.key < $1.key }) {
                let state = String(decoding: try encoder.encode(slot.detector), as: UTF8.self)
                messages.append((HandoffMessage(from: instance, to: to, state: state, done: false, positions: [:]), station))
            }
            messages.append((HandoffMessage(from: instance, to: to, state: nil, done: true, positions: processed), "detector"))
            var stamper = EnvelopeStamper(program: "check")
            for (message, station) in messages { _ = try stamper.encode(message, station: station, ts: 1) }
        } catch {
            logger.error("hand-over aborted: the state cannot be sent; still running", metadata: ["to": "\(to)", "error": "\(error)"])
            mode = .active
            return
        }
        for (message, station) in messages { try publisher.publish(message, station: station) }
        logger.info("handed over", metadata: ["to": "\(to)", "stations": "\(stations.count)"])
        finishCheckpoints()
        mode = .finished
    }

    /// The new side: ask once some input is buffered; give up waiting after the timeout.
    private func progressTakeover() throws {
        guard case .takingOver(let buffer, let requested, let deadline, let states) = mode else { return }
        if !requested {
            guard subscriber.stats.busHeartbeats > 0, !buffer.isEmpty || clock.monotonicSeconds() > 3 + (lastStart ?? clock.monotonicSeconds()) else {
                if lastStart == nil { lastStart = clock.monotonicSeconds() }
                return
            }
            guard try publisher.waitForSubscriber(topic: TakeoverMessage.topic(station: "detector"), timeoutS: 0.05) else { return }
            var first: [String: Int] = [:]
            for message in buffer where first[message.envelope.src] == nil { first[message.envelope.src] = Int(message.envelope.seq) }
            try publisher.publish(TakeoverMessage(instance: instance, stations: options.stationsGlob, firstSeq: first), station: "detector")
            logger.info("takeover requested", metadata: ["streams": "\(first.count)"])
            mode = .takingOver(buffer: buffer, requested: true, deadline: clock.monotonicSeconds() + options.takeoverTimeoutS, states: states)
            return
        }
        if clock.monotonicSeconds() >= deadline {
            logger.warning("no running detector answered the takeover; starting fresh")
            try completeTakeover(states: [:], positions: [:], from: nil)
        }
    }

    private var lastStart: Double?

    private func completeTakeover(states: [String: StationDetector], positions handed: [String: Int], from: String?) throws {
        guard case .takingOver(let buffer, _, _, _) = mode else { return }
        // The new process's settings apply from now on (a new --idle-timeout, say).
        stations = states.mapValues { detector in
            var restored = detector
            restored.settings = options.settings
            // Its assignment came with it, up to the predecessor's last command: not asked again.
            return Station(detector: restored, arrived: nil, asked: true)
        }
        positions = handed
        input = InOrderInput(
            transport: transport, logger: logger, settings: options.recovery, wants: wants, positions: handed.mapValues { UInt64($0) },
            producers: input.producers, endpoints: input.endpoints)
        mode = .active
        journalTried = true
        try startJournal(lockWaitS: 5)
        // The old detector saved every pattern it learned before handing over.
        if let path = options.patternsPath, let saved = try? PatternLibrary.load(path: path) { library = saved }
        libraryChanged()
        var replayed = 0
        for message in buffer {
            if message.envelope.type == SampleMessage.type {
                for ready in input.accept(message) where try process(ready, inOrder: true) { replayed += 1 }
            } else if try process(message) {
                replayed += 1
            }
        }
        logger.info(
            "took over", metadata: ["from": "\(from ?? "nobody")", "stations": "\(states.count)", "buffered": "\(buffer.count)", "processed": "\(replayed)"])
    }
}
