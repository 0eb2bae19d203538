import Foundation
import Testing
import VBTSensors
import VBTWire

@testable import VBTDetection

@Suite("The board's gravity read from a window")
struct BoardGravityTests {
    @Test("the median by ranges is the value at the middle rank: spread, repeated, two values, one, with a NaN, an infinity, a span past the doubles")
    func median() {
        var random = SeededGenerator(seed: 92)
        var cases: [[Double]] = [
            [1], [2, 1], [1, 1, 1], [1, 2, 2, 2, 3], [1e-300, 2e-300, 3e-300], [1, .infinity, 2], [0.5, .nan, 1, 2], [-1e308, 1e308, 0],
        ]
        for count in [2, 5, 100, 1_001] {
            cases.append((0..<count).map { _ in Double.random(in: 0.9...1.1, using: &random) })
            cases.append((0..<count).map { _ in Double(Int.random(in: 0..<3, using: &random)) })
            // One far value: the rest share a range or two.
            cases.append((0..<count).map { _ in Double.random(in: 0.99...1.01, using: &random) } + [1e6])
        }
        for values in cases {
            var reordered = values
            let found = middleValue(&reordered)
            let expected = rankedValue(values, rank: values.count / 2)
            #expect(found == expected || (found.isNaN && expected.isNaN), "\(values.count) values")
            #expect(reordered.sorted { $0 < $1 || ($1.isNaN && !$0.isNaN) }.count == values.count)
        }
    }

    @Test("from a sum and lengths, the gravity its readings give, bit for bit")
    func fromSums() {
        var random = SeededGenerator(seed: 91)
        for (scale, noise) in [(1.0, 0.05), (16_384.0, 800.0), (1.0, 0.0)] {
            let readings = (0..<1_000).map { _ in
                let swing = Double.random(in: -1...1, using: &random) * noise
                return BoardAcceleration(x: 0.1 * scale + swing, y: -0.2 * scale, z: 0.97 * scale + swing * 3)
            }
            var sum = BoardAcceleration(x: 0, y: 0, z: 0)
            for reading in readings { sum = BoardAcceleration(x: sum.x + reading.x, y: sum.y + reading.y, z: sum.z + reading.z) }
            var lengths = readings.map { ($0.x * $0.x + $0.y * $0.y + $0.z * $0.z).squareRoot() }
            let gravity = BoardGravity(sum: sum, lengths: &lengths)
            #expect(gravity != nil)
            #expect(gravity == BoardGravity(readings), "board at scale \(scale)")
        }
    }

    @Test("a detector with the accelerometer, checkpointed mid-session, goes on as the uninterrupted one")
    func checkpointed() throws {
        var config = SimulationConfig()
        config.exercise = .squat
        config.loadKg = 100
        config.oneRepMaxKg = 140
        config.seed = 93
        config.sets = 2
        config.repsPerSet = 3
        config.restS = 20
        config.faults = .realWorld
        config.laserAccelerometer = true
        config.distanceRateHz = 50
        config.imuRateHz = 0
        var sensors = SimulatedSensors(config)
        let readings = sensors.distanceStream(wallOrigin: 1_763_812_345)
        #expect(readings.allSatisfy { $0.accG != nil })
        var whole = StationDetector(station: "rack-01")
        let expected = readings.flatMap { whole.feed(.distance([$0])) }
        #expect(expected.filter { if case .rep = $0 { true } else { false } }.count == 6)
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        for cut in stride(from: readings.count / 7, to: readings.count, by: readings.count / 7) {
            var first = StationDetector(station: "rack-01")
            var outputs = readings[..<cut].flatMap { first.feed(.distance([$0])) }
            var second = try decoder.decode(StationDetector.self, from: encoder.encode(first))
            outputs += readings[cut...].flatMap { second.feed(.distance([$0])) }
            #expect(outputs == expected, "cut after \(cut) readings")
        }
    }
}
