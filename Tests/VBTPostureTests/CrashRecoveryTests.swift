import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTPosture
@testable import VBTWire

/// The posture evaluator dying mid-session (its object dropped, as a process
/// killed) and started again on its journal folder, over the in-memory bus:
/// it restores its checkpoint, fetches the readings it missed from the
/// wearable bridge's journal and publishes the same posture stream, each
/// message once, as an evaluator that never died.
@Suite("posture-evaluator crash recovery, in memory")
struct PostureCrashTests {
    static let logger = Logger(label: "test.posture") { _ in SwiftLogNoOpLogHandler() }

    /// What a posture message is compared on.
    struct Report: Equatable, CustomStringConvertible {
        let correct: Bool, changed: Bool, badForS: Double, t: Double
        init(_ message: PostureMessage) { (correct, changed, badForS, t) = (message.correct, message.changed, message.badForS, message.t) }
        var description: String { "\(correct ? "ok" : "bad")\(changed ? "*" : "") \(t)" }
    }

    struct Outcome {
        var reports: [Report] = []
        var calibrations = 0
        var stats = SubscriberStats()
        var restored = 0
        var recovered = 0
        var lost = 0
    }

    /// Upright, a slouch, upright, a slouch: readings in 0.1 s messages (after a 2.4 s calibration).
    static let phases: [(tiltDeg: Double, seconds: Double)] = [(0, 2.4), (0, 3), (25, 4), (0, 3), (30, 3), (0, 2)]

    /// Plays the phases; before each message numbered in `crashesAt` the evaluator dies, and comes back 15 messages later.
    static func run(crashesAt: Set<Int> = []) throws -> Outcome {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(PostureMessage.self, CalibrationMessage.self), logger: logger)
        let coach = try Publisher(transport: bus, program: "vbt")
        let wearable = try Publisher(transport: bus, program: "sensor-bridge")
        wearable.journal = try Journal(settings: JournalSettings(directory: dir.path("journal-bridge")), instance: wearable.stamper.instance, clock: bus.clock)
        let server = try ReplayServer(journal: try #require(wearable.journal), transport: bus, endpoint: "memory://bridge-desk-1/replay")
        var bridgeBeat = HeartbeatSchedule(role: "sensor-bridge", name: "bridge-desk-1")
        func evaluator() throws -> PostureRuntime {
            let runtime = try PostureRuntime(
                transport: bus, queryEndpoint: "memory", settings: PostureSettings(), storePath: dir.path("calibrations.json"), logger: logger)
            try runtime.startJournal(JournalSettings(directory: dir.path("journal-posture")), endpoint: "memory://posture/replay")
            return runtime
        }
        var outcome = Outcome()
        var runtime: PostureRuntime? = try evaluator()
        func harvest() {
            guard let runtime else { return }
            outcome.recovered += runtime.recovery.recovered
            outcome.lost += runtime.recovery.lost
            if runtime.restored { outcome.restored += 1 }
        }
        func settle() throws {
            for _ in 0..<1_000 {
                try runtime?.step(timeoutMs: 0)
                try server.serve()
                while let message = try listener.next(timeoutMs: 0) {
                    if let report = try? message.payload(as: PostureMessage.self) { outcome.reports.append(Report(report)) } else { outcome.calibrations += 1 }
                }
                if bus.queued == 0, runtime?.isCatchingUp != true { return }
            }
            Issue.record("the evaluator never caught up")
        }
        try bus.heartbeat()
        try coach.publish(
            CommandMessage(
                id: "c1", command: CommandName.postureCalibrate, target: "*", args: JSONObject([("athlete", .string("ana")), ("seconds", .number(2))])),
            station: "desk-1")
        try settle()
        var t = bus.manualClock.wallSeconds()
        var number = 0
        var restartAt: Int?
        for (index, phase) in phases.enumerated() {
            let data = readings(Int(phase.seconds / 0.02), tiltDeg: phase.tiltDeg, seed: index + 1)
            var batch: [SampleMessage.PostureReading] = []
            for (a, m) in zip(data.acc, data.mag) {
                batch.append(SampleMessage.PostureReading(t: t, acc: a, mag: m))
                t += 0.02
                guard batch.count == 5 else { continue }
                if crashesAt.contains(number) {
                    harvest()
                    runtime = nil  // gone without a word, as after SIGKILL
                    restartAt = number + 15
                }
                if number == restartAt { runtime = try evaluator() }
                try wearable.publish(SampleMessage(.posture(batch)), station: "desk-1", ts: t)
                try bridgeBeat.tick(wearable, inputs: nil, replay: server)
                try bus.heartbeat()
                batch = []
                number += 1
                bus.manualClock.advance(0.1)
                try settle()
            }
        }
        if runtime == nil { runtime = try evaluator() }
        for _ in 0..<30 {
            try bridgeBeat.tick(wearable, inputs: nil, replay: server)
            bus.manualClock.advance(0.1)
            try settle()
        }
        harvest()
        outcome.stats = listener.stats
        return outcome
    }

    static let baseline = Result { try run() }

    @Test("killed while upright, in a slouch and as it changes, and started again: the same posture stream, each message once", arguments: 0..<3)
    func crashes(run: Int) throws {
        let baseline = try Self.baseline.get()
        #expect(
            baseline.calibrations == 1 && baseline.reports.filter(\.changed).count >= 4,
            "calibrated; upright, slouch, upright, slouch: \(baseline.reports.filter(\.changed))")
        // After the calibration (messages 0-23): 3 moments a case, 9 in all, spread over the phases.
        let moments = Set((0..<3).map { 26 + run * 11 + $0 * 50 })
        let crashed = try Self.run(crashesAt: moments)
        #expect(crashed.restored == 3)
        #expect(crashed.reports == baseline.reports, "crashes before messages \(moments.sorted())")
        #expect(crashed.calibrations == 1)
        #expect(crashed.recovered > 0 && crashed.lost == 0)
        #expect(crashed.stats.totals.gaps == 0 && crashed.stats.totals.duplicates == 0, "\(crashed.stats.totals)")
    }
}
