import VBTBus
import VBTWire

/// One kind of bad input a consumer must count and survive.
public struct MalformedCase: Sendable, CustomStringConvertible {
    /// A short name for test output.
    public let name: String
    /// The frames as they go on the wire.
    public let frames: [[UInt8]]
    /// The reason the consumer must report.
    public let expected: MalformedMessage.Kind

    public var description: String { name }
}

/// A valid JSON frame for `sample.rack-01` with `seq`, changed by `edit`.
public func sampleBody(seq: Int = 1, src: String = "test-0/sample.rack-01", _ edit: (inout [String: String]) -> Void = { _ in }) -> [UInt8] {
    var fields: [String: String] = [
        "v": "1", "type": "\"sample\"", "station": "\"rack-01\"", "src": "\"\(src)\"", "seq": "\(seq)",
        "ts": "1763812345.5", "sensor": "\"distance\"", "samples": #"[{"t":1763812345.5,"distance_mm":512}]"#,
    ]
    edit(&fields)
    let order = ["v", "type", "station", "src", "seq", "ts", "sensor", "samples"] + fields.keys.sorted()
    var seen = Set<String>()
    let parts = order.compactMap { key -> String? in
        guard seen.insert(key).inserted, let value = fields[key] else { return nil }
        return "\"\(key)\":\(value)"
    }
    return Array(("{" + parts.joined(separator: ",") + "}").utf8)
}

/// Malformed inputs covering every rejection kind, several ways each.
public let malformedCases: [MalformedCase] = {
    let topic = Array("sample.rack-01".utf8)
    func body(_ text: String) -> [UInt8] { Array(text.utf8) }
    let good = sampleBody()
    return [
        MalformedCase(name: "one frame only", frames: [good], expected: .frameCount),
        MalformedCase(name: "three frames", frames: [topic, good, good], expected: .frameCount),
        MalformedCase(name: "topic without a dot", frames: [body("samplerack"), good], expected: .badTopic),
        MalformedCase(name: "topic not ASCII", frames: [body("sample.räck"), good], expected: .badTopic),
        MalformedCase(name: "topic with empty station", frames: [body("sample."), good], expected: .badTopic),
        MalformedCase(name: "not JSON", frames: [topic, body("hello gym")], expected: .notJSON),
        MalformedCase(name: "truncated JSON", frames: [topic, Array(good.prefix(40))], expected: .notJSON),
        MalformedCase(name: "empty body", frames: [topic, []], expected: .notJSON),
        MalformedCase(
            name: "invalid UTF-8 in a string", frames: [topic, sampleBody { $0["station"] = "\"rack\u{FF}\"" }.map { $0 == 0xC3 ? 0xFF : $0 }],
            expected: .notJSON),
        MalformedCase(name: "trailing garbage", frames: [topic, good + body(" extra")], expected: .notJSON),
        MalformedCase(name: "NaN literal", frames: [topic, sampleBody { $0["ts"] = "NaN" }], expected: .notJSON),
        MalformedCase(name: "duplicate key", frames: [topic, body(#"{"v":1,"v":1}"#)], expected: .notJSON),
        MalformedCase(
            name: "nesting too deep", frames: [topic, sampleBody { $0["x"] = String(repeating: "[", count: 64) + String(repeating: "]", count: 64) }],
            expected: .notJSON),
        MalformedCase(name: "array instead of object", frames: [topic, body("[1,2,3]")], expected: .notObject),
        MalformedCase(name: "missing seq", frames: [topic, sampleBody { $0["seq"] = nil }], expected: .missingField),
        MalformedCase(name: "missing src", frames: [topic, sampleBody { $0["src"] = nil }], expected: .missingField),
        MalformedCase(name: "missing ts", frames: [topic, sampleBody { $0["ts"] = nil }], expected: .missingField),
        MalformedCase(name: "v as a string", frames: [topic, sampleBody { $0["v"] = "\"1\"" }], expected: .wrongType),
        MalformedCase(name: "seq with a fraction", frames: [topic, sampleBody { $0["seq"] = "1.5" }], expected: .wrongType),
        MalformedCase(name: "station as a number", frames: [topic, sampleBody { $0["station"] = "7" }], expected: .wrongType),
        MalformedCase(name: "athlete as a number", frames: [topic, sampleBody { $0["athlete"] = "42" }], expected: .wrongType),
        MalformedCase(name: "athlete null", frames: [topic, sampleBody { $0["athlete"] = "null" }], expected: .wrongType),
        MalformedCase(name: "ts as a string", frames: [topic, sampleBody { $0["ts"] = "\"now\"" }], expected: .wrongType),
        MalformedCase(name: "unknown version", frames: [topic, sampleBody { $0["v"] = "2" }], expected: .unknownVersion),
        MalformedCase(name: "topic type differs from body", frames: [body("rep.rack-01"), good], expected: .topicMismatch),
        MalformedCase(name: "topic station differs from body", frames: [body("sample.rack-02"), good], expected: .topicMismatch),
        MalformedCase(name: "seq zero", frames: [topic, sampleBody { $0["seq"] = "0" }], expected: .badSeq),
        MalformedCase(name: "negative ts", frames: [topic, sampleBody { $0["ts"] = "-5" }], expected: .badTimestamp),
        MalformedCase(name: "oversize", frames: [topic, sampleBody { $0["pad"] = "\"" + String(repeating: "x", count: 300_000) + "\"" }], expected: .oversize),
    ]
}()
