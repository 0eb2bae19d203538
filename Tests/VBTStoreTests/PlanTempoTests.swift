import Foundation
import Testing
import VBTWire

@testable import VBTQuery
@testable import VBTStore

// A plan item's tempo: written after the rest (`:3-1-X-0`), stored (`v13-plan-tempo`) and
// carried in `plan.assign`, from which the notifier's assignment takes it to the detector.

@Suite("plans with a tempo")
struct PlanTempoTests {
    static func rest(_ exercise: String) -> Double? { exercise == "squat" ? 180 : nil }

    @Test("a tempo is read after the rest or the load, in its dashed form; a bad one is refused naming the form")
    func grammar() throws {
        let tempo = try PlanItem.parse("squat:3x5@100kg~0.6mps/120s:31X0!auto", defaultRestS: Self.rest)
        #expect(tempo.tempo == "3-1-X-0" && tempo.restS == 120 && tempo.loadKg == 100 && tempo.autoAdvice == true)
        #expect(try PlanItem.parse("squat:3x5@100kg:2.5-0-X-1", defaultRestS: Self.rest).tempo == "2.5-0-X-1")
        #expect(try PlanItem.parse("squat:3x5@100kg/120s", defaultRestS: Self.rest).tempo == nil)
        for bad in ["squat:3x5@100kg:3-1-X", "squat:3x5:fast", "squat:3x5:99-0-X-0"] {
            #expect(throws: StoreError.self, "\(bad)") { try PlanItem.parse(bad, defaultRestS: Self.rest) }
        }
    }

    @Test("a tempo is stored with the plan and goes out in plan.assign; a bad one in plan.assign is refused")
    func stored() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        let slow = try PlanItem.parse("squat:3x5@100kg:3-1-X-0", defaultRestS: Self.rest)
        let plain = try PlanItem.parse("squat:2x5@90kg", defaultRestS: Self.rest)
        let plan = try store.createPlan(Plan(id: "tempo", items: [slow, plain]))
        #expect(try store.plan("tempo").items.map(\.tempo) == ["3-1-X-0", nil])
        let args = plan.assignArgs(athlete: "ana")
        #expect(try Plan(assignArgs: args).items.map(\.tempo) == ["3-1-X-0", nil])
        var bad = slow
        bad.tempo = "slow"
        #expect(throws: PayloadError.self) { try Plan(assignArgs: Plan(id: "bad", items: [bad]).assignArgs(athlete: "ana")) }
    }
}
