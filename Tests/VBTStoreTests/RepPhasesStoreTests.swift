import Foundation
import GRDB
import Testing
import VBTWire

@testable import VBTStore

@Suite("Rep phases stored")
struct RepPhasesStoreTests {
    @Test("a rep's phases and tempo verdict are stored as sent; a rep without them stores NULLs")
    func stored() throws {
        let fixture = try StoreFixture()
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 2, t0: 1_763_812_345)
        var rep = try RepMessage(fields: messages[2].fields)
        (rep.eccentricS, rep.eccentricMeanMps, rep.pauseBottomS, rep.pauseTopS) = (2.96, 0.2, 1.01, 0.4)
        (rep.tempo, rep.tempoMet, rep.tempoMissed) = ("3-1-X-0", false, ["pause_top"])
        messages[2] = try producer.message(rep, ts: 1_763_812_351)
        try fixture.ingestor.ingest(messages)
        let rows = try fixture.store.read { db in
            try Row.fetchAll(
                db, sql: "SELECT eccentric_s, eccentric_mean_mps, pause_bottom_s, pause_top_s, tempo, tempo_met, tempo_missed FROM reps ORDER BY idx")
        }
        #expect(rows.count == 2)
        let first: (Double?, Bool?) = (rows[0]["eccentric_s"], rows[0]["tempo_met"])
        #expect(first.0 == nil && first.1 == nil)
        let durations: [Double] = ["eccentric_s", "eccentric_mean_mps", "pause_bottom_s", "pause_top_s"].map { rows[1][$0] }
        #expect(durations == [2.96, 0.2, 1.01, 0.4])
        let tempo: String = rows[1]["tempo"], met: Bool = rows[1]["tempo_met"], missed: String = rows[1]["tempo_missed"]
        #expect(tempo == "3-1-X-0" && !met && missed == "pause_top")
    }
}
