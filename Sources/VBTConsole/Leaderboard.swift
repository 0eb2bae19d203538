import VBTQuery

/// The console's leaderboards, per exercise over a period (today, this week): the best
/// estimated 1RM of each athlete (the best of the recorder's daily estimates in the period, the
/// same numbers `vbt progress` lists), and the fastest athletes at each load. Computed from
/// the recorder's answers (`history`, and `progress` per athlete); a pure value.
public struct Leaderboard: Sendable, Equatable {
    public struct E1RMEntry: Sendable, Equatable {
        public var athlete: String
        public var e1rmKg: Double
        public var day: String
        /// The recorder's estimate itself (`E1RMEstimator`): the loads it came from, its fit and
        /// reliability, so the board shows what the athlete's page and `vbt progress` show.
        public var estimate: ExerciseProgress.E1RM
    }

    public struct VelocityEntry: Sendable, Equatable {
        public var athlete: String
        public var bestMeanVelocityMps: Double
        public var ts: Double
    }

    public struct Board: Sendable, Equatable {
        public var exercise: String
        /// Best first; one entry per athlete.
        public var e1rm: [E1RMEntry]
        /// By load, heaviest first: the fastest athletes there (one entry per athlete, fastest first).
        public var velocityAtLoad: [(loadKg: Double, entries: [VelocityEntry])]

        public static func == (lhs: Board, rhs: Board) -> Bool {
            lhs.exercise == rhs.exercise && lhs.e1rm == rhs.e1rm && lhs.velocityAtLoad.count == rhs.velocityAtLoad.count
                && zip(lhs.velocityAtLoad, rhs.velocityAtLoad).allSatisfy { $0.loadKg == $1.loadKg && $0.entries == $1.entries }
        }
    }

    public var boards: [Board]

    /// Loads closer than this are one load (2.5 kg: the smallest plate pair most gyms have).
    public static let loadStepKg = 2.5

    /// The boards of the sets and e1RMs at or after `since` (UTC seconds), `top` entries each.
    public init(sets: [SetSummary], progress: [ProgressReport], since: Double, top: Int = 10) {
        var e1rmBest: [String: [String: ExerciseProgress.E1RM]] = [:]  // exercise -> athlete -> best
        for report in progress {
            for exercise in report.exercises {
                for estimate in exercise.e1rm where estimate.ts >= since && estimate.e1rmKg.isFinite && estimate.e1rmKg > 0 {
                    if let best = e1rmBest[exercise.exercise]?[report.athlete], best.e1rmKg >= estimate.e1rmKg { continue }
                    e1rmBest[exercise.exercise, default: [:]][report.athlete] = estimate
                }
            }
        }
        // exercise -> load -> athlete -> best
        var fastest: [String: [Double: [String: VelocityEntry]]] = [:]
        for set in sets where (set.endedTs ?? set.startedTs) >= since {
            guard let exercise = set.exercise, let athlete = set.athlete, let load = set.loadKg, let velocity = set.bestMeanVelocityMps,
                velocity.isFinite, velocity > 0
            else { continue }
            let step = (load / Self.loadStepKg).rounded() * Self.loadStepKg
            if let best = fastest[exercise]?[step]?[athlete], best.bestMeanVelocityMps >= velocity { continue }
            fastest[exercise, default: [:]][step, default: [:]][athlete] = VelocityEntry(
                athlete: athlete, bestMeanVelocityMps: velocity, ts: set.endedTs ?? set.startedTs)
        }
        boards = Set(e1rmBest.keys).union(fastest.keys).sorted().map { exercise in
            let e1rm = (e1rmBest[exercise] ?? [:]).map { E1RMEntry(athlete: $0.key, e1rmKg: $0.value.e1rmKg, day: $0.value.day, estimate: $0.value) }
                .sorted { ($0.e1rmKg, $1.athlete) > ($1.e1rmKg, $0.athlete) }
            let loads = (fastest[exercise] ?? [:]).sorted { $0.key > $1.key }.map { load, athletes in
                (
                    loadKg: load,
                    entries: Array(
                        athletes.values.sorted { ($0.bestMeanVelocityMps, $1.athlete) > ($1.bestMeanVelocityMps, $0.athlete) }.prefix(top))
                )
            }
            return Board(exercise: exercise, e1rm: Array(e1rm.prefix(top)), velocityAtLoad: loads)
        }
    }
}
