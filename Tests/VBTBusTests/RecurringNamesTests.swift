import Foundation
import Testing

@testable import VBTWire

/// `RecurringNames`: a name handed out again is the name asked for, whatever the table holds.
@Suite("Recurring names")
struct RecurringNamesTests {
    private func name(_ text: String, _ names: RecurringNames) -> String {
        Array(text.utf8).withUnsafeBufferPointer { names.name($0) }
    }

    @Test("each name comes back as asked for, kept or replaced in a table smaller than the names")
    func names() {
        let names = RecurringNames(slots: 4)
        // Lengths around the eight-byte words the table compares, and names that differ only in their last byte.
        let texts = (0..<40).map { "sensor-bridge-\(String(repeating: "x", count: $0 % 11))/sample.rack-\($0)" } + ["", "a", "ab", "abcdefgh", "abcdefgi"]
        for _ in 0..<3 {
            for text in texts { #expect(name(text, names) == text) }
        }
        #expect(name("sample.rack-1", names) == "sample.rack-1")
        #expect(name("sample.rack-1", names) != name("sample.rack-2", names))
    }

    @Test("the src and topic of a thousand stations, named as gyms name them, are kept: few are made again")
    func kept() {
        for format in ["rack-%04d", "rack-%d", "r%d", "platform-%03d-b"] {
            let names = RecurringNames()
            let texts = (0..<1_000).flatMap { station in
                let topic = "sample." + String(format: format, station)
                return [topic, "sensor-bridge-3f9a2c71/" + topic]
            }
            for text in texts { #expect(name(text, names) == text) }
            #expect(names.made == texts.count)
            for text in texts { #expect(name(text, names) == text) }
            // 2,000 names in 16,384 slots by pairs: a name shares its pair with two others one time
            // in forty; with one slot a name and a hash whose low bits missed the station, half were made again.
            #expect(names.made - texts.count < texts.count / 20, "\(format): \(names.made - texts.count) of \(texts.count) made again")
        }
    }

    @Test("a bridge's sample decoded with the table is the one decoded without it")
    func sameMessage() throws {
        let names = RecurringNames(slots: 2)
        var stamper = EnvelopeStamper(program: "bridge", instance: "sensor-bridge-63426475")
        for index in 0..<6 {
            let (topic, body) = try stamper.encode(SkippedSampleTests.distance, station: "rack-\(index % 3)", ts: 1_795_910_514.5 + Double(index))
            for using in [nil, Set([SampleMessage.postureSensor])] {
                let plain = try decodeMessage(topic: topic, body: body, samples: .located, using: using)
                let named = try decodeMessage(topic: topic, body: body, samples: .located, using: using, names: names)
                #expect(named.topic == plain.topic && named.envelope == plain.envelope && named.fields == plain.fields)
            }
        }
    }
}
