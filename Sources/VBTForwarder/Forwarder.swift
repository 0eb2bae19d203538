import CZeroMQ
import Logging
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// The bus: an XSUB/XPUB forwarder that counts what it moves and publishes
/// its counters as `heartbeat.bus`. Owned by one thread (not `Sendable`).
///
/// It is written out instead of calling `zmq_proxy` so that it can count
/// messages and bytes and inject its own heartbeat on the XPUB side; frames
/// are moved with `zmq_msg_send`, which hands the buffer over without a copy,
/// as `zmq_proxy` does.
public final class Forwarder {
    /// How the forwarder is set up.
    public struct Configuration: Sendable {
        /// Endpoints and high-water marks.
        public var bus = BusConfig()
        /// Seconds between heartbeats; also sent at once after a new subscription.
        public var heartbeatIntervalS = 1.0
        /// The resident memory the bus keeps to, MiB (`BusMemoryBudget`); nil: no budget but the high-water marks.
        public var memoryBudgetMB: Int?
        /// Creates the defaults.
        public init() {}
    }

    private let frontend: ZMQSocket  // XSUB: publishers connect here
    private let backend: ZMQSocket  // XPUB: subscribers connect here
    private let configuration: Configuration
    private let logger: Logger
    private var stamper = EnvelopeStamper(program: "vbt-bus")
    private var counters = HeartbeatMessage.BusCounters()
    private let started = monotonicSeconds()
    /// On a secured bus: who gets in, and so who sent each message.
    private let zap: ZAPHandler?
    /// The last sender's User-Id and what it may publish (most batches come from one peer).
    private var lastUser = [CChar](repeating: 0, count: 41)
    private var lastPeer: AuthorizedPeer?
    private var lastGeneration = -1
    /// Messages refused per sender (public key), each sender logged once.
    private var refusedBy: [String: Int] = [:]
    /// The senders `heartbeat.bus` names in `refused_by`; the rest are summed as `others`.
    static let refusedSendersShown = 64
    /// Both sides' connections, as monitor events (the subscribers' side last).
    private let connectionMonitors: [ZMQSocket]
    /// A subscriber's connection: its descriptor (libzmq's), what identifies it (a descriptor is reused once closed) and its peer.
    private struct SubscriberLink {
        var descriptor: Int32
        var identity: KernelSocket.Identity
        var peer: String
    }
    /// The subscribers connected now, by descriptor (the monitor's accepted and disconnected events).
    private var subscriberLinks: [Int32: SubscriberLink] = [:]
    /// What subscribers said they are (`BusPriority`), by descriptor, with the connection that said it
    /// (a declaration may be read before its connection's accepted event, or outlive it).
    private var declared: [Int32: (identity: KernelSocket.Identity, priority: BusPriority)] = [:]

    /// This run's instance name (the part of `src` before the slash).
    public var instance: String { stamper.instance }

    /// Binds both sides. Fails when an endpoint is taken or invalid.
    public init(context: ZMQContext, configuration: Configuration, logger: Logger) throws(ZMQError) {
        self.configuration = configuration
        self.logger = logger
        frontend = try ZMQSocket(context, .xsub, lingerMs: 0)
        backend = try ZMQSocket(context, .xpub, lingerMs: 1_000)
        try frontend.setHighWaterMark(configuration.bus.highWaterMark)
        if let budget = configuration.memoryBudgetMB {
            // What a publisher has sent and the forwarding not yet taken is held too: under a budget, at most an eighth of it a publisher.
            try frontend.setOption(ZMQ_RCVHWM, BusMemoryBudget.inboundMark(megabytes: budget))
        }
        try backend.setHighWaterMark(configuration.bus.highWaterMark)
        try frontend.setMaxFrameBytes(BusConfig.maxFrameBytes)
        try backend.setMaxFrameBytes(BusConfig.maxFrameBytes)
        // Pass every subscribe upstream, even repeats, so each new subscriber
        // triggers a heartbeat it can take as "the bus has my subscription".
        try backend.setOption(ZMQ_XPUB_VERBOSE, 1)
        if let security = configuration.bus.security {
            guard let server = security.serverCertificate, let folder = security.authorizedFolder else {
                throw ZMQError(code: EINVAL, operation: "CURVE: vbt-bus needs VBT_SERVER_CERT and VBT_AUTHORIZED")
            }
            let authorized: AuthorizedKeys
            do { authorized = try AuthorizedKeys(folder: folder) } catch { throw ZMQError(code: EINVAL, operation: error.description) }
            zap = try ZAPHandler(context: context, authorized: authorized, logger: logger)
            try frontend.secureAsServer(server)
            try backend.secureAsServer(server)
            counters.refused = 0
            counters.refusedBy = [:]
            counters.refusedConnections = 0
        } else {
            guard isLoopback(configuration.bus.pubEndpoint) else { throw plaintextRefused(configuration.bus.pubEndpoint) }
            guard isLoopback(configuration.bus.subEndpoint) else { throw plaintextRefused(configuration.bus.subEndpoint) }
            zap = nil
        }
        var monitors: [ZMQSocket] = []
        for (side, socket) in [("pub", frontend), ("sub", backend)] {
            // The side subscribers connect to pings them; the side publishers connect to, which may stop reading
            // while the forwarding catches up, leaves dead links to TCP keepalive (`ZMQSocket.setLiveness`).
            try socket.setLiveness(intervalMs: BusConfig.livenessIntervalMs, timeoutMs: BusConfig.livenessTimeoutMs, pings: side == "sub")
            let endpoint = "inproc://vbt-bus-connections-\(side)"
            try socket.monitorConnections(on: endpoint)
            let monitor = try ZMQSocket(context, .pair, lingerMs: 0)
            try monitor.connect(endpoint)
            monitors.append(monitor)
        }
        connectionMonitors = monitors
        counters.connections = 0
        counters.disconnections = 0
        if configuration.memoryBudgetMB != nil { counters.shedSubscribers = 0 }
        try frontend.bind(configuration.bus.pubEndpoint)
        try backend.bind(configuration.bus.subEndpoint)
    }

    /// Forwards until the context shuts down; then returns normally.
    public func run() throws(ZMQError) {
        var poller = ZMQPoller()
        let front = poller.addReadable(frontend)
        let back = poller.addReadable(backend)
        let monitors = connectionMonitors.map { poller.addReadable($0) }
        var nextHeartbeat = monotonicSeconds()
        var heapTrim = HeapTrimSchedule()
        var budget = configuration.memoryBudgetMB.map(BusMemoryBudget.init(megabytes:))
        logger.info(
            "bus forwarding",
            metadata: [
                "pub.endpoint": "\(configuration.bus.pubEndpoint)",
                "sub.endpoint": "\(configuration.bus.subEndpoint)",
                "bus.instance": "\(instance)",
                "security": "\(zap == nil ? "plaintext (loopback only)" : "CURVE, \(zap?.authorized.peers.count ?? 0) keys authorized")",
            ])
        do {
            while true {
                var wait = nextHeartbeat - monotonicSeconds()
                if let budget { wait = min(wait, budget.untilNextCheck(now: monotonicSeconds())) }
                // Rounded up: a wait under a millisecond truncated to 0 made the loop spin until the
                // next budget check was due (the idle bus used 3 % of a core).
                let waitMs = max(0, Int((wait * 1000).rounded(.up)))
                if try poller.poll(timeoutMs: waitMs) > 0 {
                    if poller.isReadable(front) {
                        let moved = try forward(from: frontend, to: backend, limit: 4096)
                        counters.msgsIn += moved.messages
                        counters.bytesIn += moved.bytes
                        counters.msgsOut += moved.messages
                        counters.bytesOut += moved.bytes
                    }
                    if poller.isReadable(back), try forwardSubscriptions() {
                        nextHeartbeat = 0
                    }
                    for (index, monitor) in zip(monitors, connectionMonitors) where poller.isReadable(index) {
                        try countConnections(monitor, subscribers: monitor === connectionMonitors.last)
                    }
                }
                if budget?.isDue(now: monotonicSeconds()) == true {
                    // Connections ended since the last poll are forgotten first: a descriptor is never taken for another's.
                    if let monitor = connectionMonitors.last { try countConnections(monitor, subscribers: true) }
                    let queued = subscriberLinks.compactMapValues { KernelSocket.queuedBytes($0.descriptor) }
                    // What the subscribers said is looked up only past seven eighths of the budget, and once a check.
                    var said: [Int32: BusPriority]?
                    let priorities = {
                        if let said { return said }
                        said = self.declaredPriorities
                        return said!
                    }
                    if let decision = budget?.check(now: monotonicSeconds(), queued: queued, priorities: priorities) {
                        shed(decision, budget: budget!, priorities: priorities())
                    }
                }
                if monotonicSeconds() >= nextHeartbeat {
                    ThreadPriority.keep()
                    // A consumer's queue, drained, is given back (HeapTrimSchedule).
                    heapTrim.run(now: monotonicSeconds())
                    try sendHeartbeat()
                    nextHeartbeat = monotonicSeconds() + configuration.heartbeatIntervalS
                }
            }
        } catch  where error.isTerminated {
            logger.info("bus stopping", metadata: ["msgs.in": "\(counters.msgsIn)", "bytes.in": "\(counters.bytesIn)"])
            for monitor in connectionMonitors { monitor.close() }
            frontend.close()
            backend.close()
        }
    }

    /// What the subscribers connected now said they are (those that said nothing are `.normal`).
    private var declaredPriorities: [Int32: BusPriority] {
        var priorities: [Int32: BusPriority] = [:]
        for (descriptor, said) in declared where subscriberLinks[descriptor]?.identity == said.identity {
            priorities[descriptor] = said.priority
        }
        return priorities
    }

    /// Disconnects the subscriber furthest behind (`BusMemoryBudget`), if its
    /// descriptor is still the connection the monitor reported; or says why none goes.
    private func shed(_ decision: BusMemoryBudget.Decision, budget: BusMemoryBudget, priorities: [Int32: BusPriority]) {
        let metadata: Logger.Metadata = ["budget.mb": "\(budget.limitBytes >> 20)", "rss.mb": "\((HeapTrim.residentBytes ?? 0) >> 20)"]
        switch decision {
        case .noneToDisconnect:
            logger.warning(
                "bus near its memory budget; nothing disconnected: no subscriber behind for long enough, or the one behind waits while one that said a lower priority is connected",
                metadata: metadata)
        case .disconnect(let descriptor):
            guard let link = subscriberLinks[descriptor], KernelSocket.identity(descriptor) == link.identity else { return }
            let priority = priorities[descriptor] ?? .normal
            subscriberLinks[descriptor] = nil
            declared[descriptor] = nil
            KernelSocket.shutDown(descriptor)
            counters.shedSubscribers = (counters.shedSubscribers ?? 0) + 1
            logger.warning(
                "bus near its memory budget: disconnected the subscriber furthest behind; it connects again, counts what it missed as gaps and fetches it from the journals",
                metadata: metadata.merging(["peer": "\(link.peer)", "priority": "\(priority.rawValue)", "shed": "\(counters.shedSubscribers ?? 0)"]) { $1 })
        }
    }

    /// Counts the connections a monitor reports made and ended, and the
    /// handshakes it reports failed (a peer with no key, a wrong mechanism, a
    /// key ZAP refused), logging the first 100 refusals.
    /// On the subscribers' side, also keeps each connection's descriptor (`subscriberLinks`).
    private func countConnections(_ monitor: ZMQSocket, subscribers: Bool) throws(ZMQError) {
        while let event = try monitor.receive(dontWait: true, maxFrames: 2) {
            guard let head = event.frames.first, head.count >= 6 else { continue }
            let code = Int32(head[0]) | Int32(head[1]) << 8
            // The event's value: for an accepted or ended connection, its descriptor.
            let value = Int32(bitPattern: UInt32(head[2]) | UInt32(head[3]) << 8 | UInt32(head[4]) << 16 | UInt32(head[5]) << 24)
            switch code {
            case ZMQ_EVENT_ACCEPTED:
                // Kept only for a budget to choose from (two system calls a connection).
                if subscribers, configuration.memoryBudgetMB != nil, let identity = KernelSocket.identity(value) {
                    subscriberLinks[value] = SubscriberLink(descriptor: value, identity: identity, peer: KernelSocket.peerName(value))
                    // What an earlier connection on this descriptor said is not this one's.
                    if let said = declared[value], said.identity != identity { declared[value] = nil }
                }
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: counters.connections = (counters.connections ?? 0) + 1
            case ZMQ_EVENT_DISCONNECTED:
                counters.disconnections = (counters.disconnections ?? 0) + 1
                if subscribers { subscriberLinks[value] = nil }
            default:
                guard zap != nil else { continue }
                counters.refusedConnections = (counters.refusedConnections ?? 0) + 1
                let refused = counters.refusedConnections ?? 0
                // The ZAP handler has logged a refused key already, naming it.
                guard refused <= 100, code != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH else { continue }
                let reason = code == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "no CURVE key, or a broken handshake" : "handshake failed"
                logger.warning(
                    refused == 100 ? "connection refused (further refusals are counted in heartbeat.bus, not logged)" : "connection refused",
                    metadata: ["reason": "\(reason)", "bus.endpoint": "\(String(decoding: event.frames.count > 1 ? event.frames[1] : [], as: UTF8.self))"])
            }
        }
    }

    /// Moves up to `limit` whole messages without blocking; returns what moved.
    /// Once a split detector has asked for routed samples (`ShardRoute`), each sample is also
    /// sent under its shard's route for every count of shards asked for; a publisher's own
    /// routed topic is refused (only the bus routes).
    private func forward(from source: ZMQSocket, to target: ZMQSocket, limit: Int) throws(ZMQError) -> (messages: Int, bytes: Int) {
        var messages = 0
        var bytes = 0
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        defer { zmq_msg_close(&msg) }
        var copy = zmq_msg_t()
        zmq_msg_init(&copy)
        defer { zmq_msg_close(&copy) }
        var routed = false
        // Refused messages count towards `limit` too, so a peer flooding messages outside
        // its role cannot keep the loop from heartbeats and subscriptions.
        // Read once a pass: a revocation reaches the next pass.
        let generation = zap?.authorized.generation ?? 0
        var handled = 0
        while handled < limit {
            handled += 1
            var first = true
            var refused = false
            while true {
                let flags = first ? ZMQ_DONTWAIT : 0
                let (rc, code) = retryingInterrupts { zmq_msg_recv(&msg, source.handle, flags) }
                if rc < 0 {
                    if code == EAGAIN && first { return (messages, bytes) }
                    throw ZMQError(code: code, operation: "zmq_msg_recv")
                }
                if first, (zap != nil && !mayForward(&msg, generation: generation)) || isRoutedTopic(&msg) {
                    try drain(source, &msg)
                    refused = true
                    break
                }
                if first { routed = routeTopic(&msg) }
                first = false
                bytes += Int(rc)
                let more = zmq_msg_more(&msg) != 0
                // The last frame (the body) is kept for the routed copies: a copy shares its buffer.
                if !more, routed { zmq_msg_copy(&copy, &msg) }
                let (sent, sendCode) = retryingInterrupts { zmq_msg_send(&msg, target.handle, more ? ZMQ_SNDMORE : 0) }
                if sent < 0 { throw ZMQError(code: sendCode, operation: "zmq_msg_send") }
                if !more { break }
            }
            if !refused { messages += 1 }
            if !refused, routed { try sendRouted(body: &copy, to: target) }
            routed = false
        }
        return (messages, bytes)
    }

    /// Each count of shards some detector asked samples routed for (`ShardRoute`), with the
    /// prefix of each of its routes (`~K/N/`, K = 1...N), made once.
    private var routeTables: [(shards: Int, prefixes: [[UInt8]])] = []
    /// The routed topics of the sample being forwarded, one after another, and where each ends:
    /// reused, so routing a sample allocates nothing (a topic is small enough for libzmq to keep
    /// in the message itself).
    private var routedTopics: [UInt8] = []
    private var routedTopicEnds: [Int] = []
    private static let sampleTopic = Array(SampleMessage.topicPrefix.utf8)

    /// Makes the routed topics of a sample whose topic frame is `msg`, one per count of shards
    /// asked for; returns whether it made any.
    private func routeTopic(_ msg: inout zmq_msg_t) -> Bool {
        guard !routeTables.isEmpty else { return false }
        let topic = UnsafeRawBufferPointer(start: zmq_msg_data(&msg), count: zmq_msg_size(&msg))
        let sample = Self.sampleTopic
        guard topic.count > sample.count, memcmp(topic.baseAddress!, sample, sample.count) == 0 else { return false }
        let hash = ShardRoute.fnv1a64(UnsafeRawBufferPointer(rebasing: topic[sample.count...]))
        routedTopics.removeAll(keepingCapacity: true)
        routedTopicEnds.removeAll(keepingCapacity: true)
        for table in routeTables {
            routedTopics += table.prefixes[Int(hash % UInt64(table.shards))]
            routedTopics += topic
            routedTopicEnds.append(routedTopics.count)
        }
        return true
    }

    /// Whether a publisher's message has a routed topic: refused (counted and logged once), as
    /// only the bus routes.
    private func isRoutedTopic(_ msg: inout zmq_msg_t) -> Bool {
        guard zmq_msg_size(&msg) > 0, zmq_msg_data(&msg).load(as: UInt8.self) == ShardRoute.marker else { return false }
        if counters.refused == nil {
            logger.warning("message refused: a routed topic (`~K/N/...`) is the bus's to send, not a publisher's; further ones are counted in heartbeat.bus")
        }
        counters.refused = (counters.refused ?? 0) + 1
        return true
    }

    /// Sends `body` under each routed topic made (`routeTopic`), each a copy sharing its buffer.
    private func sendRouted(body: inout zmq_msg_t, to target: ZMQSocket) throws(ZMQError) {
        var part = zmq_msg_t()
        zmq_msg_init(&part)
        defer { zmq_msg_close(&part) }
        var start = 0
        for end in routedTopicEnds {
            let (sentTopic, topicCode) = routedTopics.withUnsafeBytes { bytes in
                retryingInterrupts { zmq_send(target.handle, bytes.baseAddress! + start, end - start, ZMQ_SNDMORE) }
            }
            if sentTopic < 0 { throw ZMQError(code: topicCode, operation: "zmq_send") }
            start = end
            zmq_msg_copy(&part, &body)
            let (sent, code) = retryingInterrupts { zmq_msg_send(&part, target.handle, 0) }
            if sent < 0 { throw ZMQError(code: code, operation: "zmq_msg_send") }
        }
        counters.routed = (counters.routed ?? 0) + routedTopicEnds.count
    }

    /// Whether the message whose first frame (its topic) is `msg` is inside
    /// its sender's role; counts and logs it when not.
    /// `generation` is the authorized keys' generation read once for the pass.
    private func mayForward(_ msg: inout zmq_msg_t, generation: Int) -> Bool {
        guard let zap, let user = ZMQSocket.userId(of: &msg) else {
            counters.refused = (counters.refused ?? 0) + 1
            return false
        }
        if generation != lastGeneration || strncmp(user, lastUser, 41) != 0 {
            let key = String(cString: user)
            lastPeer = zap.authorized.peer(publicKey: key)
            lastGeneration = generation
            key.withCString { _ = strncpy(&lastUser, $0, 40) }
        }
        let topic = UnsafeRawBufferPointer(start: zmq_msg_data(&msg), count: zmq_msg_size(&msg))
        if let peer = lastPeer, peer.rights.allows(topic) { return true }
        counters.refused = (counters.refused ?? 0) + 1
        let key = String(cString: user)
        refusedBy[key, default: 0] += 1
        let name = lastPeer?.name ?? "revoked key \(key.prefix(8))"
        let shownAs = counters.refusedBy?[name] != nil || (counters.refusedBy?.count ?? 0) < Self.refusedSendersShown ? name : "others"
        counters.refusedBy?[shownAs, default: 0] += 1
        if refusedBy[key] == 1 {
            let shown = String(decoding: topic.prefix(64), as: UTF8.self)
            logger.warning(
                "message refused: outside the sender's role (this sender's next refusals are counted, not logged)",
                metadata: [
                    "peer": "\(name)", "peer.role": "\(lastPeer?.role.description ?? "none")",
                    "zmq.topic": "\(shown)",
                ])
        }
        return false
    }

    /// Reads and drops the rest of a refused message's frames.
    private func drain(_ source: ZMQSocket, _ msg: inout zmq_msg_t) throws(ZMQError) {
        while zmq_msg_more(&msg) != 0 {
            let (rc, code) = retryingInterrupts { zmq_msg_recv(&msg, source.handle, 0) }
            if rc < 0 { throw ZMQError(code: code, operation: "zmq_msg_recv") }
        }
    }

    /// Passes subscription changes upstream; returns whether any was a subscribe.
    /// A subscriber's word on itself (`BusPriority`) is kept here, not passed on.
    private func forwardSubscriptions() throws(ZMQError) -> Bool {
        var subscribed = false
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        defer { zmq_msg_close(&msg) }
        while true {
            let (rc, code) = retryingInterrupts { zmq_msg_recv(&msg, backend.handle, ZMQ_DONTWAIT) }
            if rc < 0 {
                if code == EAGAIN { return subscribed }
                throw ZMQError(code: code, operation: "zmq_msg_recv")
            }
            // A subscription is one frame: of a longer message (a peer's own making), the first alone counts.
            let frame = UnsafeRawBufferPointer(start: zmq_msg_data(&msg), count: zmq_msg_size(&msg))
            let more = zmq_msg_more(&msg) != 0
            if let kind = frame.first {
                if let priority = BusPriority.declared(by: UnsafeRawBufferPointer(rebasing: frame.dropFirst())) {
                    // (Its unsubscription is ignored: libzmq sends one when the connection ends, and by
                    // then the descriptor may be another connection's.)
                    if kind == 1 { note(priority, of: &msg) }
                } else {
                    if kind == 1 {
                        counters.subscribeEvents += 1
                        subscribed = true
                    } else if kind == 0 {
                        counters.unsubscribeEvents += 1
                    }
                    // A routed subscription asks the publishers for what it routes: `~1/2/sample.` is
                    // `sample.` upstream. Its count of shards is kept for good (an unsubscription comes
                    // only as a connection ends; a route nobody takes costs the match of its topic).
                    let prefix = UnsafeRawBufferPointer(rebasing: frame.dropFirst())
                    if let route = ShardRoute.parse(prefix) {
                        if kind == 1, !routeTables.contains(where: { $0.shards == route.shards }) {
                            let prefixes = (1...route.shards).map { Array(ShardRoute.prefix(shard: $0, of: route.shards).utf8) }
                            routeTables = (routeTables + [(route.shards, prefixes)]).sorted { $0.shards < $1.shards }
                            counters.routed = counters.routed ?? 0
                            logger.info("samples routed to split detectors", metadata: ["shards": "\(route.shards)"])
                        }
                        try frontend.send([kind] + prefix.dropFirst(route.rest))
                    } else {
                        try frontend.send(frame)
                    }
                }
            }
            if more { try drain(backend, &msg) }
        }
    }

    /// Keeps what a subscriber said it is, for the budget's choice; on a secured bus, a claim to
    /// be real-time only from a service's key (any other is logged and taken as `.normal`).
    private func note(_ priority: BusPriority, of msg: inout zmq_msg_t) {
        guard configuration.memoryBudgetMB != nil else { return }
        // The connection the subscription came in on (libzmq's ZMQ_SRCFD, deprecated but kept in 4.3).
        let descriptor = zmq_msg_get(&msg, ZMQ_SRCFD)
        guard descriptor >= 0, let identity = KernelSocket.identity(descriptor) else { return }
        // Logged once a connection, whatever it says after (a peer repeating itself floods no log).
        let first = declared[descriptor]?.identity != identity
        var granted = priority
        if let zap, priority == .realtime {
            let key = ZMQSocket.userId(of: &msg).map { String(cString: $0) } ?? ""
            let peer = zap.authorized.peer(publicKey: key)
            var isService = false
            if case .service? = peer?.role { isService = true }
            if !isService {
                granted = .normal
                if first {
                    logger.warning(
                        "a subscriber said it is on the real-time path, which only a service's key may say: taken as normal",
                        metadata: ["peer": "\(peer?.name ?? "unknown key")", "peer.address": "\(KernelSocket.peerName(descriptor))"])
                }
            }
        }
        declared[descriptor] = (identity, granted)
        guard first else { return }
        logger.info("a subscriber said its priority", metadata: ["peer": "\(KernelSocket.peerName(descriptor))", "priority": "\(granted.rawValue)"])
    }

    private func sendHeartbeat() throws(ZMQError) {
        let heartbeat = HeartbeatMessage(
            role: "vbt-bus", uptimeS: monotonicSeconds() - started,
            intervalS: configuration.heartbeatIntervalS, bus: counters)
        do {
            let frames = try stamper.encode(heartbeat, station: "bus", ts: wallClockSeconds())
            try backend.send(frames.topic, more: true)
            try backend.send(frames.body)
        } catch let error as ZMQError {
            throw error
        } catch {
            logger.error("heartbeat not encodable", metadata: ["error": "\(error)"])
        }
    }
}
