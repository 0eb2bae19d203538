import Foundation
import Logging
import VBTBus
import VBTWire

/// Where alerts go besides the bus (the webhook). `deliver` must never block:
/// the bus loop calls it.
public protocol AlertSink: Sendable {
    /// Hands one alert over; returns at once (a full queue drops and counts it).
    func deliver(_ alert: AlertMessage, ts: Double)
    /// What became of the alerts handed over so far.
    var counters: SinkCounters { get }
}

/// The notifier process's loop: one thread owns both sockets; the clock is injected.
///
/// Nothing missed: sets, reps, posture and sensor status are taken in each
/// stream's order, holes fetched from their producers' journals
/// (`InOrderInput`); the state file keeps where each stream stood, so a
/// restarted notifier fetches what was published while it was down and acts
/// on it (a set that ended meanwhile still starts its rest and raises its
/// alerts; an alert already open is not raised twice).
public final class NotifierRuntime: BusRole {
    package let subscriber: Subscriber
    package private(set) var publisher: Publisher
    package let logger: Logger
    private let statePath: String?
    private let sink: (any AlertSink)?
    private let clock: any BusClock
    private let transport: any BusTransport
    package private(set) var replay: ReplayServer?
    private var notifier: Notifier
    private var heartbeat = HeartbeatSchedule(role: "notifier", name: "notifier")
    package private(set) var input: InOrderInput
    /// Asks the session-recorder for today's readiness, for load advice.
    private let readiness: ReadinessAsker
    /// Readiness questions waiting for an answer or their next try (for tests).
    var readinessWaiting: Int { readiness.waiting }
    /// The restored state's output positions, continued once the journal opens.
    private let restoredOutput: OutputPositions?
    /// When the input positions are next saved, if they moved (monotonic).
    private var nextPositionsSave: Double
    /// How often moved input positions are saved.
    public var positionsSaveIntervalS = 2.0
    /// The least time between two saves of a changed state. The file holds the state and the
    /// input positions it stands for, written together: a notifier killed before its next save
    /// restarts from the last one and fetches what came after it from the producers' journals,
    /// so saving at most this often loses nothing, and a gym's hundreds of set ends a second do
    /// not each rewrite the whole file.
    public var stateSaveIntervalS = 0.5
    /// At most this share of the loop's time goes to saving the state: a big state (a thousand
    /// stations' timers, the positions of every input stream) is saved less often than
    /// `stateSaveIntervalS`, in proportion to how long its last save took (Foundation's encoder
    /// over the whole state was half of a notifier's time at 500 stations).
    static let saveShare = 0.01
    /// How long the last save took, s.
    private var lastSaveDurationS = 0.0
    /// When the state was last written (monotonic), and how many times it has been.
    private var lastSave = -Double.infinity
    public private(set) var stateWrites = 0
    /// What recovery fetched, and what it could not.
    public var recovery: InOrderInput.Counters { input.counters }
    /// Whether some input stream waits for messages being fetched.
    public var isCatchingUp: Bool { input.isRecovering }
    /// The inputs taken in order: what producers journal.
    static let ordered = MessageTypes.prefixes(SetMessage.self, RepMessage.self, PostureMessage.self, StatusMessage.self)

    /// Connects to the bus and restores the state file (timers resume with the right remaining
    /// time); asks the session-recorder at `config.queryEndpoint` for readiness.
    public convenience init(
        context: ZMQContext, config: BusConfig, settings: NotifierSettings, statePath: String?, sink: (any AlertSink)?,
        logger: Logger
    ) throws(ZMQError) {
        try self.init(
            transport: ZMQTransport(context: context, config: config), settings: settings, statePath: statePath, sink: sink,
            queryEndpoint: config.queryEndpoint, logger: logger)
    }

    /// Connects on `transport`, whose clock drives every timer, and restores the state file;
    /// asks the session-recorder at `queryEndpoint` for readiness (nil: never asks).
    public init(
        transport: any BusTransport, settings: NotifierSettings, statePath: String?, sink: (any AlertSink)?, queryEndpoint: String? = nil,
        logger: Logger
    ) throws(ZMQError) {
        subscriber = try Subscriber(
            transport: transport,
            prefixes: MessageTypes.prefixes(
                CommandMessage.self, SetMessage.self, RepMessage.self, PostureMessage.self, StatusMessage.self, HeartbeatMessage.self,
                ProfileMessage.self), logger: logger)
        // Its timers count in seconds: woken a few hundred times a second, not for every message (`Subscriber.gatherS`).
        subscriber.gatherS = 0.003
        heartbeat.subscribes = subscriber.subscribedPrefixes
        publisher = try Publisher(transport: transport, program: "notifier")
        self.statePath = statePath
        self.sink = sink
        self.logger = logger
        clock = transport.clock
        self.transport = transport
        var restored = NotifierState()
        if let statePath {
            do { restored = try NotifierState.load(path: statePath) } catch {
                logger.warning(
                    "notifier state unreadable; starting empty (move the file away to keep it)",
                    metadata: ["path": "\(statePath)", "error": "\(error)"])
            }
        }
        restoredOutput = restored.output
        notifier = Notifier(settings: settings, state: restored, now: clock.wallSeconds())
        input = InOrderInput(transport: transport, logger: logger, wants: { topic in Self.ordered.contains { topic.hasPrefix($0) } }, resuming: restored.input)
        readiness = ReadinessAsker(transport: transport, endpoint: queryEndpoint, logger: logger)
        nextPositionsSave = clock.monotonicSeconds() + positionsSaveIntervalS
        let timers = restored.stations.values.filter { $0.timer != nil }.count
        logger.info(
            "notifier state restored",
            metadata: [
                "stations": "\(restored.stations.count)", "timers": "\(timers)", "open_alerts": "\(restored.alerts.open.count)",
            ])
    }

    /// Runs until `stop` is set; saves the state on the way out.
    public func run(stop: StopFlag) throws {
        logger.info("notifier running")
        defer { save() }
        while !stop.isSet { try step() }
    }

    /// One pass of the loop: the heartbeat, at most one input message
    /// (waiting up to `timeoutMs` for it on sockets), the timers, and the
    /// state file when it changed.
    public func step(timeoutMs: Int32 = 100) throws {
        try heartbeat.tick(self) { $0.webhook = sink?.counters }
        try replay?.serve()
        if let message = try subscriber.next(timeoutMs: timeoutMs), !message.envelope.src.hasPrefix(publisher.stamper.instance + "/") {
            if message.envelope.type == HeartbeatMessage.type { input.note(heartbeat: message) }
            if Self.ordered.contains(where: { message.topic.hasPrefix($0) }) {
                for ready in input.accept(message) { try emit(notifier.handle(ready, now: clock.wallSeconds())) }
            } else {
                try emit(notifier.handle(message, now: clock.wallSeconds()))
            }
        }
        for ready in input.poll() { try emit(notifier.handle(ready, now: clock.wallSeconds())) }
        for question in notifier.takeReadinessQuestions() { readiness.ask(question) }
        for answer in readiness.poll() { try emit(notifier.noteReadiness(answer.readiness, station: answer.station, now: clock.wallSeconds())) }
        try emit(notifier.tick(now: clock.wallSeconds()))
        let now = clock.monotonicSeconds()
        let spacing = max(stateSaveIntervalS, lastSaveDurationS / Self.saveShare)
        if (notifier.needsSave && now - lastSave >= spacing) || (now >= nextPositionsSave && input.positions != savedPositions) { save() }
    }

    /// The input positions the state file holds.
    private var savedPositions: [String: UInt64]?

    /// Journals what is published (timers, alerts, workouts, commands) into
    /// `settings.directory` and answers replay requests on `endpoint`.
    /// A state saved with output positions continues that process's streams:
    /// what it sent after the save (its journal says) is not sent again when
    /// this process makes it anew. Call before the first `step`.
    public func startJournal(_ settings: JournalSettings, endpoint: String) throws {
        if let output = restoredOutput {
            publisher = try Publisher(transport: transport, program: "notifier", instance: output.instance)
        }
        replay = try ProducerJournal(settings: settings, endpoint: endpoint, publisher: publisher, transport: transport).replay
        if let output = restoredOutput {
            try publisher.resume(afterSaved: output.positions, identity: Self.identity)
            logger.notice("continuing the streams of the notifier before the restart", metadata: ["instance": "\(output.instance)"])
        }
        logger.info("journalling", metadata: ["folder": "\(settings.directory)", "replay_endpoint": "\(endpoint)"])
    }

    /// What makes two outputs the same event: an alert's id and state, a
    /// command's name, target and arguments (its id is new each time), an
    /// answer's command id. Timer
    /// ticks and workout snapshots have none: sent again, they only refresh a display.
    static func identity(topic: [UInt8], body: [UInt8]) -> String? {
        guard let message = try? decodeMessage(topic: topic, body: body) else { return nil }
        switch message.envelope.type {
        case AlertMessage.type:
            guard let alert = try? message.payload(as: AlertMessage.self) else { return nil }
            return "alert|\(alert.alertId)|\(alert.state.rawValue)"
        case CommandMessage.type:
            guard let command = try? message.payload(as: CommandMessage.self) else { return nil }
            return "cmd|\(command.command)|\(command.target)|\(command.args.fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })"
        case AckMessage.type:
            guard let ack = try? message.payload(as: AckMessage.self) else { return nil }
            return "ack|\(ack.cmdId)|\(ack.state.rawValue)"
        default:
            return nil
        }
    }

    /// Saves the state now (what `run` does on the way out).
    public func saveState() { save() }

    private func save() {
        guard let statePath else { notifier.markSaved(); return }
        lastSave = clock.monotonicSeconds()
        defer {
            // On the runtime's clock (a test's manual clock: no time passes).
            lastSaveDurationS = clock.monotonicSeconds() - lastSave
            nextPositionsSave = lastSave + max(positionsSaveIntervalS, lastSaveDurationS / Self.saveShare)
        }
        do {
            var state = notifier.state
            state.input = input.snapshot
            state.output = replay == nil ? nil : OutputPositions(publisher)
            try state.save(path: statePath)
            stateWrites += 1
            notifier.markSaved()
            savedPositions = state.input?.positions
        } catch {
            logger.error("notifier state not saved; check the folder is writable", metadata: ["path": "\(statePath)", "error": "\(error)"])
        }
    }

    private func emit(_ outputs: [NotifierOutput]) throws {
        for output in outputs {
            switch output {
            case .timer(let station, let athlete, let timer):
                if timer.state != .running && timer.state != .paused || timer.remainingS == timer.durationS {
                    logger.info(
                        "rest timer",
                        metadata: [
                            "station": "\(station)", "timer_id": "\(timer.timerId)", "state": "\(timer.state.rawValue)",
                            "remaining_s": "\(timer.remainingS)",
                        ])
                }
                try send(timer, station: station, athlete: athlete)
            case .alert(let alert):
                logger.info(
                    "alert",
                    metadata: [
                        "station": "\(alert.station)", "alert_id": "\(alert.alertId)", "state": "\(alert.state.rawValue)",
                        "severity": "\(alert.severity.rawValue)", "message": "\(alert.message)",
                    ])
                let ts = clock.wallSeconds()
                try send(alert, station: alert.station, athlete: alert.athlete, ts: ts)
                sink?.deliver(alert, ts: ts)
            case .workout(let station, let athlete, let workout):
                if workout.event != "snapshot" {
                    logger.info(
                        "workout",
                        metadata: [
                            "station": "\(station)", "event": "\(workout.event)", "state": "\(workout.state.rawValue)",
                            "exercise": "\(workout.exercise ?? "")", "set": "\(workout.set)",
                        ])
                }
                try send(workout, station: station, athlete: athlete)
            case .command(let station, let athlete, let command):
                logger.info(
                    "plan moves on; assigning the next exercise",
                    metadata: [
                        "station": "\(station)", "correlation_id": "\(command.id)", "args": "\(command.args.fields.map { "\($0.key)=\($0.value)" })",
                    ])
                try send(command, station: station, athlete: athlete)
            case .rejected(let station, let command, let id, let reason):
                logger.warning(
                    "command not carried out", metadata: ["station": "\(station)", "command": "\(command)", "correlation_id": "\(id)", "reason": "\(reason)"])
            case .ack(let station, let athlete, let ack):
                try send(ack, station: station, athlete: athlete)
            }
        }
    }
}
