import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTNotify
@testable import VBTWire

/// Load advice through the notifier's runtime over the in-memory bus: a set below the plan's
/// velocity target yields advice in the `workout` message, `advice.accept` carries it into the
/// plan's next set (and the detector learns the load), `!auto` applies it without asking.
/// (tests/python/test_load_advice.py runs the processes and `vbt advice accept`.)
@Suite("load advice in the notifier")
struct LoadAdviceNotifierTests {
    static let logger = Logger(label: "test.notifier") { _ in SwiftLogNoOpLogHandler() }

    /// A notifier, a detector, a coach and a listener on one in-memory bus.
    struct Rig {
        let bus = MemoryBus()
        var notifier: NotifierRuntime
        let listener: Subscriber
        let detector: Publisher
        let coach: Publisher
        var commandCount = 0

        /// `queryEndpoint`: where the notifier asks for readiness (nil: never).
        init(queryEndpoint: String? = nil, logger: Logger = LoadAdviceNotifierTests.logger) throws {
            var settings = NotifierSettings()
            settings.snapshotS = 1e9
            notifier = try NotifierRuntime(
                transport: bus, settings: settings, statePath: nil, sink: nil, queryEndpoint: queryEndpoint, logger: logger)
            listener = try Subscriber(
                transport: bus, prefixes: MessageTypes.prefixes(WorkoutMessage.self, CommandMessage.self, AckMessage.self),
                logger: LoadAdviceNotifierTests.logger)
            detector = try Publisher(transport: bus, program: "rep-detector")
            coach = try Publisher(transport: bus, program: "vbt")
        }

        /// Runs the notifier until the bus is quiet; what it published since.
        func step() throws -> [BusMessage] {
            for _ in 0..<20 { try notifier.step(timeoutMs: 0) }
            var out: [BusMessage] = []
            while let message = try listener.next(timeoutMs: 0) { out.append(message) }
            return out
        }

        mutating func send(_ name: String, _ args: [(key: String, value: JSONValue)] = []) throws {
            commandCount += 1
            try coach.publish(CommandMessage(id: "coach-\(commandCount)", command: name, target: "*", args: JSONObject(args)), station: "rack-01")
        }

        /// A plan of squat, 3 (`sets`) x 5 at 100 kg aiming at 0.75 m/s (`advice`: `auto` or nil), then bench.
        mutating func assignPlan(advice: String? = nil, sets: Int = 3) throws {
            var squat: [(key: String, value: JSONValue)] = [
                ("exercise", .string("squat")), ("sets", .number(Double(sets))), ("reps", .number(5)), ("rest_s", .number(120)),
                ("load_kg", .number(100)), ("target_mean_velocity_mps", .number(0.75)),
            ]
            if let advice { squat.append(("advice", .string(advice))) }
            try send(
                CommandName.planAssign,
                [
                    ("athlete", .string("ana")), ("plan", .string("ana-a")),
                    (
                        "exercises",
                        .array([
                            .object(JSONObject(squat)),
                            .object(JSONObject([("exercise", .string("bench")), ("sets", .number(1)), ("reps", .number(5))])),
                        ])
                    ),
                ])
        }

        /// The detector's profile for ana's squat, then one set at `load` whose reps ran at `velocities`.
        func set(_ id: String, load: Double, velocities: [Double], loss: Double = 10, profileSlope: Double? = -0.0075) throws {
            if let profileSlope {
                try detector.publish(
                    ProfileMessage(
                        exercise: "squat", loadsKg: [60, 100], meanVelocitiesMps: [1.0, 0.7], interceptMps: 1.45, slopeMpsPerKg: profileSlope, r2: 1,
                        mvtMps: 0.3, e1rmKg: 150), station: "rack-01", athlete: "ana")
            }
            for (index, velocity) in velocities.enumerated() {
                try detector.publish(
                    RepMessage(
                        setId: id, repId: "\(id)-r\(index + 1)", index: index + 1, meanVelocityMps: velocity, peakVelocityMps: velocity * 1.6,
                        meanPropulsiveVelocityMps: velocity, romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 0, tEnd: 0,
                        detector: "d", concentricStartT: nil, concentricEndT: nil, exercise: "squat", loadKg: load),
                    station: "rack-01", athlete: "ana")
            }
            try detector.publish(
                SetMessage(
                    setId: id, event: .end, reps: velocities.count, reason: .idle, bestMeanVelocityMps: velocities.max(), velocityLossPct: loss,
                    exercise: "squat", loadKg: load), station: "rack-01", athlete: "ana")
        }
    }

    static func workouts(_ messages: [BusMessage]) -> [WorkoutMessage] { messages.compactMap { try? $0.payload(as: WorkoutMessage.self) } }
    /// The `set.load` commands the notifier sent: their loads.
    static func setLoads(_ messages: [BusMessage]) -> [Double] {
        messages.compactMap { try? $0.payload(as: CommandMessage.self) }.filter { $0.command == CommandName.setLoad }.compactMap {
            try? SetLoad(args: $0.args).loadKg
        }
    }
    static func acks(_ messages: [BusMessage]) -> [AckMessage] { messages.compactMap { try? $0.payload(as: AckMessage.self) } }

    @Test("a set below the target yields advice; accepting it carries the load into the next set and tells the detector")
    func adviceAndAccept() throws {
        var rig = try Rig()
        try rig.assignPlan()
        _ = try rig.step()
        // 0.62 m/s at 100 kg against 0.75: on the profile's slope, 82.67 kg, 82.5 on the plates.
        try rig.set("s1", load: 100, velocities: [0.63, 0.62, 0.61, 0.55, 0.5])
        var out = try rig.step()
        let ended = try #require(Self.workouts(out).first { $0.event == "set-ended" })
        let advice = try #require(ended.advice)
        #expect(advice.forSet == 2 && advice.loadKg == 82.5 && advice.method == "profile-offset" && !advice.applied && !advice.fewerSets)
        #expect(Self.setLoads(out).isEmpty, "nothing changes before the coach accepts")

        try rig.send(CommandName.adviceAccept)
        out = try rig.step()
        let accepted = try #require(Self.workouts(out).first { $0.event == "advice-accepted" })
        #expect(accepted.advice?.applied == true)
        #expect(Self.setLoads(out) == [82.5], "the detector learns set 2's load during the rest")
        #expect(Self.acks(out).map(\.state) == [.done])

        // Accepting twice is refused, with the reason.
        try rig.send(CommandName.adviceAccept)
        out = try rig.step()
        #expect(Self.acks(out).first?.reason?.contains("applied already") == true)

        // The rest runs out: set 2 is at the advised load.
        rig.bus.manualClock.advance(121)
        out = try rig.step()
        let next = try #require(Self.workouts(out).first { $0.event == "rest-over" })
        #expect(next.set == 2 && next.loadKg == 82.5)
    }

    @Test("a plan item marked auto applies the advice itself; a velocity-loss set drops one set")
    func autoAndFewerSets() throws {
        var rig = try Rig()
        try rig.assignPlan(advice: "auto")
        _ = try rig.step()
        try rig.set("s1", load: 100, velocities: [0.85, 0.84, 0.86, 0.6, 0.55], loss: 30)
        let out = try rig.step()
        let ended = try #require(Self.workouts(out).first { $0.event == "set-ended" })
        let advice = try #require(ended.advice)
        // 0.85 at 100 kg: 113.3 kg for 0.75, 112.5 on the plates; a 30 % loss: one set fewer.
        #expect(advice.loadKg == 112.5 && advice.applied && advice.fewerSets)
        #expect(ended.sets == 2, "three sets became two")
        #expect(Self.setLoads(out) == [112.5])
    }

    @Test("no advice to accept, or advice without a load: refused with the reason")
    func refusals() throws {
        var rig = try Rig()
        try rig.send(CommandName.adviceAccept)
        #expect(Self.acks(try rig.step()).first?.reason?.contains("no load advice") == true)
        try rig.assignPlan()
        _ = try rig.step()
        // No stored profile and one load: advice says why it has no load.
        try rig.set("s1", load: 100, velocities: [0.62, 0.62, 0.62], profileSlope: nil)
        let advice = try #require(Self.workouts(try rig.step()).first { $0.event == "set-ended" }?.advice)
        #expect(advice.loadKg == nil && advice.reason.contains("no stored profile"))
        try rig.send(CommandName.adviceAccept)
        #expect(Self.acks(try rig.step()).first?.reason?.contains("no load") == true)
    }

    @Test("the workout message with advice goes through the wire's encoder and decoder unchanged")
    func wireRoundTrip() throws {
        var message = WorkoutMessage(
            event: "set-ended", state: .resting, plan: "p", exercise: "squat", loadKg: 100, set: 1, sets: 3, reps: 5, exerciseIndex: 1,
            exercises: 1, setsDone: 1, restS: 120, vlThresholdPct: 20, nextExercise: nil)
        message.advice = WorkoutMessage.Advice(
            forSet: 2, loadKg: 82.5, method: "profile-offset", loads: 1, targetMps: 0.75, fewerSets: true, fewerSetsReason: "why",
            reason: "how", applied: false)
        var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
        let frames = try stamper.encode(message, station: "rack-01", athlete: "ana", ts: 1)
        let decoded = try decodeMessage(topic: frames.topic, body: frames.body).payload(as: WorkoutMessage.self)
        #expect(decoded == message)
    }
}
