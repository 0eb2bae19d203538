import Foundation
import Testing
import VBTSensors

@testable import VBTDetection

/// Plain numbers, for the window's own tests: each is its own time, in microseconds.
extension Int: WindowElement {
    public var microseconds: Int64 { Int64(self) }
    public func stored(offset: Int32) -> Int32 { offset }
    public static func offset(of stored: Int32) -> Int32 { stored }
    public init(stored: Int32, microseconds: Int64) { self = Int(microseconds) }
}

@Suite("A station's reading window in chunks")
struct WindowTests {
    /// Random appends and front drops, checked against an array doing the same.
    @Test("holds what an array would, through appends and drops across chunk edges")
    func likeAnArray() {
        var random = SeededGenerator(seed: 17)
        var window = ChunkedWindow<Int>()
        var model: [Int] = []
        var next = 0
        for _ in 0..<3_000 {
            if Int.random(in: 0..<4, using: &random) > 0 || model.isEmpty {
                let batch = Int.random(in: 1...300, using: &random)
                let added = Array(next..<next + batch)
                next += batch
                if batch % 2 == 0 {
                    window.append(contentsOf: added)
                } else {
                    for element in added { window.append(element) }
                }
                model += added
            } else {
                let k = Int.random(in: 0...model.count, using: &random)
                window.removeFirst(k)
                model.removeFirst(k)
            }
            #expect(window.count == model.count)
            #expect(window.first == model.first && window.last == model.last)
        }
        #expect(Array(window) == model)
        #expect(window.filter { $0 % 3 == 0 } == model.filter { $0 % 3 == 0 })
        #expect(Array(window.reversed().prefix(200)) == Array(model.reversed().prefix(200)))
        window.removeFirst(window.count)
        #expect(window.isEmpty && Array(window) == [])
        window.append(7)
        #expect(Array(window) == [7])
    }

    @Test("a copy (a checkpoint's snapshot) keeps what it held while the original goes on")
    func copiesAreValues() {
        var window = ChunkedWindow(0..<1_000)
        let snapshot = window
        window.append(1_000)
        window.removeFirst(300)
        #expect(Array(snapshot) == Array(0..<1_000))
        #expect(Array(window) == Array(300...1_000))
    }

    @Test("is coded as the array of its elements, as the window was before")
    func codedAsArray() throws {
        var window = ChunkedWindow(0..<500)
        window.removeFirst(130)
        let encoded = try JSONEncoder().encode(window)
        #expect(encoded == (try JSONEncoder().encode(Array(130..<500))))
        #expect(Array(try JSONDecoder().decode(ChunkedWindow<Int>.self, from: encoded)) == Array(130..<500))
    }
}

@Suite("A window's readings kept small")
struct WindowStorageTests {
    /// Times near today's, 100 Hz with jitter: each is kept to the microsecond, and a window
    /// made again from what one holds (a checkpoint read back, a hand-over) holds the same bits.
    @Test("times are kept to the microsecond, and the same again after a checkpoint or a hand-over")
    func timesToTheMicrosecond() throws {
        var random = SeededGenerator(seed: 41)
        var heights = ChunkedWindow<IMUTracker.Height>()
        var points = ChunkedWindow<DistanceTracker.Point>()
        var sent: [(t: Double, m: Double)] = []
        var t = 1_795_865_317.123456
        for index in 0..<1_000 {
            t += 0.01 + Double.random(in: -0.002...0.002, using: &random)
            let m = Double.random(in: -0.5...2.5, using: &random)
            sent.append((t, m))
            heights.append(IMUTracker.Height(t: t, m: m))
            let acc = index % 3 == 0 ? nil : BoardAcceleration(x: 0.01, y: -0.02, z: Double.random(in: 0.9...1.1, using: &random))
            points.append(DistanceTracker.Point(t: t, m: m, acc: acc))
        }
        for (index, (t, m)) in sent.enumerated() {
            let height = heights[index], point = points[index]
            #expect(height.t == WindowTime.seconds(WindowTime.microseconds(t)))
            #expect(abs(height.t - t) <= 0.75e-6)
            #expect(height.m == Double(Float(m)))
            #expect(point.t == height.t && point.m == height.m)
            #expect((point.acc == nil) == (index % 3 == 0))
        }
        let again = try JSONDecoder().decode(ChunkedWindow<IMUTracker.Height>.self, from: JSONEncoder().encode(heights))
        #expect(again.map(\.t.bitPattern) == heights.map(\.t.bitPattern))
        #expect(again.map(\.m.bitPattern) == heights.map(\.m.bitPattern))
        let copied = ChunkedWindow(Array(points.dropFirst(300)))
        #expect(copied.map(\.t.bitPattern) == points.dropFirst(300).map(\.t.bitPattern))
        #expect(copied.map { $0.acc?.z } == points.dropFirst(300).map { $0.acc?.z })
    }

    /// A laser reading is 14 bytes in a window; its accelerometer comes back to the nearest half
    /// precision value (within 2^-11 of what was sent, any units up to 16-bit raw counts), its
    /// height and time as before, and a board beyond half precision's range reads as infinite.
    @Test("a laser reading is 14 bytes, its accelerometer in half precision")
    func laserReadingInFourteenBytes() {
        #expect(MemoryLayout<DistanceTracker.Point.Stored>.stride == 14)
        var random = SeededGenerator(seed: 43)
        var points = ChunkedWindow<DistanceTracker.Point>()
        var sent: [BoardAcceleration] = []
        for index in 0..<600 {
            let scale = [1.0, 9.81, 16_384.0][index % 3]  // g, m/s^2, a 16-bit part's raw counts
            let acc = BoardAcceleration(
                x: scale * Double.random(in: -2...2, using: &random), y: scale * Double.random(in: -2...2, using: &random),
                z: scale * Double.random(in: -2...2, using: &random))
            sent.append(acc)
            points.append(DistanceTracker.Point(t: 1_795_865_317 + Double(index) * 0.02, m: 1.25, acc: acc))
        }
        for (point, acc) in zip(points, sent) {
            let kept = point.acc!
            for (a, b) in [(kept.x, acc.x), (kept.y, acc.y), (kept.z, acc.z)] {
                #expect(a == Double(Float16(Float(b))))
                #expect(abs(a - b) <= abs(b) * 0x1p-11 + 0x1p-24)
            }
            #expect(point.m == Double(Float(1.25)))
        }
        points.append(DistanceTracker.Point(t: 1_795_865_330, m: 1, acc: BoardAcceleration(x: 0, y: 0, z: 70_000)))
        #expect(points.last!.acc!.z == .infinity)
    }

    /// Times are offsets from a base in 32 bits: an element further than that from it
    /// moves the base, and only the elements then too far behind are dropped.
    @Test("an element further from the base than 32 bits of microseconds moves it, dropping only what is then out of reach")
    func aFarElementMovesTheBase() {
        var window = ChunkedWindow([0, 1, 2])
        window.append(3_000_000_000)  // 50 minutes on: 0 to 2 are still in reach of the new base
        #expect(Array(window) == [0, 1, 2, 3_000_000_000])
        window.append(5_000_000_000)
        #expect(Array(window) == [3_000_000_000, 5_000_000_000])
        window.append(5_000_000_001)
        window.removeFirst(1)
        #expect(Array(window) == [5_000_000_000, 5_000_000_001])
        window.removeFirst(2)
        window.append(-7)  // an empty window takes any base
        #expect(Array(window) == [-7])
    }
}

@Suite("The lowest height since a time, kept up to date")
struct LowestHeightTests {
    /// Heights appended a few at a time (and old ones dropped, never past `after`), each look
    /// checked against reading back over everything after `after`, as it was done before.
    @Test("each look finds what reading back over every point after the time finds")
    func likeAScan() {
        var random = SeededGenerator(seed: 29)
        for _ in 0..<50 {
            var points = ChunkedWindow<IMUTracker.Height>()
            var t = 0.0
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                t += 0.02
                points.append(IMUTracker.Height(t: t, m: Double.random(in: 0...1, using: &random)))
            }
            let after = t - Double.random(in: 0...0.5, using: &random)
            var lowest = LowestHeight(after: after)
            for _ in 0..<60 {
                for _ in 0..<Int.random(in: 0...5, using: &random) {
                    t += 0.02
                    points.append(IMUTracker.Height(t: t, m: Double.random(in: -1...2, using: &random)))
                }
                let drop = points.firstIndex { $0.t > after - 0.1 } ?? 0
                if Bool.random(using: &random) { points.removeFirst(drop) }
                let scanned = points.filter { $0.t > after }.map(\.m).min()
                #expect(lowest.update(points) == scanned)
            }
        }
    }
}

@Suite("The median of a board's readings")
struct RankedValueTests {
    @Test("the value at a rank is the sorted values' at it: every rank, with repeats, one value, already sorted or reversed")
    func ranks() {
        var random = SeededGenerator(seed: 65)
        var cases: [[Double]] = [[1], [2, 1], [1, 1, 1], Array(0..<50).map(Double.init), Array((0..<50).reversed()).map(Double.init)]
        for count in [3, 10, 101, 1_000] {
            cases.append((0..<count).map { _ in Double.random(in: 0.9...1.1, using: &random) })
            // Few distinct values: most of each round is the middle part.
            cases.append((0..<count).map { _ in Double(Int.random(in: 0..<4, using: &random)) })
        }
        for values in cases {
            let sorted = values.sorted()
            for rank in values.indices { #expect(rankedValue(values, rank: rank) == sorted[rank], "\(values.count) values, rank \(rank)") }
        }
    }

    @Test("a NaN among the values still ends the search on one of them")
    func unordered() {
        let values = [1, .nan, 3, 2, .nan, 0.5]
        for rank in values.indices {
            let found = rankedValue(values, rank: rank)
            #expect(values.contains { $0 == found || ($0.isNaN && found.isNaN) })
        }
    }
}
