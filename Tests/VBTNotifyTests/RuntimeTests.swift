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

    @Test("sets ending at 200 stations at once rewrite the state file once, not per set; what changed is in it by the next interval")
    func statesAreSavedAtMostEachInterval() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let statePath = dir.path("notifier.json")
        var settings = NotifierSettings()
        settings.snapshotS = 1e9
        let notifier = try NotifierRuntime(transport: bus, settings: settings, statePath: statePath, sink: nil, logger: Self.logger)
        let detector = try Publisher(transport: bus, program: "rep-detector")
        for station in 0..<200 {
            try detector.publish(
                SetMessage(setId: "s\(station)", event: .end, reps: 5, reason: .idle, bestMeanVelocityMps: 0.6, velocityLossPct: 8),
                station: "rack-\(station)", athlete: "ana")
        }
        for _ in 0..<1_000 where bus.queued > 0 { try notifier.step(timeoutMs: 0) }
        #expect(notifier.stateWrites == 1, "the first set end saved at once; the other 199 wait for the interval")
        bus.manualClock.advance(notifier.stateSaveIntervalS)
        try notifier.step(timeoutMs: 0)
        #expect(notifier.stateWrites == 2)
        let saved = try NotifierState.load(path: statePath)
        #expect(saved.stations.values.filter { $0.timer != nil }.count == 200, "every station's rest timer is in the file")
    }
}

/// The notifier dying (no goodbye: its object dropped after its last state
/// save) while the detector goes on: the restarted notifier fetches what was
/// published meanwhile from the detector's journal, in order, and acts on it.
@Suite("notifier crash recovery, in memory")
struct NotifierCrashTests {
    static let logger = NotifierRuntimeTests.logger
    static var settings: NotifierSettings {
        var settings = NotifierSettings()
        settings.snapshotS = 1e9
        return settings
    }

    /// One pass of the notifier, the detector's replay endpoint and its heartbeat, and 50 ms of the clock.
    static func pass(
        _ notifier: NotifierRuntime?, _ detector: Publisher, _ server: ReplayServer, _ beat: inout HeartbeatSchedule, _ bus: MemoryBus
    ) throws {
        try notifier?.step(timeoutMs: 0)
        try server.serve()
        bus.manualClock.advance(0.05)
        try beat.tick(detector, inputs: nil, replay: server)
    }

    /// A rep detector's publisher journalling into `dir`, its replay endpoint and its heartbeat.
    static func journallingDetector(_ bus: MemoryBus, _ dir: TemporaryDirectory) throws -> (Publisher, ReplayServer, HeartbeatSchedule) {
        let detector = try Publisher(transport: bus, program: "rep-detector")
        detector.journal = try Journal(
            settings: JournalSettings(directory: dir.path("journal-detector")), instance: detector.stamper.instance, clock: bus.clock)
        let server = try ReplayServer(journal: try #require(detector.journal), transport: bus, endpoint: "memory://rep-detector/replay")
        return (detector, server, HeartbeatSchedule(role: "rep-detector", name: "rep-detector"))
    }

    /// The notices and timers the notifier published, as (kind or timer state, id).
    static func run(crash: Bool) throws -> (said: [String], recovered: Int, lost: Int) {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let statePath = dir.path("notifier.json")
        let (detector, server, schedule) = try Self.journallingDetector(bus, dir)
        var beat = schedule
        let listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(TimerMessage.self, AlertMessage.self), logger: Self.logger)
        var notifier: NotifierRuntime? = try NotifierRuntime(transport: bus, settings: Self.settings, statePath: statePath, sink: nil, logger: Self.logger)
        var said: [String] = []
        func settle() throws {
            for _ in 0..<200 {
                try Self.pass(notifier, detector, server, &beat, bus)
                while let message = try listener.next(timeoutMs: 0) {
                    if let alert = try? message.payload(as: AlertMessage.self) {
                        said.append("\(alert.kind.rawValue) \(alert.state.rawValue) \(alert.alertId)")
                    }
                    if let timer = try? message.payload(as: TimerMessage.self), timer.remainingS == timer.durationS {
                        said.append("timer \(timer.state.rawValue)")
                    }
                }
            }
        }
        func rep(_ index: Int, lossPct: Double) throws {
            try detector.publish(
                RepMessage(
                    setId: "s1", repId: "r\(index)", index: index, meanVelocityMps: 0.6, peakVelocityMps: 1, meanPropulsiveVelocityMps: 0.6,
                    romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: lossPct, tEnd: 1_795_435_200 + Double(index), detector: "d",
                    concentricStartT: 1_795_435_199 + Double(index), concentricEndT: 1_795_435_200 + Double(index)),
                station: "rack-01", athlete: "ana")
        }
        try detector.publish(SetMessage(setId: "s1", event: .start), station: "rack-01", athlete: "ana")
        try rep(1, lossPct: 0)
        try settle()
        if crash { notifier = nil }  // killed: its last save is what a restart reads
        try rep(2, lossPct: 45)
        try detector.publish(
            SetMessage(setId: "s1", event: .end, reps: 2, reason: .velocityLoss, bestMeanVelocityMps: 0.6, velocityLossPct: 45),
            station: "rack-01", athlete: "ana")
        try settle()
        if crash {
            #expect(said.isEmpty, "nobody listens while the notifier is down")
            notifier = try NotifierRuntime(transport: bus, settings: Self.settings, statePath: statePath, sink: nil, logger: Self.logger)
            try settle()
        }
        return (said, notifier?.recovery.recovered ?? 0, notifier?.recovery.lost ?? 0)
    }

    @Test("the notifier dies after sending an alert and before saving its state: started again, it continues its streams and does not send the alert twice")
    func diesBeforeItsSave() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let statePath = dir.path("notifier.json")
        let (detector, server, schedule) = try Self.journallingDetector(bus, dir)
        var beat = schedule
        let listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(AlertMessage.self), logger: Self.logger)
        func start() throws -> NotifierRuntime {
            let notifier = try NotifierRuntime(transport: bus, settings: Self.settings, statePath: statePath, sink: nil, logger: Self.logger)
            try notifier.startJournal(JournalSettings(directory: dir.path("journal-notifier")), endpoint: "memory://notifier/replay")
            return notifier
        }
        var notifier: NotifierRuntime? = try start()
        var alerts: [(src: String, seq: UInt64, id: String)] = []
        func settle() throws {
            for _ in 0..<100 {
                try Self.pass(notifier, detector, server, &beat, bus)
                while let message = try listener.next(timeoutMs: 0) {
                    let alert = try message.payload(as: AlertMessage.self)
                    alerts.append((message.envelope.src, message.envelope.seq, "\(alert.kind.rawValue) \(alert.state.rawValue) \(alert.alertId)"))
                }
            }
        }
        try detector.publish(SetMessage(setId: "s1", event: .start), station: "rack-01", athlete: "ana")
        try settle()
        let before = try Data(contentsOf: URL(fileURLWithPath: statePath))
        try detector.publish(
            RepMessage(
                setId: "s1", repId: "r1", index: 1, meanVelocityMps: 0.6, peakVelocityMps: 1, meanPropulsiveVelocityMps: 0.6, romMm: 500,
                concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 45, tEnd: 1_795_435_201, detector: "d", concentricStartT: 1_795_435_200,
                concentricEndT: 1_795_435_201),
            station: "rack-01", athlete: "ana")
        try settle()
        #expect(alerts.map(\.id) == ["velocity-loss notice rack-01/velocity-loss/s1"])
        // Killed before the state with that alert reached the disk: the file is the one before.
        notifier = nil
        try before.write(to: URL(fileURLWithPath: statePath))
        notifier = try start()
        try settle()
        #expect(alerts.count == 1, "sent once: \(alerts)")
        // What it sends next continues the same stream, after the seq already used.
        try detector.publish(
            SetMessage(setId: "s2", event: .end, reps: 1, reason: .velocityLoss, bestMeanVelocityMps: 0.6, velocityLossPct: 45),
            station: "rack-01", athlete: "ana")
        try settle()
        #expect(alerts.count == 2 && alerts[1].src == alerts[0].src && alerts[1].seq == alerts[0].seq + 1, "\(alerts)")
    }

    @Test("a velocity-loss rep and the set's end published while the notifier was down: after the restart it says what it says without the crash, once")
    func missedWhileDown() throws {
        let clean = try Self.run(crash: false)
        #expect(clean.said.contains("timer running") && clean.said.contains { $0.hasPrefix("velocity-loss") }, "\(clean.said)")
        let crashed = try Self.run(crash: true)
        #expect(crashed.said == clean.said)
        #expect(crashed.recovered == 2 && crashed.lost == 0)
    }
}
