import Foundation
import Testing

@testable import VBTNotify
@testable import VBTWire

/// A plan's tempo reaches the detector: the notifier's `athlete.assign` for the item carries it,
/// and a plan without one carries none.
@Suite("a plan's tempo in the notifier's assignment")
struct PlanTempoNotifierTests {
    @Test("plan.assign with a tempo on the first item: its athlete.assign says 3-1-X-0; a plan without one, nothing")
    func tempoAssigned() throws {
        var rig = try LoadAdviceNotifierTests.Rig()
        try rig.send(
            CommandName.planAssign,
            [
                ("athlete", .string("ana")), ("plan", .string("ana-tempo")),
                (
                    "exercises",
                    .array([
                        .object(
                            JSONObject([
                                ("exercise", .string("squat")), ("sets", .number(1)), ("reps", .number(5)), ("load_kg", .number(100)),
                                ("tempo", .string("31X0")),
                            ])),
                        .object(JSONObject([("exercise", .string("bench")), ("sets", .number(1)), ("reps", .number(5))])),
                    ])
                ),
            ])
        let assigns = try rig.step().compactMap { try? $0.payload(as: CommandMessage.self) }.filter { $0.command == CommandName.athleteAssign }
        let first = try #require(assigns.first)
        #expect(try AthleteAssign(args: first.args).tempo == "3-1-X-0", "the dashed form goes out")
        #expect(try AthleteAssign(args: first.args).exercise == "squat")
        // A plan without one assigns without one.
        try rig.send(
            CommandName.planAssign,
            [
                ("athlete", .string("ana")), ("plan", .string("ana-plain")),
                ("exercises", .array([.object(JSONObject([("exercise", .string("bench")), ("sets", .number(1)), ("reps", .number(5))]))])),
            ])
        let plain = try rig.step().compactMap { try? $0.payload(as: CommandMessage.self) }.filter { $0.command == CommandName.athleteAssign }
        let bench = try #require(plain.first)
        #expect(try AthleteAssign(args: bench.args).exercise == "bench" && AthleteAssign(args: bench.args).tempo == nil)
    }
}
