// A small, strict JSON reader and writer for bus messages.
//
// Why not Foundation's JSONDecoder/JSONEncoder: every bus message is decoded
// by every consumer, and on this machine Foundation costs ~9 µs to decode and
// ~6 µs to encode a 200-byte message (`make bench` prints both side by side),
// which alone would cap a consumer near 100 k msg/s. This reader parses into
// a plain value tree in one pass over the bytes, validates UTF-8, rejects
// anything RFC 8259 does not allow, and bounds nesting depth, so a hostile
// message costs at most its own size.

/// A parsed JSON value.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// A JSON object with its fields in document order (keys are unique).
public struct JSONObject: Sendable, Equatable {
    /// The fields in the order they were read or added.
    public var fields: [(key: String, value: JSONValue)] {
        didSet { asciiKeys = false }
    }
    /// Every key is ASCII (known only of an object `JSONParser` read, false once changed): two
    /// keys are then equal exactly when their bytes are. Swift's `==` also finds some non-ASCII
    /// strings equal to ASCII ones ("\u{212A}", KELVIN SIGN, and "K"), so without it a lookup
    /// compares whole strings.
    var asciiKeys = false

    /// Creates an object from key/value pairs.
    public init(_ fields: [(key: String, value: JSONValue)] = []) { self.fields = fields }

    /// An object the parser read; `asciiKeys` says whether every key is ASCII.
    init(_ fields: [(key: String, value: JSONValue)], asciiKeys: Bool) {
        self.fields = fields
        self.asciiKeys = asciiKeys
    }

    /// The value of `key`, if present. Linear: bus objects have a dozen keys.
    public subscript(key: String) -> JSONValue? {
        get {
            for field in fields where field.key == key { return field.value }
            return nil
        }
        set {
            if let index = fields.firstIndex(where: { $0.key == key }) {
                if let newValue { fields[index].value = newValue } else { fields.remove(at: index) }
            } else if let newValue {
                fields.append((key, newValue))
            }
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// Why a byte string is not acceptable JSON, with the byte offset.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public let reason: String
    /// Byte offset into the input where it was noticed.
    public let offset: Int
    public var description: String { "\(reason) at byte \(offset)" }
}

/// A member of a top-level object that `JSONParser.parse(_:deferring:)` checked
/// but did not build: where its value lies in the bytes and, for an array,
/// where each element lies. A consumer that drops most samples unread builds
/// no tree of their readings (building them was a fifth of each consumer's work).
public struct DeferredMember: Sendable, Equatable {
    /// The member's key.
    public var key: String
    /// The value's bytes.
    public var range: Range<Int>
    /// For an array, each element's bytes (when not checked, only located: an
    /// element is checked when it is built or read); nil for any other value.
    public var elements: [Range<Int>]?
    /// Whether its bytes were checked as strictly as a built value's; when
    /// not, only where it ends was found, and it is checked when built
    /// (`JSONParser.parse(_:range:)`).
    public var checked = true
}

/// Parses one JSON document from UTF-8 bytes (strict RFC 8259).
public struct JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 32

    /// Parses `bytes` as exactly one JSON value surrounded by optional whitespace.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try parse(bytes, deferring: nil).value
    }

    /// Parses `bytes` as `parse(_:)` does, every byte checked as strictly,
    /// except that the value of the top-level object's member `key` is not
    /// built: it reads `null` in the tree, and its place is returned. Unless
    /// `checking`, that value is not checked either, only where it ends
    /// found (strings and nesting followed): for a consumer that drops most
    /// such values unread, and checks the rest when it builds them.
    public static func parse(
        _ bytes: [UInt8], deferring key: String?, checking: Bool = true
    ) throws(JSONParseError) -> (
        value: JSONValue, deferred: DeferredMember?
    ) {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> (value: JSONValue, deferred: DeferredMember?) in
            var parser = JSONParser(buffer)
            parser.deferKey = key
            parser.checkDeferred = checking
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            if parser.index != buffer.count { throw parser.error("trailing characters after the JSON value") }
            return (value, parser.deferred)
        }
    }

    /// Parses the JSON value at `range` of `bytes` (a deferred member's, say),
    /// as if nested `depth` levels deep (a top-level object's member: 1), so
    /// the nesting bound is the whole document's.
    public static func parse(_ bytes: [UInt8], range: Range<Int>, depth: Int = 0) throws(JSONParseError) -> JSONValue {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { throw JSONParseError(reason: "range outside the bytes", offset: 0) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in
            var parser = JSONParser(UnsafeBufferPointer(rebasing: buffer[range]))
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: depth)
            parser.skipWhitespace()
            if parser.index != parser.bytes.count { throw parser.error("trailing characters after the JSON value") }
            return value
        }
    }

    /// Where each element of the array at `range` of `bytes` lies (a deferred
    /// member's found but not checked, `DeferredMember.checked` false), each
    /// only located as `parse(_:deferring:checking:)` locates an unchecked
    /// member; an element is checked when it is built or read.
    public static func elements(ofArrayAt range: Range<Int>, in bytes: [UInt8]) throws(JSONParseError) -> [Range<Int>] {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { throw JSONParseError(reason: "range outside the bytes", offset: 0) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> [Range<Int>] in
            var parser = JSONParser(UnsafeBufferPointer(rebasing: buffer[range]))
            parser.skipWhitespace()
            guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "[") else { throw parser.error("expected an array") }
            parser.index += 1
            var elements: [Range<Int>] = []
            parser.skipWhitespace()
            if parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "]") { return elements }
            while true {
                parser.skipWhitespace()
                let start = parser.index
                try parser.findEnd()
                elements.append(range.lowerBound + start..<range.lowerBound + parser.index)
                parser.skipWhitespace()
                guard parser.index < parser.bytes.count else { throw parser.error("unexpected end of input") }
                if parser.bytes[parser.index] == UInt8(ascii: ",") {
                    parser.index += 1
                    continue
                }
                if parser.bytes[parser.index] == UInt8(ascii: "]") { return elements }
                throw parser.error("expected ',' or ']'")
            }
        }
    }

    /// The value of member `key` of the object at `range` of `bytes` (a
    /// deferred array's element, say), building none of the other members;
    /// nil when the object has no such member. When the object was `checked`
    /// already (a deferred member's element), the search stops at the key:
    /// what follows it needs no second look.
    public static func member(
        _ key: String, ofObjectAt range: Range<Int>, in bytes: [UInt8], checked: Bool = false
    ) throws(JSONParseError) -> JSONValue? {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { throw JSONParseError(reason: "range outside the bytes", offset: 0) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue? in
            var parser = JSONParser(UnsafeBufferPointer(rebasing: buffer[range]))
            return try parser.member(key, stopAtKey: checked)
        }
    }

    /// The array at `start` of `buffer`, a top-level object's member, read as `parse(_:deferring:checking:)`
    /// reads a deferred one: checked as strictly as a built value when `checking`, else only located.
    /// Where it ends and its elements; nil when no array is there, or it is refused (the caller then
    /// parses the whole frame, which says why).
    static func arrayMember(in buffer: UnsafeBufferPointer<UInt8>, at start: Int, checking: Bool) -> (end: Int, elements: [Range<Int>])? {
        guard start < buffer.count, buffer[start] == UInt8(ascii: "[") else { return nil }
        var parser = JSONParser(buffer)
        parser.index = start
        do {
            let elements = checking ? try parser.skipValue(depth: 1, recordingElements: true) : try parser.locateElements()
            return elements.map { (parser.index, $0) }
        } catch {
            return nil
        }
    }

    private mutating func member(_ wanted: String, stopAtKey: Bool) throws(JSONParseError) -> JSONValue? {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { throw error("expected an object") }
        index += 1
        var found: JSONValue?
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") { return nil }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try skipString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            if matches(key, wanted) {
                guard found == nil else { throw error("duplicate key \"\(wanted)\"") }
                found = try parseValue(depth: 1)
                if stopAtKey { return found }
            } else {
                _ = try skipValue(depth: 1)
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { return found }
            throw error("expected ',' or '}'")
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var deferKey: String?
    private var checkDeferred = true
    private var deferred: DeferredMember?
    /// Whether the string `parseString` read last was all ASCII (its keys then compare by their bytes).
    private var lastStringASCII = true
    /// Keys of the objects being skipped, innermost last (for the duplicate check without a set per object).
    private var skippedKeys: [StringSpan] = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private func error(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: index) }

    @inline(__always) private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input") }
        let pointer = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != pointer[offset] {
            throw error("invalid literal")
        }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONObject {
        if depth > Self.maxDepth { throw error("nesting deeper than \(Self.maxDepth)") }
        index += 1  // {
        var fields: [(key: String, value: JSONValue)] = []
        fields.reserveCapacity(depth == 1 ? 16 : 4)
        var keys: Set<String>?  // for large objects, so the duplicate check stays linear
        var asciiKeys = true  // every key so far is ASCII
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") { index += 1; return JSONObject(fields, asciiKeys: true) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            if fields.count >= 16 {
                if keys == nil { keys = Set(fields.map(\.key)) }
                guard keys!.insert(key).inserted else { throw error("duplicate key \"\(key)\"") }
            } else {
                if asciiKeys && lastStringASCII {
                    // ASCII keys are equal exactly when their bytes are: lengths first, a load rather than a
                    // call (Swift's == finds "\u{212A}" and "K" equal, so it alone decides otherwise).
                    let length = key.utf8.count
                    for field in fields where field.key.utf8.count == length && field.key == key { throw error("duplicate key \"\(key)\"") }
                } else {
                    for field in fields where field.key == key { throw error("duplicate key \"\(key)\"") }
                }
            }
            asciiKeys = asciiKeys && lastStringASCII
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            if depth == 1, let deferKey, key == deferKey, checkDeferred {
                let start = index
                let elements = try skipValue(depth: depth, recordingElements: true)
                deferred = DeferredMember(key: key, range: start..<index, elements: elements)
                fields.append((key, .null))
            } else if depth == 1, let deferKey, key == deferKey {
                let start = index
                let elements = try locateElements()
                deferred = DeferredMember(key: key, range: start..<index, elements: elements, checked: false)
                fields.append((key, .null))
            } else {
                fields.append((key, try parseValue(depth: depth)))
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return JSONObject(fields, asciiKeys: asciiKeys) }
            throw error("expected ',' or '}'")
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > Self.maxDepth { throw error("nesting deeper than \(Self.maxDepth)") }
        index += 1  // [
        var elements: [JSONValue] = []
        elements.reserveCapacity(4)
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            throw error("expected ',' or ']'")
        }
    }

    /// Checks the value at `index` as `parseValue` would, building nothing;
    /// for an array with `recordingElements`, returns where each element lies.
    private mutating func skipValue(depth: Int, recordingElements: Bool = false) throws(JSONParseError) -> [Range<Int>]? {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try skipObject(depth: depth + 1)
        case UInt8(ascii: "["): return try skipArray(depth: depth + 1, recordingElements: recordingElements)
        case UInt8(ascii: "\""): _ = try skipString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try skipNumber()
        default: throw error("unexpected character")
        }
        return nil
    }

    /// Moves past the value at `index` without checking it: an array or an
    /// object ends where its brackets balance (brackets inside strings, and
    /// escaped quotes, do not count); any other value is checked, as it is short.
    private mutating func findEnd() throws(JSONParseError) {
        guard index < bytes.count else { throw error("unexpected end of input") }
        guard bytes[index] == UInt8(ascii: "[") || bytes[index] == UInt8(ascii: "{") else {
            _ = try skipValue(depth: 1)
            return
        }
        var open = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
            case UInt8(ascii: "["), UInt8(ascii: "{"): open += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                open -= 1
                if open == 0 {
                    index += 1
                    return
                }
            default: break
            }
            index += 1
        }
        index = bytes.count
        throw error("unexpected end of input")
    }

    /// Finds where the value at `index` ends as `findEnd` does and, for an array, where each
    /// of its elements lies (whitespace around them left out; an element missing between two
    /// commas is an empty range, refused when it is read). Nothing is checked: each element
    /// is when it is built or read. One pass: the rep-detector located the readings of each
    /// IMU message, then went over them again for their elements.
    private mutating func locateElements() throws(JSONParseError) -> [Range<Int>]? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else {
            try findEnd()
            return nil
        }
        var elements: [Range<Int>] = []
        elements.reserveCapacity(8)
        var open = 0
        var start = index + 1
        func trimmed(_ lower: Int, _ upper: Int) -> Range<Int> {
            var (lower, upper) = (lower, upper)
            while lower < upper, Self.isWhitespace(bytes[lower]) { lower += 1 }
            while upper > lower, Self.isWhitespace(bytes[upper - 1]) { upper -= 1 }
            return lower..<upper
        }
        // Whether an element of the array has ended (a string, object or array closed) and
        // only a comma or the array's end may come: what was two elements without one between
        // would read as one, its first reading alone (`JSONParser.member(_:ofObjectAt:in:checked:)`
        // stops at the key).
        var ended = false
        while index < bytes.count {
            let byte = bytes[index]
            if open == 1, ended, byte != UInt8(ascii: ","), byte != UInt8(ascii: "]"), !Self.isWhitespace(byte) {
                throw error("expected ',' or ']'")
            }
            switch byte {
            case UInt8(ascii: "\""):
                index = pastWords(from: index + 1, without: Self.mayHoldQuote)
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                ended = open == 1
            case UInt8(ascii: "["), UInt8(ascii: "{"): open += 1
            case UInt8(ascii: ","):
                if open == 1 {
                    elements.append(trimmed(start, index))
                    start = index + 1
                    ended = false
                }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                open -= 1
                if open == 0 {
                    let last = trimmed(start, index)
                    if !last.isEmpty || !elements.isEmpty { elements.append(last) }
                    index += 1
                    return elements
                }
                ended = open == 1
            default:
                // Digits, letters, points, signs, colons and spaces, most of the bytes of readings,
                // are passed in a tight loop up to the next byte that matters here; not once an
                // element has ended at the array's level, where only a comma or the end may come.
                // Inside an element (a reading), commas do not matter: only quotes and nesting, so the
                // numbers of a reading's vectors are passed eight bytes at a time, not stopped at
                // every comma (readings are one byte in four a mark, one in nine without commas).
                if open > 1 {
                    var next = pastWords(from: index + 1, without: Self.mayHoldNesting)
                    while next < bytes.count, !Self.isNesting(bytes[next]) { next += 1 }
                    index = next - 1
                } else if !ended {
                    var next = pastWords(from: index + 1, without: Self.mayHoldMark)
                    while next < bytes.count, !Self.isMark(bytes[next]) { next += 1 }
                    index = next - 1
                }
            }
            index += 1
        }
        index = bytes.count
        throw error("unexpected end of input")
    }

    /// Whether one of the eight bytes of `word` is `byte`; exact (the zero-byte test of
    /// `mayHoldSpecial`, whose answer for a whole word is exact).
    @inline(__always) private static func holds(_ word: UInt64, _ byte: UInt8) -> Bool { marks(word, byte) != 0 }

    /// The zero-byte test of `word` xor eight copies of `byte`: a byte's high bit set in the first
    /// byte that is `byte`, and maybe in bytes after it, never in one before it (on a
    /// little-endian machine, the first byte lowest); none when no byte is.
    @inline(__always) private static func marks(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let value = word ^ (ones &* UInt64(byte))
        return (value &- ones) & ~value & (ones &* 0x80)
    }

    /// `word` with every byte's 0x20 bit set: [ and { then read alike, as do ] and } (as in `isMark`).
    @inline(__always) private static func folded(_ word: UInt64) -> UInt64 { word | 0x2020_2020_2020_2020 }

    /// Whether one of the eight bytes of `word` is a quote, a comma, a bracket or a brace; exact.
    @inline(__always) private static func mayHoldMark(_ word: UInt64) -> Bool {
        holds(word, 0x22) || holds(word, 0x2C) || holds(folded(word), 0x7B) || holds(folded(word), 0x7D)
    }

    /// A quote, comma, bracket or brace: what `locateElements` stops at.
    @inline(__always) private static func isMark(_ byte: UInt8) -> Bool {
        // [ and { differ in one bit (0x20), as do ] and }.
        let folded = byte | 0x20
        return folded == UInt8(ascii: "{") || folded == UInt8(ascii: "}") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: ",")
    }

    /// Whether one of the eight bytes of `word` is a quote, a bracket or a brace (`mayHoldMark`
    /// without commas: what matters inside an element); exact, as that one is.
    @inline(__always) private static func mayHoldNesting(_ word: UInt64) -> Bool {
        holds(word, 0x22) || holds(folded(word), 0x7B) || holds(folded(word), 0x7D)
    }

    /// A quote, bracket or brace: `isMark` without commas.
    @inline(__always) private static func isNesting(_ byte: UInt8) -> Bool {
        let folded = byte | 0x20
        return folded == UInt8(ascii: "{") || folded == UInt8(ascii: "}") || byte == UInt8(ascii: "\"")
    }

    /// Whether one of the eight bytes of `word` is a quote or a backslash: where a string's
    /// bytes may end or escape (exact).
    @inline(__always) private static func mayHoldQuote(_ word: UInt64) -> Bool { holds(word, 0x22) || holds(word, 0x5C) }

    @inline(__always) private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private mutating func skipObject(depth: Int) throws(JSONParseError) {
        if depth > Self.maxDepth { throw error("nesting deeper than \(Self.maxDepth)") }
        index += 1  // {
        let base = skippedKeys.count
        defer { skippedKeys.removeSubrange(base...) }
        var keys: Set<String>?  // for large objects, so the duplicate check stays linear
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") { index += 1; return }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try skipString()
            if skippedKeys.count - base >= 16 {
                if keys == nil { keys = Set(skippedKeys[base...].map { text(of: $0) }) }
                guard keys!.insert(text(of: key)).inserted else { throw error("duplicate key \"\(text(of: key))\"") }
            } else {
                for seen in skippedKeys[base...] where equal(seen, key) { throw error("duplicate key \"\(text(of: key))\"") }
            }
            skippedKeys.append(key)
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            _ = try skipValue(depth: depth)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return }
            throw error("expected ',' or '}'")
        }
    }

    private mutating func skipArray(depth: Int, recordingElements: Bool) throws(JSONParseError) -> [Range<Int>]? {
        if depth > Self.maxDepth { throw error("nesting deeper than \(Self.maxDepth)") }
        index += 1  // [
        var elements: [Range<Int>]? = recordingElements ? [] : nil
        // A bridge's message holds a few readings: room for them at once, not grown 1, 2, 4.
        elements?.reserveCapacity(8)
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") { index += 1; return elements }
        while true {
            skipWhitespace()
            let start = index
            _ = try skipValue(depth: depth)
            elements?.append(start..<index)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return elements }
            throw error("expected ',' or ']'")
        }
    }

    /// Where a string's bytes lie (between its quotes), and whether they hold escapes.
    private struct StringSpan {
        var range: Range<Int>
        var escaped: Bool
        /// Only ASCII bytes: its bytes are its text (else two spellings of one text compare equal, as Strings do).
        var ascii: Bool
    }

    /// Checks the string at `index` as `parseString` does, building nothing
    /// unless it holds escapes or non-ASCII bytes (both rare on the bus).
    private mutating func skipString() throws(JSONParseError) -> StringSpan {
        let quote = index
        index += 1
        let start = index
        var ascii = true
        index = pastWords(from: index, without: Self.mayHoldSpecial)
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let range = start..<index
                index += 1
                if !ascii, String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) == nil {
                    throw JSONParseError(reason: "string is not valid UTF-8", offset: start)
                }
                return StringSpan(range: range, escaped: false, ascii: ascii)
            }
            if byte == UInt8(ascii: "\\") {
                index = quote
                _ = try parseString()
                return StringSpan(range: start..<(index - 1), escaped: true, ascii: false)
            }
            if byte < 0x20 { throw error("control character in string") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw error("unterminated string")
    }

    /// Past the eight-byte words from `start` on for which `holds` is false: the first index
    /// whose word it is true of, or fewer than eight bytes before the end; the caller goes on a
    /// byte at a time from there. A string's loop passes words of plain characters
    /// (`mayHoldSpecial`: a byte at a time, reading strings was a quarter of reading an
    /// envelope), `locateElements` words without a mark (`mayHoldMark`); see docs/decisions/0034-wire-codec-hot-paths.md.
    @inline(__always) private func pastWords(from start: Int, without holds: (UInt64) -> Bool) -> Int {
        guard let base = bytes.baseAddress else { return start }
        var at = start
        while at + 8 <= bytes.count, !holds(UnsafeRawPointer(base + at).loadUnaligned(as: UInt64.self)) {
            at += 8
        }
        return at
    }

    /// The first index from `start` on that is not an ASCII digit (or the end): eight bytes at a
    /// time, the first that is not a digit found by its bit in the word (`nonDigits`), the last
    /// few bytes one at a time. A reading's numbers end within their first or second word: found
    /// a byte at a time there, their last digits were a third of checking them.
    @inline(__always) private func pastDigits(from start: Int) -> Int {
        var at = start
        if let base = bytes.baseAddress {
            while at + 8 <= bytes.count {
                let marks = Self.nonDigits(UnsafeRawPointer(base + at).loadUnaligned(as: UInt64.self))
                if marks != 0 { return at + marks.trailingZeroBitCount / 8 }
                at += 8
            }
        }
        while at < bytes.count, isDigit(bytes[at]) { at += 1 }
        return at
    }

    /// Of the eight bytes of `word`, those that are not ASCII digits hold a bit set among their
    /// four high ones, the digits none (on a little-endian machine, the first byte lowest). A digit is 0x30-0x39:
    /// its high half is 3, and its low half plus 6 stays under 0x10 (no byte carries into the
    /// next: at most 0x0F + 0x06).
    @inline(__always) static func nonDigits(_ word: UInt64) -> UInt64 {
        let highHalves = (word & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030
        let overNine = ((word & 0x0F0F_0F0F_0F0F_0F0F) &+ 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010
        return highHalves | overNine
    }

    /// Whether one of the eight bytes of `word` is a quote, a backslash, below 0x20 or above
    /// 0x7F. Exact when none is above 0x7F (the zero-byte test of Anderson's "Bit Twiddling
    /// Hacks", graphics.stanford.edu/~seander/bithacks.html#ZeroInWord, whose false bits lie
    /// only above a true one), and true whenever one is.
    @inline(__always) private static func mayHoldSpecial(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below0x20 = (word &- ones &* 0x20) & ~word & highs
        // A byte equal to `byte` is a zero byte of `word ^ (ones * byte)`.
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let quote = (quotes &- ones) & ~quotes & highs
        let backslash = (backslashes &- ones) & ~backslashes & highs
        return ((word & highs) | below0x20 | quote | backslash) != 0
    }

    /// The text of a string checked by `skipString`.
    private func text(of span: StringSpan) -> String {
        guard span.escaped else { return String(decoding: UnsafeBufferPointer(rebasing: bytes[span.range]), as: UTF8.self) }
        var again = JSONParser(bytes)
        again.index = span.range.lowerBound - 1
        return (try? again.parseString()) ?? ""
    }

    /// Whether two strings checked by `skipString` are the same text.
    private func equal(_ lhs: StringSpan, _ rhs: StringSpan) -> Bool {
        if !lhs.ascii || !rhs.ascii { return text(of: lhs) == text(of: rhs) }
        return lhs.range.count == rhs.range.count
            && UnsafeBufferPointer(rebasing: bytes[lhs.range]).elementsEqual(UnsafeBufferPointer(rebasing: bytes[rhs.range]))
    }

    /// Whether a string checked by `skipString` is `wanted`.
    private func matches(_ span: StringSpan, _ wanted: String) -> Bool {
        if !span.ascii { return text(of: span) == wanted }
        return UnsafeBufferPointer(rebasing: bytes[span.range]).elementsEqual(wanted.utf8)
    }

    /// The keys and words every bus message repeats (proto/), by length: a string read from
    /// the bytes is one of these constants when its bytes are, and is not made again (making
    /// each, its bytes checked a second time, was a fifth of reading an envelope).
    /// Each word's bytes are packed into two integers, so a match is two compares.
    private static let knownWords: [[(low: UInt64, high: UInt64, text: String)]] = {
        let words = [
            "v", "type", "station", "src", "seq", "ts", "athlete", "sensor", "device", "samples", "t", "distance_mm", "state", "acc_g",
            "gyro_dps", "angle_deg", "acc", "mag", "sample", "imu", "distance", "posture", "sim", "IDLE", "ECCENTRIC", "CONCENTRIC", "status",
            "heartbeat", "rep", "set", "cmd", "ack",
        ]
        var table: [[(low: UInt64, high: UInt64, text: String)]] = Array(repeating: [], count: knownLengthLimit)
        for word in words {
            let (low, high) = Array(word.utf8).withUnsafeBufferPointer { packed($0) }
            table[word.utf8.count].append((low, high, word))
        }
        return table
    }()
    /// Known words are shorter than this (and at most 16 bytes: two integers).
    private static let knownLengthLimit = 12

    /// The bytes of `slice` (at most 16) as two little-endian integers, zero-filled.
    @inline(__always) private static func packed(_ slice: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64) {
        var low: UInt64 = 0, high: UInt64 = 0
        for (offset, byte) in slice.enumerated() {
            if offset < 8 { low |= UInt64(byte) << (8 * offset) } else { high |= UInt64(byte) << (8 * (offset - 8)) }
        }
        return (low, high)
    }

    /// The constant whose bytes `slice` holds, if it is one of `knownWords`.
    @inline(__always) private static func known(_ slice: UnsafeBufferPointer<UInt8>) -> String? {
        guard slice.count > 0, slice.count < knownLengthLimit else { return nil }
        let (low, high) = packed(slice)
        for word in knownWords[slice.count] where word.low == low && word.high == high {
            return word.text
        }
        return nil
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        var ascii = true
        // Fast path: no escapes. Plain bytes first eight at a time, then one at a time.
        index = pastWords(from: index, without: Self.mayHoldSpecial)
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                lastStringASCII = ascii
                if ascii {
                    if let known = Self.known(slice) { return known }
                    return String(decoding: slice, as: UTF8.self)
                }
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(reason: "string is not valid UTF-8", offset: start)
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character in string") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        // Slow path: escapes present.
        var scalars = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw JSONParseError(reason: "string is not valid UTF-8", offset: start)
                }
                lastStringASCII = scalars.allSatisfy { $0 < 0x80 }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unexpected end of input") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw error("unpaired surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("invalid \\u escape") }
                    scalars.append(contentsOf: UTF8.encode(scalar)!)
                default: throw error("invalid escape")
                }
            default:
                if byte < 0x20 { throw error("control character in string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Ten to `exponent`, 0...22: each exactly a double (below 2^53 times a power of two). A
    /// switch of literals, not a static table: a static is reached through its lazy
    /// initializer's check (`swift_once`), paid for every number.
    @inline(__always) private static func exactPowerOfTen(_ exponent: Int) -> Double {
        switch exponent {
        case 0: 1e0
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        case 10: 1e10
        case 11: 1e11
        case 12: 1e12
        case 13: 1e13
        case 14: 1e14
        case 15: 1e15
        case 16: 1e16
        case 17: 1e17
        case 18: 1e18
        case 19: 1e19
        case 20: 1e20
        case 21: 1e21
        default: 1e22
        }
    }

    /// A number's parts as read: `mantissa` (its first 19 significant digits,
    /// `digits` of them) times ten to `exponent`.
    private struct NumberScan {
        var start: Int
        var negative: Bool
        var mantissa: UInt64
        var digits: Int
        var exponent: Int
        /// The written exponent was too long to hold: only strtod can tell the value.
        var exponentCapped = false
    }

    /// Reads a number per RFC 8259 without converting it.
    private mutating func scanNumber() throws(JSONParseError) -> NumberScan {
        var scan = NumberScan(start: index, negative: false, mantissa: 0, digits: 0, exponent: 0)
        if bytes[index] == UInt8(ascii: "-") { scan.negative = true; index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error("leading zero in number") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) {
                if scan.digits < 19 {
                    scan.mantissa = scan.mantissa &* 10 &+ UInt64(bytes[index] - 0x30)
                    scan.digits += 1
                } else {
                    scan.exponent += 1
                }
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) {
                if scan.digits < 19 {
                    scan.mantissa = scan.mantissa &* 10 &+ UInt64(bytes[index] - 0x30)
                    if scan.mantissa != 0 { scan.digits += 1 }
                    scan.exponent -= 1
                }
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            var exponentNegative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number exponent") }
            var explicitExponent = 0
            while index < bytes.count, isDigit(bytes[index]) {
                if explicitExponent < 100_000 {
                    explicitExponent = explicitExponent * 10 + Int(bytes[index] - 0x30)
                } else {
                    scan.exponentCapped = true
                }
                index += 1
            }
            scan.exponent += exponentNegative ? -explicitExponent : explicitExponent
        }
        return scan
    }

    /// Numbers per RFC 8259. A mantissa of at most 2^53 (every integer that
    /// size is an exact double: a 16-digit Unix time in microseconds is one)
    /// with a power of ten up to 22 is converted by one multiplication or
    /// division of two exact doubles, so correctly rounded (Clinger's fast
    /// path, W. D. Clinger, "How to read floating point numbers accurately",
    /// PLDI 1990); anything else goes through the C library's strtod.
    private mutating func parseNumber() throws(JSONParseError) -> Double {
        let scan = try scanNumber()
        if scan.mantissa <= 1 << 53 && abs(scan.exponent) <= 22 && !scan.exponentCapped {
            var value = Double(scan.mantissa)
            value = scan.exponent >= 0 ? value * Self.exactPowerOfTen(scan.exponent) : value / Self.exactPowerOfTen(-scan.exponent)
            return scan.negative ? -value : value
        }
        return try convert(scan)
    }

    /// Checks the number at `index` as `parseNumber` does: it is refused when
    /// out of a double's range, which a number whose leading digit is below
    /// 10^300 cannot be, so only larger ones (and any whose written exponent
    /// is too long to hold) are converted.
    private mutating func skipNumber() throws(JSONParseError) {
        // Most numbers on the bus have no exponent and a short integer part: their digits are
        // passed eight at a time (scanning them one by one, a mantissa built that nobody reads,
        // was the largest part of checking a sample's readings). Anything else, and anything wrong, goes the long way from its
        // start, which refuses it with its reason.
        let start = index
        var at = index
        if bytes[at] == UInt8(ascii: "-") { at += 1 }
        var plain = false
        if at < bytes.count, bytes[at] &- 0x31 < 9 {
            let integerEnd = pastDigits(from: at)
            // Under 10^299 whatever its fraction: in a double's range.
            plain = integerEnd - at < 300
            at = integerEnd
        } else if at < bytes.count, bytes[at] == UInt8(ascii: "0") {
            at += 1
            plain = at == bytes.count || !isDigit(bytes[at])
        }
        if plain, at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            plain = at < bytes.count && isDigit(bytes[at])
            if plain { at = pastDigits(from: at) }
        }
        if plain, at == bytes.count || (bytes[at] != UInt8(ascii: "e") && bytes[at] != UInt8(ascii: "E")) {
            index = at
            return
        }
        index = start
        let scan = try scanNumber()
        if !scan.exponentCapped, scan.mantissa == 0 || scan.digits - 1 + scan.exponent < 300 { return }
        _ = try convert(scan)
    }

    private func convert(_ scan: NumberScan) throws(JSONParseError) -> Double {
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[scan.start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(reason: "number out of range", offset: scan.start)
        }
        return value
    }

    @inline(__always) private func isDigit(_ byte: UInt8) -> Bool { byte &- 0x30 < 10 }
}

/// What `JSONParser.readFlatObjects` hands each object's members to, in place.
public protocol FlatObjectReader {
    /// One member: its key's index in the keys, and its value; false: the array is not read
    /// this way (the caller then goes the generic way).
    mutating func member(_ key: Int, _ value: FlatValue) -> Bool
    /// The end of an object; false as for `member`.
    mutating func end() -> Bool
}

/// A member's value read in place by `JSONParser.readFlatObjects`.
public enum FlatValue: Sendable, Equatable {
    case number(Double)
    /// An array of exactly three numbers (`[x,y,z]`).
    case triple(Double, Double, Double)
    /// A string of printable ASCII without escapes.
    case word(String)
}

extension JSONParser {
    /// Reads the array at `range` of `bytes` (a deferred member's: nested one level, as
    /// `parse(_:range:depth:)` with depth 1 reads it) when it is a non-empty array of objects
    /// whose members are all flat: numbers, arrays of three numbers, strings of printable ASCII
    /// without escapes, under one of `keys` (each at most once an object). For each object it
    /// hands `reader` each member (the key's index in `keys`, and the value), then the end.
    ///
    /// Returns false at anything else, or when a callback does: the caller then builds the
    /// value the generic way (`parse(_:range:depth:)`), which accepts it or says why not. So it
    /// accepts nothing `parse` would refuse, and a value it reads is the one `parse` builds
    /// (the same number reading), without a tree of `JSONValue`s: a bus message's readings are
    /// read where they lie (building their trees was a tenth of the rep-detector's work).
    public static func readFlatObjects<Reader: FlatObjectReader>(
        _ bytes: [UInt8], range: Range<Int>, keys: [[UInt8]], into reader: inout Reader
    ) -> Bool {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count, keys.count <= 64 else { return false }
        return bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(UnsafeBufferPointer(rebasing: buffer[range]))
            guard (try? parser.readFlatObjects(keys: keys, into: &reader)) == true else { return false }
            parser.skipWhitespace()
            return parser.index == parser.bytes.count
        }
    }

    /// Reads the array at `start` of `buffer` as `readFlatObjects(_:range:keys:into:)` reads one,
    /// where a frame's member lies (what follows it is not read): where it ends, past its `]`;
    /// nil where that returns false. One pass for a consumer that builds the readings of every
    /// sample it receives, which otherwise locates the array on receipt and reads it again when built.
    public static func readFlatObjects<Reader: FlatObjectReader>(
        in buffer: UnsafeBufferPointer<UInt8>, at start: Int, keys: [[UInt8]], into reader: inout Reader
    ) -> Int? {
        guard start >= 0, start < buffer.count, keys.count <= 64 else { return nil }
        var parser = JSONParser(buffer)
        parser.index = start
        guard (try? parser.readFlatObjects(keys: keys, into: &reader)) == true else { return nil }
        return parser.index
    }

    /// The times of the readings in the array at `start` of `buffer` (a frame's `samples`), each
    /// reading an object whose first member is its time `t`, and where the array ends, past its
    /// `]`; read in one pass, the rest of each reading only passed over (its strings, and its
    /// arrays as nested as they come) and checked when it is built, as a located array's
    /// elements are. Nil at anything else (a reading that is no object, or does not begin with
    /// its time, an object inside one, a bracket unmatched): the caller then locates the array.
    /// For the rep-detector, which uses only the times of a bar IMU's readings while the laser
    /// speaks: locating the readings, then reading each one's time, was a fifth of its decoding.
    public static func readingTimes(in buffer: UnsafeBufferPointer<UInt8>, at start: Int) -> (times: [Double], end: Int)? {
        guard start >= 0, start < buffer.count else { return nil }
        var parser = JSONParser(buffer)
        parser.index = start
        return try? parser.readingTimes()
    }

    private mutating func readingTimes() throws(JSONParseError) -> (times: [Double], end: Int)? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return nil }
        index += 1
        var times: [Double] = []
        times.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard spells("{", at: index) else { return nil }
            index += 1
            skipWhitespace()
            guard spells("\"t\"", at: index) else { return nil }
            index += 3
            skipWhitespace()
            guard spells(":", at: index) else { return nil }
            index += 1
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "-") || isDigit(bytes[index]) else { return nil }
            times.append(try parseNumber())
            // The rest of the reading, to its closing brace: quotes, brackets and braces are all that matter.
            var open = 0
            scan: while true {
                index = nextNesting(from: index)
                guard index < bytes.count else { return nil }
                switch bytes[index] {
                case UInt8(ascii: "\""): _ = try skipString()
                case UInt8(ascii: "["):
                    open += 1
                    index += 1
                case UInt8(ascii: "]"):
                    guard open > 0 else { return nil }
                    open -= 1
                    index += 1
                case UInt8(ascii: "}"):
                    guard open == 0 else { return nil }
                    index += 1
                    break scan
                default: return nil  // an object inside a reading
                }
            }
            guard let ended = pastSeparator() else { return nil }
            if ended { return (times, index) }
        }
    }

    /// The readings in the array at `start` of `buffer` (a frame's `samples`) checked as strictly
    /// as `skipValue` checks them, with where each lies and its time `t`, and where the array
    /// ends, past its `]`; in one pass, when they are written as a bridge writes readings: each
    /// an object with a number `t` among its members, whose values are numbers, strings, or
    /// arrays of numbers, its keys ASCII without escapes (at most 16). Nil at anything else,
    /// malformed or written otherwise: the caller then goes the generic way, which accepts or
    /// refuses it with its reason. For the session-recorder, which stores every reading as
    /// received: checking the array through `skipValue`, then reading each time again
    /// (`member(_:ofObjectAt:in:checked:)`), was a third of its loop.
    public static func checkedReadings(
        in buffer: UnsafeBufferPointer<UInt8>, at start: Int
    ) -> (end: Int, elements: [Range<Int>], times: [Double])? {
        guard start >= 0, start < buffer.count else { return nil }
        var parser = JSONParser(buffer)
        parser.index = start
        // A reading's keys, for the duplicate check, on the stack: an array grown for every message
        // was an eighth of this pass.
        let found = withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: 16) { keys in try? parser.checkedReadings(keys: keys) }
        guard let (elements, times) = found ?? nil else { return nil }
        return (parser.index, elements, times)
    }

    private mutating func checkedReadings(
        keys: UnsafeMutableBufferPointer<Range<Int>>
    ) throws(JSONParseError) -> (elements: [Range<Int>], times: [Double])? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return nil }
        index += 1
        var elements: [Range<Int>] = []
        var times: [Double] = []
        elements.reserveCapacity(8)
        times.reserveCapacity(8)
        skipWhitespace()
        // An empty array: the generic way.
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        while true {
            let start = index
            guard let t = try checkedReading(keys: keys) else { return nil }
            elements.append(start..<index)
            times.append(t)
            guard let ended = pastSeparator() else { return nil }
            if ended { return (elements, times) }
            skipWhitespace()
        }
    }

    /// After an array's element: past the `,` that another follows (false) or the array's `]`
    /// (true), whitespace before either passed over; nil at anything else.
    @inline(__always) private mutating func pastSeparator() -> Bool? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case UInt8(ascii: "]"):
            index += 1
            return true
        default: return nil
        }
    }

    /// The reading at `index` (an object) checked, and its `t`; nil when it is written otherwise.
    /// Its keys are kept in `keys` (at most as many as it holds).
    private mutating func checkedReading(keys: UnsafeMutableBufferPointer<Range<Int>>) throws(JSONParseError) -> Double? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        var keyCount = 0
        var time: Double?
        skipWhitespace()
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }  // `{}` too
            let key = try skipString()
            guard key.ascii, !key.escaped, keyCount < keys.count else { return nil }
            // ASCII without escapes: a key's bytes are its text. Compared byte by byte here, not
            // through `equal(_:_:)`: its `elementsEqual` takes about 800 instructions for a
            // 40-byte name (`RecurringNames`), and keys are a byte or a few.
            for seen in keys[..<keyCount] where seen.count == key.range.count {
                var offset = 0
                while offset < seen.count, bytes[seen.lowerBound + offset] == bytes[key.range.lowerBound + offset] { offset += 1 }
                if offset == seen.count { return nil }
            }
            keys[keyCount] = key.range
            keyCount += 1
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                if key.range.count == 1, bytes[key.range.lowerBound] == UInt8(ascii: "t") {
                    time = try parseNumber()
                } else {
                    try skipNumber()
                }
            case UInt8(ascii: "\""): _ = try skipString()
            case UInt8(ascii: "["):
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    break
                }
                while true {
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "-") || isDigit(bytes[index]) else { return nil }
                    try skipNumber()
                    guard let ended = pastSeparator() else { return nil }
                    if ended { break }
                    skipWhitespace()
                }
            default: return nil  // an object, a literal, anything wrong
            }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return time
            }
            guard bytes[index] == UInt8(ascii: ",") else { return nil }
            index += 1
            skipWhitespace()
        }
    }

    /// The first index from `start` on of a quote, a bracket or a brace (or the end): eight
    /// bytes at a time, the first of them found by its bit in the word, not byte by byte. The
    /// same loop as `pastDigits`'s, each written out: one helper taking the test of a word
    /// (as a function) cost the rep-detector and the recorder 0.4 % more instructions.
    @inline(__always) private func nextNesting(from start: Int) -> Int {
        var at = start
        if let base = bytes.baseAddress {
            while at + 8 <= bytes.count {
                let marks = Self.firstNesting(UnsafeRawPointer(base + at).loadUnaligned(as: UInt64.self))
                if marks != 0 { return at + marks.trailingZeroBitCount / 8 }
                at += 8
            }
        }
        while at < bytes.count, !Self.isNesting(bytes[at]) { at += 1 }
        return at
    }

    /// A bit set in the bytes of `word` that may be a quote, a bracket or a brace (`isNesting`),
    /// its lowest in the first that is (`marks`).
    @inline(__always) private static func firstNesting(_ word: UInt64) -> UInt64 {
        marks(word, 0x22) | marks(folded(word), 0x7B) | marks(folded(word), 0x7D)
    }

    /// Whether the bytes from `start` on begin with `word`'s.
    @inline(__always) private func spells(_ word: StaticString, at start: Int) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - start >= count else { return false }
        for offset in 0..<count where bytes[start + offset] != word.utf8Start[offset] { return false }
        return true
    }

    /// The array at `index` read for both: true past its `]`, false at anything else.
    private mutating func readFlatObjects<Reader: FlatObjectReader>(
        keys: [[UInt8]], into reader: inout Reader
    ) throws(JSONParseError) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "[") else { return false }
        index += 1
        skipWhitespace()
        while true {
            // Not an object (an empty array too): the generic way.
            guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return false }
            index += 1
            var seen: UInt64 = 0
            skipWhitespace()
            guard index < bytes.count, bytes[index] != UInt8(ascii: "}") else { return false }  // an empty object: the generic way
            while true {
                guard let key = plainWord(), let which = keys.firstIndex(where: { $0.elementsEqual(key) }) else { return false }
                guard seen & (1 << which) == 0 else { return false }
                seen |= 1 << which
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                guard index < bytes.count else { return false }
                let value: FlatValue
                switch bytes[index] {
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    value = .number(try parseNumber())
                case UInt8(ascii: "\""):
                    guard let word = plainWord() else { return false }
                    value = .word(String(decoding: word, as: UTF8.self))
                case UInt8(ascii: "["):
                    index += 1
                    var three = (0.0, 0.0, 0.0)
                    for position in 0..<3 {
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: "-") || isDigit(bytes[index]) else { return false }
                        let number = try parseNumber()
                        switch position {
                        case 0: three.0 = number
                        case 1: three.1 = number
                        default: three.2 = number
                        }
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: position < 2 ? "," : "]") else { return false }
                        index += 1
                    }
                    value = .triple(three.0, three.1, three.2)
                default:
                    return false
                }
                guard reader.member(which, value), let more = commaOrClose(UInt8(ascii: "}")) else { return false }
                if !more { break }
            }
            guard reader.end(), let more = commaOrClose(UInt8(ascii: "]")) else { return false }
            if !more { return true }
        }
    }

    /// After a member or an element: past a comma and the whitespace after it (true), or past
    /// `close` (false); nil at anything else.
    private mutating func commaOrClose(_ close: UInt8) -> Bool? {
        skipWhitespace()
        guard index < bytes.count else { return nil }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            skipWhitespace()
            return true
        }
        guard bytes[index] == close else { return nil }
        index += 1
        return false
    }

    /// The bytes of the string at `index` when they are printable ASCII without escapes
    /// (what `parseString` reads as they are), past its closing quote; nil for any other.
    private mutating func plainWord() -> UnsafeBufferPointer<UInt8>? {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let start = index + 1
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") {
                index = end + 1
                return UnsafeBufferPointer(rebasing: bytes[start..<end])
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        return nil
    }
}

/// Writes compact JSON into a byte buffer, one value after another.
public struct JSONWriter {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8]
    /// Set when a non-finite number was written (as `null`): JSON cannot carry it.
    public private(set) var sawNonFiniteNumber = false
    private var needsComma = false

    /// Creates a writer with room for `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) private mutating func separator() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    /// Opens an object (as a value, or as an array element).
    public mutating func beginObject() { separator(); bytes.append(UInt8(ascii: "{")); needsComma = false }
    /// Closes the current object.
    public mutating func endObject() { bytes.append(UInt8(ascii: "}")); needsComma = true }
    /// Opens an array.
    public mutating func beginArray() { separator(); bytes.append(UInt8(ascii: "[")); needsComma = false }
    /// Closes the current array.
    public mutating func endArray() { bytes.append(UInt8(ascii: "]")); needsComma = true }

    /// Writes an object key; the next write is its value.
    public mutating func key(_ key: StaticString) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes an object key given at run time (escaped).
    public mutating func key(_ key: String) {
        string(key)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes a string value, escaped per RFC 8259.
    public mutating func string(_ value: String) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Most strings (ids, names, topics) need no escape: copied at once, not a byte at a
            // time (appending a byte at a time was a tenth of a replaying sensor-bridge's work).
            if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): bytes.append(0x5C); bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C); bytes.append(0x5C)
                case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
                case 0..<0x20:
                    let hex = UInt8(ascii: "0")
                    bytes.append(contentsOf: [
                        0x5C, UInt8(ascii: "u"), hex, hex, hex + (byte >> 4), byte & 0xF < 10 ? hex + (byte & 0xF) : UInt8(ascii: "a") + (byte & 0xF) - 10,
                    ])
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Writes an integer.
    public mutating func int<I: BinaryInteger>(_ value: I) {
        separator()
        appendInteger(value)
        needsComma = true
    }

    private mutating func appendInteger<I: BinaryInteger>(_ value: I) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var position = 20
            repeat {
                position -= 1
                buffer[position] = UInt8(magnitude % 10) + 0x30
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[position...]))
        }
    }

    private mutating func literal(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Writes a number in its shortest round-tripping form; integral values
    /// below 2^53 are written without a fraction. Non-finite becomes `null`
    /// and sets `sawNonFiniteNumber`.
    public mutating func number(_ value: Double) {
        separator()
        needsComma = true
        guard value.isFinite else { sawNonFiniteNumber = true; literal("null"); return }
        if value == value.rounded(), abs(value) < 9_007_199_254_740_992 {
            appendInteger(Int64(value))
            return
        }
        bytes.append(contentsOf: value.description.utf8)
    }

    /// Writes a number with exactly `decimals` digits after the point
    /// (timestamps: microseconds without the cost of shortest-form printing).
    public mutating func fixed(_ value: Double, decimals: Int) {
        guard value.isFinite, abs(value) < 1e12, decimals <= 9 else { number(value); return }
        separator()
        needsComma = true
        var scale: Int64 = 1
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int64((abs(value) * Double(scale)).rounded())
        if value < 0 && scaled != 0 { bytes.append(UInt8(ascii: "-")) }
        appendInteger(scaled / scale)
        guard decimals > 0 else { return }
        bytes.append(UInt8(ascii: "."))
        // The fraction's digits, zeros first, written where they go (an array made for them
        // would be an allocation a timestamp: a twelfth of a replay's encoding).
        var fraction = scaled % scale
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: decimals))
        var position = start + decimals
        while fraction > 0 {
            position -= 1
            bytes[position] = UInt8(fraction % 10) + 0x30
            fraction /= 10
        }
    }

    /// Writes a boolean.
    public mutating func bool(_ value: Bool) {
        separator()
        if value { literal("true") } else { literal("false") }
        needsComma = true
    }

    /// Writes `null`.
    public mutating func null() {
        separator()
        literal("null")
        needsComma = true
    }

    /// Writes an array of numbers, e.g. `[x,y,z]`.
    public mutating func numbers(_ values: [Double]) {
        beginArray()
        for value in values { number(value) }
        endArray()
    }

    /// Writes any parsed value back out.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number): self.number(number)
        case .string(let text): string(text)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let object):
            beginObject()
            for field in object.fields {
                key(field.key)
                self.value(field.value)
            }
            endObject()
        }
    }

    /// Appends a piece of JSON written before, as it is, with no separator: the piece and what
    /// follows must make valid JSON together (a template's text between the values it varies).
    public mutating func fragment(_ piece: [UInt8]) {
        bytes.append(contentsOf: piece)
        needsComma = false
    }

    /// Appends bytes that are already one valid JSON value (e.g. a received frame).
    /// Appends `head`, what another writer wrote up to a key (an object opened, members, a key):
    /// the key's value comes next. An envelope's first members are the same for every message
    /// of a stream (`EnvelopeStamper`).
    mutating func resume(atValueAfter head: [UInt8]) {
        bytes.append(contentsOf: head)
        needsComma = false
    }

    public mutating func raw(_ json: [UInt8]) {
        separator()
        bytes.append(contentsOf: json)
        needsComma = true
    }
}
