import Prometheus
import Testing
import VBTBus
import VBTWire

@testable import VBTConsole

// A chain uplink's heartbeat (`vbt-uplink --bus`) through the wire and into /metrics: its backlog
// and lag by gym, its rows sent as a counter that grows across restarts, and whether it is failing.

@Suite struct UplinkMetricsTests {
    private func heartbeat(uptime: Double, backlog: Int?, lag: Double?, sent: Int, error: String? = nil) throws -> BusMessage {
        var message = HeartbeatMessage(role: "vbt-uplink", uptimeS: uptime, intervalS: 5)
        var progress = HeartbeatMessage.UplinkProgress(gym: "north")
        (progress.backlogRows, progress.lagS, progress.sentRows, progress.lastError) = (backlog, lag, sent, error)
        message.uplink = progress
        var stamper = EnvelopeStamper(program: "vbt-uplink", instance: "vbt-uplink-0000abcd")
        let frames = try stamper.encode(message, station: "uplink-north", athlete: nil, ts: 1_790_000_000)
        return try decodeMessage(topic: frames.topic, body: frames.body)
    }

    @Test func anUplinksHeartbeatRoundTripsAndBecomesItsGymsSeries() throws {
        let first = try heartbeat(uptime: 1, backlog: nil, lag: nil, sent: 0, error: "connection refused")
        let decoded = try #require(try first.payload(as: HeartbeatMessage.self).uplink)
        #expect(decoded.gym == "north" && decoded.backlogRows == nil && decoded.lastError == "connection refused")

        let registry = PrometheusCollectorRegistry()
        let metrics = GymMetrics(factory: PrometheusMetricsFactory(registry: registry))
        metrics.apply(first, now: 1)
        var text = registry.emitToString()
        #expect(text.contains(#"vbt_uplink_error{gym="north"} 1.0"#), "\(text)")
        #expect(!text.contains("vbt_uplink_backlog_rows"), "nothing measured yet: no value rather than a made-up one")
        metrics.apply(try heartbeat(uptime: 6, backlog: 1_200, lag: 42.5, sent: 300), now: 6)
        text = registry.emitToString()
        #expect(text.contains(#"vbt_uplink_backlog_rows{gym="north"} 1200.0"#), "\(text)")
        #expect(text.contains(#"vbt_uplink_lag_seconds{gym="north"} 42.5"#))
        #expect(text.contains(#"vbt_uplink_error{gym="north"} 0.0"#))
        metrics.apply(try heartbeat(uptime: 11, backlog: 0, lag: 0, sent: 1_500), now: 11)
        // Restarted: its rows sent start again; the counter adds them on top.
        metrics.apply(try heartbeat(uptime: 1, backlog: 0, lag: 0, sent: 20), now: 12)
        text = registry.emitToString()
        #expect(text.contains(#"vbt_uplink_backlog_rows{gym="north"} 0.0"#), "\(text)")
        #expect(text.contains(#"vbt_uplink_lag_seconds{gym="north"} 0.0"#))
        #expect(text.contains(#"vbt_uplink_sent_rows_total{program="uplink-north"} 1520"#), "\(text)")
    }
}
