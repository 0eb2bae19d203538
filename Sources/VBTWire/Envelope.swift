// The envelope of proto/README.md ("Envelope"): two frames, `<type>.<station>` and
// one JSON object carrying v, type, station, src, seq, ts (and optionally
// athlete) beside the type's own fields. proto/envelope.schema.json is the
// wire's source of truth; this file is its Swift reading.

/// Limits every consumer enforces on what it accepts.
public enum BusLimits {
    /// The only schema version this build speaks.
    public static let version = 1
    /// Largest JSON frame accepted, in bytes (a batch of 100 IMU readings is ~15 KiB).
    public static let maxMessageBytes = 256 * 1024
    /// Longest topic accepted, in bytes.
    public static let maxTopicBytes = 128
}

/// The envelope fields common to every message.
public struct Envelope: Sendable, Equatable {
    /// Schema version (1).
    public var v: Int
    /// Message type, the topic's part before the dot (`sample`, `rep`, ...).
    public var type: String
    /// Station the message is about, the topic's part after the dot.
    public var station: String
    /// The publishing stream: process instance and topic, unique per process start.
    public var src: String
    /// 1, 2, 3... per `src`.
    public var seq: UInt64
    /// Producer's wall clock, Unix seconds.
    public var ts: Double
    /// The athlete the message is about, when known.
    public var athlete: String?

    /// The topic this envelope belongs under.
    public var topic: String { "\(type).\(station)" }
}

/// Why a received message was rejected. `kind` is a stable, countable name;
/// `detail` says what exactly was wrong.
public struct MalformedMessage: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category of fault, stable across releases (used as a counter key).
    public enum Kind: String, Sendable, CaseIterable, Codable {
        case frameCount = "frame-count"
        case oversize
        case badTopic = "bad-topic"
        case notJSON = "not-json"
        case notObject = "not-object"
        case missingField = "missing-field"
        case wrongType = "wrong-type"
        case unknownVersion = "unknown-version"
        case topicMismatch = "topic-mismatch"
        case badSeq = "bad-seq"
        case badTimestamp = "bad-timestamp"
        case badPayload = "bad-payload"
    }

    /// The category.
    public var kind: Kind
    /// What exactly was wrong, for the log.
    public var detail: String

    /// Creates a rejection.
    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// A message that passed every envelope check.
public struct BusMessage: Sendable {
    /// The topic frame, `<type>.<station>`.
    public var topic: String
    /// The envelope fields.
    public var envelope: Envelope
    /// The JSON frame exactly as received (recordings store it verbatim).
    public var body: [UInt8]
    /// The object as parsed, or a bridge's sample as `decodeBridgeSample` read it; a deferred
    /// member reads null here.
    private var members: Members
    /// A `sample`'s readings (`samples`), checked when received but built only
    /// when asked for: most consumers drop most samples unread.
    public private(set) var deferred: DeferredMember?
    /// A `sample`'s readings, or only their times, read on receipt (`SampleReadings.read`).
    private var read: ReadOnReceipt?

    /// A message of `fields` received as `body`; `deferred` is a member of them not built yet,
    /// unless `read` has its readings (or their times), read on receipt.
    public init(
        topic: String, envelope: Envelope, fields: JSONObject, body: [UInt8], deferred: DeferredMember? = nil, read: ReadOnReceipt? = nil
    ) {
        self.init(topic: topic, envelope: envelope, members: .object(fields), body: body, deferred: deferred, read: read)
    }

    /// A bridge's sample as `decodeBridgeSample` read it: `sample`'s members in place of an object.
    init(topic: String, envelope: Envelope, sample: BridgeSampleMembers, body: [UInt8], deferred: DeferredMember?, read: ReadOnReceipt?) {
        self.init(topic: topic, envelope: envelope, members: .bridgeSample(sample), body: body, deferred: deferred, read: read)
    }

    private init(topic: String, envelope: Envelope, members: Members, body: [UInt8], deferred: DeferredMember?, read: ReadOnReceipt?) {
        self.topic = topic
        self.envelope = envelope
        self.members = members
        self.body = body
        self.deferred = deferred
        self.read = deferred == nil ? nil : read
    }

    /// The object as parsed; a deferred member reads null here.
    private var parsed: JSONObject {
        switch members {
        case .object(let object): object
        case .bridgeSample(let sample): sample.object(envelope)
        }
    }

    /// The whole JSON object, envelope fields included (a deferred member is built now).
    public var fields: JSONObject {
        get {
            guard let deferred else { return parsed }
            var fields = parsed
            fields[deferred.key] = self.deferredValue(deferred)
            return fields
        }
        set {
            members = .object(newValue)
            deferred = nil
            read = nil
        }
    }

    /// The times of a sample's readings as read on receipt (`ReadOnReceipt`), nil when they were
    /// not: no search of the readings.
    public var readingTimesOnReceipt: [Double]? {
        switch read {
        case .readings(let readings)?: return readings.times
        case .times(let times)?: return times
        case nil: return nil
        }
    }

    /// The times of a sample's readings, read from the frame without building the readings
    /// (its `samples` deferred on receipt); nil when one has no numeric `t`, the readings are
    /// not an array, or they were built on receipt (the caller then goes the long way,
    /// `payload(as:)`, which refuses what is malformed). Only each reading's time is read:
    /// the rest of a reading is checked when it is built.
    public func readingTimes() -> [Double]? {
        guard let deferred, deferred.key == "samples" else { return nil }
        if let times = readingTimesOnReceipt { return times }
        // Located or checked, an array's elements were found on receipt (nil: not an array).
        guard let elements = deferred.elements else { return nil }
        var times: [Double] = []
        times.reserveCapacity(elements.count)
        for element in elements {
            guard case .number(let t)? = try? JSONParser.member("t", ofObjectAt: element, in: body, checked: true) else { return nil }
            times.append(t)
        }
        return times
    }

    /// One member of the object; builds nothing else.
    public func field(_ key: String) -> JSONValue? {
        if let deferred, deferred.key == key { return deferredValue(deferred) }
        switch members {
        case .object(let object): return object[key]
        case .bridgeSample(let sample): return sample.value(key, envelope)
        }
    }

    /// A sample's `sensor` when it is a string: what each consumer of samples asks of every one
    /// (read where a bridge's sample keeps it, not looked up among its members by name).
    public var sensor: String? {
        switch members {
        case .bridgeSample(let sample): return sample.sensor
        case .object(let object):
            guard case .string(let sensor)? = object["sensor"] else { return nil }
            return sensor
        }
    }

    /// A sample read without building its readings' tree (`SampleMessage.readings`); nil when
    /// they are not deferred or not as a bridge writes them: `payload(as:)` then goes the
    /// generic way, which accepts or refuses them with its reason.
    private func readSample() -> SampleMessage? {
        guard let deferred, deferred.key == "samples", let sensor else { return nil }
        // Read on receipt: only a bridge's sample is (`decodeBridgeSample`).
        if case .bridgeSample(let sample) = members, case .readings(let readings)? = read { return SampleMessage(readings, device: sample.device) }
        let device: String?
        switch field("device") {
        case nil, .null?: device = nil
        case .string(let name)?: device = name
        default: return nil
        }
        guard let readings = SampleMessage.readings(sensor: sensor, body: body, range: deferred.range) else { return nil }
        return SampleMessage(readings, device: device)
    }

    /// A deferred member's value; null when its bytes are not JSON (possible
    /// only when they were not checked on receipt: `payload(as:)` says why).
    private func deferredValue(_ member: DeferredMember) -> JSONValue {
        (try? JSONParser.parse(body, range: member.range, depth: 1)) ?? .null
    }

    /// Decodes the type's own fields (a deferred member not checked on receipt is checked now).
    public func payload<P: BusPayload>(as type: P.Type) throws(MalformedMessage) -> P {
        guard envelope.type == P.type else {
            throw MalformedMessage(.badPayload, "expected type \(P.type), got \(envelope.type)")
        }
        // A sample's readings as a bridge writes them are read where they lie; anything else the generic way.
        if P.self == SampleMessage.self, let sample = readSample() { return sample as! P }
        var all = parsed
        if let deferred {
            do {
                all[deferred.key] = try JSONParser.parse(body, range: deferred.range, depth: 1)
            } catch {
                throw MalformedMessage(.notJSON, "\(deferred.key): \(error)")
            }
        }
        do {
            return try P(fields: all)
        } catch {
            throw MalformedMessage(.badPayload, "\(P.type): \(error)")
        }
    }
}

/// A message's members: an object, or a bridge's sample's kept as read.
private enum Members: Sendable {
    case object(JSONObject)
    case bridgeSample(BridgeSampleMembers)
}

/// The members of a sample as a bridge writes it, as `decodeBridgeSample` reads them: the
/// envelope's are the message's `Envelope`, the others kept as they are, and their order. The
/// object of nine members (a tenth of the rep-detector's work a message when built for each)
/// is made only when asked for (`BusMessage.fields`).
struct BridgeSampleMembers: Sendable {
    /// A member a bridge's sample has (four bits, for `order`).
    enum Name: UInt8, CaseIterable {
        case v = 1, type, station, src, seq, ts, athlete, sensor, device, samples

        /// The name whose key lies at `key` of `bytes`, if it is one of these: the key's bytes
        /// (at most eight) packed into one word, the first lowest, and compared with each name's
        /// at once, not spelled out against each name in turn.
        init?(_ bytes: UnsafeBufferPointer<UInt8>, _ key: Range<Int>) {
            guard key.count <= 8 else { return nil }
            var word: UInt64 = 0
            for offset in key.reversed() { word = word << 8 | UInt64(bytes[offset]) }
            switch word {
            case 0x76: self = .v
            case 0x7374: self = .ts
            case 0x71_6573: self = .seq
            case 0x63_7273: self = .src
            case 0x6570_7974: self = .type
            case 0x726f_736e_6573: self = .sensor
            case 0x6563_6976_6564: self = .device
            case 0x6e_6f69_7461_7473: self = .station
            case 0x65_7465_6c68_7461: self = .athlete
            case 0x73_656c_706d_6173: self = .samples
            default: return nil
            }
        }

        var key: String {
            switch self {
            case .v: "v"
            case .type: "type"
            case .station: "station"
            case .src: "src"
            case .seq: "seq"
            case .ts: "ts"
            case .athlete: "athlete"
            case .sensor: "sensor"
            case .device: "device"
            case .samples: "samples"
            }
        }
    }

    var sensor: String
    var device: String?
    /// The members' names in the frame's order, four bits each, the first lowest (ten at most, each once).
    private var order: UInt64 = 0
    private var count = 0

    init(sensor: String) { self.sensor = sensor }

    /// Notes the next member in the frame's order.
    mutating func append(_ name: Name) {
        order |= UInt64(name.rawValue) << (4 * count)
        count += 1
    }

    /// The member `key`'s value (null for the readings: deferred), nil when it has none.
    func value(_ key: String, _ envelope: Envelope) -> JSONValue? {
        for index in 0..<count {
            let name = Name(rawValue: UInt8(truncatingIfNeeded: order >> (4 * index)) & 0xF)!
            if name.key == key { return value(name, envelope) }
        }
        return nil
    }

    private func value(_ name: Name, _ envelope: Envelope) -> JSONValue {
        switch name {
        case .v: .number(Double(envelope.v))
        case .type: .string(envelope.type)
        case .station: .string(envelope.station)
        case .src: .string(envelope.src)
        case .seq: .number(Double(envelope.seq))
        case .ts: .number(envelope.ts)
        case .athlete: envelope.athlete.map { .string($0) } ?? .null
        case .sensor: .string(sensor)
        case .device: device.map { .string($0) } ?? .null
        case .samples: .null
        }
    }

    /// The object, its members in the frame's order.
    func object(_ envelope: Envelope) -> JSONObject {
        JSONObject(
            (0..<count).map { index in
                let name = Name(rawValue: UInt8(truncatingIfNeeded: order >> (4 * index)) & 0xF)!
                return (name.key, value(name, envelope))
            }, asciiKeys: true)
    }
}

/// What of a sample's readings was read on receipt (`SampleReadings.read`).
public enum ReadOnReceipt: Sendable {
    /// The readings, built.
    case readings(SampleMessage.Readings)
    /// Only their times: the rest located, and checked when built, or checked already, as the
    /// deferred member says (`DeferredMember.checked`).
    case times([Double])
}

/// Checks a topic: printable ASCII, `<type>.<station>`, type without dots.
/// Returns (type, station).
public func splitTopic(_ topic: [UInt8]) throws(MalformedMessage) -> (type: String, station: String) {
    guard !topic.isEmpty, topic.count <= BusLimits.maxTopicBytes else {
        throw MalformedMessage(.badTopic, "topic is empty or longer than \(BusLimits.maxTopicBytes) bytes")
    }
    guard topic.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
        throw MalformedMessage(.badTopic, "topic must be printable ASCII without spaces")
    }
    guard let dot = topic.firstIndex(of: UInt8(ascii: ".")), dot > 0, dot < topic.count - 1 else {
        throw MalformedMessage(.badTopic, "topic must be <type>.<station>")
    }
    return (String(decoding: topic[..<dot], as: UTF8.self), String(decoding: topic[(dot + 1)...], as: UTF8.self))
}

/// How a received sample's readings are decoded.
public enum SampleReadings: Sendable, Equatable {
    /// Built at once: for a consumer that reads every sample's readings
    /// (one pass instead of two).
    case built
    /// Checked as strictly as built, but built only when asked for
    /// (`BusMessage.deferred`): for a consumer that keeps them as received.
    case checked
    /// Only where they end found, and checked when built (`payload(as:)`):
    /// for a consumer that drops most samples unread (the posture-evaluator
    /// uses one sample in sixteen). The envelope is checked whole.
    case located
    /// Built at once for the sensors of the first set, in the pass that reads the envelope, when
    /// written as a bridge writes them (`SampleMessage.readings(sensor:in:at:)`); of the second
    /// set's only their times read in that pass (`JSONParser.readingTimes(in:at:)`,
    /// `BusMessage.readingTimes()`), the rest located; any other's, and any written otherwise,
    /// only located as `.located` locates them. For a consumer that uses every reading of some
    /// sensors (the rep-detector every laser's, read once, not located and then read again) and
    /// only the times of others' (its bar IMU's while the laser speaks).
    case read(Set<String>, times: Set<String> = [])
}

/// Decodes and checks a topic frame and a JSON frame; a sample's readings as `samples` says.
/// A sample of a sensor not among `using` (when given) is read only as far as its envelope
/// (`decodeSkippedSample`). A bridge's sample's topic and `src` are taken from `names` when
/// given, made once for all the messages that carry them.
public func decodeMessage(
    topic topicBytes: [UInt8], body: [UInt8], samples: SampleReadings = .checked, using: Set<String>? = nil, names: RecurringNames? = nil
) throws(MalformedMessage) -> BusMessage {
    guard body.count <= BusLimits.maxMessageBytes else {
        throw MalformedMessage(.oversize, "JSON frame of \(body.count) bytes exceeds \(BusLimits.maxMessageBytes)")
    }
    let (topicType, topicStation) = try splitTopic(topicBytes)
    if topicType == SampleMessage.type {
        // A sample as a bridge writes it, most of what the bus carries, in one pass of its own.
        if let message = decodeBridgeSample(
            topic: topicBytes, body: body, type: topicType, station: topicStation, samples: samples, using: using, names: names)
        {
            return message
        }
        // Spelled otherwise (members in another order, others among them): still skipped when it can be.
        if let using, let skipped = decodeSkippedSample(topic: topicBytes, body: body, using: using) { return skipped }
    }
    return try decodeGenerally(topic: topicBytes, body: body, type: topicType, station: topicStation, samples: samples)
}

/// `decodeMessage` for any frame: the generic parser, which says why it refuses one.
func decodeGenerally(
    topic topicBytes: [UInt8], body: [UInt8], type topicType: String, station topicStation: String, samples: SampleReadings
) throws(MalformedMessage) -> BusMessage {
    let value: JSONValue
    let deferred: DeferredMember?
    do {
        let deferring = samples != .built && topicType == SampleMessage.type ? "samples" : nil
        (value, deferred) = try JSONParser.parse(body, deferring: deferring, checking: samples == .checked)
    } catch {
        throw MalformedMessage(.notJSON, error.description)
    }
    guard case .object(let fields) = value else {
        throw MalformedMessage(.notObject, "the JSON frame must be an object")
    }
    let members = EnvelopeMembers(fields)
    let v = try envelopeInteger(members.v, "v")
    guard v == Double(BusLimits.version) else {
        throw MalformedMessage(.unknownVersion, "v=\(v); this build speaks v=\(BusLimits.version)")
    }
    let type = try envelopeString(members.type, "type")
    let station = try envelopeString(members.station, "station")
    let src = try envelopeString(members.src, "src")
    let seq = try envelopeInteger(members.seq, "seq")
    guard seq >= 1, seq <= 9_007_199_254_740_991 else {
        throw MalformedMessage(.badSeq, "seq=\(seq) must be 1 or more")
    }
    guard case .number(let ts)? = members.ts else {
        if members.ts == nil { throw MalformedMessage(.missingField, "ts") }
        throw MalformedMessage(.wrongType, "ts must be a number")
    }
    guard ts > 0 else { throw MalformedMessage(.badTimestamp, "ts=\(ts) must be Unix seconds") }
    var athlete: String?
    switch members.athlete {
    case nil: athlete = nil
    case .string(let name)?: athlete = name
    default: throw MalformedMessage(.wrongType, "athlete must be a string")
    }
    guard type == topicType else {
        throw MalformedMessage(.topicMismatch, "topic type \(topicType) but body type \(type)")
    }
    guard station == topicStation else {
        throw MalformedMessage(.topicMismatch, "topic station \(topicStation) but body station \(station)")
    }
    let envelope = Envelope(v: Int(v), type: type, station: station, src: src, seq: UInt64(seq), ts: ts, athlete: athlete)
    return BusMessage(topic: String(decoding: topicBytes, as: UTF8.self), envelope: envelope, fields: fields, body: body, deferred: deferred)
}

/// The envelope's members of a message's object, found in one pass over it.
private struct EnvelopeMembers {
    var v, type, station, src, seq, ts, athlete: JSONValue?

    init(_ fields: JSONObject) {
        guard fields.asciiKeys else {
            // A non-ASCII key may still equal one of these (Swift's ==): the generic lookup decides.
            (v, type, station, src, seq, ts, athlete) = (
                fields["v"], fields["type"], fields["station"], fields["src"], fields["seq"], fields["ts"], fields["athlete"]
            )
            return
        }
        // Every key ASCII: equal exactly when the bytes are, so only keys of the same length are
        // compared, and only a member found is copied.
        let all = fields.fields
        for index in all.indices {
            let key = all[index].key
            switch key.utf8.count {
            case 1: if key == "v" { v = all[index].value }
            case 2: if key == "ts" { ts = all[index].value }
            case 3:
                if key == "src" {
                    src = all[index].value
                } else if key == "seq" {
                    seq = all[index].value
                }
            case 4: if key == "type" { type = all[index].value }
            case 7:
                if key == "station" {
                    station = all[index].value
                } else if key == "athlete" {
                    athlete = all[index].value
                }
            default: break
            }
        }
    }
}

private func envelopeString(_ value: JSONValue?, _ key: String) throws(MalformedMessage) -> String {
    switch value {
    case nil: throw MalformedMessage(.missingField, key)
    case .string(let text)?:
        guard !text.isEmpty else { throw MalformedMessage(.wrongType, "\(key) must be a non-empty string") }
        return text
    default: throw MalformedMessage(.wrongType, "\(key) must be a string")
    }
}

private func envelopeInteger(_ value: JSONValue?, _ key: String) throws(MalformedMessage) -> Double {
    switch value {
    case nil: throw MalformedMessage(.missingField, key)
    case .number(let number)?:
        guard number == number.rounded() else { throw MalformedMessage(.wrongType, "\(key) must be an integer") }
        return number
    default: throw MalformedMessage(.wrongType, "\(key) must be an integer")
    }
}

/// The instance part of a stream's `src` (`<instance>/<topic>`): which process start published it.
/// (The slash is found among the UTF-8 bytes: walking the string's characters, which breaks
/// graphemes, was 7.5 % of a posture-evaluator's time at 1,000 stations.)
public func streamInstance(_ src: String) -> Substring {
    guard let slash = src.utf8.firstIndex(of: UInt8(ascii: "/")) else { return src[...] }
    return src[..<slash]
}

/// The topic part of a stream's `src` (`<instance>/<topic>`); the whole `src` when it has no slash.
public func streamTopic(_ src: String) -> Substring {
    guard let slash = src.utf8.firstIndex(of: UInt8(ascii: "/")) else { return src[...] }
    return src[src.utf8.index(after: slash)...]
}

/// A message's members other than the envelope's, written once: a replay
/// publishes each recorded message at every copy of its station, and writing
/// its readings again for each copy was most of the replaying bridge's work.
public struct EncodedMembers: Sendable {
    /// The envelope's keys, which a fresh envelope replaces.
    public static let envelopeKeys: Set<String> = ["v", "type", "station", "src", "seq", "ts", "athlete"]
    /// `"key":value` pairs separated by commas, without braces.
    public let bytes: [UInt8]
    /// Whether a number was NaN or infinite (JSON cannot carry it: such a message is refused).
    public let sawNonFiniteNumber: Bool

    /// Members written elsewhere: `"key":value` pairs separated by commas, without braces.
    public init(written bytes: [UInt8], sawNonFiniteNumber: Bool = false) {
        (self.bytes, self.sawNonFiniteNumber) = (bytes, sawNonFiniteNumber)
    }

    /// The members of `fields` not in the envelope.
    public init(_ fields: JSONObject) {
        var writer = JSONWriter(capacity: 256)
        for field in fields.fields where !Self.envelopeKeys.contains(field.key) {
            writer.key(field.key)
            writer.value(field.value)
        }
        (bytes, sawNonFiniteNumber) = (writer.bytes, writer.sawNonFiniteNumber)
    }
}

/// Stamps outgoing messages: one `src` and `seq` counter per topic, so a
/// subscriber that filters by prefix still sees each stream whole and can
/// count its gaps. `src` is `<instance>/<topic>`.
public struct EnvelopeStamper {
    /// This process start's instance name, e.g. `vbt-bus-4f9a01c2`.
    public let instance: String
    /// The stream and sequence number of the last message encoded.
    public private(set) var lastSrc = ""
    public private(set) var lastSeq: UInt64 = 0
    /// Streams by type, then station (where each is in `kept`): looked up with the caller's own
    /// strings, so the hot path builds no topic string.
    private var streams: [String: [String: Int]] = [:]
    /// The streams, counted in place (a stream read out of the tables to count it retained and
    /// released its strings and the table it was in: a tenth of a replay's encoding).
    private var kept: [Stream] = []

    private struct Stream {
        let topic: [UInt8]
        let src: String
        var seq: UInt64
        /// The body's first bytes, the same for every message of the stream: `{"v":1,"type":…,
        /// "station":…,"src":…,"seq":`, written once, not three strings escaped a message (the
        /// replay at 1,000 stations spent a tenth of its publishing in them).
        let head: [UInt8]

        init(topic: [UInt8], type: String, station: String, src: String, seq: UInt64) {
            (self.topic, self.src, self.seq) = (topic, src, seq)
            var writer = JSONWriter(capacity: 64 + type.utf8.count + station.utf8.count + src.utf8.count)
            writer.beginObject()
            writer.key("v"); writer.int(BusLimits.version)
            writer.key("type"); writer.string(type)
            writer.key("station"); writer.string(station)
            writer.key("src"); writer.string(src)
            writer.key("seq")
            head = writer.bytes
        }
    }

    /// Creates a stamper for `program`, with a random instance suffix unless given.
    public init(program: String, instance: String? = nil) {
        let suffix = String(UInt32.random(in: .min ... .max), radix: 16)
        self.instance = instance ?? "\(program)-\(String(repeating: "0", count: 8 - suffix.count))\(suffix)"
    }

    /// Encodes a typed payload into the two frames of a bus message.
    public mutating func encode<P: BusPayload>(
        _ payload: P, station: String, athlete: String? = nil, ts: Double
    ) throws(EncodeError) -> (topic: [UInt8], body: [UInt8]) {
        try encode(type: P.type, station: station, athlete: athlete, ts: ts) { payload.write(to: &$0) }
    }

    /// Encodes a message whose members other than the envelope's are written already.
    public mutating func encode(
        type: String, station: String, athlete: String? = nil, ts: Double, members: EncodedMembers
    ) throws(EncodeError) -> (topic: [UInt8], body: [UInt8]) {
        if members.sawNonFiniteNumber { throw EncodeError(reason: "\(type).\(station): a number is NaN or infinite") }
        // Room for all of it at once (grown from 256 bytes, an IMU message of three readings was
        // copied twice on its way: a sixteenth of a replay's encoding).
        let room = members.bytes.count + (athlete?.utf8.count ?? 0) + 64
        return try encode(type: type, station: station, athlete: athlete, ts: ts, room: room) { writer in
            if !members.bytes.isEmpty { writer.raw(members.bytes) }
        }
    }

    /// Encodes a message whose fields `writeFields` writes (keys and values only).
    /// `room`: about how many bytes follow the stream's first members (`Stream.head`).
    public mutating func encode(
        type: String, station: String, athlete: String? = nil, ts: Double, room: Int = 192,
        writeFields: (inout JSONWriter) -> Void
    ) throws(EncodeError) -> (topic: [UInt8], body: [UInt8]) {
        let known = streams.index(forKey: type).flatMap { streams.values[$0][station] }
        if known == nil {
            let topic = "\(type).\(station)"
            let topicBytes = Array(topic.utf8)
            do { _ = try splitTopic(topicBytes) } catch { throw EncodeError(reason: error.detail) }
            kept.append(Stream(topic: topicBytes, type: type, station: station, src: "\(instance)/\(topic)", seq: 0))
            streams[type, default: [:]][station] = kept.count - 1
        }
        let index = known ?? kept.count - 1
        let seq = kept[index].seq + 1
        var writer = JSONWriter(capacity: kept[index].head.count + room)
        writer.resume(atValueAfter: kept[index].head)
        writer.int(seq)
        writer.key("ts"); writer.fixed(ts, decimals: 6)
        if let athlete { writer.key("athlete"); writer.string(athlete) }
        writeFields(&writer)
        writer.endObject()
        if writer.sawNonFiniteNumber { throw EncodeError(reason: "\(type).\(station): a number is NaN or infinite") }
        if writer.bytes.count > BusLimits.maxMessageBytes {
            throw EncodeError(reason: "\(type).\(station): \(writer.bytes.count) bytes exceeds \(BusLimits.maxMessageBytes)")
        }
        // Only a message that will be sent consumes a sequence number (a new stream refused
        // here is kept at 0, as if it had never been).
        kept[index].seq = seq
        (lastSrc, lastSeq) = (kept[index].src, seq)
        return (kept[index].topic, writer.bytes)
    }

    /// The last seq stamped per topic (`<type>.<station>`): what a checkpoint keeps.
    public var positions: [String: UInt64] {
        var all: [String: UInt64] = [:]
        for (type, stations) in streams {
            for (station, index) in stations where kept[index].seq > 0 { all["\(type).\(station)"] = kept[index].seq }
        }
        return all
    }

    /// Continues `topic`'s stream after `seq` (a process resuming an earlier
    /// instance's streams, whose name it was created with). A topic that is
    /// not `<type>.<station>` is ignored.
    public mutating func resume(topic: String, after seq: UInt64) {
        let bytes = Array(topic.utf8)
        guard let (type, station) = try? splitTopic(bytes) else { return }
        let resumed = Stream(topic: bytes, type: type, station: station, src: "\(instance)/\(topic)", seq: seq)
        if let index = streams[type]?[station] {
            kept[index] = resumed
        } else {
            kept.append(resumed)
            streams[type, default: [:]][station] = kept.count - 1
        }
    }
}

/// A message that cannot be put on the wire.
public struct EncodeError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let reason: String
    public var description: String { reason }
}
