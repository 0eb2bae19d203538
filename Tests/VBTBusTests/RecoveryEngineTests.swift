import Foundation
import Logging
import Testing
import VBTSensors
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// `RecoveryEngine` alone: a producer with a real journal and replay server over the in-memory
/// bus (`ProducerRig`), and a real libzmq transport where an endpoint's use is refused.
@Suite("recovery engine")
struct RecoveryEngineTests {
    static let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// The producer (`ProducerRig`) and a recovery engine learning from its heartbeats.
    final class Rig: ProducerRig {
        let subscriber: Subscriber
        let engine: RecoveryEngine

        init() throws {
            let bus = MemoryBus()
            subscriber = try Subscriber(transport: bus, prefixes: ["heartbeat."], logger: RecoveryEngineTests.logger)
            engine = RecoveryEngine(transport: bus, logger: RecoveryEngineTests.logger)
            try super.init(bus: bus)
        }

        /// The producer's heartbeat (with its offer unless `journal` is false), as the consumer receives it.
        func heartbeatMessage(journal: Bool = true, amend: (inout HeartbeatMessage) -> Void = { _ in }) throws -> BusMessage {
            try heartbeat.tick(producer, inputs: nil, replay: journal ? server : nil, force: true, amend: amend)
            return try #require(try subscriber.next(timeoutMs: 0))
        }

        /// Notes `message` in the engine, tracking sample streams; returns each stream named, with its last seq.
        @discardableResult
        func note(_ message: BusMessage) -> [String: UInt64] {
            var named: [String: UInt64] = [:]
            engine.note(heartbeat: message, tracks: { streamTopic($0).hasPrefix("sample.") }) { src, last, producer in
                #expect(producer == "bridge-rack-01")
                named[src] = last
            }
            return named
        }
    }

    @Test("a heartbeat's offer names the producer, its endpoint and its tracked streams' last seqs; one without an offer marks its instance journalless")
    func heartbeatsTeach() throws {
        let rig = try Rig()
        try rig.samples(7)
        try rig.samples(3, station: "rack-02")
        let (src, other) = (try rig.src(), try rig.src("rack-02"))
        #expect(rig.engine.endpoint(of: src) == nil && !rig.engine.isLive(src))
        let named = rig.note(try rig.heartbeatMessage())
        #expect(named == [src: 7, other: 3], "the sample streams alone, with their last seqs: \(named)")
        #expect(rig.engine.producers[src] == "bridge-rack-01")
        #expect(rig.engine.endpoint(of: src) == "memory://bridge/replay" && rig.engine.isLive(src))
        #expect(!rig.engine.isJournalless(src))
        rig.note(try rig.heartbeatMessage(journal: false))
        #expect(rig.engine.isJournalless(src), "its instance said it keeps no journal")
        rig.note(try rig.heartbeatMessage())
        #expect(!rig.engine.isJournalless(src), "offered again")
        // A stream of an earlier instance on the same producer is not live.
        #expect(!rig.engine.isLive("0000dead/sample.rack-01"))
    }

    @Test("a question goes to the stream's producer, its reply comes back with the endpoint and the messages asked for, and later questions are in line")
    func askAndAnswer() throws {
        let rig = try Rig()
        try rig.samples(20)
        let src = try rig.src()
        let now = rig.bus.clock.monotonicSeconds()
        #expect(rig.engine.ask(src, range: 5...9, now: now) == nil, "no offer yet: nobody to ask")
        rig.note(try rig.heartbeatMessage())
        let first = try #require(rig.engine.ask(src, range: 5...9, now: now))
        let second = try #require(rig.engine.ask(src, range: 12...13, now: now))
        #expect(first.endpoint == "memory://bridge/replay" && second.number == first.number + 1 && first.id != second.id)
        rig.bus.manualClock.advance(0.5)
        _ = try rig.server.serve(limit: 1)
        var replies: [(id: String, seqs: [UInt64], endpoint: String)] = []
        rig.engine.takeReplies { reply, endpoint in
            replies.append((reply.header.id, RecoveryEngine.messages(of: reply).map(\.envelope.seq), endpoint))
        }
        #expect(replies.count == 1 && replies.first?.id == first.id && replies.first?.seqs == Array(5...9))
        #expect(rig.engine.lastAnswer["memory://bridge/replay"] == rig.bus.clock.monotonicSeconds())
        rig.engine.answered("memory://bridge/replay", number: first.number)
        #expect(rig.engine.isInLine("memory://bridge/replay", askedAt: now, number: second.number), "answered since, the earlier question first")
        rig.engine.answered("memory://bridge/replay", number: second.number)
        #expect(!rig.engine.isInLine("memory://bridge/replay", askedAt: now, number: second.number), "its own answer has come")
    }

    @Test(
        "the in-order input's patience: an unknown producer waits for time and the bus's beats, a journalless one not at all, a known one up to giveUpS"
    )
    func livePatience() throws {
        let rig = try Rig()
        try rig.samples(5)
        let src = try rig.src()
        let settings = InOrderInput.Settings()
        let now = rig.bus.clock.monotonicSeconds()
        func givesUp(_ waited: Double, beats: Int = 0, unanswered: Bool = false, repeats: Int = 0) -> Bool {
            rig.engine.liveGivesUp(src, waited: waited, beatsWaited: beats, unanswered: unanswered, repeats: repeats, now: now, settings: settings)
        }
        // No offer has named its producer.
        #expect(!givesUp(settings.unknownProducerS + 1, beats: settings.unknownProducerBeats - 1), "the bus has not beaten enough")
        #expect(givesUp(settings.unknownProducerS + 1, beats: settings.unknownProducerBeats))
        #expect(givesUp(settings.giveUpS + 1), "past giveUpS all the same")
        rig.note(try rig.heartbeatMessage(journal: false))
        #expect(givesUp(0), "its producer keeps no journal")
        // Offered: waited for up to giveUpS.
        rig.note(try rig.heartbeatMessage())
        #expect(!givesUp(settings.giveUpS - 1) && givesUp(settings.giveUpS + 1))
        // It has answered (just now): a slow link past giveUpS is waited for, never past maxWaitS.
        let question = try #require(rig.engine.ask(src, range: 1...2, now: now))
        _ = try rig.server.serve()
        rig.engine.takeReplies { _, _ in }
        rig.engine.answered(question.endpoint, number: question.number)
        #expect(!givesUp(settings.giveUpS + 1, unanswered: false), "in line while its producer answers")
        // Seconds pass with the producer heard every second.
        func heard(for seconds: Int) throws {
            for _ in 0..<seconds {
                rig.bus.manualClock.advance(1)
                rig.note(try rig.heartbeatMessage())
            }
        }
        try heard(for: Int(settings.answerTimeoutS) + 1)
        let later = rig.bus.clock.monotonicSeconds()
        func givesUpLater(_ waited: Double, repeats: Int) -> Bool {
            rig.engine.liveGivesUp(src, waited: waited, beatsWaited: 0, unanswered: true, repeats: repeats, now: later, settings: settings)
        }
        #expect(givesUpLater(settings.giveUpS + 1, repeats: 0), "not answered lately, never asked again")
        #expect(!givesUpLater(settings.giveUpS + 1, repeats: 1), "a slow link: asked again, waited for")
        #expect(givesUpLater(settings.maxWaitS + 1, repeats: 1), "never past maxWaitS")
        // Its producer falls silent (a partition, a link down): the silence past the heartbeat gap
        // does not count towards giveUpS, though the wall clock passes it; maxWaitS still holds.
        rig.bus.manualClock.advance(settings.giveUpS)
        let silent = rig.bus.clock.monotonicSeconds()
        func givesUpSilent(_ waited: Double) -> Bool {
            rig.engine.liveGivesUp(src, waited: waited, beatsWaited: 0, unanswered: true, repeats: 0, now: silent, settings: settings)
        }
        #expect(!givesUpSilent(settings.giveUpS + 1), "silent for \(settings.giveUpS) s: heard for about 4 s of the wait")
        #expect(givesUpSilent(settings.maxWaitS + 1), "never past maxWaitS")
        // Heard again: the wait goes on from the heard seconds it had.
        rig.note(try rig.heartbeatMessage())
        try heard(for: Int(settings.giveUpS) - 2)
        let heardAgain = rig.bus.clock.monotonicSeconds()
        let waited = heardAgain - (silent - settings.giveUpS - 1)
        #expect(
            rig.engine.liveGivesUp(src, waited: waited, beatsWaited: 0, unanswered: true, repeats: 0, now: heardAgain, settings: settings),
            "heard for more than giveUpS of the wait, though silent for some of it")
    }

    @Test("a producer's heard seconds: gaps between heartbeats up to the gap limit are heard, the rest of a longer silence is not, the one going on too")
    func heardSeconds() {
        var liveness = ProducerLiveness()
        liveness.heartbeatGapS = 3
        for t in stride(from: 100.0, through: 110, by: 1) { liveness.heard("p", endpoint: nil, at: t) }
        #expect(liveness.heardSeconds("p", since: 100, now: 110) == 10)
        #expect(liveness.heardSeconds("p", since: 100, now: 112) == 12, "a silence up to the gap is heard")
        #expect(liveness.heardSeconds("p", since: 100, now: 120) == 13, "past the gap it is not")
        liveness.heard("p", endpoint: nil, at: 120)
        liveness.heard("p", endpoint: nil, at: 121)
        #expect(liveness.heardSeconds("p", since: 100, now: 121) == 14, "the 10 s gap: 3 heard, 7 not")
        #expect(liveness.heardSeconds("p", since: 115, now: 121) == 1, "a hole begun inside the silence counts from its end")
        #expect(liveness.heardSeconds("q", since: 100, now: 121) == 21, "a producer never heard: no silence is known")
    }

    @Test("the history's patience: an endpoint off this computer offered without a key cannot be used (real libzmq), and its hole is given up naming it")
    func historyUnusable() throws {
        let rig = try Rig()
        try rig.samples(5)
        let src = try rig.src()
        let beat = try rig.heartbeatMessage { $0.replay?.endpoint = "tcp://192.0.2.7:7790" }
        let clock = ManualClock()
        let engine = RecoveryEngine(transport: ZMQTransport(context: ZMQContext(), config: BusConfig(), clock: clock), logger: Self.logger)
        engine.note(heartbeat: beat, tracks: { _ in true }) { _, _, _ in }
        let now = clock.monotonicSeconds()
        let patience = HolePatience.history
        #expect(engine.historyVerdict(src, since: now, now: now, patience: patience) == .wait, "not yet asked")
        #expect(engine.ask(src, range: 1...5, now: now) == nil && engine.isUnusable("tcp://192.0.2.7:7790"))
        guard case .giveUp(let reason) = engine.historyVerdict(src, since: now, now: now, patience: patience) else {
            Issue.record("an unusable endpoint's hole is given up")
            return
        }
        #expect(reason.contains("tcp://192.0.2.7:7790") && reason.contains("cannot be used"))
        // Offered again with a key: tried again.
        let keyed = try rig.heartbeatMessage {
            $0.replay?.endpoint = "tcp://192.0.2.7:7790"
            $0.replay?.serverKey = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        }
        engine.note(heartbeat: keyed, tracks: { _ in true }) { _, _, _ in }
        #expect(!engine.isUnusable("tcp://192.0.2.7:7790"))
        #expect(engine.historyVerdict(src, since: now, now: now + patience.maxWaitS + 1, patience: patience) != .wait, "never past maxWaitS")
    }
}
