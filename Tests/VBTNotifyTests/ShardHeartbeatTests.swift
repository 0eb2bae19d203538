import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTNotify

/// Rep-detectors splitting a gym (`--shard K/N`) beat as `rep-detector-K`: the notifier watches
/// each by itself, so the one that stops is the one named.
@Suite("notifier and detector shards")
struct ShardHeartbeatTests {
    static let t0 = 1_763_812_345.0

    /// A heartbeat of `name` as the notifier receives it, through the real envelope codec.
    static func beat(_ name: String) -> BusMessage {
        var stamper = EnvelopeStamper(program: "rep-detector", instance: "rep-detector-0000abcd")
        let frames = try! stamper.encode(HeartbeatMessage(role: "rep-detector", uptimeS: 1, intervalS: 1), station: name, ts: t0)
        return try! decodeMessage(topic: frames.topic, body: frames.body)
    }

    static func alerts(_ outputs: [NotifierOutput]) -> [AlertMessage] {
        outputs.compactMap { if case .alert(let alert) = $0 { alert } else { nil } }
    }

    @Test("shard 2 silent: its alert alone, named rep-detector-2; shard 1 beating raises nothing")
    func oneShardSilent() {
        var settings = NotifierSettings()
        settings.snapshotS = 1e9
        var notifier = Notifier(settings: settings, now: Self.t0)
        _ = notifier.handle(Self.beat("rep-detector-1"), now: Self.t0)
        _ = notifier.handle(Self.beat("rep-detector-2"), now: Self.t0)
        _ = notifier.handle(Self.beat("rep-detector-1"), now: Self.t0 + 2.9)
        let out = Self.alerts(notifier.tick(now: Self.t0 + 3.1))
        #expect(out.map(\.alertId) == ["rep-detector-2/heartbeat-missing"], "\(out.map(\.alertId))")
        #expect(out.first?.program == "rep-detector-2" && out.first?.station == "rep-detector-2" && out.first?.severity == .critical)
        let back = Self.alerts(notifier.handle(Self.beat("rep-detector-2"), now: Self.t0 + 4))
        #expect(back.map(\.alertId) == ["rep-detector-2/heartbeat-missing"] && back.map(\.state) == [.cleared])
    }
}
