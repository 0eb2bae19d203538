import CoreMetrics
import Synchronization
import VBTWire

/// The whole gym as metrics (swift-metrics; the console exports them in Prometheus text at
/// /metrics): every program's heartbeat (alive, uptime, what it received, gaps, losses, the
/// bus's traffic and refusals, the webhook's deliveries) and every station (reps, sets,
/// silent bridges, sensor rates, open alerts).
///
/// Heartbeats carry counters since their process started; they become counters that only
/// grow, across restarts, by adding each heartbeat's increase (the whole value after a
/// restart), so `rate()` and `increase()` work in Prometheus as they would on the program.
/// The name and label scheme is in proto/console.md ("Metrics").
public final class GymMetrics: Sendable {
    private let factory: any MetricsFactory

    private struct Program {
        var uptimeS = 0.0
        var lastSeen = 0.0
        var intervalS = 1.0
        var last: [String: Int] = [:]
    }
    private struct State {
        var programs: [String: Program] = [:]
        var counters: [String: Counter] = [:]
        var meters: [String: Meter] = [:]
    }
    private let state = Mutex(State())

    public init(factory: any MetricsFactory) { self.factory = factory }

    /// Takes in one message at `now` (monotonic seconds).
    public func apply(_ message: BusMessage, now: Double) {
        let station = message.envelope.station
        switch message.envelope.type {
        case HeartbeatMessage.type:
            guard let heartbeat = try? message.payload(as: HeartbeatMessage.self) else { return }
            take(heartbeat, name: station, now: now)
        case RepMessage.type:
            count("vbt_station_reps_total", ["station": station])
        case SetMessage.type:
            guard let set = try? message.payload(as: SetMessage.self), set.event == .end else { return }
            count("vbt_station_sets_total", ["station": station, "reason": set.reason?.rawValue ?? "unknown"])
        case RejectedMessage.type:
            guard let rejected = try? message.payload(as: RejectedMessage.self) else { return }
            count("vbt_station_rejected_total", ["station": station, "reason": rejected.reason])
        case StatusMessage.type:
            guard let status = try? message.payload(as: StatusMessage.self) else { return }
            meter("vbt_sensor_rate_hz", ["station": station, "sensor": status.sensor]).set(status.state == .streaming ? status.rateHz ?? 0 : 0)
            if let battery = status.batteryPct { meter("vbt_sensor_battery_percent", ["station": station, "sensor": status.sensor]).set(battery) }
        default:
            return
        }
    }

    /// Sets what is known only from the board and the clock: programs gone quiet, silent
    /// stations, open alerts, browsers.
    public func refresh(board: ConsoleBoard, browsers: Int, now: Double) {
        let programs = state.withLock { $0.programs }
        for (name, program) in programs {
            // Alive while its heartbeat is no more than three intervals old (as the notifier judges).
            meter("vbt_program_up", ["program": name]).set(now - program.lastSeen <= 3 * program.intervalS ? 1 : 0)
        }
        var open: [String: Int] = ["info": 0, "warning": 0, "critical": 0]
        for station in board.stations.values {
            meter("vbt_station_silent", ["station": station.station]).set(station.silent ? 1 : 0)
            for alert in station.alerts.values { open[alert.severity, default: 0] += 1 }
        }
        for alert in board.gymAlerts.values { open[alert.severity, default: 0] += 1 }
        for (severity, count) in open { meter("vbt_alerts_open", ["severity": severity]).set(count) }
        meter("vbt_stations", [:]).set(board.stations.count)
        meter("vbt_console_browsers", [:]).set(browsers)
    }

    private func take(_ heartbeat: HeartbeatMessage, name: String, now: Double) {
        var values: [String: Int] = [:]
        if let inputs = heartbeat.inputs {
            values["vbt_program_received_total"] = inputs.received
            values["vbt_program_gaps_total"] = inputs.gaps
            values["vbt_program_missing_total"] = inputs.missing
            values["vbt_program_duplicates_total"] = inputs.duplicates
            values["vbt_program_malformed_total"] = inputs.malformed
            if let lost = inputs.lost { values["vbt_program_lost_total"] = lost }
        }
        if let bus = heartbeat.bus {
            values["vbt_bus_messages_in_total"] = bus.msgsIn
            values["vbt_bus_bytes_in_total"] = bus.bytesIn
            values["vbt_bus_messages_out_total"] = bus.msgsOut
            values["vbt_bus_bytes_out_total"] = bus.bytesOut
            if let refused = bus.refused { values["vbt_bus_refused_total"] = refused }
            if let refused = bus.refusedConnections { values["vbt_bus_refused_connections_total"] = refused }
            if let connections = bus.connections { values["vbt_bus_connections_total"] = connections }
            if let disconnections = bus.disconnections { values["vbt_bus_disconnections_total"] = disconnections }
            if let shed = bus.shedSubscribers { values["vbt_bus_shed_subscribers_total"] = shed }
            if let routed = bus.routed { values["vbt_bus_routed_total"] = routed }
        }
        if let webhook = heartbeat.webhook {
            values["vbt_webhook_delivered_total"] = webhook.delivered
            values["vbt_webhook_failed_total"] = webhook.failed
            values["vbt_webhook_dropped_total"] = webhook.dropped
        }
        if let uplink = heartbeat.uplink { values["vbt_uplink_sent_rows_total"] = uplink.sentRows }
        let increases = state.withLock { state -> [String: Int] in
            var program = state.programs[name] ?? Program()
            // A smaller uptime is a new process: its counters start again from zero.
            let restarted = heartbeat.uptimeS < program.uptimeS
            if restarted { program.last = [:] }
            var increases: [String: Int] = [:]
            for (key, value) in values {
                let before = program.last[key] ?? 0
                increases[key] = value >= before ? value - before : value
                program.last[key] = value
            }
            (program.uptimeS, program.lastSeen, program.intervalS) = (heartbeat.uptimeS, now, max(0.1, heartbeat.intervalS))
            state.programs[name] = program
            return increases
        }
        let labels = ["program": name]
        for (key, increase) in increases {
            let counter = self.counter(key, labels)
            if increase > 0 { counter.increment(by: increase) }
        }
        meter("vbt_program_uptime_seconds", labels).set(heartbeat.uptimeS)
        meter("vbt_program_up", labels).set(1)
        if let outstanding = heartbeat.inputs?.outstanding { meter("vbt_program_outstanding_messages", labels).set(outstanding) }
        if let uplink = heartbeat.uplink {
            // A gym's chain uplink: how far behind it is, by gym (a value, not a counter).
            let gym = ["gym": uplink.gym]
            if let backlog = uplink.backlogRows { meter("vbt_uplink_backlog_rows", gym).set(backlog) }
            if let lag = uplink.lagS { meter("vbt_uplink_lag_seconds", gym).set(lag) }
            meter("vbt_uplink_error", gym).set(uplink.lastError == nil ? 0 : 1)
        }
    }

    private func count(_ name: String, _ labels: [String: String]) { counter(name, labels).increment() }

    private func counter(_ name: String, _ labels: [String: String]) -> Counter {
        instrument(name, labels, \.counters) { Counter(label: $0, dimensions: $1, factory: $2) }
    }

    private func meter(_ name: String, _ labels: [String: String]) -> Meter {
        instrument(name, labels, \.meters) { Meter(label: $0, dimensions: $1, factory: $2) }
    }

    /// The instrument of this name and labels, made once.
    private func instrument<Instrument: Sendable>(
        _ name: String, _ labels: [String: String], _ cache: WritableKeyPath<State, [String: Instrument]>,
        make: (String, [(String, String)], any MetricsFactory) -> Instrument
    ) -> Instrument {
        let key = Self.key(name, labels)
        return state.withLock { state in
            if let known = state[keyPath: cache][key] { return known }
            let made = make(name, labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, factory)
            state[keyPath: cache][key] = made
            return made
        }
    }

    private static func key(_ name: String, _ labels: [String: String]) -> String {
        name + labels.sorted { $0.key < $1.key }.map { "|\($0.key)=\($0.value)" }.joined()
    }
}
