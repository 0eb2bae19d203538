import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTWire

/// The rep-detector dying (its object dropped mid-session, as a process
/// killed) and started again on the same journal folder, over the in-memory
/// bus with a hand-moved clock: it restores its checkpoint, fetches the
/// readings it missed from the bridge's journal and publishes the same rep
/// and set stream as a detector that never died. tests/python/fault_run.py
/// does the same with real processes and SIGKILL.
@Suite("rep-detector crash recovery, in memory")
struct DetectorCrashTests {
    static let logger = Logger(label: "test.detector") { _ in SwiftLogNoOpLogHandler() }
    static let session = SwapProcessTests.session()

    /// What a set message is compared on.
    struct SetKey: Equatable, CustomStringConvertible {
        let setId: String, event: String, reps: Int?, reason: String?
        init(_ set: SetMessage) { (setId, event, reps, reason) = (set.setId, set.event.rawValue, set.reps, set.reason?.rawValue) }
        var description: String { "\(setId) \(event) \(reps.map(String.init) ?? "") \(reason ?? "")" }
    }

    struct Outcome {
        var reps: [SwapProcessTests.RepKey] = []
        var sets: [SetKey] = []
        var stats = SubscriberStats()
        var restored = 0
        var recovered = 0
        var lost = 0
    }

    /// A journalling bridge: publishes the session, answers replay, offers it in heartbeats.
    final class Bridge {
        let publisher: Publisher
        let server: ReplayServer
        var heartbeat = HeartbeatSchedule(role: "sensor-bridge", name: "bridge-swap-1")

        init(bus: MemoryBus, dir: TemporaryDirectory) throws {
            publisher = try Publisher(transport: bus, program: "sensor-bridge")
            publisher.journal = try Journal(
                settings: JournalSettings(directory: dir.path("journal-bridge")), instance: publisher.stamper.instance, clock: bus.clock)
            server = try ReplayServer(journal: try #require(publisher.journal), transport: bus, endpoint: "memory://bridge-swap-1/replay")
        }
    }

    static func detector(_ bus: MemoryBus, dir: TemporaryDirectory) throws -> DetectorRuntime {
        var options = DetectorOptions()
        options.patternsPath = dir.path("patterns.json")
        options.askRecorder = false
        options.journal = (JournalSettings(directory: dir.path("journal-detector")), "memory://rep-detector/replay")
        return try DetectorRuntime(transport: bus, queryEndpoint: "memory", options: options, logger: logger)
    }

    /// Plays the session (a 0.1 s message per 0.1 s of the clock). Before each
    /// message numbered in `crashesAt` the detector dies; it is started again
    /// `downFor` messages later. `drop` loses sample messages on the way to the
    /// detector (by their number). `messages` cuts the session short (the
    /// bridge goes silent), after which 15 s of the clock pass. While the message numbered in
    /// `cut` are published the bridge's link is down: its readings and heartbeats are lost on
    /// the way (its journal keeps the readings).
    static func run(
        crashesAt: Set<Int> = [], downFor: Int = 12, drop: Set<Int> = [], messages: Int? = nil, cut: Range<Int> = 0..<0
    ) throws -> Outcome {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let out = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(RepMessage.self, SetMessage.self), logger: logger)
        let bridge = try Bridge(bus: bus, dir: dir)
        var detector: DetectorRuntime? = try Self.detector(bus, dir: dir)
        var outcome = Outcome()
        var restartAt: Int?
        var number = 0
        var cutOff = false
        bus.drop = { frames in
            if cutOff, frames.first?.starts(with: Array("heartbeat.bridge-".utf8)) == true { return true }
            guard frames.first?.starts(with: Array(SampleMessage.topicPrefix.utf8)) == true else { return false }
            number += 1
            return drop.contains(number) || cutOff
        }
        func settle() throws {
            for _ in 0..<1_000 {
                try detector?.step(timeoutMs: 0)
                try bridge.server.serve()
                while let message = try out.next(timeoutMs: 0) {
                    if message.envelope.type == RepMessage.type {
                        outcome.reps.append(SwapProcessTests.RepKey(try message.payload(as: RepMessage.self)))
                    } else {
                        outcome.sets.append(SetKey(try message.payload(as: SetMessage.self)))
                    }
                }
                if bus.queued == 0, detector?.isCatchingUp != true { return }
            }
            Issue.record("the detector never caught up")
        }
        func tick() throws {
            try bus.heartbeat()
            try bridge.heartbeat.tick(bridge.publisher, inputs: nil, replay: bridge.server)
            bus.manualClock.advance(0.1)
            try settle()
        }
        func harvest() {
            guard let detector else { return }
            outcome.recovered += detector.recovery.recovered
            outcome.lost += detector.recovery.lost
            if detector.restored { outcome.restored += 1 }
        }
        for (index, message) in Self.session.messages.prefix(messages ?? .max).enumerated() {
            if crashesAt.contains(index) {
                harvest()
                detector = nil  // gone without a word, as after SIGKILL
                restartAt = index + downFor
            }
            if index == restartAt {
                detector = try Self.detector(bus, dir: dir)
                restartAt = nil
            }
            cutOff = cut.contains(index)
            try bridge.publisher.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            try tick()
        }
        if detector == nil { detector = try Self.detector(bus, dir: dir) }
        for _ in 0..<150 { try tick() }  // the idle timeout ends the last set
        harvest()
        outcome.stats = out.stats
        return outcome
    }

    static let baseline = Result { try run() }

    @Test("killed inside a rep, between reps and in the rest, and started again: the same reps (ids and metrics) and sets, each once", arguments: 0..<3)
    func crashes(run: Int) throws {
        let count = Self.session.messages.count
        // 9 moments over the 3 cases, spread over the session; each crash misses 1.2 s of readings.
        let moments = Set((0..<3).map { (run + 1) * count / 13 + $0 * count / 3 })
        let baseline = try Self.baseline.get()
        #expect(baseline.reps.count == Self.session.reps && baseline.sets.count == 4)
        let crashed = try Self.run(crashesAt: moments)
        #expect(crashed.restored == 3, "each restart began from the checkpoint")
        #expect(crashed.reps == baseline.reps, "crashes before messages \(moments.sorted())")
        #expect(crashed.sets == baseline.sets)
        #expect(crashed.recovered > 0 && crashed.lost == 0, "what was missed came from the bridge's journal")
        #expect(crashed.stats.totals.gaps == 0 && crashed.stats.totals.duplicates == 0, "one stream per output, nothing sent twice: \(crashed.stats.totals)")
    }

    @Test("readings lost on the way are fetched and processed in order: the same reps as without loss")
    func holes() throws {
        let baseline = try Self.baseline.get()
        let lossy = try Self.run(drop: Set([5, 6, 7, 40, 90, 91, 150, 151, 152, 153, 230, 300]))
        #expect(lossy.reps == baseline.reps && lossy.sets == baseline.sets)
        #expect(lossy.recovered == 12 && lossy.lost == 0)
    }

    @Test("a station cut off (no readings, no heartbeats) for longer than the idle timeout is not ended as silent: the same reps and sets")
    func cutOffStation() throws {
        let count = Self.session.messages.count
        let baseline = try Self.baseline.get()
        // 15 s of the clock with the link down, from inside the second set.
        let cut = try Self.run(cut: (count / 3)..<(count / 3 + 150))
        #expect(cut.reps == baseline.reps && cut.sets == baseline.sets, "\(cut.sets)\n\(baseline.sets)")
        #expect(cut.recovered > 100 && cut.lost == 0, "the cut's readings came from the bridge's journal")
    }

    @Test("a set open when the detector died, whose station then goes silent, is ended after the restart")
    func silentStationAfterRestart() throws {
        let count = Self.session.messages.count
        // The bridge stops a third of the way in (inside the first set), while the detector is down.
        let outcome = try Self.run(crashesAt: [count / 3 - 5], downFor: 1_000, messages: count / 3)
        #expect(outcome.restored == 1)
        let started = outcome.sets.filter { $0.event == "start" }.map(\.setId)
        let ended = outcome.sets.filter { $0.event == "end" }.map(\.setId)
        #expect(!started.isEmpty && started == ended, "every set started is ended: \(outcome.sets)")
    }

    /// Holds the background checkpoint writer, as a busy machine holds a SCHED_IDLE thread.
    final class Gate: @unchecked Sendable {
        private let condition = NSCondition()
        private var isOpen = false
        func pass() {
            condition.lock()
            while !isOpen { condition.wait() }
            condition.unlock()
        }
        func open() {
            condition.lock()
            isOpen = true
            condition.broadcast()
            condition.unlock()
        }
    }

    @Test("a command is answered only once a checkpoint holding it is on disk, though the background writer is held")
    func commandAnsweredWhenDurable() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let bridge = try Bridge(bus: bus, dir: dir)
        let acks = try Subscriber(transport: bus, prefixes: [AckMessage.topicPrefix], logger: Self.logger)
        let coach = try Publisher(transport: bus, program: "vbt")
        let detector = try Self.detector(bus, dir: dir)
        let gate = Gate()
        defer { gate.open() }  // before the detector's end, which waits for its writes
        let writer = try #require(detector.checkpointWriter)
        writer.beforeRegularWrite = { gate.pass() }
        try bus.heartbeat()
        for message in Self.session.messages.prefix(20) {
            try bridge.publisher.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            bus.manualClock.advance(0.1)
            for _ in 0..<100 where bus.queued > 0 { try detector.step(timeoutMs: 0) }
        }
        try coach.publish(
            CommandMessage(id: "c1", command: CommandName.athleteAssign, args: AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100).args),
            station: "swap-1")
        var answer: AckMessage?
        // The answer waits for the command writer's write and fsync, at normal priority: on a
        // machine busy with parallel suites that has taken over 10 s, so the bound is wall time.
        let deadline = Date().addingTimeInterval(120)
        while answer == nil, Date() < deadline {
            try detector.step(timeoutMs: 1)
            if let message = try acks.next(timeoutMs: 0) { answer = try message.payload(as: AckMessage.self) }
        }
        #expect(answer?.cmdId == "c1" && answer?.state == .done, "answered: \(String(describing: answer))")
        // What a detector started now (after SIGKILL) would restore: the command is in it.
        let restored = try CheckpointWriter<StationDetector>(file: writer.file).load()
        let station = restored?.state.first { $0.station == "swap-1" }
        #expect(station?.assignment.athlete == "ana", "the checkpoint on disk holds the assignment")
    }
}
