import Foundation

// The one estimator of e1RM (docs/detection.md, "e1RM"). The detector's live profile, the
// recorder's `progress` (and so `vbt progress`, the console's pages, the leaderboards and
// plans' %e1RM) all compute it here, so one set of reps gives one number everywhere.

/// Why an estimate should not be trusted; each is checked on every fit.
public enum E1RMWarning: String, Codable, Sendable, CaseIterable {
    /// Fewer than `E1RMEstimator.minLoads` distinct loads: a line through two points always fits.
    case fewLoads = "few-loads"
    /// The loads span less than `E1RMEstimator.minRangeShare` of the e1RM: a small error in a
    /// velocity swings the slope, and the line is extrapolated far past the heaviest load.
    case narrowRange = "narrow-range"
    /// r² under `E1RMEstimator.minR2`: the best reps do not lie on a line.
    case poorFit = "poor-fit"

    /// The warning in words, for tables and pages.
    public var words: String {
        switch self {
        case .fewLoads: "fewer than \(E1RMEstimator.minLoads) loads"
        case .narrowRange: String(format: "loads span under %.0f%% of the e1RM", E1RMEstimator.minRangeShare * 100)
        case .poorFit: String(format: "R² under %.2f", E1RMEstimator.minR2)
        }
    }
}

/// A least-squares load-velocity line and the e1RM it gives.
public struct LoadVelocityFit: Sendable, Equatable {
    /// One point of the fit: the fastest rep's mean velocity at one load.
    public struct Point: Sendable, Equatable {
        public var loadKg: Double
        public var meanVelocityMps: Double
        /// Creates a point.
        public init(loadKg: Double, meanVelocityMps: Double) { (self.loadKg, self.meanVelocityMps) = (loadKg, meanVelocityMps) }
    }

    /// The points fitted, lightest load first, one per load.
    public var points: [Point]
    /// v = intercept + slope x load.
    public var interceptMps: Double
    public var slopeMpsPerKg: Double
    /// Coefficient of determination (1: every point on the line).
    public var r2: Double
    /// The exercise's minimal velocity threshold: the mean velocity of a 1RM rep.
    public var mvtMps: Double
    /// The load where the line meets the MVT; nil unless velocity falls with load and the
    /// line is above the MVT at zero load (otherwise there is no positive load to name).
    public var e1rmKg: Double?
    /// Why not to trust it; empty when reliable (always empty without an e1RM).
    public var warnings: [E1RMWarning]
}

/// The e1RM estimator: ordinary least squares of mean velocity on load through the fastest rep
/// at each load, e1RM = (MVT - intercept) / slope. Pure and deterministic: the same points in
/// any order give the same answer to the last bit.
public enum E1RMEstimator {
    /// Reliable needs at least this many distinct loads.
    public static let minLoads = 3
    /// Reliable needs the loads to span at least this share of the e1RM (heaviest - lightest).
    public static let minRangeShare = 0.2
    /// Reliable needs at least this r².
    public static let minR2 = 0.9

    /// The fastest mean velocity at each distinct load, lightest first. Reps without a positive,
    /// finite load or velocity carry no information about the line and are left out.
    public static func bestPerLoad(_ reps: [(loadKg: Double, meanVelocityMps: Double)]) -> [LoadVelocityFit.Point] {
        var best: [Double: Double] = [:]
        for rep in reps where rep.loadKg.isFinite && rep.loadKg > 0 && rep.meanVelocityMps.isFinite && rep.meanVelocityMps > 0 {
            best[rep.loadKg] = max(best[rep.loadKg] ?? 0, rep.meanVelocityMps)
        }
        return best.sorted { $0.key < $1.key }.map { LoadVelocityFit.Point(loadKg: $0.key, meanVelocityMps: $0.value) }
    }

    /// Fits the best rep at each load of `reps` (see `bestPerLoad`) against `mvtMps`; nil with
    /// fewer than two distinct loads (no line).
    public static func fit(reps: [(loadKg: Double, meanVelocityMps: Double)], mvtMps: Double) -> LoadVelocityFit? {
        fit(points: bestPerLoad(reps), mvtMps: mvtMps)
    }

    /// Fits `points`, which must be one per load (`bestPerLoad`); nil with fewer than two loads.
    public static func fit(points unsorted: [LoadVelocityFit.Point], mvtMps: Double) -> LoadVelocityFit? {
        let points = unsorted.sorted { ($0.loadKg, $0.meanVelocityMps) < ($1.loadKg, $1.meanVelocityMps) }
        guard Set(points.map(\.loadKg)).count >= 2 else { return nil }
        // Centred sums, in load order: the same sums whatever order the points came in.
        let n = Double(points.count)
        let meanX = points.reduce(0) { $0 + $1.loadKg } / n
        let meanY = points.reduce(0) { $0 + $1.meanVelocityMps } / n
        var sxx = 0.0, sxy = 0.0, syy = 0.0
        for point in points {
            let (dx, dy) = (point.loadKg - meanX, point.meanVelocityMps - meanY)
            sxx += dx * dx
            sxy += dx * dy
            syy += dy * dy
        }
        let slope = sxy / sxx
        let intercept = meanY - slope * meanX
        let r2 = syy > 0 ? (sxy * sxy) / (sxx * syy) : 1
        var e1rm: Double? = nil
        if slope < 0, intercept > mvtMps {
            let load = (mvtMps - intercept) / slope
            if load.isFinite { e1rm = load }
        }
        var warnings: [E1RMWarning] = []
        if let e1rm {
            if points.count < minLoads { warnings.append(.fewLoads) }
            if points[points.count - 1].loadKg - points[0].loadKg < minRangeShare * e1rm { warnings.append(.narrowRange) }
            if r2 < minR2 { warnings.append(.poorFit) }
        }
        return LoadVelocityFit(points: points, interceptMps: intercept, slopeMpsPerKg: slope, r2: r2, mvtMps: mvtMps, e1rmKg: e1rm, warnings: warnings)
    }

    /// One rep as the daily estimates read it: its load, mean velocity and wall-clock time.
    public struct Rep: Sendable, Equatable {
        public var loadKg: Double
        public var meanVelocityMps: Double
        /// Unix seconds (when the rep was published).
        public var ts: Double
        /// Creates a rep.
        public init(loadKg: Double, meanVelocityMps: Double, ts: Double) { (self.loadKg, self.meanVelocityMps, self.ts) = (loadKg, meanVelocityMps, ts) }
    }

    /// One estimate per local day (UTC + `utcOffsetS`) from that day's reps alone, oldest first:
    /// the days with an e1RM (two loads or more and velocity falling with load). A day is the
    /// window because a velocity at a load drifts over weeks; one session's sets at rising loads
    /// are the profile the method was made for. Dated by the day's last rep.
    public static func daily(reps: [Rep], mvtMps: Double, utcOffsetS: Int) -> [ExerciseProgress.E1RM] {
        let offset = Double(utcOffsetS)
        let days = Dictionary(grouping: reps.filter { $0.ts.isFinite }) { floor(($0.ts + offset) / 86_400) }
        return days.keys.sorted().compactMap { key in
            let day = days[key] ?? []
            guard let fit = fit(reps: day.map { ($0.loadKg, $0.meanVelocityMps) }, mvtMps: mvtMps), fit.e1rmKg != nil,
                let last = day.map(\.ts).max()
            else { return nil }
            return ExerciseProgress.E1RM(day: DayStats.day(last, offset: offset), ts: last, fit: fit)
        }
    }

    /// An e1RM as every page, table and chart shows it: kg to one decimal.
    public static func text(_ kg: Double) -> String { String(format: "%.1f", kg) }
}

extension ExerciseProgress.E1RM {
    /// The estimate of `fit` (which has an e1RM), dated `ts` (`day` is its local day).
    public init(day: String, ts: Double, fit: LoadVelocityFit) {
        self.init(
            day: day, ts: ts, e1rmKg: fit.e1rmKg ?? .nan, r2: fit.r2, loadsKg: fit.points.map(\.loadKg),
            meanVelocitiesMps: fit.points.map(\.meanVelocityMps), interceptMps: fit.interceptMps, slopeMpsPerKg: fit.slopeMpsPerKg,
            mvtMps: fit.mvtMps, warnings: fit.warnings)
    }

    /// Reliable: enough loads over a wide enough range, and a line that fits.
    public var reliable: Bool { warnings.isEmpty }

    /// Where it came from, in words: `2026-12-05, best rep at 60, 80, 100 kg, MVT 0.30 m/s, R² 0.99`.
    public var source: String {
        let loads = loadsKg.map { String(format: "%g", $0) }.joined(separator: ", ")
        return "\(day), best rep at \(loads) kg, MVT \(String(format: "%.2f", mvtMps)) m/s, R² \(String(format: "%.2f", r2))"
    }

    /// `reliable`, or `unreliable: ` and the warnings in words.
    public var reliability: String { reliable ? "reliable" : "unreliable: " + warnings.map(\.words).joined(separator: "; ") }
}
