import Foundation
import GRDB
import Testing
import VBTWire

@testable import VBTStore

/// The recorder's rep row comes from the rep's field table (`RepMessage.fields`): the migrations
/// and the table must agree, column for column.
@Suite("Rep columns")
struct RepColumnsStoreTests {
    static let envelopeColumns: Set = ["station", "athlete", "src", "seq", "ts"]

    @Test("every column of reps is the envelope's or a row of the table, and every stored row has its column")
    func columnsAgree() throws {
        let fixture = try StoreFixture()
        let columns = try fixture.store.read { db in try db.columns(in: "reps").map(\.name) }
        let fromTable = RepMessage.fields.compactMap(\.column)
        #expect(Set(columns) == Self.envelopeColumns.union(fromTable), "reps: \(columns), table: \(fromTable)")
        #expect(Ingestor.repColumns.count == fromTable.count)
    }

    @Test("a rep with every field is stored as the table says, column by column; a repeat adds nothing")
    func storedAsTheTableSays() throws {
        let fixture = try StoreFixture()
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 1, t0: 1_763_812_345)
        var rep = try RepMessage(fields: messages[1].fields)
        (rep.eccentricS, rep.eccentricMeanMps, rep.pauseBottomS, rep.pauseTopS) = (2.1, 0.28, 0.5, 0.9)
        (rep.tempo, rep.tempoMet, rep.tempoMissed) = ("3-1-X-0", true, [])
        rep.lateS = 4.25
        messages[1] = try producer.message(rep, ts: 1_763_812_352)
        try fixture.ingestor.ingest(messages)
        try fixture.ingestor.ingest([messages[1]])
        let rows = try fixture.store.read { db in try Row.fetchAll(db, sql: "SELECT * FROM reps") }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        for field in RepMessage.fields {
            guard let column = field.column else { continue }
            let value: DatabaseValue = row[column]
            #expect(value == field.stored(rep).databaseValue, "\(column): \(value)")
        }
        let station: String = row["station"], src: String = row["src"], ts: Double = row["ts"]
        #expect(station == "rack-01" && src == messages[1].envelope.src && ts == 1_763_812_352)
    }

    @Test("a rep's peak power is stored; a rep without one stores NULL")
    func peakPower() throws {
        let fixture = try StoreFixture()
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 2, t0: 1_763_812_345)
        var rep = try RepMessage(fields: messages[2].fields)
        rep.peakPowerW = 1_312.4
        messages[2] = try producer.message(rep, ts: 1_763_812_351)
        try fixture.ingestor.ingest(messages)
        let stored = try fixture.store.read { db in try Double?.fetchAll(db, sql: "SELECT peak_power_w FROM reps ORDER BY idx") }
        #expect(stored == [nil, 1_312.4])
    }
}
