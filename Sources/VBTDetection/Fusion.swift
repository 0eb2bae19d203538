import Foundation

// The laser unit's accelerometer, fused with its distance readings.
//
// The Arduino laser unit sends `A:<ax>,<ay>,<az>` with every distance (the
// bus carries it as the reading's `acc_g`). Hung from the bar, that
// accelerometer feels the bar's acceleration, which the laser alone can only
// get by differentiating 2 mm of noise twice. A Kalman filter and
// Rauch-Tung-Striebel smoother over each rep's readings combines them: the
// accelerometer gives the velocity's shape sample by sample, the laser keeps
// position and velocity from drifting. The start and end of the concentric
// phase then come from the smoothed velocity, which is about ten times less
// noisy at the turning points than any fit of laser positions alone.
//
// Nothing is assumed about how the board is oriented: a bar moves vertically,
// so the magnitude of the measured vector is (1 g + the bar's acceleration),
// whatever way the board faces. Its 1 g is the median magnitude over the
// readings kept (a lift's accelerations average out), so raw counts or a
// board reporting in m/s^2 work too. A residual offset is a state of the
// filter. Whether the board rides the bar at all (it might sit on the floor)
// is checked per rep: the accelerometer must agree with the laser's own
// (noisy) acceleration, or the rep is measured from the laser alone.

/// Noise figures of the fusion (the defaults suit the Arduino unit of DOMAIN.md).
public struct FusionSettings: Sendable, Codable, Equatable {
    /// Standard deviation of a laser reading (DOMAIN.md: about 2 mm).
    public var laserNoiseM = 0.002
    /// Standard deviation of one accelerometer reading's vertical acceleration
    /// (0.01 g: a hobby MEMS part at 50 Hz, with room for a swinging board).
    public var accelerationNoiseMps2 = 0.1
    /// How fast the accelerometer's offset may wander, m/s^2 per square root of a second.
    public var offsetDriftMps2 = 0.05
    /// The accelerometer rides the bar when the slope of the laser's
    /// acceleration against it lies in this range (ideal 1).
    public var agreement: ClosedRange<Double> = 0.6...1.5
    /// Creates the defaults.
    public init() {}
}

/// One reading for the fusion: laser height and the accelerometer's vertical reading.
struct FusionReading: Sendable, Equatable {
    var t: Double
    var positionM: Double
    /// The accelerometer's vertical specific force (1 g at rest), in the board's units.
    var magnitude: Double
}

/// An accelerometer reading as the board sent it (any units).
struct BoardAcceleration: Sendable, Codable, Equatable {
    var x: Double, y: Double, z: Double
    var length: Double { (x * x + y * y + z * z).squareRoot() }
}

/// The board's "up" and its 1 g from its readings: the direction of their
/// sum (a lift's accelerations average out, gravity does not) and the median
/// of the readings' signed lengths along it.
struct BoardGravity: Sendable, Equatable {
    var up: BoardAcceleration
    var oneG: Double

    init?(_ readings: [BoardAcceleration]) {
        let sum = readings.reduce(BoardAcceleration(x: 0, y: 0, z: 0)) { BoardAcceleration(x: $0.x + $1.x, y: $0.y + $1.y, z: $0.z + $1.z) }
        let length = sum.length
        guard length.isNormal else { return nil }
        up = BoardAcceleration(x: sum.x / length, y: sum.y / length, z: sum.z / length)
        let sorted = readings.map(\.length).sorted()
        oneG = sorted[sorted.count / 2]
        guard oneG.isNormal else { return nil }
    }

    /// The vertical specific force of `reading`: its length, so a board that
    /// tilts or sways on its strap loses nothing, negative when it points
    /// down (the bar slowing faster than gravity, as fast reps do at the top).
    func vertical(_ reading: BoardAcceleration) -> Double {
        let along = reading.x * up.x + reading.y * up.y + reading.z * up.z
        return along < 0 ? -reading.length : reading.length
    }
}

/// Smooths `readings` (time order) into bar kinematics. `oneG` is the
/// board's reading at rest. Returns nil unless the accelerometer moves with
/// the bar (its acceleration explains the laser's).
///
/// The state is (position, velocity, offset, gain): the bar's acceleration is
/// gain x (reading / oneG - 1) x g - offset. An uncalibrated board's axes are
/// offset, which also puts its 1 g off by a few per cent; the gain takes that
/// up during the rep's large accelerations, the offset during its rests.
func fuse(_ readings: [FusionReading], oneG: Double, settings: FusionSettings) -> [KinematicSample]? {
    let count = readings.count
    guard count >= 10, oneG > 0 else { return nil }
    // A reading is taken as the mean over the period before it (sensors
    // average or low-pass filter before they are read), so it drives the
    // interval that ends at it.
    let input = readings.map { ($0.magnitude / oneG - 1) * standardGravity }
    guard input.allSatisfy(\.isFinite), readings.allSatisfy({ $0.positionM.isFinite && $0.t.isFinite }) else { return nil }
    guard ridesTheBar(readings, input: input, settings: settings) else { return nil }

    let r = settings.laserNoiseM * settings.laserNoiseM
    let qa = settings.accelerationNoiseMps2 * settings.accelerationNoiseMps2
    let qb = settings.offsetDriftMps2 * settings.offsetDriftMps2
    var filtered: [[Double]] = [], filteredP: [SmallMatrix] = []
    var predicted: [[Double]] = [], predictedP: [SmallMatrix] = []
    var transitions: [SmallMatrix] = []
    filtered.reserveCapacity(count); filteredP.reserveCapacity(count)
    predicted.reserveCapacity(count); predictedP.reserveCapacity(count); transitions.reserveCapacity(count)
    var x = [readings[0].positionM, 0, 0, 1]
    var p = SmallMatrix.diagonal([r, 1.0, 0.5 * 0.5, 0.1 * 0.1])
    for k in 0..<count {
        var f = SmallMatrix.identity(4)
        if k > 0 {
            let dt = max(1e-4, readings[k].t - readings[k - 1].t), u = input[k]
            f[0, 1] = dt; f[0, 2] = -dt * dt / 2; f[0, 3] = u * dt * dt / 2
            f[1, 2] = -dt; f[1, 3] = u * dt
            x = f * x
            // The reading's noise enters like an acceleration over the interval.
            let g = [dt * dt / 2, dt, 0, 0]
            p = f * p * f.transposed + SmallMatrix.outer(g, g) * (qa * x[3] * x[3]) + SmallMatrix.diagonal([0, 0, qb * dt, 0])
        }
        transitions.append(f)
        predicted.append(x)
        predictedP.append(p)
        // Laser update: a scalar measurement of the position.
        let s = p[0, 0] + r
        let column = (0..<4).map { p[$0, 0] }
        let innovation = readings[k].positionM - x[0]
        x = (0..<4).map { x[$0] + column[$0] / s * innovation }
        p = (p - SmallMatrix.outer(column, column) * (1 / s)).symmetrised
        filtered.append(x)
        filteredP.append(p)
    }
    // Backward pass (Rauch-Tung-Striebel).
    var smoothed = filtered
    for k in stride(from: count - 2, through: 0, by: -1) {
        guard let inverse = predictedP[k + 1].inverse else { continue }
        let c = filteredP[k] * transitions[k + 1].transposed * inverse
        let correction = c * zip(smoothed[k + 1], predicted[k + 1]).map { $0 - $1 }
        smoothed[k] = zip(filtered[k], correction).map { $0 + $1 }
    }
    return (0..<count).map { k in
        let state = smoothed[k]
        return KinematicSample(t: readings[k].t, positionM: state[0], velocityMps: state[1], accelerationMps2: state[3] * input[k] - state[2])
    }
}

/// Whether the accelerometer feels the bar's motion: the laser's acceleration
/// (twice differentiated, noisy but unbiased) regressed on the accelerometer's
/// has a slope near 1, and the movement is large enough to tell.
private func ridesTheBar(_ readings: [FusionReading], input: [Double], settings: FusionSettings) -> Bool {
    let laser = differentiate(times: readings.map(\.t), positions: readings.map(\.positionM), halfWidth: 2)
    // The same smoothing on the accelerometer, so both see the same band.
    var smoothedInput = [Double](repeating: 0, count: input.count)
    for k in input.indices {
        let window = input[max(0, k - 2)...min(input.count - 1, k + 2)]
        smoothedInput[k] = window.reduce(0, +) / Double(window.count)
    }
    let laserAcceleration = laser.map(\.accelerationMps2)
    let n = Double(input.count)
    let meanX = smoothedInput.reduce(0, +) / n, meanY = laserAcceleration.reduce(0, +) / n
    var sxx = 0.0, sxy = 0.0
    for (x, y) in zip(smoothedInput, laserAcceleration) {
        sxx += (x - meanX) * (x - meanX)
        sxy += (x - meanX) * (y - meanY)
    }
    // A board on the floor reads noise only: too little variation to regress on.
    let spread = (sxx / n).squareRoot()
    guard spread > 3 * settings.accelerationNoiseMps2 else { return false }
    return settings.agreement.contains(sxy / sxx)
}

// MARK: - Small dense matrices for the filter

/// An n x n matrix, row-major; n is 4 here, so plain loops are fast enough.
struct SmallMatrix: Equatable {
    let n: Int
    var values: [Double]

    init(n: Int, values: [Double]) { (self.n, self.values) = (n, values) }
    static func identity(_ n: Int) -> SmallMatrix { diagonal([Double](repeating: 1, count: n)) }
    static func diagonal(_ d: [Double]) -> SmallMatrix {
        var m = SmallMatrix(n: d.count, values: [Double](repeating: 0, count: d.count * d.count))
        for i in d.indices { m[i, i] = d[i] }
        return m
    }
    static func outer(_ u: [Double], _ v: [Double]) -> SmallMatrix {
        SmallMatrix(n: u.count, values: u.flatMap { a in v.map { a * $0 } })
    }

    subscript(row: Int, column: Int) -> Double {
        get { values[row * n + column] }
        set { values[row * n + column] = newValue }
    }

    var transposed: SmallMatrix {
        var t = self
        for i in 0..<n { for j in 0..<n { t[j, i] = self[i, j] } }
        return t
    }
    var symmetrised: SmallMatrix {
        var s = self
        for i in 0..<n { for j in 0..<n { s[i, j] = (self[i, j] + self[j, i]) / 2 } }
        return s
    }

    /// The inverse by Gauss-Jordan elimination with partial pivoting; nil when singular.
    var inverse: SmallMatrix? {
        var a = self, result = SmallMatrix.identity(n)
        for column in 0..<n {
            guard let pivot = (column..<n).max(by: { abs(a[$0, column]) < abs(a[$1, column]) }), abs(a[pivot, column]) > 1e-300 else {
                return nil
            }
            if pivot != column {
                for j in 0..<n {
                    a.values.swapAt(pivot * n + j, column * n + j)
                    result.values.swapAt(pivot * n + j, column * n + j)
                }
            }
            let scale = 1 / a[column, column]
            for j in 0..<n { a[column, j] *= scale; result[column, j] *= scale }
            for row in 0..<n where row != column {
                let factor = a[row, column]
                guard factor != 0 else { continue }
                for j in 0..<n { a[row, j] -= factor * a[column, j]; result[row, j] -= factor * result[column, j] }
            }
        }
        return result.values.allSatisfy(\.isFinite) ? result : nil
    }

    static func + (l: SmallMatrix, r: SmallMatrix) -> SmallMatrix { SmallMatrix(n: l.n, values: zip(l.values, r.values).map { $0 + $1 }) }
    static func - (l: SmallMatrix, r: SmallMatrix) -> SmallMatrix { SmallMatrix(n: l.n, values: zip(l.values, r.values).map { $0 - $1 }) }
    static func * (l: SmallMatrix, s: Double) -> SmallMatrix { SmallMatrix(n: l.n, values: l.values.map { $0 * s }) }
    static func * (l: SmallMatrix, r: SmallMatrix) -> SmallMatrix {
        var m = SmallMatrix(n: l.n, values: [Double](repeating: 0, count: l.n * l.n))
        for i in 0..<l.n {
            for k in 0..<l.n {
                let a = l[i, k]
                guard a != 0 else { continue }
                for j in 0..<l.n { m.values[i * l.n + j] += a * r[k, j] }
            }
        }
        return m
    }
    static func * (l: SmallMatrix, v: [Double]) -> [Double] {
        (0..<l.n).map { i in (0..<l.n).reduce(0) { $0 + l[i, $1] * v[$1] } }
    }
}
