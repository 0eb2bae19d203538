import Foundation
import Logging
import VBTBus
import VBTConsole
import VBTWire

/// The console's bus side, on its own thread (ZeroMQ sockets stay on the thread that made
/// them): takes in what the board shows, publishes the commands the pages give and its
/// heartbeat. A pass takes every message waiting (up to a batch) before it tells the
/// browsers, so a burst is one update, not one per message.
struct ConsoleBusLoop {
    let live: LiveBoard
    let metrics: GymMetrics
    let outbox: CommandOutbox
    let logger: Logger
    private let subscriber: Subscriber
    private let publisher: Publisher
    private let endpoint: String
    /// Seconds without any message (the bus alone sends its heartbeat every second) before the link shows as down.
    private let linkTimeoutS = 3.0

    init(context: ZMQContext, config: BusConfig, live: LiveBoard, metrics: GymMetrics, outbox: CommandOutbox, logger: Logger) throws {
        (self.live, self.metrics, self.outbox, self.logger, endpoint) = (live, metrics, outbox, logger, config.subEndpoint)
        subscriber = try Subscriber(
            context: context, config: config,
            prefixes: MessageTypes.prefixes(
                RepMessage.self, SetMessage.self, RejectedMessage.self, PostureMessage.self, CalibrationMessage.self, TimerMessage.self, WorkoutMessage.self,
                StatusMessage.self, AlertMessage.self, CommandMessage.self, AckMessage.self, HeartbeatMessage.self),
            logger: logger)
        publisher = try Publisher(context: context, config: config, program: "coach-console")
    }

    func run(stop: StopFlag) throws {
        var heartbeat = HeartbeatSchedule(role: "coach-console", name: "coach-console")
        heartbeat.subscribes = subscriber.subscribedPrefixes
        var lastMessageAt = -Double.infinity
        var nextTick = 0.0
        var batch: [BusMessage] = []
        batch.reserveCapacity(512)
        while !stop.isSet {
            batch.removeAll(keepingCapacity: true)
            if let first = try subscriber.next(timeoutMs: 50) {
                batch.append(first)
                while batch.count < 512, let more = try subscriber.next(timeoutMs: 0) { batch.append(more) }
            }
            let now = monotonicSeconds()
            if !batch.isEmpty { lastMessageAt = now }
            let tick = now >= nextTick
            if tick { nextTick = now + 0.25 }
            for message in batch { metrics.apply(message, now: now) }
            if tick { metrics.refresh(board: live.snapshot, browsers: live.watcherCount, now: now) }
            if !batch.isEmpty || tick {
                let totals = subscriber.stats.totals
                live.update { board, bus in
                    for message in batch { board.apply(message, now: now) }
                    if tick { board.tick(now: now) }
                    bus.connected = now - lastMessageAt < linkTimeoutS
                    bus.messages = totals.received
                    bus.gaps = totals.gaps
                    bus.malformed = totals.malformed + board.malformed
                }
            }
            for command in outbox.take() { send(command) }
            try heartbeat.tick(publisher, inputs: subscriber.stats.totals)
        }
    }

    private func send(_ command: ConsoleCommandRequest) {
        do {
            try publisher.publish(
                CommandMessage(id: command.id, command: command.command, target: command.target, args: command.args), station: command.station,
                athlete: command.athlete)
            logger.info(
                "command sent",
                metadata: ["id": "\(command.id)", "command": "\(command.command)", "station": "\(command.station)", "user": "\(command.user)"])
        } catch {
            logger.error("command not sent", metadata: ["id": "\(command.id)", "command": "\(command.command)", "error": "\(error)"])
        }
    }
}
