import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTConsole

private let t0 = 1_790_000_000.0

private func message<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil) -> BusMessage {
    var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
    let frames = try! stamper.encode(payload, station: station, athlete: athlete, ts: t0)
    return try! decodeMessage(topic: frames.topic, body: frames.body)
}

private func rep(_ index: Int, _ velocity: Double, set: String, station: String, athlete: String) -> BusMessage {
    message(
        RepMessage(
            setId: set, repId: "\(set)-\(index)", index: index, meanVelocityMps: velocity, peakVelocityMps: velocity * 1.6,
            meanPropulsiveVelocityMps: velocity * 1.1, romMm: 500, concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 0, tEnd: t0,
            detector: "d", concentricStartT: t0 - 1, concentricEndT: t0, exercise: "squat", loadKg: 100, zone: "strength-speed"),
        station: station, athlete: athlete)
}

private func assign(_ athlete: String, station: String) -> BusMessage {
    message(CommandMessage(id: "a-\(athlete)", command: CommandName.athleteAssign, target: "*", args: AthleteAssign(athlete: athlete).args), station: station)
}

/// What an athlete's WebSocket is sent: her stations alone, and a full update when they change.
@Suite struct AthleteLiveTests {
    @Test func anAthleteIsSentHerStationsAloneAndAFullUpdateWhenSheLeaves() {
        let live = LiveBoard()
        live.update { board, _ in
            board.apply(message(SetMessage(setId: "a1", event: .start), station: "rack-01", athlete: "ana"), now: 1)
            board.apply(rep(1, 0.71, set: "a1", station: "rack-01", athlete: "ana"), now: 2)
            board.apply(message(SetMessage(setId: "b1", event: .start), station: "rack-02", athlete: "ben"), now: 2)
            board.apply(rep(1, 1.23, set: "b1", station: "rack-02", athlete: "ben"), now: 3)
        }
        var first = live.update(since: 0, athlete: "ana", shown: nil)
        #expect(first.full && first.stations.map(\.station) == ["rack-01"] && first.stations[0].reps.map(\.meanVelocityMps) == [0.71])
        #expect(first.gymAlerts == nil && first.bus.messages == 0)
        // Ben's rep changes the board, not what Ana is sent.
        live.update { board, _ in board.apply(rep(2, 1.19, set: "b1", station: "rack-02", athlete: "ben"), now: 4) }
        let quiet = live.update(since: first.version, athlete: "ana", shown: ["rack-01"])
        #expect(!quiet.full && quiet.stations.isEmpty)
        live.update { board, _ in board.apply(rep(2, 0.66, set: "a1", station: "rack-01", athlete: "ana"), now: 5) }
        first = live.update(since: quiet.version, athlete: "ana", shown: ["rack-01"])
        #expect(!first.full && first.stations.map(\.station) == ["rack-01"] && first.stations[0].reps.count == 2)
        // Ben is assigned rack-01: she is at no station, and is told so by a full, empty update.
        live.update { board, _ in board.apply(assign("ben", station: "rack-01"), now: 6) }
        let left = live.update(since: first.version, athlete: "ana", shown: ["rack-01"])
        #expect(left.full && left.stations.isEmpty)
        #expect(live.update(since: left.version, athlete: "ana", shown: []).stations.isEmpty)
        // Ben's account would see both stations; hers, after she is assigned rack-02, that one only.
        #expect(live.update(since: 0, athlete: "ben", shown: nil).stations.map(\.station) == ["rack-01", "rack-02"])
        live.update { board, _ in board.apply(assign("ana", station: "rack-02"), now: 7) }
        let came = live.update(since: left.version, athlete: "ana", shown: [])
        #expect(came.full && came.stations.map(\.station) == ["rack-02"])
        // What Ben did there before she came is not hers: his set's reps and velocity loss are left out.
        #expect(came.stations[0].reps.isEmpty && came.stations[0].setId == nil && came.stations[0].velocityLossPct == nil)
        #expect(live.snapshot.stations["rack-02"]!.reps.count == 2, "the coaches' board keeps them")
    }

    @Test func whatCameWhileAnotherAthleteWasThereIsLeftOutOfHerView() {
        var board = ConsoleBoard()
        board.apply(message(SetMessage(setId: "b1", event: .start), station: "rack-01", athlete: "ben"), now: 1)
        board.apply(rep(1, 1.23, set: "b1", station: "rack-01", athlete: "ben"), now: 2)
        board.apply(
            message(
                SetMessage(setId: "b1", event: .end, reps: 1, reason: .idle, bestMeanVelocityMps: 1, velocityLossPct: 0), station: "rack-01", athlete: "ben"),
            now: 3)
        board.apply(
            message(
                RejectedMessage(
                    reason: "too-short", detail: "rom 80 mm", romMm: 80, concentricS: 0.2, meanVelocityMps: 0.2, tEnd: t0, detector: "d", sensor: nil),
                station: "rack-01", athlete: "ben"),
            now: 3)
        board.apply(
            message(TimerMessage(timerId: "t", state: .running, durationS: 120, remainingS: 100), station: "rack-01", athlete: "ben"), now: 4)
        board.apply(assign("ana", station: "rack-01"), now: 5)
        var view = board.stations["rack-01"]!.seen(by: "ana")
        #expect(view.athlete == "ana" && view.reps.isEmpty && view.lastSet == nil && view.rejected.isEmpty && view.rest == nil)
        #expect(board.stations["rack-01"]!.lastSet != nil && board.stations["rack-01"]!.rejected.count == 1, "the coaches' board keeps them")
        // Her own set, rest and attempt are hers.
        board.apply(message(SetMessage(setId: "a1", event: .start), station: "rack-01", athlete: "ana"), now: 6)
        board.apply(rep(1, 0.7, set: "a1", station: "rack-01", athlete: "ana"), now: 7)
        board.apply(
            message(
                SetMessage(setId: "a1", event: .end, reps: 1, reason: .idle, bestMeanVelocityMps: 1, velocityLossPct: 0), station: "rack-01", athlete: "ana"),
            now: 8)
        board.apply(
            message(
                RejectedMessage(
                    reason: "too-short", detail: "rom 90 mm", romMm: 90, concentricS: 0.2, meanVelocityMps: 0.3, tEnd: t0, detector: "d", sensor: nil),
                station: "rack-01", athlete: "ana"),
            now: 8)
        board.apply(
            message(TimerMessage(timerId: "t", state: .running, durationS: 120, remainingS: 119), station: "rack-01", athlete: "ana"), now: 9)
        view = board.stations["rack-01"]!.seen(by: "ana")
        #expect(view.reps.map(\.meanVelocityMps) == [0.7] && view.lastSet?.setId == "a1" && view.rest?.remainingS == 119)
        #expect(view.rejected.map(\.detail) == ["rom 90 mm"] && view.acks.isEmpty && view.alerts.isEmpty)
    }
}
