import Foundation
import VBTWire

// From a bar's motion to measured reps: turning points with hysteresis find
// candidate concentric phases; each candidate is refined and measured, then
// validated against the exercise (ROM, minimum duration, refractory period).

/// The metrics of one concentric phase (Sánchez-Medina & González-Badillo 2011, Med Sci Sports Exerc 43(9): mean, peak and mean propulsive velocity).
/// Its figures are the rep message's (`RepFigures`) and read as its own (`measurement.romMm`).
@dynamicMemberLookup
public struct RepMeasurement: Sendable, Equatable {
    /// Start of the concentric phase (velocity extrapolated to zero), Unix s.
    public var concentricStartT: Double
    /// End of the concentric phase, Unix s.
    public var concentricEndT: Double
    /// Time of the highest sample: with the station, the rep's identity.
    public var peakSampleT: Double
    /// What the rep message carries of the phase.
    public var figures: RepFigures
}

/// How the start and end of a concentric phase are found in a trace.
public enum ConcentricEndpoints: Sendable, Codable {
    /// Fit the bar's positions around each turning point (`refineTurningPoint`):
    /// for traces whose velocity is a noisy derivative (the laser alone, an
    /// integrated IMU).
    case fittedPositions
    /// Where the velocity reaches zero: for traces whose velocity is measured
    /// well near zero (the laser fused with its accelerometer).
    case velocityZeros
}

/// Measures a concentric phase in `trace` between the samples nearest to
/// `valleyT` and `peakT`: start and end as `endpoints` says, ROM between the
/// bar's positions there, mean velocity = ROM / duration.
///
/// `measuredPositions`: the trace's positions were read by a sensor (a laser, a lidar), not
/// integrated from an accelerometer; only then are sparse readings' turns fitted towards peak
/// velocity (below). A bar IMU's heights come from its own readings' integral, and at 10 Hz
/// that fit took its mean velocity further from the truth (`imu-10hz`, seeds 951-954: MAE 0.062
/// -> 0.086 m/s).
///
/// `loweredByM`: how far the bar was lowered into this rise, when it was (nil: not, or not
/// known); a rise back up `finishedShare` of it is not carried on past a dip (`stickingM`).
public func measureConcentric(
    _ trace: [KinematicSample], valleyT: Double, peakT: Double, loadKg: Double?,
    endpoints: ConcentricEndpoints = .fittedPositions, measuredPositions: Bool = true, loweredByM: Double? = nil
) -> RepMeasurement? {
    guard trace.count >= 4 else { return nil }
    let from = trace.lastIndex { $0.t <= valleyT } ?? 0
    let to = trace.firstIndex { $0.t >= peakT } ?? trace.count - 1
    guard to > from + 1 else { return nil }
    var peakIndex = from
    for index in from...to where trace[index].velocityMps > trace[peakIndex].velocityMps { peakIndex = index }
    let peakVelocity = trace[peakIndex].velocityMps
    guard peakVelocity > 0.02 else { return nil }

    // The moving part: the contiguous run of samples around the peak velocity.
    var firstMoving = peakIndex, lastMoving = peakIndex
    while firstMoving > 0, trace[firstMoving - 1].velocityMps > 0.1 * peakVelocity { firstMoving -= 1 }
    while lastMoving < trace.count - 1, trace[lastMoving + 1].velocityMps > 0.1 * peakVelocity { lastMoving += 1 }
    // A grinder slows towards zero at its sticking point without reversing: a part of the rise
    // (between its lowest and highest point) moving again beyond the run, and taking the bar
    // `stickingM` further, is the same rep.
    // The fits' windows scale with the runs at each end (a grinder's first and last parts).
    var (firstRunEnd, lastRunStart) = (lastMoving, firstMoving)
    // (A run counts only if it takes the bar past where it had been on the run's side of the
    // dip: a reading in a pause at the top whose noisy velocity passes the threshold does not.)
    let moving = { (index: Int) in trace[index].velocityMps > 0.1 * peakVelocity }
    var index = lastMoving + 1
    while index <= to {
        guard moving(index) else { index += 1; continue }
        var end = index
        while end < trace.count - 1, moving(end + 1) { end += 1 }
        let sofar = trace[min(from, firstMoving)...lastMoving].map { $0.positionM }
        let (highest, lowest) = (sofar.max() ?? 0, sofar.min() ?? 0)
        // Back where its lowering began: the rep is finished, and what follows is the re-rack.
        if let lowered = loweredByM, highest - lowest >= finishedShare * lowered { break }
        let further = stickingFurtherM(after: highest - lowest)
        if trace[index...end].contains(where: { $0.positionM > highest + further }) { (lastMoving, lastRunStart) = (end, index) }
        index = end + 1
    }
    index = firstMoving - 1
    while index >= from {
        guard moving(index) else { index -= 1; continue }
        var start = index
        while start > 0, moving(start - 1) { start -= 1 }
        let sofar = trace[firstMoving...max(firstMoving, min(to, trace.count - 1))].map { $0.positionM }
        let (highest, lowest) = (sofar.max() ?? 0, sofar.min() ?? 0)
        let further = stickingFurtherM(after: highest - lowest)
        if trace[start...index].contains(where: { $0.positionM < lowest - further }) { (firstMoving, firstRunEnd) = (start, index) }
        index = start - 1
    }
    let bottom: (t: Double, p: Double), top: (t: Double, p: Double)
    switch endpoints {
    case .fittedPositions:
        // The window scales with the phase: a slow lift (2-3 s) rises only a few
        // millimetres in its first quarter second, and a 0.25 s cap put its start
        // up to 0.3 s late. 0.6 s still stays clear of the neighbouring movements.
        // It holds at least three reading intervals each side (0.06 s at 50 Hz, 0.15 s at 20 Hz):
        // the fit needs readings on both sides of the turn, and a 20 Hz lidar's fast short rep
        // (0.25 s) left 2-4 readings in 0.06 s, too few to fit, so its turn fell on a reading.
        let spacing = measuredPositions ? readingSpacing(trace, from: from, to: to) : 0
        func quarter(_ from: Int, _ to: Int) -> Double { max(0.06, 0.25 * (trace[to].t - trace[from].t)) }
        func window(_ from: Int, _ to: Int) -> Double { min(0.6, max(quarter(from, to), 3 * spacing)) }
        // Only there, where the readings are too sparse for a window short of the turn's own
        // stretch, does the window reach towards peak velocity, and the fit meets it there.
        func sparse(_ from: Int, _ to: Int) -> Bool { 3 * spacing > quarter(from, to) }
        // The fit finds when the bar turns; where it was then is read from the readings (the
        // fit's own p0 is biased wherever a turn is no parabola: a touch-and-go's V, a ramp).
        let start = refineTurningPoint(
            trace, near: trace[firstMoving].t, halfWindowS: window(firstMoving, max(firstMoving, firstRunEnd)), minimum: true,
            peakT: sparse(firstMoving, max(firstMoving, firstRunEnd)) ? trace[peakIndex].t : nil
        ).t
        let end = refineTurningPoint(
            trace, near: trace[lastMoving].t, halfWindowS: window(lastRunStart, lastMoving), minimum: false,
            peakT: sparse(lastRunStart, lastMoving) ? trace[peakIndex].t : nil
        ).t
        bottom = (start, interpolatedPosition(trace, at: start))
        top = (end, interpolatedPosition(trace, at: end))
    case .velocityZeros:
        bottom = velocityZero(trace, edge: firstMoving, rising: true)
        top = velocityZero(trace, edge: lastMoving, rising: false)
    }
    let start = bottom.t, end = top.t
    guard end > start, top.p > bottom.p else { return nil }

    // Integrate velocity over [start, end] (trapezoids, clipped at the ends).
    var displacement = 0.0, propulsive = 0.0, propulsiveTime = 0.0, powerSum = 0.0, peakPower = -Double.infinity
    var braking = false
    for i in 0..<(trace.count - 1) {
        let a = trace[i], b = trace[i + 1]
        let t0 = max(a.t, start), t1 = min(b.t, end)
        guard t1 > t0 else { continue }
        func at(_ t: Double) -> (v: Double, acc: Double) {
            let f = b.t > a.t ? (t - a.t) / (b.t - a.t) : 0
            return (max(0, a.velocityMps + f * (b.velocityMps - a.velocityMps)), a.accelerationMps2 + f * (b.accelerationMps2 - a.accelerationMps2))
        }
        let p = at(t0), q = at(t1)
        let piece = (p.v + q.v) / 2 * (t1 - t0)
        displacement += piece
        // Propulsive until the bar first decelerates faster than gravity; only
        // looked for after peak velocity, so noise at the start cannot end it.
        if !braking, a.t >= trace[peakIndex].t, min(p.acc, q.acc) < -standardGravity { braking = true }
        if !braking { propulsive += piece; propulsiveTime += t1 - t0 }
        if let loadKg {
            powerSum += loadKg * ((p.acc + q.acc) / 2 + standardGravity) * (p.v + q.v) / 2 * (t1 - t0)
            peakPower = max(peakPower, loadKg * (p.acc + standardGravity) * p.v, loadKg * (q.acc + standardGravity) * q.v)
        }
    }
    let duration = end - start
    // ROM and mean velocity from the fitted turning points; the integral of the
    // velocity only serves the propulsive phase and power.
    _ = displacement
    let rom = top.p - bottom.p
    let mean = rom / duration
    var measurement = RepMeasurement(
        concentricStartT: start, concentricEndT: end, peakSampleT: trace[to].t,
        meanVelocityMps: mean, peakVelocityMps: peakVelocity,
        meanPropulsiveVelocityMps: propulsiveTime > 0 ? propulsive / propulsiveTime : mean,
        romMm: rom * 1000, concentricS: duration, timeToPeakS: trace[peakIndex].t - start,
        meanPowerW: loadKg.map { _ in powerSum / duration })
    measurement.peakPowerW = loadKg != nil && peakPower.isFinite ? peakPower : nil
    return measurement
}

/// The median interval between the readings from `from` to `to`.
func readingSpacing(_ trace: [KinematicSample], from: Int, to: Int) -> Double {
    guard to > from else { return 0 }
    let gaps = (from..<to).map { trace[$0 + 1].t - trace[$0].t }.sorted()
    return gaps[gaps.count / 2]
}

/// How much further a rise must take the bar past a dip in its velocity to be the same rep's:
/// at least `stickingM` and `stickingShare` of the rise before the dip (a re-rack after a pause
/// at the top, 60-80 mm, is no part of a 0.6 m squat; the rest of a grinder is).
let stickingM = 0.02
let stickingShare = 0.25

/// How much further than a dip's height a rise of `riseM` before it must take the bar to be the
/// same rep's (`stickingM`, `stickingShare`).
func stickingFurtherM(after riseM: Double) -> Double { max(stickingM, stickingShare * riseM) }
/// A rise lowered into (`loweredByM`) that has come back up this share of its lowering is
/// finished: a grinder sticks partway (some 0.3-0.6 of the way up), and the re-rack's lift from
/// the top (60-80 mm, a third of an arched bench's 210-300 mm) is no part of the rep.
let finishedShare = 0.85

/// Where the velocity reaches zero next to the moving run that begins (or,
/// `rising` false, ends) at sample `edge`, and the bar's position there.
/// From `edge`, the velocity is extrapolated to zero with the acceleration of
/// the interval next to it on the moving side (an interval that straddles the
/// start of a movement averages rest with motion), and kept between `edge`
/// and the nearest sample at or below zero. Where the acceleration cannot
/// say (it points the wrong way), the sign change is interpolated linearly.
func velocityZero(_ trace: [KinematicSample], edge: Int, rising: Bool) -> (t: Double, p: Double) {
    let outward = rising ? -1 : 1
    // The sign change: `inner` still moving (v > 0), `bound` the nearest
    // sample at or below zero (or the end of the trace).
    var inner = edge
    while trace.indices.contains(inner + outward), trace[inner + outward].velocityMps > 0 { inner += outward }
    let bound = trace.indices.contains(inner + outward) ? inner + outward : inner
    let (a, b) = (trace[inner], trace[bound])
    var t = a.velocityMps > b.velocityMps ? a.t + a.velocityMps / (a.velocityMps - b.velocityMps) * (b.t - a.t) : b.t
    // Each sample's acceleration drives the interval that ends at it: the
    // interval after `edge` when rising, the one before it when falling.
    let moving: Double
    if rising {
        moving = trace.indices.contains(edge + 1) ? trace[edge + 1].accelerationMps2 : 0
    } else {
        moving = -trace[edge].accelerationMps2
    }
    if moving > 0 {
        let extrapolated = trace[edge].t + Double(outward) * trace[edge].velocityMps / moving
        t = min(max(extrapolated, min(trace[edge].t, b.t)), max(trace[edge].t, b.t))
    }
    return (t, position(trace, at: t))
}

/// The bar's position at `t` read between the two readings around it (linearly).
func interpolatedPosition(_ trace: [KinematicSample], at t: Double) -> Double {
    guard let after = trace.firstIndex(where: { $0.t >= t }) else { return trace.last?.positionM ?? 0 }
    guard after > 0 else { return trace[0].positionM }
    let a = trace[after - 1], b = trace[after]
    return b.t > a.t ? a.positionM + (b.positionM - a.positionM) * (t - a.t) / (b.t - a.t) : b.positionM
}

/// The bar's position at `t` inside a trace: from the sample before, moved
/// by its velocity and the interval's acceleration.
func position(_ trace: [KinematicSample], at t: Double) -> Double {
    guard let after = trace.firstIndex(where: { $0.t >= t }) else { return trace.last?.positionM ?? 0 }
    guard after > 0 else { return trace[0].positionM }
    let before = trace[after - 1], tau = t - before.t
    return before.positionM + before.velocityMps * tau + trace[after].accelerationMps2 * tau * tau / 2
}

/// A rising movement found by the turning-point detector.
public struct ConcentricCandidate: Sendable, Equatable, Codable {
    /// Time of the lowest point before the rise.
    public var valleyT: Double
    /// Time of the highest point.
    public var peakT: Double
    /// Rise from valley to peak, metres.
    public var riseM: Double
    /// Time of the sample that confirmed the top (a drop, or a pause).
    public var completedT: Double
    /// How far the bar came down just before the rise (from the highest point
    /// since the previous rise's top, at most 8 s back): a rep that starts at
    /// the top (squat, bench) was lowered first. Set by the sensor's tracker.
    public var descentBeforeM = 0.0
    /// The bar's height at the top, in the tracker's frame.
    public var peakM = 0.0
    /// How far the sensor's own noise can move the measured rise (one
    /// standard deviation, metres): an IMU's heights come from integrating
    /// twice, so its ROM is far less certain than a laser's. The ROM test
    /// widens by three of these.
    public var riseUncertaintyM = 0.0
    /// The rise ended in a pause at the top, not in a drop: the bar may yet go on up (a grinder
    /// past its sticking point), so a rise shorter than a rep is held a moment (StationDetector).
    public var endedInPause = false

    /// Creates a candidate.
    public init(valleyT: Double, peakT: Double, riseM: Double, completedT: Double) {
        (self.valleyT, self.peakT, self.riseM, self.completedT) = (valleyT, peakT, riseM, completedT)
    }

    private enum CodingKeys: String, CodingKey {
        case valleyT, peakT, riseM, completedT, descentBeforeM, peakM, riseUncertaintyM, endedInPause
    }

    /// Reads a candidate; one a checkpoint of an earlier build wrote has no `endedInPause` (false).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        (valleyT, peakT) = (try c.decode(Double.self, forKey: .valleyT), try c.decode(Double.self, forKey: .peakT))
        (riseM, completedT) = (try c.decode(Double.self, forKey: .riseM), try c.decode(Double.self, forKey: .completedT))
        descentBeforeM = try c.decodeIfPresent(Double.self, forKey: .descentBeforeM) ?? 0
        peakM = try c.decodeIfPresent(Double.self, forKey: .peakM) ?? 0
        riseUncertaintyM = try c.decodeIfPresent(Double.self, forKey: .riseUncertaintyM) ?? 0
        endedInPause = try c.decodeIfPresent(Bool.self, forKey: .endedInPause) ?? false
    }
}

/// Finds rises between turning points with hysteresis: a valley is confirmed
/// once the bar has risen `hysteresisM` above it; the rise ends (the rep is
/// complete) when the bar drops `hysteresisM` below its peak (touch-and-go,
/// or the next descent) or stays below the peak for `settleS` (a pause at the
/// top). Works for exercises that start at the top (squat, bench) or at the
/// bottom (deadlift). Positions should already be lightly smoothed.
public struct TurningPoints: Sendable, Codable, Equatable {
    public var hysteresisM: Double
    public var settleS: Double
    private var rising = false
    private var lowT = 0.0, low = Double.infinity
    private var highT = 0.0, high = -Double.infinity

    /// Creates a detector.
    public init(hysteresisM: Double, settleS: Double) {
        self.hysteresisM = hysteresisM
        self.settleS = settleS
    }

    /// Feeds one position; returns a candidate when a rise is complete.
    public mutating func feed(t: Double, positionM p: Double) -> ConcentricCandidate? {
        if !rising {
            if p < low { low = p; lowT = t }
            if p >= low + hysteresisM {
                rising = true
                high = p
                highT = t
            }
            return nil
        }
        if p > high {
            // Creeping up by less than a millimetre (an EMA settling, a slow
            // lockout) is the top, not more of the rise.
            if p > high + 0.001 { highT = t }
            high = p
            if t - highT < settleS { return nil }
        }
        if p <= high - hysteresisM || t - highT >= settleS {
            var candidate = ConcentricCandidate(valleyT: lowT, peakT: highT, riseM: high - low, completedT: t)
            candidate.endedInPause = p > high - hysteresisM
            rising = false
            low = p
            lowT = t
            return candidate
        }
        return nil
    }

    /// The rise in progress, if any, as complete at `t`: the readings have ended (the end of a
    /// recording) with the bar still on its way up or at its top.
    public mutating func finish(at t: Double) -> ConcentricCandidate? {
        guard rising else { return nil }
        var candidate = ConcentricCandidate(valleyT: lowT, peakT: highT, riseM: high - low, completedT: t)
        candidate.endedInPause = true
        reset()
        return candidate
    }

    /// Resets to looking for a valley from `p` (after a gap in the data).
    public mutating func reset() {
        rising = false
        low = .infinity
        high = -.infinity
    }
}

/// Refines a turning point by fitting the positions around it: the bar at
/// rest in the turning point t0, p = p0 + a d^2 + c d^3 on the moving side
/// (d = t - t0, a cubic term for the jerk of a real lift) and p0 + b d^2 on
/// the other side, which may be flat (a pause) or the movement coming in
/// (touch-and-go). The best t0 is searched on a 1 ms grid; each try is a small
/// linear least-squares fit. Far less sensitive to noise than looking for
/// where a differentiated velocity crosses zero.
///
/// It runs four times a rep, on the rep path: each try costs a few dozen
/// operations whatever the window's length (`TurningPointSums`), so a thousand
/// stations completing reps on one reading queue behind little work.
public func refineTurningPoint(
    _ trace: [KinematicSample], near guess: Double, halfWindowS: Double, minimum: Bool, peakT limit: Double? = nil
) -> (t: Double, p: Double) {
    // The bar's acceleration falls to zero at peak velocity (`peakT`, for readings too sparse for
    // a short window): no constant acceleration (a parabola) holds past it. The moving side's
    // readings end there, and a window that reaches it fits an acceleration falling linearly to
    // zero there (`solveTied`); a parabola over the whole of a fast rise's first half put a
    // 0.25 s rep's start 20 ms early and its end 30 ms late. Otherwise: a parabola, a little jerk.
    let points = trace.filter { sample in
        abs(sample.t - guess) <= halfWindowS * 1.3 && (limit.map { minimum ? sample.t <= $0 : sample.t >= $0 } ?? true)
    }
    guard points.count >= 5 else {
        let nearest = trace.min { abs($0.t - guess) < abs($1.t - guess) }
        return (nearest?.t ?? guess, nearest?.positionM ?? 0)
    }
    // The moving side is after t0 for the start of a rise, before it for the end.
    let movingAfter = minimum
    let sign = minimum ? 1.0 : -1.0
    let sums = TurningPointSums(points, around: guess)
    let reach = halfWindowS * 1.3
    let tied = limit.map { minimum ? $0 <= guess + reach : $0 >= guess - reach } ?? false
    /// The fit's squared error with the turning point at `candidate`, and p0; and the split of
    /// the readings there (`after`: the previous try's, from a lower candidate).
    func fit(_ candidate: Double, after: Int?) -> (fit: (error: Double, p: Double)?, split: Int) {
        // Both variants share the moving side's elimination (`solve` is the two steps in one),
        // and read only three of the other side's sums.
        let (moving, split, e) = sums.movingSide(at: candidate, movingAfter: movingAfter, after: after)
        if tied, let limit {
            let other = sums.otherSide(split: split, movingAfter: movingAfter, e: e, full: false)
            var best: (error: Double, p: Double)?
            for flatOtherSide in [false, true] {
                guard let x = sums.solveTied(moving: moving, other: other, flatOtherSide: flatOtherSide, peakAfterS: limit - candidate),
                    x.a * sign > 0, x.b * sign >= 0
                else { continue }
                if best == nil || x.error < best!.error { best = (x.error, x.p0) }
            }
            return (best, split)
        }
        guard let eliminated = sums.eliminate(moving: moving) else { return (nil, split) }
        let other = sums.otherSide(split: split, movingAfter: movingAfter, e: e, full: false)
        var best: (error: Double, p: Double)?
        for variant in 0..<2 {
            let flatOtherSide = variant == 1
            // The jerk term may bend the curve, not carry it: otherwise a turning
            // point pushed into the rest still fits (a d^2 + c d^3 is flat near 0).
            guard let x = sums.solve(eliminated, moving: moving, other: other, flatOtherSide: flatOtherSide),
                x.a * sign > 0, x.b * sign >= 0, abs(x.c) * halfWindowS <= 0.1 * abs(x.a)
            else { continue }
            if best == nil || x.error < best!.error { best = (x.error, x.p0) }
        }
        return (best, split)
    }
    // Coarse-to-fine: 4 ms steps over the window, then 0.5 ms steps around the
    // best. A slow lift's wide window takes proportionally coarser steps (its
    // turning points are only known to tens of ms), so its cost stays bounded.
    let coarseS = max(0.004, halfWindowS / 60), fineS = coarseS / 8
    var best = (t: guess, p: points[0].positionM, error: Double.infinity)
    func search(from: Double, to: Double, step: Double) {
        // Counted steps: adding a tiny step to a huge time could never advance.
        let steps = Int(min(10_000, max(0, ((to - from) / step).rounded(.down))))
        var split: Int?
        for k in 0...steps {
            let candidate = from + Double(k) * step
            let tried = fit(candidate, after: split)
            split = tried.split
            if let result = tried.fit, result.error < best.error { best = (candidate, result.p, result.error) }
        }
    }
    search(from: guess - halfWindowS, to: guess + halfWindowS, step: coarseS)
    let coarse = best.t
    search(from: coarse - coarseS, to: coarse + coarseS, step: fineS)
    return (best.t, best.p)
}

/// The power sums `refineTurningPoint`'s fits need, for any turning point, from prefix sums
/// taken once: with u = t - a reference time and d = u - e, each sum of d^k over a run of
/// readings is a binomial mix of the run's sums of u^j, so a try costs a binary search and a
/// few dozen operations, not a pass over the readings. Heights are taken from the first
/// reading's (the fits are the same; the squared errors keep their digits).
struct TurningPointSums {
    /// The readings' times, ascending.
    private let times: [Double]
    /// Before reading i, from `stride * i`: the sums of u^0 ... u^6 and of y u^0 ... y u^3.
    private let prefix: [Double]
    private static let stride = 11
    private let reference: Double, base: Double
    /// Over every reading: the count, the heights' sum and their squares' sum.
    private let n: Double, y: Double, yy: Double

    init(_ points: [KinematicSample], around reference: Double) {
        let sorted = zip(points, points.dropFirst()).allSatisfy { $0.t <= $1.t } ? points : points.sorted { $0.t < $1.t }
        (self.reference, base) = (reference, sorted[0].positionM)
        times = sorted.map { $0.t }
        let stride = Self.stride
        var prefix = [Double](repeating: 0, count: (sorted.count + 1) * stride)
        var yy = 0.0
        for (index, point) in sorted.enumerated() {
            let u: Double = point.t - reference
            let value: Double = point.positionM - base
            var power = 1.0
            for j in 0..<7 {
                prefix[(index + 1) * stride + j] = prefix[index * stride + j] + power
                if j < 4 { prefix[(index + 1) * stride + 7 + j] = prefix[index * stride + 7 + j] + value * power }
                power *= u
            }
            yy += value * value
        }
        self.prefix = prefix
        (n, y, self.yy) = (Double(sorted.count), prefix[sorted.count * stride + 7], yy)
    }

    /// A side's sums about a turning point: of d^2 ... d^6 and of y d^2, y d^3 (d^0 and d^1 are
    /// not used by the fit).
    struct Side {
        var d2 = 0.0, d3 = 0.0, d4 = 0.0, d5 = 0.0, d6 = 0.0, yd2 = 0.0, yd3 = 0.0
    }

    /// The moving side's and the other side's sums with the turning point at `t0`: the moving
    /// side is the readings after it (`movingAfter`) or before it; a reading at t0 itself is
    /// on the other side.
    func sides(at t0: Double, movingAfter: Bool) -> (moving: Side, other: Side) {
        let (moving, split, e) = movingSide(at: t0, movingAfter: movingAfter)
        return (moving, otherSide(split: split, movingAfter: movingAfter, e: e, full: true))
    }

    /// The moving side's sums with the turning point at `t0`, and where the sides split. A
    /// search trying turning points in ascending order passes the last split as `after`: the
    /// split only moves on, a reading or so a try, so it is walked to, not searched for.
    func movingSide(at t0: Double, movingAfter: Bool, after: Int? = nil) -> (side: Side, split: Int, e: Double) {
        // The first reading after t0 (movingAfter) or at or after it.
        var low = 0, high = times.count
        if let after {
            low = after
            while low < high, movingAfter ? times[low] <= t0 : times[low] < t0 { low += 1 }
            high = low
        }
        while low < high {
            let middle = (low + high) / 2
            if movingAfter ? times[middle] <= t0 : times[middle] < t0 { low = middle + 1 } else { high = middle }
        }
        let e = t0 - reference
        return (movingAfter ? side(from: low, to: times.count, e: e, full: true) : side(from: 0, to: low, e: e, full: true), low, e)
    }

    /// The other side's sums at the same split: in `full`, else only what `solve` reads of
    /// it (d^2, d^4, y d^2; the rest 0).
    func otherSide(split: Int, movingAfter: Bool, e: Double, full: Bool) -> Side {
        movingAfter ? side(from: 0, to: split, e: e, full: full) : side(from: split, to: times.count, e: e, full: full)
    }

    private func side(from: Int, to: Int, e: Double, full: Bool) -> Side {
        let lower = from * Self.stride, upper = to * Self.stride
        func run(_ j: Int) -> Double { prefix[upper + j] - prefix[lower + j] }
        let (u0, u1, u2, u3, u4, u5, u6) = (run(0), run(1), run(2), run(3), run(4), run(5), run(6))
        let (w0, w1, w2, w3) = (run(7), run(8), run(9), run(10))
        // d = u - e: sum d^k = sum_j C(k, j) (-e)^(k-j) sum u^j (likewise with y), by Horner in -e.
        let f = -e
        var side = Side()
        side.d2 = u2 + f * (2 * u1 + f * u0)
        guard full else {
            let d4Inner: Double = 4 * u1 + f * u0
            side.d4 = u4 + f * (4 * u3 + f * (6 * u2 + f * d4Inner))
            side.yd2 = w2 + f * (2 * w1 + f * w0)
            return side
        }
        side.d3 = u3 + f * (3 * u2 + f * (3 * u1 + f * u0))
        let d4Inner: Double = 4 * u1 + f * u0
        side.d4 = u4 + f * (4 * u3 + f * (6 * u2 + f * d4Inner))
        let d5Inner: Double = 10 * u2 + f * (5 * u1 + f * u0)
        side.d5 = u5 + f * (5 * u4 + f * (10 * u3 + f * d5Inner))
        let d6Inner: Double = 15 * u2 + f * (6 * u1 + f * u0)
        let d6Middle: Double = 15 * u4 + f * (20 * u3 + f * d6Inner)
        side.d6 = u6 + f * (6 * u5 + f * d6Middle)
        side.yd2 = w2 + f * (2 * w1 + f * w0)
        side.yd3 = w3 + f * (3 * w2 + f * (3 * w1 + f * w0))
        return side
    }

    /// The least-squares fit p = p0 + a d^2 + c d^3 on the moving side and p0 + b d^2 on the
    /// other (b = 0 when `flatOtherSide`), with its squared error; nil when the sides cannot
    /// determine it (too few readings on one). The normal equations couple a and c only to each
    /// other and to p0, and b only to p0: a 2 x 2 block and a scalar are eliminated, leaving one
    /// equation for p0 (a Schur complement), exact like a general solve and a tenth of its work.
    func solve(moving m: Side, other o: Side, flatOtherSide: Bool) -> (p0: Double, a: Double, c: Double, b: Double, error: Double)? {
        eliminate(moving: m).flatMap { solve($0, moving: m, other: o, flatOtherSide: flatOtherSide) }
    }

    /// The moving side's 2 x 2 block eliminated: its inverse applied to its couplings with p0
    /// (g) and its right side (h), and what is left of p0's equation; nil when the side cannot
    /// determine a and c. It does not depend on the other side, so both variants share it.
    struct Eliminated {
        var ig2: Double, ig3: Double, ih2: Double, ih3: Double, schur: Double, right: Double
    }

    /// `solve`'s first step (see `Eliminated`).
    func eliminate(moving m: Side) -> Eliminated? {
        let det = m.d4 * m.d6 - m.d5 * m.d5
        guard det > 1e-12 * m.d4 * m.d6, det > 0 else { return nil }
        let (ig2, ig3) = ((m.d6 * m.d2 - m.d5 * m.d3) / det, (m.d4 * m.d3 - m.d5 * m.d2) / det)
        let (ih2, ih3) = ((m.d6 * m.yd2 - m.d5 * m.yd3) / det, (m.d4 * m.yd3 - m.d5 * m.yd2) / det)
        return Eliminated(ig2: ig2, ig3: ig3, ih2: ih2, ih3: ih3, schur: n - (m.d2 * ig2 + m.d3 * ig3), right: y - (m.d2 * ih2 + m.d3 * ih3))
    }

    /// The fit with the moving side's acceleration falling linearly to zero `peakAfterS` from
    /// the turn (negative: before it): p = p0 + a (d^2 - d^3 / (3 D)) there, p0 + b d^2 on the other side.
    func solveTied(moving m: Side, other o: Side, flatOtherSide: Bool, peakAfterS: Double) -> (p0: Double, a: Double, b: Double, error: Double)? {
        guard peakAfterS != 0 else { return nil }
        let k = 1 / (3 * peakAfterS)
        let g = m.d2 - k * m.d3, gg = m.d4 - 2 * k * m.d5 + k * k * m.d6, yg = m.yd2 - k * m.yd3
        guard gg > 0 else { return nil }
        guard let p0 = level(schur: n - g * g / gg, right: y - g * yg / gg, other: o, flatOtherSide: flatOtherSide) else { return nil }
        let a = (yg - g * p0) / gg
        let b = flatOtherSide ? 0 : (o.yd2 - o.d2 * p0) / o.d4
        let error = yy - (p0 * y + a * yg + b * (flatOtherSide ? 0 : o.yd2))
        return (p0 + base, a, b, error)
    }

    /// The turn's level p0 (from `base`) once the moving side's terms are eliminated (`schur`,
    /// `right`): the other side's b eliminated too unless it is flat; nil when it is not determined.
    private func level(schur: Double, right: Double, other o: Side, flatOtherSide: Bool) -> Double? {
        var schur = schur, right = right
        if !flatOtherSide {
            guard o.d4 > 0 else { return nil }
            schur -= o.d2 * o.d2 / o.d4
            right -= o.d2 * o.yd2 / o.d4
        }
        guard schur > 1e-12 * n else { return nil }
        return right / schur
    }

    /// `solve`'s second step: the other side's b eliminated, then p0, a, c, b and the error.
    func solve(_ e: Eliminated, moving m: Side, other o: Side, flatOtherSide: Bool) -> (p0: Double, a: Double, c: Double, b: Double, error: Double)? {
        guard let p0 = level(schur: e.schur, right: e.right, other: o, flatOtherSide: flatOtherSide) else { return nil }
        let a = e.ih2 - e.ig2 * p0, c = e.ih3 - e.ig3 * p0
        let b = flatOtherSide ? 0 : (o.yd2 - o.d2 * p0) / o.d4
        // For a least-squares solution, SSE = y'y - x'(A'y).
        let error = yy - (p0 * y + a * m.yd2 + c * m.yd3 + b * (flatOtherSide ? 0 : o.yd2))
        return (p0 + base, a, c, b, error)
    }
}

/// Solves the 4 x 4 system `a` x = `b` (`a` row by row) by Gaussian elimination with partial
/// pivoting; nil when singular. Fixed-size, on the stack: `refineTurningPoint` solves two per
/// candidate turning point, hundreds a rep, and nested arrays cost an allocation per row.
func solveLinear(_ a: SIMD16<Double>, _ b: SIMD4<Double>) -> SIMD4<Double>? {
    var m = a
    var v = b
    for column in 0..<4 {
        // The first row with the largest magnitude in the column, at or below the diagonal.
        var pivot = column
        for row in (column + 1)..<4 where abs(m[pivot * 4 + column]) < abs(m[row * 4 + column]) { pivot = row }
        guard abs(m[pivot * 4 + column]) > 1e-15 else { return nil }
        if pivot != column {
            for k in 0..<4 { (m[column * 4 + k], m[pivot * 4 + k]) = (m[pivot * 4 + k], m[column * 4 + k]) }
            (v[column], v[pivot]) = (v[pivot], v[column])
        }
        for row in (column + 1)..<4 {
            let factor = m[row * 4 + column] / m[column * 4 + column]
            for k in column..<4 { m[row * 4 + k] -= factor * m[column * 4 + k] }
            v[row] -= factor * v[column]
        }
    }
    var x = SIMD4<Double>()
    for row in stride(from: 3, through: 0, by: -1) {
        var sum = v[row]
        for k in (row + 1)..<4 { sum -= m[row * 4 + k] * x[k] }
        x[row] = sum / m[row * 4 + row]
    }
    return x
}
