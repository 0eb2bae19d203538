import Foundation
import VBTBus
import VBTWire

/// What `vbt watch` shows: every station's athlete, exercise, set, last rep,
/// velocity loss, posture, rest timer and sensors, and the alerts. A pure value:
/// messages and the clock in, lines of text out (the terminal code is in `vbt`).
public struct WatchBoard: Sendable {
    /// One station's line.
    public struct Row: Sendable, Equatable {
        public var athlete: String?
        public var exercise: String?
        public var loadKg: Double?
        public var set: Int?
        public var sets: Int?
        public var workoutState: WorkoutMessage.State?
        public var lastVelocityMps: Double?
        public var velocityLossPct: Double?
        public var postureCorrect: Bool?
        public var badForS: Double?
        public var timer: TimerMessage?
        /// When the timer message arrived (the board's clock), to count down between ticks.
        public var timerReceivedAt = 0.0
        public var sensors: [String: String] = [:]
    }

    public private(set) var rows: [String: Row] = [:]
    /// Open alerts by id (raised or repeated, not yet cleared).
    public private(set) var openAlerts: [String: AlertMessage] = [:]
    /// The latest notices and clears, newest last, with when they arrived.
    public private(set) var recent: [(at: Double, alert: AlertMessage)] = []
    /// Messages taken in.
    public private(set) var messages = 0

    /// An empty board.
    public init() {}

    /// Takes in one message received at `now`.
    public mutating func apply(_ message: BusMessage, now: Double) {
        let station = message.envelope.station
        let athlete = message.envelope.athlete
        // Who is at the station: what a rep, a set's start, a posture report or the workout names
        // (a set's end or a timer may come after the station was unassigned, still naming who left).
        func update(namingAthlete: Bool = true, _ change: (inout Row) -> Void) {
            var row = rows[station] ?? Row()
            if namingAthlete, let athlete { row.athlete = athlete }
            change(&row)
            rows[station] = row
        }
        switch message.envelope.type {
        case RepMessage.type:
            guard let rep = try? message.payload(as: RepMessage.self) else { return }
            update {
                $0.lastVelocityMps = rep.meanVelocityMps
                $0.velocityLossPct = rep.velocityLossPct
                if let exercise = rep.exercise { $0.exercise = exercise }
                if let load = rep.loadKg { $0.loadKg = load }
            }
        case SetMessage.type:
            guard let set = try? message.payload(as: SetMessage.self) else { return }
            update(namingAthlete: set.event == .start) {
                if set.event == .start { $0.velocityLossPct = 0 } else if let loss = set.velocityLossPct { $0.velocityLossPct = loss }
            }
        case PostureMessage.type:
            guard let posture = try? message.payload(as: PostureMessage.self) else { return }
            update {
                $0.postureCorrect = posture.correct
                $0.badForS = posture.badForS
            }
        case TimerMessage.type:
            guard let timer = try? message.payload(as: TimerMessage.self) else { return }
            update(namingAthlete: false) {
                $0.timer = timer
                $0.timerReceivedAt = now
            }
        case WorkoutMessage.type:
            guard let workout = try? message.payload(as: WorkoutMessage.self) else { return }
            update {
                $0.exercise = workout.exercise ?? $0.exercise
                $0.loadKg = workout.loadKg
                $0.set = workout.set
                $0.sets = workout.sets
                $0.workoutState = workout.state
            }
        case StatusMessage.type:
            guard let status = try? message.payload(as: StatusMessage.self) else { return }
            update {
                $0.sensors[status.sensor] =
                    status.state == .streaming
                    ? status.rateHz.map { "\(whole($0))Hz" } ?? "ok"
                    : status.state.rawValue
            }
        case AlertMessage.type:
            guard var alert = try? message.payload(as: AlertMessage.self) else { return }
            alert.station = station
            alert.athlete = athlete
            switch alert.state {
            case .raised, .repeat:
                openAlerts[alert.alertId] = alert
            case .cleared:
                openAlerts[alert.alertId] = nil
                remember(alert, now: now)
            case .notice:
                remember(alert, now: now)
            }
        case CommandMessage.type:
            guard let command = try? message.payload(as: CommandMessage.self) else { return }
            if command.name == .athleteUnassign {
                update(namingAthlete: false) { ($0.athlete, $0.exercise, $0.loadKg) = (nil, nil, nil) }
                break
            }
            guard command.name == .athleteAssign, let assign = try? AthleteAssign(args: command.args), let assigned = assign.athlete
            else { return }
            update(namingAthlete: false) {
                $0.athlete = assigned
                $0.exercise = assign.exercise ?? $0.exercise
                $0.loadKg = assign.loadKg ?? $0.loadKg
            }
        default:
            return
        }
        messages += 1
    }

    private mutating func remember(_ alert: AlertMessage, now: Double) {
        recent.append((now, alert))
        if recent.count > 20 { recent.removeFirst(recent.count - 20) }
    }

    /// The screen at `now`, at most `width` columns and `height` lines.
    public func render(now: Double, width: Int, height: Int, clock: String) -> [String] {
        func pad(_ text: String, _ size: Int) -> String {
            text.count >= size ? String(text.prefix(size - 1)) + " " : text + String(repeating: " ", count: size - text.count)
        }
        var lines = [
            "vbt watch  \(rows.count) station\(rows.count == 1 ? "" : "s")  \(openAlerts.count) open alert\(openAlerts.count == 1 ? "" : "s")  \(clock)   q: quit"
        ]
        lines.append(
            pad("STATION", 10) + pad("ATHLETE", 9) + pad("EXERCISE", 16) + pad("SET", 6) + pad("REP m/s", 8) + pad("VL %", 6)
                + pad("POSTURE", 9) + pad("REST", 12) + "SENSORS")
        for station in rows.keys.sorted() {
            let row = rows[station]!
            var exercise = row.exercise ?? "-"
            if let load = row.loadKg { exercise += " " + (load == load.rounded() ? "\(whole(load))kg" : String(format: "%.1fkg", load)) }
            var set = row.set.map { "\($0)" } ?? "-"
            if let sets = row.sets { set += "/\(sets)" }
            if row.workoutState == .done { set = "done" }
            let velocity = row.lastVelocityMps.map { String(format: "%.2f", $0) } ?? "-"
            let loss = row.velocityLossPct.map { String(format: "%.0f", $0) } ?? "-"
            let posture: String
            switch row.postureCorrect {
            case nil: posture = "-"
            case true?: posture = "ok"
            case false?: posture = "BAD \(whole(row.badForS ?? 0))s"
            }
            let sensors = row.sensors.keys.sorted().map { "\($0) \(row.sensors[$0]!)" }.joined(separator: " ")
            lines.append(
                pad(station, 10) + pad(row.athlete ?? "-", 9) + pad(exercise, 16) + pad(set, 6) + pad(velocity, 8) + pad(loss, 6)
                    + pad(posture, 9) + pad(rest(row, now: now), 12) + sensors)
        }
        lines.append("")
        lines.append("ALERTS")
        let order: [AlertMessage.Severity: Int] = [.critical: 0, .warning: 1, .info: 2]
        let open = openAlerts.values.sorted { (order[$0.severity]!, $0.since, $0.alertId) < (order[$1.severity]!, $1.since, $1.alertId) }
        for alert in open { lines.append(" \(label(alert.severity)) \(alert.message)") }
        if open.isEmpty { lines.append(" none open") }
        for (at, alert) in recent.suffix(5).reversed() {
            let tag = alert.state == .cleared ? "ok  " : "note"
            lines.append(" \(tag) \(whole(max(0, now - at)))s ago: \(alert.message)")
        }
        return lines.prefix(max(1, height)).map { $0.count > width ? String($0.prefix(width)) : $0 }
    }

    private func label(_ severity: AlertMessage.Severity) -> String {
        switch severity {
        case .critical: "CRIT"
        case .warning: "WARN"
        case .info: "info"
        }
    }

    private func rest(_ row: Row, now: Double) -> String {
        guard let timer = row.timer else { return row.workoutState == .ready ? "ready" : "-" }
        switch timer.state {
        case .running:
            let left = max(0, timer.remainingS - (now - row.timerReceivedAt))
            return clockText(left)
        case .paused: return "pause " + clockText(timer.remainingS)
        case .over, .skipped, .cancelled: return row.workoutState == .done ? "done" : "ready"
        }
    }

    private func clockText(_ seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e7 else { return "-:--" }
        let total = Int(seconds.rounded(.up))
        return "\(total / 60):" + String(format: "%02d", total % 60)
    }
}
