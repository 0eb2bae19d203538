import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTQuery
@testable import VBTWire

/// A detector that was down when a station's assignment changed catches up on it from the
/// recorder's stored assignment (`StationDetector.catchUp`): only when the stored one is newer
/// than the last command it applied and is another command.
@Suite("assignment catch-up from the recorder")
struct AssignmentCatchUpTests {
    static let assignArgs = JSONObject([
        ("athlete", .string("ana")), ("exercise", .string("squat")), ("load_kg", .number(100)), ("tempo", .string("3-1-X-0")),
        ("vl_threshold_pct", .number(15)), ("target_zone", .string("strength")),
    ])

    static func stored(_ command: String?, ts: Double, id: String?, args: JSONObject? = assignArgs) -> AssignmentRecord {
        AssignmentRecord(station: "rack-01", athlete: "ana", ts: ts, cmdId: id, command: command, args: args)
    }

    @Test("a newer stored athlete.assign applies every field the command carries")
    func newerApplies() throws {
        var detector = StationDetector(station: "rack-01")
        let caught = try #require(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 100, id: "a")))
        #expect(caught.command.id == "a" && caught.outputs.isEmpty)
        #expect(detector.assignment.athlete == "ana")
        #expect(detector.assignment.exercise == "squat")
        #expect(detector.assignment.loadKg == 100)
        #expect(detector.assignment.tempo?.text == "3-1-X-0")
        #expect(detector.assignment.velocityLossThresholdPct == 15)
        #expect(detector.assignment.targetZone == "strength")
        #expect(detector.lastCommand == AppliedCommand(ts: 100, id: "a"))
    }

    @Test("an older stored assignment, or the same command, changes nothing")
    func olderOrSameDoesNot() throws {
        var detector = StationDetector(station: "rack-01")
        let live = CommandMessage(
            id: "b", command: CommandName.athleteAssign, target: "rep-detector",
            args: JSONObject([("athlete", .string("ben")), ("exercise", .string("bench"))]))
        _ = try detector.apply(live, ts: 200)
        #expect(detector.lastCommand == AppliedCommand(ts: 200, id: "b"))
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 150, id: "a")) == nil)
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 200, id: "a")) == nil)
        // The same command stored with a later ts (another clock's rounding) is not applied twice.
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 250, id: "b")) == nil)
        #expect(detector.assignment.athlete == "ben")
        #expect(detector.assignment.exercise == "bench")
        #expect(detector.lastCommand == AppliedCommand(ts: 200, id: "b"))
        // A newer one then does apply.
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 300, id: "c")) != nil)
        #expect(detector.assignment.athlete == "ana")
    }

    @Test("a newer stored athlete.unassign leaves the station to nobody")
    func unassign() throws {
        var detector = StationDetector(station: "rack-01")
        _ = try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 100, id: "a"))
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteUnassign, ts: 200, id: "u", args: nil)) != nil)
        #expect(detector.assignment == Assignment())
        #expect(detector.lastCommand == AppliedCommand(ts: 200, id: "u"))
    }

    @Test("set.load's stored assignment carries the new load; plan.assign and rows without a command are not applied")
    func otherRows() throws {
        var detector = StationDetector(station: "rack-01")
        _ = try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 100, id: "a"))
        var args = Self.assignArgs
        args.fields.removeAll { $0.key == "load_kg" }
        args.fields.append((key: "load_kg", value: .number(110)))
        #expect(try detector.catchUp(on: Self.stored(CommandName.setLoad, ts: 150, id: "l", args: args)) != nil)
        #expect(detector.assignment.loadKg == 110 && detector.assignment.athlete == "ana")
        #expect(try detector.catchUp(on: Self.stored(CommandName.planAssign, ts: 200, id: "p")) == nil)
        #expect(try detector.catchUp(on: Self.stored(nil, ts: 200, id: "old", args: nil)) == nil)
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 200, id: nil)) == nil)
        #expect(detector.lastCommand == AppliedCommand(ts: 150, id: "l"))
    }

    @Test("set.end does not move the last command: an assignment missed before it still applies")
    func setEndIsNotAnAssignment() throws {
        var detector = StationDetector(station: "rack-01")
        _ = try detector.apply(CommandMessage(id: "e", command: CommandName.setEnd, target: "rep-detector"), ts: 300)
        #expect(detector.lastCommand == nil)
        #expect(try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 100, id: "a")) != nil)
    }

    @Test("the last command survives a checkpoint; a state written without it still loads")
    func checkpointKeepsIt() throws {
        var detector = StationDetector(station: "rack-01")
        _ = try detector.catchUp(on: Self.stored(CommandName.athleteAssign, ts: 100, id: "a"))
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let data = try encoder.encode(detector)
        #expect(try decoder.decode(StationDetector.self, from: data).lastCommand == AppliedCommand(ts: 100, id: "a"))
        var old = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        old["lastCommand"] = nil
        let restored = try decoder.decode(StationDetector.self, from: try JSONSerialization.data(withJSONObject: old))
        #expect(restored.lastCommand == nil)
        #expect(restored.assignment.athlete == "ana")
    }

    @Test("an assignment record with its command and arguments goes over the query wire and back")
    func recordWire() throws {
        let record = Self.stored(CommandName.athleteAssign, ts: 100, id: "a")
        let decoded = try JSONDecoder().decode(AssignmentRecord.self, from: try JSONEncoder().encode(record))
        #expect(decoded.command == record.command && decoded.cmdId == "a")
        let args = try #require(decoded.args)
        #expect(try AthleteAssign(args: args) == AthleteAssign(args: Self.assignArgs))
        let before = try JSONDecoder().decode(AssignmentRecord.self, from: Data(#"{"station":"rack-01","athlete":"ana","ts":5}"#.utf8))
        #expect(before.command == nil && before.args == nil)
    }

    /// What a rep is compared on here: its key and who, what and how much it was lifted as.
    struct Lifted: Equatable {
        let key: SwapProcessTests.RepKey, athlete: String?, exercise: String?, loadKg: Double?
    }

    /// Plays the swap session to a detector: the assignment goes out just before message `at`
    /// (its ts just before that message's), live on the bus or, with `missed`, only as the
    /// recorder's stored copy, answered when the detector asks.
    static func lifted(at: Int, missed: Bool) throws -> [Lifted] {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let server = bus.queryServerLink()
        let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let player = try Publisher(transport: bus, program: "test")
        let coach = try Publisher(transport: bus, program: "vbt")
        var options = DetectorOptions()
        options.patternsPath = dir.path("patterns.json")
        let runtime = try DetectorRuntime(
            transport: bus, queryEndpoint: MemoryBus.queryEndpoint, options: options, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let messages = SwapProcessTests.session().messages
        let ts = SwapProcessTests.lastT(messages[at]) - 0.01
        let args = AthleteAssign(athlete: "ana", exercise: "bench", loadKg: 60).args
        var asked = 0
        var lifted: [Lifted] = []
        func settle() throws {
            for _ in 0..<10_000 {
                try runtime.step(timeoutMs: 0)
                while let request = try server.receive(timeoutMs: 0, maxFrames: 3), let body = request.frames.last {
                    let fields = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
                    guard fields["query"] as? String == QueryName.assignmentGet.rawValue, let id = fields["id"] as? String else { continue }
                    asked += 1
                    // Stored before the detector heard of the station only when it was missed.
                    let stored =
                        missed
                        ? AssignmentRecord(station: "swap-1", athlete: "ana", ts: ts, cmdId: "c-ana", command: CommandName.athleteAssign, args: args) : nil
                    let reply = try JSONSerialization.data(withJSONObject: [
                        "id": id, "ok": true,
                        "result": try stored.map { try JSONSerialization.jsonObject(with: JSONEncoder().encode($0)) } ?? NSNull(),
                    ])
                    try server.send([request.frames[0], [], Array(reply)], dontWait: true)
                }
                while let message = try reps.next(timeoutMs: 0) {
                    let rep = try message.payload(as: RepMessage.self)
                    lifted.append(Lifted(key: SwapProcessTests.RepKey(rep), athlete: message.envelope.athlete, exercise: rep.exercise, loadKg: rep.loadKg))
                }
                if bus.queued == 0 { return }
            }
            Issue.record("the runtime never drained its input")
        }
        try bus.heartbeat()
        for (index, message) in messages.enumerated() {
            if index == at, !missed {
                try coach.publish(CommandMessage(id: "c-ana", command: CommandName.athleteAssign, args: args), station: "swap-1", ts: ts)
            }
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            bus.manualClock.advance(0.1)
            try settle()
        }
        #expect(asked == 1, "the station is asked for once, when first heard of")
        return lifted
    }

    @Test("a missed assignment applies before the first readings sent at or after it, as the command live would have")
    func missedAppliesWhereTheCommandWould() throws {
        let at = SwapProcessTests.session().messages.count / 2
        let live = try Self.lifted(at: at, missed: false)
        let caughtUp = try Self.lifted(at: at, missed: true)
        #expect(caughtUp == live)
        #expect(live.contains { $0.athlete == "ana" && $0.exercise == "bench" && $0.loadKg == 60 })
        #expect(live.contains { $0.athlete == nil }, "readings sent before it keep the assignment they were lifted under")
    }
}
