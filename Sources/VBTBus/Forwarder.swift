import CZeroMQ
import Logging
import VBTWire

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

    /// This run's instance name (the part of `src` before the slash).
    public var instance: String { stamper.instance }

    /// Binds both sides. Fails when an endpoint is taken or invalid.
    public init(context: ZMQContext, configuration: Configuration, logger: Logger) throws(ZMQError) {
        self.configuration = configuration
        self.logger = logger
        frontend = try ZMQSocket(context, .xsub, lingerMs: 0)
        backend = try ZMQSocket(context, .xpub, lingerMs: 1_000)
        try frontend.setHighWaterMark(configuration.bus.highWaterMark)
        try backend.setHighWaterMark(configuration.bus.highWaterMark)
        try frontend.setMaxFrameBytes(BusConfig.maxFrameBytes)
        try backend.setMaxFrameBytes(BusConfig.maxFrameBytes)
        // Pass every subscribe upstream, even repeats, so each new subscriber
        // triggers a heartbeat it can take as "the bus has my subscription".
        try backend.setOption(ZMQ_XPUB_VERBOSE, 1)
        try frontend.bind(configuration.bus.pubEndpoint)
        try backend.bind(configuration.bus.subEndpoint)
    }

    /// Forwards until the context shuts down; then returns normally.
    public func run() throws(ZMQError) {
        var poller = ZMQPoller()
        let front = poller.addReadable(frontend)
        let back = poller.addReadable(backend)
        var nextHeartbeat = monotonicSeconds()
        logger.info(
            "bus forwarding",
            metadata: [
                "pub.endpoint": "\(configuration.bus.pubEndpoint)",
                "sub.endpoint": "\(configuration.bus.subEndpoint)",
                "bus.instance": "\(instance)",
            ])
        do {
            while true {
                let waitMs = max(0, Int((nextHeartbeat - monotonicSeconds()) * 1000))
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
                }
                if monotonicSeconds() >= nextHeartbeat {
                    try sendHeartbeat()
                    nextHeartbeat = monotonicSeconds() + configuration.heartbeatIntervalS
                }
            }
        } catch  where error.isTerminated {
            logger.info("bus stopping", metadata: ["msgs.in": "\(counters.msgsIn)", "bytes.in": "\(counters.bytesIn)"])
            frontend.close()
            backend.close()
        }
    }

    /// Moves up to `limit` whole messages without blocking; returns what moved.
    private func forward(from source: ZMQSocket, to target: ZMQSocket, limit: Int) throws(ZMQError) -> (messages: Int, bytes: Int) {
        var messages = 0
        var bytes = 0
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        defer { zmq_msg_close(&msg) }
        while messages < limit {
            var first = true
            while true {
                let flags = first ? ZMQ_DONTWAIT : 0
                let (rc, code) = retryingInterrupts { zmq_msg_recv(&msg, source.handle, flags) }
                if rc < 0 {
                    if code == EAGAIN && first { return (messages, bytes) }
                    throw ZMQError(code: code, operation: "zmq_msg_recv")
                }
                first = false
                bytes += Int(rc)
                let more = zmq_msg_more(&msg) != 0
                let (sent, sendCode) = retryingInterrupts { zmq_msg_send(&msg, target.handle, more ? ZMQ_SNDMORE : 0) }
                if sent < 0 { throw ZMQError(code: sendCode, operation: "zmq_msg_send") }
                if !more { break }
            }
            messages += 1
        }
        return (messages, bytes)
    }

    /// Passes subscription changes upstream; returns whether any was a subscribe.
    private func forwardSubscriptions() throws(ZMQError) -> Bool {
        var subscribed = false
        while let message = try backend.receive(dontWait: true, maxFrames: 1) {
            guard let frame = message.frames.first else { continue }
            if frame.first == 1 {
                counters.subscribeEvents += 1
                subscribed = true
            } else if frame.first == 0 {
                counters.unsubscribeEvents += 1
            }
            try frontend.send(frame)
        }
        return subscribed
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
