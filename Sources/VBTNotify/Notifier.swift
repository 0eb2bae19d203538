// The notifier's whole decision logic: bus messages and clock ticks in,
// messages to publish out. No I/O; the clock is the `now` each call passes
// (wall-clock Unix seconds, so saved timers resume right after a restart).
import Foundation
import HeapModule
import VBTBus
import VBTQuery
import VBTWire

/// How the notifier behaves. Every field has its default here.
public struct NotifierSettings: Sendable, Codable, Equatable {
    /// Rest when neither the plan nor the exercise's assignment gives one (seconds).
    public var defaultRestS = 120.0
    /// Seconds between `timer` ticks while a rest runs or is paused.
    public var tickS = 1.0
    /// An open alert is repeated at most this often while its condition keeps being reported (seconds).
    public var repeatS = 60.0
    /// A heartbeat is missing after this many of its intervals (and at least interval + 2 s).
    public var missedHeartbeats = 3.0
    /// Posture: alert once bad this long (seconds); nil follows the evaluator's `sustained_bad` flag.
    public var postureLimitS: Double?
    /// A streaming sensor whose rate falls under this fraction of its best rate since connecting raises `sensor-rate`
    /// (cleared again at 0.8).
    public var rateDropFraction = 0.5
    /// Seconds between `workout` snapshots of every station (late joiners catch up).
    public var snapshotS = 5.0
    /// What the gym's plates make: load advice is rounded to it (`--plate-step-kg`, `--bar-kg`).
    public var gym = GymLoads()
    /// Creates the defaults.
    public init() {}
}

/// Everything the notifier must remember across a restart.
public struct NotifierState: Sendable, Codable, Equatable, JSONFileStored {
    public var stations: [String: StationWorkout] = [:]
    public var alerts = AlertBook()
    /// Watched programs by heartbeat station (`rep-detector`, `bridge-rack-01`, ...).
    public var heartbeats: [String: WatchedHeartbeat] = [:]
    /// Best streaming rate per `<station>/<sensor>` since the link connected.
    public var sensorRatesHz: [String: Double] = [:]
    /// Where each input stream stood when the state was saved: a restarted
    /// notifier fetches what it missed from the producers' journals (nil: a
    /// state file from before, or none).
    public var input: InputPositions?
    /// Where its own output streams stood (with `--journal`): a restarted
    /// notifier continues them and does not send again what the process
    /// before it sent after this was saved (nil: no journal, or a file from before).
    public var output: OutputPositions?
    /// The detector's latest profile slope per `<athlete>/<exercise>` (m/s per kg, falling):
    /// load advice's slope when today has one load only (nil: a state file from before).
    public var profileSlopes: [String: Double]?
    /// An empty state.
    public init() {}
}

/// What the notifier wants published (or logged).
public enum NotifierOutput: Sendable, Equatable {
    case timer(station: String, athlete: String?, TimerMessage)
    case alert(AlertMessage)
    case workout(station: String, athlete: String?, WorkoutMessage)
    /// A command for the station's other programs (the rep detector follows the plan).
    case command(station: String, athlete: String?, CommandMessage)
    /// A command that could not be carried out, with the reason in words.
    case rejected(station: String, command: String, id: String, reason: String)
    /// The notifier's answer to a command it acts on (done or refused), for whoever gave it.
    case ack(station: String, athlete: String?, AckMessage)
}

/// A question for the session-recorder: today's readiness of `athlete`'s `exercise`, once it has
/// read the set whose end was sent at `setTs` (the set message's `ts`, which the recorder keeps).
public struct ReadinessQuestion: Sendable, Equatable {
    public var station: String
    public var athlete: String
    public var exercise: String
    public var setTs: Double
    /// Creates a question.
    public init(station: String, athlete: String, exercise: String, setTs: Double) {
        (self.station, self.athlete, self.exercise, self.setTs) = (station, athlete, exercise, setTs)
    }
}

/// The notifier: rest timers, plan progress and threshold alerts.
public struct Notifier: Sendable {
    public let settings: NotifierSettings
    public private(set) var state: NotifierState
    /// Set when `state` changed in a way worth saving; the runtime clears it after saving.
    public private(set) var needsSave = false
    private var nextTick: [String: Double] = [:]
    /// When each station with a rest timer next needs `tick` (its next tick message or its end),
    /// earliest first, and the time last queued per station (an entry that differs is stale).
    /// Queued whenever a station's timer may have changed, so `tick` looks only at the stations
    /// due: sorting and copying a thousand stations at each of the notifier's thousand messages
    /// a second would be half of its CPU.
    private var due = Heap<Due>()
    private var queued: [String: Double] = [:]
    private var nextSnapshot: Double
    /// Heartbeats count as seen at start: a program silent while the notifier was down gets one limit to show up.
    private let startedAt: Double
    private var commandCounter = 0
    /// Per station, the set whose newest rep came late (`late_s`) and by how much: when that set's
    /// end comes, the athlete has been resting since about that rep, not since now. Not saved: a
    /// restarted notifier starts such a rest from the set's end, as before late reps were marked.
    private var lateSets: [String: (setId: String, lateS: Double, at: Double)] = [:]
    /// Per station, the readiness to ask the recorder about (`takeReadinessQuestions`): one a
    /// station, the latest set's, so a notifier whose questions nobody takes holds no more.
    private var readinessQuestions: [String: ReadinessQuestion] = [:]

    /// Starts from `state` (loaded from disk, or empty) at `now`.
    public init(settings: NotifierSettings = NotifierSettings(), state: NotifierState = NotifierState(), now: Double) {
        self.settings = settings
        self.state = state
        startedAt = now
        nextSnapshot = now + settings.snapshotS
        for station in state.stations.keys { schedule(station) }
    }

    /// A station's place in `due`.
    struct Due: Comparable {
        var at: Double
        var station: String
        static func < (a: Due, b: Due) -> Bool { (a.at, a.station) < (b.at, b.station) }
    }

    /// When `station` next needs `tick`: at its next tick message (at once when none is set) or
    /// when its running timer runs out; nil without a timer.
    private func dueTime(_ station: String) -> Double? {
        guard let timer = state.stations[station]?.timer else { return nil }
        let tick = nextTick[station] ?? -.infinity
        return min(tick, timer.endsAt ?? tick)
    }

    /// Queues `station` for `tick` at its due time, when that changed.
    private mutating func schedule(_ station: String) {
        let at = dueTime(station)
        guard at != queued[station] else { return }
        queued[station] = at
        if let at { due.insert(Due(at: at, station: station)) }
    }

    /// The state was saved.
    public mutating func markSaved() { needsSave = false }

    // MARK: Messages

    /// Handles one received message at `now`.
    public mutating func handle(_ message: BusMessage, now: Double) -> [NotifierOutput] {
        let station = message.envelope.station
        defer { schedule(station) }
        switch message.envelope.type {
        case CommandMessage.type:
            guard let command = try? message.payload(as: CommandMessage.self) else { return [] }
            return handle(command, station: station, now: now)
        case SetMessage.type:
            guard let set = try? message.payload(as: SetMessage.self) else { return [] }
            return handle(set, station: station, athlete: message.envelope.athlete, sentTs: message.envelope.ts, now: now)
        case RepMessage.type:
            guard let rep = try? message.payload(as: RepMessage.self) else { return [] }
            return handle(rep, station: station, athlete: message.envelope.athlete, now: now)
        case PostureMessage.type:
            guard let posture = try? message.payload(as: PostureMessage.self) else { return [] }
            return handle(posture, station: station, athlete: message.envelope.athlete, now: now)
        case StatusMessage.type:
            guard let status = try? message.payload(as: StatusMessage.self) else { return [] }
            return handle(status, station: station, now: now)
        case ProfileMessage.type:
            guard let profile = try? message.payload(as: ProfileMessage.self), let athlete = message.envelope.athlete else { return [] }
            remember(profile, athlete: athlete)
            return []
        case HeartbeatMessage.type:
            guard let beat = try? message.payload(as: HeartbeatMessage.self) else { return [] }
            return handleHeartbeat(beat, name: station, now: now) + reportLoss(beat, name: station, src: message.envelope.src, now: now)
        default:
            return []
        }
    }

    private func workout(_ station: String) -> StationWorkout {
        state.stations[station] ?? StationWorkout(station: station)
    }

    private func athlete(at station: String, else fallback: String? = nil) -> String? {
        state.stations[station]?.athlete ?? fallback
    }

    // MARK: Commands

    mutating func handle(_ command: CommandMessage, station: String, now: Double) -> [NotifierOutput] {
        let forUs = command.target == "*" || command.target == "notifier"
        guard forUs else { return [] }
        guard let name = command.name, name.spec.programs.contains("notifier") else { return [] }
        let out: [NotifierOutput]
        do {
            // The commands with no reader of their own (athlete.unassign, rest.pause, rest.resume,
            // rest.skip) are checked here; the others' readers check their arguments, in their words.
            if [Command.Name.athleteUnassign, .restPause, .restResume, .restSkip].contains(name) {
                try name.spec.check(command.args)
            }
            switch command.name {
            case .athleteAssign: out = assignAthlete(command, station: station, now: now)
            case .athleteUnassign: out = unassign(station: station, now: now)
            case .planAssign: out = assignPlan(command, station: station, now: now)
            case .adviceAccept:
                try name.spec.check(command.args)
                out = acceptAdvice(command, station: station, now: now)
            default: out = restCommand(command, station: station, now: now)
            }
        } catch {
            out = [.rejected(station: station, command: command.command, id: command.id, reason: "\(command.command): \(error)")]
        }
        // Every command it acts on is answered: done, or refused with the reason.
        let refusal = out.lazy.compactMap { output -> String? in
            if case .rejected(_, _, _, let reason) = output { return reason }
            return nil
        }.first
        let ack = AckMessage(answering: command, program: "notifier", refusal: refusal)
        return out + [.ack(station: station, athlete: state.stations[station]?.athlete, ack)]
    }

    /// Nobody at the station any more: its rest timer is cancelled, its plan and counters dropped.
    private mutating func unassign(station: String, now: Double) -> [NotifierOutput] {
        var ws = workout(station)
        let out = cancelTimer(&ws, now: now)
        ws = StationWorkout(station: station)
        state.stations[station] = ws
        needsSave = true
        return out + [.workout(station: station, athlete: nil, ws.message(event: "athlete-unassigned", fallbackRestS: settings.defaultRestS))]
    }

    private mutating func assignAthlete(_ command: CommandMessage, station: String, now: Double) -> [NotifierOutput] {
        let assign: AthleteAssign
        do { assign = try AthleteAssign(args: command.args) } catch {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "athlete.assign: \(error)")]
        }
        guard let athlete = assign.athlete else {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "athlete.assign needs args.athlete")]
        }
        var out: [NotifierOutput] = []
        var ws = workout(station)
        if ws.athlete != athlete {
            // Someone else took the station: their rest, plan and counters start over.
            out += cancelTimer(&ws, now: now)
            ws = StationWorkout(station: station)
            ws.athlete = athlete
        }
        if let plan = ws.plan, plan.athlete != athlete { ws.plan = nil }
        if let exercise = assign.exercise, exercise != ws.exercise { ws.startExercise() }
        ws.exercise = assign.exercise ?? ws.exercise
        if let load = assign.loadKg, load >= 0, load <= 1_000 { ws.loadKg = load }
        if let rest = assign.restS, rest >= 0, rest <= 3600 { ws.assignedRestS = rest }
        if let threshold = assign.vlThresholdPct, threshold > 0, threshold < 100 {
            ws.vlThresholdPct = threshold
        }
        state.stations[station] = ws
        needsSave = true
        out.append(.workout(station: station, athlete: athlete, ws.message(event: "athlete-assigned", fallbackRestS: settings.defaultRestS)))
        return out
    }

    private mutating func assignPlan(_ command: CommandMessage, station: String, now: Double) -> [NotifierOutput] {
        let plan: Plan
        do { plan = try Plan(assignArgs: command.args) } catch {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "plan.assign: \(error.reason)")]
        }
        var out: [NotifierOutput] = []
        var ws = workout(station)
        out += cancelTimer(&ws, now: now)
        let threshold = ws.athlete == plan.athlete ? ws.vlThresholdPct : 20
        ws = StationWorkout(station: station)
        ws.athlete = plan.athlete
        ws.vlThresholdPct = threshold
        ws.plan = plan
        ws.exercise = plan.items[0].exercise
        ws.loadKg = plan.items[0].loadKg
        state.stations[station] = ws
        needsSave = true
        out.append(.workout(station: station, athlete: plan.athlete, ws.message(event: "plan-assigned", fallbackRestS: settings.defaultRestS)))
        out.append(assignCommand(ws, now: now))
        return out
    }

    /// `athlete.assign` for the station's current exercise, so the rep detector follows the plan.
    private mutating func assignCommand(_ ws: StationWorkout, now: Double) -> NotifierOutput {
        commandCounter += 1
        let assign = AthleteAssign(
            athlete: ws.athlete ?? ws.station, exercise: ws.exercise, loadKg: ws.loadKg, restS: ws.planned?.restS,
            vlThresholdPct: ws.vlThresholdPct, tempo: ws.planned?.tempo)
        let id = "notifier-\(Int64((now * 1000).rounded()))-\(commandCounter)"
        return .command(
            station: ws.station, athlete: ws.athlete,
            CommandMessage(id: id, command: .athleteAssign, target: "*", args: assign.args))
    }

    /// `set.load` for the station's next set (a plan's per-set loads).
    private mutating func loadCommand(_ ws: StationWorkout, loadKg: Double, now: Double) -> NotifierOutput {
        commandCounter += 1
        let id = "notifier-\(Int64((now * 1000).rounded()))-\(commandCounter)"
        return .command(
            station: ws.station, athlete: ws.athlete, CommandMessage(id: id, command: .setLoad, target: "*", args: SetLoad(loadKg: loadKg).args))
    }

    private mutating func restCommand(_ command: CommandMessage, station: String, now: Double) -> [NotifierOutput] {
        var ws = workout(station)
        guard var timer = ws.timer else {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "no rest timer at \(station)")]
        }
        var out: [NotifierOutput] = []
        switch command.name {
        case .restPause:
            timer.pause(at: now)
        case .restResume:
            timer.resume(at: now)
        case .restExtend:
            let extend: RestExtend
            do { extend = try RestExtend(args: command.args) } catch {
                return [.rejected(station: station, command: command.command, id: command.id, reason: error.reason)]
            }
            timer.extend(by: extend.seconds, at: now)
        default:  // rest.skip
            out.append(.timer(station: station, athlete: ws.athlete, timer.message(at: now, state: .skipped)))
            ws.timer = nil
            out += finishRest(&ws, event: "rest-skipped", now: now)
            state.stations[station] = ws
            needsSave = true
            return out
        }
        ws.timer = timer
        state.stations[station] = ws
        needsSave = true
        nextTick[station] = now + settings.tickS
        schedule(station)
        out.append(.timer(station: station, athlete: ws.athlete, timer.message(at: now)))
        return out
    }

    /// Ends a running timer because something else took over (a new athlete, plan, or set).
    private func cancelTimer(_ ws: inout StationWorkout, now: Double) -> [NotifierOutput] {
        guard let timer = ws.timer else { return [] }
        ws.timer = nil
        return [.timer(station: ws.station, athlete: ws.athlete, timer.message(at: now, state: .cancelled))]
    }

    /// After a rest (run out or skipped): the plan moves on; the display and the detector follow.
    private mutating func finishRest(_ ws: inout StationWorkout, event: String, now: Double) -> [NotifierOutput] {
        var out: [NotifierOutput] = []
        let advance = ws.advance()
        let workoutMessage = ws.message(event: advance == .done ? "plan-done" : event, fallbackRestS: settings.defaultRestS)
        out.append(.workout(station: ws.station, athlete: ws.athlete, workoutMessage))
        if case .nextExercise = advance { out.append(assignCommand(ws, now: now)) }
        return out
    }

    // MARK: Sets and reps

    /// `sentTs`: the set message's `ts` (the recorder's readiness names the set it read by it).
    mutating func handle(_ set: SetMessage, station: String, athlete: String?, sentTs: Double? = nil, now: Double) -> [NotifierOutput] {
        var ws = workout(station)
        if ws.athlete == nil, let athlete { ws.athlete = athlete }
        var out: [NotifierOutput] = []
        switch set.event {
        case .start:
            guard ws.phase == .resting else { return [] }
            // The athlete started before the rest was over: the rest ends here.
            out += cancelTimer(&ws, now: now)
            out += finishRest(&ws, event: "set-started", now: now)
        case .end:
            defer { if lateSets[station]?.setId == set.setId { lateSets[station] = nil } }
            guard ws.lastEndedSetId != set.setId else { return [] }
            ws.lastEndedSetId = set.setId
            ws.setsDone += 1
            if set.reason == .velocityLoss {
                out += velocityLossNotice(
                    station: station, athlete: ws.athlete ?? athlete, setId: set.setId,
                    lossPct: set.velocityLossPct ?? 0, thresholdPct: ws.vlThresholdPct, stopped: true, now: now)
            }
            if ws.phase == .resting {
                // Its start went unseen: the previous rest ended when it began.
                out += cancelTimer(&ws, now: now)
                out += finishRest(&ws, event: "set-started", now: now)
            }
            if ws.phase == .done {
                break  // the plan is finished; extra sets are counted, not timed
            }
            if ws.isLastPlannedSet {
                out += cancelTimer(&ws, now: now)
                _ = ws.advance()
                out.append(.workout(station: station, athlete: ws.athlete, ws.message(event: "plan-done", fallbackRestS: settings.defaultRestS)))
                break
            }
            out += cancelTimer(&ws, now: now)
            // A set whose last rep came late (after an outage) ended that long ago: its rest began
            // then, and may be over already (the next tick says so), never restarted from now.
            // Only as late as the rep still is: a set end that comes well after its late rep (a
            // detector that caught up, then saw the set end live) starts the rest from now.
            let lateS = lateSets[station].flatMap { $0.setId == set.setId ? max(0, $0.lateS - (now - $0.at)) : nil } ?? 0
            let timer = RestTimer(
                station: station, durationS: ws.restS(fallbackS: settings.defaultRestS), now: now - lateS,
                setId: set.setId, exercise: ws.exercise ?? set.exercise)
            ws.timer = timer
            ws.phase = .resting
            nextTick[station] = now + settings.tickS
            adviseNextSet(&ws, after: set)
            if let question = readinessQuestion(ws, setTs: sentTs ?? now) { readinessQuestions[station] = question }
            out.append(.workout(station: station, athlete: ws.athlete, ws.message(event: "set-ended", fallbackRestS: settings.defaultRestS)))
            out.append(.timer(station: station, athlete: ws.athlete, timer.message(at: now)))
            // A plan with one load per set: the detector (and so the recorder's sets) learns the
            // next set's load now, during the rest, so a set begun before the rest is over has it too.
            if let next = ws.nextSetLoadChange { out.append(loadCommand(ws, loadKg: next, now: now)) }
        }
        state.stations[station] = ws
        needsSave = true
        return out
    }

    mutating func handle(_ rep: RepMessage, station: String, athlete: String?, now: Double) -> [NotifierOutput] {
        if let lateS = rep.lateS {
            lateSets[station] = (rep.setId, lateS, now)
        } else if lateSets[station] != nil {
            lateSets[station] = nil  // the readings flow live again
        }
        var ws = workout(station)
        if rep.setId != ws.repSetId { (ws.repSetId, ws.repVelocities) = (rep.setId, []) }
        if ws.repVelocities.count < LoadAdvisor.repsPerSet, rep.meanVelocityMps.isFinite, rep.meanVelocityMps > 0, ws.athlete != nil || ws.plan != nil {
            // Only for a station with someone assigned: advice needs a plan, and a free-running
            // detector's reps would otherwise fill the state with stations nobody uses.
            ws.repVelocities.append(rep.meanVelocityMps)
            state.stations[station] = ws
        }
        guard rep.velocityLossPct >= ws.vlThresholdPct else { return [] }
        return velocityLossNotice(
            station: station, athlete: ws.athlete ?? athlete, setId: rep.setId,
            lossPct: rep.velocityLossPct, thresholdPct: ws.vlThresholdPct, stopped: false, lateS: rep.lateS, now: now)
    }

    // MARK: Load advice

    /// Keeps the detector's profile slope for `athlete`'s exercise (only one falling with load).
    private mutating func remember(_ profile: ProfileMessage, athlete: String) {
        guard profile.slopeMpsPerKg.isFinite, profile.slopeMpsPerKg < 0 else { return }
        var slopes = state.profileSlopes ?? [:]
        let key = "\(athlete)/\(profile.exercise)"
        guard slopes[key] != profile.slopeMpsPerKg else { return }
        slopes[key] = profile.slopeMpsPerKg
        state.profileSlopes = slopes
        needsSave = true
    }

    /// After `set` ended at a station whose plan item has a velocity target and more sets to
    /// come: the next set's load advice, applied at once when the item says `!auto`.
    private func adviseNextSet(_ ws: inout StationWorkout, after set: SetMessage) {
        guard let item = ws.planned, item.targetMeanVelocityMps != nil else { return }
        let velocity = (ws.repSetId == set.setId ? LoadAdvisor.setVelocity(ws.repVelocities) : nil) ?? set.bestMeanVelocityMps
        if let velocity, let load = set.loadKg ?? ws.loadKg {
            ws.adviceSets.append(AdvisedSet(loadKg: load, velocityMps: velocity, velocityLossPct: set.velocityLossPct))
        }
        guard ws.setNumber < item.sets, let wire = advice(for: ws) else {
            ws.advice = nil
            return
        }
        ws.advice = wire
        if item.autoAdvice == true, wire.loadKg != nil || wire.fewerSets { _ = ws.apply(wire) }
    }

    /// The advice for the station's upcoming set from today's sets so far, with readiness's one
    /// set fewer until an advice carried it into the plan; nil without a velocity target.
    private func advice(for ws: StationWorkout) -> WorkoutMessage.Advice? {
        guard let item = ws.planned, let target = item.targetMeanVelocityMps else { return nil }
        let exercise = ws.exercise ?? item.exercise
        let slope = ws.athlete.flatMap { state.profileSlopes?["\($0)/\(exercise)"] }
        let advice = LoadAdvisor.advise(
            sets: ws.adviceSets, targetMps: target, profileSlopeMpsPerKg: slope, gym: settings.gym, cutoffPct: ws.vlThresholdPct,
            readinessLow: ws.readinessApplied ? nil : ws.readinessLow)
        return WorkoutMessage.Advice(
            forSet: ws.upcomingSet, loadKg: advice.loadKg, method: advice.method?.rawValue, loads: advice.loads, targetMps: target,
            fewerSets: advice.fewerSets, fewerSetsReason: advice.fewerSetsReason, reason: advice.reason, applied: false)
    }

    // MARK: Readiness

    /// Whether to ask the recorder about today's readiness after the set just ended: the station
    /// has advice for its next set, and the set is one of the exercise's first today
    /// (`Readiness.firstSets`, the sets the recorder scores), and readiness took no set off yet.
    private func readinessQuestion(_ ws: StationWorkout, setTs: Double) -> ReadinessQuestion? {
        guard ws.advice != nil, !ws.readinessApplied, let athlete = ws.athlete, let exercise = ws.exercise,
            (1...Readiness.firstSets).contains(ws.adviceSets.count)
        else { return nil }
        return ReadinessQuestion(station: ws.station, athlete: athlete, exercise: exercise, setTs: setTs)
    }

    /// The readiness questions since the last call (the runtime asks the recorder), by station.
    public mutating func takeReadinessQuestions() -> [ReadinessQuestion] {
        guard !readinessQuestions.isEmpty else { return [] }
        defer { readinessQuestions = [:] }
        return readinessQuestions.keys.sorted().compactMap { readinessQuestions[$0] }
    }

    /// The recorder's answer about today's readiness at `station`. Kept while the station's athlete
    /// and exercise are the ones it is about; when it changes whether readiness asks for one set
    /// fewer, a pending advice for the next set is advised anew (and applied, for `!auto`) and the
    /// station's workout sent at once. An advice that already takes a set off for another reason
    /// stands: one set fewer at most per advice.
    public mutating func noteReadiness(_ readiness: SessionReadiness, station: String, now: Double) -> [NotifierOutput] {
        guard var ws = state.stations[station], ws.athlete == readiness.athlete, ws.exercise == readiness.exercise else { return [] }
        let low = LoadAdvisor.readinessLow(readiness.assessment)
        let before = ws.readinessLow
        guard low != before else { return [] }
        ws.readinessLow = low
        needsSave = true
        var out: [NotifierOutput] = []
        if ws.phase == .resting, !ws.readinessApplied, let pending = ws.advice, pending.forSet == ws.upcomingSet,
            let item = ws.planned, ws.setNumber < item.sets,
            !pending.fewerSets || (!pending.applied && before != nil && pending.fewerSetsReason == before),
            let renewed = advice(for: ws)
        {
            var unchanged = pending
            unchanged.applied = false
            if renewed != unchanged {
                ws.advice = renewed
                if item.autoAdvice == true, renewed.loadKg != nil || renewed.fewerSets { _ = ws.apply(renewed) }
                out.append(.workout(station: station, athlete: ws.athlete, ws.message(event: "snapshot", fallbackRestS: settings.defaultRestS)))
            }
        }
        state.stations[station] = ws
        return out
    }

    /// `advice.accept`: the station's pending advice goes into its plan; the detector learns the
    /// new load (`set.load`) when it changes the next set's.
    private mutating func acceptAdvice(_ command: CommandMessage, station: String, now: Double) -> [NotifierOutput] {
        var ws = workout(station)
        guard let advice = ws.advice else {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "advice.accept: no load advice at \(station)")]
        }
        guard !advice.applied else {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "advice.accept: the advice at \(station) is applied already")]
        }
        if let problem = ws.apply(advice) {
            return [.rejected(station: station, command: command.command, id: command.id, reason: "advice.accept: \(problem)")]
        }
        state.stations[station] = ws
        needsSave = true
        let message = ws.message(event: "advice-accepted", fallbackRestS: settings.defaultRestS)
        var out: [NotifierOutput] = [.workout(station: station, athlete: ws.athlete, message)]
        if ws.phase == .ready, let load = advice.loadKg {
            out.append(loadCommand(ws, loadKg: load, now: now))
        } else if let next = ws.nextSetLoadChange {
            out.append(loadCommand(ws, loadKg: next, now: now))
        }
        return out
    }

    /// `lateS`: the rep that reached the threshold came this late; the notice says so instead of
    /// asking to stop a set that is most likely over.
    private mutating func velocityLossNotice(
        station: String, athlete: String?, setId: String, lossPct: Double, thresholdPct: Double,
        stopped: Bool, lateS: Double? = nil, now: Double
    ) -> [NotifierOutput] {
        let who = athlete.map { "\($0) at \(station)" } ?? station
        let words =
            stopped
            ? "\(who): the set stopped at \(percent(lossPct)) velocity loss (threshold \(percent(thresholdPct))); rest before the next set"
            : lateS.map {
                "\(who): velocity loss \(percent(lossPct)) reached the \(percent(thresholdPct)) threshold \(whole($0)) s ago (reported late, after the station's link came back)"
            } ?? "\(who): velocity loss \(percent(lossPct)) reached the \(percent(thresholdPct)) threshold; stop the set"
        var alert = AlertMessage(
            alertId: "\(station)/velocity-loss/\(setId)", kind: .velocityLoss, severity: .warning, state: .notice,
            message: words, since: now - (lateS ?? 0), station: station, athlete: athlete)
        alert.setId = setId
        alert.velocityLossPct = lossPct
        alert.thresholdPct = thresholdPct
        guard let notice = state.alerts.notice(alert) else { return [] }
        needsSave = true
        return [.alert(notice)]
    }

    // MARK: Posture, sensors, heartbeats

    mutating func handle(_ report: PostureMessage, station: String, athlete: String?, now: Double) -> [NotifierOutput] {
        let id = "\(station)/posture"
        let who = athlete ?? self.athlete(at: station)
        if report.correct {
            let whoWords = who.map { "\($0) at \(station)" } ?? station
            guard let cleared = state.alerts.clear(id, message: "\(whoWords): posture correct again", now: now) else { return [] }
            needsSave = true
            return [.alert(cleared)]
        }
        let bad = settings.postureLimitS.map { report.badForS >= $0 } ?? report.sustainedBad
        guard bad else { return [] }
        let whoWords = who.map { "\($0) at \(station)" } ?? station
        var alert = AlertMessage(
            alertId: id, kind: .posture, severity: .warning, state: .raised,
            message: "\(whoWords): bad posture for \(whole(report.badForS)) s; straighten up and brace",
            since: now - report.badForS, station: station, athlete: who)
        alert.badForS = report.badForS
        alert.limitS = settings.postureLimitS
        return publishRaise(alert, now: now)
    }

    private mutating func publishRaise(_ alert: AlertMessage, now: Double) -> [NotifierOutput] {
        let wasOpen = state.alerts.isOpen(alert.alertId)
        guard let published = state.alerts.raise(alert, now: now, repeatS: settings.repeatS) else { return [] }
        if !wasOpen { needsSave = true }
        return [.alert(published)]
    }

    private mutating func clearAlert(_ id: String, message: String, now: Double) -> [NotifierOutput] {
        guard let cleared = state.alerts.clear(id, message: message, now: now) else { return [] }
        needsSave = true
        return [.alert(cleared)]
    }

    mutating func handle(_ status: StatusMessage, station: String, now: Double) -> [NotifierOutput] {
        let key = "\(station)/\(status.sensor)"
        let disconnectedId = "\(station)/sensor-disconnected/\(status.sensor)"
        let rateId = "\(station)/sensor-rate/\(status.sensor)"
        let who = athlete(at: station)
        switch status.state {
        case .disconnected, .error:
            state.sensorRatesHz[key] = nil
            var alert = AlertMessage(
                alertId: disconnectedId, kind: .sensorDisconnected, severity: .critical, state: .raised,
                message: "\(station): \(status.sensor) sensor \(status.state.rawValue): \(status.reason ?? "check its power, battery and link")",
                since: now, station: station, athlete: who)
            alert.sensor = status.sensor
            return clearAlert(rateId, message: "\(station): \(status.sensor) sensor rate no longer measured (link down)", now: now)
                + publishRaise(alert, now: now)
        case .connecting:
            return []
        case .connected, .streaming:
            var out = clearAlert(disconnectedId, message: "\(station): \(status.sensor) sensor \(status.state.rawValue) again", now: now)
            if status.state == .connected { state.sensorRatesHz[key] = nil }
            guard status.state == .streaming, let rate = status.rateHz, rate >= 0, rate <= 10_000 else { return out }
            let best = max(state.sensorRatesHz[key] ?? 0, rate)
            state.sensorRatesHz[key] = best
            if rate < settings.rateDropFraction * best {
                var alert = AlertMessage(
                    alertId: rateId, kind: .sensorRate, severity: .warning, state: .raised,
                    message:
                        "\(station): \(status.sensor) sensor rate dropped to \(hz(rate)) of \(hz(best)); check the battery and the distance to the receiver",
                    since: now, station: station, athlete: who)
                alert.sensor = status.sensor
                alert.rateHz = rate
                alert.expectedRateHz = best
                out += publishRaise(alert, now: now)
            } else if rate >= 0.8 * best {
                out += clearAlert(rateId, message: "\(station): \(status.sensor) sensor rate back to \(hz(rate))", now: now)
            }
            return out
        }
    }

    mutating func handleHeartbeat(_ beat: HeartbeatMessage, name: String, now: Double) -> [NotifierOutput] {
        guard name != "bus", name != "notifier" else { return [] }
        if beat.stopping == true {
            // Gone as asked (proto/heartbeat.schema.json, `stopping`): no longer watched, so not
            // raised as silent; its next heartbeat, if it starts again, watches it anew.
            if state.heartbeats.removeValue(forKey: name) != nil { needsSave = true }
            return clearAlert("\(name)/heartbeat-missing", message: "\(name) stopped", now: now)
        }
        if state.heartbeats[name] == nil { needsSave = true }
        state.heartbeats[name] = WatchedHeartbeat(lastSeen: now, intervalS: max(0.01, beat.intervalS))
        return clearAlert("\(name)/heartbeat-missing", message: "\(name) is back: heartbeat received", now: now)
    }

    /// A program that fetches what it missed says how much was lost for good: a
    /// critical notice at each increase (once per program start and total).
    mutating func reportLoss(_ beat: HeartbeatMessage, name: String, src: String, now: Double) -> [NotifierOutput] {
        guard let lost = beat.inputs?.lost, lost > 0 else { return [] }
        let instance = src.split(separator: "/").first.map(String.init) ?? src
        let alert = AlertMessage(
            alertId: "\(name)/data-lost/\(instance)/\(lost)", kind: .dataLost, severity: .critical, state: .notice,
            message: "\(name): \(lost) messages lost for good since it started (no producer's journal held them any more); see its log",
            since: now, station: Self.alertStation(forHeartbeat: name), athlete: nil)
        guard let notice = state.alerts.notice(alert) else { return [] }
        needsSave = true
        return [.alert(notice)]
    }

    /// The station an alert about a silent program belongs to: a bridge's station, else the program's name.
    static func alertStation(forHeartbeat name: String) -> String {
        name.hasPrefix("bridge-") && name.count > 7 ? String(name.dropFirst(7)) : name
    }

    // MARK: Clock

    /// Advances the clock to `now`: timer ticks, rests that ran out, silent programs, snapshots.
    public mutating func tick(now: Double) -> [NotifierOutput] {
        var out: [NotifierOutput] = []
        var ready: [String] = []
        while let first = due.min, first.at <= now {
            due.removeMin()
            guard queued[first.station] == first.at else { continue }  // changed since: queued again
            queued[first.station] = nil
            ready.append(first.station)
        }
        for station in ready.sorted() {
            defer { schedule(station) }
            guard var ws = state.stations[station], let timer = ws.timer else { continue }
            if timer.isOver(at: now) {
                out.append(.timer(station: station, athlete: ws.athlete, timer.message(at: now, state: .over)))
                ws.timer = nil
                let finished = finishRest(&ws, event: "rest-over", now: now)
                out += restOverNotice(ws, timer: timer, now: now)
                out += finished
                state.stations[station] = ws
                nextTick[station] = nil
                needsSave = true
            } else if now >= nextTick[station] ?? now {
                out.append(.timer(station: station, athlete: ws.athlete, timer.message(at: now)))
                nextTick[station] = now + settings.tickS
            }
        }
        for name in state.heartbeats.keys.sorted() {
            guard let watched = state.heartbeats[name] else { continue }
            let limit = max(settings.missedHeartbeats * watched.intervalS, watched.intervalS + 2)
            let silent = now - max(watched.lastSeen, startedAt)
            guard silent > limit else { continue }
            let station = Self.alertStation(forHeartbeat: name)
            var alert = AlertMessage(
                alertId: "\(name)/heartbeat-missing", kind: .heartbeatMissing, severity: .critical, state: .raised,
                message: "\(name) silent for \(whole(silent)) s (heartbeat every \(seconds(watched.intervalS))); check that it runs and reaches the bus",
                since: max(watched.lastSeen, startedAt), station: station, athlete: athlete(at: station))
            alert.program = name
            alert.silentS = silent
            out += publishRaise(alert, now: now)
        }
        if now >= nextSnapshot {
            nextSnapshot = now + settings.snapshotS
            for station in state.stations.keys.sorted() {
                guard let ws = state.stations[station], ws.athlete != nil || ws.plan != nil else { continue }
                out.append(.workout(station: station, athlete: ws.athlete, ws.message(event: "snapshot", fallbackRestS: settings.defaultRestS)))
            }
        }
        return out
    }

    private mutating func restOverNotice(_ ws: StationWorkout, timer: RestTimer, now: Double) -> [NotifierOutput] {
        let who = ws.athlete.map { "\($0) at \(ws.station)" } ?? ws.station
        let next: String
        switch ws.phase {
        case .done: next = "the plan is done"
        default:
            var words = "next: "
            if let exercise = ws.exercise { words += exercise + " " }
            words += "set \(ws.setNumber)"
            if let sets = ws.planned?.sets { words += " of \(sets)" }
            if let reps = ws.planned?.reps { words += ", \(reps) reps" }
            if let load = ws.loadKg { words += " at \(kg(load))" }
            next = words
        }
        let alert = AlertMessage(
            alertId: "\(ws.station)/rest-over/\(timer.id)", kind: .restOver, severity: .info, state: .notice,
            message: "\(who): rest over; \(next)", since: now, station: ws.station, athlete: ws.athlete)
        guard let notice = state.alerts.notice(alert) else { return [] }
        return [.alert(notice)]
    }
}

// Numbers in plain words.
// Every number here comes off the bus: formatted, never converted to Int (1e19 or NaN would trap).
func whole(_ value: Double) -> String { value.isFinite ? String(format: "%.0f", value) : "?" }
func percent(_ value: Double) -> String { "\(whole(value)) %" }
func hz(_ value: Double) -> String { value < 10 ? String(format: "%.1f Hz", value) : "\(whole(value)) Hz" }
func kg(_ value: Double) -> String { value == value.rounded() ? "\(whole(value)) kg" : String(format: "%.1f kg", value) }
func seconds(_ value: Double) -> String { value == value.rounded() ? "\(whole(value)) s" : String(format: "%.1f s", value) }
