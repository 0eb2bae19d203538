import Foundation
import Prometheus
import Testing
import VBTBus
import VBTPosture
import VBTQuery
import VBTWire

@testable import VBTConsole

private let t0 = 1_790_000_000.0

private func message<P: BusPayload>(_ payload: P, station: String = "rack-01", athlete: String? = nil) -> BusMessage {
    var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
    let frames = try! stamper.encode(payload, station: station, athlete: athlete, ts: t0)
    return try! decodeMessage(topic: frames.topic, body: frames.body)
}

private func rep(_ index: Int, _ velocity: Double, set: String = "s1", loss: Double = 0) -> BusMessage {
    message(
        RepMessage(
            setId: set, repId: "\(set)-\(index)", index: index, meanVelocityMps: velocity, peakVelocityMps: velocity * 1.6,
            meanPropulsiveVelocityMps: velocity * 1.1, romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: loss, tEnd: t0,
            detector: "d", concentricStartT: t0 - 1, concentricEndT: t0, exercise: "squat", loadKg: 100, zone: "strength-speed"), athlete: "ana")
}

@Suite struct ConsoleBoardTests {
    @Test func repsFillTheSetAndTheEndSumsItUp() {
        var board = ConsoleBoard()
        board.apply(message(SetMessage(setId: "s1", event: .start)), now: 1)
        board.apply(rep(1, 0.71), now: 2)
        board.apply(rep(2, 0.64, loss: 9.9), now: 3)
        board.apply(rep(3, 0.55, loss: 22.5), now: 4)
        var station = board.stations["rack-01"]!
        #expect(station.athlete == "ana" && station.exercise == "squat" && station.loadKg == 100)
        #expect(station.reps.map(\.index) == [1, 2, 3] && station.lastMeanVelocityMps == 0.55 && station.inSet)
        #expect(station.velocityLossPct == 22.5)
        board.apply(
            message(SetMessage(setId: "s1", event: .end, reps: 3, reason: .velocityLoss, bestMeanVelocityMps: 0.71, velocityLossPct: 22.5)),
            now: 5)
        station = board.stations["rack-01"]!
        #expect(!station.inSet)
        #expect(
            station.lastSet
                == LastSet(
                    setId: "s1", reps: 3, bestMeanVelocityMps: 0.71, lastMeanVelocityMps: 0.55, velocityLossPct: 22.5, reason: "velocity-loss"))
        #expect(station.reps.count == 3, "the ended set's reps stay shown until the next starts")
        board.apply(message(SetMessage(setId: "s2", event: .start)), now: 100)
        #expect(board.stations["rack-01"]!.reps.isEmpty && board.stations["rack-01"]!.velocityLossPct == 0)
    }

    @Test func onlyAssignmentsChangeWhoIsThereAndCommandsToUnknownSilentOrTakenStationsAreRefused() throws {
        var board = ConsoleBoard()
        func command(_ name: String, _ args: JSONObject = JSONObject(), station: String = "rack-01") -> ConsoleCommandRequest {
            ConsoleCommandRequest(id: "c", station: station, command: name, target: "*", args: args, athlete: nil, user: "coach")
        }
        let assignAna = AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100).args
        #expect(board.refusal(for: command(CommandName.setEnd))?.contains("no station rack-01 has been heard") == true)
        board.apply(message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-rack-01"), now: 1)
        board.apply(message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-rack-02"), now: 1)
        #expect(board.refusal(for: command(CommandName.setEnd)) == nil)
        #expect(board.refusal(for: command(CommandName.athleteUnassign)) == "nobody is at rack-01")
        board.apply(message(CommandMessage(id: "a", command: CommandName.athleteAssign, target: "*", args: assignAna)), now: 2)
        #expect(board.stations["rack-01"]?.athlete == "ana")
        // Ben's calibration at ana's station, and a timer naming someone else, change nobody.
        board.apply(message(CalibrationMessage(PostureCalibration.fit(athlete: "ben", acc: [], mag: [], at: t0)), athlete: "ben"), now: 3)
        #expect(board.stations["rack-01"]?.athlete == "ana" && board.stations["rack-01"]?.calibrations == 1)
        #expect(board.refusal(for: command(CommandName.athleteAssign, assignAna, station: "rack-02"))?.contains("ana is at rack-01") == true)
        board.apply(message(CommandMessage(id: "u", command: CommandName.athleteUnassign, target: "*", args: JSONObject())), now: 4)
        board.apply(
            message(SetMessage(setId: "s1", event: .end, reps: 3, reason: .command, bestMeanVelocityMps: 0.7, velocityLossPct: 5), athlete: "ana"), now: 4)
        #expect(board.stations["rack-01"]?.athlete == nil && board.stations["rack-01"]?.exercise == nil)
        #expect(board.refusal(for: command(CommandName.athleteAssign, assignAna, station: "rack-02")) == nil)
        board.tick(now: 10)
        #expect(board.refusal(for: command(CommandName.restSkip))?.contains("rack-01 is silent") == true)
        #expect(board.refusal(for: command(CommandName.athleteAssign, assignAna)) == nil, "an assignment waits for a silent station")
    }

    @Test func aRepOfAnUnseenSetStartsItAndARepeatedRepIsNotCountedTwice() {
        var board = ConsoleBoard()
        board.apply(rep(4, 0.5, set: "late"), now: 1)
        board.apply(rep(4, 0.5, set: "late"), now: 1.1)
        board.apply(rep(5, 0.48, set: "late"), now: 2)
        #expect(board.stations["rack-01"]!.reps.map(\.index) == [4, 5])
        #expect(board.stations["rack-01"]!.inSet)
    }

    @Test func onlyChangedStationsAreSentAgain() {
        var board = ConsoleBoard()
        board.apply(rep(1, 0.7), now: 1)
        board.apply(message(StatusMessage(state: .streaming, sensor: "imu", device: "sim", rateHz: 99.6), station: "bench-01"), now: 1)
        let seen = board.version
        #expect(board.changed(since: 0).map(\.station) == ["bench-01", "rack-01"])
        #expect(board.changed(since: seen).isEmpty)
        board.apply(rep(2, 0.66), now: 2)
        #expect(board.changed(since: seen).map(\.station) == ["rack-01"])
        // Posture readings that change nothing are not a change to draw.
        let posture = PostureMessage(
            correct: true, changed: false, accDensity: 1, magDensity: 1, accThreshold: 0.1, magThreshold: 0.1, badForS: 0,
            sustainedBad: false, t: t0)
        board.apply(message(posture), now: 3)
        let afterPosture = board.version
        board.apply(message(posture), now: 3.05)
        #expect(board.version == afterPosture)
    }

    @Test func aBridgeThatGoesQuietShowsAsSilentAndComesBack() {
        var board = ConsoleBoard()
        board.apply(message(StatusMessage(state: .streaming, sensor: "distance", device: "sim", rateHz: 50), station: "rack-01"), now: 10)
        board.apply(message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-rack-01"), now: 11)
        board.tick(now: 13.9)
        #expect(board.stations["rack-01"]!.silent == false)
        board.tick(now: 14.1)
        #expect(board.stations["rack-01"]!.silent, "3 s without a heartbeat")
        board.apply(message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 9, intervalS: 1), station: "bridge-rack-01"), now: 20)
        #expect(board.stations["rack-01"]!.silent == false)
        // Other programs' heartbeats are not stations.
        board.apply(message(HeartbeatMessage(role: "rep-detector", uptimeS: 9, intervalS: 1), station: "rep-detector"), now: 20)
        #expect(board.stations["rep-detector"] == nil)
    }

    @Test func aBridgeCutOffIsReconnectingUntilItsReadingsFlowAgainAndOneThatStopsIsSilent() throws {
        func beat(seq: Int, stopping: Bool = false, station: String = "rack-01") -> BusMessage {
            var heartbeat = HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1)
            let streams = ["sensor-bridge-1/sample.\(station)": seq, "sensor-bridge-1/status.\(station)": 3]
            heartbeat.replay = .init(endpoint: "tcp://10.0.0.2:5570", lastSeq: streams)
            if stopping { heartbeat.stopping = true }
            return message(heartbeat, station: "bridge-\(station)")
        }
        var board = ConsoleBoard()
        board.apply(beat(seq: 100), now: 10)
        board.apply(beat(seq: 150), now: 11)
        #expect(board.stations["rack-01"]!.reconnecting == false)
        // Cut off (no `stopping`): reconnecting, not merely silent.
        board.tick(now: 14.1)
        var station = board.stations["rack-01"]!
        #expect(station.silent && station.reconnecting)
        // Back: the first heartbeat shows where its journal got to; reconnecting until the next shows readings moving on.
        board.apply(beat(seq: 900), now: 40)
        station = board.stations["rack-01"]!
        #expect(!station.silent && station.reconnecting)
        // A rep from the journal's readings comes late, marked; it is no sign of live readings.
        var late = try rep(1, 0.7).payload(as: RepMessage.self)
        late.markLateness(publishedAt: late.tEnd + 200)
        board.apply(message(late, athlete: "ana"), now: 40.5)
        station = board.stations["rack-01"]!
        #expect(station.reconnecting && station.reps.map(\.lateS) == [200])
        board.apply(beat(seq: 900), now: 41)
        #expect(board.stations["rack-01"]!.reconnecting, "no new reading yet")
        board.apply(beat(seq: 950), now: 42)
        #expect(board.stations["rack-01"]!.reconnecting == false && board.stations["rack-01"]!.silent == false)
        // Stopped on purpose (`stopping: true` in its last heartbeat): silent, not reconnecting.
        board.apply(beat(seq: 960, stopping: true), now: 43)
        board.tick(now: 47)
        station = board.stations["rack-01"]!
        #expect(station.silent && !station.reconnecting)
        // Cut off again, then a live rep comes: readings flow, whatever the heartbeats say.
        board.apply(beat(seq: 970), now: 50)
        board.tick(now: 54)
        board.apply(beat(seq: 980), now: 60)
        #expect(board.stations["rack-01"]!.reconnecting)
        board.apply(rep(2, 0.68), now: 60.2)
        #expect(board.stations["rack-01"]!.reconnecting == false)
        // The browser reads both.
        let json = String(decoding: try JSONEncoder().encode(station), as: UTF8.self)
        #expect(json.contains(#""reconnecting":false"#) && json.contains(#""late_s":200"#), "\(json)")
    }

    @Test func alertsOpenAndCloseOnTheirStationOrTheGym() {
        var board = ConsoleBoard()
        board.apply(rep(1, 0.7), now: 1)
        var alert = AlertMessage(
            alertId: "rack-01/velocity-loss", kind: .velocityLoss, severity: .warning, state: .raised, message: "ana: velocity loss 24 %",
            since: t0, station: "rack-01", athlete: "ana")
        board.apply(message(alert), now: 2)
        #expect(board.stations["rack-01"]!.alerts["rack-01/velocity-loss"]?.message == "ana: velocity loss 24 %")
        alert.state = .cleared
        board.apply(message(alert), now: 3)
        #expect(board.stations["rack-01"]!.alerts.isEmpty)
        var missing = AlertMessage(
            alertId: "rep-detector/heartbeat-missing", kind: .heartbeatMissing, severity: .critical, state: .raised,
            message: "rep-detector is silent", since: t0, station: "rep-detector", athlete: nil)
        missing.program = "rep-detector"
        board.apply(message(missing, station: "rep-detector"), now: 4)
        #expect(board.gymAlerts.keys.sorted() == ["rep-detector/heartbeat-missing"] && board.stations["rep-detector"] == nil)
        #expect(board.gymAlertsVersion == board.version)
    }

    @Test func theRestAndThePlanComeFromTheNotifier() throws {
        var board = ConsoleBoard()
        board.apply(
            message(
                WorkoutMessage(
                    event: "rest-over", state: .ready, plan: "p", exercise: "bench", loadKg: 60, set: 2, sets: 4, reps: 8, exerciseIndex: 1,
                    exercises: 2, setsDone: 1, restS: 90, vlThresholdPct: 15, nextExercise: nil)), now: 1)
        board.apply(message(TimerMessage(timerId: "t", state: .running, durationS: 90, remainingS: 61.5)), now: 2)
        let station = board.stations["rack-01"]!
        #expect(station.set == 2 && station.sets == 4 && station.plannedReps == 8 && station.vlThresholdPct == 15)
        #expect(station.rest?.remainingS == 61.5 && station.rest?.state == "running")
        // A set's start ends the rest on the page at once.
        board.apply(message(SetMessage(setId: "s9", event: .start)), now: 3)
        #expect(board.stations["rack-01"]!.rest == nil)
    }

    @Test func malformedPayloadsAreCountedNotShown() throws {
        var board = ConsoleBoard()
        var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
        let frames = try stamper.encode(type: "rep", station: "rack-01", ts: t0) { $0.field("set_id", 3.0) }
        board.apply(try decodeMessage(topic: frames.topic, body: frames.body), now: 1)
        #expect(board.malformed == 1 && board.stations.isEmpty)
    }

    @Test func theBrowsersJSONUsesTheWireNames() throws {
        var board = ConsoleBoard()
        board.apply(rep(1, 0.71234), now: 1)
        let live = LiveBoard()
        live.update { state, _ in state = board }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(live.json(live.update(since: 0)))) as? [String: Any])
        let stations = try #require(json["stations"] as? [[String: Any]])
        #expect(json["type"] as? String == "board" && json["full"] as? Bool == true)
        #expect(stations.first?["station"] as? String == "rack-01" && stations.first?["load_kg"] as? Double == 100)
        let reps = try #require(stations.first?["reps"] as? [[String: Any]])
        #expect(reps.first?["mean_velocity_mps"] as? Double == 0.71234)
        #expect(stations.first?["bridgeSeenAt"] == nil, "the server's own clock is not sent")
    }
}

@Suite struct LiveBoardTests {
    @Test func watchersAreWokenOnChangeAndKeepOnlyTheNewest() async throws {
        let live = LiveBoard()
        let changes = live.changes()
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() == 0, "a new watcher is woken at once to draw everything")
        live.update { board, _ in board.apply(rep(1, 0.7), now: 1) }
        live.update { board, _ in board.apply(rep(2, 0.6), now: 2) }
        #expect(await iterator.next() == live.version, "two changes while it was busy: one wake, with the newest")
        live.update { _, _ in }  // nothing changed: nobody is woken
        live.update { _, bus in bus.connected = true }
        #expect(await iterator.next() == live.version)
        #expect(live.watcherCount == 1)
    }
}

@Suite struct AccountTests {
    @Test func addCheckAndRemoveAccounts() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("users").path
        try AccountsFile.add(path: path, name: "coach-ana", role: .coach, password: "a long passphrase")
        try AccountsFile.add(path: path, name: "tv", role: .viewer, password: "another one!")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains("passphrase"), "only hashes are stored")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let book = try AccountBook(path: path)
        #expect(book.check(name: "coach-ana", password: "a long passphrase", now: 0)?.role == .coach)
        #expect(book.check(name: "coach-ana", password: "a long passphrasE", now: 0) == nil)
        #expect(book.check(name: "nobody", password: "a long passphrase", now: 0) == nil)
        #expect(try AccountsFile.remove(path: path, name: "tv"))
        #expect(try !AccountsFile.remove(path: path, name: "tv"))
        #expect(book.account(named: "tv") == nil, "the running console sees the change")
    }

    @Test func repeatedFailuresLockTheNameForAMinute() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-accounts-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("users").path
        try AccountsFile.add(path: path, name: "coach", role: .coach, password: "right-password")
        let book = try AccountBook(path: path)
        for second in 0..<5 { #expect(book.check(name: "coach", password: "guess \(second)", now: Double(second)) == nil) }
        #expect(book.isLocked(name: "coach", now: 5))
        #expect(book.check(name: "coach", password: "right-password", now: 6) == nil, "locked: even the right password is refused")
        #expect(book.check(name: "coach", password: "right-password", now: 70)?.name == "coach", "the window has passed")
    }

    @Test func badNamesPasswordsAndFilesAreRefusedWithWhatToDo() {
        #expect(throws: AccountError.self) { try AccountsFile.validate(name: "Ana Smith") }
        #expect(throws: AccountError.self) { try AccountsFile.validate(name: "") }
        #expect(throws: AccountError.self) { try AccountsFile.add(path: "/nonexistent/users", name: "ana", role: .coach, password: "short") }
        #expect(throws: AccountError.self) { try AccountsFile.parse("ana:admin:$2b$10$x\n") }
        #expect(throws: AccountError.self) { try AccountsFile.parse("ana:coach:plaintext\n") }
        #expect((try? AccountsFile.parse("# comment\n\nana:viewer:$2b$10$abc\n"))?["ana"]?.role == .viewer)
    }
}

@Suite struct ConsoleCommandTests {
    @Test func commandsAreCheckedAsTheProgramsWillReadThem() throws {
        let good = try ConsoleCommandRequest.parse(
            body: Array(#"{"station":"rack-01","command":"athlete.assign","args":{"athlete":"ben","load_kg":80}}"#.utf8), user: "coach")
        #expect(good.station == "rack-01" && good.target == "*" && good.args["load_kg"] == .number(80) && good.id.hasPrefix("console-"))
        for bad in [
            #"{"station":"rack-01","command":"rm -rf"}"#, #"{"station":"rack 01","command":"set.end"}"#,
            #"{"station":"*","command":"set.end"}"#, #"{"station":"rack-01","command":"set.load","args":{"load_kg":-5}}"#,
            #"{"station":"rack-01","command":"rest.extend","args":{}}"#, #"["set.end"]"#, "not json",
        ] {
            #expect(throws: PayloadError.self, "\(bad)") { try ConsoleCommandRequest.parse(body: Array(bad.utf8), user: "coach") }
        }
    }

    @Test func theOutboxIsBounded() {
        let outbox = CommandOutbox()
        let command = ConsoleCommandRequest(id: "c", station: "rack-01", command: "set.end", target: "*", args: JSONObject(), athlete: nil, user: "u")
        for _ in 0..<outbox.capacity { #expect(outbox.submit(command)) }
        #expect(!outbox.submit(command))
        #expect(outbox.take().count == outbox.capacity && outbox.take().isEmpty)
    }
}

@Suite struct GymMetricsTests {
    private func heartbeat(_ name: String, uptime: Double, received: Int, gaps: Int = 0) -> BusMessage {
        var inputs = InputCounters()
        inputs.received = received
        inputs.gaps = gaps
        return message(HeartbeatMessage(role: name, uptimeS: uptime, intervalS: 1, inputs: inputs), station: name)
    }

    @Test func heartbeatCountersKeepGrowingAcrossARestart() {
        let registry = PrometheusCollectorRegistry()
        let metrics = GymMetrics(factory: PrometheusMetricsFactory(registry: registry))
        metrics.apply(heartbeat("rep-detector", uptime: 10, received: 100, gaps: 1), now: 1)
        metrics.apply(heartbeat("rep-detector", uptime: 11, received: 150, gaps: 1), now: 2)
        // Restarted: its counters start again; the exported counter adds them on top.
        metrics.apply(heartbeat("rep-detector", uptime: 0.5, received: 20), now: 3)
        metrics.apply(rep(1, 0.7), now: 3)
        metrics.apply(rep(2, 0.6), now: 3)
        metrics.apply(
            message(SetMessage(setId: "s1", event: .end, reps: 2, reason: .idle, bestMeanVelocityMps: 0.7, velocityLossPct: 14.3)), now: 4)
        var board = ConsoleBoard()
        board.apply(rep(1, 0.7), now: 3)
        metrics.refresh(board: board, browsers: 2, now: 3.5)
        let text = registry.emitToString()
        #expect(text.contains(#"vbt_program_received_total{program="rep-detector"} 170"#), "\(text)")
        #expect(text.contains(#"vbt_program_gaps_total{program="rep-detector"} 1"#))
        #expect(text.contains(#"vbt_program_up{program="rep-detector"} 1.0"#))
        #expect(text.contains(#"vbt_station_reps_total{station="rack-01"} 2"#))
        #expect(text.contains(#"vbt_station_sets_total{reason="idle",station="rack-01"} 1"#))
        #expect(text.contains("vbt_console_browsers 2.0"))
        // Silent for more than three heartbeat intervals: down.
        metrics.refresh(board: board, browsers: 0, now: 7)
        #expect(registry.emitToString().contains(#"vbt_program_up{program="rep-detector"} 0.0"#))
    }
}

@Suite struct LeaderboardTests {
    @Test func bestE1RMAndFastestAtEachLoadWithinThePeriod() {
        let day = 86_400.0, since = t0 - day
        func set(_ athlete: String, _ load: Double, _ velocity: Double, at ts: Double, exercise: String = "squat") -> VBTQuery.SetSummary {
            VBTQuery.SetSummary(
                id: "\(athlete)-\(load)-\(ts)", session: 1, station: "rack-01", athlete: athlete, exercise: exercise, loadKg: load, startedTs: ts - 30,
                endedTs: ts, reps: 5, reason: "idle", bestMeanVelocityMps: velocity)
        }
        let sets = [
            set("ana", 100, 0.61, at: t0), set("ana", 101, 0.66, at: t0 + 60),  // 101 kg is the 100 kg step (2.5 kg plates)
            set("ben", 100, 0.64, at: t0), set("ben", 140, 0.35, at: t0),
            set("cleo", 100, 0.90, at: since - 1),  // before the period
            set("ana", 60, 1.0, at: t0, exercise: "bench"),
        ]
        func report(_ athlete: String, _ estimates: [(Double, Double)]) -> ProgressReport {
            ProgressReport(
                athlete: athlete,
                exercises: [ExerciseProgress(exercise: "squat", bestByLoad: [], e1rm: estimates.map { .init(day: "d", ts: $0.0, e1rmKg: $0.1, r2: 0.99) })],
                bodyWeight: [])
        }
        let board = Leaderboard(
            sets: sets, progress: [report("ana", [(t0, 150), (t0 + 1, 147)]), report("ben", [(t0, 162)]), report("cleo", [(since - 5, 200)])],
            since: since)
        #expect(board.boards.map(\.exercise) == ["bench", "squat"])
        let squat = board.boards[1]
        #expect(squat.e1rm.map(\.athlete) == ["ben", "ana"] && squat.e1rm.map(\.e1rmKg) == [162, 150], "cleo's is too old; ana's best counts")
        #expect(squat.velocityAtLoad.map(\.loadKg) == [140, 100])
        #expect(squat.velocityAtLoad[1].entries.map(\.athlete) == ["ana", "ben"])
        #expect(squat.velocityAtLoad[1].entries.map(\.bestMeanVelocityMps) == [0.66, 0.64])
    }
}
