import Foundation
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// A journalling producer of samples over the in-memory bus (a labelled test double: its clock is
/// moved by hand), with its replay server and heartbeat: what the in-order input's tests and the
/// recovery engine's consume. Each suite's rig adds its consumer to it.
class ProducerRig {
    let dir: TemporaryDirectory
    let bus: MemoryBus
    let producer: Publisher
    let server: ReplayServer
    var heartbeat = HeartbeatSchedule(role: "sensor-bridge", name: "bridge-rack-01")
    private var t: Double

    /// `bus`: made by the suite's rig first when its consumer needs it before this is set up.
    init(bus: MemoryBus = MemoryBus()) throws {
        self.bus = bus
        dir = try TemporaryDirectory()
        producer = try Publisher(transport: bus, program: "sensor-bridge")
        producer.journal = try Journal(
            settings: JournalSettings(directory: dir.path("journal")), instance: producer.stamper.instance, clock: bus.clock)
        server = try ReplayServer(journal: try #require(producer.journal), transport: bus, endpoint: "memory://bridge/replay")
        t = bus.clock.wallSeconds()
    }

    /// Publishes `count` one-reading samples of `station`, 20 ms apart.
    func samples(_ count: Int, station: String = "rack-01") throws {
        for _ in 0..<count {
            t += 0.02
            try producer.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: t, distanceMm: 500)])), station: station, ts: t)
        }
    }

    /// The src of `station`'s sample stream in the producer's journal.
    func src(_ station: String = "rack-01") throws -> String {
        try #require(producer.journal?.streams.keys.first { $0.hasSuffix("/sample.\(station)") })
    }
}
