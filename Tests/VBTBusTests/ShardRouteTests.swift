import Logging
import Testing
import VBTTesting
import VBTWire

@testable import VBTBus

@Suite("Samples routed to split detectors")
struct ShardRouteTests {
    @Test("a route is read apart, and anything else is not a route")
    func parse() {
        #expect(ShardRoute.parse(Array("~1/2/sample.rack-7".utf8))! == (1, 2, 5))
        #expect(ShardRoute.parse(Array("~12/64/sample.".utf8))! == (12, 64, 7))
        for text in ["sample.rack-7", "~0/2/sample.", "~3/2/sample.", "~1/65/sample.", "~1/2", "~/2/x", "~1//x", "~1/2x/", "~1000/2000/", ""] {
            #expect(ShardRoute.parse(Array(text.utf8)) == nil, "\(text)")
        }
        #expect(ShardRoute.unrouted(Array("~2/3/sample.bench-1".utf8)) == Array("sample.bench-1".utf8))
        #expect(ShardRoute.unrouted(Array("sample.bench-1".utf8)) == nil)
    }

    @Test("a sample's route is its station's shard, the same the detectors serve by")
    func routedTopic() {
        for station in ["rack-1", "rack-10", "bench-01", "platform-3", "r"] {
            let topic = Array("sample.\(station)".utf8)
            for shards in 1...5 {
                let routed = ShardRoute.routed(topic, stationFrom: "sample.".utf8.count, shards: shards)
                let shard = ShardRoute.shard(of: station.utf8, shards: shards)
                #expect(routed == Array((ShardRoute.prefix(shard: shard, of: shards) + "sample.\(station)").utf8))
                #expect((1...shards).contains(shard))
            }
        }
        // The hash is FNV-1a 64, written down so every process splits alike.
        #expect(ShardRoute.fnv1a64("a".utf8) == 0xaf63_dc4c_8601_ec8c)
    }

    @Test("over the in-memory bus: a routed subscriber gets its shard's samples under their own topics, others each sample once")
    func memoryBus() throws {
        let bus = MemoryBus()
        let logger = Logger(label: "route-test")
        let shards = try (1...2).map {
            try Subscriber(transport: bus, prefixes: ["sample.", "status."], route: ShardRoute.prefix(shard: $0, of: 2), logger: logger)
        }
        let everything = try Subscriber(transport: bus, prefixes: [""], logger: logger)
        let publisher = try Publisher(transport: bus, program: "bridge")
        let stations = (1...12).map { "rack-\($0)" }
        let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: 1_795_910_514.5, distanceMm: 800)]), device: "sim")
        for station in stations { try publisher.publish(sample, station: station, ts: 1_795_910_514) }
        try publisher.publish(StatusMessage(state: .streaming, sensor: "distance", device: "sim", rateHz: 50), station: "rack-1", ts: 1_795_910_515)
        for (index, shard) in shards.enumerated() {
            var topics: [String] = []
            while let message = try shard.next(timeoutMs: 0) { topics.append(message.topic) }
            let mine = stations.filter { ShardRoute.shard(of: $0.utf8, shards: 2) == index + 1 }.map { "sample.\($0)" }
            // Its own samples, and what is not a sample as it asked for it.
            #expect(topics == mine + ["status.rack-1"])
            #expect(shard.stats.totals.duplicates == 0 && shard.stats.totals.malformed == 0)
        }
        var samples = 0
        while let message = try everything.next(timeoutMs: 0) {
            if message.topic.hasPrefix("sample.") { samples += 1 }
        }
        #expect(samples == stations.count)
        #expect(everything.routedCopiesSkipped == stations.count)
    }
}
