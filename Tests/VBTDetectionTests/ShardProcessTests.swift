import Foundation
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTWire

/// `rep-detector --shard K/N` over real processes: two detectors split a few stations by the
/// hash of their names, and one of them is replaced live while the other runs on.
@Suite("rep-detector shards", .serialized)
struct ShardProcessTests {
    static let stations = ["rack-01", "rack-02", "rack-03", "bench-01", "bench-02"]

    /// What the test hears: every rep, and which instance heartbeats under each shard's name.
    final class Listener {
        let subscriber: Subscriber
        /// Each rep heard: its station and the instance that published it.
        var reps: [(station: String, detector: String)] = []
        var instances: [String: Set<String>] = [:]
        init(_ subscriber: Subscriber) { self.subscriber = subscriber }

        func drain() throws {
            while let message = try subscriber.next(timeoutMs: 20) {
                if let rep = try? message.payload(as: RepMessage.self) {
                    reps.append((message.envelope.station, rep.detector))
                } else if message.envelope.type == HeartbeatMessage.type {
                    instances[message.envelope.station, default: []].insert(String(streamInstance(message.envelope.src)))
                }
            }
        }
    }

    /// One rep's bar path at every station, its readings from `start` on.
    func lift(_ publisher: Publisher, start: Double) throws {
        let path = distancePath([(523, 0), (523, 0.4), (135, 1.1), (520, 0.8), (520, 0.6)], start: start)
        for station in Self.stations {
            for chunk in stride(from: 0, to: path.count, by: 5) {
                let readings = path[chunk..<min(chunk + 5, path.count)].map { SampleMessage.DistanceReading(t: $0.t, distanceMm: $0.mm) }
                try publisher.publish(SampleMessage(.distance(readings)), station: station, ts: readings.last!.t)
            }
        }
    }

    @Test("two shards: each rep once, from the shard its station hashes to; replacing shard 2 leaves shard 1 running")
    func twoShards() throws {
        let bus = try TestBus()
        let subscriber = try #require(
            try connectedSubscriber(context: bus.context, config: bus.config, prefixes: ["rep.", "heartbeat.rep-detector"]), "bus did not answer")
        let listener = Listener(subscriber)
        func shard(_ k: Int, _ extra: [String] = []) throws -> ManagedProcess {
            try bus.start(
                "rep-detector", ["--shard", "\(k)/2", "--patterns", bus.dir.path("p\(k).json"), "--journal", bus.dir.path("j\(k)")] + extra)
        }
        let first = try shard(1), second = try shard(2)
        defer { _ = first.terminate() }
        #expect(first.waitForStderr("journalling", timeoutS: 20) && second.waitForStderr("journalling", timeoutS: 20))
        // Each heartbeats under its own name (the notifier and the console tell them apart).
        #expect(
            try waitUntil(timeoutS: 20) {
                try listener.drain()
                return listener.instances["rep-detector-1"] != nil && listener.instances["rep-detector-2"] != nil
            }, "\(listener.instances)")
        #expect(listener.instances["rep-detector"] == nil)
        let instance1 = try #require(listener.instances["rep-detector-1"]?.first)
        let instance2 = try #require(listener.instances["rep-detector-2"]?.first)
        #expect(instance1 != instance2)
        let expectedShard = Dictionary(uniqueKeysWithValues: Self.stations.map { ($0, StationSelection.shard(of: $0, shards: 2)) })
        #expect(Set(expectedShard.values) == [1, 2], "the stations fall in both shards: \(expectedShard)")

        let publisher = try Publisher(context: bus.context, config: bus.config, program: "shard-test")
        #expect(try publisher.waitForSubscriber(topic: "sample.rack-01", timeoutS: 20))
        let t0 = 1_763_812_345.0
        try lift(publisher, start: t0)
        #expect(
            try waitUntil(timeoutS: 20) {
                try listener.drain()
                return listener.reps.count >= Self.stations.count
            }, "\(listener.reps.count) reps")
        try listener.drain()
        #expect(listener.reps.map(\.station).sorted() == Self.stations.sorted(), "each station's rep once")
        for rep in listener.reps {
            #expect(rep.detector == (expectedShard[rep.station] == 1 ? instance1 : instance2), "\(rep.station) from its shard")
        }

        // Shard 2 is replaced live; shard 1 is not asked (another shard) and runs on.
        let incoming = try shard(2, ["--takeover"])
        defer { _ = incoming.terminate() }
        #expect(incoming.waitForStderr("took over", timeoutS: 30), "\(incoming.stderrText)")
        #expect(incoming.stderrText.contains("from=\(instance2)"), "the state came from shard 2: \(incoming.stderrText)")
        #expect(second.waitForExit(timeoutS: 20) == 0, "\(second.stderrText)")
        #expect(first.isRunning && !first.stderrText.contains("handed over") && !first.stderrText.contains("takeover requested"))
        #expect(incoming.waitForStderr("journalling", timeoutS: 20))

        listener.reps = []
        listener.instances = [:]
        try lift(publisher, start: t0 + 5)
        #expect(
            try waitUntil(timeoutS: 20) {
                try listener.drain()
                return listener.reps.count >= Self.stations.count && listener.instances["rep-detector-2"] != nil
            }, "\(listener.reps.count) reps")
        try listener.drain()
        #expect(listener.reps.map(\.station).sorted() == Self.stations.sorted(), "each station's second rep once")
        // The old shard 2's last heartbeats (its parting one among them) may still come after the
        // reset: the new instance is the one that is not it, and there is exactly one.
        let newInstances = listener.instances["rep-detector-2", default: []].subtracting([instance2])
        #expect(newInstances.count == 1 && listener.instances["rep-detector-1"] == [instance1], "\(listener.instances)")
        let newInstance = try #require(newInstances.first, "no new instance beat as rep-detector-2: \(listener.instances)")
        for rep in listener.reps {
            #expect(rep.detector == (expectedShard[rep.station] == 1 ? instance1 : newInstance), "\(rep.station) from its shard")
        }
        #expect(subscriber.stats.totals.gaps == 0 && subscriber.stats.totals.duplicates == 0)
        #expect(first.terminate() == 0 && incoming.terminate() == 0)
    }

    @Test("a bad --shard is refused at start, saying what to write", arguments: ["0/2", "3/2", "x"])
    func refused(shard: String) throws {
        let bus = try TestBus()
        let process = try bus.start("rep-detector", ["--shard", shard, "--no-journal", "--patterns", bus.dir.path("p.json")])
        let code = process.waitForExit(timeoutS: 20)
        #expect(code != nil && code != 0, "exit \(String(describing: code))")
        #expect(process.stderrText.contains("--shard") && process.stderrText.contains("K/N"), "\(process.stderrText)")
    }
}
