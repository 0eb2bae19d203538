import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTNotify
@testable import VBTWire

/// The notifier's runtime over the in-memory bus with a hand-moved clock:
/// timers run on that clock, and survive a restart through the state file.
/// (tests/python/test_notifier.py keeps the process run.)
@Suite("notifier runtime, in memory")
struct NotifierRuntimeTests {
    static let logger = Logger(label: "test.notifier") { _ in SwiftLogNoOpLogHandler() }

    @Test("a set ends: the rest timer counts down on the clock, survives a restart with the right remaining time, and its end is announced")
    func restTimer() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let statePath = dir.path("notifier.json")
        var settings = NotifierSettings()
        settings.snapshotS = 1e9
        var notifier = try NotifierRuntime(transport: bus, settings: settings, statePath: statePath, sink: nil, logger: Self.logger)
        let listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(TimerMessage.self, AlertMessage.self), logger: Self.logger)
        let detector = try Publisher(transport: bus, program: "rep-detector")
        func step() throws -> [BusMessage] {
            for _ in 0..<10 { try notifier.step(timeoutMs: 0) }
            var out: [BusMessage] = []
            while let message = try listener.next(timeoutMs: 0) { out.append(message) }
            return out
        }
        func timers(_ messages: [BusMessage]) -> [TimerMessage] { messages.compactMap { try? $0.payload(as: TimerMessage.self) } }

        try detector.publish(
            SetMessage(setId: "s1", event: .end, reps: 5, reason: .idle, bestMeanVelocityMps: 0.6, velocityLossPct: 8),
            station: "rack-01", athlete: "ana")
        let started = timers(try step())
        #expect(started.map(\.state) == [.running])
        let duration = try #require(started.first?.durationS)
        #expect(started.first?.remainingS == duration)

        bus.manualClock.advance(30)
        #expect(timers(try step()).last?.remainingS == duration - 30)

        // A restart: the new runtime reads the state file; the clock went on meanwhile.
        notifier.saveState()
        notifier = try NotifierRuntime(transport: bus, settings: settings, statePath: statePath, sink: nil, logger: Self.logger)
        bus.manualClock.advance(10)
        #expect(timers(try step()).last?.remainingS == duration - 40, "the restored timer kept counting")

        bus.manualClock.advance(duration - 40)
        let over = try step()
        #expect(timers(over).map(\.state) == [.over])
        let notices = over.compactMap { try? $0.payload(as: AlertMessage.self) }
        #expect(notices.map(\.kind) == [.restOver] && notices.first?.state == .notice)
        bus.manualClock.advance(5)
        #expect(try step().isEmpty, "an ended rest says nothing more")
    }
}
