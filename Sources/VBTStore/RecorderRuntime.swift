import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTWire

/// The session-recorder's loop: one thread owns the bus subscribers, the
/// query endpoint (a ROUTER socket, so a slow or vanished client never blocks
/// it) and the heartbeat publisher, and writes to SQLite in batches.
///
/// It reads the bus on two connections. The history (reps, sets, what else it keeps, the stations'
/// status and the producers' heartbeats) comes on one that says nothing of itself; raw samples,
/// nearly every message, on one of their own that says `bulk` (`BusPriority`), so that when the bus
/// at its memory budget disconnects a recorder behind on samples, the reps are not lost with them;
/// the history's connection is read first (docs/decisions/0036-recorder-ingest.md).
public final class RecorderRuntime: BusRole {
    /// The history's connection.
    package let subscriber: Subscriber
    /// The raw samples' connection (nil when none are kept: `sampleRetentionDays` 0).
    private let samples: Subscriber?
    package let publisher: Publisher
    private let queryServer: any FrameLink
    /// On a secured installation, the keys allowed in: each query is checked against its sender's role.
    private let authorized: AuthorizedKeys?
    private let clock: any BusClock
    /// A poll over the sockets, when the transport has sockets.
    private var poller: (poller: ZMQPoller, bus: Int, samples: Int?, query: Int)?
    /// Fetches what streams lack from the producers' journals.
    private let recovery: RecorderRecovery?
    private let ingestor: Ingestor
    private var service: QueryService
    package let logger: Logger
    private let settings: RecorderSettings
    private var heartbeat = HeartbeatSchedule(role: "session-recorder", name: "session-recorder")
    private var nextFlush = 0.0
    private var retryDelay: Double
    private var failure: StoreError?
    private var nextPrune = 0.0
    /// Not before this (monotonic s): at most one trim every `trimIntervalS`.
    private var nextTrim = 0.0
    static let trimIntervalS = 10.0
    /// A full batch was written since the last trim: the loop was behind (the disk stalled, or it waited for a core).
    private var behind = false
    /// Where each station was last heard; written to the registry every `sightingsIntervalS`.
    private let sightings = StationSightings()
    private var nextSightings = 0.0
    private let sightingsIntervalS = 5.0

    /// Connects to the bus and binds the query endpoint.
    public convenience init(context: ZMQContext, config: BusConfig, store: TrainingStore, settings: RecorderSettings, logger: Logger) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), store: store, settings: settings, logger: logger)
    }

    /// Connects on `transport` and serves its query endpoint.
    public init(transport: any BusTransport, store: TrainingStore, settings: RecorderSettings, logger: Logger) throws(ZMQError) {
        subscriber = try Subscriber(transport: transport, prefixes: Self.historyPrefixes, logger: logger)
        // What it misses it fetches from the journals, and no rep waits for it: the bus at its memory budget disconnects it first.
        samples =
            store.settings.sampleRetentionDays > 0
            ? try Subscriber(transport: transport, prefixes: [SampleMessage.type + "."], priority: .bulk, logger: logger) : nil
        heartbeat.subscribes = subscriber.subscribedPrefixes + (samples?.subscribedPrefixes ?? [])
        publisher = try Publisher(transport: transport, program: "session-recorder")
        queryServer = try transport.queryServerLink()
        authorized = transport.authorized
        clock = transport.clock
        if let bus = subscriber.socket, let query = queryServer.socket {
            var poller = ZMQPoller()
            let busIndex = poller.addReadable(bus), samplesIndex = samples?.socket.map { poller.addReadable($0) }
            let queryIndex = poller.addReadable(query)
            self.poller = (poller, busIndex, samplesIndex, queryIndex)
        }
        ingestor = Ingestor(store: store, logger: logger)
        ingestor.maxPending = settings.maxPending
        do { recovery = try RecorderRecovery(transport: transport, ingestor: ingestor, patience: settings.holePatience, logger: logger) } catch {
            logger.error("recovery from journals off: the database cannot be read", metadata: ["error": "\(error.message)"])
            recovery = nil
        }
        self.settings = settings
        self.logger = logger
        retryDelay = settings.firstRetryS
        failure = store.openError
        service = QueryService(store: store, sightings: sightings, now: { [clock] in clock.wallSeconds() })
        let ingestor = self.ingestor
        let path = store.settings.path
        service.status = { [unowned self] in
            RecorderStatus(
                database: path, schema: (try? store.appliedMigrations()) ?? [], counters: ingestor.counters,
                inputs: self.inputCounters, pending: ingestor.pendingCount, lastError: self.failure?.message, rows: (try? store.rowCounts()) ?? [:])
        }
    }

    /// Runs until `stop` is set, then writes what is still queued.
    public func run(stop: StopFlag) throws {
        logger.info(
            "session recorder running",
            metadata: [
                "db": "\(ingestor.store.settings.path)", "schema": "\(Schema.versions.last ?? "")",
            ])
        while !stop.isSet { try step() }
        persistSightings()
        // Shutting down: a few last tries, then say what could not be written.
        for _ in 0..<3 where ingestor.pendingCount > 0 {
            flush()
            if ingestor.pendingCount > 0 { usleep(200_000) }
        }
        if ingestor.pendingCount > 0 {
            logger.error("stopping with messages not written", metadata: ["pending": "\(ingestor.pendingCount)", "error": "\(failure?.message ?? "")"])
        }
        let counters = ingestor.counters
        logger.info(
            "session recorder stopped",
            metadata: [
                "stored": "\(counters.stored.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))",
                "sample_rows": "\(counters.sampleRows)", "duplicates": "\(counters.duplicates)", "refused": "\(counters.refused)",
                "ignored": "\(counters.ignored)", "dropped": "\(counters.droppedSamples + counters.droppedOther)",
                "failed_writes": "\(counters.failedWrites)", "recovered": "\(counters.recovered)", "lost": "\(counters.lost)",
            ])
    }

    /// The history's connection: every type the recorder keeps but samples, the stations' status
    /// (where each was last heard) and the producers' heartbeats (what each stream sent).
    static let historyPrefixes =
        Ingestor.keptTypes.subtracting([SampleMessage.type]).union([StatusMessage.type, HeartbeatMessage.type]).sorted().map { $0 + "." }

    /// Messages read by the last pass that drained the input.
    private var drainedLast = 0
    /// A pass that read fewer found the queue nearly empty: the next rests first (`RecorderSettings.gatherS`).
    static let gatherBelow = 64

    /// One pass of the loop: waits up to `maxWaitMs` for input (on sockets;
    /// the in-memory bus never waits), stores what arrived, answers queries,
    /// writes when a batch is due and prunes when that is due.
    public func step(maxWaitMs: Int = 100) throws {
        try heartbeat.tick(self)
        var busReady = true, samplesReady = samples != nil, queryReady = true
        if var polling = poller {
            if settings.gatherS > 0, drainedLast < Self.gatherBelow { usleep(UInt32(settings.gatherS * 1_000_000)) }
            let now = clock.monotonicSeconds()
            let waitMs = ingestor.pendingCount > 0 ? max(0, min(maxWaitMs, Int(((nextFlush - now) * 1000).rounded(.up)))) : maxWaitMs
            _ = try polling.poller.poll(timeoutMs: waitMs)
            busReady = polling.poller.isReadable(polling.bus)
            samplesReady = polling.samples.map { polling.poller.isReadable($0) } ?? false
            queryReady = polling.poller.isReadable(polling.query)
            poller = polling
        }
        // Drain what is there, the history first, bounded so queries are answered in between, and no more than a
        // batch: what waits is written before more is read (a backlog read 20,000 at a time held 40 MB more).
        drainedLast = 0
        if busReady { drainedLast += try drain(subscriber) }
        if samplesReady, let samples { drainedLast += try drain(samples) }
        if let recovery {
            let fetched = recovery.step {
                if ingestor.pendingCount > 0 { flush() }
                return ingestor.pendingCount == 0
            }
            if !fetched.isEmpty, ingestor.pendingCount == 0 { nextFlush = max(nextFlush, clock.monotonicSeconds() + settings.flushIntervalS) }
            for message in fetched { ingestor.enqueue(message) }
        }
        if queryReady { try answerQueries() }
        if ingestor.pendingCount > 0, clock.monotonicSeconds() >= nextFlush || (failure == nil && ingestor.pendingCount >= settings.flushAtMessages) {
            flush()
        }
        if clock.monotonicSeconds() >= nextPrune { prune() }
        if clock.monotonicSeconds() >= nextSightings {
            nextSightings = clock.monotonicSeconds() + sightingsIntervalS
            persistSightings()
        }
    }

    /// Reads what `input` holds, up to 20,000 messages or a full batch; returns how many.
    private func drain(_ input: Subscriber) throws -> Int {
        var read = 0
        while read < 20_000 {
            if failure == nil, ingestor.pendingCount >= settings.flushAtMessages { break }
            guard let message = try input.next(timeoutMs: 0) else { break }
            read += 1
            sightings.note(message, now: clock.wallSeconds())
            if ingestor.pendingCount == 0 { nextFlush = max(nextFlush, clock.monotonicSeconds() + settings.flushIntervalS) }
            if message.envelope.type == HeartbeatMessage.type {
                let (history, raw) = (subscriber.stats.sources, samples?.stats.sources)
                recovery?.note(heartbeat: message) { ingestor.lastSeqHeld($0, received: (history[$0] ?? raw?[$0])?.lastSeq) }
            }
            ingestor.enqueue(message)
        }
        return read
    }

    /// Writes where the stations were heard to the registry (a failure is the database's,
    /// reported by the next batch's write; the sightings stay in memory meanwhile).
    private func persistSightings() {
        guard failure == nil else { return }
        do { try sightings.persist(to: ingestor.store) } catch {
            logger.warning("station sightings not written", metadata: ["error": "\(error.message)"])
        }
    }

    /// What arrived on both connections.
    package var arrivals: SubscriberStats { samples.map { subscriber.stats.merging($0.stats) } ?? subscriber.stats }
    /// What was fetched again from the journals and lost for good: the ingestor's (stored holes).
    package var input: Ingestor { ingestor }

    /// The counters of what was stored, for tests and the heartbeat.
    public var counters: IngestCounters { ingestor.counters }
    /// Times the freed heap was given back after a backlog.
    public private(set) var trims = 0
    /// Messages read and not yet written.
    public var pendingCount: Int { ingestor.pendingCount }

    private func flush() {
        do {
            let written = try ingestor.flush()
            if written >= settings.flushAtMessages {
                behind = true
            } else if behind, clock.monotonicSeconds() >= nextTrim {
                // Caught up after a backlog (the disk stalled, or the loop waited for a core): what held it
                // is free now, and without this stays resident at its peak (HeapTrim).
                behind = false
                nextTrim = clock.monotonicSeconds() + Self.trimIntervalS
                trims += 1
                HeapTrim.giveBackFreed()
            }
            if let failure {
                logger.notice("database writable again; queued messages written", metadata: ["written": "\(written)", "was": "\(failure.kind.rawValue)"])
            }
            failure = nil
            retryDelay = settings.firstRetryS
            nextFlush = clock.monotonicSeconds() + settings.flushIntervalS
        } catch {
            if failure?.kind != error.kind {
                logger.error("database write failed; messages kept to retry", metadata: ["error": "\(error.message)", "pending": "\(ingestor.pendingCount)"])
            }
            failure = error
            nextFlush = clock.monotonicSeconds() + retryDelay
            retryDelay = min(settings.maxRetryS, retryDelay * 2)
        }
    }

    private func prune() {
        nextPrune = clock.monotonicSeconds() + settings.pruneIntervalS
        guard failure == nil else { return }
        do {
            // One chunk a pass: a big backlog is worked off between bus reads, never in one go.
            let chunk = 20_000
            let deleted = try ingestor.pruneSamples(now: clock.wallSeconds(), chunk: chunk, maxChunks: 1)
            if deleted > 0 { logger.debug("old raw samples pruned", metadata: ["rows": "\(deleted)"]) }
            if deleted == chunk {
                nextPrune = clock.monotonicSeconds() + 0.05
            } else {
                try ingestor.forgetSilentStreams(now: clock.wallSeconds())
                try ingestor.store.forgetSilentSeenStations(now: clock.wallSeconds())
            }
        } catch {
            logger.warning("raw samples not pruned", metadata: ["error": "\(error.message)"])
        }
    }

    private func answerQueries() throws {
        // At most 100 a pass, so a client flooding queries cannot keep the bus unread.
        for _ in 0..<100 {
            guard let request = try queryServer.receive(timeoutMs: 0, maxFrames: 4) else { return }
            // [client identity, empty delimiter (REQ/our DEALER), body]; anything else is answered if it can be.
            guard let identity = request.frames.first, request.frames.count >= 2 else { continue }
            let body = request.frames.last ?? []
            let delimiter: [[UInt8]] = request.frames.count >= 3 ? [[]] : []
            let reply: Data
            if request.frameCount > 3 || body.count > 1 << 20 {
                reply = Data(#"{"ok":false,"error":{"kind":"bad-request","message":"a request is one JSON frame of at most 1 MiB"}}"#.utf8)
            } else {
                let started = clock.monotonicSeconds()
                let access: QueryService.Access = authorized.map { .peer($0.peer(publicKey: request.userId ?? "")) } ?? .anyone
                let answer = service.answer(Data(body), access: access)
                reply = answer.reply
                var metadata: Logger.Metadata = [
                    "correlation_id": "\(answer.id ?? "")", "query": "\(answer.query ?? "")",
                    "ms": "\(String(format: "%.2f", (clock.monotonicSeconds() - started) * 1000))",
                ]
                if let failure = answer.failure {
                    metadata["error"] = "\(failure.message)"
                    logger.info("query refused", metadata: metadata)
                } else {
                    logger.debug("query answered", metadata: metadata)
                }
            }
            // A client that went away is not our problem: drop the reply (ROUTER never blocks).
            _ = try? queryServer.send([identity] + delimiter + [Array(reply)], dontWait: true)
        }
    }
}
