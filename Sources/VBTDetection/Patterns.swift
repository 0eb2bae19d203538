import Foundation
import VBTWire

// Pattern learning (README, "rep-detector"): a finished set becomes a pattern of the
// athlete's concentric velocity curve for the exercise; a live candidate is
// matched against the stored patterns by dynamic time warping, and on a good
// match the rep thresholds relax for it (minimum concentric duration x 0.7,
// minimum amplitude x 0.8), so an athlete's own slightly short or quick reps
// are not thrown away once the system has seen how they lift. A pattern is its
// owner's (the athlete, else the station): it relaxes nobody else's reps, and a
// station uses its own new pattern from its next set on, live as in `vbt eval`.

/// One learned pattern.
public struct RepPattern: Sendable, Codable, Equatable {
    public var exercise: String
    /// The concentric velocity curve, resampled to `RepPattern.length` points, peak = 1.
    public var curve: [Double]
    public var loadKg: Double?
    /// Reps the pattern was averaged from.
    public var reps: Int
    /// When it was recorded, Unix seconds (reading time).
    public var recordedT: Double
    /// Whose lifting it is: the athlete's id, else the station's. Nil in patterns learned
    /// before patterns had owners, which match nobody.
    public var owner: String? = nil

    /// Points per curve.
    public static let length = 32

    /// A velocity curve over a concentric phase, resampled and normalised to peak 1.
    public static func curve(_ trace: [KinematicSample], from start: Double, to end: Double) -> [Double]? {
        guard end > start, trace.count >= 2 else { return nil }
        var curve: [Double] = []
        var index = 0
        for k in 0..<length {
            let t = start + (end - start) * Double(k) / Double(length - 1)
            while index < trace.count - 2, trace[index + 1].t < t { index += 1 }
            let a = trace[index], b = trace[index + 1]
            let f = b.t > a.t ? min(1, max(0, (t - a.t) / (b.t - a.t))) : 0
            curve.append(max(0, a.velocityMps + f * (b.velocityMps - a.velocityMps)))
        }
        guard let peak = curve.max(), peak > 0 else { return nil }
        return curve.map { $0 / peak }
    }

    /// Dynamic time warping distance between two curves, per point (0 = identical shape).
    public static func dtwDistance(_ a: [Double], _ b: [Double]) -> Double {
        let n = a.count, m = b.count
        guard n > 0, m > 0 else { return .infinity }
        var previous = [Double](repeating: .infinity, count: m + 1)
        var current = [Double](repeating: .infinity, count: m + 1)
        previous[0] = 0
        for i in 1...n {
            current[0] = .infinity
            for j in 1...m {
                current[j] = abs(a[i - 1] - b[j - 1]) + min(previous[j], current[j - 1], previous[j - 1])
            }
            swap(&previous, &current)
        }
        return previous[m] / Double(n + m)
    }

    /// The seed's score (0-80): 50 x DTW similarity, +15 for the same load
    /// within 5 %, +10 when recorded within 7 days, +5 from 5 reps on.
    public func score(against curve: [Double], loadKg: Double?, now: Double) -> Double {
        let similarity = 1 / (1 + 10 * Self.dtwDistance(self.curve, curve))
        var score = 50 * similarity
        if let loadKg, let own = self.loadKg, own > 0, abs(loadKg - own) / own <= 0.05 { score += 15 }
        if now - recordedT <= 7 * 86_400 { score += 10 }
        if reps >= 5 { score += 5 }
        return score
    }

    /// The seed adopts a pattern "above 80" on a scale whose maximum is 80;
    /// read as 80 % of the maximum: 64.
    public static let adoptionScore = 64.0
}

/// The patterns of every exercise. A value: the rep-detector keeps it in a JSON file so it
/// survives restarts (VBTDetectorRole's `PatternLibrary: JSONFileStored`).
public struct PatternLibrary: Sendable, Codable, Equatable {
    /// Patterns by exercise, newest last.
    public var patterns: [String: [RepPattern]] = [:]
    /// At most this many per owner and exercise, and per exercise in all (the oldest go):
    /// a gym's athletes each keep their latest, in well under a megabyte.
    public static let perOwner = 3
    public static let perExercise = 400

    /// An empty library.
    public init() {}

    /// Adds a pattern, dropping the oldest beyond the limits.
    public mutating func add(_ pattern: RepPattern) {
        var list = patterns[pattern.exercise] ?? []
        list.append(pattern)
        if list.count(where: { $0.owner == pattern.owner }) > Self.perOwner, let oldest = list.firstIndex(where: { $0.owner == pattern.owner }) {
            list.remove(at: oldest)
        }
        if list.count > Self.perExercise { list.removeFirst(list.count - Self.perExercise) }
        patterns[pattern.exercise] = list
    }
}
