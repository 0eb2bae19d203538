import Foundation
import Logging
import Synchronization
import Testing
import VBTQuery
import VBTTesting

@testable import VBTBus
@testable import VBTNotify
@testable import VBTWire

/// Today's readiness in the notifier's load advice, over the in-memory bus with a stand-in for the
/// session-recorder's query endpoint: a below-usual verdict beyond noise makes the pending advice
/// one set fewer with the reason, once an exercise's day; a usual day, or no recorder at all,
/// leaves the advice as it was. (tests/python/test_load_advice.py runs the real recorder.)
@Suite("readiness in the load advice")
struct ReadinessAdviceTests {
    typealias Rig = LoadAdviceNotifierTests.Rig

    /// The recorder's side of the query endpoint: takes the notifier's questions, answers them.
    final class StandIn {
        let link: any FrameLink
        init(bus: MemoryBus) { link = bus.queryServerLink() }

        /// The questions waiting: who asked (the frames to answer on) and the request.
        func questions() throws -> [(frames: [[UInt8]], request: [String: Any])] {
            var out: [(frames: [[UInt8]], request: [String: Any])] = []
            while let message = try link.receive(timeoutMs: 0, maxFrames: 3), let body = message.frames.last {
                let request = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
                out.append((message.frames, request))
            }
            return out
        }

        /// Answers `question` with `rows`.
        func answer(_ question: (frames: [[UInt8]], request: [String: Any]), _ rows: [SessionReadiness]) throws {
            let result = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
            let id = try #require(question.request["id"] as? String)
            let reply = "{\"id\":\"\(id)\",\"ok\":true,\"result\":\(result)}"
            try link.send(Array(question.frames.dropLast()) + [Array(reply.utf8)], dontWait: true)
        }
    }

    /// A stored readiness of ana's squat today, computed at `ts`.
    static func readiness(_ verdict: ReadinessVerdict, score: Double, withinNoise: Bool = false, ts: Double) -> SessionReadiness {
        let assessment = ReadinessAssessment(
            verdict: verdict, scorePct: score, typicalErrorPct: 4, swcPct: 2, standardErrorPct: 0.5, withinNoise: withinNoise, sets: 2,
            pastSessions: 10, interceptMps: 1.3, slopeMpsPerKg: -0.008)
        return SessionReadiness(session: 7, exercise: "squat", athlete: "ana", sessionStartedTs: ts - 600, ts: ts, assessment: assessment)
    }

    /// Collects what a logger says.
    final class Lines: @unchecked Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        struct Handler: LogHandler {
            let sink: Lines
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) { sink.lines.withLock { $0.append("\(event.message)") } }
        }
        var logger: Logger { Logger(label: "test.notifier") { _ in Handler(sink: self) } }
    }

    @Test("the reason: below usual beyond noise only, with the usual band")
    func reasonInWords() {
        let now = 1_795_435_200.0
        #expect(LoadAdvisor.readinessLow(Self.readiness(.below, score: 94.2, ts: now).assessment) == "readiness 94, below your usual 100 ± 2")
        #expect(LoadAdvisor.readinessLow(Self.readiness(.below, score: 97, withinNoise: true, ts: now).assessment) == nil)
        #expect(LoadAdvisor.readinessLow(Self.readiness(.usual, score: 99, ts: now).assessment) == nil)
        #expect(LoadAdvisor.readinessLow(Self.readiness(.better, score: 106, ts: now).assessment) == nil)
        #expect(LoadAdvisor.readinessLow(ReadinessAssessment(verdict: .tooLittleHistory, sets: 1, pastSessions: 2)) == nil)
        var narrow = Self.readiness(.below, score: 98.9, ts: now).assessment
        narrow.swcPct = 0.45
        #expect(LoadAdvisor.readinessLow(narrow) == "readiness 99, below your usual 100 ± 0.5")
    }

    @Test("below usual: the pending advice takes one set off with the reason, once an exercise's day")
    func belowUsual() throws {
        var rig = try Rig(queryEndpoint: MemoryBus.queryEndpoint)
        let recorder = StandIn(bus: rig.bus)
        try rig.assignPlan(sets: 4)
        _ = try rig.step()
        let setTs = rig.bus.clock.wallSeconds()
        try rig.set("s1", load: 100, velocities: [0.63, 0.62, 0.61])
        var out = try rig.step()
        let ended = try #require(LoadAdviceNotifierTests.workouts(out).first { $0.event == "set-ended" }?.advice)
        #expect(ended.forSet == 2 && ended.loadKg == 82.5 && !ended.fewerSets)

        // The first answer predates the set (the recorder has not stored it yet): asked again.
        var asked = try recorder.questions()
        try #require(asked.count == 1)
        #expect(asked[0].request["query"] as? String == "readiness")
        let args = try #require(asked[0].request["args"] as? [String: Any])
        #expect(args["athlete"] as? String == "ana" && args["exercise"] as? String == "squat")
        try recorder.answer(asked[0], [Self.readiness(.usual, score: 100, ts: setTs - 3_600)])
        out = try rig.step()
        #expect(LoadAdviceNotifierTests.workouts(out).isEmpty && rig.notifier.readinessWaiting == 1)
        rig.bus.manualClock.advance(ReadinessAsker.againAfterS)
        _ = try rig.step()
        asked = try recorder.questions()
        try #require(asked.count == 1)

        // The set's own figure: 94 % of usual, beyond noise.
        try recorder.answer(asked[0], [Self.readiness(.below, score: 94, ts: setTs)])
        out = try rig.step()
        let renewed = try #require(LoadAdviceNotifierTests.workouts(out).first)
        #expect(renewed.event == "snapshot" && renewed.sets == 4)
        let advice = try #require(renewed.advice)
        #expect(advice.forSet == 2 && advice.loadKg == 82.5 && advice.fewerSets && !advice.applied)
        #expect(advice.fewerSetsReason == "readiness 94, below your usual 100 ± 2")
        #expect(rig.notifier.readinessWaiting == 0, "answered for the set: no more questions")

        // The coach accepts: four sets become three.
        try rig.send(CommandName.adviceAccept)
        out = try rig.step()
        #expect(LoadAdviceNotifierTests.workouts(out).first { $0.event == "advice-accepted" }?.sets == 3)

        // The next set: readiness took its set off already, so neither a question nor a set fewer.
        rig.bus.manualClock.advance(121)
        _ = try rig.step()
        try rig.set("s2", load: 82.5, velocities: [0.74, 0.75, 0.74])
        out = try rig.step()
        let next = try #require(LoadAdviceNotifierTests.workouts(out).first { $0.event == "set-ended" }?.advice)
        #expect(next.forSet == 3 && !next.fewerSets)
        rig.bus.manualClock.advance(ReadinessAsker.againAfterS)
        _ = try rig.step()
        #expect(try recorder.questions().isEmpty)
    }

    @Test("a usual day, or below but within noise: the advice stands")
    func usualDay() throws {
        for (verdict, score, noise) in [(ReadinessVerdict.usual, 99.5, false), (.below, 97.5, true)] {
            var rig = try Rig(queryEndpoint: MemoryBus.queryEndpoint)
            let recorder = StandIn(bus: rig.bus)
            try rig.assignPlan(sets: 4)
            _ = try rig.step()
            let setTs = rig.bus.clock.wallSeconds()
            try rig.set("s1", load: 100, velocities: [0.63, 0.62, 0.61])
            _ = try rig.step()
            let asked = try recorder.questions()
            try #require(asked.count == 1)
            try recorder.answer(asked[0], [Self.readiness(verdict, score: score, withinNoise: noise, ts: setTs)])
            let out = try rig.step()
            #expect(LoadAdviceNotifierTests.workouts(out).isEmpty, "\(verdict) \(noise): nothing to send again")
            #expect(rig.notifier.readinessWaiting == 0)
            try rig.send(CommandName.adviceAccept)
            let accepted = LoadAdviceNotifierTests.workouts(try rig.step()).first { $0.event == "advice-accepted" }
            #expect(accepted?.advice?.fewerSets == false && accepted?.sets == 4)
        }
    }

    @Test("a plan item marked auto takes the set off itself")
    func autoItem() throws {
        var rig = try Rig(queryEndpoint: MemoryBus.queryEndpoint)
        let recorder = StandIn(bus: rig.bus)
        try rig.assignPlan(advice: "auto", sets: 4)
        _ = try rig.step()
        let setTs = rig.bus.clock.wallSeconds()
        try rig.set("s1", load: 100, velocities: [0.63, 0.62, 0.61])
        _ = try rig.step()
        let asked = try recorder.questions()
        try #require(asked.count == 1)
        try recorder.answer(asked[0], [Self.readiness(.below, score: 93, ts: setTs)])
        let renewed = try #require(LoadAdviceNotifierTests.workouts(try rig.step()).first)
        #expect(renewed.sets == 3 && renewed.advice?.applied == true && renewed.advice?.fewerSets == true)
    }

    @Test("no recorder: asked a bounded number of times, said once in the log, advice as without readiness")
    func noRecorder() throws {
        let lines = Lines()
        var rig = try Rig(queryEndpoint: MemoryBus.queryEndpoint, logger: lines.logger)
        try rig.assignPlan(sets: 4)
        _ = try rig.step()
        try rig.set("s1", load: 100, velocities: [0.63, 0.62, 0.61])
        let advice = try #require(LoadAdviceNotifierTests.workouts(try rig.step()).first { $0.event == "set-ended" }?.advice)
        #expect(!advice.fewerSets)
        for _ in 0..<ReadinessAsker.tries {
            #expect(rig.notifier.readinessWaiting == 1)
            rig.bus.manualClock.advance(ReadinessAsker.againAfterS)
            _ = try rig.step()
        }
        #expect(rig.notifier.readinessWaiting == 0, "given up after \(ReadinessAsker.tries) questions")
        #expect(lines.all.filter { $0.contains("readiness not known") }.count == 1, "\(lines.all)")
        // The notifier goes on: the rest runs out as ever.
        rig.bus.manualClock.advance(121)
        #expect(LoadAdviceNotifierTests.workouts(try rig.step()).contains { $0.event == "rest-over" })
    }
}
