import VBTBus
import VBTWire

// WitMotion WT901BLE / WT9011DCL protocol (as WitMotion's published protocol manual for the WT901 series describes it).
// BLE notifications and the BLE 5.0 units' USB serial both carry 20-byte
// `55 61` packets (9 x int16 LE, no checksum) and `55 71` register replies;
// the older serial units send 11-byte `55 5x` frames with a checksum. One
// streaming decoder handles all three, resynchronising after garbage.

/// WitMotion GATT identifiers and commands.
public enum WitMotion {
    /// The data service. Note the base ends `9a34fb`: a genuine 128-bit UUID.
    public static let serviceUUID = UUID128("0000ffe5-0000-1000-8000-00805f9a34fb")!
    /// Notify characteristic (data out of the sensor).
    public static let notifyUUID = UUID128("0000ffe4-0000-1000-8000-00805f9a34fb")!
    /// Write characteristic (commands into the sensor).
    public static let writeUUID = UUID128("0000ffe9-0000-1000-8000-00805f9a34fb")!
    /// Advertised names start with this.
    public static let namePrefix = "WT"

    /// Unlocks configuration for ~10 s.
    public static let unlock: [UInt8] = [0xFF, 0xAA, 0x69, 0x88, 0xB5]
    /// Saves configuration to flash.
    public static let save: [UInt8] = [0xFF, 0xAA, 0x00, 0x00, 0x00]

    /// Output-rate register (0x03) codes by rate.
    public static let rateCodes: [Int: UInt8] = [10: 0x06, 20: 0x07, 50: 0x08, 100: 0x09, 200: 0x0B]
    /// The output-rate register.
    public static let rateRegister: UInt8 = 0x03
    /// The battery register (volts x 100).
    public static let batteryRegister: UInt8 = 0x64

    /// `FF AA 03 code 00`: set the output rate.
    public static func setRate(code: UInt8) -> [UInt8] { [0xFF, 0xAA, rateRegister, code, 0x00] }
    /// `FF AA 27 reg 00`: ask for a register; the answer is a `55 71` packet.
    public static func readRegister(_ register: UInt8) -> [UInt8] { [0xFF, 0xAA, 0x27, register, 0x00] }

    /// The rate in Hz a rate code stands for.
    public static func rate(forCode code: UInt8) -> Int? { rateCodes.first { $0.value == code }?.key }

    /// Battery percentage from the register's volts x 100, on a Li-ion curve
    /// (3.4 V empty .. 4.1 V full, linear between; an estimate, said as such).
    public static func batteryPercent(centivolts: Int) -> Double {
        let volts = Double(centivolts) / 100
        return min(100, max(0, (volts - 3.4) / (4.1 - 3.4) * 100)).rounded()
    }
}

/// One thing the WitMotion decoder found in the byte stream.
public enum WitMotionFrame: Equatable, Sendable {
    /// A full IMU reading (`55 61`, or a completed 51/52/53 serial triple).
    case imu(accG: Vector3, gyroDps: Vector3, angleDeg: Vector3)
    /// A register reply (`55 71`): first register and 8 raw values.
    case registers(start: UInt8, values: [Int16])
    /// Magnetometer (serial `55 54`), raw units.
    case magnetometer(Vector3)
}

/// Counters a decoder keeps about its input.
public struct DecoderCounters: Sendable, Equatable {
    /// Frames decoded.
    public var frames = 0
    /// Bytes skipped while looking for a frame start.
    public var skippedBytes = 0
    /// Frames whose checksum did not match.
    public var badChecksums = 0
    /// Lines or frames that could not be parsed.
    public var malformed = 0
    /// Creates zeroed counters.
    public init() {}
}

/// A streaming WitMotion decoder: feed any chunks, get frames.
public struct WitMotionDecoder {
    /// What was decoded and skipped so far.
    public private(set) var counters = DecoderCounters()
    private var buffer: [UInt8] = []
    private var acc: Vector3?
    private var gyro: Vector3?

    /// Creates a decoder.
    public init() {}

    static let accScale = 16.0 / 32768
    static let gyroScale = 2000.0 / 32768
    static let angleScale = 180.0 / 32768

    @inline(__always) static func int16(_ bytes: ArraySlice<UInt8>, _ offset: Int) -> Int16 {
        let start = bytes.startIndex + offset
        return Int16(bitPattern: UInt16(bytes[start]) | UInt16(bytes[start + 1]) << 8)
    }

    static func vector(_ bytes: ArraySlice<UInt8>, _ offset: Int, scale: Double) -> Vector3 {
        Vector3(Double(int16(bytes, offset)) * scale, Double(int16(bytes, offset + 2)) * scale, Double(int16(bytes, offset + 4)) * scale)
    }

    /// Decodes the frames completed by `chunk`.
    public mutating func feed(_ chunk: some Sequence<UInt8>) -> [WitMotionFrame] {
        buffer.append(contentsOf: chunk)
        var frames: [WitMotionFrame] = []
        var index = 0
        scan: while index < buffer.count {
            guard buffer[index] == 0x55 else {
                index += 1
                counters.skippedBytes += 1
                continue
            }
            guard index + 1 < buffer.count else { break }
            let type = buffer[index + 1]
            switch type {
            case 0x61, 0x71:
                guard index + 20 <= buffer.count else { break scan }
                let packet = buffer[index..<(index + 20)]
                if type == 0x61 {
                    frames.append(
                        .imu(
                            accG: Self.vector(packet, 2, scale: Self.accScale),
                            gyroDps: Self.vector(packet, 8, scale: Self.gyroScale),
                            angleDeg: Self.vector(packet, 14, scale: Self.angleScale)))
                } else {
                    frames.append(.registers(start: packet[packet.startIndex + 2], values: (0..<8).map { Self.int16(packet, 4 + 2 * $0) }))
                }
                counters.frames += 1
                index += 20
            case 0x50...0x5A:
                guard index + 11 <= buffer.count else { break scan }
                let frame = buffer[index..<(index + 11)]
                let sum = frame.prefix(10).reduce(UInt8(0), &+)
                guard sum == frame[frame.startIndex + 10] else {
                    counters.badChecksums += 1
                    index += 1  // resynchronise from the next byte
                    continue
                }
                counters.frames += 1
                index += 11
                switch type {
                case 0x51: acc = Self.vector(frame, 2, scale: Self.accScale)
                case 0x52: gyro = Self.vector(frame, 2, scale: Self.gyroScale)
                case 0x53:
                    // The angle frame closes a 51/52/53 round: one reading.
                    if let acc, let gyro {
                        frames.append(.imu(accG: acc, gyroDps: gyro, angleDeg: Self.vector(frame, 2, scale: Self.angleScale)))
                    }
                    acc = nil
                    gyro = nil
                case 0x54: frames.append(.magnetometer(Self.vector(frame, 2, scale: 1)))
                default: break  // time, quaternion, ...: valid but unused
                }
            default:
                index += 1
                counters.skippedBytes += 1
            }
        }
        buffer.removeFirst(index)
        // A stream of garbage never grows the buffer past one frame.
        if buffer.count > 64 {
            counters.skippedBytes += buffer.count - 20
            buffer.removeFirst(buffer.count - 20)
        }
        return frames
    }
}

/// A 128-bit UUID in the usual text form, stored big-endian.
public struct UUID128: Hashable, Sendable, CustomStringConvertible {
    /// The 16 bytes, most significant first (as written).
    public let bytes: [UInt8]

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    public init?(_ text: String) {
        let hex = text.filter { $0 != "-" }
        guard hex.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.bytes = bytes
    }

    /// From ATT's little-endian wire order.
    public init(littleEndian: some Collection<UInt8>) {
        bytes = Array(littleEndian.reversed())
    }

    /// A 16-bit SIG UUID on the Bluetooth base `0000xxxx-0000-1000-8000-00805f9b34fb`.
    public init(short: UInt16) {
        bytes = [0, 0, UInt8(short >> 8), UInt8(short & 0xFF), 0, 0, 0x10, 0, 0x80, 0, 0, 0x80, 0x5F, 0x9B, 0x34, 0xFB]
    }

    /// ATT's little-endian wire order.
    public var littleEndian: [UInt8] { bytes.reversed() }

    public var description: String {
        let hex = bytes.map { String($0, radix: 16).leftPadded(2) }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex[hex.index(hex.startIndex, offsetBy: range.lowerBound)..<hex.index(hex.startIndex, offsetBy: range.upperBound)])
        }
        return parts.joined(separator: "-")
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
