import Foundation
import Testing
import VBTSensors

@testable import VBTDetection

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
