import Foundation
import Testing
import VBTSensors
import VBTWire

@testable import VBTDetection

@Suite("The board's gravity kept as readings enter and leave")
struct GravityTallyTests {
    /// An accelerometer reading as a window keeps it: each axis in half precision.
    static func half(_ x: Double, _ y: Double, _ z: Double) -> BoardAcceleration {
        BoardAcceleration(x: Double(Float(Float16(Float(x)))), y: Double(Float(Float16(Float(y)))), z: Double(Float(Float16(Float(z)))))
    }

    @Test("the tally's gravity is BoardGravity's of the same readings, bit for bit, through readings entering and leaving")
    func sameAsBoardGravity() {
        var random = SeededGenerator(seed: 91)
        // A board in g, one in raw counts (16,384 a g), one whose readings take a few values only.
        let boards: [(scale: Double, noise: Double)] = [(1, 0.05), (16_384, 800), (1, 0)]
        for board in boards {
            var tally = GravityTally()
            var model: [BoardAcceleration] = []
            for step in 0..<3_000 {
                if model.count < 1_000 || Bool.random(using: &random) {
                    let swing = Double.random(in: -1...1, using: &random) * board.noise
                    let reading = Self.half(0.1 * board.scale + swing, -0.2 * board.scale, 0.97 * board.scale + swing * 3)
                    tally.add(reading)
                    model.append(reading)
                } else {
                    tally.remove(model.removeFirst())
                }
                guard step % 97 == 0 else { continue }
                let exact = tally.exact
                #expect(exact != nil)
                #expect(exact?.gravity == BoardGravity(model), "board at scale \(board.scale), \(model.count) readings")
            }
        }
    }

    @Test("a reading beyond half precision (not a window's) leaves it to the window until it has left")
    func inexact() {
        var tally = GravityTally()
        let readings = [Self.half(0, 0, 1), BoardAcceleration(x: 0.1, y: 0, z: 1), Self.half(0.01, 0, 1.01)]
        for reading in readings { tally.add(reading) }
        #expect(tally.exact == nil)
        tally.remove(readings[0])
        tally.remove(readings[1])
        #expect(tally.exact?.gravity == BoardGravity([readings[2]]))
        tally.add(BoardAcceleration(x: .infinity, y: 0, z: 1))
        #expect(tally.exact == nil)
        var empty = GravityTally()
        #expect(empty.exact?.gravity == nil && empty.exact != nil)
        empty.add(BoardAcceleration(x: 0, y: 0, z: 0))
        #expect(empty.exact != nil && empty.exact?.gravity == nil, "no direction: no gravity, as BoardGravity finds")
    }

    @Test("the median by ranges is the value at the middle rank: spread, repeated, two values, one")
    func median() {
        var random = SeededGenerator(seed: 92)
        var cases: [[Double]] = [[1], [2, 1], [1, 1, 1], [1, 2, 2, 2, 3], [1e-300, 2e-300, 3e-300]]
        for count in [2, 5, 100, 1_001] {
            cases.append((0..<count).map { _ in Double.random(in: 0.9...1.1, using: &random) })
            cases.append((0..<count).map { _ in Double(Int.random(in: 0..<3, using: &random)) })
            // One far value: the rest share a range or two.
            cases.append((0..<count).map { _ in Double.random(in: 0.99...1.01, using: &random) } + [1e6])
        }
        for values in cases {
            let found = values.withUnsafeBufferPointer { GravityTally.median($0) }
            #expect(found == values.sorted()[values.count / 2], "\(values.count) values")
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
