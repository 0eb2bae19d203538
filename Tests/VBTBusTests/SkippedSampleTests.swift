import Foundation
import Logging
import Testing
import VBTTesting
import VBTWire

@testable import VBTBus

/// `decodeSkippedSample` and `Subscriber.sampleSensors`: a sample of a sensor the consumer
/// does not use is read only as far as its envelope, which must be exactly the one the whole
/// decoder reads; anything unusual is left to the whole decoder.
@Suite("Skipped samples")
struct SkippedSampleTests {
    /// A laser's and a wearable's samples as a bridge sends them (`BridgeSampleTests` reads them too).
    static let distance = SampleMessage(
        .distance([
            SampleMessage.DistanceReading(t: 1_795_910_514.784538, distanceMm: 587.2, state: .idle, accG: Vector3(0.105, 0.201, 1.021)),
            SampleMessage.DistanceReading(t: 1_795_910_514.804538, distanceMm: 592.5),
        ]), device: "sim")
    static let posture = SampleMessage(
        .posture([SampleMessage.PostureReading(t: 1_795_910_514.786169, acc: Vector3(-0.02, 0, 9.84), mag: Vector3(29.8, -10.2, -40.6))]))

    @Test("another sensor's sample has the envelope the whole decoder reads, and only its sensor")
    func sameEnvelope() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "bridge-1")
        for (index, ts) in [1_795_910_514.820954, 1_700_000_000.5, 1_800_000_000, 0.25].enumerated() {
            let (topic, body) = try stamper.encode(Self.distance, station: "rack-\(index)", athlete: index == 1 ? "ana" : nil, ts: ts)
            let whole = try decodeMessage(topic: topic, body: body)
            let skipped = try #require(decodeSkippedSample(topic: topic, body: body, using: [SampleMessage.postureSensor]))
            var expected = whole.envelope
            expected.athlete = nil  // not kept: nobody reads a skipped sample's athlete
            #expect(skipped.envelope == expected)
            #expect(skipped.topic == whole.topic)
            #expect(skipped.fields == JSONObject([("sensor", .string("distance"))]))
            #expect(skipped.body.isEmpty)
            // Skipped by `decodeMessage` in the pass that reads a bridge's sample: the same message.
            for mode in [SampleReadings.located, .checked, .read(["distance"])] {
                let inOnePass = try decodeMessage(topic: topic, body: body, samples: mode, using: [SampleMessage.postureSensor])
                #expect(inOnePass.envelope == skipped.envelope && inOnePass.topic == skipped.topic, "\(mode)")
                #expect(inOnePass.fields == skipped.fields && inOnePass.body.isEmpty, "\(mode)")
                // A sensor it uses: the whole message.
                let used = try decodeMessage(topic: topic, body: body, samples: mode, using: ["distance"])
                #expect(used.envelope == whole.envelope && used.body == body && used.fields == whole.fields, "\(mode)")
            }
        }
    }

    @Test("a sensor the consumer uses, and anything unusual, is left to the whole decoder")
    func leftToTheDecoder() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "bridge-1")
        let (topic, body) = try stamper.encode(Self.distance, station: "rack-1", ts: 1_795_910_514.5)
        #expect(decodeSkippedSample(topic: topic, body: body, using: ["distance", "imu"]) == nil)
        let (postureTopic, postureBody) = try stamper.encode(Self.posture, station: "rack-1", ts: 1_795_910_514.5)
        #expect(decodeSkippedSample(topic: postureTopic, body: postureBody, using: [SampleMessage.postureSensor]) == nil)
        let text = String(decoding: body, as: UTF8.self)
        let variants: [(String, String)] = [
            ("another station in the body than the topic's", text.replacingOccurrences(of: "\"station\":\"rack-1\"", with: "\"station\":\"rack-2\"")),
            ("seq 0", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":0,")),
            ("a fractional seq", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":1.5,")),
            ("an escape in src", text.replacingOccurrences(of: "\"src\":\"bridge-1/", with: "\"src\":\"bridge\\u002d1/")),
            ("an exponent in ts", text.replacingOccurrences(of: "\"ts\":1795910514.500000", with: "\"ts\":1.7959105145e9")),
            ("version 2", text.replacingOccurrences(of: "\"v\":1,", with: "\"v\":2,")),
            ("src twice", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":1,\"src\":\"x/sample.rack-1\",")),
            ("an object before the sensor", text.replacingOccurrences(of: "\"sensor\":", with: "\"extra\":{\"a\":1},\"sensor\":")),
            ("an athlete that is not a string", text.replacingOccurrences(of: "\"sensor\":", with: "\"athlete\":7,\"sensor\":")),
            ("a leading zero", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":01,")),
            ("a word that is no literal before the sensor", text.replacingOccurrences(of: "\"sensor\":", with: "\"flag\":tru,\"sensor\":")),
            ("cut short", String(text.prefix(60))),
        ]
        for (what, variant) in variants {
            #expect(variant != text, "the variant changes the frame: \(what)")
            #expect(decodeSkippedSample(topic: topic, body: Array(variant.utf8), using: [SampleMessage.postureSensor]) == nil, "\(what)")
        }
        #expect(decodeSkippedSample(topic: Array("rep.rack-1".utf8), body: body, using: []) == nil, "only samples are skipped")
        // Other short members before the sensor are passed.
        let others = text.replacingOccurrences(of: "\"sensor\":", with: "\"flag\":true,\"none\":null,\"x\":-1.5,\"note\":\"a \\\"b\\\"\",\"sensor\":")
        #expect(others != text)
        #expect(decodeSkippedSample(topic: topic, body: Array(others.utf8), using: [SampleMessage.postureSensor])?.envelope.seq == 1)
    }

    @Test("a subscriber hands on the samples it skips in order, counted for their stream, and the others whole")
    func subscriberSkips() throws {
        let bus = MemoryBus()
        let subscriber = try Subscriber(transport: bus, prefixes: ["sample."], logger: Logger(label: "skip-test"))
        subscriber.samples = .located
        subscriber.sampleSensors = [SampleMessage.postureSensor]
        let publisher = try Publisher(transport: bus, program: "bridge")
        for index in 0..<6 {
            try publisher.publish(index % 3 == 2 ? Self.posture : Self.distance, station: "rack-1", ts: 1_795_910_514 + Double(index))
        }
        var received: [BusMessage] = []
        while let message = try subscriber.next(timeoutMs: 0) { received.append(message) }
        #expect(received.map(\.envelope.seq) == [1, 2, 3, 4, 5, 6])
        #expect(received.map { $0.body.isEmpty } == [true, true, false, true, true, false])
        #expect(try received[2].payload(as: SampleMessage.self) == Self.posture)
        #expect(subscriber.stats.totals.gaps == 0 && subscriber.stats.totals.malformed == 0 && subscriber.stats.totals.received == 6)
    }
    @Test("a subscriber serving some stations reads and counts only their samples; the others are dropped unread")
    func subscriberSkipsOtherStations() throws {
        let bus = MemoryBus()
        let subscriber = try Subscriber(transport: bus, prefixes: ["sample.", "status."], logger: Logger(label: "skip-test"))
        subscriber.samples = .located
        subscriber.sampleStations = { $0.hasPrefix("rack-") }
        let publisher = try Publisher(transport: bus, program: "bridge")
        let stations = ["rack-1", "bench-1", "rack-2", "bench-2"]
        for (index, station) in stations.enumerated() {
            try publisher.publish(Self.distance, station: station, ts: 1_795_910_514 + Double(index))
        }
        // Not a sample: never skipped, whatever its station.
        let status = StatusMessage(state: .streaming, sensor: "distance", device: "/dev/ttyACM0", rateHz: 50)
        try publisher.publish(status, station: "bench-1", ts: 1_795_910_520)
        var received: [BusMessage] = []
        while let message = try subscriber.next(timeoutMs: 0) { received.append(message) }
        #expect(received.map(\.topic) == ["sample.rack-1", "sample.rack-2", "status.bench-1"])
        #expect(try received.prefix(2).map { try $0.payload(as: SampleMessage.self) } == [Self.distance, Self.distance])
        #expect(try received[2].payload(as: StatusMessage.self) == status)
        #expect(subscriber.otherStationsSkipped == 2)
        #expect(subscriber.stats.totals.gaps == 0 && subscriber.stats.totals.malformed == 0 && subscriber.stats.totals.received == 3)
        // No stream of another station's samples is kept.
        let sources = subscriber.stats.sources.keys
        #expect(sources.count == 3 && !sources.contains { $0.hasSuffix("/sample.bench-1") || $0.hasSuffix("/sample.bench-2") })
    }
}
