import Foundation
import Testing

@testable import VBTWire

/// `decodeBridgeSample`, the one-pass reading of a sample as a bridge writes it: what it
/// returns must be exactly what the generic decoder returns for the same frame, and anything
/// it does not read must be left to the generic decoder (which accepts or refuses it).
@Suite("Bridge samples")
struct BridgeSampleTests {
    private static let distance = SkippedSampleTests.distance
    private static let posture = SkippedSampleTests.posture
    private static let imu = SampleMessage(
        .imu([
            SampleMessage.IMUReading(
                t: 1_795_910_514.158098, accG: Vector3(0.015625, 0.0439453125, 0.98876953125), gyroDps: Vector3(0.9765625, 0.42724609375, -0.18),
                angleDeg: Vector3(2.010498046875, -0.6207275390625, 29.9981689453125)),
            SampleMessage.IMUReading(t: 1_795_910_514.168098, accG: Vector3(0, 0, 1), gyroDps: Vector3(0, 0, 0)),
        ]), device: "WT901BLE 0C:1A:2B")

    /// The two decoders' messages, field by field.
    private func expectSame(_ fast: BusMessage, _ generic: BusMessage, _ what: String) throws {
        #expect(fast.topic == generic.topic, "\(what)")
        #expect(fast.envelope == generic.envelope, "\(what)")
        #expect(fast.fields == generic.fields, "\(what)")
        #expect(fast.fields.fields.map(\.key) == generic.fields.fields.map(\.key), "\(what): the members' order")
        #expect(fast.body == generic.body, "\(what)")
        #expect(fast.deferred == generic.deferred, "\(what)")
        #expect(fast.readingTimes() == generic.readingTimes(), "\(what)")
        // The readings, or the same refusal of them.
        let readings = (
            Result { () throws(MalformedMessage) in try fast.payload(as: SampleMessage.self) },
            Result { () throws(MalformedMessage) in try generic.payload(as: SampleMessage.self) }
        )
        #expect(readings.0 == readings.1, "\(what)")
    }

    @Test("a bridge's sample reads as the generic decoder reads it, checked or only located")
    func sameMessage() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "sensor-bridge-63426475")
        let cases: [(SampleMessage, String?, Double)] = [
            (Self.distance, nil, 1_795_910_514.820954), (Self.imu, "ana", 1_700_000_000.5), (Self.posture, "ben-2", 1_800_000_000),
            (Self.distance, "", 0.25), (Self.imu, nil, 1_796_000_501.19639),
        ]
        for (index, (sample, athlete, ts)) in cases.enumerated() {
            let (topic, body) = try stamper.encode(sample, station: "rack-\(index)", athlete: athlete, ts: ts)
            for mode in [SampleReadings.checked, .located] {
                let what = "case \(index), \(mode)"
                let fast = try #require(
                    decodeBridgeSample(topic: topic, body: body, type: "sample", station: "rack-\(index)", samples: mode), "\(what)")
                try expectSame(fast, decodeGenerally(topic: topic, body: body, type: "sample", station: "rack-\(index)", samples: mode), what)
                try expectSame(try decodeMessage(topic: topic, body: body, samples: mode), fast, what)
            }
            #expect(decodeBridgeSample(topic: topic, body: body, type: "sample", station: "rack-\(index)", samples: .built) == nil)
        }
    }

    @Test("readings read on receipt are the ones built later; another sensor's, or ones written otherwise, are only located")
    func readOnReceipt() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "sensor-bridge-63426475")
        for (index, sample) in [Self.distance, Self.imu, Self.posture].enumerated() {
            let station = "rack-\(index)"
            let (topic, body) = try stamper.encode(sample, station: station, athlete: "ana", ts: 1_795_910_514.5)
            let sensor = sample.readings.sensor
            let generic = try decodeGenerally(topic: topic, body: body, type: "sample", station: station, samples: .located)
            // Its sensor's: read in the envelope's pass, the same readings, times and members.
            let read = try decodeMessage(topic: topic, body: body, samples: .read([sensor, "other"]))
            #expect(read.envelope == generic.envelope && read.fields == generic.fields && read.body == generic.body, "\(sensor)")
            #expect(read.deferred?.range == generic.deferred?.range, "\(sensor): where the readings lie")
            #expect(read.deferred?.elements == nil && read.deferred?.checked == true, "\(sensor): read, not located")
            #expect(try read.payload(as: SampleMessage.self) == sample, "\(sensor)")
            #expect(read.readingTimes() == generic.readingTimes() && read.readingTimes() != nil, "\(sensor)")
            // Another sensor's: located, exactly as `.located` has it.
            let others = try decodeMessage(topic: topic, body: body, samples: .read(Set(["imu", "distance", "posture"].filter { $0 != sensor })))
            try expectSame(others, generic, "\(sensor), not read")
            #expect(others.deferred?.elements != nil, "\(sensor), not read")
        }
        // Readings a bridge does not write (an unknown key), or that are no JSON: located, and built
        // (or refused) the generic way when asked for, as `.located` leaves them.
        let (topic, body) = try stamper.encode(Self.distance, station: "rack-1", ts: 1_795_910_514.5)
        let text = String(decoding: body, as: UTF8.self)
        for (what, variant) in [
            ("an unknown key", text.replacingOccurrences(of: "\"distance_mm\":592.5", with: "\"distance_mm\":592.5,\"note\":1")),
            ("no JSON", text.replacingOccurrences(of: "\"distance_mm\":592.5", with: "\"distance_mm\":592.5.1")),
        ] {
            #expect(variant != text, "\(what) changes the frame")
            let frame = Array(variant.utf8)
            let fast = try #require(decodeBridgeSample(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .read(["distance"])), "\(what)")
            try expectSame(fast, decodeGenerally(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .located), what)
            #expect(fast.deferred?.checked == false, "\(what): only located")
        }
    }

    @Test("only the times read on receipt: the generic decoder's times, the readings built later; anything odd only located")
    func timesOnReceipt() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "sensor-bridge-63426475")
        let (topic, body) = try stamper.encode(Self.imu, station: "rack-1", ts: 1_795_910_514.5)
        let generic = try decodeGenerally(topic: topic, body: body, type: "sample", station: "rack-1", samples: .located)
        let timed = try decodeMessage(topic: topic, body: body, samples: .read([], times: ["imu"]))
        #expect(timed.envelope == generic.envelope && timed.fields == generic.fields && timed.body == generic.body)
        #expect(timed.deferred?.range == generic.deferred?.range, "where the readings lie")
        #expect(timed.deferred?.elements == nil && timed.deferred?.checked == false, "the rest only located")
        #expect(timed.readingTimes() == [1_795_910_514.158098, 1_795_910_514.168098])
        #expect(timed.readingTimes() == generic.readingTimes())
        #expect(try timed.payload(as: SampleMessage.self) == Self.imu, "built when asked for")
        // Built and timed both: built wins.
        #expect(try decodeMessage(topic: topic, body: body, samples: .read(["imu"], times: ["imu"])).deferred?.checked == true)
        let text = String(decoding: body, as: UTF8.self)
        let first = "{\"t\":1795910514.158098,"
        #expect(text.contains(first))
        // Spelled otherwise: located as `.located` locates them, times read from the elements as before.
        for (what, variant) in [
            ("the time not first", text.replacingOccurrences(of: first, with: "{\"acc_g\":[0,0,1],\"t\":1795910514.158098,")),
            ("an object inside a reading", text.replacingOccurrences(of: first, with: first + "\"x\":{\"a\":1},")),
            ("a bracket unmatched", text.replacingOccurrences(of: first, with: first + "\"x\":]1,")),
            ("a time that is no number", text.replacingOccurrences(of: first, with: "{\"t\":\"now\",")),
            ("spaces", text.replacingOccurrences(of: first, with: "{ \"t\" :\n1795910514.158098 ,")),
            ("a brace in a string", text.replacingOccurrences(of: first, with: first + "\"x\":\"}]\",")),
        ] {
            #expect(variant != text, "\(what) changes the frame")
            let frame = Array(variant.utf8)
            let located = Result { () throws(MalformedMessage) in
                try decodeGenerally(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .located)
            }
            let fast = Result { () throws(MalformedMessage) in try decodeMessage(topic: topic, body: frame, samples: .read([], times: ["imu"])) }
            switch (fast, located) {
            case (.success(let a), .success(let b)):
                #expect(a.envelope == b.envelope && a.deferred?.range == b.deferred?.range, "\(what)")
                #expect(a.readingTimes() == b.readingTimes(), "\(what)")
                if what == "spaces" || what == "a brace in a string" {
                    #expect(a.deferred?.elements == nil, "\(what): read in one pass")
                    #expect(a.readingTimes()?.first == 1_795_910_514.158098, "\(what)")
                } else {
                    #expect(a.deferred?.elements == b.deferred?.elements && a.deferred?.elements != nil, "\(what): located")
                }
            case (.failure(let a), .failure(let b)): #expect(a == b, "\(what)")
            default: Issue.record("\(what): \(fast) but located \(located)")
            }
        }
    }

    @Test("each member's key is recognized as its name, and nothing else is: near spellings, longer keys")
    func memberNames() {
        func name(_ key: String) -> BridgeSampleMembers.Name? {
            Array(key.utf8).withUnsafeBufferPointer { BridgeSampleMembers.Name($0, 0..<$0.count) }
        }
        for member in BridgeSampleMembers.Name.allCases {
            #expect(name(member.key) == member, "\(member.key)")
            // The key inside a longer frame: only its own bytes count.
            let framed = Array("{\"\(member.key)\":1}".utf8)
            #expect(framed.withUnsafeBufferPointer { BridgeSampleMembers.Name($0, 2..<(2 + member.key.utf8.count)) } == member)
        }
        for other in ["", "V", "sensors", "sampless", "sample", "Src", "station ", "athletes", "t", "devic"] {
            #expect(name(other) == nil, "\(other)")
        }
    }

    @Test("spaces between the members, and members in another order, read the same")
    func spacing() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "bridge-1")
        let (topic, body) = try stamper.encode(Self.distance, station: "rack-1", athlete: "ana", ts: 1_795_910_514.5)
        let text = String(decoding: body, as: UTF8.self)
        let spaced = " " + text.replacingOccurrences(of: ",\"", with: " ,\n\t\"").replacingOccurrences(of: "\":", with: "\" : ") + "\n"
        let reordered = text.replacingOccurrences(of: "{\"v\":1,", with: "{").replacingOccurrences(of: "\"samples\":", with: "\"v\":1,\"samples\":")
        for (what, variant) in [("spaced", spaced), ("reordered", reordered)] {
            #expect(variant != text, "\(what) changes the frame")
            let frame = Array(variant.utf8)
            for mode in [SampleReadings.checked, .located] {
                let fast = try #require(decodeBridgeSample(topic: topic, body: frame, type: "sample", station: "rack-1", samples: mode), "\(what)")
                try expectSame(fast, decodeGenerally(topic: topic, body: frame, type: "sample", station: "rack-1", samples: mode), "\(what), \(mode)")
            }
        }
    }

    @Test("anything else is left to the generic decoder, which accepts or refuses it as before")
    func leftToTheGenericDecoder() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "bridge-1")
        let (topic, body) = try stamper.encode(Self.distance, station: "rack-1", athlete: "ana", ts: 1_795_910_514.5)
        let text = String(decoding: body, as: UTF8.self)
        let variants: [(String, String)] = [
            ("another member", text.replacingOccurrences(of: "\"sensor\":", with: "\"note\":\"x\",\"sensor\":")),
            ("an escape in src", text.replacingOccurrences(of: "\"src\":\"bridge-1/", with: "\"src\":\"bridge\\u002d1/")),
            ("an escape in the athlete", text.replacingOccurrences(of: "\"athlete\":\"ana\"", with: "\"athlete\":\"an\\u0061\"")),
            ("an athlete that is not a string", text.replacingOccurrences(of: "\"athlete\":\"ana\"", with: "\"athlete\":7")),
            ("a null device", text.replacingOccurrences(of: "\"device\":\"sim\"", with: "\"device\":null")),
            ("src twice", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":1,\"src\":\"x/sample.rack-1\",")),
            ("the athlete twice", text.replacingOccurrences(of: "\"sensor\":", with: "\"athlete\":\"ben\",\"sensor\":")),
            ("the readings twice", text.replacingOccurrences(of: "\"sensor\":", with: "\"samples\":[],\"sensor\":")),
            (
                "readings that are not an array",
                text.replacingOccurrences(of: "\"samples\":[", with: "\"samples\":{\"a\":[").replacingOccurrences(of: "]}", with: "]}}")
            ),
            ("no readings", text.replacingOccurrences(of: ",\"samples\":[", with: ",\"rest\":[")),
            ("a reading that is no JSON", text.replacingOccurrences(of: "\"distance_mm\":592.5", with: "\"distance_mm\":592.5.1")),
            ("another station in the body than the topic's", text.replacingOccurrences(of: "\"station\":\"rack-1\"", with: "\"station\":\"rack-2\"")),
            ("seq 0", text.replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":0,")),
            ("an exponent in ts", text.replacingOccurrences(of: "\"ts\":1795910514.500000", with: "\"ts\":1.7959105145e9")),
            ("version 2", text.replacingOccurrences(of: "\"v\":1,", with: "\"v\":2,")),
            ("no sensor", text.replacingOccurrences(of: "\"sensor\":\"distance\",", with: "")),
            ("trailing characters", text + "x"),
            ("a second object", text + "{}"),
            ("cut short", String(text.dropLast(2))),
        ]
        for (what, variant) in variants {
            #expect(variant != text, "the variant changes the frame: \(what)")
            let frame = Array(variant.utf8)
            #expect(decodeBridgeSample(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .checked) == nil, "\(what)")
            // decodeMessage answers as the generic decoder does: the same message, or the same refusal.
            let generic = Result { () throws(MalformedMessage) in
                try decodeGenerally(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .checked)
            }
            let whole = Result { () throws(MalformedMessage) in try decodeMessage(topic: topic, body: frame, samples: .checked) }
            switch (whole, generic) {
            case (.success(let a), .success(let b)): try expectSame(a, b, what)
            case (.failure(let a), .failure(let b)): #expect(a == b, "\(what)")
            default: Issue.record("\(what): decodeMessage \(whole) but the generic decoder \(generic)")
            }
        }
        // Only located, a reading is not checked on receipt (by either decoder): read the same.
        let unchecked = Array(variants.first { $0.0 == "a reading that is no JSON" }!.1.utf8)
        let fast = try #require(decodeBridgeSample(topic: topic, body: unchecked, type: "sample", station: "rack-1", samples: .located))
        let generic = try decodeGenerally(topic: topic, body: unchecked, type: "sample", station: "rack-1", samples: .located)
        #expect(fast.deferred == generic.deferred)
        #expect(fast.fields == generic.fields)
        #expect(throws: MalformedMessage.self) { try fast.payload(as: SampleMessage.self) }
    }

    @Test("a string is read plainly only while every byte of it is printable ASCII, at any place in it")
    func plainStrings() throws {
        var stamper = EnvelopeStamper(program: "bridge", instance: "bridge-1")
        let (topic, body) = try stamper.encode(Self.distance, station: "rack-1", ts: 1_795_910_514.5)
        let text = String(decoding: body, as: UTF8.self)
        let src = "bridge-1/sample.rack-1"
        // Past the eight-byte words and the bytes after them: each place in a source's name of 22 bytes.
        for place in 0...src.utf8.count {
            let head = String(src.prefix(place)), tail = String(src.dropFirst(place))
            for (what, inserted, plain) in [
                ("a letter", "x", true), ("a space", " ", true), ("a tilde", "~", true),
                ("an escaped quote", "\\\"", false), ("an escape", "\\u0041", false),
                ("DEL", "\u{7F}", false), ("a tab", "\t", false), ("non-ASCII", "\u{E9}", false),
            ] {
                let frame = Array(text.replacingOccurrences(of: "\"src\":\"\(src)\"", with: "\"src\":\"\(head)\(inserted)\(tail)\"").utf8)
                let fast = decodeBridgeSample(topic: topic, body: frame, type: "sample", station: "rack-1", samples: .checked)
                #expect((fast != nil) == plain, "\(what) at \(place)")
                if plain { #expect(fast?.envelope.src == head + inserted + tail, "\(what) at \(place)") }
            }
        }
    }
}
