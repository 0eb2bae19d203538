import Foundation
import VBTBus
import VBTWire

// Posture calibration and evaluation (README, "posture-evaluator"): each of
// the wearable's two sensors (accelerometer, magnetometer) is modelled as a
// 3-D normal distribution fitted to the athlete sitting or standing well; a
// reading is "correct" for a sensor when its density under that model reaches
// the sensor's threshold, and the posture is correct when either sensor says
// so. The numerics are guarded as the seed guards them: huge differences,
// extreme exponents, NaN and infinities never reach the bus.

/// One sensor's calibration: the fitted normal distribution and its threshold.
public struct SensorCalibration: Sendable, Codable, Equatable {
    /// Mean vector.
    public var mean: [Double]
    /// Covariance matrix (divided by N - 1), row-major 3x3.
    public var covariance: [[Double]]
    public var determinant: Double
    /// Inverse of the covariance.
    public var inverse: [[Double]]
    /// Eigenvalues of the covariance, largest first.
    public var eigenvalues: [Double]
    /// Square roots of the eigenvalues (the spread along the principal axes), largest first.
    public var sigma: [Double]
    /// density(mean + k x sigma), k = `sigmaFactor`: readings at least this likely are "correct".
    public var threshold: Double
    /// Whether this came from the data (false: the default, see `reason`).
    public var fromData: Bool
    /// Why the default was used, when it was.
    public var reason: String?
    /// Readings it was computed from.
    public var samples: Int

    /// The seed's "adjustedSigma": the threshold sits at mean + k x sigma. With
    /// k = 1 a reading sits at Mahalanobis distance sqrt(3) and about half of
    /// a well-held posture's own readings fall below it; k = 2 (distance
    /// sqrt(12)) leaves under 1 % per sensor, and the two sensors are OR-ed.
    public static let sigmaFactor = 2.0

    /// Fewest readings a calibration is computed from (a 3x3 covariance needs 4).
    public static let minimumSamples = 4

    /// The fallback when the data cannot be trusted: unit covariance around
    /// the data's mean (or the origin), threshold three standard deviations
    /// out, so posture is judged loosely rather than not at all.
    public static func fallback(mean: [Double]?, samples: Int, reason: String) -> SensorCalibration {
        let centre = mean.flatMap { $0.allSatisfy(\.isFinite) && $0.allSatisfy { abs($0) < 1e6 } ? $0 : nil } ?? [0, 0, 0]
        let identity: [[Double]] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        var calibration = SensorCalibration(
            mean: centre, covariance: identity, determinant: 1, inverse: identity, eigenvalues: [1, 1, 1], sigma: [1, 1, 1],
            threshold: 0, fromData: false, reason: reason, samples: samples)
        calibration.threshold = calibration.density(centre.map { $0 + 3 })
        return calibration
    }

    /// Fits a calibration to readings; falls back (saying why) on data that cannot be trusted.
    public static func fit(_ readings: [Vector3]) -> SensorCalibration {
        let n = readings.count
        guard n >= minimumSamples else {
            return fallback(mean: nil, samples: n, reason: "only \(n) readings; at least \(minimumSamples) are needed")
        }
        let points = readings.map { [$0.x, $0.y, $0.z] }
        guard points.allSatisfy({ $0.allSatisfy(\.isFinite) }) else {
            return fallback(mean: nil, samples: n, reason: "readings contain NaN or infinite values")
        }
        var mean = [0.0, 0, 0]
        for point in points { for i in 0..<3 { mean[i] += point[i] } }
        mean = mean.map { $0 / Double(n) }
        var covariance = [[Double]](repeating: [0, 0, 0], count: 3)
        for point in points {
            let d = (0..<3).map { point[$0] - mean[$0] }
            for j in 0..<3 { for k in 0..<3 { covariance[j][k] += d[j] * d[k] } }
        }
        covariance = covariance.map { $0.map { $0 / Double(n - 1) } }
        guard covariance.allSatisfy({ $0.allSatisfy(\.isFinite) }),
            (0..<3).allSatisfy({ j in (0..<3).allSatisfy { k in abs(covariance[j][k] - covariance[k][j]) <= 1e-12 * max(1, abs(covariance[j][k])) } })
        else {
            return fallback(mean: mean, samples: n, reason: "the covariance matrix is not finite and symmetric")
        }
        // Determinant and inverse by LU decomposition with partial pivoting (as
        // LAPACK does): the cofactor formulas lose digits to cancellation on
        // ill-conditioned data.
        let (det, inverse) = luDeterminantAndInverse(covariance)
        guard det > 0, det.isFinite else {
            return fallback(
                mean: mean, samples: n, reason: "the readings do not spread in all three axes (determinant \(det)); hold still but not rigid, and recalibrate")
        }
        guard inverse.allSatisfy({ $0.allSatisfy(\.isFinite) }) else {
            return fallback(mean: mean, samples: n, reason: "the covariance matrix cannot be inverted")
        }
        let eigenvalues = symmetricEigenvalues(covariance)
        guard eigenvalues.allSatisfy({ $0 > 0 && $0.isFinite }) else {
            return fallback(mean: mean, samples: n, reason: "the covariance matrix is not positive definite")
        }
        let sigma = eigenvalues.map { $0.squareRoot() }
        var calibration = SensorCalibration(
            mean: mean, covariance: covariance, determinant: det, inverse: inverse, eigenvalues: eigenvalues, sigma: sigma,
            threshold: 0, fromData: true, reason: nil, samples: n)
        calibration.threshold = calibration.density(zip(mean, sigma).map { $0 + sigmaFactor * $1 })
        return calibration
    }

    /// The normal density at `x`: (2 pi)^(-3/2) det^(-1/2) exp(-1/2 (x-mu)' inv (x-mu)),
    /// guarded: non-finite input or a difference beyond 1e6 gives 1e-10; an
    /// exponent below -100 gives 1e-50; never NaN or infinite.
    public func density(_ x: [Double]) -> Double {
        guard x.count == 3, x.allSatisfy(\.isFinite), determinant > 0, determinant.isFinite else { return 1e-10 }
        let d = (0..<3).map { x[$0] - mean[$0] }
        guard d.allSatisfy({ abs($0) <= 1e6 }) else { return 1e-10 }
        var exponent = 0.0
        for i in 0..<3 {
            var row = 0.0
            for j in 0..<3 { row += inverse[i][j] * d[j] }
            exponent += d[i] * row
        }
        exponent *= -0.5
        guard exponent.isFinite else { return 1e-10 }
        if exponent < -100 { return 1e-50 }
        let value = pow(2 * Double.pi, -1.5) / determinant.squareRoot() * exp(min(exponent, 100))
        return value.isFinite ? value : 1e-10
    }
}

/// Determinant and inverse of a 3x3 matrix by LU decomposition with partial
/// pivoting; a singular matrix gives determinant 0 and a non-finite inverse.
public func luDeterminantAndInverse(_ matrix: [[Double]]) -> (determinant: Double, inverse: [[Double]]) {
    var lu = matrix
    var permutation = [0, 1, 2]
    var sign = 1.0
    for column in 0..<3 {
        var pivot = column
        for row in (column + 1)..<3 where abs(lu[row][column]) > abs(lu[pivot][column]) { pivot = row }
        if pivot != column {
            lu.swapAt(pivot, column)
            permutation.swapAt(pivot, column)
            sign = -sign
        }
        guard lu[column][column] != 0 else { return (0, [[.nan, .nan, .nan], [.nan, .nan, .nan], [.nan, .nan, .nan]]) }
        for row in (column + 1)..<3 {
            lu[row][column] /= lu[column][column]
            for k in (column + 1)..<3 { lu[row][k] -= lu[row][column] * lu[column][k] }
        }
    }
    let determinant = sign * lu[0][0] * lu[1][1] * lu[2][2]
    var inverse = [[Double]](repeating: [0, 0, 0], count: 3)
    for column in 0..<3 {
        // Solve L U x = P e_column.
        var y = (0..<3).map { permutation[$0] == column ? 1.0 : 0.0 }
        for row in 0..<3 { for k in 0..<row { y[row] -= lu[row][k] * y[k] } }
        for row in stride(from: 2, through: 0, by: -1) {
            for k in (row + 1)..<3 { y[row] -= lu[row][k] * y[k] }
            y[row] /= lu[row][row]
        }
        for row in 0..<3 { inverse[row][column] = y[row] }
    }
    return (determinant, inverse)
}

/// Eigenvalues of a symmetric 3x3 matrix by cyclic Jacobi rotations, largest first.
public func symmetricEigenvalues(_ matrix: [[Double]]) -> [Double] {
    var a = matrix
    for _ in 0..<100 {
        // The largest off-diagonal element.
        var p = 0, q = 1
        for (i, j) in [(0, 1), (0, 2), (1, 2)] where abs(a[i][j]) > abs(a[p][q]) { (p, q) = (i, j) }
        let scale = abs(a[0][0]) + abs(a[1][1]) + abs(a[2][2])
        if abs(a[p][q]) <= 1e-300 || abs(a[p][q]) <= 1e-17 * scale { break }
        let theta = (a[q][q] - a[p][p]) / (2 * a[p][q])
        let t = (theta >= 0 ? 1.0 : -1.0) / (abs(theta) + (theta * theta + 1).squareRoot())
        let c = 1 / (t * t + 1).squareRoot(), s = t * c
        var b = a
        for k in 0..<3 {
            b[k][p] = c * a[k][p] - s * a[k][q]
            b[k][q] = s * a[k][p] + c * a[k][q]
        }
        a = b
        for k in 0..<3 {
            b[p][k] = c * a[p][k] - s * a[q][k]
            b[q][k] = s * a[p][k] + c * a[q][k]
        }
        a = b
    }
    return [a[0][0], a[1][1], a[2][2]].sorted(by: >)
}

/// Both sensors' calibrations for one athlete.
public struct PostureCalibration: Sendable, Codable, Equatable {
    public var athlete: String
    public var acc: SensorCalibration
    public var mag: SensorCalibration
    /// Reading time it was made.
    public var createdT: Double

    /// Fits both sensors.
    public static func fit(athlete: String, acc: [Vector3], mag: [Vector3], at t: Double) -> PostureCalibration {
        PostureCalibration(athlete: athlete, acc: .fit(acc), mag: .fit(mag), createdT: t)
    }

    /// Evaluates one reading: (correct, acc density, mag density).
    public func evaluate(acc: Vector3, mag: Vector3) -> (correct: Bool, accDensity: Double, magDensity: Double) {
        let accDensity = self.acc.density([acc.x, acc.y, acc.z])
        let magDensity = self.mag.density([mag.x, mag.y, mag.z])
        return (accDensity >= self.acc.threshold || magDensity >= self.mag.threshold, accDensity, magDensity)
    }
}
