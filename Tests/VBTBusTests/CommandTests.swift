import Testing

@testable import VBTBus
@testable import VBTWire

@Suite("Commands: typed arguments")
struct CommandTests {
    @Test("athlete.assign's arguments read back as written, absent fields staying absent")
    func roundTrip() throws {
        let full = AthleteAssign(
            athlete: "ana", exercise: "squat", loadKg: 100, restS: 120, vlThresholdPct: 25, vlReference: "first",
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
        let plan = Plan(
            id: "strength-a", athlete: "ana",
            items: [
                .init(exercise: "squat", sets: 3, reps: 5, restS: 180, loadKg: 100), .init(exercise: "bench", sets: 3, reps: 8),
            ])
        #expect(try Plan(assignArgs: plan.assignArgs(athlete: "ana")) == plan)
        #expect(throws: PayloadError.self) { try Plan(assignArgs: JSONObject([("athlete", .string("ana")), ("exercises", .array([]))])) }
        #expect(throws: PayloadError.self, "plan.assign names its athlete") {
            try Plan(assignArgs: JSONObject([("exercises", plan.assignArgs(athlete: "ana")["exercises"]!)]))
        }
        var zero = plan
        zero.items[1].sets = 0
        do {
            _ = try Plan(assignArgs: zero.assignArgs(athlete: "ana"))
            Issue.record("a plan with 0 sets was accepted")
        } catch {
            #expect("\(error)".contains("exercises[1] (bench)"))
        }
    }

    @Test("set.load, posture.calibrate and rest.extend read back as written; a wrong or missing value is an error naming it")
    func smallCommands() throws {
        #expect(try SetLoad(args: SetLoad(loadKg: 102.5).args) == SetLoad(loadKg: 102.5))
        #expect(throws: PayloadError.self) { try SetLoad(args: JSONObject([("load_kg", .string("heavy"))])) }
        #expect(throws: PayloadError.self) { try SetLoad(args: JSONObject([("load_kg", .number(-5))])) }
        let calibrate = PostureCalibrate(athlete: "ana", seconds: 12)
        #expect(try PostureCalibrate(args: calibrate.args) == calibrate)
        #expect(try PostureCalibrate(args: JSONObject()) == PostureCalibrate(athlete: nil, seconds: nil))
        #expect(throws: PayloadError.self) { try PostureCalibrate(args: JSONObject([("seconds", .string("ten"))])) }
        #expect(try RestExtend(args: RestExtend(seconds: -30).args) == RestExtend(seconds: -30))
        do {
            _ = try RestExtend(args: JSONObject([("seconds", .number(7200))]))
            Issue.record("a 2-hour extension was accepted")
        } catch {
            #expect(error.reason.contains("between -3600 and 3600"))
        }
        #expect(CommandName.rest == ["rest.pause", "rest.resume", "rest.skip", "rest.extend"])
    }

    @Test("an argument a command does not take is refused, naming it and what the command takes")
    func unknownArgument() throws {
        do {
            _ = try AthleteAssign(args: JSONObject([("athlete", .string("ana")), ("colour", .string("red"))]))
            Issue.record("athlete.assign took an argument it does not declare")
        } catch {
            #expect(error.reason.contains("colour") && error.reason.contains("vl_threshold_pct"))
        }
        let item = JSONObject([("exercise", .string("squat")), ("sets", .number(3)), ("reps", .number(5)), ("colour", .string("red"))])
        #expect(throws: PayloadError.self, "a plan item's unknown field") {
            try Plan(assignArgs: JSONObject([("athlete", .string("ana")), ("exercises", .array([.object(item)]))]))
        }
        #expect(throws: PayloadError.self, "set.end takes no arguments") {
            try CommandName.checkArguments(CommandName.setEnd, JSONObject([("now", .bool(true))]))
        }
        try CommandName.checkArguments(CommandName.setEnd, JSONObject())
        // A command no vbt program acts on is not ours to judge.
        try CommandName.checkArguments("lights.dim", JSONObject([("level", .number(3))]))
    }

    @Test("a choice outside its values, a value out of bounds or a required argument left out is refused; null is absent")
    func bounds() throws {
        #expect(throws: PayloadError.self) { try AthleteAssign(args: JSONObject([("vl_reference", .string("slowest"))])) }
        #expect(throws: PayloadError.self) { try AthleteAssign(args: JSONObject([("load_kg", .number(1_000.5))])) }
        #expect(throws: PayloadError.self) { try AthleteAssign(args: JSONObject([("rom_mm", .number(.infinity))])) }
        #expect(throws: PayloadError.self) { try CommandName.checkArguments(CommandName.restExtend, JSONObject()) }
        #expect(try AthleteAssign(args: JSONObject([("athlete", .string("ana")), ("load_kg", .null)])) == AthleteAssign(athlete: "ana"))
    }

    @Test("a program's --help lists the commands it acts on, arguments that may be left out marked ?")
    func help() {
        let lines = CommandName.help(for: "rep-detector").split(separator: "\n").map(String.init)
        let commands = lines.filter { !$0.hasPrefix("      ") }.map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(commands == ["athlete.assign", "athlete.unassign", "set.end", "set.load"])
        #expect(lines.contains("  set.load {load_kg}"))
        #expect(lines.allSatisfy { $0.count <= 78 })
        #expect(lines.joined().contains("mvt_mps?, tempo?}"))
    }

    @Test("every declared command has a typed name and reads into its case; an unknown one is nil; refused arguments throw")
    func typed() throws {
        #expect(Set(Command.Name.allCases.map(\.rawValue)) == Set(CommandName.specs.map(\.name)))
        for name in Command.Name.allCases { #expect(name.spec.name == name.rawValue) }
        let assign = AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100)
        let read = try Command(CommandMessage(id: "1", command: .athleteAssign, args: assign.args))
        #expect(read == .athleteAssign(assign))
        #expect(read?.name == .athleteAssign && read?.isActedOn(by: "notifier") == true && read?.isActedOn(by: "coach-console") == false)
        #expect(try Command(name: "set.load", args: SetLoad(loadKg: 60).args) == .setLoad(SetLoad(loadKg: 60)))
        #expect(try Command(name: "rest.skip", args: JSONObject()) == .restSkip)
        #expect(try Command(name: "lights.dim", args: JSONObject([("level", .number(3))])) == nil)
        // A command that takes no arguments refuses any; one that takes some refuses a wrong one, naming it.
        #expect(throws: PayloadError.self) { try Command(name: "set.end", args: JSONObject([("now", .bool(true))])) }
        do {
            _ = try Command(name: "set.load", args: JSONObject([("load_kg", .string("heavy"))]))
            Issue.record("a load that is not a number was read")
        } catch { #expect(error.reason.contains("load_kg")) }
        #expect(Command.Name.allCases.filter(\.changesAssignment) == [.athleteAssign, .athleteUnassign, .setLoad])
    }
}
