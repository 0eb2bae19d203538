import Foundation
import Testing
import VBTWire

@testable import VBTQuery
@testable import VBTStore

// Plans for load advice: a velocity zone aims at its middle, `!auto` applies the advice
// without asking; both are stored (`v12-load-advice`) and reach `plan.assign`.

@Suite("plans for load advice")
struct LoadAdvicePlanTests {
    static func rest(_ exercise: String) -> Double? { exercise == "squat" ? 180 : nil }

    @Test("a zone's middle is the target; !auto is read, needs a target, and the old forms are unchanged")
    func grammar() throws {
        let zone = try PlanItem.parse("squat:3x5@100kg~0.70-0.80mps/120s!auto", defaultRestS: Self.rest)
        #expect(abs((zone.targetMeanVelocityMps ?? 0) - 0.75) < 1e-12 && zone.autoAdvice == true && zone.restS == 120 && zone.loadKg == 100)
        let plain = try PlanItem.parse("squat:3x5@100kg~0.75mps", defaultRestS: Self.rest)
        #expect(plain.targetMeanVelocityMps == 0.75 && plain.autoAdvice == nil)
        #expect(try PlanItem.parse("squat:3x5@0.6mps!AUTO", defaultRestS: Self.rest).autoAdvice == true)
        for bad in ["squat:3x5@100kg!auto", "squat:3x5~0.80-0.70mps", "squat:3x5~0.7-4mps"] {
            #expect(throws: StoreError.self, "\(bad)") { try PlanItem.parse(bad, defaultRestS: Self.rest) }
        }
    }

    @Test("!auto is stored with the plan and goes out in plan.assign as advice auto")
    func stored() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        let auto = try PlanItem.parse("squat:3x5@100kg~0.75mps!auto", defaultRestS: Self.rest)
        let ask = try PlanItem.parse("squat:2x5@90kg~0.8mps", defaultRestS: Self.rest)
        let plan = try store.createPlan(Plan(id: "auto", items: [auto, ask]))
        #expect(plan.items.map(\.autoAdvice) == [true, nil])
        #expect(try store.plan("auto").items.map(\.autoAdvice) == [true, nil])
        let read = try Plan(assignArgs: plan.assignArgs(athlete: "ana"))
        #expect(read.items.map(\.autoAdvice) == [true, nil])
    }
}
