import CZeroMQ
import Logging
import VBTWire

// The seam under every runtime: a runtime asks a transport for its links and
// its clock, never for sockets or the system's time. Programs use
// `ZMQTransport` (libzmq sockets, the system clocks); tests may use the
// in-memory bus of VBTTesting with a clock they move by hand, so a runtime's
// whole behaviour runs in-process in milliseconds.

/// Where a program's time comes from.
public protocol BusClock: Sendable {
    /// Seconds since 1970-01-01 UTC: the `ts` of messages.
    func wallSeconds() -> Double
    /// Seconds on a clock that never steps back: deadlines and intervals.
    func monotonicSeconds() -> Double
}

/// The system's clocks.
public struct SystemClock: BusClock {
    /// The system clock.
    public init() {}
    public func wallSeconds() -> Double { wallClockSeconds() }
    public func monotonicSeconds() -> Double { VBTBus.monotonicSeconds() }
}

/// One connection's messages, as frames. Owned by one thread.
public protocol FrameLink: AnyObject {
    /// Sends one message (all its frames, or none). Returns false when it
    /// could not be queued and `dontWait` was asked.
    @discardableResult
    func send(_ frames: [[UInt8]], dontWait: Bool) throws(ZMQError) -> Bool
    /// Sends a bus message (topic, body) waiting for room: the hot path, with
    /// no list of frames to build.
    func send(topic: [UInt8], body: [UInt8]) throws(ZMQError)
    /// The next message, waiting at most `timeoutMs` (-1: as long as it
    /// takes; 0: not at all). At most `maxFrames` frames are kept.
    func receive(timeoutMs: Int32, maxFrames: Int) throws(ZMQError) -> ReceivedMessage?
    /// Whether a call really waits for time to pass (a socket), or answers
    /// at once (the in-memory bus, whose time is a test's clock).
    var waits: Bool { get }
    /// The socket under the link, for a poll over several links; nil when there is none.
    var socket: ZMQSocket? { get }
    /// On the subscriber side of the bus: from now on, also the messages whose
    /// topic starts with `prefix`. Other links refuse (EINVAL).
    func subscribe(_ prefix: String) throws(ZMQError)
}

/// Opens the links a runtime needs, and says what time it is.
public protocol BusTransport: AnyObject {
    /// The clock every runtime on this transport reads.
    var clock: any BusClock { get }
    /// The subscriber side of the bus, subscribed to each of `prefixes` ("" is everything).
    func subscriberLink(prefixes: [String]) throws(ZMQError) -> any FrameLink
    /// The publisher side of the bus. It also receives the subscriptions the
    /// bus forwards: one frame each, `1` or `0` (subscribe, unsubscribe) then the prefix.
    func publisherLink(lingerMs: Int32) throws(ZMQError) -> any FrameLink
    /// A client of the recorder's query endpoint: sends `[empty, request]`, receives `[empty, reply]`.
    func queryClientLink() throws(ZMQError) -> any FrameLink
    /// The recorder's query endpoint: receives `[peer, empty, request]`, sends `[peer, empty, reply]`.
    func queryServerLink() throws(ZMQError) -> any FrameLink
    /// A request/reply server bound on `endpoint` (a producer's replay endpoint), as the query endpoint's.
    func serverLink(endpoint: String) throws(ZMQError) -> any FrameLink
    /// A client of the server at `endpoint`, as a query client.
    func clientLink(endpoint: String) throws(ZMQError) -> any FrameLink
    /// A client of a replay endpoint whose CURVE public key is `serverKey` (nil: a local one).
    func clientLink(endpoint: String, serverKey: String?) throws(ZMQError) -> any FrameLink
    /// The CURVE public key a replay endpoint bound at `endpoint` is offered with (nil: a local one).
    func replayServerKey(endpoint: String) -> String?
    /// On a secured transport, who is allowed in (a received message's
    /// `userId` names its sender there); nil in plaintext.
    var authorized: AuthorizedKeys? { get }
}

extension BusTransport {
    public var authorized: AuthorizedKeys? { nil }
    public func clientLink(endpoint: String, serverKey: String?) throws(ZMQError) -> any FrameLink { try clientLink(endpoint: endpoint) }
    public func replayServerKey(endpoint: String) -> String? { nil }
}

/// The transport of a running program: libzmq sockets on the configured
/// endpoints, the system's clocks.
public final class ZMQTransport: BusTransport {
    public let context: ZMQContext
    public let config: BusConfig
    public let clock: any BusClock
    /// The ZAP handler of this transport's server sockets, started with the first.
    public private(set) var zap: ZAPHandler?
    public var authorized: AuthorizedKeys? { zap?.authorized }

    /// A transport on `config`'s endpoints.
    public init(context: ZMQContext, config: BusConfig, clock: any BusClock = SystemClock()) {
        (self.context, self.config, self.clock) = (context, config, clock)
    }

    public func subscriberLink(prefixes: [String]) throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .sub, lingerMs: 0)
        try socket.setOption(ZMQ_RCVHWM, config.subscriberHighWaterMark)
        try socket.setMaxFrameBytes(BusConfig.maxFrameBytes)
        for prefix in prefixes { try socket.subscribe(prefix) }
        try secureClient(socket, config.subEndpoint, pings: false)
        try socket.connect(config.subEndpoint)
        return SocketLink(socket)
    }

    public func publisherLink(lingerMs: Int32) throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .xpub, lingerMs: lingerMs)
        try socket.setHighWaterMark(config.highWaterMark)
        try socket.setMaxFrameBytes(BusConfig.maxFrameBytes)
        try secureClient(socket, config.pubEndpoint)
        try socket.connect(config.pubEndpoint)
        return SocketLink(socket)
    }

    public func queryClientLink() throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .dealer, lingerMs: 0)
        try secureClient(socket, config.queryEndpoint)
        try socket.connect(config.queryEndpoint)
        return SocketLink(socket)
    }

    public func queryServerLink() throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .router, lingerMs: 1_000)
        try socket.setMaxFrameBytes(BusConfig.maxRequestBytes)
        if let security = config.security {
            guard let server = security.serverCertificate, let folder = security.authorizedFolder else {
                throw ZMQError(code: EINVAL, operation: "CURVE: the query endpoint needs VBT_SERVER_CERT and VBT_AUTHORIZED")
            }
            try startZAP(folder: folder)
            try socket.secureAsServer(server)
            socket.readsUserId = true
        } else {
            try requireLoopback(config.queryEndpoint)
        }
        try socket.bind(config.queryEndpoint)
        return SocketLink(socket)
    }

    /// A producer's replay endpoint. On this computer (`ipc://` in the journal's folder,
    /// readable by the folder's owner only, or loopback) it is plaintext. Off it (`tcp://HOST:PORT`,
    /// so the server's consumers can fetch a station's journal) it is CURVE with the program's
    /// own key, and its ZAP handler admits service keys only (`BusSecurity.replayDomain`): a
    /// journal holds athletes' readings.
    public func serverLink(endpoint: String) throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .router, lingerMs: 1_000)
        try socket.setMaxFrameBytes(BusConfig.maxRequestBytes)
        if !isLoopback(endpoint) {
            guard let security = config.security, let certificate = security.certificate, let folder = security.authorizedFolder else {
                throw ZMQError(
                    code: EINVAL,
                    operation:
                        "the replay endpoint \(endpoint) is off this computer: it needs VBT_CERT (this program's key) and VBT_AUTHORIZED (the installation's authorized/ folder, to admit the services)"
                )
            }
            try startZAP(folder: folder)
            try socket.secureAsServer(certificate, domain: BusSecurity.replayDomain)
            try socket.setLiveness(intervalMs: BusConfig.livenessIntervalMs, timeoutMs: BusConfig.livenessTimeoutMs, pings: true)
        }
        try socket.bind(endpoint)
        return SocketLink(socket)
    }

    public func replayServerKey(endpoint: String) -> String? {
        isLoopback(endpoint) ? nil : config.security?.certificate?.publicKey
    }

    public func clientLink(endpoint: String) throws(ZMQError) -> any FrameLink { try clientLink(endpoint: endpoint, serverKey: nil) }

    /// A client of a replay endpoint. Off this computer it is CURVE with this program's key and
    /// the producer's offered `serverKey`, and ZMTP liveness: a link that goes silent (a
    /// partitioned station) is dropped and connected again, and what was asked is asked again
    /// when its answer is late (proto/replay.md).
    public func clientLink(endpoint: String, serverKey: String?) throws(ZMQError) -> any FrameLink {
        let socket = try ZMQSocket(context, .dealer, lingerMs: 0)
        if !isLoopback(endpoint) {
            guard let serverKey, let certificate = config.security?.certificate else {
                throw ZMQError(
                    code: EINVAL,
                    operation: serverKey == nil
                        ? "the replay endpoint \(endpoint) is off this computer and its producer offers no key for it"
                        : "the replay endpoint \(endpoint) is off this computer: fetching from it needs VBT_CERT (a service's key)")
            }
            try socket.setMaxFrameBytes(BusConfig.maxFrameBytes)
            try socket.setLiveness(intervalMs: BusConfig.livenessIntervalMs, timeoutMs: BusConfig.livenessTimeoutMs, pings: true)
            try socket.secureAsClient(certificate, serverKey: serverKey)
        }
        try socket.connect(endpoint)
        return SocketLink(socket)
    }

    /// Makes `socket` a CURVE client of the bus's server key, when this
    /// installation has keys; without keys, only a loopback `endpoint` is allowed.
    /// `pings` false for the subscriber, which may stop reading while its consumer catches up: the bus pings
    /// it, and its own side of a dead link is ended by TCP keepalive (`ZMQSocket.setLiveness`).
    private func secureClient(_ socket: ZMQSocket, _ endpoint: String, pings: Bool = true) throws(ZMQError) {
        try socket.setLiveness(intervalMs: BusConfig.livenessIntervalMs, timeoutMs: BusConfig.livenessTimeoutMs, pings: pings)
        guard let security = config.security else { return try requireLoopback(endpoint) }
        let keys = try security.clientKeys()
        try socket.secureAsClient(keys.certificate, serverKey: keys.serverKey)
    }

    private func requireLoopback(_ endpoint: String) throws(ZMQError) {
        if !isLoopback(endpoint) { throw plaintextRefused(endpoint) }
    }

    private func startZAP(folder: String) throws(ZMQError) {
        guard zap == nil else { return }
        do {
            zap = try ZAPHandler(context: context, authorized: try AuthorizedKeys(folder: folder), logger: Logger(label: "vbt.zap"))
        } catch let error as SecurityError {
            throw ZMQError(code: EINVAL, operation: error.description)
        } catch let error as ZMQError {
            throw error
        } catch {
            throw ZMQError(code: EINVAL, operation: "\(error)")
        }
    }
}

/// A link over one libzmq socket.
public final class SocketLink: FrameLink {
    public let socket: ZMQSocket?
    private let zmq: ZMQSocket
    private var receiveTimeoutMs: Int32 = -1

    /// Wraps `socket`.
    public init(_ socket: ZMQSocket) { (self.socket, zmq) = (socket, socket) }

    public var waits: Bool { true }

    @discardableResult
    public func send(_ frames: [[UInt8]], dontWait: Bool) throws(ZMQError) -> Bool {
        for (index, frame) in frames.enumerated() {
            // Once the first frame is queued the rest go too (a multipart message is atomic).
            guard try zmq.send(frame, more: index < frames.count - 1, dontWait: dontWait && index == 0) else { return false }
        }
        return true
    }

    public func subscribe(_ prefix: String) throws(ZMQError) { try zmq.subscribe(prefix) }

    public func send(topic: [UInt8], body: [UInt8]) throws(ZMQError) {
        try zmq.send(topic, more: true)
        try zmq.sendBuffered(body)
    }

    public func receive(timeoutMs: Int32, maxFrames: Int) throws(ZMQError) -> ReceivedMessage? {
        if timeoutMs == 0 { return try zmq.receive(dontWait: true, maxFrames: maxFrames) }
        if timeoutMs != receiveTimeoutMs {
            try zmq.setReceiveTimeout(ms: timeoutMs)
            receiveTimeoutMs = timeoutMs
        }
        return try zmq.receive(maxFrames: maxFrames)
    }
}
