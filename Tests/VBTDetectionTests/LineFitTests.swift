import Testing
import VBTSensors

@testable import VBTDetection

/// The least-squares line read by index must be the sequence's fit to the last bit: the rep
/// detector's traces (`differentiate`) are fitted the first way, everything else the second.
@Suite("Line fits")
struct LineFitTests {
    private func expectSame(_ a: LineFit, _ b: LineFit, _ what: String) {
        for (name, x, y) in [
            ("count", a.count, b.count), ("meanX", a.meanX, b.meanX), ("meanY", a.meanY, b.meanY),
            ("sxx", a.sxx, b.sxx), ("sxy", a.sxy, b.sxy), ("syy", a.syy, b.syy),
        ] {
            #expect(x.bitPattern == y.bitPattern, "\(what): \(name) \(x) against \(y)")
        }
    }

    @Test("by index it is the sequence's fit, bit for bit: noisy traces, unequal lengths, one point, none")
    func byIndex() {
        var random = SeededGenerator(seed: 23)
        for trial in 0..<500 {
            let count = Int.random(in: 0...40, using: &random)
            let start = 1_795_910_514.0 + Double.random(in: 0..<100, using: &random)
            let times = (0..<count).map { start + Double($0) * 0.02 + Double.random(in: -0.001...0.001, using: &random) }
            // Sometimes more or fewer heights than times: both fits take the pairs there are.
            let heights = (0..<max(0, count + Int.random(in: -2...2, using: &random))).map { _ in Double.random(in: 0.2...1.4, using: &random) }
            let byIndex = times.withUnsafeBufferPointer { t in heights.withUnsafeBufferPointer { y in LineFit(t, y) } }
            expectSame(byIndex, LineFit(zip(times, heights)), "trial \(trial), \(times.count) times, \(heights.count) heights")
            if times.count >= 2, heights.count >= 2 {
                let low = Int.random(in: 0..<min(times.count, heights.count) - 1, using: &random)
                let slice = (times[low...], heights[low...])
                #expect(regressionSlope(slice.0, slice.1).bitPattern == LineFit(zip(slice.0, slice.1)).slope.bitPattern)
            }
        }
        // Times that do not vary: no slope, as before.
        let flat = [5.0, 5.0, 5.0]
        #expect(regressionSlope(flat[...], [1.0, 2.0, 3.0][...]) == 0)
    }
}
