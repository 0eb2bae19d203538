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
// phase then come from the smoothed velocity: on the simulator's reps within
// about 2 ms, where a fit of the laser's positions alone finds each turning
// point to about 5 ms (sd).
//
// Nothing is assumed about how the board is oriented: a bar moves vertically,
// so the length of the measured vector is (1 g + the bar's acceleration),
// whatever way the board faces (signed by the board's "up": see
// BoardGravity). Its 1 g is the median length over the readings kept, so raw
// counts or a board reporting in m/s^2 work too. A residual offset and gain
// are states of the filter. Whether the board rides the bar at all (it might sit on the floor)
// is checked per rep: the accelerometer must agree with the laser's own
// (noisy) acceleration, or the rep is measured from the laser alone.

/// Noise figures of the fusion (the defaults suit an Arduino laser unit with about 2 mm of noise).
struct FusionSettings: Sendable, Equatable {
    /// Standard deviation of a laser reading (about 2 mm for a time-of-flight laser at lifting distances).
    var laserNoiseM = 0.002
    /// Standard deviation of one accelerometer reading's vertical acceleration
    /// (0.01 g: a hobby MEMS part at 50 Hz, with room for a swinging board).
    var accelerationNoiseMps2 = 0.1
    /// How fast the accelerometer's offset may wander, m/s^2 per square root of a second.
    var offsetDriftMps2 = 0.05
    /// The accelerometer rides the bar when the slope of the laser's
    /// acceleration against it lies in this range (ideal 1).
    var agreement: ClosedRange<Double> = 0.6...1.5
}

/// One reading for the fusion: laser height and the accelerometer's vertical reading.
struct FusionReading: Sendable, Equatable {
    var t: Double
    var positionM: Double
    /// The accelerometer's vertical specific force (1 g at rest), in the board's units.
    var vertical: Double
}

/// An accelerometer reading as the board sent it (any units).
struct BoardAcceleration: Sendable, Codable, Equatable {
    var x: Double, y: Double, z: Double
    var length: Double { (x * x + y * y + z * z).squareRoot() }
}

/// The board's "up" and its 1 g from its readings: the direction of their
/// sum (a lift's accelerations average out, gravity does not) and the median
/// of their lengths.
struct BoardGravity: Sendable, Codable, Equatable {
    var up: BoardAcceleration
    var oneG: Double

    init?(_ readings: [BoardAcceleration]) {
        let sum = readings.reduce(BoardAcceleration(x: 0, y: 0, z: 0)) { BoardAcceleration(x: $0.x + $1.x, y: $0.y + $1.y, z: $0.z + $1.z) }
        var lengths = readings.map { $0.length }
        self.init(sum: sum, lengths: &lengths)
    }

    /// From the readings' sum (added in their order) and their lengths (reordered here): what
    /// `init(_:)` finds from the readings, for a caller that reads them without building them.
    init?(sum: BoardAcceleration, lengths: inout [Double]) {
        let length = sum.length
        guard length.isNormal, !lengths.isEmpty else { return nil }
        up = BoardAcceleration(x: sum.x / length, y: sum.y / length, z: sum.z / length)
        oneG = middleValue(&lengths)
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

/// `rankedValue(values, rank: values.count / 2)`, reordering `values`, by their ranges: one pass
/// for the least and the greatest, one counting them in 256 equal ranges between, and a
/// selection among those in the range holding the median (a few dozen of a station's thousand
/// lengths, the board's noise spreading them; a selection among all thousand was a tenth of a
/// rep's time with the accelerometer). The ranges keep the values' order (a value's range is a
/// monotone function of it), so the median's range holds it, at its rank less those below.
/// Values that are not all finite, or spread past what a double holds, are left to `rankedValue`.
func middleValue(_ values: inout [Double]) -> Double {
    precondition(!values.isEmpty, "no values")
    let rank = values.count / 2
    var (least, greatest, unordered) = (values[0], values[0], false)
    for value in values {
        least = min(least, value)
        greatest = max(greatest, value)
        unordered = unordered || value.isNaN
    }
    let ranges = 256
    let span = greatest - least
    let scale = Double(ranges - 1) / span
    // (A span past the largest double, or one so small its ranges cannot be told, is left to it too.)
    guard !unordered, span.isFinite, span > 0, scale.isFinite else {
        return rankedValue(selectingIn: &values, rank: rank)
    }
    var counts = [Int32](repeating: 0, count: ranges)
    counts.withUnsafeMutableBufferPointer { counts in
        for value in values { counts[Int((value - least) * scale)] += 1 }
    }
    var range = 0, below = 0
    while below + Int(counts[range]) <= rank {
        below += Int(counts[range])
        range += 1
    }
    var inRange: [Double] = []
    inRange.reserveCapacity(Int(counts[range]))
    for value in values where Int((value - least) * scale) == range { inRange.append(value) }
    return rankedValue(selectingIn: &inRange, rank: rank - below)
}

/// The value at `rank` of `values` sorted (`values.sorted()[rank]`), found by Hoare's
/// selection (Communications of the ACM 4(7), 1961, algorithm 65 "FIND") in expected linear
/// time: sorting a station's 20 s of readings for their median was 3 % of the rep-detector's
/// loop at 1,000 stations. Each round splits the range holding `rank`
/// into the values below, equal to (or unordered with, as NaN is) and above the middle one;
/// the middle part holds at least that value, so every round shrinks the range.
func rankedValue(_ values: [Double], rank: Int) -> Double {
    var a = values
    return rankedValue(selectingIn: &a, rank: rank)
}

/// `rankedValue` in `a` itself, which it reorders: no copy of the values.
func rankedValue(selectingIn a: inout [Double], rank: Int) -> Double {
    precondition(a.indices.contains(rank), "rank \(rank) outside 0..<\(a.count)")
    var (low, high) = (0, a.count)
    while high - low > 1 {
        let pivot = a[low + (high - low) / 2]
        // [low, below) < pivot, [below, next) neither, [above, high) > pivot.
        var (below, next, above) = (low, low, high)
        while next < above {
            if a[next] < pivot {
                a.swapAt(below, next)
                below += 1
                next += 1
            } else if a[next] > pivot {
                above -= 1
                a.swapAt(next, above)
            } else {
                next += 1
            }
        }
        if rank < below {
            high = below
        } else if rank >= above {
            low = above
        } else {
            return a[rank]
        }
    }
    return a[low]
}

/// Smooths `readings` (time order) into bar kinematics. `oneG` is the
/// board's reading at rest. Returns nil unless the accelerometer moves with
/// the bar (its acceleration explains the laser's), which a caller that has
/// seen it ride the bar over readings just before may say (`ridesTheBar`).
///
/// The state is (position, velocity, offset, gain): the bar's acceleration is
/// gain x (reading / oneG - 1) x g - offset. An uncalibrated board's axes are
/// offset, which also puts its 1 g off by a few per cent; the gain takes that
/// up during the rep's large accelerations, the offset during its rests.
func fuse(_ readings: [FusionReading], oneG: Double, settings: FusionSettings, ridesTheBar known: Bool = false) -> [KinematicSample]? {
    let count = readings.count
    guard count >= 10, oneG > 0 else { return nil }
    // A reading is taken as the mean over the period before it (sensors
    // average or low-pass filter before they are read), so it drives the
    // interval that ends at it.
    let input = readings.map { ($0.vertical / oneG - 1) * standardGravity }
    guard input.allSatisfy({ $0.isFinite }), readings.allSatisfy({ $0.positionM.isFinite && $0.t.isFinite }) else { return nil }
    guard known || ridesTheBar(readings, input: input, settings: settings) else { return nil }

    let r = settings.laserNoiseM * settings.laserNoiseM
    let qa = settings.accelerationNoiseMps2 * settings.accelerationNoiseMps2
    let qb = settings.offsetDriftMps2 * settings.offsetDriftMps2
    // The transition into reading k (the identity into the first): the forward pass builds it,
    // the backward pass builds it again rather than keeping 16 numbers a reading.
    func transition(_ k: Int) -> Matrix4 {
        var f = Matrix4.identity
        if k > 0 {
            let dt = max(1e-4, readings[k].t - readings[k - 1].t), u = input[k]
            f.rows.0 = SIMD4(1, dt, -dt * dt / 2, u * dt * dt / 2)
            f.rows.1 = SIMD4(0, 1, -dt, u * dt)
        }
        return f
    }
    // The forward pass keeps, per reading, what the backward pass needs: the predicted state and
    // covariance, and the laser update's gain and innovation (over its variance).
    struct Step {
        var predicted: SIMD4<Double>, predictedP: Matrix4, gain: SIMD4<Double>, innovation: Double
    }
    var steps: [Step] = []
    steps.reserveCapacity(count)
    var x = SIMD4<Double>(readings[0].positionM, 0, 0, 1)
    var p = Matrix4(diagonal: SIMD4(r, 1.0, 0.5 * 0.5, 0.1 * 0.1))
    for k in 0..<count {
        if k > 0 {
            let f = transition(k), dt = f.rows.0[1]
            x = f * x
            // The reading's noise enters like an acceleration over the interval.
            let g = SIMD4<Double>(dt * dt / 2, dt, 0, 0)
            p = Matrix4.propagated(p, by: f) + Matrix4.outer(g, g * (qa * x[3] * x[3])) + Matrix4(diagonal: SIMD4(0, 0, qb * dt, 0))
        }
        let predicted = x, predictedP = p
        // Laser update: a scalar measurement of the position.
        let column = p.column0
        let s = column[0] + r
        let innovation = (readings[k].positionM - x[0]) / s
        x += column * innovation
        p = (p - Matrix4.outer(column, column / s)).symmetrised
        steps.append(Step(predicted: predicted, predictedP: predictedP, gain: column / s, innovation: innovation))
    }
    // Backward pass in the Bryson-Frazier form (Bierman, "Factorization Methods for Discrete
    // Sequential Estimation", 1977): the smoothed state is the predicted one plus its covariance
    // times an adjoint carried back through the updates and transitions. The same smoother as
    // Rauch-Tung-Striebel's, without inverting a covariance a reading. For the laser's scalar
    // update (H = e0): adjoint = e0 innovation / s + (I - K e0^T)^T ahead.
    var samples = [KinematicSample](repeating: KinematicSample(t: 0, positionM: 0, velocityMps: 0, accelerationMps2: 0), count: count)
    var ahead = SIMD4<Double>()  // F(k+1)^T adjoint(k+1); none after the last reading
    for k in stride(from: count - 1, through: 0, by: -1) {
        let step = steps[k]
        var adjoint = ahead
        adjoint[0] -= (step.gain * ahead).sum()
        adjoint[0] += step.innovation
        let state = step.predicted + step.predictedP * adjoint
        samples[k] = KinematicSample(t: readings[k].t, positionM: state[0], velocityMps: state[1], accelerationMps2: state[3] * input[k] - state[2])
        ahead = transition(k).transposed * adjoint
    }
    return samples
}

/// Whether the accelerometer feels the bar's motion: the laser's acceleration
/// (twice differentiated, noisy but unbiased) regressed on the accelerometer's
/// has a slope near 1, and the movement is large enough to tell.
private func ridesTheBar(_ readings: [FusionReading], input: [Double], settings: FusionSettings) -> Bool {
    let laserAcceleration = derivatives(times: readings.map { $0.t }, positions: readings.map { $0.positionM }, halfWidth: 2).acceleration
    // The same smoothing on the accelerometer, so both see the same band.
    var smoothedInput = [Double](repeating: 0, count: input.count)
    for k in input.indices {
        let window = input[max(0, k - 2)...min(input.count - 1, k + 2)]
        smoothedInput[k] = window.reduce(0, +) / Double(window.count)
    }
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

// MARK: - A 4 x 4 matrix for the filter

/// A 4 x 4 matrix of SIMD rows: the filter runs on the stack, no allocation per reading.
struct Matrix4 {
    var rows: (SIMD4<Double>, SIMD4<Double>, SIMD4<Double>, SIMD4<Double>)

    init(_ r0: SIMD4<Double>, _ r1: SIMD4<Double>, _ r2: SIMD4<Double>, _ r3: SIMD4<Double>) { rows = (r0, r1, r2, r3) }
    init(diagonal d: SIMD4<Double>) { self.init(SIMD4(d[0], 0, 0, 0), SIMD4(0, d[1], 0, 0), SIMD4(0, 0, d[2], 0), SIMD4(0, 0, 0, d[3])) }
    static let identity = Matrix4(diagonal: SIMD4(repeating: 1))
    /// u v^T.
    static func outer(_ u: SIMD4<Double>, _ v: SIMD4<Double>) -> Matrix4 { Matrix4(u[0] * v, u[1] * v, u[2] * v, u[3] * v) }

    subscript(row: Int) -> SIMD4<Double> {
        get {
            switch row {
            case 0: rows.0
            case 1: rows.1
            case 2: rows.2
            default: rows.3
            }
        }
        set {
            switch row {
            case 0: rows.0 = newValue
            case 1: rows.1 = newValue
            case 2: rows.2 = newValue
            default: rows.3 = newValue
            }
        }
    }

    var column0: SIMD4<Double> { SIMD4(rows.0[0], rows.1[0], rows.2[0], rows.3[0]) }
    var transposed: Matrix4 {
        Matrix4(
            SIMD4(rows.0[0], rows.1[0], rows.2[0], rows.3[0]), SIMD4(rows.0[1], rows.1[1], rows.2[1], rows.3[1]),
            SIMD4(rows.0[2], rows.1[2], rows.2[2], rows.3[2]), SIMD4(rows.0[3], rows.1[3], rows.2[3], rows.3[3]))
    }
    var symmetrised: Matrix4 {
        let t = transposed
        return Matrix4((rows.0 + t.rows.0) / 2, (rows.1 + t.rows.1) / 2, (rows.2 + t.rows.2) / 2, (rows.3 + t.rows.3) / 2)
    }

    /// f p f^T for a transition `f` whose last two rows are the identity's (the filter's): the
    /// general products' sums in the same order, without those that only copy (x 1 + 0 x y is x),
    /// so the same values at half the work.
    static func propagated(_ p: Matrix4, by f: Matrix4) -> Matrix4 {
        func row(_ a: SIMD4<Double>) -> SIMD4<Double> { a[0] * p.rows.0 + a[1] * p.rows.1 + a[2] * p.rows.2 + a[3] * p.rows.3 }
        // (f p) f^T: in each row, lanes 2 and 3 stay; lanes 0 and 1 are its products with f's rows 0 and 1.
        func times(_ a: SIMD4<Double>) -> SIMD4<Double> {
            let (f0, f1) = (f.rows.0, f.rows.1)
            return SIMD4(
                a[0] * f0[0] + a[1] * f0[1] + a[2] * f0[2] + a[3] * f0[3], a[0] * f1[0] + a[1] * f1[1] + a[2] * f1[2] + a[3] * f1[3], a[2], a[3])
        }
        return Matrix4(times(row(f.rows.0)), times(row(f.rows.1)), times(p.rows.2), times(p.rows.3))
    }

    static func + (l: Matrix4, r: Matrix4) -> Matrix4 { Matrix4(l.rows.0 + r.rows.0, l.rows.1 + r.rows.1, l.rows.2 + r.rows.2, l.rows.3 + r.rows.3) }
    static func - (l: Matrix4, r: Matrix4) -> Matrix4 { Matrix4(l.rows.0 - r.rows.0, l.rows.1 - r.rows.1, l.rows.2 - r.rows.2, l.rows.3 - r.rows.3) }
    static func * (l: Matrix4, r: Matrix4) -> Matrix4 {
        func row(_ a: SIMD4<Double>) -> SIMD4<Double> { a[0] * r.rows.0 + a[1] * r.rows.1 + a[2] * r.rows.2 + a[3] * r.rows.3 }
        return Matrix4(row(l.rows.0), row(l.rows.1), row(l.rows.2), row(l.rows.3))
    }
    static func * (l: Matrix4, v: SIMD4<Double>) -> SIMD4<Double> {
        SIMD4((l.rows.0 * v).sum(), (l.rows.1 * v).sum(), (l.rows.2 * v).sum(), (l.rows.3 * v).sum())
    }
}
