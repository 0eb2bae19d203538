import Testing
import VBTSensors

@testable import VBTBus
@testable import VBTWire

/// 10^900005 written so that a capped exponent would read 10^0 (and one that would read 10^299).
private let hugeExponent = "0." + String(repeating: "0", count: 99_999) + "1e1000005"
private let cappedExponent = "0." + String(repeating: "0", count: 99_700) + "1e1000000"

/// Twenty members, more than the reader compares one by one.
private let manyKeys = (0..<20).map { #""k\#($0)":1"# }.joined(separator: ",")

/// `bytes` with one to four bytes changed at random: replaced by, or inserted from, `alphabet`, or removed.
private func changed(_ bytes: [UInt8], from alphabet: [UInt8], _ generator: inout SeededGenerator) -> [UInt8] {
    func next(_ bound: Int) -> Int { Int(generator.next() % UInt64(bound)) }
    var bytes = bytes
    for _ in 0...next(3) {
        let at = next(bytes.count)
        switch next(3) {
        case 0: bytes[at] = alphabet[next(alphabet.count)]
        case 1: bytes.insert(alphabet[next(alphabet.count)], at: at)
        default: bytes.remove(at: at)
        }
    }
    return bytes
}

/// The array `bytes` checked (or only located) the generic way, where it ends, each element's
/// place, and each element's `t` as the recorder read it before (nil when one has none).
private func elementTimes(_ bytes: [UInt8], checking: Bool) -> (end: Int, elements: [Range<Int>], times: [Double])? {
    bytes.withUnsafeBufferPointer { buffer in
        guard let (end, elements) = JSONParser.arrayMember(in: buffer, at: 0, checking: checking) else { return nil }
        var times: [Double] = []
        for element in elements {
            guard case .number(let t)? = try? JSONParser.member("t", ofObjectAt: element, in: bytes, checked: true) else { return nil }
            times.append(t)
        }
        return (end, elements, times)
    }
}

@Suite("JSON reader and writer")
struct JSONTests {
    private func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    @Test(
        "a string reads the same wherever in it, at every length, a byte read eight at a time would stop (an escape, a control character, UTF-8, DEL, the end)")
    func stringsAtEveryAlignment() throws {
        // (as written between the quotes, as read; nil: refused)
        let specials: [(written: [UInt8], read: String?)] = [
            (Array(#"\n"#.utf8), "\n"), (Array(#"\""#.utf8), "\""), (Array(#"\\"#.utf8), "\\"), (Array("é".utf8), "é"),
            ([0x7F], "\u{7F}"), ([0x01], nil), ([0x1F], nil), ([0xC3], nil),
        ]
        for length in 0..<24 {
            let plain = (0..<length).map { UInt8(ascii: "a") + UInt8($0 % 26) }
            #expect(try parse("\"" + String(decoding: plain, as: UTF8.self) + "\"") == .string(String(decoding: plain, as: UTF8.self)))
            for at in 0...length {
                for special in specials {
                    let bytes = [UInt8(ascii: "\"")] + plain[..<at] + special.written + plain[at...] + [UInt8(ascii: "\"")]
                    // Both as a value and as a key: keys are read by the same loop, and skipped ones by another.
                    let member = [UInt8(ascii: "{")] + bytes + Array(":1}".utf8)
                    let deferred = Array(#"{"samples":[{"#.utf8) + bytes + Array(":1}]}".utf8)
                    guard let read = special.read else {
                        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
                        #expect(throws: JSONParseError.self) { try JSONParser.parse(member) }
                        #expect(throws: JSONParseError.self) { try JSONParser.parse(deferred, deferring: "samples") }
                        continue
                    }
                    let text = String(decoding: plain[..<at], as: UTF8.self) + read + String(decoding: plain[at...], as: UTF8.self)
                    #expect(try JSONParser.parse(bytes) == .string(text))
                    #expect(try JSONParser.parse(member) == .object(JSONObject([(text, .number(1))])))
                    #expect(try JSONParser.parse(deferred, deferring: "samples").deferred != nil)
                }
            }
        }
    }

    @Test(
        "a deferred array's elements are located where a checking parse finds them, whatever byte of an eight-byte word each quote, comma, bracket or brace falls on"
    )
    func marksAtEveryAlignment() throws {
        // Runs of 0 to 16 spaces before each mark move it through every position of the words
        // `locateElements` reads eight bytes at a time; a long number and a long string run between them.
        for pad in 0...16 {
            let gap = String(repeating: " ", count: pad)
            let samples =
                "[\(gap){\(gap)\"t\"\(gap):1795910515.744538\(gap),\"acc_g\":[0.01611328125\(gap),0.06005859375,1.00927734375\(gap)]\(gap)"
                + ",\"state\":\"IDLE-padded-word\"\(gap)}\(gap),\(gap){\"t\":2.5}\(gap)"
                // Inside an element only quotes and nesting count: marks inside strings (an escaped quote
                // and backslash among them), and arrays nested deeper, at every alignment too.
                + ",{\"w\":\"\(gap)[,]{\\\"}\\\\\",\"n\":[[1,2\(gap)],[3,[4,\(gap)5]]]}]"
            let body = Array("{\"a\":1,\"samples\":\(samples),\"z\":\(gap)[\(gap)]}".utf8)
            let located = try JSONParser.parse(body, deferring: "samples", checking: false).deferred
            let checked = try JSONParser.parse(body, deferring: "samples", checking: true).deferred
            let elements = try #require(located?.elements)
            #expect(elements == checked?.elements, "pad \(pad)")
            #expect(elements.count == 3)
            #expect(elements.map { String(decoding: body[$0], as: UTF8.self).first } == ["{", "{", "{"])
            #expect(located?.range == checked?.range)
        }
    }

    @Test("reads every kind of value")
    func readsValues() throws {
        let value = try parse(#" {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "d\n\u00e9\ud83d\ude00"}} "#)
        guard case .object(let object) = value else { Issue.record("not an object"); return }
        #expect(object["a"] == .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]))
        #expect(object["b"] == .object(JSONObject([("c", .string("d\né😀"))])))
    }

    @Test(
        "numbers read exactly as the C library reads them",
        arguments: [
            "0", "-0", "1", "0.1", "0.2", "1763812345.123456", "123456789012345678", "1e-7", "2.5E+3",
            "9007199254740993", "4.9406564584124654e-324", "1.7976931348623157e308", "-273.15", "0.30000000000000004",
            "9007199254740992", "9007199254740992e-22", "1795695486.002832", "-0.0000000000000000000009007199254740991",
            "0e99999", "1e-400",
        ])
    func numbersExact(text: String) throws {
        #expect(try parse(text) == .number(Double(text)!))
    }

    @Test("numbers of 14 to 19 significant digits, as timestamps and readings are written, read as the C library reads them")
    func numbersExactRandom() throws {
        var generator = SeededGenerator(seed: 17)
        for _ in 0..<20_000 {
            let digits = 14 + Int(generator.next() % 6)
            var text = String(generator.next() % 9 + 1)
            for _ in 1..<digits { text += String(generator.next() % 10) }
            let point = Int(generator.next() % UInt64(digits + 1))
            if point < digits { text.insert(".", at: text.index(text.startIndex, offsetBy: max(point, 1))) }
            if generator.next() % 3 == 0 { text += "e" + String(Int(generator.next() % 50) - 25) }
            if generator.next() % 2 == 0 { text = "-" + text }
            let expected = Double(text)!
            let read = try parse(text)
            #expect(read == .number(expected), "\(text)")
            if read != .number(expected) { return }
        }
    }

    @Test(
        "rejects what RFC 8259 does not allow",
        arguments: [
            "", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "-", "1e", "NaN", "Infinity", "'a'",
            "{a:1}", "[1 2]", "\"\u{01}\"", "\"\\x\"", "\"\\ud800\"", "tru", "nul", "{\"a\":1}x", "1e999",
            "{\"a\":1,\"a\":2}", hugeExponent, "[" + hugeExponent + "]", "{\"\u{e9}\":1,\"e\u{301}\":2}",
            // An ASCII key and the one non-ASCII key Swift's String equality finds equal to it (KELVIN SIGN and K).
            "{\"K\":1,\"\u{212A}\":2}", "{\"\u{212A}\":1,\"K\":2}", "{\"K\":1,\"\\u212A\":2}",
        ])
    func rejects(text: String) {
        #expect(throws: JSONParseError.self) { try parse(text) }
    }

    @Test("a word's bytes that are not ASCII digits are found, whatever the byte and wherever in the word")
    func nonDigitsOfAWord() {
        for byte in 0...255 {
            for at in 0..<8 {
                var bytes = [UInt8](repeating: UInt8(ascii: "7"), count: 8)
                bytes[at] = UInt8(byte)
                let word = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                let others = JSONParser.nonDigits(word)
                if (0x30...0x39).contains(byte) {
                    #expect(others == 0, "\(byte) at \(at)")
                } else {
                    #expect(others != 0 && others.trailingZeroBitCount >> 3 == at, "\(byte) at \(at)")
                }
            }
        }
    }

    @Test(
        "a number is accepted deferred exactly when built, and ends in the same place, at every length a run of digits read eight at a time would stop")
    func numbersAtEveryLength() throws {
        let stops = ["", ",", "]", ".", ".5", "e", "e5", "E-3", "x", "0", " ", "\u{7F}", "é", "/", ":"]
        var lengths = Array(0..<20)
        lengths += [297, 298, 299, 300, 301, 308, 309, 310, 311]
        for integer in lengths {
            for fraction in [-1, 0, 1, 7, 8, 9, 17] {
                for sign in ["", "-"] {
                    for lead in ["1", "0"] {
                        let digits = String((lead + String(repeating: "3", count: integer)).prefix(max(integer, 0)))
                        var number = sign + digits
                        if fraction >= 0 { number += "." + String(repeating: "9", count: fraction) }
                        for stop in stops {
                            let element = number + stop
                            let built = try? JSONParser.parse(Array(("[" + element + "]").utf8))
                            let text = #"{"samples":["# + element + "]}"
                            let deferred = try? JSONParser.parse(Array(text.utf8), deferring: "samples")
                            #expect((built == nil) == (deferred == nil), "\(element.prefix(40))")
                            guard let member = deferred?.deferred, let ends = member.elements else { continue }
                            // The whole text between the brackets, whitespace around it left out, is one element (none: `[]`).
                            let trimmed = element.hasSuffix(" ") ? String(element.dropLast()) : element
                            #expect(ends.map(\.count) == (trimmed.isEmpty ? [] : [trimmed.utf8.count]), "\(element.prefix(40))")
                        }
                    }
                }
            }
        }
    }

    @Test(
        "a deferred member is checked as strictly as a built one",
        arguments: [
            "[1,]", "[01]", "[1 2]", "[{\"t\":1,\"t\":2}]", "[\"\u{01}\"]", "[\"\\x\"]", "[\"\\ud800\"]", "[tru]", "[1e999]",
            "[{a:1}]", "[" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "]", "[1", "{\"a\":}",
            "[{\"t\":1,\"\\u0074\":2}]", "[-1e309]", "[1.8e308]", "[\"\\ud83d\"]",
            "[{" + manyKeys + ",\"k7\":2}]", "[" + hugeExponent + "]", "[" + cappedExponent + "]", "[{\"\u{e9}\":1,\"e\u{301}\":2}]",
            "[{\"K\":1,\"\u{212A}\":2}]",
            // Duplicate keys short and long (past eight bytes), and one spelled with an escape.
            "[{\"ab\":1,\"cd\":2,\"ab\":3}]", "[{\"abcdefg\":1,\"abcdefg\":2}]", "[{\"abcdefgh\":1,\"abcdefgh\":2}]",
            "[{\"gx\":1,\"\\u0067x\":2}]",
        ])
    func deferredRejects(member: String) {
        let text = #"{"type":"sample","samples":"# + member + "}"
        #expect(throws: JSONParseError.self) { try parse(text) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(text.utf8), deferring: "samples") }
    }

    @Test(
        "a deferred member accepts what a built one accepts",
        arguments: [
            "[1.7976931348623157e308, 1e-400, 0e99999, -0, 1795695486.002832]", "[{\"t\":1,\"\\u0075\":2,\"\u{e9}\":3}]",
            "[{" + manyKeys + "}]", "[\"\\ud83d\\ude00\", \"\u{e9}\"]",
            "[{\"ab\":1,\"abc\":2,\"abcdefg\":3,\"abcdefgh\":4,\"abcdefgi\":5,\"b\":6,\"ba\":7,\"\":8}]",
        ])
    func deferredAccepts(member: String) throws {
        let text = #"{"type":"sample","samples":"# + member + "}"
        let (value, deferred) = try JSONParser.parse(Array(text.utf8), deferring: "samples")
        guard case .object(let whole) = try parse(text), let deferred else { Issue.record("not an object, or nothing deferred"); return }
        #expect(value != .null)
        #expect(try JSONParser.parse(Array(text.utf8), range: deferred.range) == whole["samples"])
    }

    @Test(
        "a located member is only found where it ends, and checked when built",
        arguments: [
            "[1,]", "[01]", "[tru]", "[1e999]", "[{\"t\":1,\"t\":2}]", "[\"\\x\"]", "{\"a\":}", "[\"\u{01}\"]",
            #"["a]\"}[", 1]"#, "[" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "]", "7",
            String(repeating: "[", count: 31) + String(repeating: "]", count: 31), String(repeating: "[", count: 32) + String(repeating: "]", count: 32),
        ])
    func located(member: String) throws {
        let text = #"{"type":"sample","samples":"# + member + #","n":3}"#
        let bytes = Array(text.utf8)
        let (value, deferred) = try JSONParser.parse(bytes, deferring: "samples", checking: false)
        guard case .object(let object) = value, let deferred else { Issue.record("not an object, or nothing deferred"); return }
        #expect(object["n"] == .number(3) && !deferred.checked)
        #expect(String(decoding: bytes[deferred.range], as: UTF8.self) == member)
        // An array's elements are located too: where a checked parse finds them, when it accepts it.
        #expect((deferred.elements == nil) == !member.hasPrefix("["))
        if let checked = try? JSONParser.parse(bytes, deferring: "samples").deferred {
            #expect(deferred.elements == checked.elements)
        }
        // Built, it is checked as strictly as ever: the same verdict as a whole parse.
        let whole = try? parse(text)
        let built = try? JSONParser.parse(bytes, range: deferred.range, depth: 1)
        #expect((whole == nil) == (built == nil))
    }

    @Test("a located member whose end cannot be found is refused on receipt", arguments: ["[1", #"["a]"#, "[[1]", "tru", "01"])
    func locatedUnfinished(member: String) {
        let text = #"{"type":"sample","samples":"# + member + "}"
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(text.utf8), deferring: "samples", checking: false) }
    }

    @Test("a deferred member reads null in the tree; its place and its elements' places read back to the value")
    func deferredMember() throws {
        let text = #"{"sensor":"distance", "samples": [ {"t":1.5,"mm":812}, {"mm":810,"t":1.52} ,{"t":1.54,"mm":809,"x":{"t":9}}],"n":3}"#
        let bytes = Array(text.utf8)
        let (value, deferred) = try JSONParser.parse(bytes, deferring: "samples")
        guard case .object(let object) = value, let deferred else { Issue.record("no object or nothing deferred"); return }
        #expect(object["samples"] == .null && object["n"] == .number(3) && object["sensor"] == .string("distance"))
        guard case .object(let whole) = try parse(text) else { Issue.record("not an object"); return }
        #expect(try JSONParser.parse(bytes, range: deferred.range) == whole["samples"])
        #expect(deferred.elements?.count == 3)
        let times = try deferred.elements!.map { try JSONParser.member("t", ofObjectAt: $0, in: bytes) }
        #expect(times == [.number(1.5), .number(1.52), .number(1.54)])
        #expect(try JSONParser.member("absent", ofObjectAt: deferred.elements![0], in: bytes) == nil)
        let checkedTimes = try deferred.elements!.map { try JSONParser.member("t", ofObjectAt: $0, in: bytes, checked: true) }
        #expect(checkedTimes == times, "an object checked already: the same values, found without reading past the key")
        // Unchecked, the rest of the object is read (and a second key refused); checked, the search stops at the first.
        let doubled = Array(#"{"t":1,"t":2}"#.utf8)
        #expect(throws: JSONParseError.self) { try JSONParser.member("t", ofObjectAt: 0..<doubled.count, in: doubled) }
        #expect(try JSONParser.member("t", ofObjectAt: 0..<doubled.count, in: doubled, checked: true) == .number(1))
        // A key nested deeper, or a member of another name, is not deferred.
        #expect(try JSONParser.parse(Array(#"{"a":{"samples":[1]}}"#.utf8), deferring: "samples").deferred == nil)
    }

    @Test("a located array's elements are found where a checked parse finds them; an array that is not one is refused")
    func locatedElements() throws {
        let text = #"{"sensor":"imu","samples": [ {"t":1.5,"s":"a]}\"{"} ,{"t":1.52,"acc":[1,[2]]},7 ,"x"],"n":3}"#
        let bytes = Array(text.utf8)
        let checked = try #require(try JSONParser.parse(bytes, deferring: "samples").deferred)
        let located = try #require(try JSONParser.parse(bytes, deferring: "samples", checking: false).deferred)
        #expect(located.range == checked.range)
        #expect(try JSONParser.elements(ofArrayAt: located.range, in: bytes) == checked.elements)
        #expect(located.elements == checked.elements, "located in the same pass that finds the array's end")
        // Two elements without a comma between are refused on receipt: read as one, the
        // object's first member alone would be found (`member(_:ofObjectAt:in:checked:)`).
        for bad in [#"[{"t":1} {"t":2}]"#, #"[{"t":1}{"t":2}]"#, #"["a" "b"]"#, #"[[1] 2]"#] {
            let badText = Array((#"{"samples":"# + bad + "}").utf8)
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(badText, deferring: "samples", checking: false) }
        }
        let spaced = Array(#"{"samples":[ {"t":1} , {"t":2} ]}"#.utf8)
        let spacedElements = try #require(try JSONParser.parse(spaced, deferring: "samples", checking: false).deferred?.elements)
        #expect(spacedElements.map { String(decoding: spaced[$0], as: UTF8.self) } == [#"{"t":1}"#, #"{"t":2}"#])
        let empty = Array("[ ]".utf8)
        #expect(try JSONParser.elements(ofArrayAt: 0..<empty.count, in: empty) == [])
        for bad in [#"{"t":1}"#, "[1 2]", "[1,", "[{]"] {
            let badBytes = Array(bad.utf8)
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.elements(ofArrayAt: 0..<badBytes.count, in: badBytes) }
        }
    }

    @Test("readings checked in one pass are checked as the generic pass checks them, with each one's place and time; anything else is left to it")
    func checkedReadings() throws {
        let base = Array(
            (#"[{"t":1795910514.158098,"acc_g":[0.015625,0.0439453125,-0.98876953125],"gyro_dps":[0.9765625,-0.18,0],"#
                + #""angle_deg":[2.0104,-0.62,29.99]}, {"t":1795910514.168098,"distance_mm":592.5,"state":"IDLE","acc_g":[]} ]"#).utf8)
        // The generic check, and each element's time as the recorder read it before.
        func generic(_ bytes: [UInt8]) -> (end: Int, elements: [Range<Int>], times: [Double])? { elementTimes(bytes, checking: true) }
        func fast(_ bytes: [UInt8]) -> (end: Int, elements: [Range<Int>], times: [Double])? {
            bytes.withUnsafeBufferPointer { JSONParser.checkedReadings(in: $0, at: 0) }
        }
        let read = try #require(fast(base))
        #expect(read.times == [1_795_910_514.158098, 1_795_910_514.168098])
        #expect(read.end == base.count)
        #expect(read.elements.map { String(decoding: base[$0], as: UTF8.self).hasSuffix("}") } == [true, true])
        // Bytes changed at random (a fixed sequence): whatever the fast pass accepts, the generic
        // one accepts with the same places and times; whatever the generic one refuses, it does.
        let alphabet = Array(#"{}[],:"\ -+.0123456789eEtnrux"#.utf8) + [0x09, 0x0A, 0x1F, 0x80, 0xC3, 0xFF]
        var generator = SeededGenerator(seed: 29)
        var (accepted, refused, leftOver) = (0, 0, 0)
        for _ in 0..<8_000 {
            let bytes = changed(base, from: alphabet, &generator)
            let expected = generic(bytes)
            if let got = fast(bytes) {
                accepted += 1
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(expected?.end == got.end && expected?.elements == got.elements, "\(text)")
                #expect(expected?.times == got.times, "\(text)")
            } else if expected == nil {
                refused += 1
            } else {
                leftOver += 1
            }
        }
        // Each way taken often, so the comparison above is not vacuous.
        #expect(accepted > 1_000 && refused > 1_000 && leftOver > 0, "accepted \(accepted), refused \(refused), left over \(leftOver)")
        // Written otherwise, though sound: left to the generic pass.
        for variant in [
            #"[]"#, #"[{}]"#, #"[{"t":1,"x":{"a":1}}]"#, #"[{"t":1,"x":true}]"#, #"[{"acc":[1]}]"#, #"[{"t":"now"}]"#, #"[{"t":1,"\u0061":1}]"#, #"[1]"#,
        ] {
            let bytes = Array(variant.utf8)
            #expect(fast(bytes) == nil, "\(variant)")
        }
        // Refused by both: a key twice, a bad number, two readings without a comma.
        for variant in [#"[{"t":1,"t":2}]"#, #"[{"t":1,"a":1,"a":2}]"#, #"[{"t":01}]"#, #"[{"t":1}{"t":2}]"#, #"[{"t":1,"a":[1,]}]"#, #"[{"t":1e999}]"#] {
            let bytes = Array(variant.utf8)
            #expect(fast(bytes) == nil && generic(bytes) == nil, "\(variant)")
        }
    }

    @Test("the times read in one pass are the located readings' times, and the array ends where the located one does")
    func readingTimesAsLocated() throws {
        let head = #"[{"t":1795910514.158098,"acc_g":[0.015625,0.0439453125,-0.98876953125],"gyro_dps":[0.9765625,-0.18,0],"#
        let tail = #", {"t":1795910514.168098,"acc_g":[1,[2,[]]]} ,{"t":-2}]"#
        // A string holding brackets and braces; the same with an escaped quote in it.
        let clean = Array((head + #""angle_deg":[2.0104,-0.62,29.99],"note":"a}]{["}"# + tail).utf8)
        let escaped = Array((head + #""angle_deg":[2.0104,-0.62,29.99],"note":"a}]{[\"x"}"# + tail).utf8)
        func located(_ bytes: [UInt8]) -> (end: Int, times: [Double])? { elementTimes(bytes, checking: false).map { ($0.end, $0.times) } }
        func fast(_ bytes: [UInt8]) -> (end: Int, times: [Double])? {
            bytes.withUnsafeBufferPointer { buffer in JSONParser.readingTimes(in: buffer, at: 0).map { ($0.end, $0.times) } }
        }
        // Brackets, braces and an escaped quote in a string are passed over.
        let escapedRead = try #require(fast(escaped))
        #expect(located(escaped)?.end == escapedRead.end && located(escaped)?.times == escapedRead.times)
        let read = try #require(fast(clean))
        #expect(read.times == [1_795_910_514.158098, 1_795_910_514.168098, -2])
        #expect(read.end == clean.count)
        // Bytes changed at random (a fixed sequence), the array starting at every offset from a word's start.
        let alphabet = Array(#"{}[],:"\ -.0123456789tx"#.utf8)
        var generator = SeededGenerator(seed: 31)
        var agreed = 0
        for _ in 0..<8_000 {
            let bytes = changed(clean, from: alphabet, &generator)
            // Read from an offset, so the words fall at every place in the readings.
            let padded = Array(repeating: UInt8(ascii: "x"), count: Int(generator.next() % 8)) + bytes
            let offset = padded.count - bytes.count
            guard let got = padded.withUnsafeBufferPointer({ JSONParser.readingTimes(in: $0, at: offset) }) else { continue }
            agreed += 1
            let expected = located(bytes)
            #expect(expected?.end == got.end - offset && expected?.times == got.times, "\(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(agreed > 1_000, "\(agreed) read in one pass")
    }

    @Test("rejects invalid UTF-8 inside strings")
    func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
    }

    @Test("bounds nesting depth")
    func boundsDepth() throws {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try parse(deep) }
        let fine = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
        #expect(try parse(fine) != .null)
    }

    @Test("writer output reads back to the same value")
    func roundTrip() throws {
        let value = JSONValue.object(
            JSONObject([
                ("s", .string("quote\" slash\\ nl\n tab\t ctl\u{01} é")),
                ("n", .array([.number(0.1), .number(-3), .number(1e-9), .number(123456.789), .number(1e300)])),
                ("b", .bool(false)), ("z", .null), ("o", .object(JSONObject())), ("a", .array([])),
            ]))
        var writer = JSONWriter()
        writer.value(value)
        #expect(try JSONParser.parse(writer.bytes) == value)
    }

    @Test("a string reads as its own text, whether or not it is one of the words every message repeats")
    func knownWords() throws {
        let words = [
            "v", "type", "station", "src", "seq", "ts", "athlete", "sensor", "device", "samples", "t", "distance_mm", "state", "acc_g", "gyro_dps",
            "angle_deg", "acc", "mag", "sample", "imu", "distance", "posture", "sim", "IDLE", "ECCENTRIC", "CONCENTRIC", "status", "heartbeat",
            "rep", "set", "cmd", "ack",
        ]
        let nearMisses = ["", "w", "typ", "types", "Type", "sampl", "samplez", "stat", "imv", "distance_m", "ECCENTRIc", "eccentric", "a", "seqs"]
        for word in words + nearMisses {
            #expect(try JSONParser.parse(Array("\"\(word)\"".utf8)) == .string(word), "\(word)")
            let object = try JSONParser.parse(Array("{\"\(word)\":1}".utf8))
            guard case .object(let fields) = object else { Issue.record("not an object"); continue }
            #expect(fields.fields.map(\.key) == [word])
        }
    }

    @Test("a string is written as is unless it holds a quote, a backslash or a control character")
    func stringEscapes() throws {
        func written(_ text: String) -> String {
            var writer = JSONWriter()
            writer.string(text)
            return String(decoding: writer.bytes, as: UTF8.self)
        }
        #expect(written("sensor-bridge-64342d2b/sample.rack-1 é ✓") == "\"sensor-bridge-64342d2b/sample.rack-1 é ✓\"")
        #expect(written("") == "\"\"")
        #expect(written("a\"b") == "\"a\\\"b\"")
        #expect(written("a\\b") == "\"a\\\\b\"")
        #expect(written("line\nnext\ttab\r") == "\"line\\nnext\\ttab\\r\"")
        #expect(written("\u{1F}\u{00}x") == "\"\\u001f\\u0000x\"")
        #expect(written("\u{7F}") == "\"\u{7F}\"")
    }

    @Test("fixed-point numbers keep microseconds")
    func fixedPoint() throws {
        var writer = JSONWriter()
        writer.beginArray()
        writer.fixed(1763812345.1234567, decimals: 6)
        writer.fixed(-0.5, decimals: 3)
        writer.fixed(2, decimals: 2)
        writer.fixed(12.000034, decimals: 6)
        writer.fixed(7.25, decimals: 0)
        writer.endArray()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "[1763812345.123457,-0.500,2.00,12.000034,7]")
    }

    @Test("non-finite numbers are flagged, not written as invalid JSON")
    func nonFinite() throws {
        var writer = JSONWriter()
        writer.number(.nan)
        #expect(writer.sawNonFiniteNumber)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "null")
    }
}
