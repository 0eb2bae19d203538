import Foundation

// Today's readiness (docs/detection.md, "Readiness"): the velocity of the day's first sets
// against the athlete's own load-velocity profile from earlier sessions, judged against the
// athlete's own day-to-day variation. Pure: the recorder stores what this computes, and the
// load advice reads it through `Readiness.assess`.

/// How today's first sets compare with the athlete's usual.
public enum ReadinessVerdict: String, Codable, Sendable, CaseIterable {
    case better = "better-than-usual"
    case usual = "as-usual"
    case below = "below-usual"
    /// Fewer than `Readiness.minSessions` earlier sessions with loads, or no profile: no number.
    case tooLittleHistory = "too-little-history"

    /// The verdict in words.
    public var words: String {
        switch self {
        case .better: "better than usual"
        case .usual: "as usual"
        case .below: "below usual"
        case .tooLittleHistory: "too little history"
        }
    }
}

/// One readiness figure and how it was judged.
public struct ReadinessAssessment: Codable, Sendable, Equatable {
    public var verdict: ReadinessVerdict
    /// Mean of observed / predicted velocity over today's first sets, in % (100: as the profile
    /// predicts); nil with too little history.
    public var scorePct: Double?
    /// The athlete's typical error: the SD of the earlier sessions' own scores (percentage points).
    public var typicalErrorPct: Double?
    /// The smallest worthwhile change, `Readiness.swcShare` x the typical error (percentage points).
    public var swcPct: Double?
    /// The standard error of today's score from the spread of its sets (nil with one set).
    public var standardErrorPct: Double?
    /// The score is within one standard error of the +-SWC boundary (always so with one set):
    /// one set more or less could change the verdict.
    public var withinNoise: Bool
    /// Today's sets the score came from (at most `Readiness.firstSets`).
    public var sets: Int
    /// Earlier sessions with loads in the window (at most `Readiness.windowSessions`).
    public var pastSessions: Int
    /// The reference profile v = intercept + slope x load (nil with too little history).
    public var interceptMps: Double?
    public var slopeMpsPerKg: Double?

    public init(
        verdict: ReadinessVerdict, scorePct: Double? = nil, typicalErrorPct: Double? = nil, swcPct: Double? = nil,
        standardErrorPct: Double? = nil, withinNoise: Bool = false, sets: Int, pastSessions: Int, interceptMps: Double? = nil,
        slopeMpsPerKg: Double? = nil
    ) {
        (self.verdict, self.scorePct, self.typicalErrorPct, self.swcPct, self.standardErrorPct) = (
            verdict, scorePct, typicalErrorPct, swcPct, standardErrorPct
        )
        (self.withinNoise, self.sets, self.pastSessions, self.interceptMps, self.slopeMpsPerKg) = (
            withinNoise, sets, pastSessions, interceptMps, slopeMpsPerKg
        )
    }

    enum CodingKeys: String, CodingKey {
        case verdict, sets
        case scorePct = "score_pct"
        case typicalErrorPct = "typical_error_pct"
        case swcPct = "swc_pct"
        case standardErrorPct = "standard_error_pct"
        case withinNoise = "within_noise"
        case pastSessions = "past_sessions"
        case interceptMps = "intercept_mps"
        case slopeMpsPerKg = "slope_mps_per_kg"
    }

    /// As every place shows it: `96 % (as usual)`, `104 % (better than usual, within noise)`, or
    /// `too little history (3 of 5 sessions)`.
    public var text: String {
        guard let scorePct else {
            guard pastSessions >= Readiness.minSessions else { return "too little history (\(pastSessions) of \(Readiness.minSessions) sessions)" }
            return "too little history (no load-velocity profile)"
        }
        return String(format: "%.0f %%", scorePct) + " (\(verdict.words)\(withinNoise ? ", within noise" : ""))"
    }
}

/// The readiness estimator. Definitions (docs/detection.md, "Readiness"):
/// - profile: `E1RMEstimator.fit` through one point per load, the mean over the window's sessions
///   of each session's fastest rep at that load;
/// - score: 100 x mean over a session's first `firstSets` sets with a load of the set's best
///   mean velocity / the profile's velocity at its load;
/// - typical error: the SD of the window's leave-one-out scores (each session against the profile
///   of the others); SWC = `swcShare` x typical error.
public enum Readiness {
    /// The window: the latest this many earlier sessions with loads.
    public static let windowSessions = 10
    /// Today's score reads this many first sets (warm-ups included).
    public static let firstSets = 3
    /// Fewer earlier sessions with loads than this is too little history.
    public static let minSessions = 5
    /// SWC = this x the athlete's typical error (Hopkins 2000, Sports Med 30:1; 2004, Sportscience 8).
    public static let swcShare = 0.5

    /// One set: its load and its fastest rep's mean velocity.
    public struct SetBest: Sendable, Equatable {
        public var loadKg: Double
        public var bestMeanVelocityMps: Double
        /// Creates a set.
        public init(loadKg: Double, bestMeanVelocityMps: Double) { (self.loadKg, self.bestMeanVelocityMps) = (loadKg, bestMeanVelocityMps) }

        var usable: Bool { loadKg.isFinite && loadKg > 0 && bestMeanVelocityMps.isFinite && bestMeanVelocityMps > 0 }
    }

    /// One earlier session of the exercise: its sets in the order they were done.
    public typealias Session = [SetBest]

    /// The reference profile of `sessions` (those without a usable set are ignored): nil without
    /// two loads or when velocity does not fall with load.
    public static func profile(of sessions: [Session], mvtMps: Double) -> LoadVelocityFit? {
        var sums: [Double: (total: Double, count: Double)] = [:]
        for session in sessions {
            let best = E1RMEstimator.bestPerLoad(session.filter(\.usable).map { ($0.loadKg, $0.bestMeanVelocityMps) })
            for point in best {
                let old = sums[point.loadKg] ?? (0, 0)
                sums[point.loadKg] = (old.total + point.meanVelocityMps, old.count + 1)
            }
        }
        let points = sums.map { LoadVelocityFit.Point(loadKg: $0.key, meanVelocityMps: $0.value.total / $0.value.count) }
        guard let fit = E1RMEstimator.fit(points: points, mvtMps: mvtMps), fit.slopeMpsPerKg < 0 else { return nil }
        return fit
    }

    /// Observed / predicted velocity (x 100) of each of the first `firstSets` usable sets the
    /// profile predicts a positive velocity for.
    public static func ratios(of sets: [SetBest], against fit: LoadVelocityFit) -> [Double] {
        var out: [Double] = []
        for set in sets where set.usable && out.count < firstSets {
            let predicted = fit.interceptMps + fit.slopeMpsPerKg * set.loadKg
            guard predicted > 0 else { continue }
            out.append(100 * set.bestMeanVelocityMps / predicted)
        }
        return out
    }

    /// Today's readiness from `today`'s sets (in order) against `history`, the athlete's earlier
    /// sessions of the exercise, oldest first (only the latest `windowSessions` with a usable set count).
    public static func assess(today: [SetBest], history: [Session], mvtMps: Double) -> ReadinessAssessment {
        let window = Array(history.filter { $0.contains(where: \.usable) }.suffix(windowSessions))
        let sets = min(today.filter(\.usable).count, firstSets)
        let none = ReadinessAssessment(verdict: .tooLittleHistory, sets: sets, pastSessions: window.count)
        guard window.count >= minSessions, let fit = profile(of: window, mvtMps: mvtMps) else { return none }
        // Leave-one-out: each session against the profile of the others, as today is against all.
        var past: [Double] = []
        for index in window.indices {
            var others = window
            others.remove(at: index)
            guard let other = profile(of: others, mvtMps: mvtMps) else { continue }
            let r = ratios(of: window[index], against: other)
            if !r.isEmpty { past.append(mean(r)) }
        }
        let todays = ratios(of: today, against: fit)
        guard past.count >= minSessions, !todays.isEmpty else { return none }
        let typical = sd(past)
        let swc = swcShare * typical
        let score = mean(todays)
        let diff = score - 100
        let verdict: ReadinessVerdict = diff > swc ? .better : diff < -swc ? .below : .usual
        let se: Double? = todays.count >= 2 ? sd(todays) / Double(todays.count).squareRoot() : nil
        let withinNoise = se.map { abs(abs(diff) - swc) < $0 } ?? true
        return ReadinessAssessment(
            verdict: verdict, scorePct: score, typicalErrorPct: typical, swcPct: swc, standardErrorPct: se, withinNoise: withinNoise,
            sets: todays.count, pastSessions: window.count, interceptMps: fit.interceptMps, slopeMpsPerKg: fit.slopeMpsPerKg)
    }

    static func mean(_ xs: [Double]) -> Double { xs.reduce(0, +) / Double(xs.count) }

    /// Sample SD (n - 1); 0 for fewer than two values.
    static func sd(_ xs: [Double]) -> Double {
        guard xs.count >= 2 else { return 0 }
        let m = mean(xs)
        return (xs.reduce(0) { $0 + ($1 - m) * ($1 - m) } / Double(xs.count - 1)).squareRoot()
    }
}
