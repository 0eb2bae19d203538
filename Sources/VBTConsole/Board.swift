import Foundation
import VBTBus
import VBTWire

/// What the coach console shows: every station's athlete, exercise and load, set n of N,
/// rep n of N, the current set's reps, the last set's summary, rejected attempts,
/// posture, rest, sensor links and open alerts. A pure value: bus messages and the
/// clock in, station states out, each with the version it last changed at so a
/// browser is sent only what changed since it last drew.
public struct ConsoleBoard: Sendable {
    /// Seconds without a bridge's heartbeat before its station's sensors show as silent
    /// (three of the bridges' 1 s heartbeats; proto/heartbeat.schema.json).
    public var silentAfterS = 3.0
    /// Rejected attempts kept per station, newest last.
    public var rejectedKept = 5
    /// Answers to commands kept per station, newest last (a page waits for its command's).
    public var acksKept = 16
    /// The velocity zones, slowest first (the detector's; coach-console sets them), for the
    /// target band of an athlete assigned a `target_zone`.
    public var zones: [ZoneFloor] = []

    public private(set) var stations: [String: StationState] = [:]
    /// Open alerts that belong to no single station (a program's missing heartbeat), by id.
    public private(set) var gymAlerts: [String: AlertView] = [:]
    /// The board's version when `gymAlerts` last changed.
    public private(set) var gymAlertsVersion: UInt64 = 0
    /// Raised with every change; a station's `version` is the board's at its last change.
    public private(set) var version: UInt64 = 0
    /// Messages taken in, and those that did not decode (counted, never shown).
    public private(set) var messages = 0
    public private(set) var malformed = 0
    /// The latest notices and clears, newest last (at most `recentKept`), each with when it came.
    public private(set) var recent: [RecentAlert] = []
    /// Notices and clears kept in `recent`.
    public var recentKept = 20

    public init() {}

    /// Shows `line` on `station` (a known one), when it changes what is there.
    public mutating func note(readiness line: ReadinessLine, station: String) {
        guard stations[station] != nil, stations[station]?.readiness != line else { return }
        update(station, athlete: nil) { $0.readiness = line }
    }

    /// Takes in one message received at `now` (monotonic seconds).
    public mutating func apply(_ message: BusMessage, now: Double) {
        let station = message.envelope.station
        let athlete = message.envelope.athlete
        messages += 1
        func decode<P: BusPayload>(_ type: P.Type) -> P? {
            if let payload = try? message.payload(as: type) { return payload }
            malformed += 1
            return nil
        }
        switch message.envelope.type {
        case RepMessage.type:
            guard let rep = decode(RepMessage.self) else { return }
            let zones = self.zones
            update(station, athlete: athlete) { $0.take(rep, now: now, zones: zones) }
        case SetMessage.type:
            guard let set = decode(SetMessage.self) else { return }
            // A set's end may come after its station was unassigned: only its start says who is there.
            update(station, athlete: set.event == .start ? athlete : nil) { $0.take(set, now: now, by: athlete) }
        case RejectedMessage.type:
            guard let rejected = decode(RejectedMessage.self) else { return }
            let kept = rejectedKept
            update(station, athlete: athlete) {
                $0.rejected.append(
                    .init(reason: rejected.reason, detail: rejected.detail, meanVelocityMps: rejected.meanVelocityMps, athlete: athlete ?? $0.athlete))
                if $0.rejected.count > kept { $0.rejected.removeFirst($0.rejected.count - kept) }
            }
        case PostureMessage.type:
            guard let posture = decode(PostureMessage.self) else { return }
            // Posture readings come at the wearable's rate; only a change is a change to draw.
            let view = PostureView(correct: posture.correct, badForS: (posture.badForS * 1).rounded(.down), sustainedBad: posture.sustainedBad)
            let whose = athlete ?? stations[station]?.athlete
            guard
                stations[station]?.posture != view || (athlete != nil && stations[station]?.athlete != athlete)
                    || stations[station]?.postureAthlete != whose
            else { return }
            update(station, athlete: athlete) {
                $0.posture = view
                $0.postureAthlete = whose
            }
        case AckMessage.type:
            guard let ack = decode(AckMessage.self) else { return }
            let kept = acksKept
            update(station, athlete: nil) {
                $0.acks.append(AckView(cmdId: ack.cmdId, command: ack.command, program: ack.program, state: ack.state.rawValue, reason: ack.reason))
                if $0.acks.count > kept { $0.acks.removeFirst($0.acks.count - kept) }
            }
        case CalibrationMessage.type:
            guard decode(CalibrationMessage.self) != nil else { return }
            // A calibration is the calibrated athlete's, who need not be the one at the station.
            update(station, athlete: nil) { $0.calibrations += 1 }
        case TimerMessage.type:
            guard let timer = decode(TimerMessage.self) else { return }
            // A timer cancelled by an unassignment still names the athlete who left.
            update(station, athlete: nil) {
                $0.rest = RestView(timer)
                $0.restReceivedAt = now
                $0.restAthlete = athlete ?? $0.athlete
            }
        case WorkoutMessage.type:
            guard let workout = decode(WorkoutMessage.self) else { return }
            update(station, athlete: athlete) { $0.take(workout) }
        case StatusMessage.type:
            guard let status = decode(StatusMessage.self) else { return }
            update(station, athlete: athlete) {
                $0.sensors[status.sensor] = SensorView(
                    state: status.state.rawValue, rateHz: status.rateHz.map { $0.rounded() }, batteryPct: status.batteryPct, reason: status.reason)
                $0.bridgeSeenAt = now
                $0.silent = false
            }
        case HeartbeatMessage.type:
            // A bridge's heartbeat (heartbeat.bridge-<station>) says its station's link is alive.
            guard let of = HeartbeatMessage.bridgeStation(heartbeatName: station) else { return }
            let beat = try? message.payload(as: HeartbeatMessage.self)
            let stopping = beat?.stopping == true
            if let state = stations[of], !state.silent, !state.reconnecting {
                // Not a change to draw.
                stations[of]?.bridgeSeenAt = now
                stations[of]?.bridgeStopping = stopping
            } else {
                update(of, athlete: nil) {
                    $0.bridgeSeenAt = now
                    $0.bridgeStopping = stopping
                    $0.silent = false
                    $0.heard(sampleSeqs: beat.map(StationState.sampleSeqs), stopping: stopping)
                }
            }
        case AlertMessage.type:
            guard var alert = decode(AlertMessage.self) else { return }
            alert.station = station
            let open = alert.state == .raised || alert.state == .repeat
            if alert.state == .cleared || alert.state == .notice {
                recent.append(RecentAlert(at: now, cleared: alert.state == .cleared, message: alert.message))
                if recent.count > recentKept { recent.removeFirst(recent.count - recentKept) }
            }
            // An alert about a program (not a station's bridge) is the whole gym's.
            if stations[station] == nil, alert.program != nil {
                guard open || gymAlerts[alert.alertId] != nil else { return }
                gymAlerts[alert.alertId] = open ? AlertView(alert) : nil
                version += 1
                gymAlertsVersion = version
                return
            }
            guard open || stations[station]?.alerts[alert.alertId] != nil else { return }
            update(station, athlete: nil) { $0.alerts[alert.alertId] = open ? AlertView(alert) : nil }
        case CommandMessage.type:
            guard let command = try? message.payload(as: CommandMessage.self) else { return }
            if command.name == .athleteUnassign {
                update(station, athlete: nil) { $0.unassign() }
            } else if command.name == .athleteAssign, let assign = try? AthleteAssign(args: command.args) {
                let zones = self.zones
                update(station, athlete: nil) { $0.take(assign, zones: zones) }
            }
        default:
            return
        }
    }

    /// Marks stations whose bridge has been silent for `silentAfterS` at `now`.
    public mutating func tick(now: Double) {
        for (name, state) in stations where !state.silent {
            guard let seen = state.bridgeSeenAt, now - seen > silentAfterS else { continue }
            update(name, athlete: nil) {
                $0.silent = true
                // A bridge that said it stops is gone; one cut off is expected back, with its journal.
                $0.reconnecting = !$0.bridgeStopping
                $0.sampleSeqsSeen = nil
            }
        }
    }

    /// The stations changed after `version`, by name.
    public func changed(since version: UInt64) -> [StationState] {
        stations.values.filter { $0.version > version }.sorted { $0.station < $1.station }
    }

    private mutating func update(_ station: String, athlete: String?, _ change: (inout StationState) -> Void) {
        var state = stations[station] ?? StationState(station: station)
        if let athlete, state.athlete != athlete { state.athlete = athlete }
        change(&state)
        version += 1
        state.version = version
        stations[station] = state
    }
}

/// One station as the console draws it. Encoded as JSON for the browser (snake_case keys).
public struct StationState: Sendable, Equatable, Codable {
    public var station: String
    public var version: UInt64 = 0
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    /// The plan's set n of N (the notifier's workout), when a plan runs.
    public var set: Int?
    public var sets: Int?
    /// The plan's reps for this set (rep n of N), when it gives them.
    public var plannedReps: Int?
    public var workoutState: String?
    /// The plan the notifier runs here, when one does.
    public var plan: String?
    /// Whether a set is going on now.
    public var inSet = false
    public var setId: String?
    /// The reps of the current set (or the last one, until the next starts), in order.
    public var reps: [RepBar] = []
    public var velocityLossPct: Double?
    /// The athlete's velocity-loss threshold: the plan's or assignment's, else the detector's default (20 %).
    public var vlThresholdPct = 20.0
    /// The band each rep is held against: the plan's velocity target, else the zone the athlete
    /// was assigned (`athlete.assign`'s `target_zone`); nil without either.
    public var target: TargetBand?
    /// The notifier's load advice for the next set (its `workout`'s `advice`), while it stands.
    public var advice: WorkoutMessage.Advice?
    public var lastSet: LastSet?
    public var rejected: [RejectedView] = []
    public var posture: PostureView?
    /// Posture calibrations finished here since the console started.
    public var calibrations = 0
    public var rest: RestView?
    /// Monotonic seconds when `rest` came, to count it down between the notifier's messages; the
    /// server's own, not sent (a browser counts down by its own clock).
    public internal(set) var restReceivedAt: Double?
    public var sensors: [String: SensorView] = [:]
    /// Whether the station's bridge has gone quiet (no heartbeat or status for `silentAfterS`).
    public var silent = false
    /// Whether the station is cut off and expected back: its bridge went quiet without saying it
    /// stops (`stopping: true` in its last heartbeat), and its readings have not flowed again
    /// since. Set with `silent`; it outlasts `silent` until the bridge's heartbeats show its
    /// readings moving on (or a live rep comes), while its journal's readings are fetched.
    public var reconnecting = false
    public var alerts: [String: AlertView] = [:]
    /// The latest answers to commands given here (proto/ack.schema.json), newest last.
    public var acks: [AckView] = []
    /// The readiness of the athlete's latest session (docs/detection.md, "Readiness"), as the
    /// recorder stored it; shown only while `athlete` is the one it belongs to.
    public var readiness: ReadinessLine?
    /// Monotonic seconds of the last sign of life from the bridge; the server's own, not sent.
    var bridgeSeenAt: Double?
    /// Whether the bridge's last heartbeat said it stops; the server's own, not sent.
    var bridgeStopping = false
    /// While reconnecting: the last seqs of the bridge's sample streams in its last heartbeat
    /// since it came back (nil before one); the server's own, not sent.
    var sampleSeqsSeen: [String: Int]?
    /// Whose the reps (and the set's velocity loss), the last set, the rest and the posture are:
    /// the athlete at the station when they came, who need not be the one there now. The
    /// server's own, not sent; `seen(by:)` keeps to an athlete what is hers.
    var repsAthlete: String?
    var lastSetAthlete: String?
    var restAthlete: String?
    var postureAthlete: String?

    public init(station: String) { self.station = station }

    /// The last rep's mean velocity.
    public var lastMeanVelocityMps: Double? { reps.last?.meanVelocityMps }

    /// The station as `athlete` may see it while she is the one there: what came while another
    /// athlete was there (his reps and set, rest, posture, rejected attempts) is left out, and
    /// so are the answers to commands, the alerts and the calibrations, which are the coaches'.
    public func seen(by athlete: String) -> StationState {
        var view = self
        if repsAthlete != athlete { (view.reps, view.setId, view.inSet, view.velocityLossPct) = ([], nil, false, nil) }
        if lastSetAthlete != athlete { view.lastSet = nil }
        if restAthlete != athlete { view.rest = nil }
        if postureAthlete != athlete { view.posture = nil }
        view.rejected = rejected.filter { $0.athlete == athlete }
        if readiness?.athlete != athlete { view.readiness = nil }
        (view.acks, view.alerts, view.calibrations) = ([], [:], 0)
        return view
    }

    enum CodingKeys: String, CodingKey {
        case station, version, athlete, exercise, set, sets, reps, rejected, posture, calibrations, rest, sensors, silent, reconnecting, alerts, plan,
            acks, readiness
        case loadKg = "load_kg"
        case plannedReps = "planned_reps"
        case workoutState = "workout_state"
        case inSet = "in_set"
        case setId = "set_id"
        case velocityLossPct = "velocity_loss_pct"
        case vlThresholdPct = "vl_threshold_pct"
        case lastSet = "last_set"
        case target, advice
    }

    /// The last seqs of a bridge's sample streams, from its heartbeat's replay offer (empty
    /// without a journal).
    static func sampleSeqs(_ beat: HeartbeatMessage) -> [String: Int] {
        (beat.replay?.lastSeq ?? [:]).filter { $0.key.contains(SampleMessage.topicPrefix) }
    }

    /// A bridge heard again (`sampleSeqs`: its heartbeat's sample streams, nil when it said
    /// nothing readable). A reconnecting station's readings flow again when a heartbeat shows
    /// a sample stream past where the previous one since its return left it; a bridge that
    /// journals nothing (no streams offered) or says it stops gives nothing to wait for.
    mutating func heard(sampleSeqs seqs: [String: Int]?, stopping: Bool) {
        guard reconnecting else { return }
        guard !stopping, let seqs, !seqs.isEmpty else {
            reconnecting = false
            return
        }
        if let before = sampleSeqsSeen, seqs.contains(where: { $0.value > (before[$0.key] ?? Int.max) }) {
            reconnecting = false
            sampleSeqsSeen = nil
        } else {
            sampleSeqsSeen = seqs
        }
    }

    mutating func take(_ rep: RepMessage, now: Double, zones: [ZoneFloor] = []) {
        // A live rep is readings flowing again.
        if !rep.isLate, !silent { (reconnecting, sampleSeqsSeen) = (false, nil) }
        if rep.setId != setId {
            // A rep of a set whose start was not seen (the console started mid-set): begin it here.
            setId = rep.setId
            reps = []
            inSet = true
        }
        reps.removeAll { $0.index == rep.index }
        reps.append(
            .init(
                index: rep.index, meanVelocityMps: rep.meanVelocityMps, peakVelocityMps: rep.peakVelocityMps, zone: rep.zone,
                velocityLossPct: rep.velocityLossPct, band: target?.band(of: rep.meanVelocityMps), lateS: rep.lateS,
                eccentricS: rep.eccentricS, pauseBottomS: rep.pauseBottomS, concentricS: rep.concentricS, pauseTopS: rep.pauseTopS,
                tempo: rep.tempo, tempoMet: rep.tempoMet, tempoMissed: rep.tempoMissed))
        reps.sort { $0.index < $1.index }
        repsAthlete = athlete
        velocityLossPct = rep.velocityLossPct
        if let exercise = rep.exercise { self.exercise = exercise }
        if let load = rep.loadKg { loadKg = load }
    }

    /// `by`: the athlete the message names (a set's end may come after its athlete left).
    mutating func take(_ set: SetMessage, now: Double, by: String? = nil) {
        switch set.event {
        case .start:
            setId = set.setId
            inSet = true
            reps = []
            repsAthlete = by ?? athlete
            velocityLossPct = 0
            rest = nil
        case .end:
            inSet = false
            if let loss = set.velocityLossPct { velocityLossPct = loss }
            let own = set.setId == setId ? reps : []
            lastSetAthlete = set.setId == setId ? repsAthlete : (by ?? athlete)
            lastSet = LastSet(
                setId: set.setId, reps: set.reps ?? own.count, bestMeanVelocityMps: set.bestMeanVelocityMps ?? own.map(\.meanVelocityMps).max(),
                lastMeanVelocityMps: own.last?.meanVelocityMps, velocityLossPct: set.velocityLossPct, reason: set.reason?.rawValue)
        }
        if let exercise = set.exercise { self.exercise = exercise }
        if let load = set.loadKg { loadKg = load }
    }

    mutating func take(_ workout: WorkoutMessage) {
        exercise = workout.exercise ?? exercise
        loadKg = workout.loadKg ?? loadKg
        set = workout.set
        sets = workout.sets
        plannedReps = workout.reps
        workoutState = workout.state.rawValue
        plan = workout.plan
        vlThresholdPct = workout.vlThresholdPct
        advice = workout.advice
        if let mps = workout.targetMeanVelocityMps {
            target = TargetBand(plan: mps)
        } else if target?.source == TargetBand.Source.plan.rawValue {
            target = nil
        }
    }

    /// Nobody at the station any more.
    mutating func unassign() {
        (athlete, exercise, loadKg, plan, sets, set, plannedReps, workoutState) = (nil, nil, nil, nil, nil, nil, nil, nil)
        (target, advice) = (nil, nil)
    }

    mutating func take(_ assign: AthleteAssign, zones: [ZoneFloor] = []) {
        // A plan's target stays while the plan runs; a zone follows each assignment.
        if target?.source != TargetBand.Source.plan.rawValue || plan == nil {
            target = assign.targetZone.flatMap { TargetBand(zone: $0, in: zones) }
        }
        if let athlete = assign.athlete { self.athlete = athlete }
        if let exercise = assign.exercise { self.exercise = exercise }
        if let load = assign.loadKg { loadKg = load }
        if let threshold = assign.vlThresholdPct { vlThresholdPct = threshold }
    }
}

/// One rep of the current set, a bar on the station's chart.
public struct RepBar: Sendable, Equatable, Codable {
    public var index: Int
    public var meanVelocityMps: Double
    public var peakVelocityMps: Double
    public var zone: String?
    public var velocityLossPct: Double
    /// Where the rep fell against the station's target band when it came: below, in or above.
    public var band: String?
    /// How late the rep was published (its `late_s`), nil for a live rep: drawn marked, never cued.
    public var lateS: Double?
    /// The rep's phases and its prescribed tempo with the verdict (proto/rep.schema.json), when sent.
    public var eccentricS: Double?
    public var pauseBottomS: Double?
    public var concentricS: Double?
    public var pauseTopS: Double?
    public var tempo: String?
    public var tempoMet: Bool?
    public var tempoMissed: [String]?

    enum CodingKeys: String, CodingKey {
        case index, zone, band, tempo
        case lateS = "late_s"
        case eccentricS = "eccentric_s"
        case pauseBottomS = "pause_bottom_s"
        case concentricS = "concentric_s"
        case pauseTopS = "pause_top_s"
        case tempoMet = "tempo_met"
        case tempoMissed = "tempo_missed"
        case meanVelocityMps = "mean_velocity_mps"
        case peakVelocityMps = "peak_velocity_mps"
        case velocityLossPct = "velocity_loss_pct"
    }
}

/// A velocity zone's lower bound (the detector's zones, slowest first).
public struct ZoneFloor: Sendable, Equatable {
    public var name: String
    public var fromMps: Double

    public init(name: String, fromMps: Double) { (self.name, self.fromMps) = (name, fromMps) }
}

/// The mean velocities a rep should fall within: a plan's target +- `planToleranceMps`, or
/// a velocity zone's range.
public struct TargetBand: Sendable, Equatable, Codable {
    /// Where the band comes from.
    public enum Source: String, Sendable { case plan, zone }
    /// Half the width of a plan target's band, m/s: about the smallest change a bar sensor
    /// tells from noise (docs/detection.md), so a rep on target is not called off it.
    public static let planToleranceMps = 0.05

    public var lowMps: Double
    /// Nil for the fastest zone (no upper bound).
    public var highMps: Double?
    /// `plan` or `zone`.
    public var source: String
    public var zone: String?
    public var targetMps: Double?

    init(plan mps: Double) {
        (lowMps, highMps, source, zone, targetMps) = (max(0, mps - Self.planToleranceMps), mps + Self.planToleranceMps, Source.plan.rawValue, nil, mps)
    }

    init?(zone name: String, in zones: [ZoneFloor]) {
        guard let index = zones.firstIndex(where: { $0.name == name }) else { return nil }
        let high = index + 1 < zones.count ? zones[index + 1].fromMps : nil
        (lowMps, highMps, source, zone, targetMps) = (zones[index].fromMps, high, Source.zone.rawValue, name, nil)
    }

    /// `below`, `in` or `above` the band (the low bound is in, the high one above).
    public func band(of mps: Double) -> String {
        if mps < lowMps { return "below" }
        if let highMps, mps >= highMps { return "above" }
        return "in"
    }

    enum CodingKeys: String, CodingKey {
        case source, zone
        case lowMps = "low_mps"
        case highMps = "high_mps"
        case targetMps = "target_mps"
    }
}

/// A set's end, as the station view sums it up.
public struct LastSet: Sendable, Equatable, Codable {
    public var setId: String
    public var reps: Int
    public var bestMeanVelocityMps: Double?
    public var lastMeanVelocityMps: Double?
    public var velocityLossPct: Double?
    /// Why it ended: idle, velocity-loss or command (proto/set.schema.json).
    public var reason: String?

    enum CodingKeys: String, CodingKey {
        case reps, reason
        case setId = "set_id"
        case bestMeanVelocityMps = "best_mean_velocity_mps"
        case lastMeanVelocityMps = "last_mean_velocity_mps"
        case velocityLossPct = "velocity_loss_pct"
    }
}

public struct RejectedView: Sendable, Equatable, Codable {
    public var reason: String
    public var detail: String
    public var meanVelocityMps: Double
    /// Whose attempt it was; the server's own, not sent.
    var athlete: String? = nil

    enum CodingKeys: String, CodingKey {
        case reason, detail
        case meanVelocityMps = "mean_velocity_mps"
    }
}

public struct PostureView: Sendable, Equatable, Codable {
    public var correct: Bool
    /// Whole seconds of bad posture so far.
    public var badForS: Double
    public var sustainedBad: Bool

    enum CodingKeys: String, CodingKey {
        case correct
        case badForS = "bad_for_s"
        case sustainedBad = "sustained_bad"
    }
}

/// The rest timer as the notifier last sent it; the browser counts down from `remaining_s`
/// by its own clock between the notifier's once-a-second messages.
public struct RestView: Sendable, Equatable, Codable {
    public var state: String
    public var durationS: Double
    public var remainingS: Double

    init(_ timer: TimerMessage) {
        state = timer.state.rawValue
        durationS = timer.durationS
        remainingS = timer.remainingS
    }

    enum CodingKeys: String, CodingKey {
        case state
        case durationS = "duration_s"
        case remainingS = "remaining_s"
    }
}

public struct SensorView: Sendable, Equatable, Codable {
    public var state: String
    public var rateHz: Double?
    public var batteryPct: Double?
    public var reason: String?

    enum CodingKeys: String, CodingKey {
        case state, reason
        case rateHz = "rate_hz"
        case batteryPct = "battery_pct"
    }
}

public struct AlertView: Sendable, Equatable, Codable {
    public var alertId: String
    public var kind: String
    public var severity: String
    public var message: String
    /// When the condition began (the alert's `since`, Unix seconds); the server's own, not sent.
    public var since = 0.0

    init(_ alert: AlertMessage) {
        alertId = alert.alertId
        kind = alert.kind.rawValue
        severity = alert.severity.rawValue
        message = alert.message
        since = alert.since
    }

    enum CodingKeys: String, CodingKey {
        case kind, severity, message
        case alertId = "alert_id"
    }
}

/// A notice, or an alert's clearing, as it came.
public struct RecentAlert: Sendable, Equatable {
    /// Monotonic seconds when it came.
    public var at: Double
    /// A clearing (else a notice).
    public var cleared: Bool
    public var message: String
}

/// A program's answer to a command.
public struct AckView: Sendable, Equatable, Codable {
    public var cmdId: String
    public var command: String
    public var program: String
    /// `done` or `refused`.
    public var state: String
    public var reason: String?

    enum CodingKeys: String, CodingKey {
        case command, program, state, reason
        case cmdId = "cmd_id"
    }
}

/// A station's readiness line: whose, the verdict and the text (`96 % (as usual)`).
public struct ReadinessLine: Sendable, Equatable, Codable {
    public var athlete: String
    public var verdict: String
    public var text: String
    /// Creates a line.
    public init(athlete: String, verdict: String, text: String) { (self.athlete, self.verdict, self.text) = (athlete, verdict, text) }
}
