import Foundation
import Logging
import Testing
import VBTWire

@testable import VBTBus

/// `Subscriber.gatherS` over real libzmq sockets on loopback: a bound XPUB stands in for the bus.
@Suite("Subscriber gathering")
struct GatherTests {
    @Test("a subscriber that lets messages gather once its queue is empty still gets every one, in order, and keeps to its timeout")
    func gathersInOrder() throws {
        let busContext = ZMQContext()
        let bus = try ZMQSocket(busContext, .xpub, lingerMs: 0)
        try bus.bind("tcp://127.0.0.1:0")
        var config = BusConfig()
        config.subEndpoint = try bus.lastEndpoint()
        let subscriber = try Subscriber(
            transport: ZMQTransport(context: ZMQContext(), config: config), prefixes: ["sample."], logger: Logger(label: "gather-test"))
        subscriber.samples = .located
        subscriber.gatherS = 0.02
        try bus.setReceiveTimeout(ms: 10_000)
        // Both subscriptions (its prefix, the bus's heartbeat) reached the bus.
        #expect(try bus.receive(dontWait: false)?.frames.first?.first == 1)
        #expect(try bus.receive(dontWait: false)?.frames.first?.first == 1)
        #expect(try subscriber.next(timeoutMs: 30) == nil, "nothing sent: nil once the timeout passes, the pause within it")
        #expect(try subscriber.next(timeoutMs: 0) == nil)
        let ts = Date().timeIntervalSince1970
        func send(_ seq: Int) throws {
            let body = """
                {"v":1,"type":"sample","station":"rack-1","src":"gather-test/sample.rack-1","seq":\(seq),"ts":\(ts),\
                "sensor":"distance","device":"sim","samples":[{"t":\(ts),"distance_mm":500}]}
                """
            try bus.send(frames: [Array("sample.rack-1".utf8), Array(body.utf8)])
        }
        for seq in 1...3 { try send(seq) }
        var seqs: [UInt64] = []
        while seqs.count < 3, let message = try subscriber.next(timeoutMs: 5_000) { seqs.append(message.envelope.seq) }
        // One more after the queue ran empty: it comes after the pause.
        try send(4)
        if let message = try subscriber.next(timeoutMs: 5_000) { seqs.append(message.envelope.seq) }
        #expect(seqs == [1, 2, 3, 4])
        #expect(subscriber.stats.totals.gaps == 0 && subscriber.stats.totals.malformed == 0)
        subscriber.socket?.close()
        bus.close()
    }
}
