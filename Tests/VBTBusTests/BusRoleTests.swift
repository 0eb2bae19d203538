import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// `BusRole`: what every runtime's publishing and heartbeat are wired through, on the in-memory bus.
@Suite("bus role: publishing, input counts and the heartbeat, wired once")
struct BusRoleTests {
    /// What a recovery knows, set by hand: a test double standing in for the in-order input.
    struct Counts: RecoveryCounts {
        var recoveredMessages = 0
        var lostMessages = 0
        var outstanding = 0
    }

    /// The smallest role: a publisher, a subscriber to `probe.`, the counts above.
    final class Role: BusRole {
        let publisher: Publisher
        let subscriber: Subscriber
        var input = Counts()
        let logger = Logger(label: "test.role") { _ in SwiftLogNoOpLogHandler() }
        var heartbeat = HeartbeatSchedule(role: "probe", name: "probe")

        init(bus: MemoryBus) throws {
            publisher = try Publisher(transport: bus, program: "probe")
            subscriber = try Subscriber(transport: bus, prefixes: [HeartbeatMessage.topicPrefix], logger: logger)
        }
    }

    @Test("the heartbeat says what arrived and what recovery fetched, lost and waits for")
    func heartbeat() throws {
        let bus = MemoryBus()
        let role = try Role(bus: bus)
        let producer = try Publisher(transport: bus, program: "producer")
        for _ in 0..<3 { try producer.publish(HeartbeatMessage(role: "producer", uptimeS: 1, intervalS: 1), station: "producer") }
        while try role.subscriber.next(timeoutMs: 0) != nil {}
        role.input = Counts(recoveredMessages: 4, lostMessages: 2, outstanding: 1)
        let counters = role.inputCounters
        #expect(counters.received == 3)
        #expect(counters.recovered == 4 && counters.lost == 2 && counters.outstanding == 1)
        let watcher = try Subscriber(transport: bus, prefixes: ["heartbeat.probe"], logger: role.logger)
        try role.heartbeat.tick(role)
        let sent = try #require(try watcher.next(timeoutMs: 0)).payload(as: HeartbeatMessage.self)
        #expect(sent.role == "probe" && sent.inputs == counters && sent.replay == nil)
    }

    @Test("a message that cannot be encoded is dropped, and the next one goes")
    func send() throws {
        let bus = MemoryBus()
        let role = try Role(bus: bus)
        let watcher = try Subscriber(transport: bus, prefixes: ["heartbeat.other"], logger: role.logger)
        try role.send(HeartbeatMessage(role: "other", uptimeS: .nan, intervalS: 1), station: "other")
        try role.send(HeartbeatMessage(role: "other", uptimeS: 2, intervalS: 1), station: "other", athlete: "ana")
        let first = try #require(try watcher.next(timeoutMs: 0))
        #expect(try first.payload(as: HeartbeatMessage.self).uptimeS == 2 && first.envelope.athlete == "ana")
        #expect(try watcher.next(timeoutMs: 0) == nil, "the NaN one was not sent")
    }
}
