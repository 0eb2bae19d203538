import Foundation

// The bar IMU's path. Vertical acceleration comes through the sensor's angles,
// or is estimated when it sends none (VerticalEstimator, Robust.swift). Rests
// are found against the sensor's own learned noise, in windows of time (not
// of readings) that tolerate uneven timing and gaps. Velocity is integrated
// between rests with zero-velocity updates and linear drift removal, and the
// bar's height is carried across rests, so that a rise can be told from
// another movement by what comes before and after it, as with the laser.

/// The acceleration noise of a sensor at rest, learned from the data: a low
/// quantile of the acceleration's spread over short windows, sampled every
/// quarter second over the last minute. A gym's bar rests for far more than a
/// tenth of any minute, and those are the quietest windows; so a phone-grade
/// part (0.02 g) and a WitMotion (under 0.01 g) each set their own level.
/// (The idea is "minimum statistics", from noise estimation in speech:
/// R. Martin 2001, IEEE Trans. Speech and Audio Processing 9(5).)
struct NoiseFloor: Sendable, Codable, Equatable {
    static let everyS = 0.25
    static let keepS = 60.0
    static let quantile = 0.1
    private var samples: [Double] = []
    private var lastT = -Double.infinity
    /// The noise's standard deviation, once a second of windows has been seen.
    private(set) var sd: Double?

    /// Adds the spread of the window ending at `t`.
    mutating func add(t: Double, windowSD: Double) {
        guard t - lastT >= Self.everyS else { return }
        lastT = t
        samples.append(windowSD)
        let keep = Int(Self.keepS / Self.everyS)
        if samples.count > keep { samples.removeFirst(samples.count - keep) }
        guard samples.count >= 4 else { return }
        let sorted = samples.sorted()
        sd = sorted[Int(Double(sorted.count - 1) * Self.quantile)]
    }
}

/// A rise found by the IMU, with the movement's trace.
struct IMURise: Sendable {
    var candidate: ConcentricCandidate
    var trace: [KinematicSample]
    /// The rise began at the lowest the bar has been over the last 20 s (within the turning
    /// points' hysteresis and the rise's uncertainty): from the floor, where a deadlift starts.
    var fromLowest = false
    /// The rise ended at its movement's rest, not at a drop: the bar may go on up from there.
    var endsAtRest = false
    /// This rise taken as the rest of the one that ended at the rest before this movement: both
    /// movements and that rest integrated as one, from the earlier rise's bottom to this one's
    /// top (a grinder crawls through its sticking point quietly enough for a rest). Nil unless
    /// the earlier movement ended rising and this one began within `IMUTracker.crawlS` of it.
    var continued: (candidate: ConcentricCandidate, trace: [KinematicSample])?
}

/// The bar IMU: rests, movements between them, rises within them.
struct IMUTracker: Sendable, Codable {
    /// A reading: its time, its vertical acceleration in g less the offset
    /// (0 at rest), and what the sensor read along the vertical, in its own
    /// units (what the offset and gravity's size are learned from).
    /// `v` is the velocity integrated since the last rest, while moving.
    /// Kept in single precision but for the time (a MEMS sensor's 16 bits fit
    /// its 24-bit significand): 24 bytes a reading, not 32, and 16 in a moving
    /// bar's window, whose times are 32 bits (Window.swift). Coded as before, in numbers.
    struct Raw: Sendable, Codable {
        var t: Double
        private var a: Float, alongG: Float, velocity: Float
        var aG: Double { Double(a) }
        var along: Double { Double(alongG) }
        var v: Double { Double(velocity) }

        init(t: Double, aG: Double, along: Double = 0, v: Double = 0) {
            self.t = t
            (a, alongG, velocity) = (Float(aG), Float(along), Float(v))
        }

        private enum CodingKeys: String, CodingKey { case t, a = "aG", alongG = "along", velocity = "v" }
    }
    struct Height: Sendable, Codable, TimedHeight { var t: Double; var m: Double }

    /// Rest is a window this long whose acceleration is flat noise. (No lift
    /// moves at a constant velocity for this long, and lifts pass through
    /// moments of near-zero acceleration at speed.)
    static let windowS = 0.4
    /// Quiet this long (on top of the window) is rest even when the velocity
    /// integral has drifted away from zero.
    static let restAfterQuietS = 0.8
    static let loudResetS = 0.1
    /// Above this integrated speed (plus what the noise can make of it) a
    /// quiet window is a glide, not a rest.
    static let restMaxVelocityMps = 0.1
    /// What is left of the offset once well learned (g): the velocity
    /// integral may drift by this much per second and still mean a rest.
    static let residualOffsetG = 0.003
    /// A leftover velocity above this share of the fastest in the last
    /// moments of the movement is a glide, not drift: a rep's rise peaks
    /// within a second and a half of its top.
    static let glideShare = 0.4
    static let glideLookBackS = 1.5
    /// Sampling a fast, jerky movement at 60 Hz with uneven gaps leaves up
    /// to this share of its speed in the integral.
    static let samplingShare = 0.2
    /// Movements slower than this (lifting the bar off its hooks) are told
    /// from drift by the integral's limit alone.
    static let slowestGlideMps = 0.2
    /// A glide is told by where it happens: partway through a range of at
    /// least this much, over the last few seconds.
    static let midwayRangeM = 0.2
    static let midwayLookBackS = 6.0
    /// A movement longer than this is no single rep (see `stopped`).
    static let longestMovementS = 5.0
    /// A window's spread at rest: this many noise levels, plus a margin, and
    /// never less than `minimumQuietG` (a bar held on the back sways a little).
    static let quietNoiseFactor = 1.7
    static let minimumQuietG = 0.012
    /// The noise assumed until the sensor's own is known.
    static let initialNoiseG = 0.015
    /// How far from zero a rest's mean acceleration may be beyond its noise:
    /// at least this, more while the offset is still uncertain, and at most
    /// `initialOffsetUncertaintyG` (before any rest).
    static let restMeanMarginG = 0.008
    static let initialOffsetUncertaintyG = 0.05
    /// Flat (spread and trend within noise, whatever the mean) for this long
    /// is rest: no bar accelerates steadily for seconds. It lets the tracker
    /// recover whatever it has learned wrong.
    static let flatRestS = 2.0
    /// A longer silence than this loses what the bar did meanwhile: start over.
    static let maxGapS = 0.5
    /// A movement that ended rising is kept, with the rest's readings after it, this long after
    /// that rest was found: a grinder crawls through its sticking point at a few cm/s for a few
    /// tenths of a second, and every window of the crawl is as quiet as a rest. A bar that moves
    /// on within this may still be in the same rise (`IMURise.continued`).
    static let crawlS = 1.0
    /// A lowering can end quietly only when it was slow: braking under the quiet windows' level
    /// (some 0.03 g) for at most 1.5 s (the second half of a 3 s lowering) takes off at most
    /// about 0.5 m/s. A faster lowering brakes loudly, and its rest is known by its braking.
    static let quietLoweringMps = 0.5

    private let settings: DetectorSettings
    /// The last `windowS` of readings and the one before them, so that a
    /// reading missing at the window's start still leaves it covered.
    private var recent: [Raw] = []
    private var noise = NoiseFloor()
    private var biasG = 0.0
    /// Since when the windows have been flat, mean aside.
    private var flatSince: Double?
    private var lastLearnedT = -Double.infinity
    /// Readings learned from at rest.
    private var restReadings = 0
    /// The readings since the bar began to move; empty at rest.
    private var moving = ChunkedWindow<Raw>()
    private var isStill = true
    /// Velocity integrated since the last rest: a bar gliding at constant speed
    /// has quiet acceleration too, but not zero velocity.
    private var velocitySinceRest = 0.0
    private var quietSince: Double?
    private var loudSince: Double?
    private var estimator = VerticalEstimator()
    private var lastT = -Double.infinity
    /// The bar's height at the latest rest, in the tracker's own frame.
    private var heightM = 0.0
    /// Heights through the recent movements (rests are flat between them).
    private var heights = ChunkedWindow<Height>()
    /// The top of the latest rise: the descent into the next one is looked for after it.
    private var lastPeakT = -Double.infinity
    /// When the readings last stopped for longer than `maxGapS` (nil: never): the heights
    /// before it are carried on from a height the bar may have left during the silence.
    private var lastGapT: Double?
    /// While the bar moves: its height now and the lowest it has been in this movement, by the
    /// velocity integral so far (drift not yet removed: see `lowest`). Nil at rest.
    private var liveHeightM: Double?
    private var liveLowM: Double?
    /// ... and the highest it has surely been, each height lowered by what the integral could not
    /// be sure of when the bar was there (`highest`).
    private var liveHighM: Double?
    /// While within `crawlS` of the rest after a movement that ended rising: that movement's
    /// readings and the rest's since, its height at its start, and the rise it ended in.
    private var lastMovement: [Raw]?
    private var lastMovementHeightM: Double?
    private var endedRising: ConcentricCandidate?
    /// A movement whose rest the integral cannot vouch for (`unbraked`), kept with the rest's
    /// readings (their velocity integrated on) for `crawlS`: when the bar moves again within it,
    /// the movement goes on as if no rest came between; else it ends at that rest.
    private var suspended: Suspended?
    /// While a movement goes on from such a rest: when that rest was found. A movement glides
    /// through one rest at most: if it comes to another the integral cannot vouch for, it ends there.
    private var glidedFromT: Double?

    /// A movement that came to an unbraked rest: its readings and the rest's since, where the rest
    /// began and when it was found.
    struct Suspended: Sendable, Codable {
        var raw: [Raw]
        var restStart: Double
        var foundT: Double
    }

    init(settings: DetectorSettings) { self.settings = settings }

    /// The lowest the bar has surely been after `lowest.after` (nil: it has not moved since),
    /// brought up to date: the movements since, and the one in progress by its velocity integral
    /// so far, raised by what that integral cannot be sure of (3 sigma of the noise's random walk
    /// and the offset's uncertainty, integrated twice), so a lowering is known while the bar is
    /// still on its way down, never made up by drift.
    func lowest(_ lowest: inout LowestHeight) -> Double? {
        let done = lowest.update(heights)
        guard !isStill, let live = liveLowM, let start = moving.first?.t, start > lowest.after else { return done }
        let sinceRest = lastT - start
        let sure = live + heightMargin(over: sinceRest)
        return min(done ?? sure, sure)
    }

    /// The highest the bar has surely been after `t` (nil: no height known since): the movements
    /// since, and the one in progress by its velocity integral so far, lowered by what that
    /// integral cannot be sure of (as `lowest` raises it).
    func highest(after t: Double) -> Double? {
        var high = heights.reversed().lazy.prefix { $0.t > t }.map(\.m).max()
        if !isStill, let sure = liveHighM, let start = moving.first?.t, start > t { high = max(high ?? sure, sure) }
        return high
    }

    /// What a height integrated over `duration` from a rest cannot be sure of: 3 sigma of the
    /// noise's random walk and the offset's uncertainty, integrated twice.
    private func heightMargin(over duration: Double) -> Double {
        3 * positionNoise(over: duration) + offsetUncertaintyG * standardGravity * duration * duration / 2
    }

    mutating func feed(
        t: Double, accG: (Double, Double, Double), gyroDps: (Double, Double, Double)?,
        angleDeg: (Double, Double)?
    ) -> [IMURise] {
        guard t > lastT else { return [] }  // a repeated or out-of-order reading
        let vertical: Double, along: Double
        if let angleDeg {
            along = worldVertical(x: accG.0, y: accG.1, z: accG.2, rollDeg: angleDeg.0, pitchDeg: angleDeg.1)
            vertical = along - 1
        } else {
            guard let estimated = estimator.vertical(t: t, acc: accG, gyroDps: gyroDps) else { return [] }
            vertical = estimated
            along = estimator.lastAlong
        }
        if t - lastT > Self.maxGapS {
            startOver()
            if lastT.isFinite { lastGapT = t }
        }
        lastT = t
        let a = vertical - biasG
        recent.append(Raw(t: t, aG: a, along: along))
        if let inside = recent.firstIndex(where: { t - $0.t < Self.windowS }), inside > 1 { recent.removeFirst(inside - 1) }
        let quietWindow = isQuiet(at: t)
        if !isStill, let previous = moving.last {
            velocitySinceRest += (previous.aG + a) / 2 * standardGravity * (t - previous.t)
        }
        // Drift can leave the integral off zero at a real rest: quiet for long
        // enough (longer than any glide through a lift) within the movement is
        // rest, unless the integral says the bar still glides at its top speed.
        // (A lone loud window among quiet ones is noise: the quiet lasts until
        // the loud ones do for a tenth of a second.)
        if quietWindow {
            quietSince = quietSince ?? t
            loudSince = nil
        } else {
            loudSince = loudSince ?? t
            if let loud = loudSince, t - loud >= Self.loudResetS { quietSince = nil }
        }
        // (Quiet before the movement began says nothing of whether it has stopped.)
        let longQuiet = quietSince.map { t - max($0, moving.first?.t ?? $0) >= Self.restAfterQuietS } ?? false
        let quiet = quietWindow && (isStill || (longQuiet && !isGliding(at: t) && hasBraked(at: t)) || hasStopped(at: t))
        if isStill, let rise = endedRising, t - rise.completedT > Self.crawlS { forgetLastMovement() }
        if isStill, let kept = suspended, t - kept.foundT > Self.crawlS {
            // Still quiet `crawlS` on: a rest after all, and the movement ends where it began.
            suspended = nil
            moving = ChunkedWindow(kept.raw)
            defer { moving.removeAll() }
            return segment(upTo: kept.restStart, completedT: t)
        }
        if isStill, var kept = suspended {
            if let previous = kept.raw.last {
                let v = previous.v + (previous.aG + a) / 2 * standardGravity * (t - previous.t)
                kept.raw.append(Raw(t: t, aG: a, along: along, v: v))
            }
            suspended = kept
            if !quiet {
                // The bar moves on within a moment of that rest: it was a glide, not a rest.
                suspended = nil
                isStill = false
                glidedFromT = kept.foundT
                moving = ChunkedWindow(kept.raw)
                velocitySinceRest = kept.raw.last?.v ?? 0
                var height = heightM, low = heightM, high = heightM
                for (p, q) in zip(kept.raw, kept.raw.dropFirst()) {
                    height += (p.v + q.v) / 2 * (q.t - p.t)
                    (low, high) = (min(low, height), max(high, height - heightMargin(over: q.t - (kept.raw.first?.t ?? q.t))))
                }
                (liveHeightM, liveLowM, liveHighM) = (height, low, high)
                return []
            }
            return []
        }
        if isStill {
            if quiet {
                lastMovement?.append(Raw(t: t, aG: a, along: along))
                // At rest the vertical acceleration is zero: learn the offset (or,
                // without angles, gravity's size) from the window's oldest reading,
                // which a whole quiet window has followed, never from the
                // newest, which may be the first of a movement.
                if let settled = recent.first, settled.t > lastLearnedT {
                    lastLearnedT = settled.t
                    // A running mean at first, then a slow average (some 7 s at 60 Hz).
                    restReadings += 1
                    let rate = max(1 / Double(restReadings), 0.0025)
                    // Without angles gravity's size is learned; with them, the offset.
                    if angleDeg == nil {
                        estimator.learnRest(along: settled.along, rate: rate)
                    } else {
                        biasG += rate * (settled.along - 1 - biasG)
                    }
                }
                return []
            }
            isStill = false
            glidedFromT = nil
            moving = ChunkedWindow(recent)  // the movement began within the window
            velocitySinceRest = 0
            for (p, q) in zip(recent, recent.dropFirst()) { velocitySinceRest += (p.aG + q.aG) / 2 * standardGravity * (q.t - p.t) }
            (liveHeightM, liveLowM, liveHighM) = (heightM, heightM, heightM)
        } else {
            if let previous = moving.last, let live = liveHeightM {
                let height = live + (previous.v + velocitySinceRest) / 2 * (t - previous.t)
                (liveHeightM, liveLowM) = (height, min(liveLowM ?? height, height))
                // (The margin is never negative: only a height above the highest so far can raise it.)
                if height > liveHighM ?? -.infinity {
                    let sure = height - heightMargin(over: t - (moving.first?.t ?? t))
                    liveHighM = max(liveHighM ?? sure, sure)
                }
            }
            moving.append(Raw(t: t, aG: a, along: along, v: velocitySinceRest))
        }
        if moving.count > 6000 { moving.removeFirst(moving.count - 6000) }  // 30 s at 200 Hz
        guard quiet else { return [] }
        // Still again: the movement between two rests is complete.
        isStill = true
        (liveHeightM, liveLowM, liveHighM) = (nil, nil, nil)
        let restStart = recent.first?.t ?? t
        // A rest the integral cannot vouch for: the movement is kept a moment (`suspended`).
        if unbraked(at: t) {
            suspended = Suspended(raw: Array(moving), restStart: restStart, foundT: t)
            moving.removeAll()
            return []
        }
        defer { moving.removeAll() }  // not read at rest, and made again when the bar moves: its memory is given back
        return segment(upTo: restStart, completedT: t)
    }

    /// Whether the window ending at `t` is flat noise: spread within the
    /// sensor's noise, and no trend beyond what noise makes.
    private mutating func isQuiet(at t: Double) -> Bool {
        guard recent.count >= 5, let first = recent.first, t - first.t >= Self.windowS else { return false }
        let fit = LineFit(recent.lazy.map { ($0.t, $0.aG) })
        let (n, sxx) = (fit.count, fit.sxx)
        let sd = (fit.syy / n).squareRoot()
        noise.add(t: t, windowSD: sd)
        let floor = noise.sd ?? Self.initialNoiseG
        // A slow lift (a heavy deadlift) can stay quiet for most of a second,
        // but its acceleration drifts steadily; at rest it is flat noise.
        guard sd <= max(Self.minimumQuietG, Self.quietNoiseFactor * floor + 0.003), sxx > 0,
            abs(fit.slope) <= 3 * floor / sxx.squareRoot() + 0.01
        else {
            flatSince = nil
            return false
        }
        flatSince = flatSince ?? t
        if let since = flatSince, t - since >= Self.flatRestS { return true }
        // A steady acceleration or braking is flat too, but not at zero. (Until
        // rests have taught the offset, zero is only roughly known.)
        let margin =
            restReadings == 0
            ? Self.initialOffsetUncertaintyG
            : min(Self.initialOffsetUncertaintyG, max(Self.restMeanMarginG, offsetUncertaintyG))
        return abs(fit.meanY) <= 3 * floor / n.squareRoot() + margin
    }

    /// Whether a moving bar whose window is quiet has come to rest, by what
    /// its velocity integral says (asked only then: it looks back over the movement).
    private func hasStopped(at t: Double) -> Bool {
        let residual = abs(velocitySinceRest)
        let sinceRest = moving.first.map { t - $0.t } ?? 0
        let braked = hasBraked(at: t)
        if residual < Self.restMaxVelocityMps { return braked }
        let midway = isMidway(at: t)
        // No rep takes this long: the integral has lost its way (a violent
        // pick-up, a knock), so a quiet bar at the end of its range is at rest.
        if sinceRest >= Self.longestMovementS, !midway { return true }
        // Beyond the bare limit, a leftover is drift only if it is within what
        // noise, the offset's uncertainty and sampling make of it, and small
        // beside the movement's own speed (a heavy pull's glide keeps most of
        // it), and the bar is not partway through its range.
        let windowStart = recent.first?.t ?? t
        let recentPeak = moving.reversed().prefix { $0.t >= windowStart - Self.glideLookBackS }.map { abs($0.v) }.max() ?? 0
        let allowance =
            Self.restMaxVelocityMps + 2.5 * velocityNoise(over: sinceRest) + offsetUncertaintyG * standardGravity * sinceRest
            + Self.samplingShare * recentPeak
        return residual < allowance && (residual < Self.glideShare * recentPeak || (recentPeak < Self.slowestGlideMps && braked)) && !midway
    }

    /// Whether the bar has braked since the movement's fastest: a bar comes to rest only by
    /// slowing, so a leftover beyond what noise and the offset make of the integral must be under
    /// half the movement's peak. (A slow descent that is quiet in every window, 3 s down at
    /// 0.2-0.3 m/s, has not braked while it is still at or near its top speed.)
    private func hasBraked(at t: Double) -> Bool {
        let residual = abs(velocitySinceRest)
        let sinceRest = moving.first.map { t - $0.t } ?? 0
        let peak = moving.reduce(residual) { max($0, abs($1.v)) }
        return residual <= max(2 * velocityNoise(over: sinceRest) + offsetUncertaintyG * standardGravity * sinceRest, 0.5 * peak)
    }

    /// Whether a rest just found is one the velocity integral cannot vouch for. An accelerometer
    /// cannot tell a steady glide from rest, and a 3-1-X lowering at 0.2-0.3 m/s is quiet in every
    /// window, so a rest found while the integral still says over `restMaxVelocityMps` may be the
    /// bar still on its way: when the integral has not come down to half the movement's fastest
    /// (no braking seen), or the movement is a slow lowering (never up, never faster than
    /// `quietLoweringMps`), whose braking is as quiet as the rest of it. Only for a movement
    /// short enough for its integral to mean something, and surely a movement (its fastest at
    /// `slowestGlideMps` or more and beyond 3 sigma of the noise and the offset's uncertainty), not
    /// the noise's own wandering at rest; once a movement (`glidedFromT`).
    private func unbraked(at t: Double) -> Bool {
        let residual = abs(velocitySinceRest)
        guard glidedFromT == nil, residual >= Self.restMaxVelocityMps, let start = moving.first?.t, t - start < Self.longestMovementS else { return false }
        let fastest = moving.reduce(velocitySinceRest) { abs($1.v) > abs($0) ? $1.v : $0 }
        let peak = abs(fastest)
        let sinceRest = t - start
        // Still going the way it went fastest (a leftover the other way is drift, not a glide).
        guard fastest * velocitySinceRest > 0, peak >= Self.slowestGlideMps,
            peak > 3 * velocityNoise(over: sinceRest) + offsetUncertaintyG * standardGravity * sinceRest
        else { return false }
        let slowLowering = velocitySinceRest < 0 && peak < Self.quietLoweringMps && moving.allSatisfy { $0.v < Self.restMaxVelocityMps }
        return residual > 0.5 * peak || slowLowering
    }

    /// Whether the velocity integral says the bar glides on, beyond what noise (2 sigma) and
    /// half the offset's uncertainty make of it over the movement: a tempo's 3 s descent is
    /// quiet for over a second at a steady 0.2-0.3 m/s, which long quiet alone would call rest
    /// (and the descent's lower half would be lost). Settled bars measured well inside it.
    private func isGliding(at t: Double) -> Bool {
        let sinceRest = moving.first.map { t - $0.t } ?? 0
        let drift = Self.restMaxVelocityMps / 2 + 2 * velocityNoise(over: sinceRest) + offsetUncertaintyG / 2 * standardGravity * sinceRest
        return sinceRest < Self.longestMovementS && abs(velocitySinceRest) > drift
    }

    /// Whether the bar is partway between the lowest and highest it has been
    /// lately: where a heavy pull glides, not where a bar comes to rest (the
    /// top, the floor, the chest, the rack). Heights of this movement are
    /// its integral so far, drift and all: good enough for a half-metre range.
    private func isMidway(at t: Double) -> Bool {
        var p = heightM, low = heightM, high = heightM
        for (a, b) in zip(moving, moving.dropFirst()) {
            p += (a.v + b.v) / 2 * (b.t - a.t)
            low = min(low, p)
            high = max(high, p)
        }
        for h in heights.reversed() {
            guard t - h.t <= Self.midwayLookBackS else { break }
            low = min(low, h.m)
            high = max(high, h.m)
        }
        guard high - low >= Self.midwayRangeM else { return false }
        let share = (p - low) / (high - low)
        return share > 0.2 && share < 0.8
    }

    /// How far the learned offset may still be off, in g: three standard
    /// errors of the rest readings' mean, never under `residualOffsetG`.
    private var offsetUncertaintyG: Double {
        max(Self.residualOffsetG, 3 * (noise.sd ?? Self.initialNoiseG) / Double(max(1, restReadings)).squareRoot())
    }

    /// What the sensor's noise alone makes of a velocity integrated over `duration`.
    private func velocityNoise(over duration: Double) -> Double {
        let floor = noise.sd ?? Self.initialNoiseG
        let period = recent.count > 1 ? (recent.last!.t - recent.first!.t) / Double(recent.count - 1) : 0.01
        return floor * standardGravity * (period * max(0, duration)).squareRoot()
    }

    /// What the sensor's noise alone makes of a distance integrated twice
    /// over `duration` (a random walk's: sigma sqrt(dt) T^1.5 / sqrt 3).
    private func positionNoise(over duration: Double) -> Double {
        velocityNoise(over: duration) * max(0, duration) / 3.0.squareRoot()
    }

    /// After a silence: what the bar did is unknown, so wait for a rest.
    private mutating func startOver() {
        recent.removeAll()
        moving.removeAll()
        isStill = true
        quietSince = nil
        loudSince = nil
        flatSince = nil
        velocitySinceRest = 0
        (liveHeightM, liveLowM, liveHighM) = (nil, nil, nil)
        (suspended, glidedFromT) = (nil, nil)
        forgetLastMovement()
    }

    private mutating func forgetLastMovement() { (lastMovement, lastMovementHeightM, endedRising) = (nil, nil, nil) }

    /// Whether the bar is at rest (by the tracker's windows) as of the last reading.
    var isResting: Bool { isStill && suspended == nil }

    /// `raw` integrated from rest to rest: velocity with the drift removed linearly between the
    /// two zero-velocity updates, heights carried on from `startM`.
    private func integrated(_ raw: [Raw], from startM: Double) -> [KinematicSample] {
        guard let first = raw.first, let last = raw.last, last.t > first.t else { return [] }
        var velocity = [0.0]
        for (a, b) in zip(raw, raw.dropFirst()) {
            velocity.append(velocity.last! + (a.aG + b.aG) / 2 * standardGravity * (b.t - a.t))
        }
        let drift = velocity.last!
        let span = last.t - first.t
        var samples: [KinematicSample] = []
        var position = startM
        for (index, point) in raw.enumerated() {
            let v = velocity[index] - drift * (point.t - first.t) / span
            if index > 0 { position += (v + samples[index - 1].velocityMps) / 2 * (point.t - raw[index - 1].t) }
            samples.append(KinematicSample(t: point.t, positionM: position, velocityMps: v, accelerationMps2: point.aG * standardGravity))
        }
        return samples
    }

    /// The movement since the last rest, integrated, its heights carried on
    /// from that rest's, and the rises in it.
    private mutating func segment(upTo restStart: Double, completedT: Double) -> [IMURise] {
        let raw = moving.filter { $0.t <= restStart }  // the quiet window itself is rest
        let before = (lastMovement, lastMovementHeightM, endedRising)
        forgetLastMovement()
        guard raw.count >= 5, let first = raw.first, let last = raw.last, last.t > first.t else { return [] }
        // Zero-velocity update: the bar is at rest at both ends; remove the drift linearly.
        let samples = integrated(raw, from: heightM)
        let startM = heightM
        let position = samples.last!.positionM
        heightM = position
        heights.append(contentsOf: samples.map { Height(t: $0.t, m: $0.positionM) })
        // The last 20 s (a window drops its oldest without moving the rest: Window.swift).
        if let newest = heights.last, let oldest = heights.first, newest.t - oldest.t > 20 {
            heights.removeFirst(heights.firstIndex { newest.t - $0.t <= 20 } ?? 0)
        }
        var turning = TurningPoints(hysteresisM: settings.hysteresisM, settleS: settings.settleS)
        var found: [ConcentricCandidate] = []
        for sample in samples {
            if let candidate = turning.feed(t: sample.t, positionM: sample.positionM) { found.append(candidate) }
        }
        // A rise still open at the end of the movement ends at the rest that follows.
        var openAtRest: ConcentricCandidate?
        if let end = turning.feed(t: last.t + settings.settleS, positionM: samples.last!.positionM) {
            found.append(end)
            openAtRest = end
        }
        // The lowest the bar has been over the last 20 s, this movement among them.
        let lowestM = heights.lazy.map(\.m).min() ?? position
        let rises = found.map { candidate in
            var rise = candidate
            rise.completedT = completedT
            rise.peakT = min(rise.peakT, last.t)
            let valleyM = samples.last { $0.t <= rise.valleyT }?.positionM ?? samples[0].positionM
            rise.peakM = samples.last { $0.t <= rise.peakT }?.positionM ?? position
            // How far the bar came down into the rise, from the highest point since the previous top (at most 8 s back).
            let since = max(rise.valleyT - 8, lastPeakT)
            let before = heights.filter { $0.t >= since && $0.t <= rise.valleyT }.map(\.m).max() ?? valleyM
            rise.descentBeforeM = max(0, before - valleyM)
            rise.riseUncertaintyM = positionNoise(over: rise.peakT - rise.valleyT)
            lastPeakT = rise.peakT
            // Only over heights of one unbroken stream: across a silence the bar may have been
            // lifted (to the hang, say) while the heights carried on from the floor.
            let unbroken = lastGapT.map { rise.valleyT - $0 > 20 } ?? true
            let fromLowest = unbroken && valleyM - lowestM <= settings.hysteresisM + 3 * rise.riseUncertaintyM
            return IMURise(candidate: rise, trace: samples, fromLowest: fromLowest, endsAtRest: candidate == openAtRest)
        }
        // A rise that stopped without the bar coming down and went on up within the same movement
        // (no rest between) is one rise: a grinder past its sticking point, as the laser's held rise
        // (StationDetector.arrive). As there, only a rise lowered into is joined (a pick-up to the
        // shoulders is no part of the press after it), and only when the bar goes on further than
        // a settling at the top does (`stickingM`, `stickingShare`, Reps.swift): a re-rack after
        // the last rep's top is no part of it.
        var joined: [IMURise] = []
        for rise in rises {
            if let earlier = joined.last?.candidate, earlier.endedInPause,
                earlier.descentBeforeM >= StationDetector.returnShare * earlier.riseM,
                rise.candidate.peakM - rise.candidate.riseM >= earlier.peakM - settings.hysteresisM,
                rise.candidate.peakM >= earlier.peakM + stickingFurtherM(after: earlier.riseM)
            {
                var whole = rise.candidate
                whole.valleyT = earlier.valleyT
                whole.riseM = whole.peakM - (earlier.peakM - earlier.riseM)
                whole.descentBeforeM = earlier.descentBeforeM
                whole.riseUncertaintyM = positionNoise(over: whole.peakT - whole.valleyT)
                joined[joined.count - 1] = IMURise(
                    candidate: whole, trace: samples, fromLowest: joined[joined.count - 1].fromLowest, endsAtRest: rise.endsAtRest)
            } else {
                joined.append(rise)
            }
        }
        // The rest before this movement may have been a grinder's crawl: its first rise is also
        // given as the rest of the rise the movement before ended in, the two movements and the
        // rest between integrated as one (the crawl's speed then counts, not a zero-velocity
        // update in the middle of the rise). The detector decides which is the rep (`held`).
        if let kept = before.0, let keptM = before.1, let earlier = before.2, let keptEnd = kept.last?.t, !joined.isEmpty {
            let whole = integrated(kept + raw.filter { $0.t > keptEnd }, from: keptM)
            if let valley = whole.last(where: { $0.t <= earlier.valleyT }), let peak = whole.last(where: { $0.t <= joined[0].candidate.peakT }) {
                var candidate = joined[0].candidate
                candidate.valleyT = earlier.valleyT
                candidate.riseM = peak.positionM - valley.positionM
                candidate.descentBeforeM = earlier.descentBeforeM
                candidate.riseUncertaintyM = positionNoise(over: candidate.peakT - candidate.valleyT)
                joined[0].continued = (candidate, whole)
            }
        }
        // This movement ended rising: kept a moment, in case the rest after it is a crawl.
        if let last = joined.last, last.endsAtRest {
            (lastMovement, lastMovementHeightM, endedRising) = (Array(moving), startM, last.candidate)
        }
        return joined
    }
}

/// In a window, a reading's time is 32 bits (Window.swift): 16 bytes, not 24.
extension IMUTracker.Raw: WindowElement {
    struct Stored: Sendable {
        var offset: Int32
        var a: Float, alongG: Float, velocity: Float
    }

    var microseconds: Int64 { WindowTime.microseconds(t) }
    func stored(offset: Int32) -> Stored { Stored(offset: offset, a: a, alongG: alongG, velocity: velocity) }
    static func offset(of stored: Stored) -> Int32 { stored.offset }

    init(stored: Stored, microseconds: Int64) {
        t = WindowTime.seconds(microseconds)
        (a, alongG, velocity) = (stored.a, stored.alongG, stored.velocity)
    }
}

/// In a window, a height is its time in 32 bits and the height in single
/// precision (0.12 µm at 1 m, against a drift of centimetres): 8 bytes, not 16.
extension IMUTracker.Height: WindowElement {
    struct Stored: Sendable {
        var offset: Int32
        var m: Float
    }

    var microseconds: Int64 { WindowTime.microseconds(t) }
    func stored(offset: Int32) -> Stored { Stored(offset: offset, m: Float(m)) }
    static func offset(of stored: Stored) -> Int32 { stored.offset }
    init(stored: Stored, microseconds: Int64) { self.init(t: WindowTime.seconds(microseconds), m: Double(stored.m)) }
}
