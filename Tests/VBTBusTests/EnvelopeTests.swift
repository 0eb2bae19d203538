import Foundation
import Logging
import Testing
import VBTSensors
import VBTTesting

@testable import VBTBus
@testable import VBTWire

@Suite("Envelope and payloads")
struct EnvelopeTests {
    private func roundTrip<P: BusPayload & Equatable>(_ payload: P, station: String = "rack-01") throws -> (BusMessage, P) {
        var stamper = EnvelopeStamper(program: "test")
        let frames = try stamper.encode(payload, station: station, athlete: "ana", ts: 1_763_812_345.25)
        let message = try decodeMessage(topic: frames.topic, body: frames.body)
        return (message, try message.payload(as: P.self))
    }

    @Test("every payload type survives encode and decode")
    func payloadRoundTrips() throws {
        let imu = SampleMessage(
            .imu([
                SampleMessage.IMUReading(
                    t: 1_763_812_345.01, accG: Vector3(0.01, -0.02, 1.0), gyroDps: Vector3(-250, 0, 1999.9),
                    angleDeg: Vector3(-180, 90, 179.99))
            ]), device: "AA:BB:CC:DD:EE:FF")
        #expect(try roundTrip(imu).1 == imu)
        let distance = SampleMessage(
            .distance([
                SampleMessage.DistanceReading(t: 1.5, distanceMm: 523, state: .eccentric, accG: Vector3(0, 0, 1)),
                SampleMessage.DistanceReading(t: 1.52, distanceMm: 135),
            ]))
        #expect(try roundTrip(distance).1 == distance)
        let posture = SampleMessage(.posture([SampleMessage.PostureReading(t: 2, acc: Vector3(1, 2, 3), mag: Vector3(-40, 12.5, 7))]))
        #expect(try roundTrip(posture).1 == posture)
        let status = StatusMessage(
            state: .disconnected, sensor: "imu", device: "WT901", rateHz: 99.5, batteryPct: 80,
            reason: "Cannot connect: restart the sensor and retry")
        #expect(try roundTrip(status).1 == status)
        var bus = HeartbeatMessage.BusCounters()
        bus.msgsIn = 10; bus.bytesOut = 2000; bus.subscribeEvents = 3
        let heartbeat = HeartbeatMessage(role: "vbt-bus", uptimeS: 12.5, intervalS: 1, bus: bus, inputs: InputCounters())
        #expect(try roundTrip(heartbeat, station: "bus").1 == heartbeat)
        var inputs = InputCounters()
        (inputs.received, inputs.gaps, inputs.missing, inputs.lost, inputs.outstanding) = (1_000, 2, 30, 5, 25)
        let consumer = HeartbeatMessage(role: "session-recorder", uptimeS: 3, intervalS: 1, inputs: inputs)
        #expect(try roundTrip(consumer, station: "session-recorder").1 == consumer)
        var parting = HeartbeatMessage(role: "sensor-bridge", uptimeS: 60, intervalS: 1)
        parting.stopping = true
        #expect(try roundTrip(parting, station: "bridge-replay").1 == parting)
        let command = CommandMessage(
            id: "c-1", command: "set.end", target: "rep-detector",
            args: JSONObject([("reason", .string("coach"))]))
        #expect(try roundTrip(command).1 == command)
    }

    @Test("a sample's reading times are read from the frame as the built readings hold them; nil when one has none")
    func readingTimes() throws {
        func body(_ samples: String) -> [UInt8] {
            Array(
                (#"{"v":1,"type":"sample","station":"rack-1","src":"t/sample.rack-1","seq":1,"ts":5,"sensor":"imu","samples":"# + samples + "}")
                    .utf8)
        }
        let imu = body(#"[{"t":1.5,"acc_g":[0,0,1],"gyro_dps":[0,0,0]}, {"acc_g":[0,0,1],"t":1.51,"gyro_dps":[0,0,0]}]"#)
        for readings in [SampleReadings.located, .checked] {
            let message = try decodeMessage(topic: Array("sample.rack-1".utf8), body: imu, samples: readings)
            #expect(message.readingTimes() == [1.5, 1.51])
            #expect(try message.payload(as: SampleMessage.self).readings.times == [1.5, 1.51])
        }
        // The latest time is the largest, wherever it lies; none without readings.
        #expect(SampleMessage.Readings.distance([.init(t: 2.5, distanceMm: 500), .init(t: 1.5, distanceMm: 510)]).latestTime == 2.5)
        #expect(SampleMessage.Readings.posture([]).latestTime == nil)
        #expect(try decodeMessage(topic: Array("sample.rack-1".utf8), body: imu, samples: .built).readingTimes() == nil, "built: nothing deferred")
        let untimed = body(#"[{"t":1.5,"acc_g":[0,0,1]}, {"acc_g":[0,0,1]}]"#)
        #expect(try decodeMessage(topic: Array("sample.rack-1".utf8), body: untimed, samples: .located).readingTimes() == nil)
        let notArray = body(#"{"t":1.5}"#)
        #expect(try decodeMessage(topic: Array("sample.rack-1".utf8), body: notArray, samples: .located).readingTimes() == nil)
    }

    @Test("a sample's readings are built only when asked for, and then equal what was sent")
    func samplesDeferred() throws {
        let distance = SampleMessage(
            .distance([SampleMessage.DistanceReading(t: 1.5, distanceMm: 523), SampleMessage.DistanceReading(t: 1.52, distanceMm: 520)]))
        let (message, decoded) = try roundTrip(distance)
        #expect(decoded == distance)
        #expect(message.deferred?.key == "samples" && message.deferred?.elements?.count == 2)
        #expect(message.field("sensor") == .string("distance"))
        guard case .array(let readings)? = message.field("samples") else { Issue.record("no samples"); return }
        #expect(readings.count == 2 && message.fields["samples"] == .array(readings))
        // Changing the fields builds them: what is set is what is read.
        var changed = message
        changed.fields["sensor"] = .string("imu")
        #expect(changed.deferred == nil && changed.fields["samples"] == .array(readings) && changed.field("sensor") == .string("imu"))
        // Other types defer nothing.
        let (status, _) = try roundTrip(StatusMessage(state: .streaming, sensor: "imu", device: "WT901"))
        #expect(status.deferred == nil)
    }

    @Test("the envelope is stamped per stream: src per topic, seq from 1 without gaps")
    func stamping() throws {
        var stamper = EnvelopeStamper(program: "prog", instance: "prog-1")
        let status = StatusMessage(state: .connected, sensor: "imu", device: "x")
        var seen: [(String, UInt64)] = []
        for station in ["rack-01", "rack-02", "rack-01", "rack-01"] {
            let frames = try stamper.encode(status, station: station, ts: 1)
            let envelope = try decodeMessage(topic: frames.topic, body: frames.body).envelope
            seen.append((envelope.src, envelope.seq))
        }
        #expect(seen.map(\.0) == ["prog-1/status.rack-01", "prog-1/status.rack-02", "prog-1/status.rack-01", "prog-1/status.rack-01"])
        #expect(seen.map(\.1) == [1, 1, 2, 3])
        // The bytes on the wire: each stream's first members are written once and reused; a resumed stream's too.
        let third = try stamper.encode(status, station: "rack-02", athlete: "ana", ts: 1_795_910_515.7656941)
        #expect(
            String(decoding: third.body, as: UTF8.self)
                == #"{"v":1,"type":"status","station":"rack-02","src":"prog-1/status.rack-02","seq":2,"ts":1795910515.765694,"athlete":"ana","state":"connected","sensor":"imu","device":"x"}"#
        )
        stamper.resume(topic: "status.rack-03", after: 41)
        let resumed = try stamper.encode(status, station: "rack-03", ts: 2)
        #expect(
            String(decoding: resumed.body, as: UTF8.self)
                == #"{"v":1,"type":"status","station":"rack-03","src":"prog-1/status.rack-03","seq":42,"ts":2.000000,"state":"connected","sensor":"imu","device":"x"}"#
        )
    }

    @Test("a message that cannot be encoded consumes no sequence number")
    func encodeFailures() throws {
        var stamper = EnvelopeStamper(program: "prog", instance: "prog-1")
        let bad = StatusMessage(state: .connected, sensor: "imu", device: "x", rateHz: .infinity)
        #expect(throws: EncodeError.self) { try stamper.encode(bad, station: "rack 01", ts: 1) }
        #expect(throws: EncodeError.self) { try stamper.encode(StatusMessage(state: .connected, sensor: "imu", device: "x"), station: "rack 01", ts: 1) }
        // A stream whose first message is refused is not one yet: nothing of it in a checkpoint.
        #expect(throws: EncodeError.self) { try stamper.encode(bad, station: "rack-01", ts: 1) }
        #expect(stamper.positions.isEmpty)
        let frames = try stamper.encode(StatusMessage(state: .connected, sensor: "imu", device: "x"), station: "rack-01", ts: 1)
        #expect(try decodeMessage(topic: frames.topic, body: frames.body).envelope.seq == 1)
        #expect(stamper.positions == ["status.rack-01": 1])
    }

    @Test("positions: the last seq of each stream sent; a resumed stream goes on from its own; a copy counts on its own")
    func positions() throws {
        var stamper = EnvelopeStamper(program: "prog", instance: "prog-1")
        let status = StatusMessage(state: .connected, sensor: "imu", device: "x")
        for station in ["rack-01", "rack-02", "rack-01"] { _ = try stamper.encode(status, station: station, ts: 1) }
        _ = try stamper.encode(SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)])), station: "rack-01", ts: 1)
        #expect(stamper.positions == ["status.rack-01": 2, "status.rack-02": 1, "sample.rack-01": 1])
        // Resumed over a stream it has: that stream goes on from the resumed seq.
        stamper.resume(topic: "status.rack-02", after: 9)
        var copy = stamper
        _ = try copy.encode(status, station: "rack-02", ts: 1)
        #expect(copy.positions["status.rack-02"] == 10)
        #expect(stamper.positions["status.rack-02"] == 9, "the original is not moved on by its copy")
        let next = try stamper.encode(status, station: "rack-02", ts: 1)
        #expect(try decodeMessage(topic: next.topic, body: next.body).envelope.seq == 10)
        #expect((stamper.lastSrc, stamper.lastSeq) == ("prog-1/status.rack-02", 10))
    }

    @Test("a sample whose readings were only located on receipt is checked when its payload is built")
    func locatedReadings() throws {
        var stamper = EnvelopeStamper(program: "test")
        let good = try stamper.encode(
            SampleMessage(.distance([SampleMessage.DistanceReading(t: 1_763_812_345.5, distanceMm: 812)])), station: "rack-01", ts: 1_763_812_345.6)
        let located = try decodeMessage(topic: good.topic, body: good.body, samples: .located)
        let checked = try decodeMessage(topic: good.topic, body: good.body, samples: .checked)
        #expect(try located.payload(as: SampleMessage.self) == checked.payload(as: SampleMessage.self))
        // Readings that are not JSON pass receipt (the envelope is whole) and are refused when built.
        let text = String(decoding: good.body, as: UTF8.self)
        let at = try #require(text.range(of: ":812"))
        let bad = Array(text.replacingCharacters(in: at, with: ":0812").utf8)
        #expect(throws: MalformedMessage.self) { try decodeMessage(topic: good.topic, body: bad, samples: .checked) }
        let unchecked = try decodeMessage(topic: good.topic, body: bad, samples: .located)
        #expect(unchecked.envelope.station == "rack-01")
        let error = #expect(throws: MalformedMessage.self) { try unchecked.payload(as: SampleMessage.self) }
        #expect(error?.kind == .notJSON)
    }

    @Test("a sample's readings read where they lie equal the generic reading's, and whatever they are not, the generic reading decides")
    func readingsReadInPlace() throws {
        var stamper = EnvelopeStamper(program: "test")
        let t0 = 1_763_812_345.25
        let samples: [SampleMessage] = [
            SampleMessage(
                .imu([
                    .init(t: t0, accG: Vector3(0.015625, -0.04, 0.98876953125), gyroDps: Vector3(0.97, 0.42, -0.18), angleDeg: Vector3(2.01, -0.62, 29.99)),
                    .init(t: t0 + 0.01, accG: Vector3(0, 1e-3, 1), gyroDps: Vector3(-0, 5, 1e2)),
                ]), device: "WT901"),
            SampleMessage(
                .distance([
                    .init(t: t0, distanceMm: 587.2, state: .idle, accG: Vector3(0.105, 0.201, 1.021)), .init(t: t0 + 0.02, distanceMm: 592),
                    .init(t: t0 + 0.04, distanceMm: 590.5, state: .concentric),
                ])),
            SampleMessage(.posture([.init(t: t0, acc: Vector3(12, -3, 998), mag: Vector3(-120.5, 33, 410))]), device: "sim"),
        ]
        // The generic reading: the readings' tree built, then the payload read from it.
        func generic(_ message: BusMessage) -> SampleMessage? { try? SampleMessage(fields: message.fields) }
        var bodies: [(topic: [UInt8], body: [UInt8])] = []
        for sample in samples {
            let frames = try stamper.encode(sample, station: "rack-01", ts: t0 + 0.05)
            bodies.append((frames.topic, frames.body))
            let message = try decodeMessage(topic: frames.topic, body: frames.body, samples: .located)
            let deferred = try #require(message.deferred)
            // Read in place, not the generic way: equal to what was sent and to the generic reading.
            #expect(SampleMessage.readings(sensor: sample.readings.sensor, body: frames.body, range: deferred.range) == sample.readings)
            #expect(try message.payload(as: SampleMessage.self) == sample)
            #expect(generic(message) == sample)
        }
        // Whitespace anywhere JSON allows it is read in place too.
        let spaced = Array(#"[ {"t" : 1.5 ,"distance_mm":-0.5e1, "acc_g" :[ 1 , 2,3 ] } ,{"distance_mm":1,"t":2} ]"#.utf8)
        #expect(
            SampleMessage.readings(sensor: "distance", body: spaced, range: 0..<spaced.count)
                == .distance([.init(t: 1.5, distanceMm: -5, accG: Vector3(1, 2, 3)), .init(t: 2, distanceMm: 1)]))
        // What a bridge does not write is left to the generic reading.
        for other in [
            #"[]"#, #"[{}]"#, #"[{"t":1,"distance_mm":2,"t":3}]"#, #"[{"\u0074":1,"distance_mm":2}]"#, #"[{"t":1,"distance_mm":2,"acc_g":null}]"#,
            #"[{"t":1,"distance_mm":2,"acc_g":[1,2]}]"#, #"[{"t":1,"distance_mm":2,"state":"idle"}]"#, #"[{"t":1,"distance_mm":2,"note":1}]"#,
            #"[{"t":1}]"#, #"[{"t":1,"distance_mm":2}],"#, #"[{"t":1,"distance_mm":2},]"#, #"[{"t":01,"distance_mm":2}]"#, #"[{"t":1e999,"distance_mm":2}]"#,
        ] {
            let bytes = Array(other.utf8)
            #expect(SampleMessage.readings(sensor: "distance", body: bytes, range: 0..<bytes.count) == nil, "\(other)")
        }
        // Mutated readings (a byte changed to one JSON gives meaning to, dropped, or doubled): the
        // payload is the generic reading's whenever the envelope is still whole, and refused when it refuses.
        let marks = Array(#"{}[],:"\ 0-.eEn9tu"#.utf8)
        var random = SeededGenerator(seed: 17)
        var compared = 0
        for _ in 0..<6_000 {
            let (topic, original) = bodies[Int(random.next() % UInt64(bodies.count))]
            var body = original
            let start = try #require(String(decoding: original, as: UTF8.self).range(of: "\"samples\":")).upperBound.utf16Offset(
                in: String(decoding: original, as: UTF8.self))
            for _ in 0...(random.next() % 3) {
                let at = start + Int(random.next() % UInt64(body.count - 1 - start))
                switch random.next() % 3 {
                case 0: body[at] = marks[Int(random.next() % UInt64(marks.count))]
                case 1: body.remove(at: at)
                default: body.insert(body[at], at: at)
                }
            }
            guard let message = try? decodeMessage(topic: topic, body: body, samples: .located) else { continue }
            compared += 1
            let text = String(decoding: body, as: UTF8.self)
            let built = generic(message)
            #expect((try? message.payload(as: SampleMessage.self)) == built, "\(text)")
            // The readings located on receipt are where a checking parse finds them, and their times the built ones'.
            if let checked = try? decodeMessage(topic: topic, body: body, samples: .checked) {
                #expect(checked.deferred?.elements == message.deferred?.elements, "\(text)")
            }
            if let built { #expect(message.readingTimes() == built.readings.times, "\(text)") }
        }
        // The comparison is not empty: most mutations leave the envelope whole.
        #expect(compared > 3_000)
    }

    @Test("members written once go under each copy's own envelope; the recorded envelope's are dropped, a non-finite number refused")
    func encodedMembers() throws {
        let recorded = JSONObject([
            ("v", .number(1)), ("type", .string("sample")), ("station", .string("rack")), ("src", .string("old/sample.rack")),
            ("seq", .number(9)), ("ts", .number(5)), ("sensor", .string("distance")), ("device", .string("sim")),
            ("samples", .array([.object(JSONObject([("t", .number(1_795_695_486.002832)), ("distance_mm", .number(839.1))]))])),
        ])
        let members = EncodedMembers(recorded)
        var stamper = EnvelopeStamper(program: "replay", instance: "replay-1")
        for station in ["rack-1", "rack-2"] {
            let frames = try stamper.encode(type: "sample", station: station, ts: 7, members: members)
            let message = try decodeMessage(topic: frames.topic, body: frames.body)
            #expect(message.envelope.station == station && message.envelope.seq == 1 && message.envelope.src == "replay-1/sample.\(station)")
            let sample = try message.payload(as: SampleMessage.self)
            #expect(sample.readings.times == [1_795_695_486.002832] && sample.device == "sim")
        }
        let bad = EncodedMembers(JSONObject([("samples", .array([.number(.nan)]))]))
        #expect(bad.sawNonFiniteNumber)
        #expect(throws: EncodeError.self) { try stamper.encode(type: "sample", station: "rack-3", ts: 7, members: bad) }
    }

    @Test("a heartbeat's stopping is true or absent: false reads as absent, anything else is refused")
    func heartbeatStopping() throws {
        func read(_ stopping: String) throws(PayloadError) -> HeartbeatMessage {
            let json = #"{"role":"sensor-bridge","uptime_s":1,"interval_s":1,"stopping":"# + stopping + "}"
            guard case .object(let fields)? = try? JSONParser.parse(Array(json.utf8)) else { throw PayloadError("not an object") }
            return try HeartbeatMessage(fields: fields)
        }
        #expect(try read("true").stopping == true)
        #expect(try read("false").stopping == nil)
        #expect(try read("null").stopping == nil)
        for bad in ["1", #""yes""#, "[]"] {
            #expect(throws: PayloadError.self, "stopping \(bad)") { try read(bad) }
        }
        var writer = JSONWriter()
        writer.beginObject()
        HeartbeatMessage(role: "rep-detector", uptimeS: 1, intervalS: 1).write(to: &writer)
        writer.endObject()
        #expect(!String(decoding: writer.bytes, as: UTF8.self).contains("stopping"), "written only when true")
    }

    @Test("each malformed input is rejected with its reason", arguments: malformedCases)
    func malformed(_ input: MalformedCase) {
        var received = ReceivedMessage()
        received.frames = input.frames
        received.frameCount = input.frames.count
        received.byteCount = input.frames.reduce(0) { $0 + $1.count }
        #expect(throws: MalformedMessage.self) { try decodeMessage(received) }
        do {
            _ = try decodeMessage(received)
        } catch {
            #expect(error.kind == input.expected, "\(input.name): \(error)")
        }
    }

    @Test(
        "an envelope reads the same and is refused for the same reasons whether every key is ASCII (one pass) or not (looked up)",
        arguments: ["", #","é":1"#, #","\#u{212A}":1"#, #","\u212A":1"#])
    func envelopeEitherWay(extra: String) throws {
        let members = #""v":1,"type":"rep","station":"rack-01","src":"d/rep.rack-01","seq":7,"ts":5.5,"athlete":"ana""#
        let topic = Array("rep.rack-01".utf8)
        let message = try decodeMessage(topic: topic, body: Array(("{" + members + extra + "}").utf8))
        #expect(message.envelope == Envelope(v: 1, type: "rep", station: "rack-01", src: "d/rep.rack-01", seq: 7, ts: 5.5, athlete: "ana"))
        for (without, kind) in [
            (#""seq":7,"#, MalformedMessage.Kind.missingField), (#""ts":5.5,"#, .missingField), (#""v":1,"#, .missingField),
        ] {
            let body = "{" + members.replacingOccurrences(of: without, with: "") + extra + "}"
            #expect(throws: MalformedMessage.self) { try decodeMessage(topic: topic, body: Array(body.utf8)) }
            do { _ = try decodeMessage(topic: topic, body: Array(body.utf8)) } catch { #expect(error.kind == kind, "\(body)") }
        }
        let wrong = "{" + members.replacingOccurrences(of: #""station":"rack-01""#, with: #""station":1"#) + extra + "}"
        do {
            _ = try decodeMessage(topic: topic, body: Array(wrong.utf8))
            Issue.record("accepted a numeric station")
        } catch {
            #expect(error.kind == .wrongType)
        }
    }

    @Test(
        "typed payload errors name the field",
        arguments: [
            (#"{"sensor":"imu","samples":[{"t":1,"acc_g":[0,0],"gyro_dps":[0,0,0],"angle_deg":[0,0,0]}]}"#, "acc_g"),
            (#"{"sensor":"laser","samples":[{"t":1}]}"#, "sensor"),
            (#"{"sensor":"distance","samples":[]}"#, "samples"),
            (#"{"sensor":"distance","samples":[{"t":1,"distance_mm":"far"}]}"#, "distance_mm"),
            (#"{"sensor":"distance","samples":[{"t":1,"distance_mm":5,"state":"UP"}]}"#, "state"),
        ])
    func payloadErrors(fields: String, field: String) throws {
        guard case .object(var object) = try JSONParser.parse(Array(fields.utf8)) else { Issue.record("fixture"); return }
        for (key, value) in [
            ("v", JSONValue.number(1)), ("type", .string("sample")), ("station", .string("rack-01")),
            ("src", .string("t/sample.rack-01")), ("seq", .number(1)), ("ts", .number(5)),
        ] {
            object[key] = value
        }
        var writer = JSONWriter()
        writer.value(.object(object))
        let message = try decodeMessage(topic: Array("sample.rack-01".utf8), body: writer.bytes)
        do {
            _ = try message.payload(as: SampleMessage.self)
            Issue.record("accepted a bad payload")
        } catch {
            #expect(error.kind == .badPayload)
            #expect(error.detail.contains(field))
        }
    }
}

@Suite("Per-source counters")
struct CounterTests {
    private func envelope(_ src: String, _ seq: UInt64) -> Envelope {
        Envelope(v: 1, type: "sample", station: "rack-01", src: src, seq: seq, ts: 1)
    }

    @Test("gaps, missing, duplicates and late joins are told apart")
    func accounting() {
        var stats = SubscriberStats()
        let sequence: [(String, UInt64, Bool)] = [
            ("a", 5, true),  // joined late: not a gap
            ("a", 6, true), ("a", 9, true),  // gap of 2
            ("a", 9, false), ("a", 7, false),  // duplicate / stale
            ("b", 1, true), ("b", 2, true), ("a", 10, true),
        ]
        for (src, seq, delivered) in sequence {
            #expect(stats.account(envelope(src, seq), topic: "sample.rack-01") == delivered)
        }
        let a = stats.sources["a"]!
        #expect((a.received, a.gaps, a.missing, a.duplicates, a.firstSeq, a.lastSeq) == (4, 1, 2, 2, 5, 10))
        #expect(stats.totals.received == 6)
        #expect(stats.totals.gaps == 1)
    }
}

@Suite("Hand-over payloads")
struct HandoverPayloadTests {
    @Test("sequence maps refuse numbers no sequence can be (no trap on 1e19 or negatives)", arguments: ["1e19", "-5", "1.5", "-9.3e18"])
    func badPositions(value: String) throws {
        let body =
            #"{"v":1,"type":"handoff","station":"detector","src":"x/handoff.detector","seq":1,"ts":5,"from":"a","to":"b","done":true,"positions":{"s":"# + value
            + "}}"
        let message = try decodeMessage(topic: Array("handoff.detector".utf8), body: Array(body.utf8))
        #expect(throws: MalformedMessage.self) { try message.payload(as: HandoffMessage.self) }
    }
}

@Suite("Subscriber prefixes")
struct PrefixTests {
    @Test("a subscriber delivers the topics its prefixes begin, as ZeroMQ subscribes, and the bus's heartbeat only when asked for")
    func prefixes() throws {
        let bus = MemoryBus()
        let logger = Logger(label: "prefix-test")
        let probes = try Subscriber(transport: bus, prefixes: ["rep.", "sample.rack-1"] + (1...100).map { "sample.bench-\($0)" }, logger: logger)
        let everything = try Subscriber(transport: bus, prefixes: [""], logger: logger)
        let publisher = try Publisher(transport: bus, program: "sensor-bridge")
        try bus.heartbeat()
        let stations = ["rack-1", "rack-10", "rack-2", "bench-100", "bench-1000", "bench-101", "platform-1", "r"]
        for station in stations {
            try publisher.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)])), station: station, ts: 1_763_812_345)
        }
        func drain(_ subscriber: Subscriber) throws -> [String] {
            var topics: [String] = []
            while let message = try subscriber.next(timeoutMs: 0) { topics.append(message.topic) }
            return topics
        }
        #expect(try drain(probes) == ["sample.rack-1", "sample.rack-10", "sample.bench-100", "sample.bench-1000", "sample.bench-101"])
        #expect(probes.stats.busHeartbeats == 1, "followed, not delivered")
        #expect(try drain(everything) == [Subscriber.busHeartbeatTopic] + stations.map { "sample.\($0)" })
    }
}

@Suite("Subscriber forgetting finished streams")
struct ForgetTests {
    @Test("a source that sends nothing for forgetAfterS is forgotten within the minute between looks; one that goes on is kept")
    func forgetsSilentSources() throws {
        let bus = MemoryBus()
        let subscriber = try Subscriber(transport: bus, prefixes: ["sample."], logger: Logger(label: "forget-test"))
        subscriber.forgetAfterS = 600
        let finished = try Publisher(transport: bus, program: "sensor-bridge")
        let going = try Publisher(transport: bus, program: "sensor-bridge")
        let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 500)]))
        func minute() throws {
            bus.manualClock.advance(60)
            try going.publish(sample, station: "rack-2", ts: 1_763_812_345)
            while try subscriber.next(timeoutMs: 0) != nil {}
        }
        // Heard half a minute in, between two looks.
        bus.manualClock.advance(30)
        try finished.publish(sample, station: "rack-1", ts: 1_763_812_345)
        while try subscriber.next(timeoutMs: 0) != nil {}
        let finishedSrc = try #require(subscriber.stats.sources.keys.first { $0.hasSuffix("/sample.rack-1") })
        // Silent for forgetAfterS (10 minutes): still known.
        for _ in 0..<10 { try minute() }
        #expect(subscriber.stats.sources[finishedSrc] != nil)
        let goingSrc = try #require(subscriber.stats.sources.keys.first { $0.hasSuffix("/sample.rack-2") })
        // Within two more looks it is forgotten; the source that goes on never is.
        try minute()
        try minute()
        #expect(subscriber.stats.sources[finishedSrc] == nil)
        #expect(subscriber.stats.sources[goingSrc]?.received == 12)
        // Heard again, it is a source again, counted from there.
        try finished.publish(sample, station: "rack-1", ts: 1_763_812_345)
        while try subscriber.next(timeoutMs: 0) != nil {}
        #expect(subscriber.stats.sources[finishedSrc]?.received == 1)
    }
}

extension EnvelopeTests {
    @Test("a stream's src splits at its first slash into instance and topic")
    func streamParts() {
        let cases: [(src: String, instance: String, topic: String)] = [
            ("bridge-7f3a/sample.rack-1", "bridge-7f3a", "sample.rack-1"),
            ("a/b/c", "a", "b/c"),
            ("no-slash", "no-slash", "no-slash"),
            ("ends/", "ends", ""),
            ("/starts", "", "starts"),
            ("émile-1/sample.banc-é", "émile-1", "sample.banc-é"),
        ]
        for (src, instance, topic) in cases {
            #expect(streamInstance(src) == instance[...], "\(src)")
            #expect(streamTopic(src) == topic[...], "\(src)")
        }
    }
}
