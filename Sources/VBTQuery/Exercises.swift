import VBTWire

// The exercise catalogue: what `exercise.list` answers and what the store is seeded with.

/// An exercise of the catalogue.
public struct ExerciseRecord: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var description: String
    /// Typical bar travel of a full rep for an adult, mm.
    public var expectedRomMm: Double
    /// Mean velocity at 1RM (minimal velocity threshold), m/s.
    public var mvtMps: Double
    /// Rest between sets when no plan says otherwise, s.
    public var defaultRestS: Double

    /// Creates an exercise.
    public init(id: String, name: String, description: String, expectedRomMm: Double, mvtMps: Double, defaultRestS: Double) {
        (self.id, self.name, self.description) = (id, name, description)
        (self.expectedRomMm, self.mvtMps, self.defaultRestS) = (expectedRomMm, mvtMps, defaultRestS)
    }

    enum CodingKeys: String, CodingKey {
        case id, name, description
        case expectedRomMm = "expected_rom_mm"
        case mvtMps = "mvt_mps"
        case defaultRestS = "default_rest_s"
    }

    /// The common lifts. MVTs: bench 0.17 (González-Badillo & Sánchez-Medina
    /// 2010, Int J Sports Med 31(5)), squat 0.30 (Sánchez-Medina et al. 2017,
    /// Int J Sports Med 38(3)), deadlift 0.15 m/s; others from the ranges the
    /// VBT literature reports for similar lifts; rests are the
    /// usual strength-training defaults (3 min for the big lifts, 2 min otherwise).
    public static let catalogue: [ExerciseRecord] = [
        .init(
            id: "squat", name: "Back squat", description: "Bar on the upper back; squat to depth and stand up.", expectedRomMm: 600, mvtMps: 0.30,
            defaultRestS: 180),
        .init(
            id: "front-squat", name: "Front squat", description: "Bar in the front rack; upright torso, squat to depth.", expectedRomMm: 580, mvtMps: 0.33,
            defaultRestS: 180),
        .init(
            id: "bench", name: "Bench press", description: "Lying on a bench; lower the bar to the chest and press.", expectedRomMm: 450, mvtMps: 0.17,
            defaultRestS: 180),
        .init(
            id: "deadlift", name: "Deadlift", description: "Bar from the floor to standing, hips and knees locked out.", expectedRomMm: 550, mvtMps: 0.15,
            defaultRestS: 180),
        .init(
            id: "overhead-press", name: "Overhead press", description: "Standing; press the bar from the shoulders to overhead.", expectedRomMm: 500,
            mvtMps: 0.19, defaultRestS: 150),
        .init(
            id: "hip-thrust", name: "Hip thrust", description: "Upper back on a bench, bar over the hips; extend the hips.", expectedRomMm: 300, mvtMps: 0.25,
            defaultRestS: 120),
        .init(
            id: "bent-over-row", name: "Bent-over row", description: "Hinged at the hips; row the bar to the lower chest.", expectedRomMm: 400, mvtMps: 0.40,
            defaultRestS: 120),
        .init(
            id: "generic", name: "Generic lift", description: "Any barbell lift without its own entry (the detector's default).", expectedRomMm: 500,
            mvtMps: 0.30, defaultRestS: 120),
    ]
}

/// `athlete.assign`'s arguments for an athlete starting `exercise`: the detector knows a few
/// lifts; for the others it is given the catalogue's ROM and MVT (`entry`), and measures them
/// under their own name.
public func assignmentArgs(athlete: String, exercise: String, loadKg: Double?, restS: Double?, entry: ExerciseRecord?, vlThresholdPct: Double?) -> JSONObject {
    let builtIn = ["squat", "bench", "deadlift"].contains(exercise)
    return AthleteAssign(
        athlete: athlete, exercise: exercise, loadKg: loadKg, restS: restS, vlThresholdPct: vlThresholdPct, romMm: builtIn ? nil : entry?.expectedRomMm,
        mvtMps: builtIn ? nil : entry?.mvtMps
    ).args
}

extension Plan {
    /// The plate-friendly step a load from %e1RM is rounded to: 2.5 kg (two 1.25 kg plates),
    /// or 5 lb (two 2.5 lb plates) for an item written in pounds.
    public static func plateStepKg(unit: String?) -> Double { unit == "lb" ? 5 * PlanItem.kgPerLb : 2.5 }

    /// The plan with every load given as a percentage of e1RM (`@80%`) turned into kg for
    /// `athlete`: `e1rmKg` by exercise (the latest from the recorder's `progress`), the
    /// percentage of it rounded to the nearest plate step (`plateStepKg`, halves up). An item
    /// whose exercise has no e1RM yet makes the plan refuse to start, saying what to do.
    public func resolvingLoads(athlete: String, e1rmKg: [String: Double]) throws(StoreError) -> Plan {
        var plan = self
        for (index, item) in items.enumerated() {
            guard let pct = item.loadPctE1rm else { continue }
            guard let e1rm = e1rmKg[item.exercise], e1rm > 0, e1rm.isFinite else {
                throw StoreError(
                    .invalid,
                    "no e1RM for \(athlete)'s \(item.exercise) yet: record sets at 2+ loads, or give the load in kg (item \(index + 1), \(item.loadWords))")
            }
            let step = Self.plateStepKg(unit: item.loadUnit)
            plan.items[index].loadKg = (pct / 100 * e1rm / step).rounded(.toNearestOrAwayFromZero) * step
        }
        return plan
    }

    /// The commands that start this plan at a station for `athlete`: `plan.assign` (the whole
    /// plan, for the notifier's workout) then `athlete.assign` of its first exercise (for the
    /// detector and the recorder). What `vbt plan assign` and the coach console send. A load
    /// given as %e1RM must be resolved first (`resolvingLoads`).
    public func startCommands(athlete: String, catalogue: [ExerciseRecord]) -> [(command: String, args: JSONObject)] {
        guard let first = items.first else { return [] }
        return [
            (Command.Name.planAssign.rawValue, assignArgs(athlete: athlete)),
            (
                Command.Name.athleteAssign.rawValue,
                assignmentArgs(
                    athlete: athlete, exercise: first.exercise, loadKg: first.loadKg(set: 1), restS: first.restS,
                    entry: catalogue.first { $0.id == first.exercise }, vlThresholdPct: nil)
            ),
        ]
    }

    /// The current e1RM per exercise in a `progress` report: each exercise's latest day's.
    public static func latestE1RM(_ report: ProgressReport) -> [String: Double] { latestE1RMEstimates(report).mapValues(\.e1rmKg) }

    /// The current e1RM estimate per exercise (its day, loads, fit and reliability): each exercise's latest day's.
    public static func latestE1RMEstimates(_ report: ProgressReport) -> [String: ExerciseProgress.E1RM] {
        Dictionary(
            report.exercises.compactMap { progress in progress.e1rm.max { $0.ts < $1.ts }.map { (progress.exercise, $0) } },
            uniquingKeysWith: { first, _ in first })
    }
}
