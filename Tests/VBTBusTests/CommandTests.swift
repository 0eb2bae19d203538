import Testing
@testable import VBTBus
@testable import VBTWire

@Suite("Commands: typed arguments")
struct CommandTests {
    @Test("athlete.assign's arguments read back as written, absent fields staying absent")
    func roundTrip() throws {
        let full = AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100, restS: 120, vlThresholdPct: 25, vlReference: "first",
                                 targetZone: "strength", romMm: 580)
        #expect(try AthleteAssign(args: full.args) == full)
        let bare = AthleteAssign(athlete: "bo")
        #expect(bare.args.fields.map(\.key) == ["athlete"])
        #expect(try AthleteAssign(args: bare.args) == bare)
    }

    @Test("a field of the wrong type is an error naming it; the rest are not read half-way")
    func wrongType() {
        let args = JSONObject([("athlete", .string("ana")), ("load_kg", .string("80"))])
        #expect(throws: PayloadError.self) { try AthleteAssign(args: args) }
        do {
            _ = try AthleteAssign(args: args)
        } catch {
            #expect("\(error)".contains("load_kg"))
        }
    }

    @Test("plan.assign's arguments read back as written; a plan without exercises, or with 0 sets, is an error saying what to fix")
    func plan() throws {
        let plan = PlanAssign(name: "strength-a", athlete: "ana", exercises: [
            .init(exercise: "squat", sets: 3, reps: 5, restS: 180, loadKg: 100), .init(exercise: "bench", sets: 3, reps: 8),
        ])
        #expect(try PlanAssign(args: plan.args) == plan)
        #expect(throws: PayloadError.self) { try PlanAssign(args: JSONObject([("athlete", .string("ana")), ("exercises", .array([]))])) }
        var zero = plan
        zero.exercises[1].sets = 0
        do {
            _ = try PlanAssign(args: zero.args)
            Issue.record("a plan with 0 sets was accepted")
        } catch {
            #expect("\(error)".contains("exercises[1] (bench)"))
        }
    }
}
