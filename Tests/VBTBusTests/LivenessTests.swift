import Foundation
import Testing

@testable import VBTBus

/// Real libzmq sockets on loopback: the bus's side and a consumer's subscriber, each in a context of
/// its own (as in two processes).
@Suite("Liveness")
struct LivenessTests {
    /// libzmq 4.3.4 (Debian's) aborts a process whose socket pings its peer (`ZMQ_HEARTBEAT_IVL`) when
    /// a connection of it breaks while its input is stopped (the application has not read its queue
    /// down): the connection's engine notes the error and waits for the queue to drain, and its next
    /// ping asserts `!_io_error` (stream_engine_base.cpp, `out_event`). That is a consumer falling
    /// behind as the bus drops it (its memory budget, or its pings unanswered): the session-recorder
    /// crashed so in a 1,000-station load test. A subscriber therefore does not ping; the bus pings
    /// it, and its pings' time-to-live still ends a link gone silent (`ZMQSocket.setLiveness`).
    @Test("a subscriber that has not read its queue when the bus drops it lives on past its ping interval, reads what it had, and reconnects")
    func fullSubscriberDropped() throws {
        let busContext = ZMQContext()
        var bus: ZMQSocket? = try ZMQSocket(busContext, .xpub, lingerMs: 0)
        try bus!.setLiveness(intervalMs: BusConfig.livenessIntervalMs, timeoutMs: BusConfig.livenessTimeoutMs, pings: true)
        try bus!.setHighWaterMark(0)
        try bus!.bind("tcp://127.0.0.1:0")
        let endpoint = try bus!.lastEndpoint()
        var config = BusConfig()
        config.subEndpoint = endpoint
        config.subscriberHighWaterMark = 100
        let subscriber = try ZMQTransport(context: ZMQContext(), config: config).subscriberLink(prefixes: [""])
        try bus!.setReceiveTimeout(ms: 10_000)
        #expect(try bus!.receive(dontWait: false)?.frames.first?.first == 1, "the subscription reached the bus")
        // More than the subscriber's queue and both kernel buffers hold; it does not read.
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 1_000)
        for _ in 0..<20_000 { try bus!.send(frames: [Array("sample.rack-1".utf8), body]) }
        let deadline = monotonicSeconds() + 10
        while (try subscriber.socket?.hasInput() ?? false) == false, monotonicSeconds() < deadline { usleep(10_000) }
        // The bus drops it: what it had not sent is gone, the subscriber's side breaks when it next pings or reads.
        bus!.close()
        bus = nil
        // Three of the subscriber's ping intervals with its queue still full (the abort came at the second).
        let quiet = monotonicSeconds() + 3 * Double(BusConfig.livenessIntervalMs) / 1_000
        while monotonicSeconds() < quiet { usleep(50_000) }
        // A bus on the same endpoint again. The subscriber reads on, as a consumer does: what reached its
        // side of the broken connection, then the end of it; it connects to the new bus and subscribes.
        let again = try ZMQSocket(busContext, .xpub, lingerMs: 0)
        try again.bind(endpoint)
        var read = 0
        var subscribed = false
        let reconnectBy = monotonicSeconds() + 20
        while !subscribed, monotonicSeconds() < reconnectBy {
            while try subscriber.receive(timeoutMs: 10, maxFrames: 2) != nil { read += 1 }
            subscribed = try again.receive(dontWait: true)?.frames.first?.first == 1
        }
        #expect(read >= 100, "what reached the subscriber's side is read")
        #expect(subscribed, "the subscriber subscribed again")
        try again.send(frames: [Array("sample.rack-1".utf8), Array("after".utf8)])
        #expect(try subscriber.receive(timeoutMs: 10_000, maxFrames: 2)?.frames.last == Array("after".utf8))
        // Closed before their contexts end (a context's end waits for its sockets).
        again.close()
        subscriber.socket?.close()
        withExtendedLifetime(busContext) {}
    }
}
