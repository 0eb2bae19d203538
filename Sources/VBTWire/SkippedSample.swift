/// A `sample` of a sensor its consumer does not use, read only as far as its envelope and
/// `sensor`: the posture-evaluator follows a station's samples for its wearable's readings,
/// and the station's laser and bar IMU send three messages for each of the wearable's
/// (at 1,000 stations, 20,000 messages a second checked to drop three in four).
/// The message still counts for its stream (a gap, a duplicate), so its envelope is read and
/// checked as `decodeMessage` checks it; the rest of the frame (the readings) is not read at
/// all, and the message is handed on with `sensor` as its only field and no body.
///
/// Only the common spelling is read here: members before `sensor` that are short values,
/// strings of printable ASCII without escapes, plain decimal numbers. Anything else (and a
/// sensor the consumer uses) returns nil, and the caller decodes the frame whole, which
/// accepts or refuses it with its reason. Written by hand, not with `JSONParser`: it reads
/// these frames about twice as fast (docs/decisions/0034-wire-codec-hot-paths.md).
public func decodeSkippedSample(topic topicBytes: [UInt8], body: [UInt8], using: Set<String>) -> BusMessage? {
    guard body.count <= BusLimits.maxMessageBytes, let (topicType, topicStation) = try? splitTopic(topicBytes),
        topicType == SampleMessage.type
    else { return nil }
    let scanned = body.withUnsafeBufferPointer { bytes in
        var scan = EnvelopeScan(bytes)
        return scan.run()
    }
    guard let read = scanned, !using.contains(read.sensor) else { return nil }
    return skippedMessage(topic: topicBytes, read, type: topicType, station: topicStation)
}

/// A topic as a `String`, made once for all the messages on it when `names` keeps them.
private func topicName(_ bytes: [UInt8], _ names: RecurringNames?) -> String {
    guard let names else { return String(decoding: bytes, as: UTF8.self) }
    return bytes.withUnsafeBufferPointer { names.name($0) }
}

/// A skipped sample's message: its envelope, with `sensor` its only field and no body; nil when
/// the envelope is not one `decodeMessage` accepts.
private func skippedMessage(
    topic topicBytes: [UInt8], _ read: EnvelopeScan.Read, type topicType: String, station topicStation: String, names: RecurringNames? = nil
) -> BusMessage? {
    guard read.accepted(type: topicType, station: topicStation) else { return nil }
    let envelope = Envelope(v: BusLimits.version, type: read.type, station: read.station, src: read.src, seq: UInt64(read.seq), ts: read.ts, athlete: nil)
    var members = BridgeSampleMembers(sensor: read.sensor)
    members.append(.sensor)
    return BusMessage(topic: topicName(topicBytes, names), envelope: envelope, sample: members, body: [], deferred: nil, read: nil)
}

/// A `sample` exactly as a bridge writes it (`EnvelopeStamper` over `SampleMessage`), read in one
/// pass: the envelope, `sensor`, `device` and `athlete` as plain strings and numbers, `samples`
/// deferred (checked or only located as `samples` says), no other member. Every consumer of
/// samples decodes tens of thousands of these a second at 1,000 stations, and the generic
/// parser (each key a String, each member matched against the envelope's names afterwards)
/// was about three quarters of the rep-detector's decode. Anything else returns nil and `decodeMessage` reads
/// the frame the generic way, which accepts or refuses it with its reason: what this returns is
/// the message the generic way returns, field for field (`BridgeSampleTests`).
///
/// A sample of a sensor not among `using` (when given) is skipped as `decodeSkippedSample` skips
/// it, in the same pass, once its envelope and sensor are read: the rep-detector, which uses
/// nearly every sample, scanned each envelope twice when it was asked first whether to skip it.
func decodeBridgeSample(
    topic topicBytes: [UInt8], body: [UInt8], type topicType: String, station topicStation: String, samples: SampleReadings,
    using: Set<String>? = nil, names: RecurringNames? = nil
) -> BusMessage? {
    guard samples != .built else { return nil }
    let scanned = body.withUnsafeBufferPointer { bytes in
        var scan = EnvelopeScan(bytes, names: names)
        return scan.runWhole(samples: samples, using: using)
    }
    switch scanned {
    case nil: return nil
    case .skipped(let read)?: return skippedMessage(topic: topicBytes, read, type: topicType, station: topicStation, names: names)
    case .whole(let envelopeRead, let members, let deferred, let read)?:
        guard envelopeRead.accepted(type: topicType, station: topicStation) else { return nil }
        let envelope = Envelope(
            v: BusLimits.version, type: envelopeRead.type, station: envelopeRead.station, src: envelopeRead.src, seq: UInt64(envelopeRead.seq),
            ts: envelopeRead.ts, athlete: envelopeRead.athlete)
        return BusMessage(
            topic: topicName(topicBytes, names), envelope: envelope, sample: members, body: body,
            deferred: deferred, read: read)
    }
}

/// The members `decodeSkippedSample` reads, in one pass that stops at the last of them.
private struct EnvelopeScan {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var v: Double?, seq: Double?, ts: Double?
    var type: String?, station: String?, src: String?, sensor: String?

    /// Where a `src` is made once for all the messages that carry it (nil: for each).
    let names: RecurringNames?

    init(_ bytes: UnsafeBufferPointer<UInt8>, names: RecurringNames? = nil) {
        self.bytes = bytes
        self.names = names
    }

    struct Read {
        var v: Double, seq: Double, ts: Double
        var type: String, station: String, src: String, sensor: String
        var athlete: String? = nil

        /// Whether `decodeMessage` accepts this envelope under a topic of `type` and `station`.
        func accepted(type topicType: String, station topicStation: String) -> Bool {
            v == Double(BusLimits.version) && type == topicType && station == topicStation && !src.isEmpty
                && seq >= 1 && seq <= 9_007_199_254_740_991 && seq == seq.rounded() && ts > 0
        }
    }

    /// What `runWhole` read: the whole object, or a sample skipped once its envelope and sensor were read.
    enum Scanned {
        case whole(Read, BridgeSampleMembers, DeferredMember, ReadOnReceipt?)
        case skipped(Read)
    }

    mutating func run() -> Read? {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        while true {
            guard let key = memberKey() else { return nil }
            guard member(BridgeSampleMembers.Name(bytes, key)) else { return nil }
            if let v, let seq, let ts, let type, let station, let src, let sensor {
                return Read(v: v, seq: seq, ts: ts, type: type, station: station, src: src, sensor: sensor)
            }
            skipSpace()
            guard take(UInt8(ascii: ",")) else { return nil }  // the object ended (or broke) first
        }
    }

    /// The next member's key, a plain string (where its bytes lie), read past the colon after it.
    private mutating func memberKey() -> Range<Int>? {
        skipSpace()
        guard let key = plainString() else { return nil }
        skipSpace()
        guard take(UInt8(ascii: ":")) else { return nil }
        skipSpace()
        return key
    }

    /// The whole object as `decodeBridgeSample` reads it: the envelope, the object's members in
    /// order (`BridgeSampleMembers`: `samples` reading null, as the generic parser leaves a deferred member), the
    /// deferred readings, and those built as `samples` says (`SampleReadings.read`); or, for a
    /// sensor not among `using`, only the envelope, read up to the sensor; nil at anything else.
    mutating func runWhole(samples: SampleReadings, using: Set<String>?) -> Scanned? {
        var athlete: String?, device: String?
        var deferred: DeferredMember?
        var read: ReadOnReceipt?
        var members = BridgeSampleMembers(sensor: "")
        let checking = samples == .checked
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        while true {
            guard let key = memberKey() else { return nil }
            let name = BridgeSampleMembers.Name(bytes, key)
            switch name {
            case .samples?:
                guard deferred == nil else { return nil }
                // The sets hold a sensor or two: compared in turn, not hashed.
                if case .read(let built, _) = samples, let sensor, built.contains(where: { $0 == sensor }),
                    let (readings, end) = SampleMessage.readings(sensor: sensor, in: bytes, at: index)
                {
                    // Read, so checked: nothing a built value would refuse is read (`JSONParser.readFlatObjects`).
                    deferred = DeferredMember(key: "samples", range: index..<end, elements: nil, checked: true)
                    read = .readings(readings)
                    index = end
                } else if case .read(_, let timed) = samples, let sensor, timed.contains(where: { $0 == sensor }),
                    let (times, end) = JSONParser.readingTimes(in: bytes, at: index)
                {
                    deferred = DeferredMember(key: "samples", range: index..<end, elements: nil, checked: false)
                    read = .times(times)
                    index = end
                } else if checking, let (end, elements, times) = JSONParser.checkedReadings(in: bytes, at: index) {
                    // Checked, each reading's place and time found in the same pass (the recorder's).
                    deferred = DeferredMember(key: "samples", range: index..<end, elements: elements, checked: true)
                    read = .times(times)
                    index = end
                } else {
                    guard let (end, elements) = JSONParser.arrayMember(in: bytes, at: index, checking: checking) else { return nil }
                    deferred = DeferredMember(key: "samples", range: index..<end, elements: elements, checked: checking)
                    index = end
                }
                members.append(.samples)
            case .athlete?:
                guard athlete == nil, let text = plainText() else { return nil }
                athlete = text
                members.append(.athlete)
            case .device?:
                guard device == nil, let text = plainText() else { return nil }
                device = text
                members.append(.device)
            case nil: return nil  // another member: the generic way
            default:
                guard let name, member(name) else { return nil }
                // As the sets of `samples`: compared in turn, not hashed.
                if name == .sensor, let using, let sensor, !using.contains(where: { $0 == sensor }),
                    let v, let seq, let ts, let type, let station, let src
                {
                    return .skipped(Read(v: v, seq: seq, ts: ts, type: type, station: station, src: src, sensor: sensor))
                }
                members.append(name)
            }
            skipSpace()
            if take(UInt8(ascii: ",")) { continue }
            guard take(UInt8(ascii: "}")) else { return nil }
            skipSpace()
            guard index == bytes.count else { return nil }
            break
        }
        guard let v, let seq, let ts, let type, let station, let src, let sensor, let deferred else { return nil }
        (members.sensor, members.device) = (sensor, device)
        return .whole(Read(v: v, seq: seq, ts: ts, type: type, station: station, src: src, sensor: sensor, athlete: athlete), members, deferred, read)
    }

    /// Reads the value of the member `name` (nil: another's); false when it is not as expected,
    /// or a member is repeated.
    private mutating func member(_ name: BridgeSampleMembers.Name?) -> Bool {
        switch name {
        case .v?: v == nil && store(&v, plainNumber())
        case .seq?: seq == nil && store(&seq, plainNumber())
        case .ts?: ts == nil && store(&ts, plainNumber())
        case .type?: type == nil && store(&type, plainText())
        case .station?: station == nil && store(&station, plainText())
        case .src?: src == nil && store(&src, plainString().map { names?.name(UnsafeBufferPointer(rebasing: bytes[$0])) ?? text($0) })
        case .sensor?: sensor == nil && store(&sensor, plainText())
        // A string, as the envelope has it (not kept: a skipped sample's athlete is nobody's business).
        case .athlete?: plainString() != nil
        default: skipShortValue()
        }
    }

    /// Whether the bytes from `at` on begin with `word`'s.
    private func holds(_ word: StaticString, at start: Int) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - start >= count else { return false }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[start + offset] != expected[offset] { return false }
        return true
    }

    private mutating func plainText() -> String? {
        plainString().map(text)
    }

    private func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    private func store<T>(_ slot: inout T?, _ value: T?) -> Bool {
        guard let value else { return false }
        slot = value
        return true
    }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 { index += 1 }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// A string of printable ASCII without escapes: where its bytes lie (between the quotes).
    private mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return start..<(index - 1)
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            index += 1
        }
        return nil
    }

    /// A number written `-?digits(.digits)?` whose digits make an integer a double holds exactly
    /// (a Unix time in microseconds is one), divided by a power of ten as JSONParser does.
    private mutating func plainNumber() -> Double? {
        let negative = take(UInt8(ascii: "-"))
        var mantissa: Int64 = 0
        var digits = 0
        var decimals = 0
        let start = index
        while index < bytes.count, bytes[index] &- 0x30 < 10 {
            mantissa = mantissa &* 10 &+ Int64(bytes[index] - 0x30)
            digits += 1
            index += 1
        }
        // No digit, or a leading zero followed by more (JSON has none).
        guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")) else { return nil }
        if take(UInt8(ascii: ".")) {
            while index < bytes.count, bytes[index] &- 0x30 < 10 {
                mantissa = mantissa &* 10 &+ Int64(bytes[index] - 0x30)
                digits += 1
                decimals += 1
                index += 1
            }
            guard decimals > 0 else { return nil }
        }
        // An exponent, or a mantissa past 2^53 (not exact in a double): the whole decoder reads it.
        guard digits <= 18, mantissa <= 1 << 53, index < bytes.count, bytes[index] != UInt8(ascii: "e"), bytes[index] != UInt8(ascii: "E") else { return nil }
        var value = Double(mantissa)
        if decimals > 0 { value /= Self.powersOfTen[decimals] }
        return negative ? -value : value
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        guard holds(word, at: index) else { return false }
        index += word.utf8CodeUnitCount
        return true
    }

    /// 10^0 ... 10^18 (up to 10^22 each is exact in a double).
    private static let powersOfTen: [Double] = (0...18).map { power in (0..<power).reduce(1.0) { value, _ in value * 10 } }

    /// Past another member's value when it is a string, a number or a literal (an array or an
    /// object before the members read here: false, and the frame is decoded whole).
    private mutating func skipShortValue() -> Bool {
        guard index < bytes.count else { return false }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index += 1
                    return true
                case UInt8(ascii: "\\"): index += 2
                default: index += 1
                }
            }
            return false
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return plainNumber() != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default:
            return false
        }
    }
}
