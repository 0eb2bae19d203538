import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTConsole

@Suite struct TempoBoardTests {
    @Test func aRepsPhasesAndTempoVerdictReachThePageAndARepWithoutThemAddsNothing() throws {
        var stamper = EnvelopeStamper(program: "test", instance: "test-0000abcd")
        func message(_ rep: RepMessage) throws -> BusMessage {
            let frames = try stamper.encode(rep, station: "rack-01", athlete: "ana", ts: 1_790_000_000)
            return try decodeMessage(topic: frames.topic, body: frames.body)
        }
        var rep = RepMessage(
            setId: "s1", repId: "s1-1", index: 1, meanVelocityMps: 0.6, peakVelocityMps: 0.9, meanPropulsiveVelocityMps: 0.65, romMm: 550,
            concentricS: 0.92, timeToPeakS: 0.4, velocityLossPct: 0, tEnd: 1_790_000_000, detector: "d", concentricStartT: nil, concentricEndT: nil)
        var board = ConsoleBoard()
        board.apply(try message(rep), now: 1)
        let plain = String(decoding: try JSONEncoder().encode(board.stations["rack-01"]!.reps), as: UTF8.self)
        #expect(!plain.contains("tempo") && !plain.contains("eccentric_s"), "\(plain)")
        rep.index = 2
        (rep.eccentricS, rep.pauseBottomS, rep.pauseTopS) = (3.1, 1.0, 0.2)
        (rep.tempo, rep.tempoMet, rep.tempoMissed) = ("3-1-X-0", true, [])
        board.apply(try message(rep), now: 2)
        let bar = board.stations["rack-01"]!.reps.last!
        #expect(bar.eccentricS == 3.1 && bar.pauseBottomS == 1.0 && bar.concentricS == 0.92 && bar.pauseTopS == 0.2)
        #expect(bar.tempo == "3-1-X-0" && bar.tempoMet == true && bar.tempoMissed == [])
        let json = String(decoding: try JSONEncoder().encode(bar), as: UTF8.self)
        #expect(json.contains(#""tempo_met":true"#) && json.contains(#""pause_bottom_s":1"#), "\(json)")
    }
}
