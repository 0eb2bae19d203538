import Foundation
import Testing
import VBTBus
import VBTConsole
import VBTPosture
import VBTWire

@testable import VBTNotify

// The notifier's logic on an injected clock: every `now` is given, nothing sleeps.

private let t0 = 1_763_812_345.0

/// Settings without the periodic workout snapshots, so each step's outputs are only its own.
private let noSnapshots: NotifierSettings = {
    var settings = NotifierSettings()
    settings.snapshotS = 1e9
    return settings
}()

/// A bus message as a consumer receives it, through the real envelope encoder and decoder.
private func busMessage<P: BusPayload>(_ payload: P, station: String = "rack-01", athlete: String? = nil) -> BusMessage {
    var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
    let frames = try! stamper.encode(payload, station: station, athlete: athlete, ts: t0)
    return try! decodeMessage(topic: frames.topic, body: frames.body)
}

private func command(_ name: String, _ args: [(key: String, value: JSONValue)] = [], target: String = "*") -> BusMessage {
    busMessage(CommandMessage(id: "c-\(name)", command: name, target: target, args: JSONObject(args)))
}

private let plan: [(key: String, value: JSONValue)] = [
    ("athlete", .string("ana")), ("plan", .string("ana-strength")),
    (
        "exercises",
        .array([
            .object(
                JSONObject([("exercise", .string("squat")), ("sets", .number(2)), ("reps", .number(5)), ("rest_s", .number(180)), ("load_kg", .number(100))])),
            .object(JSONObject([("exercise", .string("bench")), ("sets", .number(1)), ("reps", .number(8)), ("rest_s", .number(90))])),
        ])
    ),
]

private func setEnd(_ id: String, reason: SetMessage.Reason = .idle, loss: Double = 8) -> BusMessage {
    busMessage(SetMessage(setId: id, event: .end, reps: 5, reason: reason, bestMeanVelocityMps: 0.6, velocityLossPct: loss))
}

private func timers(_ outputs: [NotifierOutput]) -> [TimerMessage] {
    outputs.compactMap { if case .timer(_, _, let timer) = $0 { timer } else { nil } }
}

private func alerts(_ outputs: [NotifierOutput]) -> [AlertMessage] {
    outputs.compactMap { if case .alert(let alert) = $0 { alert } else { nil } }
}

private func workouts(_ outputs: [NotifierOutput]) -> [WorkoutMessage] {
    outputs.compactMap { if case .workout(_, _, let workout) = $0 { workout } else { nil } }
}

private func commands(_ outputs: [NotifierOutput]) -> [CommandMessage] {
    outputs.compactMap { if case .command(_, _, let command) = $0 { command } else { nil } }
}

@Suite struct RestTimerTests {
    @Test func remainingFollowsTheWallClockThroughPausesAndExtensions() {
        var timer = RestTimer(station: "rack-01", durationS: 120, now: t0)
        #expect(timer.remainingS(at: t0 + 30) == 90)
        timer.pause(at: t0 + 30)
        #expect(timer.remainingS(at: t0 + 100) == 90)
        #expect(!timer.isOver(at: t0 + 1000) && timer.endsAt == nil)
        timer.resume(at: t0 + 100)
        #expect(timer.remainingS(at: t0 + 110) == 80 && timer.endsAt == t0 + 190)
        timer.extend(by: 30, at: t0 + 110)
        #expect(timer.remainingS(at: t0 + 110) == 110)
        timer.extend(by: -500, at: t0 + 110)
        #expect(timer.remainingS(at: t0 + 110) == 0)
        #expect(timer.isOver(at: t0 + 110))
        #expect(timer.id == "rack-01-rest-\(Int64(t0 * 1000))")
    }

    @Test func aSavedTimerResumesWithTheRightRemainingTime() throws {
        var timer = RestTimer(station: "rack-01", durationS: 180, now: t0)
        timer.pause(at: t0 + 20)
        timer.resume(at: t0 + 50)
        let copy = try JSONDecoder().decode(RestTimer.self, from: JSONEncoder().encode(timer))
        #expect(copy == timer)
        #expect(copy.remainingS(at: t0 + 100) == 110)
    }
}

@Suite struct CommandAnswerTests {
    private func acks(_ outputs: [NotifierOutput]) -> [AckMessage] {
        outputs.compactMap { if case .ack(_, _, let ack) = $0 { ack } else { nil } }
    }

    @Test func anUnassignedStationLosesItsRestPlanAndAthleteAndSaysSo() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        var board = ConsoleBoard()
        func show(_ outputs: [NotifierOutput]) {
            for output in outputs {
                switch output {
                case .timer(let station, let athlete, let timer): board.apply(busMessage(timer, station: station, athlete: athlete), now: 1)
                case .workout(let station, let athlete, let workout): board.apply(busMessage(workout, station: station, athlete: athlete), now: 1)
                default: break
                }
            }
        }
        show(notifier.handle(command("plan.assign", plan), now: t0) + notifier.handle(setEnd("s1"), now: t0))
        #expect(timers(notifier.handle(command(CommandName.restPause), now: t0 + 1)).last?.state == .paused)
        let unassign = command(CommandName.athleteUnassign)
        board.apply(unassign, now: 2)
        let out = notifier.handle(unassign, now: t0 + 2)
        show(out)
        #expect(timers(out).map(\.state) == [.cancelled])
        #expect(workouts(out).map(\.event) == ["athlete-unassigned"] && workouts(out).first?.plan == nil)
        #expect(acks(out).map(\.state) == [.done])
        #expect(acks(notifier.handle(command(CommandName.restSkip), now: t0 + 3)).first?.reason == "no rest timer at rack-01")
        // The set that ended with the unassignment still names who left: the board keeps nobody there.
        board.apply(busMessage(SetMessage(setId: "s2", event: .end, reps: 2, reason: .command), athlete: "ana"), now: 3)
        #expect(board.stations["rack-01"]?.athlete == nil && board.stations["rack-01"]?.exercise == nil)
    }

    @Test func everyCommandItActsOnIsAnsweredDoneOrRefusedWithTheReason() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let refused = acks(notifier.handle(command(CommandName.restPause), now: t0))
        #expect(refused == [AckMessage(cmdId: "c-rest.pause", command: "rest.pause", program: "notifier", state: .refused, reason: "no rest timer at rack-01")])
        _ = notifier.handle(setEnd("s1"), now: t0)
        let done = acks(notifier.handle(command(CommandName.restPause), now: t0 + 1))
        #expect(done.map(\.state) == [.done] && done.first?.cmdId == "c-rest.pause")
        let badPlan = acks(notifier.handle(command(CommandName.planAssign, [("athlete", .string("ana"))]), now: t0 + 2))
        #expect(badPlan.first?.state == .refused && badPlan.first?.reason?.hasPrefix("plan.assign: ") == true)
        // Not the notifier's, or not for it: no answer.
        #expect(acks(notifier.handle(command(CommandName.setEnd), now: t0 + 3)).isEmpty)
        #expect(acks(notifier.handle(command(CommandName.restSkip, target: "rep-detector"), now: t0 + 3)).isEmpty)
    }
}

@Suite struct WorkoutFlowTests {
    @Test func aPlanRunsSetRestAndMovesToTheNextExercise() throws {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        var out = notifier.handle(command("plan.assign", plan), now: t0)
        #expect(workouts(out).map(\.event) == ["plan-assigned"])
        #expect(workouts(out)[0].exercise == "squat" && workouts(out)[0].set == 1 && workouts(out)[0].sets == 2 && workouts(out)[0].reps == 5)
        // The rep detector is told the first exercise.
        #expect(commands(out).count == 1)
        #expect(try commands(out)[0].args.string("exercise") == "squat")
        #expect(try commands(out)[0].args.number("load_kg") == 100)

        out = notifier.handle(setEnd("s1"), now: t0 + 10)
        #expect(timers(out).map(\.state) == [.running])
        #expect(timers(out)[0].durationS == 180 && timers(out)[0].remainingS == 180 && timers(out)[0].endsAt == t0 + 190)
        #expect(workouts(out).map(\.state) == [.resting])

        // Ticks every second with the remaining time.
        #expect(notifier.tick(now: t0 + 10.5).isEmpty)
        #expect(timers(notifier.tick(now: t0 + 11)).map(\.remainingS) == [179])
        #expect(timers(notifier.tick(now: t0 + 12)).map(\.remainingS) == [178])

        // Pause: the remaining time holds; ticks go on saying so.
        out = notifier.handle(command("rest.pause", target: "notifier"), now: t0 + 20)
        #expect(timers(out).map(\.state) == [.paused] && timers(out)[0].remainingS == 170)
        #expect(timers(notifier.tick(now: t0 + 50)).map(\.remainingS) == [170])
        out = notifier.handle(command("rest.resume", target: "notifier"), now: t0 + 60)
        #expect(timers(out).map(\.state) == [.running])
        #expect(timers(notifier.tick(now: t0 + 61)).map(\.remainingS) == [169])

        // Rest over: a notice, the next set of the same exercise.
        out = notifier.tick(now: t0 + 230)
        #expect(timers(out).map(\.state) == [.over])
        #expect(alerts(out).map(\.kind) == [.restOver] && alerts(out)[0].state == .notice)
        #expect(alerts(out)[0].message.contains("set 2 of 2"))
        #expect(workouts(out).map(\.event) == ["rest-over"] && workouts(out)[0].set == 2 && workouts(out)[0].state == .ready)
        #expect(commands(out).isEmpty)
        #expect(notifier.tick(now: t0 + 231).isEmpty)

        // Second set, rest, then the next exercise: the detector follows.
        _ = notifier.handle(setEnd("s2"), now: t0 + 300)
        out = notifier.tick(now: t0 + 480)
        #expect(workouts(out)[0].exercise == "bench" && workouts(out)[0].set == 1 && workouts(out)[0].sets == 1 && workouts(out)[0].reps == 8)
        #expect(workouts(out)[0].exerciseIndex == 2 && workouts(out)[0].exercises == 2)
        #expect(commands(out).count == 1)
        #expect(try commands(out)[0].args.string("exercise") == "bench")
        #expect(try commands(out)[0].args.optionalNumber("load_kg") == nil)
        #expect(alerts(out)[0].message.contains("bench"))

        // The plan's last set: done, no rest timer.
        out = notifier.handle(setEnd("s3"), now: t0 + 600)
        #expect(timers(out).isEmpty)
        #expect(workouts(out).map(\.event) == ["plan-done"] && workouts(out)[0].state == .done)
    }

    @Test func restComesFromThePlanElseTheExerciseElseTheDefault() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(setEnd("a"), now: t0)
        #expect(notifier.state.stations["rack-01"]?.timer?.durationS == 120)

        _ = notifier.handle(command("athlete.assign", [("athlete", .string("bo")), ("exercise", .string("deadlift")), ("rest_s", .number(150))]), now: t0 + 1)
        _ = notifier.handle(setEnd("b"), now: t0 + 2)
        #expect(notifier.state.stations["rack-01"]?.timer?.durationS == 150)

        _ = notifier.handle(command("plan.assign", plan), now: t0 + 3)
        _ = notifier.handle(setEnd("c"), now: t0 + 4)
        #expect(notifier.state.stations["rack-01"]?.timer?.durationS == 180)
    }

    @Test func skipAndExtend() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        _ = notifier.handle(setEnd("s1"), now: t0)
        var out = notifier.handle(command("rest.extend", [("seconds", .number(30))], target: "notifier"), now: t0 + 10)
        #expect(timers(out).map(\.remainingS) == [200] && timers(out)[0].durationS == 210)
        out = notifier.handle(command("rest.skip", target: "notifier"), now: t0 + 20)
        #expect(timers(out).map(\.state) == [.skipped])
        #expect(workouts(out).map(\.event) == ["rest-skipped"] && workouts(out)[0].set == 2)
        #expect(alerts(out).isEmpty, "a skipped rest needs no notification")
        // Nothing left to control.
        out = notifier.handle(command("rest.pause", target: "notifier"), now: t0 + 21)
        guard case .rejected(_, _, _, let reason)? = out.first else { Issue.record("expected a rejection"); return }
        #expect(reason.contains("no rest timer"))
        // Commands for another program are not ours.
        #expect(notifier.handle(command("rest.skip", target: "rep-detector"), now: t0 + 22).isEmpty)
    }

    @Test func perSetLoadsReachTheDetectorDuringEachRestAndTheTargetTravelsInTheWorkout() throws {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let perSet: [(key: String, value: JSONValue)] = [
            ("athlete", .string("ana")), ("plan", .string("ana-bench")),
            (
                "exercises",
                .array([
                    .object(
                        JSONObject([
                            ("exercise", .string("bench")), ("sets", .number(3)), ("reps", .number(5)), ("rest_s", .number(120)),
                            ("load_kg", .number(60)), ("loads_kg", .array([.number(60), .number(62.5), .number(62.5)])),
                            ("target_mean_velocity_mps", .number(0.6)),
                        ])),
                    .object(JSONObject([("exercise", .string("squat")), ("sets", .number(1)), ("reps", .number(5)), ("load_kg", .number(100))])),
                ])
            ),
        ]
        var out = notifier.handle(command("plan.assign", perSet), now: t0)
        #expect(workouts(out)[0].loadKg == 60 && workouts(out)[0].targetMeanVelocityMps == 0.6)
        #expect(try commands(out).map { try $0.args.number("load_kg") } == [60])

        // Set 1 ends: the detector learns set 2's load at once, during the rest.
        out = notifier.handle(setEnd("b1"), now: t0 + 10)
        #expect(commands(out).map(\.command) == [CommandName.setLoad])
        #expect(try SetLoad(args: commands(out)[0].args).loadKg == 62.5)
        out = notifier.tick(now: t0 + 130)
        #expect(workouts(out)[0].set == 2 && workouts(out)[0].loadKg == 62.5 && commands(out).isEmpty)
        #expect(alerts(out)[0].message.contains("at 62.5 kg"))

        // Set 2 ends: set 3 has the same load, nothing to say.
        out = notifier.handle(setEnd("b2"), now: t0 + 200)
        #expect(commands(out).isEmpty)

        // The set started before the rest was over still moves to set 3; then the next exercise has no target.
        out = notifier.handle(busMessage(SetMessage(setId: "b3", event: .start)), now: t0 + 230)
        #expect(workouts(out)[0].set == 3 && workouts(out)[0].loadKg == 62.5)
        _ = notifier.handle(setEnd("b3"), now: t0 + 260)
        out = notifier.tick(now: t0 + 400)
        #expect(workouts(out)[0].exercise == "squat" && workouts(out)[0].targetMeanVelocityMps == nil)
        #expect(try commands(out).map { try $0.args.number("load_kg") } == [100])

        // The workout message with its target goes through the wire's encoder and decoder unchanged.
        var message = workouts(notifier.handle(command("plan.assign", perSet), now: t0 + 500))[0]
        message.loadKg = 60
        let decoded = try busMessage(message).payload(as: WorkoutMessage.self)
        #expect(decoded == message && decoded.targetMeanVelocityMps == 0.6)
    }

    @Test func aSetStartedDuringTheRestEndsIt() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        _ = notifier.handle(setEnd("s1"), now: t0)
        let out = notifier.handle(busMessage(SetMessage(setId: "s2", event: .start)), now: t0 + 60)
        #expect(timers(out).map(\.state) == [.cancelled])
        #expect(workouts(out).map(\.event) == ["set-started"] && workouts(out)[0].set == 2)
        #expect(alerts(notifier.tick(now: t0 + 400)).isEmpty, "no rest left to run out")
    }

    @Test func snapshotsRepeatEveryStationsWorkoutForLateJoiners() {
        var notifier = Notifier(now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        #expect(notifier.tick(now: t0 + 4.9).isEmpty)
        let out = workouts(notifier.tick(now: t0 + 5))
        #expect(out.map(\.event) == ["snapshot"] && out[0].exercise == "squat")
        #expect(notifier.tick(now: t0 + 6).isEmpty)
    }

    @Test func aSetEndSeenTwiceCountsOnce() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(setEnd("s1"), now: t0)
        #expect(notifier.handle(setEnd("s1"), now: t0 + 1).isEmpty)
        #expect(notifier.state.stations["rack-01"]?.setsDone == 1)
    }

    @Test func aBadPlanIsRejectedWithTheReason() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let out = notifier.handle(command("plan.assign", [("athlete", .string("ana")), ("exercises", .array([]))]), now: t0)
        guard case .rejected(_, _, _, let reason)? = out.first else { Issue.record("expected a rejection"); return }
        #expect(reason.contains("exercises"))
        let negative = notifier.handle(
            command(
                "plan.assign",
                [
                    ("athlete", .string("ana")),
                    (
                        "exercises",
                        .array([
                            .object(JSONObject([("exercise", .string("squat")), ("sets", .number(0)), ("reps", .number(5))]))
                        ])
                    ),
                ]), now: t0)
        guard case .rejected(_, _, _, let why)? = negative.first else { Issue.record("expected a rejection"); return }
        #expect(why.contains("sets and reps"))
    }
}

@Suite struct AlertTests {
    private func rep(_ index: Int, loss: Double, set: String = "f1") -> BusMessage {
        busMessage(
            RepMessage(
                setId: set, repId: "r\(index)", index: index, meanVelocityMps: 0.6, peakVelocityMps: 0.9, meanPropulsiveVelocityMps: 0.65,
                romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: loss, tEnd: t0 + Double(index),
                detector: "d", concentricStartT: t0, concentricEndT: t0 + Double(index)), athlete: "ana")
    }

    @Test func aFatigueSetGivesExactlyOneVelocityLossAlert() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("athlete.assign", [("athlete", .string("ana")), ("vl_threshold_pct", .number(20))]), now: t0)
        var published: [AlertMessage] = []
        for (index, loss) in [0.0, 6, 12, 19.9, 21, 26].enumerated() {
            published += alerts(notifier.handle(rep(index + 1, loss: loss), now: t0 + Double(index)))
        }
        published += alerts(notifier.handle(setEnd("f1", reason: .velocityLoss, loss: 26), now: t0 + 10))
        #expect(published.count == 1)
        #expect(published.first?.kind == .velocityLoss && published.first?.state == .notice)
        #expect(published.first?.velocityLossPct == 21 && published.first?.thresholdPct == 20 && published.first?.athlete == "ana")
        #expect(published.first?.message.contains("stop the set") == true)
        // The next set has its own.
        #expect(alerts(notifier.handle(rep(1, loss: 30, set: "f2"), now: t0 + 200)).count == 1)
    }

    @Test func aLateRepIsNotAnnouncedAsLiveAndItsSetsRestStartsFromIt() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        // The set's reps reach the notifier 240 s after their readings (a journal fetch after an outage).
        func late(_ message: BusMessage) -> BusMessage {
            var rep = try! message.payload(as: RepMessage.self)
            rep.markLateness(publishedAt: rep.tEnd + 240)
            return busMessage(rep, athlete: "ana")
        }
        let now = t0 + 245
        var published = alerts(notifier.handle(late(rep(1, loss: 0, set: "s1")), now: now))
        published += alerts(notifier.handle(late(rep(2, loss: 25, set: "s1")), now: now))
        #expect(published.count == 1 && published[0].kind == .velocityLoss)
        #expect(published[0].message.contains("240 s ago") && !published[0].message.contains("stop the set"), "\(published[0].message)")
        #expect(published[0].since == now - 240)
        // The set ended during the outage: its 180 s rest is over already, not started again from now.
        let ended = notifier.handle(setEnd("s1"), now: now + 1)
        #expect(timers(ended).map(\.state) == [.running])
        #expect(timers(ended).first.map { $0.remainingS == 0 } == true, "\(timers(ended))")
        #expect(alerts(notifier.tick(now: now + 2)).map(\.kind) == [.restOver])
        // A live set's rest runs in full.
        _ = notifier.handle(rep(1, loss: 0, set: "s2"), now: now + 60)
        let live = notifier.handle(setEnd("s2"), now: now + 70)
        #expect(timers(live).first.map { $0.remainingS == $0.durationS && $0.durationS > 0 } == true, "\(timers(live))")
    }

    @Test func theAthletesThresholdCounts() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("athlete.assign", [("athlete", .string("ana")), ("vl_threshold_pct", .number(30))]), now: t0)
        #expect(alerts(notifier.handle(rep(1, loss: 25), now: t0)).isEmpty)
        #expect(alerts(notifier.handle(rep(2, loss: 31), now: t0)).count == 1)
    }

    private func posture(correct: Bool, badFor: Double, sustained: Bool, station: String = "rack-01") -> BusMessage {
        // The evaluator's own message type, read from the fields it publishes.
        let fields = JSONObject([
            ("correct", .bool(correct)), ("changed", .bool(false)), ("acc_density", .number(0.1)), ("mag_density", .number(0.1)),
            ("acc_threshold", .number(0.2)), ("mag_threshold", .number(0.2)), ("bad_for_s", .number(badFor)),
            ("sustained_bad", .bool(sustained)), ("t", .number(t0)),
        ])
        return busMessage(try! PostureMessage(fields: fields), station: station, athlete: "ana")
    }

    @Test func sustainedBadPostureRaisesRepeatsAtMostOncePerIntervalAndClears() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        #expect(alerts(notifier.handle(posture(correct: false, badFor: 2, sustained: false), now: t0)).isEmpty)
        var out = alerts(notifier.handle(posture(correct: false, badFor: 5.1, sustained: true), now: t0 + 3))
        #expect(out.map(\.state) == [.raised] && out[0].kind == .posture && out[0].severity == .warning && out[0].athlete == "ana")
        #expect(out[0].alertId == "rack-01/posture")
        var repeats: [AlertMessage] = []
        for step in 1...305 {  // 5 a second for a minute
            repeats += alerts(notifier.handle(posture(correct: false, badFor: 5.1 + Double(step) * 0.2, sustained: true), now: t0 + 3 + Double(step) * 0.2))
        }
        #expect(repeats.map(\.state) == [.repeat])
        #expect((299...300).contains(repeats.first?.suppressed ?? 0))
        out = alerts(notifier.handle(posture(correct: true, badFor: 0, sustained: false), now: t0 + 70))
        #expect(out.map(\.state) == [.cleared] && out[0].alertId == "rack-01/posture")
        #expect(alerts(notifier.handle(posture(correct: true, badFor: 0, sustained: false), now: t0 + 71)).isEmpty)
    }

    @Test func aPostureLimitOverridesTheEvaluatorsFlag() {
        var settings = NotifierSettings()
        settings.postureLimitS = 2
        var notifier = Notifier(settings: settings, now: t0)
        #expect(alerts(notifier.handle(posture(correct: false, badFor: 2.5, sustained: false), now: t0)).map(\.state) == [.raised])
    }

    @Test func sensorsDisconnectedAndSlowRaiseAndClear() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        func status(_ state: StatusMessage.State, rate: Double? = nil) -> BusMessage {
            busMessage(StatusMessage(state: state, sensor: "imu", device: "sim", rateHz: rate, reason: state == .disconnected ? "link lost; retrying" : nil))
        }
        #expect(alerts(notifier.handle(status(.streaming, rate: 100), now: t0)).isEmpty)
        #expect(alerts(notifier.handle(status(.streaming, rate: 60), now: t0 + 5)).isEmpty)
        var out = alerts(notifier.handle(status(.streaming, rate: 40), now: t0 + 10))
        #expect(out.map(\.kind) == [.sensorRate] && out[0].rateHz == 40 && out[0].expectedRateHz == 100)
        #expect(alerts(notifier.handle(status(.streaming, rate: 70), now: t0 + 15)).isEmpty, "hysteresis: cleared at 80 %")
        #expect(alerts(notifier.handle(status(.streaming, rate: 95), now: t0 + 20)).map(\.state) == [.cleared])
        out = alerts(notifier.handle(status(.disconnected), now: t0 + 25))
        #expect(out.map(\.kind) == [.sensorDisconnected] && out[0].severity == .critical && out[0].message.contains("link lost"))
        #expect(alerts(notifier.handle(status(.connecting), now: t0 + 26)).isEmpty)
        out = alerts(notifier.handle(status(.connected), now: t0 + 27))
        #expect(out.map(\.state) == [.cleared] && out[0].kind == .sensorDisconnected)
    }

    @Test func absurdNumbersFromTheBusAreWordedNeverTrap() {
        // 1e19 does not fit an Int: converting it would take the notifier down (and, saved in its
        // state, again at every restart). Every such value is formatted or refused instead.
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("athlete.assign", [("athlete", .string("ana")), ("load_kg", .number(1e19)), ("vl_threshold_pct", .number(20))]), now: t0)
        let loss = alerts(notifier.handle(rep(1, loss: 1e19), now: t0))
        #expect(loss.count == 1 && loss[0].message.contains("%"))
        let bad = alerts(notifier.handle(posture(correct: false, badFor: 1e19, sustained: true), now: t0 + 1))
        #expect(bad.map(\.state) == [.raised] && bad[0].message.contains("bad posture for"))
        let status = { (rate: Double) in busMessage(StatusMessage(state: .streaming, sensor: "imu", device: "sim", rateHz: rate)) }
        _ = notifier.handle(status(1e19), now: t0 + 2)
        _ = notifier.handle(status(100), now: t0 + 3)
        #expect(alerts(notifier.handle(status(10), now: t0 + 4)).first?.expectedRateHz == 100, "an absurd rate is not taken as the best")
        #expect(whole(1e19) == "10000000000000000000" && whole(.nan) == "?" && kg(.infinity) == "? kg")
    }

    @Test func aMissingHeartbeatRaisesAndItsReturnClears() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let beat = busMessage(HeartbeatMessage(role: "rep-detector", uptimeS: 1, intervalS: 1), station: "rep-detector")
        let bridge = busMessage(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-rack-02")
        _ = notifier.handle(beat, now: t0)
        _ = notifier.handle(bridge, now: t0)
        #expect(alerts(notifier.tick(now: t0 + 2.9)).isEmpty)
        _ = notifier.handle(bridge, now: t0 + 2.9)
        let out = alerts(notifier.tick(now: t0 + 3.1))
        #expect(out.map(\.alertId) == ["rep-detector/heartbeat-missing"] && out[0].severity == .critical && out[0].station == "rep-detector")
        #expect(alerts(notifier.tick(now: t0 + 4)).isEmpty, "rate limited")
        let late = alerts(notifier.tick(now: t0 + 6.5))
        #expect(late.map(\.alertId) == ["bridge-rack-02/heartbeat-missing"] && late[0].station == "rack-02" && late[0].program == "bridge-rack-02")
        #expect(alerts(notifier.handle(beat, now: t0 + 7)).map(\.state) == [.cleared])
        // The bus's own heartbeat is the subscriber's business.
        _ = notifier.handle(busMessage(HeartbeatMessage(role: "vbt-bus", uptimeS: 1, intervalS: 1), station: "bus"), now: t0)
        #expect(notifier.state.heartbeats["bus"] == nil)
    }

    @Test func aProgramThatSaysItStopsIsNotRaisedMissingAndIsWatchedAgainWhenBack() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let beat = busMessage(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-replay")
        var last = HeartbeatMessage(role: "sensor-bridge", uptimeS: 2, intervalS: 1)
        last.stopping = true
        let parting = busMessage(last, station: "bridge-replay")
        _ = notifier.handle(beat, now: t0)
        _ = notifier.handle(parting, now: t0 + 1)
        #expect(notifier.state.heartbeats["bridge-replay"] == nil)
        #expect(alerts(notifier.tick(now: t0 + 3_600)).isEmpty, "a replay that has ended is gone, not silent")
        // Back: watched again, and raised when it goes silent without saying so.
        _ = notifier.handle(beat, now: t0 + 3_601)
        #expect(alerts(notifier.tick(now: t0 + 3_605)).map(\.alertId) == ["bridge-replay/heartbeat-missing"])
        // Its stopping after it was raised clears the alert.
        #expect(alerts(notifier.handle(parting, now: t0 + 3_606)).map(\.state) == [.cleared])
        #expect(alerts(notifier.tick(now: t0 + 7_200)).isEmpty)
    }

    @Test func messagesLostForGoodAreACriticalNoticeAtEachIncrease() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        func recorder(lost: Int?) -> BusMessage {
            var inputs = InputCounters()
            inputs.lost = lost
            return busMessage(HeartbeatMessage(role: "session-recorder", uptimeS: 1, intervalS: 1, inputs: inputs), station: "session-recorder")
        }
        #expect(alerts(notifier.handle(recorder(lost: nil), now: t0)).isEmpty)
        #expect(alerts(notifier.handle(recorder(lost: 0), now: t0 + 1)).isEmpty)
        let first = alerts(notifier.handle(recorder(lost: 12), now: t0 + 2))
        #expect(first.map(\.kind) == [.dataLost] && first[0].severity == .critical && first[0].state == .notice)
        #expect(first[0].message.contains("12 messages lost"))
        #expect(alerts(notifier.handle(recorder(lost: 12), now: t0 + 3)).isEmpty, "the same loss is said once")
        #expect(alerts(notifier.handle(recorder(lost: 15), now: t0 + 4)).map(\.kind) == [.dataLost])
    }
}

@Suite struct RestartTests {
    @Test func timersPlansAndOpenAlertsSurviveARestart() throws {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        _ = notifier.handle(setEnd("s1"), now: t0 + 10)
        _ = notifier.handle(command("rest.pause", target: "notifier"), now: t0 + 40)
        _ = notifier.handle(command("rest.resume", target: "notifier"), now: t0 + 50)
        _ = notifier.handle(busMessage(StatusMessage(state: .disconnected, sensor: "distance", device: "/dev/ttyACM0")), now: t0 + 55)
        #expect(notifier.needsSave)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-notify-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("notifier.json").path
        try notifier.state.save(path: path)
        let restored = try NotifierState.load(path: path)
        #expect(restored == notifier.state)

        // Down for 60 s: the rest went on meanwhile (180 - 30 before the pause - 10 after - 60).
        var again = Notifier(state: restored, now: t0 + 120)
        let out = again.tick(now: t0 + 120)
        #expect(timers(out).map(\.remainingS) == [80])
        #expect(
            alerts(again.handle(busMessage(StatusMessage(state: .streaming, sensor: "distance", device: "/dev/ttyACM0", rateHz: 50)), now: t0 + 121))
                .map(\.state) == [.cleared])
        // A rest that ran out while the notifier was down ends at once, with its notification.
        let late = Notifier(state: restored, now: t0 + 1000)
        var lateCopy = late
        let over = lateCopy.tick(now: t0 + 1000)
        #expect(timers(over).map(\.state) == [.over])
        #expect(alerts(over).map(\.kind) == [.restOver])
    }

    @Test func aStateFileFromAnEarlierNotifierKeepsItsPlans() throws {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        _ = notifier.handle(command("plan.assign", plan), now: t0)
        _ = notifier.handle(setEnd("s1"), now: t0 + 10)
        // The plan as notifiers before the wire's Plan type saved it.
        var json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(notifier.state)) as? [String: Any])
        var stations = try #require(json["stations"] as? [String: Any])
        var station = try #require(stations["rack-01"] as? [String: Any])
        station["plan"] = [
            "name": "ana-strength", "athlete": "ana",
            "exercises": [
                ["exercise": "squat", "sets": 2, "reps": 5, "restS": 180, "loadKg": 100], ["exercise": "bench", "sets": 1, "reps": 8, "restS": 90],
            ],
        ]
        stations["rack-01"] = station
        json["stations"] = stations
        let earlier = try JSONDecoder().decode(NotifierState.self, from: JSONSerialization.data(withJSONObject: json))
        #expect(earlier == notifier.state)
    }

    @Test func anAbsentStateFileIsAnEmptyState() throws {
        #expect(try NotifierState.load(path: "/nonexistent/notifier.json") == NotifierState())
    }
}

/// The notifier's messages on the console's board as `vbt watch` draws it (`ConsoleBoard.textScreen`).
@Suite struct WatchScreenTests {
    @Test func theBoardShowsStationsTimersAndAlerts() {
        var board = ConsoleBoard()
        var notifier = Notifier(settings: noSnapshots, now: t0)
        for output in notifier.handle(command("plan.assign", plan), now: t0) + notifier.handle(setEnd("s1"), now: t0) {
            switch output {
            case .timer(let station, let athlete, let timer): board.apply(busMessage(timer, station: station, athlete: athlete), now: 100)
            case .workout(let station, let athlete, let workout): board.apply(busMessage(workout, station: station, athlete: athlete), now: 100)
            default: break
            }
        }
        board.apply(
            busMessage(
                RepMessage(
                    setId: "s1", repId: "r", index: 1, meanVelocityMps: 0.634, peakVelocityMps: 1, meanPropulsiveVelocityMps: 0.7,
                    romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 12.4, tEnd: t0, detector: "d",
                    concentricStartT: t0, concentricEndT: t0), athlete: "ana"), now: 100)
        var alert = AlertMessage(
            alertId: "rack-02/posture", kind: .posture, severity: .warning, state: .raised,
            message: "bo at rack-02: bad posture for 6 s; straighten up and brace", since: t0, station: "rack-02", athlete: "bo")
        board.apply(busMessage(alert, station: "rack-02", athlete: "bo"), now: 100)
        var screen = board.textScreen(now: 110.2, width: 100, height: 30, clock: "12:00:00").joined(separator: "\n")
        #expect(screen.contains("rack-01   ana      squat 100kg     1/2   0.63    12"))
        #expect(screen.contains("2:50"), "180 s rest, 10 s later")
        #expect(screen.contains("WARN bo at rack-02: bad posture"))
        alert.state = .cleared
        alert.message = "bo at rack-02: posture correct again"
        board.apply(busMessage(alert, station: "rack-02", athlete: "bo"), now: 120)
        screen = board.textScreen(now: 121, width: 60, height: 30, clock: "12:00:01").joined(separator: "\n")
        #expect(screen.contains("none open"))
        #expect(screen.contains("ok   1s ago: bo at rack-02: posture correct again"))
        #expect(screen.split(separator: "\n").allSatisfy { $0.count <= 60 })
    }
}

@Suite struct TimerQueueTests {
    @Test(
        "a thousand resting stations: each rest runs out at the first tick at or after its end, paused, extended or not, ticks once a second, and a tick with nothing due says nothing"
    )
    func thousandStations() {
        var notifier = Notifier(settings: noSnapshots, now: t0)
        let stations = (0..<1_000).map { "rack-\($0)" }
        var ends: [String: Double] = [:]
        func send(_ station: String, _ name: String, _ args: [(key: String, value: JSONValue)] = [], at now: Double) {
            _ = notifier.handle(busMessage(CommandMessage(id: "\(station)-\(name)", command: name, args: JSONObject(args)), station: station), now: now)
        }
        for (k, station) in stations.enumerated() {
            let start = t0 + Double(k) * 0.013
            let end = busMessage(
                SetMessage(setId: "\(station)-s1", event: .end, reps: 5, reason: .idle, bestMeanVelocityMps: 0.6, velocityLossPct: 8), station: station)
            #expect(timers(notifier.handle(end, now: start)).first?.state == .running)
            ends[station] = start + noSnapshots.defaultRestS
        }
        // The first hundred paused 5 s; the next hundred 30 s longer, the next hundred 60 s shorter; fifty skipped.
        for station in stations[0..<100] {
            send(station, CommandName.restPause, at: t0 + 20)
            send(station, CommandName.restResume, at: t0 + 25)
            ends[station]! += 5
        }
        for station in stations[100..<200] { send(station, CommandName.restExtend, [("seconds", .number(30))], at: t0 + 30) }
        for station in stations[100..<200] { ends[station]! += 30 }
        for station in stations[200..<300] { send(station, CommandName.restExtend, [("seconds", .number(-60))], at: t0 + 30) }
        for station in stations[200..<300] { ends[station]! -= 60 }
        for station in stations[300..<350] {
            send(station, CommandName.restSkip, at: t0 + 40)
            ends[station] = nil
        }
        var over: [String: Double] = [:]
        var running: [String: Int] = [:]
        let step = 0.05
        for i in 1...4_000 {
            let now = t0 + Double(i) * step
            for case .timer(let station, _, let timer) in notifier.tick(now: now) {
                if timer.state == .over {
                    #expect(over[station] == nil, "\(station) ran out twice")
                    over[station] = now
                } else if timer.state == .running {
                    running[station, default: 0] += 1
                }
            }
        }
        #expect(Set(over.keys) == Set(ends.keys), "every rest not skipped ran out, and only those")
        for (station, end) in ends {
            let at = over[station] ?? .infinity
            #expect(at >= end - 1e-6 && at < end + step + 1e-6, "\(station) ran out at \(at - t0) s, due at \(end - t0) s")
        }
        // A tick message a second while running: about as many as the seconds run (the paused ones said `paused` meanwhile).
        for station in stations[400..<410] { #expect(abs(running[station, default: 0] - Int(noSnapshots.defaultRestS)) <= 1, "\(station)") }
        #expect(notifier.tick(now: t0 + 1_000).isEmpty, "nothing due, nothing said")
    }
}
