import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTConsole

private func folder() -> String {
    let path = NSTemporaryDirectory() + "vbt-displays-" + UUID().uuidString
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite struct DisplaysTests {
    @Test func aCodePairsOnceAndTheSessionEndsWithTheDisplay() throws {
        let path = folder() + "/console-users.displays"
        let (added, code) = try DisplaysFile.add(path: path, station: "rack-01")
        #expect(code.wholeMatch(of: /[0-9A-Z]{4}-[0-9A-Z]{4}/) != nil)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains(code) && text.contains(":rack-01:$2"), "the code is kept hashed")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        let book = try DisplayBook(path: path)
        #expect(book.pair(code: "0000-0000", monotonic: 1) == nil)
        // As typed on a TV's keyboard: any case, O for 0, no dash.
        let typed = code.lowercased().replacingOccurrences(of: "-", with: "").replacingOccurrences(of: "0", with: "o")
        let paired = try #require(book.pair(code: typed, monotonic: 2))
        #expect(paired.0.id == added.id && paired.0.station == "rack-01" && paired.0.isPaired)
        #expect(book.pair(code: code, monotonic: 3) == nil, "a code pairs once")
        #expect(book.cached(token: paired.1)?.id == added.id)
        // A console started again checks the secret against the file's hash.
        let again = try DisplayBook(path: path)
        #expect(again.cached(token: paired.1) == nil)
        #expect(again.display(token: paired.1)?.station == "rack-01")
        #expect(again.display(token: added.id + "." + String(repeating: "0", count: 64)) == nil)

        #expect(try DisplaysFile.remove(path: path, "rack-02").isEmpty)
        #expect(try DisplaysFile.remove(path: path, code).map(\.id) == [added.id], "removed by its code")
        #expect(book.cached(token: paired.1) == nil && !book.isPaired(id: added.id))
        #expect(again.display(token: paired.1) == nil)
    }

    @Test func wrongCodesArePausedAfterTen() throws {
        let path = folder() + "/u.displays"
        let (_, code) = try DisplaysFile.add(path: path, station: "rack-01")
        let book = try DisplayBook(path: path)
        for attempt in 0..<10 { #expect(book.pair(code: "ZZZZ-ZZZZ", monotonic: Double(attempt)) == nil) }
        #expect(book.isThrottled(now: 10))
        #expect(book.pair(code: code, monotonic: 10) == nil, "even the right code waits")
        #expect(!book.isThrottled(now: 70))
        #expect(book.pair(code: code, monotonic: 70) != nil)
    }

    @Test func anExpiredCodeDoesNotPair() throws {
        let path = folder() + "/u.displays"
        let (_, code) = try DisplaysFile.add(path: path, station: "rack-01", now: 1_000)
        let book = try DisplayBook(path: path)
        #expect(book.pair(code: code, now: 1_000 + DisplaysFile.codeLifetimeS + 1, monotonic: 1) == nil)
        #expect(DisplaysFile.normalize(code: "ABCD-EFG") == nil && DisplaysFile.normalize(code: "abcd efgh") == "ABCD-EFGH")
        #expect(DisplaysFile.normalize(code: "UUUU-UUUU") == nil, "U is not a symbol")
    }
}

@Suite struct AthleteAccountsTests {
    @Test func anAthleteAccountNamesItsAthleteAndOnlyItDoes() throws {
        let path = folder() + "/console-users"
        try AccountsFile.add(path: path, name: "ana-login", role: .athlete, password: "ana's passphrase", athlete: "ana")
        try AccountsFile.add(path: path, name: "coach", role: .coach, password: "coach's passphrase")
        #expect(throws: AccountError.self) { try AccountsFile.add(path: path, name: "x", role: .athlete, password: "a passphrase") }
        #expect(throws: AccountError.self) { try AccountsFile.add(path: path, name: "x", role: .viewer, password: "a passphrase", athlete: "ana") }
        let accounts = try AccountsFile.load(path: path)
        #expect(accounts["ana-login"]?.role == .athlete && accounts["ana-login"]?.athlete == "ana")
        #expect(accounts["coach"]?.athlete == nil)
        let book = try AccountBook(path: path)
        #expect(book.check(name: "ana-login", password: "ana's passphrase", now: 1)?.athlete == "ana")
        #expect(throws: AccountError.self) { try AccountsFile.parse("ana:athlete:$2b$10$abc\n") }
        #expect(throws: AccountError.self) { try AccountsFile.parse("ana:coach:$2b$10$abc:ana\n") }
    }
}

@Suite struct TargetBandTests {
    private let zones = [
        ZoneFloor(name: "max-strength", fromMps: 0), ZoneFloor(name: "strength", fromMps: 0.3), ZoneFloor(name: "strength-speed", fromMps: 0.5),
        ZoneFloor(name: "speed", fromMps: 0.75), ZoneFloor(name: "max-speed", fromMps: 1),
    ]

    private func message<P: BusPayload>(_ payload: P) -> BusMessage {
        var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
        let frames = try! stamper.encode(payload, station: "rack-01", athlete: "ana", ts: 1_790_000_000)
        return try! decodeMessage(topic: frames.topic, body: frames.body)
    }

    private func rep(_ index: Int, _ velocity: Double) -> BusMessage {
        message(
            RepMessage(
                setId: "s1", repId: "s1-\(index)", index: index, meanVelocityMps: velocity, peakVelocityMps: velocity * 1.6,
                meanPropulsiveVelocityMps: velocity, romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 0, tEnd: 1, detector: "d",
                concentricStartT: 0, concentricEndT: 1))
    }

    @Test func aZoneBandHasItsLowBoundInAndItsHighBoundAbove() throws {
        let band = try #require(TargetBand(zone: "strength-speed", in: zones))
        #expect(band.lowMps == 0.5 && band.highMps == 0.75)
        #expect([0.49, 0.5, 0.74, 0.75].map(band.band(of:)) == ["below", "in", "in", "above"])
        #expect(TargetBand(zone: "max-speed", in: zones)?.band(of: 3) == "in", "the fastest zone has no ceiling")
        #expect(TargetBand(zone: "no-such-zone", in: zones) == nil)
        let plan = TargetBand(plan: 0.6)
        #expect([0.54, 0.6, 0.66].map(plan.band(of:)) == ["below", "in", "above"])
    }

    @Test func aDisplaysUpdateHoldsItsStationAloneWithoutCommandsOrGymCounters() {
        let live = LiveBoard(zones: zones)
        live.update { board, bus in
            board.apply(rep(1, 0.6), now: 1)
            var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
            let frames = try! stamper.encode(SetMessage(setId: "o1", event: .start), station: "rack-02", athlete: "ben", ts: 1_790_000_000)
            board.apply(try! decodeMessage(topic: frames.topic, body: frames.body), now: 1)
            board.apply(message(AckMessage(cmdId: "c1", command: "set.end", program: "rep-detector", state: .done, reason: nil)), now: 1)
            bus.connected = true
            bus.messages = 42
        }
        let update = live.update(since: 0, station: "rack-01")
        #expect(update.full && update.stations.map(\.station) == ["rack-01"])
        #expect(update.stations[0].acks.isEmpty && update.gymAlerts == nil)
        #expect(update.bus.connected && update.bus.messages == 0)
        #expect(live.update(since: 0).stations.map(\.station) == ["rack-01", "rack-02"], "a coach's update has every station")
        #expect(live.update(since: update.version, station: "rack-01").stations.isEmpty)
    }

    @Test func eachRepIsHeldAgainstTheAssignedZoneThenThePlansTarget() {
        var board = ConsoleBoard()
        board.zones = zones
        board.apply(rep(1, 0.62), now: 1)
        #expect(board.stations["rack-01"]?.reps.last?.band == nil, "no band without a target")
        let assign = AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100, targetZone: "strength-speed")
        board.apply(message(CommandMessage(id: "a", command: CommandName.athleteAssign, target: "*", args: assign.args)), now: 2)
        board.apply(rep(2, 0.62), now: 3)
        board.apply(rep(3, 0.45), now: 4)
        #expect(board.stations["rack-01"]?.reps.map(\.band) == [nil, "in", "below"])
        let workout = WorkoutMessage(
            event: "plan-assigned", state: .ready, plan: "p", exercise: "squat", loadKg: 100, set: 1, sets: 3, reps: 5, exerciseIndex: 1,
            exercises: 1, setsDone: 0, restS: 60, vlThresholdPct: 20, nextExercise: nil
        ).targeting(0.8)
        board.apply(message(workout), now: 5)
        board.apply(rep(4, 0.7), now: 6)
        #expect(board.stations["rack-01"]?.target?.source == "plan" && board.stations["rack-01"]?.reps.last?.band == "below")
    }
}
