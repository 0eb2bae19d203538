import Foundation
import Testing
import VBTSensors

@testable import VBTDetection

// `refineTurningPoint` fits each candidate turning point from prefix sums and a structured
// solve. These tests fit the same candidates the plain way, a pass over the readings and a
// general 4 x 4 elimination, and ask for the same fits and the same turning points.

/// A bar at rest from `turnT` on, at 0.4 m: leaving it upwards then (`up`, a rise's start), or
/// rising into it before (a rise's end), with the given acceleration; read at `hz` with
/// `noiseM` of noise (sd) and uneven timing.
private func trace(turnT: Double, up: Bool, accelerationMps2: Double, hz: Double, noiseM: Double, seed: UInt64) -> [KinematicSample] {
    var random = SeededGenerator(seed: seed)
    let restM = 0.4
    return (0..<Int(2 * hz)).map { index in
        let t = 1_000_000 + Double(index) / hz + 0.2 * Double.random(in: 0..<1, using: &random) / hz
        let d = max(0, up ? t - turnT : turnT - t)
        let moved = 0.5 * accelerationMps2 * d * d + 0.1 * accelerationMps2 * d * d * d
        return KinematicSample(
            t: t, positionM: restM + (up ? moved : -moved) + random.normal(sd: noiseM), velocityMps: 0, accelerationMps2: 0)
    }
}

/// The fit of one candidate the plain way: every reading's powers summed, the normal equations
/// solved by elimination; (p0, a, c, b) and the squared error, nil when singular.
private func plainFit(
    _ points: [KinematicSample], at candidate: Double, movingAfter: Bool, flat: Bool
) -> (
    x: SIMD4<Double>, error: Double
)? {
    var n = 0.0, y = 0.0, yy = 0.0
    var m2 = 0.0, m3 = 0.0, m4 = 0.0, m5 = 0.0, m6 = 0.0, my2 = 0.0, my3 = 0.0
    var o2 = 0.0, o4 = 0.0, oy2 = 0.0
    for point in points {
        let d = point.t - candidate, value = point.positionM
        n += 1; y += value; yy += value * value
        if movingAfter ? d > 0 : d < 0 {
            m2 += d * d; m3 += d * d * d; m4 += pow(d, 4); m5 += pow(d, 5); m6 += pow(d, 6)
            my2 += value * d * d; my3 += value * d * d * d
        } else {
            o2 += d * d; o4 += pow(d, 4); oy2 += value * d * d
        }
    }
    let a = SIMD16<Double>(n, m2, m3, flat ? 0 : o2, m2, m4, m5, 0, m3, m5, m6, 0, flat ? 0 : o2, 0, 0, flat ? 1 : o4)
    let b = SIMD4<Double>(y, my2, my3, flat ? 0 : oy2)
    guard let x = solveLinear(a, b) else { return nil }
    return (x, yy - (x[0] * b[0] + x[1] * b[1] + x[2] * b[2] + x[3] * b[3]))
}

@Suite struct TurningPointTests {
    /// Every candidate of a window fitted both ways, the other side bending and flat: the same
    /// p0, curve and squared error (to a part in a million of the error, far below what tells
    /// candidates apart). Candidates with fewer than 4 readings on the moving side are left out:
    /// three coefficients on so few readings are barely determined (condition numbers of 1e10),
    /// and each way rounds them differently.
    @Test(arguments: [(true, 50.0, UInt64(1)), (false, 50.0, UInt64(2)), (true, 20.0, UInt64(3)), (false, 200.0, UInt64(4))])
    func prefixSumsFitAsAPassOverTheReadings(up: Bool, hz: Double, seed: UInt64) throws {
        let turnT = 1_000_001.0
        let points = trace(turnT: turnT, up: up, accelerationMps2: 2, hz: hz, noiseM: 0.002, seed: seed)
            .filter { abs($0.t - turnT) <= 0.3 * 1.3 }
        let sums = TurningPointSums(points, around: turnT + 0.01)
        var compared = 0
        for k in -60...60 {
            let candidate = turnT + Double(k) * 0.005
            let (moving, other) = sums.sides(at: candidate, movingAfter: up)
            guard points.filter({ up ? $0.t > candidate : $0.t < candidate }).count >= 4 else { continue }
            for flat in [false, true] {
                let plain = plainFit(points, at: candidate, movingAfter: up, flat: flat)
                let summed = sums.solve(moving: moving, other: other, flatOtherSide: flat)
                guard let plain else { continue }
                let fit = try #require(summed, "candidate \(k), flat \(flat): no fit from the sums")
                #expect(abs(plain.x[0] - fit.p0) < 1e-9, "candidate \(k): p0 \(plain.x[0]) against \(fit.p0)")
                #expect(abs(plain.x[1] - fit.a) <= 1e-6 * abs(plain.x[1]) + 1e-9, "candidate \(k): a \(plain.x[1]) against \(fit.a)")
                #expect(abs(plain.x[2] - fit.c) <= 1e-6 * abs(plain.x[2]) + 1e-9, "candidate \(k): c \(plain.x[2]) against \(fit.c)")
                #expect(abs(plain.x[3] - fit.b) <= 1e-6 * abs(plain.x[3]) + 1e-9, "candidate \(k): b \(plain.x[3]) against \(fit.b)")
                #expect(abs(plain.error - fit.error) <= 1e-6 * abs(plain.error) + 1e-12, "candidate \(k): error \(plain.error) against \(fit.error)")
                compared += 1
            }
        }
        #expect(compared > 150)
    }

    /// The turning point found is where the bar left its rest, to within the noise's reach, for a
    /// start (the minimum of a rise) and for an end read upside down.
    @Test(arguments: [(true, UInt64(11)), (false, UInt64(12)), (true, UInt64(13)), (false, UInt64(14))])
    func findsWhereTheBarLeftItsRest(up: Bool, seed: UInt64) {
        let turnT = 1_000_001.0
        let points = trace(turnT: turnT, up: up, accelerationMps2: 3, hz: 50, noiseM: 0.001, seed: seed)
        let found = refineTurningPoint(points, near: turnT + 0.05, halfWindowS: 0.25, minimum: up)
        #expect(abs(found.t - turnT) < 0.03, "found \(found.t - turnT) s from the turn")
        #expect(abs(found.p - 0.4) < 0.003)
    }
}

@Suite("Turning points at 20 Hz")
struct SparseTurningPointTests {
    /// A fast short rep (250 mm in 0.25 s, the velocity an arch, 2 g at each end) read at 20 Hz:
    /// five readings in the rise. Its mean velocity comes within 0.03 m/s of the true 1 m/s
    /// wherever the readings fall against the rep (their ends used to fall on readings: up to
    /// 0.2 m/s off).
    @Test(arguments: [0.0, 0.01, 0.02, 0.03, 0.04])
    func fastShortRepAt20Hz(offsetS: Double) throws {
        let (startT, durationS, romM) = (1_000_001.0, 0.25, 0.25)
        let times = (0..<40).map { 1_000_000 + offsetS + Double($0) / 20 }
        let positions = times.map { t -> Double in
            let x = min(1, max(0, (t - startT) / durationS))
            return 0.4 + romM * (1 - cos(.pi * x)) / 2
        }
        let trace = differentiate(times: times, positions: positions, halfWidth: 2)
        let measured = try #require(measureConcentric(trace, valleyT: startT - 0.1, peakT: startT + durationS + 0.1, loadKg: nil))
        #expect(abs(measured.meanVelocityMps - romM / durationS) < 0.03, "mean velocity \(measured.meanVelocityMps) m/s")
        #expect(abs(measured.concentricStartT - startT) < 0.015 && abs(measured.concentricEndT - startT - durationS) < 0.015)
    }
}
