import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// End-to-end tests over the real `vbt-bus` and `vbt` processes on TCP loopback.
/// Serialized: each starts several processes and the machine has two cores.
@Suite("Bus processes", .serialized)
struct BusProcessTests {
    /// A 200-byte-class sample body for load tests.
    static let loadBody = #"{"sensor":"distance","device":"sim","samples":[{"t":1763812345.123456,"distance_mm":512.5,"state":"CONCENTRIC"}]}"#

    private func startBus(
        _ config: BusConfig, in dir: TemporaryDirectory, heartbeat: Double = 0.1, extra: [String] = []
    ) throws -> ManagedProcess {
        let bus = try ManagedProcess(
            "vbt-bus", ["--heartbeat-interval", "\(heartbeat)"] + extra,
            environment: config.environmentVariables, workDirectory: dir.url)
        #expect(bus.waitForStderr("bus forwarding", timeoutS: 20), "vbt-bus did not start: \(bus.stderrText)")
        return bus
    }

    private func startRecorder(_ config: BusConfig, in dir: TemporaryDirectory, name: String, extra: [String]) throws -> ManagedProcess {
        let recorder = try ManagedProcess(
            "vbt",
            [
                "record", "--out", dir.path("\(name).jsonl"), "--stats", dir.path("\(name).stats.json"),
                "--stats-interval", "0.1",
            ] + extra,
            environment: config.environmentVariables, workDirectory: dir.url)
        #expect(recorder.waitForStderr("bus connected", timeoutS: 20), "recorder did not connect: \(recorder.stderrText)")
        return recorder
    }

    @Test("100,000 messages from each of 2 publishers reach 3 subscribers exactly once and in order")
    func exactlyOnceInOrder() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let perPublisher = 100_000
        // Publishers at full speed outrun these subscribers, which have no
        // journal to fetch from: the bus must hold the whole flood. Twice
        // over: a libzmq pipe learns what its reader took only every half
        // mark (pipe_t::compute_lwm, libzmq src/pipe.cpp), so a pipe at its
        // mark may hold as little as half of it, and a subscriber's own
        // socket queues only `subscriberHighWaterMark` more.
        let bus = try startBus(config, in: dir, extra: ["--high-water-mark", "\(4 * perPublisher)"])
        let recorders = try (1...3).map { index in
            try startRecorder(config, in: dir, name: "sub\(index)", extra: ["--count", "\(2 * perPublisher)", "sample."])
        }
        let publishers = try ["rack-01", "rack-02"].map { station in
            try ManagedProcess(
                "vbt",
                [
                    "pub", "sample.\(station)", Self.loadBody, "--count", "\(perPublisher)",
                    "--rate", "0", "--wait-subscribers", "20",
                ],
                environment: config.environmentVariables, workDirectory: dir.url)
        }
        for publisher in publishers {
            #expect(publisher.waitForExit(timeoutS: 300) == 0, "publisher: \(publisher.stderrText)")
            #expect(!publisher.stderrText.contains("no subscriber"))
        }
        for (index, recorder) in recorders.enumerated() {
            #expect(recorder.waitForExit(timeoutS: 300) == 0, "recorder \(index + 1): \(recorder.stderrText)")
            let lines = try readRecording(dir.path("sub\(index + 1).jsonl"))
            #expect(lines.count == 2 * perPublisher)
            var nextSeq: [String: Double] = [:]
            var outOfOrder = 0
            for line in lines {
                guard case .string(let src)? = line.msg["src"], case .number(let seq)? = line.msg["seq"] else {
                    Issue.record("recorded message without src/seq"); break
                }
                if seq != nextSeq[src, default: 1] { outOfOrder += 1 }
                nextSeq[src] = seq + 1
            }
            #expect(outOfOrder == 0)
            #expect(nextSeq.count == 2)
            #expect(nextSeq.values.allSatisfy { $0 == Double(perPublisher + 1) })
            let stats = try #require(readStats(dir.path("sub\(index + 1).stats.json")))
            let samples = stats.sources.values.filter { $0.topic.hasPrefix("sample.") }
            #expect(samples.count == 2)
            #expect(samples.allSatisfy { ($0.received, $0.gaps, $0.missing, $0.duplicates) == (perPublisher, 0, 0, 0) })
            #expect(stats.malformed.isEmpty)
        }
        #expect(bus.terminate() == 0)
    }

    @Test("a killed and restarted bus: everyone reconnects, and the loss shows up as gaps")
    func busRestart() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let total = 3_000
        var bus = try startBus(config, in: dir)
        let recorders = try (1...2).map { try startRecorder(config, in: dir, name: "sub\($0)", extra: ["sample."]) }
        let publisher = try ManagedProcess(
            "vbt", ["pub", "sample.rack-07", Self.loadBody, "--count", "\(total)", "--rate", "400", "--wait-subscribers", "20"],
            environment: config.environmentVariables, workDirectory: dir.url)
        func stats(_ index: Int) -> SubscriberStats? { readStats(dir.path("sub\(index).stats.json")) }
        func samples(_ stats: SubscriberStats?) -> [SourceStats] {
            stats?.sources.values.filter { $0.topic == "sample.rack-07" } ?? []
        }
        // Kill the bus mid-stream, once both subscribers have seen a good part of it.
        #expect(waitUntil(timeoutS: 60) { (1...2).allSatisfy { (samples(stats($0)).first?.received ?? 0) >= 400 } })
        // libzmq queues on the connecting side while a peer is away, so a quick
        // restart can lose nothing. To be sure the outage loses messages, the
        // subscribers are frozen through it: the new bus forwards at least 100
        // messages (seen by an observer) before they can reconnect.
        for recorder in recorders { recorder.signal(SIGSTOP) }
        bus.signal(SIGKILL)
        #expect(bus.waitForExit(timeoutS: 10) != nil)
        bus = try startBus(config, in: dir)
        let context = ZMQContext()
        var logger = Logger(label: "test.observer")
        logger.logLevel = .error
        let observer = try Subscriber(context: context, config: config, prefixes: ["sample.rack-07"], logger: logger)
        var observed = 0
        #expect(
            try waitUntil(timeoutS: 60, intervalS: 0) {
                if try observer.next(timeoutMs: 100) != nil { observed += 1 }
                return observed >= 100
            })
        for recorder in recorders { recorder.signal(SIGCONT) }
        // Everyone reconnects by itself: the stream runs to its last message at every subscriber.
        let reachedEnd = waitUntil(timeoutS: 60) {
            (1...2).allSatisfy { index in samples(stats(index)).first?.lastSeq == UInt64(total) }
        }
        #expect(reachedEnd, "stream did not resume: \(recorders.map(\.stderrText))")
        #expect(publisher.waitForExit(timeoutS: 30) == 0)
        for (offset, recorder) in recorders.enumerated() {
            #expect(recorder.terminate() == 0)
            let final = try #require(stats(offset + 1))
            #expect(samples(final).count == 1)
            let source = try #require(samples(final).first)
            #expect(source.gaps >= 1, "the outage must show as a gap")
            #expect(source.missing >= 100)
            #expect(source.received + source.missing == total, "every message is either received or counted missing")
            #expect(source.duplicates == 0)
            #expect(final.busRestarts == 1)
            #expect(recorder.stderrText.contains("bus restarted"))
        }
        #expect(bus.terminate() == 0)
    }

    @Test("malformed input through the bus is counted by reason and good messages keep flowing")
    func malformedThroughBus() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let bus = try startBus(config, in: dir)
        let context = ZMQContext()
        let subscriber = try #require(try connectedSubscriber(context: context, config: config, prefixes: [""]), "bus did not answer")
        // A raw XPUB socket, so the test can wait for the forwarded subscription.
        let raw = try ZMQSocket(context, .xpub)
        try raw.setReceiveTimeout(ms: 20_000)
        try raw.connect(config.pubEndpoint)
        #expect(try raw.receive(maxFrames: 1) != nil)

        let topic = Array("sample.rack-01".utf8)
        let src = "malformed-test/sample.rack-01"
        var goodSent = 0
        func sendGood() throws {
            goodSent += 1
            try raw.send(frames: [topic, sampleBody(seq: goodSent, src: src)])
        }
        try sendGood()
        // An oversize frame never gets through the bus (the next test); every other kind does.
        let cases = malformedCases.filter { $0.expected != .oversize }
        for input in cases {
            try raw.send(frames: input.frames)
            try sendGood()
        }
        var goodReceived: [UInt64] = []
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0) {
                if let message = try subscriber.next(timeoutMs: 100), message.envelope.src == src {
                    goodReceived.append(message.envelope.seq)
                }
                return goodReceived.count == goodSent
            })
        #expect(goodReceived == (1...UInt64(goodSent)).map { $0 })
        var expected: [String: Int] = [:]
        for input in cases { expected[input.expected.rawValue, default: 0] += 1 }
        #expect(cases.count >= 20)
        #expect(subscriber.stats.malformed == expected)
        #expect(subscriber.stats.sources[src]?.gaps == 0)
        raw.close()
        #expect(bus.terminate() == 0)
    }

    @Test("routed samples: each shard's subscriber gets only its stations' samples, under their own topics; the rest each sample once")
    func routedSamples() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let bus = try startBus(config, in: dir)
        let context = ZMQContext()
        let everything = try #require(try connectedSubscriber(context: context, config: config, prefixes: [""]), "bus did not answer")
        let shards = try (1...2).map { shard in
            try #require(
                try connectedSubscriber(
                    context: context, config: config, prefixes: ["sample."], route: ShardRoute.prefix(shard: shard, of: 2)),
                "bus did not answer")
        }
        // A raw XPUB socket: it sees the subscriptions the bus passes on, routed ones as plain `sample.`.
        let raw = try ZMQSocket(context, .xpub)
        try raw.setReceiveTimeout(ms: 20_000)
        try raw.connect(config.pubEndpoint)
        var upstream: Set<String> = []
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0) {
                if let frame = try raw.receive(dontWait: true, maxFrames: 1)?.frames.first, frame.first == 1 {
                    upstream.insert(String(decoding: frame.dropFirst(), as: UTF8.self))
                }
                return upstream.contains("sample.")
            })
        #expect(!upstream.contains { $0.hasPrefix("~") }, "a route went upstream: \(upstream)")

        // Names where one begins another, which no prefix subscription could split.
        let stations = (1...24).map { "rack-\($0)" }
        var sent = 0
        for round in 1...5 {
            for station in stations {
                let body = sampleBody(seq: round, src: "route-test/sample.\(station)") { $0["station"] = "\"\(station)\"" }
                try raw.send(frames: [Array("sample.\(station)".utf8), body])
                sent += 1
            }
        }
        // Only the bus routes: a publisher's routed topic is refused.
        try raw.send(frames: [Array("~1/2/sample.rack-1".utf8), sampleBody(seq: 6, src: "route-test/sample.rack-1") { $0["station"] = #""rack-1""# }])

        var got: [[BusMessage]] = [[], []]
        var all: [BusMessage] = []
        var routedOut = 0
        var refused = 0
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0) {
                for (index, shard) in shards.enumerated() {
                    while let message = try shard.next(timeoutMs: 0) { got[index].append(message) }
                }
                while let message = try everything.next(timeoutMs: 10) {
                    if message.topic.hasPrefix("sample.") { all.append(message) }
                    if message.topic == Subscriber.busHeartbeatTopic, let counters = try message.payload(as: HeartbeatMessage.self).bus {
                        (routedOut, refused) = (counters.routed ?? 0, counters.refused ?? 0)
                    }
                }
                return got[0].count + got[1].count == sent && all.count == sent && routedOut == sent && refused == 1
            }, "shards \(got[0].count) + \(got[1].count), everything \(all.count) of \(sent); routed \(routedOut), refused \(refused)")
        for (index, messages) in got.enumerated() {
            let expected = stations.filter { ShardRoute.shard(of: $0.utf8, shards: 2) == index + 1 }
            #expect(!expected.isEmpty)
            #expect(Set(messages.map(\.topic)) == Set(expected.map { "sample.\($0)" }))
            #expect(messages.allSatisfy { $0.topic == "sample.\($0.envelope.station)" })
            #expect(shards[index].stats.totals.gaps == 0 && shards[index].stats.totals.duplicates == 0)
            #expect(shards[index].stats.totals.malformed == 0)
        }
        // The subscriber of everything received the routed copies too, and dropped them unread.
        #expect(everything.routedCopiesSkipped == sent)
        #expect(everything.stats.totals.duplicates == 0 && everything.stats.totals.malformed == 0)
        raw.close()
        #expect(bus.terminate() == 0)
    }

    @Test("a frame over the size limit is refused by the bus as it is read: no subscriber gets it, the sender is cut off, others flow on")
    func oversizeRefusedAtTheBus() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let bus = try startBus(config, in: dir)
        let context = ZMQContext()
        let subscriber = try #require(try connectedSubscriber(context: context, config: config, prefixes: [""]), "bus did not answer")
        let good = try Publisher(context: context, config: config, program: "good")
        #expect(try good.waitForSubscriber(topic: "sample.rack-02", timeoutS: 20))
        // A raw socket, as an attacker's: a sample of 4 MiB.
        let raw = try ZMQSocket(context, .pub)
        try raw.connect(config.pubEndpoint)
        let huge = Array("{\"v\":1,\"pad\":\"\(String(repeating: "x", count: 4 << 20))\"}".utf8)
        var received = 0
        var sizes: [Int] = []
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0) {
                try raw.send(frames: [Array("sample.rack-01".utf8), huge])
                try good.publish(StatusMessage(state: .streaming, sensor: "distance", device: "sim"), station: "rack-02")
                while let message = try subscriber.next(timeoutMs: 20) {
                    received += 1
                    sizes.append(message.body.count)
                }
                return received >= 20
            })
        #expect(sizes.allSatisfy { $0 < BusConfig.maxFrameBytes }, "nothing over the limit reached the subscriber")
        #expect(subscriber.stats.malformed["oversize"] == nil)
        #expect(subscriber.stats.sources.values.contains { $0.topic == "status.rack-02" && $0.gaps == 0 })
        raw.close()
        #expect(bus.terminate() == 0)
    }

    @Test("vbt-bus exits 0 on SIGTERM and 1 with a one-line reason when its port is taken")
    func busExitCodes() throws {
        let dir = try TemporaryDirectory()
        let config = freeBusConfig()
        let bus = try startBus(config, in: dir)
        let second = try ManagedProcess("vbt-bus", [], environment: config.environmentVariables, workDirectory: dir.url)
        #expect(second.waitForExit(timeoutS: 20) == 1)
        let lines = second.stderrText.split(separator: "\n").filter { $0.hasPrefix("vbt-bus:") }
        #expect(lines.count == 1)
        #expect(lines.first?.contains("Address already in use") == true)
        #expect(bus.terminate() == 0)
        let badFlag = try ManagedProcess("vbt-bus", ["--heartbeat-interval", "-1"], workDirectory: dir.url)
        #expect(badFlag.waitForExit(timeoutS: 20) != 0)
    }
}
