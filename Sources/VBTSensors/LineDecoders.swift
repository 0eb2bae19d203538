import VBTBus
import VBTWire

/// Splits a byte stream into lines (LF or CRLF), bounding line length so a
/// stream without newlines cannot grow memory.
public struct LineSplitter {
    /// Longest line kept; longer ones are dropped and counted.
    public let maxLineBytes: Int
    /// Lines dropped for being too long.
    public private(set) var overlongLines = 0
    private var pending: [UInt8] = []
    private var discarding = false

    /// Creates a splitter.
    public init(maxLineBytes: Int) { self.maxLineBytes = maxLineBytes }

    /// The complete lines in `chunk` (and what came before it), without terminators.
    public mutating func feed(_ chunk: some Sequence<UInt8>) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        for byte in chunk {
            if byte == 0x0A {
                if discarding {
                    discarding = false
                } else {
                    if pending.last == 0x0D { pending.removeLast() }
                    lines.append(pending)
                }
                pending.removeAll(keepingCapacity: true)
            } else if !discarding {
                pending.append(byte)
                if pending.count > maxLineBytes {
                    overlongLines += 1
                    discarding = true
                    pending.removeAll(keepingCapacity: true)
                }
            }
        }
        return lines
    }
}

/// The Arduino + VL53L0X distance sensor's serial lines:
/// `D:<mm>,S:<IDLE|ECCENTRIC|CONCENTRIC>,A:<ax>,<ay>,<az>` (S and A optional).
public struct ArduinoDistanceDecoder {
    /// What was decoded and dropped so far.
    public private(set) var counters = DecoderCounters()
    private var lines = LineSplitter(maxLineBytes: 256)

    /// The sensor's physical range, in mm; readings outside are rejected.
    public static let rangeMm = 0.0...4000.0

    /// Creates a decoder.
    public init() {}

    /// One reading without its time.
    public struct Reading: Equatable, Sendable {
        public var distanceMm: Double
        public var state: SampleMessage.DistanceReading.State?
        public var accG: Vector3?
    }

    /// Decodes the readings completed by `chunk`.
    public mutating func feed(_ chunk: some Sequence<UInt8>) -> [Reading] {
        let before = lines.overlongLines
        var readings: [Reading] = []
        for line in lines.feed(chunk) where !line.isEmpty {
            if let reading = Self.parse(line) {
                readings.append(reading)
                counters.frames += 1
            } else {
                counters.malformed += 1
            }
        }
        counters.malformed += lines.overlongLines - before
        return readings
    }

    /// Parses one line; nil when it is not a valid reading.
    public static func parse(_ line: [UInt8]) -> Reading? {
        guard line.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return nil }
        let tokens = String(decoding: line, as: UTF8.self).split(separator: ",", omittingEmptySubsequences: false)
        var distance: Double?
        var state: SampleMessage.DistanceReading.State?
        var acc: Vector3?
        var index = 0
        while index < tokens.count {
            let token = tokens[index]
            if token.hasPrefix("D:"), distance == nil {
                guard let mm = Double(token.dropFirst(2)), mm.isFinite, rangeMm.contains(mm) else { return nil }
                distance = mm
            } else if token.hasPrefix("S:"), state == nil {
                guard let parsed = SampleMessage.DistanceReading.State(rawValue: String(token.dropFirst(2))) else { return nil }
                state = parsed
            } else if token.hasPrefix("A:"), acc == nil, index + 2 < tokens.count {
                // A's value is three comma-separated numbers.
                guard let x = Double(token.dropFirst(2)), let y = Double(tokens[index + 1]), let z = Double(tokens[index + 2]),
                    x.isFinite, y.isFinite, z.isFinite
                else { return nil }
                acc = Vector3(x, y, z)
                index += 2
            } else {
                return nil
            }
            index += 1
        }
        guard let distance else { return nil }
        return Reading(distanceMm: distance, state: state, accG: acc)
    }
}

/// The posture wearable's JSON lines `{"acc":[x,y,z],"mag":[x,y,z]}`, which
/// arrive split across BLE notifications of MTU-3 bytes.
public struct PostureLineDecoder {
    /// What was decoded and dropped so far.
    public private(set) var counters = DecoderCounters()
    private var lines = LineSplitter(maxLineBytes: 1024)

    /// Creates a decoder.
    public init() {}

    /// Decodes the readings completed by `chunk` as (acc, mag).
    public mutating func feed(_ chunk: some Sequence<UInt8>) -> [(acc: Vector3, mag: Vector3)] {
        let before = lines.overlongLines
        var readings: [(acc: Vector3, mag: Vector3)] = []
        for line in lines.feed(chunk) where !line.isEmpty {
            guard case .object(let object)? = try? JSONParser.parse(line),
                let acc = try? object.vector("acc"), let mag = try? object.vector("mag"),
                [acc.x, acc.y, acc.z, mag.x, mag.y, mag.z].allSatisfy(\.isFinite)
            else {
                counters.malformed += 1
                continue
            }
            readings.append((acc, mag))
            counters.frames += 1
        }
        counters.malformed += lines.overlongLines - before
        return readings
    }
}
