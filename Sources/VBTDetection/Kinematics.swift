import Foundation

// Signal helpers shared by the distance and IMU detectors. Everything here is
// a pure function of its input: the detectors are values fed readings in
// time order, so the same samples always give the same reps.

/// Standard gravity, m/s^2.
public let standardGravity = 9.80665

/// One point of a bar's vertical motion.
public struct KinematicSample: Sendable, Equatable, Codable {
    /// Reading time, Unix seconds (sensor time carried by the bus).
    public var t: Double
    /// Bar height in metres (any zero).
    public var positionM: Double
    /// Vertical velocity, m/s (up positive).
    public var velocityMps: Double
    /// Vertical acceleration without gravity, m/s^2.
    public var accelerationMps2: Double

    /// Creates a sample.
    public init(t: Double, positionM: Double, velocityMps: Double, accelerationMps2: Double) {
        (self.t, self.positionM, self.velocityMps, self.accelerationMps2) = (t, positionM, velocityMps, accelerationMps2)
    }
}

/// The sums of a least-squares line through points (x, y): the means and the
/// centred sums of squares and products.
struct LineFit {
    var count = 0.0, meanX = 0.0, meanY = 0.0
    var sxx = 0.0, sxy = 0.0, syy = 0.0

    /// Fits `points`, (x, y) pairs read twice (the line of no points is all
    /// zeros). Allocates nothing: it runs for every reading on some paths.
    init<Points: Sequence>(_ points: Points) where Points.Element == (Double, Double) {
        var sumX = 0.0, sumY = 0.0
        for (x, y) in points {
            count += 1
            sumX += x
            sumY += y
        }
        guard count > 0 else { return }
        (meanX, meanY) = (sumX / count, sumY / count)
        for (x, y) in points {
            sxx += (x - meanX) * (x - meanX)
            sxy += (x - meanX) * (y - meanY)
            syy += (y - meanY) * (y - meanY)
        }
    }

    /// Fits the points (x[i], y[i]) for the indices both have: the same sums in the same
    /// order as the sequence's fit, so the same line to the last bit, read by index (`zip`'s
    /// iterator, not inlined, was most of `differentiate`, which fits two lines a point of
    /// each rep's trace).
    init(_ x: UnsafeBufferPointer<Double>, _ y: UnsafeBufferPointer<Double>) {
        let pairs = min(x.count, y.count)
        guard pairs > 0 else { return }
        var sumX = 0.0, sumY = 0.0
        for index in 0..<pairs {
            sumX += x[index]
            sumY += y[index]
        }
        count = Double(pairs)
        (meanX, meanY) = (sumX / count, sumY / count)
        for index in 0..<pairs {
            sxx += (x[index] - meanX) * (x[index] - meanX)
            sxy += (x[index] - meanX) * (y[index] - meanY)
            syy += (y[index] - meanY) * (y[index] - meanY)
        }
    }

    /// The slope (0 when the x's do not vary).
    var slope: Double { sxx > 0 ? sxy / sxx : 0 }
}

/// Slope of the least-squares line through (t, y): a derivative that tolerates noise.
func regressionSlope(_ t: ArraySlice<Double>, _ y: ArraySlice<Double>) -> Double {
    guard t.count >= 2 else { return 0 }
    return t.withUnsafeBufferPointer { t in y.withUnsafeBufferPointer { y in LineFit(t, y).slope } }
}

/// Velocity and acceleration of a position series by centred local regression
/// over `halfWidth` samples each side (zero-phase: no lag, unlike an EMA).
public func differentiate(times: [Double], positions: [Double], halfWidth: Int) -> [KinematicSample] {
    let (velocity, acceleration) = derivatives(times: times, positions: positions, halfWidth: halfWidth)
    // Positions stay raw: turning points are refined by fitting them (see measureConcentric).
    return times.indices.map { index in
        KinematicSample(t: times[index], positionM: positions[index], velocityMps: velocity[index], accelerationMps2: acceleration[index])
    }
}

/// `differentiate`'s velocities and accelerations alone, for a caller that reads no more.
func derivatives(times: [Double], positions: [Double], halfWidth: Int) -> (velocity: [Double], acceleration: [Double]) {
    let count = times.count
    var velocity = [Double](repeating: 0, count: count), acceleration = [Double](repeating: 0, count: count)
    for index in 0..<count {
        let low = max(0, index - halfWidth), high = min(count - 1, index + halfWidth)
        velocity[index] = regressionSlope(times[low...high], positions[low...high])
    }
    for index in 0..<count {
        let low = max(0, index - halfWidth), high = min(count - 1, index + halfWidth)
        acceleration[index] = regressionSlope(times[low...high], velocity[low...high])
    }
    return (velocity, acceleration)
}

/// Vertical (world z) component of a sensor-frame vector for WitMotion-style
/// angles (roll about x, pitch about y, yaw about z; R = Rz Ry Rx maps sensor
/// to world). The z row of R does not depend on yaw.
public func worldVertical(x: Double, y: Double, z: Double, rollDeg: Double, pitchDeg: Double) -> Double {
    let roll = rollDeg * .pi / 180, pitch = pitchDeg * .pi / 180
    return -sin(pitch) * x + cos(pitch) * sin(roll) * y + cos(pitch) * cos(roll) * z
}

/// A bar height (metres) at a reading time, as a sensor's tracker keeps them.
protocol TimedHeight {
    var t: Double { get }
    var m: Double { get }
}

/// The lowest bar height after a time, kept up to date as readings come: each look reads
/// only the points added since the one before. (Read back to the time at every reading, a
/// rise waiting up to 20 s for its lowering cost up to a thousand points a reading: a seventh
/// of the rep detector's time.) Points come in time order and are only appended.
struct LowestHeight: Sendable, Equatable {
    /// Points after this time count.
    let after: Double
    /// The newest point looked at.
    private var seen = -Double.infinity
    /// The lowest so far; nil while no point after `after` has come.
    private(set) var low: Double?

    init(after t: Double) { after = t }

    /// Folds in the points of `points` (in time order) newer than the last look's; returns the lowest.
    mutating func update<Points: BidirectionalCollection>(_ points: Points) -> Double? where Points.Element: TimedHeight {
        let since = max(after, seen)
        for point in points.reversed() {
            guard point.t > since else { break }
            low = min(low ?? point.m, point.m)
        }
        if let newest = points.last?.t, newest > seen { seen = newest }
        return low
    }
}
