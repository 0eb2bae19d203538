import Testing
@testable import VBTBus

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
}
