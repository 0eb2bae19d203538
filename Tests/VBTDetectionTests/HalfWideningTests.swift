import Testing

@testable import VBTDetection

@Suite("A window's half-precision accelerometer widened without a library call")
struct HalfWideningTests {
    @Test("every one of the 65,536 halves widens to Float(half): zeros, subnormals, normals, infinities, NaN")
    func everyHalf() {
        var mismatches: [UInt16] = []
        for bits in 0...UInt16.max {
            let half = Float16(bitPattern: bits)
            let expected = Float(half), widened = DistanceTracker.Point.widened(half)
            let same = expected.isNaN ? widened.isNaN : widened.bitPattern == expected.bitPattern
            if !same { mismatches.append(bits) }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
    }
}
