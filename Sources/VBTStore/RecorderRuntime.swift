import Foundation
import VBTQuery
import Logging
import VBTBus
import VBTWire

/// How the recorder paces its writes.
public struct RecorderSettings: Sendable, Equatable {
    /// Longest a received message waits before its batch is written, s.
    public var flushIntervalS = 0.1
    /// A batch is written at once when this many messages wait.
    public var flushAtMessages = 5_000
    /// First retry after a failed write, s; doubles up to `maxRetryS`.
    public var firstRetryS = 0.25
    /// Longest wait between retries of a failed write, s.
    public var maxRetryS = 5.0
    /// How often old raw samples are pruned, s.
    public var pruneIntervalS = 600.0
    /// Creates the defaults.
    public init() {}
}

/// The session-recorder's loop: one thread owns the bus subscriber, the
/// query endpoint (a ROUTER socket, so a slow or vanished client never blocks
/// it) and the heartbeat publisher, and writes to SQLite in batches.
public final class RecorderRuntime {
    private let subscriber: Subscriber
    private let publisher: Publisher
    private let router: ZMQSocket
    private let ingestor: Ingestor
    private var service: QueryService
    private let logger: Logger
    private let settings: RecorderSettings
    private var heartbeat = HeartbeatSchedule(role: "session-recorder", name: "session-recorder")
    private var nextFlush = 0.0
    private var retryDelay: Double
    private var failure: StoreError?
    private var nextPrune = 0.0

    /// Connects to the bus and binds the query endpoint.
    public init(context: ZMQContext, config: BusConfig, store: TrainingStore, settings: RecorderSettings, logger: Logger) throws(ZMQError) {
        subscriber = try Subscriber(context: context, config: config, prefixes: [""], logger: logger)
        publisher = try Publisher(context: context, config: config, program: "session-recorder")
        router = try ZMQSocket(context, .router, lingerMs: 1_000)
        try router.bind(config.queryEndpoint)
        ingestor = Ingestor(store: store, logger: logger)
        self.settings = settings
        self.logger = logger
        retryDelay = settings.firstRetryS
        failure = store.openError
        service = QueryService(store: store)
        let ingestor = self.ingestor
        let path = store.settings.path
        service.status = { [unowned self] in
            RecorderStatus(database: path, schema: (try? store.appliedMigrations()) ?? [], counters: ingestor.counters,
                           inputs: self.subscriber.stats.totals, pending: ingestor.pendingCount, lastError: self.failure?.message, rows: (try? store.rowCounts()) ?? [:])
        }
    }

    /// Runs until `stop` is set, then writes what is still queued.
    public func run(stop: StopFlag) throws {
        logger.info("session recorder running", metadata: [
            "db": "\(ingestor.store.settings.path)", "schema": "\(Schema.versions.last ?? "")",
        ])
        var poller = ZMQPoller()
        let busIndex = subscriber.register(in: &poller)
        let queryIndex = poller.addReadable(router)
        while !stop.isSet {
            try heartbeat.tick(publisher, inputs: subscriber.stats.totals)
            let now = monotonicSeconds()
            let waitMs = ingestor.pendingCount > 0 ? max(0, min(100, Int((nextFlush - now) * 1000))) : 100
            _ = try poller.poll(timeoutMs: waitMs)
            if poller.isReadable(busIndex) {
                // Drain what is there, bounded so queries are answered in between.
                for _ in 0..<20_000 {
                    guard let message = try subscriber.next(timeoutMs: 0) else { break }
                    if ingestor.pendingCount == 0 { nextFlush = max(nextFlush, monotonicSeconds() + settings.flushIntervalS) }
                    ingestor.enqueue(message)
                }
            }
            if poller.isReadable(queryIndex) { try answerQueries() }
            if ingestor.pendingCount > 0, monotonicSeconds() >= nextFlush || (failure == nil && ingestor.pendingCount >= settings.flushAtMessages) {
                flush()
            }
            if monotonicSeconds() >= nextPrune { prune() }
        }
        // Shutting down: a few last tries, then say what could not be written.
        for _ in 0..<3 where ingestor.pendingCount > 0 {
            flush()
            if ingestor.pendingCount > 0 { usleep(200_000) }
        }
        if ingestor.pendingCount > 0 {
            logger.error("stopping with messages not written", metadata: ["pending": "\(ingestor.pendingCount)", "error": "\(failure?.message ?? "")"])
        }
        logger.info("session recorder stopped", metadata: ["counters": "\(ingestor.counters)"])
    }

    private func flush() {
        do {
            let written = try ingestor.flush()
            if let failure {
                logger.notice("database writable again; queued messages written", metadata: ["written": "\(written)", "was": "\(failure.kind.rawValue)"])
            }
            failure = nil
            retryDelay = settings.firstRetryS
            nextFlush = monotonicSeconds() + settings.flushIntervalS
        } catch {
            if failure?.kind != error.kind {
                logger.error("database write failed; messages kept to retry", metadata: ["error": "\(error.message)", "pending": "\(ingestor.pendingCount)"])
            }
            failure = error
            nextFlush = monotonicSeconds() + retryDelay
            retryDelay = min(settings.maxRetryS, retryDelay * 2)
        }
    }

    private func prune() {
        nextPrune = monotonicSeconds() + settings.pruneIntervalS
        guard failure == nil else { return }
        do {
            // One chunk a pass: a big backlog is worked off between bus reads, never in one go.
            let chunk = 20_000
            let deleted = try ingestor.pruneSamples(chunk: chunk, maxChunks: 1)
            if deleted > 0 { logger.debug("old raw samples pruned", metadata: ["rows": "\(deleted)"]) }
            if deleted == chunk { nextPrune = monotonicSeconds() + 0.05 } else { try ingestor.forgetSilentStreams() }
        } catch {
            logger.warning("raw samples not pruned", metadata: ["error": "\(error.message)"])
        }
    }

    private func answerQueries() throws {
        // At most 100 a pass, so a client flooding queries cannot keep the bus unread.
        for _ in 0..<100 {
            guard let request = try router.receive(dontWait: true, maxFrames: 4) else { return }
            // [client identity, empty delimiter (REQ/our DEALER), body]; anything else is answered if it can be.
            guard let identity = request.frames.first, request.frames.count >= 2 else { continue }
            let body = request.frames.last ?? []
            let delimiter: [[UInt8]] = request.frames.count >= 3 ? [[]] : []
            let reply: Data
            if request.frameCount > 3 || body.count > 1 << 20 {
                reply = Data(#"{"ok":false,"error":{"kind":"bad-request","message":"a request is one JSON frame of at most 1 MiB"}}"#.utf8)
            } else {
                let started = monotonicSeconds()
                let answer = service.answer(Data(body))
                reply = answer.reply
                var metadata: Logger.Metadata = [
                    "correlation_id": "\(answer.id ?? "")", "query": "\(answer.query ?? "")",
                    "ms": "\(String(format: "%.2f", (monotonicSeconds() - started) * 1000))",
                ]
                if let failure = answer.failure {
                    metadata["error"] = "\(failure.message)"
                    logger.info("query refused", metadata: metadata)
                } else {
                    logger.debug("query answered", metadata: metadata)
                }
            }
            // A client that went away is not our problem: drop the reply (ROUTER never blocks).
            _ = try? router.send(frames: [identity] + delimiter + [Array(reply)])
        }
    }
}
