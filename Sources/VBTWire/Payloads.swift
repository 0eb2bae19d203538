// Typed payloads: the type-specific fields beside the envelope. Each type
// mirrors proto/<type>.schema.json; units are in the field names.

/// A message type's own fields, readable from and writable to JSON.
public protocol BusPayload: Sendable {
    /// The `<type>` of the topic and of the envelope's `type` field.
    static var type: String { get }
    /// Reads the fields from a received object (envelope fields are ignored).
    init(fields: JSONObject) throws(PayloadError)
    /// Writes the fields (keys and values) after the envelope.
    func write(to writer: inout JSONWriter)
}

/// A payload field that is missing or of the wrong shape.
public struct PayloadError: Error, Sendable, CustomStringConvertible {
    /// What was wrong, naming the field.
    public let reason: String
    /// Creates an error.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Three numbers, written as `[x,y,z]`.
public struct Vector3: Sendable, Equatable, Codable {
    public var x: Double, y: Double, z: Double
    /// Creates a vector.
    public init(_ x: Double, _ y: Double, _ z: Double) { (self.x, self.y, self.z) = (x, y, z) }
}

// MARK: Typed field access

extension JSONObject {
    /// A required number.
    public func number(_ key: String) throws(PayloadError) -> Double {
        guard let value = try optionalNumber(key) else { throw PayloadError("missing field \(key)") }
        return value
    }

    /// An optional number (absent or null gives nil).
    public func optionalNumber(_ key: String) throws(PayloadError) -> Double? {
        switch self[key] {
        case nil, .null?: return nil
        case .number(let value)?: return value
        default: throw PayloadError("\(key) must be a number")
        }
    }

    /// A required integer.
    public func integer(_ key: String) throws(PayloadError) -> Int {
        let value = try number(key)
        guard value == value.rounded(), abs(value) < 9e15 else { throw PayloadError("\(key) must be an integer") }
        return Int(value)
    }

    /// An optional integer.
    public func optionalInteger(_ key: String) throws(PayloadError) -> Int? {
        guard self[key] != nil, self[key] != .null else { return nil }
        return try integer(key)
    }

    /// A required string.
    public func string(_ key: String) throws(PayloadError) -> String {
        guard let value = try optionalString(key) else { throw PayloadError("missing field \(key)") }
        return value
    }

    /// An optional string.
    public func optionalString(_ key: String) throws(PayloadError) -> String? {
        switch self[key] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw PayloadError("\(key) must be a string")
        }
    }

    /// A required string from a fixed set.
    public func choice<E: RawRepresentable>(_ key: String, _ type: E.Type) throws(PayloadError) -> E where E.RawValue == String {
        let raw = try string(key)
        guard let value = E(rawValue: raw) else { throw PayloadError("\(key)=\(raw) is not a known value") }
        return value
    }

    /// An optional string from a fixed set.
    public func optionalChoice<E: RawRepresentable>(_ key: String, _ type: E.Type) throws(PayloadError) -> E? where E.RawValue == String {
        guard let raw = try optionalString(key) else { return nil }
        guard let value = E(rawValue: raw) else { throw PayloadError("\(key)=\(raw) is not a known value") }
        return value
    }

    /// A required `[x,y,z]`.
    public func vector(_ key: String) throws(PayloadError) -> Vector3 {
        guard let value = try optionalVector(key) else { throw PayloadError("missing field \(key)") }
        return value
    }

    /// An optional `[x,y,z]`.
    public func optionalVector(_ key: String) throws(PayloadError) -> Vector3? {
        switch self[key] {
        case nil, .null?: return nil
        case .array(let items)? where items.count == 3:
            guard case .number(let x) = items[0], case .number(let y) = items[1], case .number(let z) = items[2] else {
                throw PayloadError("\(key) must be three numbers")
            }
            return Vector3(x, y, z)
        default: throw PayloadError("\(key) must be three numbers")
        }
    }

    /// A required non-empty array of objects.
    public func objects(_ key: String) throws(PayloadError) -> [JSONObject] {
        guard case .array(let items)? = self[key], !items.isEmpty else {
            throw PayloadError("\(key) must be a non-empty array")
        }
        var objects: [JSONObject] = []
        objects.reserveCapacity(items.count)
        for item in items {
            guard case .object(let object) = item else { throw PayloadError("\(key) must hold objects") }
            objects.append(object)
        }
        return objects
    }

    /// An optional array of strings.
    public func optionalStrings(_ key: String) throws(PayloadError) -> [String]? {
        switch self[key] {
        case nil, .null?: return nil
        case .array(let items)?:
            var strings: [String] = []
            for item in items {
                guard case .string(let string) = item else { throw PayloadError("\(key) must hold strings") }
                strings.append(string)
            }
            return strings
        default: throw PayloadError("\(key) must be an array of strings")
        }
    }

    /// An optional object.
    public func optionalObject(_ key: String) throws(PayloadError) -> JSONObject? {
        switch self[key] {
        case nil, .null?: return nil
        case .object(let object)?: return object
        default: throw PayloadError("\(key) must be an object")
        }
    }
}

extension JSONWriter {
    /// Writes `"key":[x,y,z]`.
    public mutating func field(_ key: StaticString, _ vector: Vector3) {
        self.key(key)
        beginArray(); number(vector.x); number(vector.y); number(vector.z); endArray()
    }

    /// Writes `"key":number`.
    public mutating func field(_ key: StaticString, _ value: Double) {
        self.key(key); number(value)
    }

    /// Writes `"key":integer`.
    public mutating func field(_ key: StaticString, _ value: Int) {
        self.key(key); int(value)
    }

    /// Writes `"key":"string"`.
    public mutating func field(_ key: StaticString, _ value: String) {
        self.key(key); string(value)
    }

    /// Writes the field only when the value is present.
    public mutating func optionalField(_ key: StaticString, _ value: Double?) {
        if let value { field(key, value) }
    }

    /// Writes the field only when the value is present.
    public mutating func optionalField(_ key: StaticString, _ value: String?) {
        if let value { field(key, value) }
    }

    /// Writes the field only when the value is present.
    public mutating func optionalField(_ key: StaticString, _ value: Vector3?) {
        if let value { field(key, value) }
    }
}

// MARK: sample

/// `sample`: one or more readings from one sensor of a station.
public struct SampleMessage: BusPayload, Equatable {
    public static let type = "sample"

    /// An IMU reading (bar- or body-mounted WitMotion).
    public struct IMUReading: Sendable, Equatable {
        /// Host time of the reading, Unix seconds.
        public var t: Double
        public var accG: Vector3
        public var gyroDps: Vector3
        /// Roll, pitch, yaw, when the sensor computes them (a WitMotion does; a
        /// phone-grade IMU often sends acceleration and gyro only).
        public var angleDeg: Vector3?
        /// Creates a reading.
        public init(t: Double, accG: Vector3, gyroDps: Vector3, angleDeg: Vector3? = nil) {
            (self.t, self.accG, self.gyroDps, self.angleDeg) = (t, accG, gyroDps, angleDeg)
        }
    }

    /// A laser distance reading, with the Arduino's own phase guess when sent.
    public struct DistanceReading: Sendable, Equatable {
        public enum State: String, Sendable { case idle = "IDLE", eccentric = "ECCENTRIC", concentric = "CONCENTRIC" }
        public var t: Double
        public var distanceMm: Double
        public var state: State?
        public var accG: Vector3?
        /// Creates a reading.
        public init(t: Double, distanceMm: Double, state: State? = nil, accG: Vector3? = nil) {
            (self.t, self.distanceMm, self.state, self.accG) = (t, distanceMm, state, accG)
        }
    }

    /// A posture wearable reading, in the sensor's own units.
    public struct PostureReading: Sendable, Equatable {
        public var t: Double
        public var acc: Vector3
        public var mag: Vector3
        /// Creates a reading.
        public init(t: Double, acc: Vector3, mag: Vector3) { (self.t, self.acc, self.mag) = (t, acc, mag) }
    }

    /// The `sensor` field of a posture wearable's readings.
    public static let postureSensor = Readings.posture([]).sensor
    /// The `sensor` of bar IMU readings.
    public static let imuSensor = Readings.imu([]).sensor
    /// The `sensor` of a laser's or lidar's distance readings.
    public static let distanceSensor = Readings.distance([]).sensor

    /// The readings, all from one kind of sensor.
    public enum Readings: Sendable, Equatable {
        case imu([IMUReading])
        case distance([DistanceReading])
        case posture([PostureReading])

        /// The `sensor` field's value.
        public var sensor: String {
            switch self {
            case .imu: "imu"
            case .distance: "distance"
            case .posture: "posture"
            }
        }

        /// How many readings.
        public var count: Int {
            switch self {
            case .imu(let r): r.count
            case .distance(let r): r.count
            case .posture(let r): r.count
            }
        }

        /// Each reading's time `t`, in order.
        public var times: [Double] {
            switch self {
            case .imu(let r): r.map(\.t)
            case .distance(let r): r.map(\.t)
            case .posture(let r): r.map(\.t)
            }
        }

        /// The latest reading time (nil without readings), without an array of the times: the
        /// rep-detector asks it of every message it feeds.
        public var latestTime: Double? {
            switch self {
            case .imu(let r): r.lazy.map(\.t).max()
            case .distance(let r): r.lazy.map(\.t).max()
            case .posture(let r): r.lazy.map(\.t).max()
            }
        }
    }

    /// The readings.
    public var readings: Readings
    /// The device they came from (BLE address, serial path, `sim`, ...), when known.
    public var device: String?

    /// Creates a sample message.
    public init(_ readings: Readings, device: String? = nil) {
        self.readings = readings
        self.device = device
    }

    public init(fields: JSONObject) throws(PayloadError) {
        let sensor = try fields.string("sensor")
        let items = try fields.objects("samples")
        device = try fields.optionalString("device")
        switch sensor {
        case "imu":
            var list: [IMUReading] = []
            list.reserveCapacity(items.count)
            for item in items {
                list.append(
                    IMUReading(
                        t: try item.number("t"), accG: try item.vector("acc_g"),
                        gyroDps: try item.vector("gyro_dps"), angleDeg: try item.optionalVector("angle_deg")))
            }
            readings = .imu(list)
        case "distance":
            var list: [DistanceReading] = []
            list.reserveCapacity(items.count)
            for item in items {
                list.append(
                    DistanceReading(
                        t: try item.number("t"), distanceMm: try item.number("distance_mm"),
                        state: try item.optionalChoice("state", DistanceReading.State.self),
                        accG: try item.optionalVector("acc_g")))
            }
            readings = .distance(list)
        case "posture":
            var list: [PostureReading] = []
            list.reserveCapacity(items.count)
            for item in items {
                list.append(PostureReading(t: try item.number("t"), acc: try item.vector("acc"), mag: try item.vector("mag")))
            }
            readings = .posture(list)
        default:
            throw PayloadError("sensor=\(sensor) must be imu, distance or posture")
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("sensor", readings.sensor)
        writer.optionalField("device", device)
        writer.key("samples")
        writer.beginArray()
        switch readings {
        case .imu(let list):
            for r in list {
                writer.beginObject()
                writer.key("t"); writer.fixed(r.t, decimals: 6)
                writer.field("acc_g", r.accG)
                writer.field("gyro_dps", r.gyroDps)
                writer.optionalField("angle_deg", r.angleDeg)
                writer.endObject()
            }
        case .distance(let list):
            for r in list {
                writer.beginObject()
                writer.key("t"); writer.fixed(r.t, decimals: 6)
                writer.field("distance_mm", r.distanceMm)
                writer.optionalField("state", r.state?.rawValue)
                writer.optionalField("acc_g", r.accG)
                writer.endObject()
            }
        case .posture(let list):
            for r in list {
                writer.beginObject()
                writer.key("t"); writer.fixed(r.t, decimals: 6)
                writer.field("acc", r.acc)
                writer.field("mag", r.mag)
                writer.endObject()
            }
        }
        writer.endArray()
    }
}

extension SampleMessage {
    /// The keys a reading may have, in `readings(sensor:body:range:)`'s numbering.
    private static let readingKeys: [[UInt8]] = ["t", "acc_g", "gyro_dps", "angle_deg", "distance_mm", "state", "acc", "mag"].map {
        Array($0.utf8)
    }

    /// The readings of a `sensor` read where they lie, at `range` of `body` (a received sample's
    /// `samples`, `BusMessage.deferred`), without a tree of `JSONValue`s
    /// (`JSONParser.readFlatObjects`); nil for anything but readings as a bridge writes them (a
    /// key it does not write, a null, an unknown sensor, a malformed byte), which the caller
    /// then reads the generic way, `init(fields:)`, which accepts or refuses them with its
    /// reason. What it reads is what `init(fields:)` reads.
    static func readings(sensor: String, body: [UInt8], range: Range<Int>) -> Readings? {
        guard let kind = ReadingsBuilder.Kind(rawValue: sensor) else { return nil }
        var builder = ReadingsBuilder(kind: kind)
        guard JSONParser.readFlatObjects(body, range: range, keys: readingKeys, into: &builder) else { return nil }
        return builder.readings
    }

    /// The readings of a `sensor` read as `readings(sensor:body:range:)` reads them, from `start`
    /// of a frame on (where its `samples` begins), in the pass that reads the frame's envelope
    /// (`SampleReadings.read`): the readings, and where they end, past the array's `]`.
    static func readings(sensor: String, in buffer: UnsafeBufferPointer<UInt8>, at start: Int) -> (readings: Readings, end: Int)? {
        guard let kind = ReadingsBuilder.Kind(rawValue: sensor) else { return nil }
        var builder = ReadingsBuilder(kind: kind)
        guard let end = JSONParser.readFlatObjects(in: buffer, at: start, keys: readingKeys, into: &builder) else { return nil }
        return (builder.readings, end)
    }
}

/// One sensor's readings built from their members as `JSONParser.readFlatObjects` reads them
/// (`SampleMessage.readings(sensor:body:range:)`). A struct handed in place, not closures over
/// local variables: those were boxed and every access to them checked for exclusivity at run
/// time, a fifth of building readings.
private struct ReadingsBuilder: FlatObjectReader {
    enum Kind: String { case imu, distance, posture }
    let kind: Kind
    // One reading's members, cleared once it is taken; three vector slots in place, not an array.
    var t: Double?
    var vectors: (Vector3?, Vector3?, Vector3?) = (nil, nil, nil)
    var distance: Double?
    var state: SampleMessage.DistanceReading.State?
    var imu: [SampleMessage.IMUReading] = []
    var distances: [SampleMessage.DistanceReading] = []
    var postures: [SampleMessage.PostureReading] = []

    init(kind: Kind) { self.kind = kind }

    /// What was read, as the sensor's readings.
    var readings: SampleMessage.Readings {
        switch kind {
        case .imu: .imu(imu)
        case .posture: .posture(postures)
        case .distance: .distance(distances)
        }
    }

    /// Keeps the vector under key `key` (its number in `readingKeys`) in its slot: the sensor's
    /// vectors in the order first, second, third; false for a key the sensor has no vector under.
    private mutating func keep(_ vector: Vector3, under key: Int) -> Bool {
        switch (kind, key) {
        case (.imu, 1), (.distance, 1), (.posture, 6): vectors.0 = vector
        case (.imu, 2), (.posture, 7): vectors.1 = vector
        case (.imu, 3): vectors.2 = vector
        default: return false
        }
        return true
    }

    mutating func member(_ key: Int, _ value: FlatValue) -> Bool {
        switch (key, value) {
        case (0, .number(let number)): t = number
        case (4, .number(let number)) where kind == .distance: distance = number
        case (5, .word(let word)) where kind == .distance:
            guard let known = SampleMessage.DistanceReading.State(rawValue: word) else { return false }
            state = known
        case (_, .triple(let x, let y, let z)):
            return keep(Vector3(x, y, z), under: key)
        default: return false
        }
        return true
    }

    /// A reading missing a member its sensor requires: false, and the caller goes the
    /// generic way, which says which.
    mutating func end() -> Bool {
        defer { (t, vectors, distance, state) = (nil, (nil, nil, nil), nil, nil) }
        guard let t else { return false }
        switch kind {
        case .imu:
            guard let acc = vectors.0, let gyro = vectors.1 else { return false }
            imu.append(SampleMessage.IMUReading(t: t, accG: acc, gyroDps: gyro, angleDeg: vectors.2))
        case .posture:
            guard let acc = vectors.0, let mag = vectors.1 else { return false }
            postures.append(SampleMessage.PostureReading(t: t, acc: acc, mag: mag))
        case .distance:
            guard let distance else { return false }
            distances.append(SampleMessage.DistanceReading(t: t, distanceMm: distance, state: state, accG: vectors.0))
        }
        return true
    }
}

// MARK: status

/// `status`: a sensor link's state, for operators and the coach console.
public struct StatusMessage: BusPayload, Equatable {
    public static let type = "status"

    /// The link state.
    public enum State: String, Sendable {
        case connecting, connected, streaming, disconnected, error
    }

    public var state: State
    /// `imu`, `distance` or `posture`.
    public var sensor: String
    /// Address, serial path or `sim`.
    public var device: String
    /// Measured readings per second over the last window.
    public var rateHz: Double?
    public var batteryPct: Double?
    /// Why the link is down, in words that say what to do.
    public var reason: String?

    /// Creates a status.
    public init(state: State, sensor: String, device: String, rateHz: Double? = nil, batteryPct: Double? = nil, reason: String? = nil) {
        (self.state, self.sensor, self.device, self.rateHz, self.batteryPct, self.reason) = (state, sensor, device, rateHz, batteryPct, reason)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        state = try fields.choice("state", State.self)
        sensor = try fields.string("sensor")
        device = try fields.string("device")
        rateHz = try fields.optionalNumber("rate_hz")
        batteryPct = try fields.optionalNumber("battery_pct")
        reason = try fields.optionalString("reason")
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("state", state.rawValue)
        writer.field("sensor", sensor)
        writer.field("device", device)
        writer.optionalField("rate_hz", rateHz)
        writer.optionalField("battery_pct", batteryPct)
        writer.optionalField("reason", reason)
    }
}

// MARK: heartbeat

/// Counters a consumer keeps over what it received.
public struct InputCounters: Sendable, Equatable, Codable {
    public var received = 0
    public var gaps = 0
    public var missing = 0
    public var duplicates = 0
    public var malformed = 0
    /// Messages this consumer lacked that no producer's journal held any more: lost for good (the session-recorder says).
    public var lost: Int?
    /// Messages this consumer lacked and fetched again from a producer's journal since it started.
    public var recovered: Int?
    /// Messages this consumer lacked and still waits for: neither fetched again nor given up (its
    /// open holes and silent tails). A count that stays above 0 after a run is what may yet be lost.
    public var outstanding: Int?
    /// Creates zeroed counters.
    public init() {}
}

/// A sink's counters, published in the notifier's heartbeat (`webhook`).
public struct SinkCounters: Sendable, Equatable, Codable {
    /// Handed over and queued.
    public var queued = 0
    /// Delivered (a 2xx answer).
    public var delivered = 0
    /// Given up on after every retry, or refused for good (4xx).
    public var failed = 0
    /// Not queued: the queue was full.
    public var dropped = 0
    /// Attempts repeated after a timeout, a refused connection or a 5xx/408/429 answer.
    public var retries = 0
    /// Creates zeroed counters.
    public init() {}
}

/// `heartbeat`: a process says it is alive and how its traffic looks.
public struct HeartbeatMessage: BusPayload, Equatable {
    public static let type = "heartbeat"

    /// The bus's forwarding counters since it started.
    public struct BusCounters: Sendable, Equatable {
        public var msgsIn = 0
        public var bytesIn = 0
        public var msgsOut = 0
        public var bytesOut = 0
        public var subscribeEvents = 0
        public var unsubscribeEvents = 0
        /// Messages dropped: on a secured bus, those whose topic is outside the sender's role; on
        /// any bus, those a publisher sent under a routed topic (`ShardRoute`, the bus's to send).
        public var refused: Int?
        /// On a secured bus: the refused messages per sender (its certificate's name), at most 64 senders.
        public var refusedBy: [String: Int]?
        /// On a secured bus: connections refused at the CURVE handshake (no key, unknown or revoked key).
        public var refusedConnections: Int?
        /// Connections made (handshakes completed), both sides, since the bus started.
        public var connections: Int?
        /// Connections ended (a peer gone, a link down past the liveness timeout, a refused handshake).
        public var disconnections: Int?
        /// Subscribers the bus disconnected at its memory budget, each the one furthest behind (`vbt-bus --memory-budget-mb`).
        public var shedSubscribers: Int?
        /// Samples sent a second time under a route (`~K/N/<topic>`) to the detectors that split
        /// a gym; present once one has asked for them.
        public var routed: Int?
        /// Creates zeroed counters.
        public init() {}
    }

    /// The program, e.g. `vbt-bus`.
    public var role: String
    public var uptimeS: Double
    /// Seconds until the next heartbeat at the latest.
    public var intervalS: Double
    public var bus: BusCounters?
    public var inputs: InputCounters?
    /// The notifier's webhook sink, when it has one.
    public var webhook: SinkCounters?
    /// A producer that journals: where to ask for what was missed, and the last seq of each of its streams.
    public var replay: ReplayOffer?
    /// The topic prefixes the program subscribes to (`""`: everything), so `vbt topics` can say who listens.
    public var subscribes: [String]?
    /// True in the last heartbeat of a process that stops as asked (a bridge stopped, or a replay
    /// that has ended): it is gone, not silent, and the notifier stops watching it instead of
    /// raising it missing for good. Nil otherwise (written only when true).
    public var stopping: Bool?
    /// A chain uplink's progress (`vbt-uplink --bus`).
    public var uplink: UplinkProgress?

    /// How far a gym's chain uplink is behind, and what went wrong last.
    public struct UplinkProgress: Sendable, Equatable {
        /// The gym's name in the chain.
        public var gym: String
        /// Rows in the gym's store not yet in the chain store (nil until first measured).
        public var backlogRows: Int?
        /// Seconds since the oldest of them was written (0 with no backlog; nil until measured).
        public var lagS: Double?
        /// Rows sent since the process started (new rows, not refreshes).
        public var sentRows = 0
        /// The last error talking to the chain store or reading the gym's store; nil once a cycle succeeds.
        public var lastError: String?

        /// Creates progress for `gym`, nothing measured yet.
        public init(gym: String) { self.gym = gym }
    }

    /// Where a producer answers replay requests (proto/replay.md), and how far each of its streams has gone,
    /// so a consumer sees a silent tail as well as a hole.
    public struct ReplayOffer: Sendable, Equatable {
        /// The producer's replay endpoint, e.g. `ipc:///var/lib/vbt/bridge-rack-01/replay.sock`.
        public var endpoint: String
        /// The last seq published on each stream this process journals (its own streams).
        public var lastSeq: [String: Int]
        /// The CURVE public key (Z85) of a `tcp://` endpoint off the producer's computer, which
        /// admits service keys only (proto/replay.md); nil for a local (`ipc://`, loopback) one.
        public var serverKey: String?

        /// Creates an offer.
        public init(endpoint: String, lastSeq: [String: Int], serverKey: String? = nil) {
            (self.endpoint, self.lastSeq, self.serverKey) = (endpoint, lastSeq, serverKey)
        }
    }

    /// Creates a heartbeat.
    public init(role: String, uptimeS: Double, intervalS: Double, bus: BusCounters? = nil, inputs: InputCounters? = nil) {
        (self.role, self.uptimeS, self.intervalS, self.bus, self.inputs) = (role, uptimeS, intervalS, bus, inputs)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        role = try fields.string("role")
        uptimeS = try fields.number("uptime_s")
        intervalS = try fields.number("interval_s")
        if let object = try fields.optionalObject("bus") {
            var counters = BusCounters()
            counters.msgsIn = try object.integer("msgs_in")
            counters.bytesIn = try object.integer("bytes_in")
            counters.msgsOut = try object.integer("msgs_out")
            counters.bytesOut = try object.integer("bytes_out")
            counters.subscribeEvents = try object.integer("subscribe_events")
            counters.unsubscribeEvents = try object.integer("unsubscribe_events")
            counters.refused = try object.optionalInteger("refused")
            counters.refusedConnections = try object.optionalInteger("refused_connections")
            if object["refused_by"] != nil { counters.refusedBy = try object.seqMap("refused_by") }
            counters.connections = try object.optionalInteger("connections")
            counters.disconnections = try object.optionalInteger("disconnections")
            counters.shedSubscribers = try object.optionalInteger("shed_subscribers")
            counters.routed = try object.optionalInteger("routed")
            bus = counters
        }
        if let object = try fields.optionalObject("inputs") {
            var counters = InputCounters()
            counters.received = try object.integer("received")
            counters.gaps = try object.integer("gaps")
            counters.missing = try object.integer("missing")
            counters.duplicates = try object.integer("duplicates")
            counters.malformed = try object.integer("malformed")
            counters.lost = try object.optionalInteger("lost")
            counters.recovered = try object.optionalInteger("recovered")
            counters.outstanding = try object.optionalInteger("outstanding")
            inputs = counters
        }
        if let object = try fields.optionalObject("webhook") {
            var counters = SinkCounters()
            counters.queued = try object.integer("queued")
            counters.delivered = try object.integer("delivered")
            counters.failed = try object.integer("failed")
            counters.dropped = try object.integer("dropped")
            counters.retries = try object.integer("retries")
            webhook = counters
        }
        if let object = try fields.optionalObject("replay") {
            replay = ReplayOffer(
                endpoint: try object.string("endpoint"), lastSeq: try object.seqMap("last_seq"), serverKey: try object.optionalString("server_key"))
        }
        subscribes = try fields.optionalStrings("subscribes")
        stopping = try fields.optionalFlag("stopping") == true ? true : nil
        if let object = try fields.optionalObject("uplink") {
            var progress = UplinkProgress(gym: try object.string("gym"))
            progress.backlogRows = try object.optionalInteger("backlog_rows")
            progress.lagS = try object.optionalNumber("lag_s")
            progress.sentRows = try object.integer("sent_rows")
            progress.lastError = try object.optionalString("last_error")
            uplink = progress
        }
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("role", role)
        writer.key("uptime_s"); writer.fixed(uptimeS, decimals: 3)
        writer.field("interval_s", intervalS)
        if let bus {
            writer.key("bus")
            writer.beginObject()
            writer.field("msgs_in", bus.msgsIn)
            writer.field("bytes_in", bus.bytesIn)
            writer.field("msgs_out", bus.msgsOut)
            writer.field("bytes_out", bus.bytesOut)
            writer.field("subscribe_events", bus.subscribeEvents)
            writer.field("unsubscribe_events", bus.unsubscribeEvents)
            if let refused = bus.refused { writer.field("refused", refused) }
            if let refusedBy = bus.refusedBy { writer.writeSeqMap("refused_by", refusedBy) }
            if let refused = bus.refusedConnections { writer.field("refused_connections", refused) }
            if let connections = bus.connections { writer.field("connections", connections) }
            if let disconnections = bus.disconnections { writer.field("disconnections", disconnections) }
            if let shed = bus.shedSubscribers { writer.field("shed_subscribers", shed) }
            if let routed = bus.routed { writer.field("routed", routed) }
            writer.endObject()
        }
        if let inputs {
            writer.key("inputs")
            writer.beginObject()
            writer.field("received", inputs.received)
            writer.field("gaps", inputs.gaps)
            writer.field("missing", inputs.missing)
            writer.field("duplicates", inputs.duplicates)
            writer.field("malformed", inputs.malformed)
            if let lost = inputs.lost { writer.field("lost", lost) }
            if let recovered = inputs.recovered { writer.field("recovered", recovered) }
            if let outstanding = inputs.outstanding { writer.field("outstanding", outstanding) }
            writer.endObject()
        }
        if let webhook {
            writer.key("webhook")
            writer.beginObject()
            writer.field("queued", webhook.queued)
            writer.field("delivered", webhook.delivered)
            writer.field("failed", webhook.failed)
            writer.field("dropped", webhook.dropped)
            writer.field("retries", webhook.retries)
            writer.endObject()
        }
        if let replay {
            writer.key("replay")
            writer.beginObject()
            writer.field("endpoint", replay.endpoint)
            writer.writeSeqMap("last_seq", replay.lastSeq)
            if let key = replay.serverKey { writer.field("server_key", key) }
            writer.endObject()
        }
        if let subscribes {
            writer.key("subscribes")
            writer.beginArray()
            for prefix in subscribes { writer.string(prefix) }
            writer.endArray()
        }
        if stopping == true { writer.key("stopping"); writer.bool(true) }
        if let uplink {
            writer.key("uplink")
            writer.beginObject()
            writer.field("gym", uplink.gym)
            if let backlog = uplink.backlogRows { writer.field("backlog_rows", backlog) }
            if let lag = uplink.lagS { writer.key("lag_s"); writer.fixed(lag, decimals: 3) }
            writer.field("sent_rows", uplink.sentRows)
            if let error = uplink.lastError { writer.field("last_error", error) }
            writer.endObject()
        }
    }
}

// MARK: cmd

/// `cmd`: an operator's command to the programs serving a station.
public struct CommandMessage: BusPayload, Equatable {
    public static let type = "cmd"

    /// Correlation id, echoed in logs and replies.
    public var id: String
    /// What to do, e.g. `set.end`, `athlete.assign`, `calibrate.start`.
    public var command: String
    /// Which program should act (`rep-detector`, ...), or `*` for all.
    public var target: String
    /// Command-specific arguments.
    public var args: JSONObject

    /// Creates a command.
    public init(id: String, command: String, target: String = "*", args: JSONObject = JSONObject()) {
        (self.id, self.command, self.target, self.args) = (id, command, target, args)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        id = try fields.string("id")
        command = try fields.string("command")
        target = try fields.string("target")
        args = try fields.optionalObject("args") ?? JSONObject()
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("id", id)
        writer.field("command", command)
        writer.field("target", target)
        writer.key("args")
        writer.value(.object(args))
    }
}

/// A program's answer to a command (proto/ack.schema.json): carried out, or refused with the
/// reason in words an operator can act on. Each program that acts on a command answers it
/// once, on `ack.<station>`; `cmd_id` is the command's `id`.
public struct AckMessage: BusPayload, Equatable {
    public static let type = "ack"

    public enum State: String, Sendable { case done, refused }

    public var cmdId: String
    public var command: String
    /// The program that answers: `rep-detector`, `notifier`, `posture-evaluator`.
    public var program: String
    public var state: State
    /// Why it was refused; or, when done, what was done if worth saying.
    public var reason: String?

    public init(cmdId: String, command: String, program: String, state: State, reason: String? = nil) {
        (self.cmdId, self.command, self.program, self.state, self.reason) = (cmdId, command, program, state, reason)
    }

    /// The answer to `command`: refused when `refusal` is given, else done (with `detail`).
    public init(answering command: CommandMessage, program: String, refusal: String?, detail: String? = nil) {
        self.init(cmdId: command.id, command: command.command, program: program, state: refusal == nil ? .done : .refused, reason: refusal ?? detail)
    }

    public init(fields: JSONObject) throws(PayloadError) {
        cmdId = try fields.string("cmd_id")
        command = try fields.string("command")
        program = try fields.string("program")
        state = try fields.choice("state", State.self)
        reason = try fields.optionalString("reason")
        guard state == .done || !(reason ?? "").isEmpty else { throw PayloadError("a refused ack says why: reason must not be empty") }
    }

    public func write(to writer: inout JSONWriter) {
        writer.field("cmd_id", cmdId)
        writer.field("command", command)
        writer.field("program", program)
        writer.field("state", state.rawValue)
        writer.optionalField("reason", reason)
    }
}
