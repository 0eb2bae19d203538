import VBTBus
import VBTWire

// Rest timers and the live workout (README, "notifier"): pure values on an injected
// wall clock (`now`, Unix seconds), so they persist across restarts and are
// tested without sleeping.

/// A rest timer on the wall clock: what remains is computed from `now`, so a
/// timer saved to disk and loaded after a restart has the right remaining time.
public struct RestTimer: Sendable, Codable, Equatable {
    /// `<station>-rest-<milliseconds of its start>`.
    public var id: String
    public var startedAt: Double
    /// The whole rest, extensions included.
    public var durationS: Double
    /// Set while paused.
    public var pausedAt: Double?
    /// Paused time before the current pause.
    public var pausedTotalS = 0.0
    /// The set whose end started it.
    public var setId: String?
    /// The exercise just done.
    public var exercise: String?

    /// Starts a timer of `durationS` at `now`.
    public init(station: String, durationS: Double, now: Double, setId: String? = nil, exercise: String? = nil) {
        id = "\(station)-rest-\(Int64((now * 1000).rounded()))"
        startedAt = now
        self.durationS = max(0, durationS)
        self.setId = setId
        self.exercise = exercise
    }

    /// Resting time so far (pauses excluded).
    public func elapsedS(at now: Double) -> Double {
        max(0, (pausedAt ?? now) - startedAt - pausedTotalS)
    }

    /// Time left, never negative.
    public func remainingS(at now: Double) -> Double { max(0, durationS - elapsedS(at: now)) }

    /// When the rest runs out (wall clock), as things stand; nil while paused.
    public var endsAt: Double? { pausedAt == nil ? startedAt + pausedTotalS + durationS : nil }

    /// Whether the rest has run out (a paused timer never runs out).
    public func isOver(at now: Double) -> Bool { pausedAt == nil && remainingS(at: now) <= 0 }

    public var isPaused: Bool { pausedAt != nil }

    /// Pauses; no effect when already paused.
    public mutating func pause(at now: Double) {
        guard pausedAt == nil else { return }
        pausedAt = max(now, startedAt)
    }

    /// Resumes; no effect when running.
    public mutating func resume(at now: Double) {
        guard let pausedAt else { return }
        pausedTotalS += max(0, now - pausedAt)
        self.pausedAt = nil
    }

    /// Adds `seconds` (negative shortens, never below what has elapsed).
    public mutating func extend(by seconds: Double, at now: Double) {
        durationS = max(elapsedS(at: now), durationS + seconds)
    }

    /// The message describing it at `now`.
    public func message(at now: Double, state: TimerMessage.State? = nil) -> TimerMessage {
        let remaining = remainingS(at: now)
        let state = state ?? (isPaused ? .paused : .running)
        return TimerMessage(
            timerId: id, state: state, durationS: durationS, remainingS: state == .running || state == .paused ? remaining : 0,
            endsAt: state == .running ? now + remaining : nil, setId: setId, exercise: exercise)
    }
}

/// One station's live workout: who, what, which set, resting or not.
public struct StationWorkout: Sendable, Codable, Equatable {
    public enum Phase: String, Sendable, Codable { case ready, resting, done }

    public var station: String
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    /// The exercise's default rest from `athlete.assign` (the recorder's catalogue).
    public var assignedRestS: Double?
    public var vlThresholdPct = 20.0
    public var plan: Plan?
    /// Index into the plan's exercises.
    public var exerciseIndex = 0
    /// The set to do next (ready) or just done (resting), 1-based.
    public var setNumber = 1
    public var setsDone = 0
    public var phase = Phase.ready
    public var timer: RestTimer?
    /// The last set end handled (a set end seen twice, e.g. around a detector swap, counts once).
    public var lastEndedSetId: String?
    /// Today's sets of the current exercise, as load advice reads them (reset when the exercise changes).
    public var adviceSets: [AdvisedSet] = []
    /// The mean velocities of the current set's first reps (`LoadAdvisor.repsPerSet`), and its id.
    public var repVelocities: [Double] = []
    public var repSetId: String?
    /// The advice after the last set, until the exercise changes or the next set ends.
    public var advice: WorkoutMessage.Advice?
    /// Why today's readiness of the current exercise asks for one set fewer (the recorder's
    /// verdict, `LoadAdvisor.readinessLow`); nil when it does not, or is not known.
    public var readinessLow: String?
    /// An advice with readiness's set fewer was carried into the plan: readiness takes one set
    /// off an exercise's day, however many of its first sets say below usual.
    public var readinessApplied = false

    /// A station nobody assigned yet.
    public init(station: String) { self.station = station }

    /// Reads a saved workout. Fields added since a state file was written get
    /// their defaults, and a plan saved by an earlier notifier (its own plan
    /// type, before the wire's `Plan`) is read too, so an upgrade keeps every
    /// station's plan and rest timer.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        station = try c.decode(String.self, forKey: .station)
        athlete = try c.decodeIfPresent(String.self, forKey: .athlete)
        exercise = try c.decodeIfPresent(String.self, forKey: .exercise)
        loadKg = try c.decodeIfPresent(Double.self, forKey: .loadKg)
        assignedRestS = try c.decodeIfPresent(Double.self, forKey: .assignedRestS)
        vlThresholdPct = try c.decodeIfPresent(Double.self, forKey: .vlThresholdPct) ?? vlThresholdPct
        if let plan = try? c.decodeIfPresent(Plan.self, forKey: .plan) {
            self.plan = plan
        } else {
            plan = try c.decodeIfPresent(EarlierPlan.self, forKey: .plan)?.plan
        }
        exerciseIndex = try c.decodeIfPresent(Int.self, forKey: .exerciseIndex) ?? 0
        setNumber = try c.decodeIfPresent(Int.self, forKey: .setNumber) ?? 1
        setsDone = try c.decodeIfPresent(Int.self, forKey: .setsDone) ?? 0
        phase = try c.decodeIfPresent(Phase.self, forKey: .phase) ?? .ready
        timer = try c.decodeIfPresent(RestTimer.self, forKey: .timer)
        lastEndedSetId = try c.decodeIfPresent(String.self, forKey: .lastEndedSetId)
        adviceSets = try c.decodeIfPresent([AdvisedSet].self, forKey: .adviceSets) ?? []
        repVelocities = try c.decodeIfPresent([Double].self, forKey: .repVelocities) ?? []
        repSetId = try c.decodeIfPresent(String.self, forKey: .repSetId)
        advice = try c.decodeIfPresent(WorkoutMessage.Advice.self, forKey: .advice)
        readinessLow = try c.decodeIfPresent(String.self, forKey: .readinessLow)
        readinessApplied = try c.decodeIfPresent(Bool.self, forKey: .readinessApplied) ?? false
    }

    /// A new exercise: today's sets, advice and readiness are the previous one's no more.
    mutating func startExercise() {
        (adviceSets, advice, readinessLow, readinessApplied) = ([], nil, nil, false)
    }

    /// How notifiers before the wire's `Plan` saved a plan.
    private struct EarlierPlan: Decodable {
        struct Exercise: Decodable { var exercise: String; var sets: Int; var reps: Int; var restS: Double?; var loadKg: Double? }
        var name: String?
        var athlete: String
        var exercises: [Exercise]
        var plan: Plan {
            Plan(
                id: name, athlete: athlete,
                items: exercises.map {
                    PlanItem(exercise: $0.exercise, sets: $0.sets, reps: $0.reps, restS: $0.restS, loadKg: $0.loadKg)
                })
        }
    }

    /// The plan's current exercise.
    public var planned: PlanItem? {
        guard let plan, plan.items.indices.contains(exerciseIndex) else { return nil }
        return plan.items[exerciseIndex]
    }

    /// The rest after a set: the plan's, else the exercise default, else `fallbackS`.
    public func restS(fallbackS: Double) -> Double {
        planned?.restS ?? assignedRestS ?? fallbackS
    }

    /// The message describing it.
    public func message(event: String, fallbackRestS: Double) -> WorkoutMessage {
        let next: String? = plan.flatMap { plan in
            plan.items.indices.contains(exerciseIndex + 1) ? plan.items[exerciseIndex + 1].exercise : nil
        }
        var message = WorkoutMessage(
            event: event, state: WorkoutMessage.State(rawValue: phase.rawValue) ?? .ready, plan: plan?.id, exercise: exercise,
            loadKg: loadKg, set: setNumber, sets: planned?.sets, reps: planned?.reps,
            exerciseIndex: plan == nil ? nil : exerciseIndex + 1, exercises: plan?.items.count, setsDone: setsDone,
            restS: restS(fallbackS: fallbackRestS), vlThresholdPct: vlThresholdPct, nextExercise: next
        ).targeting(planned?.targetMeanVelocityMps)
        message.advice = advice
        return message
    }

    /// The load of the plan's next set of the current exercise, when it differs from the load
    /// now on the bar (a plan with one load per set): what the detector must learn before it.
    public var nextSetLoadChange: Double? {
        guard let current = planned, setNumber < current.sets, let next = current.loadKg(set: setNumber + 1), next != loadKg else { return nil }
        return next
    }

    /// What moving on after a rest did.
    public enum Advance: Equatable, Sendable {
        /// The next set of the same exercise.
        case nextSet
        /// The next exercise of the plan: the rep detector must follow.
        case nextExercise(PlanItem)
        /// No plan: one more set of whatever the athlete does.
        case free
        /// The plan is finished.
        case done
    }

    /// Moves to the next set or exercise (after a rest, or at a set's end when nothing follows).
    public mutating func advance() -> Advance {
        guard let plan, let current = planned else {
            setNumber += 1
            phase = .ready
            return .free
        }
        if setNumber < current.sets {
            setNumber += 1
            loadKg = current.loadKg(set: setNumber) ?? loadKg
            phase = .ready
            return .nextSet
        }
        guard plan.items.indices.contains(exerciseIndex + 1) else {
            phase = .done
            return .done
        }
        exerciseIndex += 1
        setNumber = 1
        startExercise()
        let next = plan.items[exerciseIndex]
        exercise = next.exercise
        loadKg = next.loadKg
        phase = .ready
        return .nextExercise(next)
    }

    /// The set advice is for: the next one while resting, the one to do while ready.
    public var upcomingSet: Int { phase == .resting ? setNumber + 1 : setNumber }

    /// Carries `advice` into the plan: its load for every set of the current exercise from the
    /// one it is for, and one set fewer when it says so (never fewer than the sets done). Returns
    /// what went wrong in words, nil when applied.
    public mutating func apply(_ advice: WorkoutMessage.Advice) -> String? {
        guard var plan, var item = planned else { return "no plan at \(station)" }
        guard phase != .done else { return "the plan at \(station) is done" }
        guard advice.forSet == upcomingSet else { return "the advice was for set \(advice.forSet); set \(upcomingSet) is next" }
        guard advice.loadKg != nil || advice.fewerSets else { return "the advice has no load: \(advice.reason)" }
        if let load = advice.loadKg {
            let loads = (1...max(1, item.sets)).map { $0 < advice.forSet ? (item.loadKg(set: $0) ?? load) : load }
            item.loadsKg = loads
            item.loadKg = loads.first
            if phase == .ready { loadKg = load }
        }
        if advice.fewerSets {
            item.sets = max(advice.forSet - 1, max(1, item.sets - 1))
            if let loads = item.loadsKg { item.loadsKg = Array(loads.prefix(item.sets)) }
        }
        plan.items[exerciseIndex] = item
        self.plan = plan
        if advice.fewerSets, let readinessLow, advice.fewerSetsReason == readinessLow { readinessApplied = true }
        var applied = advice
        applied.applied = true
        self.advice = applied
        return nil
    }

    /// Whether the set just ended was the plan's last.
    public var isLastPlannedSet: Bool {
        guard let plan, let current = planned else { return false }
        return setNumber >= current.sets && exerciseIndex + 1 >= plan.items.count
    }
}
