import Testing
import VBTBus
import VBTWire

@testable import VBTSensors

/// Builds device byte vectors from the protocol facts (WitMotion's published protocol for the WT901 series).
enum Bytes {
    static func le(_ value: Int16) -> [UInt8] {
        let bits = UInt16(bitPattern: value)
        return [UInt8(bits & 0xFF), UInt8(bits >> 8)]
    }

    /// A BLE/USB `55 61` packet from 9 raw int16 values.
    static func packet61(_ raw: [Int16]) -> [UInt8] {
        precondition(raw.count == 9)
        return [0x55, 0x61] + raw.flatMap(le)
    }

    /// A `55 71` register reply.
    static func packet71(register: UInt8, _ raw: [Int16]) -> [UInt8] {
        [0x55, 0x71, register, 0x00] + raw.flatMap(le)
    }

    /// An 11-byte serial frame with its checksum.
    static func serialFrame(_ type: UInt8, _ raw: [Int16]) -> [UInt8] {
        precondition(raw.count == 4)
        let body: [UInt8] = [0x55, type] + raw.flatMap(le)
        return body + [body.reduce(0, &+)]
    }
}

@Suite("WitMotion decoder")
struct WitMotionDecoderTests {
    @Test("55 61: scales, negative values and full scale")
    func packet61() {
        var decoder = WitMotionDecoder()
        let raw: [Int16] = [32767, -32768, 2048, -1, 0, 16384, -16384, 32767, -32768]
        let frames = decoder.feed(Bytes.packet61(raw))
        #expect(frames.count == 1)
        guard case .imu(let acc, let gyro, let angle)? = frames.first else { Issue.record("no imu frame"); return }
        #expect(acc == Vector3(32767.0 / 32768 * 16, -16, 1))
        #expect(gyro == Vector3(-2000.0 / 32768, 0, 1000))
        #expect(angle == Vector3(-90, 32767.0 / 32768 * 180, -180))
    }

    @Test("55 71: register reply (rate code and battery)")
    func packet71() {
        var decoder = WitMotionDecoder()
        let frames = decoder.feed(Bytes.packet71(register: 0x03, [0x09, 0, 0, 0, 0, 0, 0, -5]))
        #expect(frames == [.registers(start: 0x03, values: [9, 0, 0, 0, 0, 0, 0, -5])])
        #expect(WitMotion.batteryPercent(centivolts: 410) == 100)
        #expect(WitMotion.batteryPercent(centivolts: 375) == 50)
        #expect(WitMotion.batteryPercent(centivolts: 300) == 0)
    }

    @Test("serial 51/52/53 frames make one reading; 54 is the magnetometer")
    func serialFrames() {
        var decoder = WitMotionDecoder()
        let bytes =
            Bytes.serialFrame(0x51, [16384, -16384, 2048, 2500]) + Bytes.serialFrame(0x52, [-32768, 0, 32767, 0])
            + Bytes.serialFrame(0x53, [8192, -8192, 0, 0x1234]) + Bytes.serialFrame(0x54, [100, -200, 300, 0])
        let frames = decoder.feed(bytes)
        #expect(
            frames == [
                .imu(accG: Vector3(8, -8, 1), gyroDps: Vector3(-2000, 0, 32767.0 / 32768 * 2000), angleDeg: Vector3(45, -45, 0)),
                .magnetometer(Vector3(100, -200, 300)),
            ])
        #expect(decoder.counters.frames == 4)
    }

    @Test("resynchronises after garbage, split chunks and bad checksums, counting them")
    func resync() {
        var decoder = WitMotionDecoder()
        let good = Bytes.packet61([1, 2, 3, 4, 5, 6, 7, 8, 9])
        var badChecksum = Bytes.serialFrame(0x51, [1, 1, 1, 1])
        badChecksum[10] &+= 1
        let stream = [0x00, 0x13, 0x55, 0x00] + good + badChecksum + good
        var frames: [WitMotionFrame] = []
        // Byte by byte: every frame split across chunks.
        for byte in stream { frames += decoder.feed([byte]) }
        #expect(frames.count == 2)
        #expect(decoder.counters.badChecksums == 1)
        #expect(decoder.counters.skippedBytes >= 4)
    }

    @Test("fuzz: random bytes never crash or hang, and memory stays bounded")
    func fuzz() {
        var generator = SeededGenerator(seed: 42)
        var decoder = WitMotionDecoder()
        var total = 0
        for _ in 0..<2_000 {
            let length = Int.random(in: 0...64, using: &generator)
            // Bias towards the header bytes so frame paths are exercised.
            let chunk = (0..<length).map { _ -> UInt8 in
                switch Int.random(in: 0..<10, using: &generator) {
                case 0: 0x55
                case 1: [0x61, 0x71, 0x51, 0x52, 0x53][Int.random(in: 0..<5, using: &generator)]
                default: UInt8.random(in: 0...255, using: &generator)
                }
            }
            total += chunk.count
            _ = decoder.feed(chunk)
        }
        let counters = decoder.counters
        #expect(counters.frames + counters.skippedBytes + counters.badChecksums > 0)
        #expect(counters.skippedBytes <= total)
        // A valid packet after the noise still decodes.
        let frames = decoder.feed(Bytes.packet61([0, 0, 2048, 0, 0, 0, 0, 0, 0]) + Bytes.packet61([0, 0, 2048, 0, 0, 0, 0, 0, 0]))
        #expect(frames.contains(.imu(accG: Vector3(0, 0, 1), gyroDps: Vector3(0, 0, 0), angleDeg: Vector3(0, 0, 0))))
    }
}

@Suite("Line decoders")
struct LineDecoderTests {
    @Test("Arduino distance lines, with and without state and acceleration")
    func arduino() {
        var decoder = ArduinoDistanceDecoder()
        let readings = decoder.feed(Array("D:523,S:IDLE,A:0.01,-0.02,0.98\r\nD:135.5,S:CONCENTRIC\nD:2000\n".utf8))
        #expect(
            readings == [
                .init(distanceMm: 523, state: .idle, accG: Vector3(0.01, -0.02, 0.98)),
                .init(distanceMm: 135.5, state: .concentric, accG: nil),
                .init(distanceMm: 2000, state: nil, accG: nil),
            ])
    }

    @Test(
        "bad Arduino lines are counted and skipped",
        arguments: [
            "D:abc", "S:IDLE", "D:12,S:UP", "D:12,A:1,2", "D:-5", "D:9999", "X:1", "D:1,D:2", "D:1,A:1,2,x", "\u{01}D:5",
        ])
    func arduinoBad(line: String) {
        var decoder = ArduinoDistanceDecoder()
        let readings = decoder.feed(Array((line + "\nD:500\n").utf8))
        #expect(readings == [.init(distanceMm: 500, state: nil, accG: nil)])
        #expect(decoder.counters.malformed == 1)
    }

    @Test("posture JSON lines are reassembled across 20-byte notifications")
    func postureReassembly() {
        var decoder = PostureLineDecoder()
        let text = #"{"acc":[0.01,-0.5,9.81],"mag":[-40.5,12,7]}"# + "\n" + #"{"acc":[1,2,3],"mag":[4,5,6]}"# + "\n"
        let bytes = Array(text.utf8)
        var readings: [(acc: Vector3, mag: Vector3)] = []
        for start in stride(from: 0, to: bytes.count, by: 20) {
            readings += decoder.feed(bytes[start..<min(start + 20, bytes.count)])
        }
        #expect(readings.count == 2)
        #expect(readings.first?.acc == Vector3(0.01, -0.5, 9.81))
        #expect(readings.last?.mag == Vector3(4, 5, 6))
    }

    @Test("posture: broken lines, NaN-free checks and overlong lines are counted")
    func postureBad() {
        var decoder = PostureLineDecoder()
        let junk =
            #"{"acc":[1,2],"mag":[1,2,3]}"# + "\n" + "not json\n" + String(repeating: "x", count: 5000) + "\n"
            + #"{"acc":[1,2,3],"mag":[4,5,6]}"# + "\n"
        let readings = decoder.feed(Array(junk.utf8))
        #expect(readings.count == 1)
        #expect(decoder.counters.malformed == 3)
    }

    @Test("fuzz: line decoders survive random bytes")
    func fuzzLines() {
        var generator = SeededGenerator(seed: 7)
        var distance = ArduinoDistanceDecoder()
        var posture = PostureLineDecoder()
        let alphabet = Array("D:S,A.0123456789-\n{}[]\"accmag:IDLEX".utf8) + [0, 0xFF, 0x0D]
        for _ in 0..<2_000 {
            let chunk = (0..<Int.random(in: 0...80, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            _ = distance.feed(chunk)
            _ = posture.feed(chunk)
        }
        #expect(distance.feed(Array("\nD:321\n".utf8)).last?.distanceMm == 321)
        #expect(distance.counters.malformed > 0)
    }
}

@Suite("Reading times")
struct StamperTests {
    @Test("many readings of one serial chunk get distinct, increasing times as the wire prints them (6 decimals)")
    func distinctOnTheWire() {
        var stamper = MonotonicStamper()
        let now = 1_763_812_345.123_456_7
        let printed = (0..<2_000).map { _ -> Int64 in Int64((stamper.stamp(now) * 1e6).rounded()) }
        #expect(printed.first == 1_763_812_345_123_457)
        #expect(zip(printed, printed.dropFirst()).allSatisfy { $1 == $0 + 1 }, "one microsecond apart")
        // A later clock reading that is already behind the stamps keeps counting on.
        #expect(Int64((stamper.stamp(now + 0.001) * 1e6).rounded()) == printed.last! + 1)
        #expect(Int64((stamper.stamp(now + 0.01) * 1e6).rounded()) == 1_763_812_345_133_457)
    }
}
