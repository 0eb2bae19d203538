import Foundation
import VBTQuery

// Load advice (docs/detection.md, "Load advice"): after a set, the load that should bring the
// next set to the plan's target velocity, from today's load-velocity relationship, rounded to
// what the gym's plates can make; and, when the set's velocity loss went past the cut-off,
// one set fewer. Pure: the notifier calls it at each set's end, the tests on simulated athletes.
// Today's line is `E1RMEstimator.fit`'s, the product's one load-velocity fit.

/// One set done today, as advice reads it.
public struct AdvisedSet: Sendable, Equatable, Codable {
    /// The load on the bar, kg.
    public var loadKg: Double
    /// The set's velocity, m/s: the mean of its first reps' mean velocities (`LoadAdvisor.repsPerSet`).
    public var velocityMps: Double
    /// Velocity loss within the set, percent (nil: not known).
    public var velocityLossPct: Double?

    /// Creates a set.
    public init(loadKg: Double, velocityMps: Double, velocityLossPct: Double? = nil) {
        (self.loadKg, self.velocityMps, self.velocityLossPct) = (loadKg, velocityMps, velocityLossPct)
    }

    enum CodingKeys: String, CodingKey {
        case loadKg = "load_kg"
        case velocityMps = "velocity_mps"
        case velocityLossPct = "velocity_loss_pct"
    }
}

/// What the gym can put on a bar.
public struct GymLoads: Sendable, Equatable, Codable {
    /// The smallest total increment the plates make, kg (two 1.25 kg plates: 2.5).
    public var plateStepKg: Double
    /// The empty bar, kg: never suggest less.
    public var barKg: Double

    /// Creates the gym's loads.
    public init(plateStepKg: Double = 2.5, barKg: Double = 20) { (self.plateStepKg, self.barKg) = (plateStepKg, barKg) }

    /// `kg` rounded to the nearest load the plates make, and at least the bar.
    public func rounded(_ kg: Double) -> Double {
        let step = plateStepKg > 0 ? plateStepKg : 0.5
        return max(barKg, (kg / step).rounded() * step)
    }
}

/// The advice for the next set.
public struct LoadAdvice: Sendable, Equatable, Codable {
    /// How the suggested load was found.
    public enum Method: String, Sendable, Codable {
        /// A line through today's sets at `loads` distinct loads.
        case todayFit = "today-fit"
        /// The stored profile's slope through today's sets (today's offset on that profile).
        case profileOffset = "profile-offset"
    }

    /// The suggested load for the next set, kg, rounded to the plate step; nil when nothing
    /// sensible can be said (`reason` says why).
    public var loadKg: Double?
    public var method: Method?
    /// Distinct loads of today's sets the advice used.
    public var loads: Int
    /// The target it aims at, m/s.
    public var targetMps: Double
    /// The load where today's line meets the target, before rounding, kg.
    public var exactLoadKg: Double?
    /// Do one set fewer than planned.
    public var fewerSets: Bool
    /// Why one set fewer (nil when not).
    public var fewerSetsReason: String?
    /// How the load was derived, or why there is none, in words.
    public var reason: String

    enum CodingKeys: String, CodingKey {
        case loadKg = "load_kg"
        case method, loads
        case targetMps = "target_mps"
        case exactLoadKg = "exact_load_kg"
        case fewerSets = "fewer_sets"
        case fewerSetsReason = "fewer_sets_reason"
        case reason
    }
}

/// Computes load advice.
public enum LoadAdvisor {
    /// A set's velocity is the mean of its first this many reps: enough to average out one
    /// rep's noise, early enough that the set's own fatigue has not yet pulled it down.
    public static let repsPerSet = 3
    /// Today's line is used alone when its loads span at least this share of the heaviest;
    /// a narrower line swings with each set's noise, and the stored slope is steadier.
    public static let minSpanShare = 0.15
    /// The velocity-loss cut-off when the plan gives none, percent.
    public static let defaultCutoffPct = 20.0

    /// The advice after today's `sets` (oldest first) for a next set aimed at `targetMps`.
    /// `profileSlopeMpsPerKg`: the stored profile's slope (negative), used when today's loads
    /// are too close together for a line of their own. `cutoffPct`: the velocity loss past which
    /// the last set asks for one set fewer. `readinessLow`: a reason when the athlete's readiness
    /// is below usual (one set fewer too), nil otherwise.
    public static func advise(
        sets: [AdvisedSet], targetMps: Double, profileSlopeMpsPerKg: Double?, gym: GymLoads = GymLoads(),
        cutoffPct: Double? = nil, readinessLow: String? = nil
    ) -> LoadAdvice {
        var advice = LoadAdvice(
            loadKg: nil, method: nil, loads: 0, targetMps: targetMps, exactLoadKg: nil, fewerSets: false, fewerSetsReason: nil, reason: "")
        let cutoff = cutoffPct ?? defaultCutoffPct
        if let loss = sets.last?.velocityLossPct, loss.isFinite, loss > cutoff {
            advice.fewerSets = true
            advice.fewerSetsReason = String(format: "the last set lost %.0f %% velocity, past the %.0f %% cut-off", loss, cutoff)
        } else if let readinessLow {
            advice.fewerSets = true
            advice.fewerSetsReason = readinessLow
        }
        guard targetMps.isFinite, targetMps > 0 else {
            advice.reason = "no velocity target"
            return advice
        }
        let valid = sets.filter { $0.loadKg.isFinite && $0.loadKg > 0 && $0.velocityMps.isFinite && $0.velocityMps > 0 }
        guard !valid.isEmpty else {
            advice.reason = "no set with a load and a velocity yet today"
            return advice
        }
        // One point per load: the mean of that load's sets (repeated sets at a load average
        // their noise out rather than keep the fastest, which would be biased upward).
        let byLoad = Dictionary(grouping: valid, by: \.loadKg)
        let points = byLoad.keys.sorted().map { load in
            let velocities = byLoad[load, default: []].map(\.velocityMps)
            return (load: load, velocity: velocities.reduce(0, +) / Double(velocities.count))
        }
        advice.loads = points.count
        let heaviest = points[points.count - 1].load
        let span = heaviest - points[0].load
        var intercept: Double
        var slope: Double
        if points.count >= 2, span >= minSpanShare * heaviest, let fit = line(points), fit.slope < 0 {
            (intercept, slope) = fit
            advice.method = .todayFit
            advice.reason = "today's line through \(points.count) loads"
        } else if let profile = profileSlopeMpsPerKg, profile.isFinite, profile < 0 {
            // Today's offset on the stored slope: the line of that slope through the mean of
            // today's sets (each set weighs the same).
            slope = profile
            intercept = valid.reduce(0) { $0 + $1.velocityMps - profile * $1.loadKg } / Double(valid.count)
            advice.method = .profileOffset
            advice.reason =
                "today's \(valid.count) set\(valid.count == 1 ? "" : "s") at \(points.count) load\(points.count == 1 ? "" : "s") on the stored profile's slope"
        } else {
            advice.reason =
                points.count >= 2
                ? "today's loads are too close together for a line, and there is no stored profile falling with load"
                : "one load today and no stored profile falling with load"
            return advice
        }
        let exact = (targetMps - intercept) / slope
        guard exact.isFinite, exact > 0 else {
            advice.reason += String(format: "; the target %.2f m/s is above the line's velocity at any load", targetMps)
            return advice
        }
        advice.exactLoadKg = exact
        advice.loadKg = gym.rounded(exact)
        if exact < gym.barKg { advice.reason += "; the target needs less than the bar" }
        return advice
    }

    /// Least squares of velocity on load through `points` (distinct loads), by
    /// `E1RMEstimator.fit`; nil with fewer than two. Only the line is read: the MVT given
    /// to the fit (0) names no e1RM that advice would use.
    static func line(_ points: [(load: Double, velocity: Double)]) -> (intercept: Double, slope: Double)? {
        let fit = E1RMEstimator.fit(points: points.map { LoadVelocityFit.Point(loadKg: $0.load, meanVelocityMps: $0.velocity) }, mvtMps: 0)
        return fit.map { ($0.interceptMps, $0.slopeMpsPerKg) }
    }

    /// Why today's readiness asks for one set fewer: a verdict of below usual that is not within
    /// noise (one set more or less would not change it), in words with the smallest worthwhile
    /// change as the ± of the usual: `readiness 94, below your usual 100 ± 2`. Nil otherwise.
    public static func readinessLow(_ assessment: ReadinessAssessment) -> String? {
        guard assessment.verdict == .below, !assessment.withinNoise, let score = assessment.scorePct, score.isFinite else { return nil }
        var words = String(format: "readiness %.0f, below your usual 100", score)
        if let swc = assessment.swcPct, swc.isFinite { words += String(format: swc < 1 ? " ± %.1f" : " ± %.0f", swc) }
        return words
    }

    /// The velocity advice reads from one set's reps (their mean velocities, in order): the
    /// mean of the first `repsPerSet`; nil without a rep.
    public static func setVelocity(_ repVelocitiesMps: [Double]) -> Double? {
        let first = repVelocitiesMps.filter { $0.isFinite && $0 > 0 }.prefix(repsPerSet)
        return first.isEmpty ? nil : first.reduce(0, +) / Double(first.count)
    }
}
