import Foundation

/// The board as `vbt watch` draws it in a terminal: a line per station (athlete, exercise and
/// load, set n of N, the set's last rep, velocity loss, posture, rest, sensors), then the open
/// alerts, most severe first, and the latest notices and clears. The same `ConsoleBoard` the
/// browser's console draws from, so a terminal and a page never disagree on a station.
extension ConsoleBoard {
    /// The screen at `now` (monotonic seconds, the clock `apply` was given), at most `width`
    /// columns and `height` lines; `clock` is the wall time shown in the title.
    public func textScreen(now: Double, width: Int, height: Int, clock: String) -> [String] {
        let open = openAlerts()
        var lines = [
            "vbt watch  \(stations.count) station\(stations.count == 1 ? "" : "s")  \(open.count) open alert\(open.count == 1 ? "" : "s")  \(clock)   q: quit"
        ]
        lines.append(
            Self.pad("STATION", 10) + Self.pad("ATHLETE", 9) + Self.pad("EXERCISE", 16) + Self.pad("SET", 6) + Self.pad("REP m/s", 8)
                + Self.pad("VL %", 6) + Self.pad("POSTURE", 9) + Self.pad("REST", 12) + "SENSORS")
        for name in stations.keys.sorted() {
            lines.append(Self.line(stations[name]!, now: now))
        }
        lines.append("")
        lines.append("ALERTS")
        for alert in open { lines.append(" \(Self.label(alert.severity)) \(alert.message)") }
        if open.isEmpty { lines.append(" none open") }
        for alert in recent.suffix(5).reversed() {
            lines.append(" \(alert.cleared ? "ok  " : "note") \(Self.whole(max(0, now - alert.at)))s ago: \(alert.message)")
        }
        return lines.prefix(max(1, height)).map { $0.count > width ? String($0.prefix(width)) : $0 }
    }

    /// Every open alert, the gym's and the stations', most severe first, then oldest.
    func openAlerts() -> [AlertView] {
        let order = ["critical": 0, "warning": 1, "info": 2]
        let all = Array(gymAlerts.values) + stations.values.flatMap(\.alerts.values)
        return all.sorted { (order[$0.severity] ?? 3, $0.since, $0.alertId) < (order[$1.severity] ?? 3, $1.since, $1.alertId) }
    }

    private static func line(_ state: StationState, now: Double) -> String {
        var exercise = state.exercise ?? "-"
        if let load = state.loadKg { exercise += " " + (load == load.rounded() ? "\(whole(load))kg" : String(format: "%.1fkg", load)) }
        var set = state.set.map { "\($0)" } ?? "-"
        if let sets = state.sets { set += "/\(sets)" }
        if state.workoutState == "done" { set = "done" }
        let velocity = state.lastMeanVelocityMps.map { String(format: "%.2f", $0) } ?? "-"
        let loss = state.velocityLossPct.map { String(format: "%.0f", $0) } ?? "-"
        let posture: String
        switch state.posture?.correct {
        case nil: posture = "-"
        case true?: posture = "ok"
        case false?: posture = "BAD \(whole(state.posture?.badForS ?? 0))s"
        }
        let sensors = state.sensors.keys.sorted().map { name in
            let sensor = state.sensors[name]!
            let shown = sensor.state == "streaming" ? sensor.rateHz.map { "\(whole($0))Hz" } ?? "ok" : sensor.state
            return "\(name) \(shown)"
        }
        return pad(state.station, 10) + pad(state.athlete ?? "-", 9) + pad(exercise, 16) + pad(set, 6) + pad(velocity, 8) + pad(loss, 6)
            + pad(posture, 9) + pad(rest(state, now: now), 12) + sensors.joined(separator: " ")
    }

    /// The rest timer counted down from when its message came; `ready` or `done` when none runs.
    private static func rest(_ state: StationState, now: Double) -> String {
        guard let rest = state.rest else { return state.workoutState == "ready" ? "ready" : "-" }
        switch rest.state {
        case "running": return clockText(max(0, rest.remainingS - (now - (state.restReceivedAt ?? now))))
        case "paused": return "pause " + clockText(rest.remainingS)
        default: return state.workoutState == "done" ? "done" : "ready"
        }
    }

    private static func label(_ severity: String) -> String {
        switch severity {
        case "critical": "CRIT"
        case "warning": "WARN"
        default: "info"
        }
    }

    private static func pad(_ text: String, _ size: Int) -> String {
        text.count >= size ? String(text.prefix(size - 1)) + " " : text + String(repeating: " ", count: size - text.count)
    }

    private static func whole(_ value: Double) -> String { value.isFinite ? String(format: "%.0f", value) : "?" }

    private static func clockText(_ seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e7 else { return "-:--" }
        let total = Int(seconds.rounded(.up))
        return "\(total / 60):" + String(format: "%02d", total % 60)
    }
}
