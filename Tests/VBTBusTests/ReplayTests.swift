import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// Replay from a producer's journal (proto/replay.md): over the in-memory bus,
/// and once over real libzmq sockets.
@Suite("Replay")
struct ReplayTests {
    static let logger = Logger(label: "test.replay") { _ in SwiftLogNoOpLogHandler() }

    /// A producer that journals 50 status messages for rack-01, and what a subscriber received of them.
    static func producer(
        _ transport: any BusTransport, dir: TemporaryDirectory, settings: ((inout JournalSettings) -> Void)? = nil
    ) throws -> (Publisher, [BusMessage]) {
        let subscriber = try Subscriber(transport: transport, prefixes: ["status."], logger: logger)
        let publisher = try Publisher(transport: transport, program: "sensor-bridge")
        var journalSettings = JournalSettings(directory: dir.path("journal"))
        settings?(&journalSettings)
        publisher.journal = try Journal(settings: journalSettings, instance: publisher.stamper.instance, clock: transport.clock)
        for index in 0..<50 {
            try publisher.publish(StatusMessage(state: .streaming, sensor: "distance", device: "/dev/ttyACM\(index % 3)", rateHz: 50), station: "rack-01")
        }
        var received: [BusMessage] = []
        while let message = try subscriber.next(timeoutMs: 0) { received.append(message) }
        return (publisher, received)
    }

    @Test("a hole is fetched byte for byte; a reply stops at its limit and says more; a range past the journal is counted lost; a bad request gets an error")
    func inMemory() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let (publisher, sent) = try Self.producer(bus, dir: dir)
        let server = try ReplayServer(journal: try #require(publisher.journal), transport: bus, endpoint: "memory://bridge/replay")
        let client = try ReplayClient(transport: bus, endpoint: "memory://bridge/replay")
        let src = try #require(sent.first?.envelope.src)

        let id = try #require(try client.request(src: src, from: 11, to: 20))
        #expect(try client.nextReply() == nil, "nothing before the producer's loop serves")
        #expect(try server.serve() == 1)
        let reply = try #require(try client.nextReply())
        #expect(reply.header.id == id && reply.header.count == 10 && !reply.header.more && reply.header.lost == 0)
        #expect(reply.header.keptFrom == 1 && reply.header.keptTo == 50)
        #expect(reply.messages.map(\.body) == sent[10..<20].map(\.body), "the originals, in order")
        let replayed = try reply.messages.map { try decodeMessage(topic: $0.topic, body: $0.body) }
        #expect(replayed.map(\.envelope.seq) == Array(11...20))

        server.maxMessages = 15
        _ = try client.request(src: src, from: 1, to: 50)
        try server.serve()
        let first = try #require(try client.nextReply())
        #expect(first.header.count == 15 && first.header.more)

        // Beyond what the journal holds: 51-60 were never published (the silent tail's far end), 0 is no seq.
        _ = try client.request(src: src, from: 45, to: 60)
        _ = try client.request(src: "nobody/status.rack-09", from: 1, to: 5)
        try server.serve()
        let tail = try #require(try client.nextReply())
        #expect(tail.header.count == 6 && tail.header.lost == 0, "only what was published comes back")
        let unknown = try #require(try client.nextReply())
        #expect(unknown.header.count == 0 && unknown.header.keptFrom == nil && unknown.header.lost == 5)

        let bad = bus.clientLink(endpoint: "memory://bridge/replay")
        try bad.send([[], Array(#"{"id":"x","src":"a","from":0,"to":3}"#.utf8)], dontWait: true)
        try server.serve()
        let refused = try #require(try bad.receive(timeoutMs: 0, maxFrames: 4)).frames.last
        #expect(try ReplayHeader(json: try #require(refused)).error?.contains("1 <= from <= to") == true)
    }

    @Test("what retention dropped is reported lost, with the exact count")
    func beyondRetention() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let (publisher, sent) = try Self.producer(bus, dir: dir) {
            $0.segmentBytes = 2_048
            $0.maxBytes = 4_096
        }
        let journal = try #require(publisher.journal)
        let server = try ReplayServer(journal: journal, transport: bus, endpoint: "memory://bridge/replay")
        let client = try ReplayClient(transport: bus, endpoint: "memory://bridge/replay")
        let src = try #require(sent.first?.envelope.src)
        let kept = try #require(journal.streams[src])
        #expect(kept.lowerBound > 1, "retention dropped the oldest")
        _ = try client.request(src: src, from: 1, to: 50)
        try server.serve()
        let reply = try #require(try client.nextReply())
        #expect(reply.header.lost == Int(kept.lowerBound) - 1)
        #expect(reply.header.count == 50 - reply.header.lost)
    }

    @Test("over libzmq: a producer's replay endpoint on ipc answers a DEALER")
    func overSockets() throws {
        let dir = try TemporaryDirectory()
        // No bus needed: the replay endpoint is the producer's own socket.
        let transport = ZMQTransport(context: ZMQContext(), config: freeBusConfig())
        let (publisher, _) = try Self.producer(MemoryBus(), dir: dir)
        let endpoint = "ipc://" + dir.path("replay.sock")
        let server = try ReplayServer(journal: try #require(publisher.journal), transport: transport, endpoint: endpoint)
        let client = try ReplayClient(transport: transport, endpoint: endpoint)
        let src = try #require(publisher.journal?.streams.keys.first)
        _ = try client.request(src: src, from: 1, to: 50)
        var reply: ReplayReply?
        #expect(
            try waitUntil(timeoutS: 10, intervalS: 0.01) {
                try server.serve()
                reply = try client.nextReply()
                return reply != nil
            })
        #expect(reply?.header.count == 50 && reply?.messages.count == 50)
    }
}
