import Foundation
import Testing
import VBTWire

/// The rep's field table (`RepMessage.fields`): the decoder, the encoder and the recorder's
/// columns come from it, so it must name every field of proto/rep.schema.json once, in wire order.
@Suite("Rep field table")
struct RepFieldsTests {
    /// A rep with every field present (a field added to the table is set here too).
    static var full: RepMessage {
        var rep = RepMessage(
            setId: "rack-01-set-1", repId: "rack-01-1700000003210000", index: 3, meanVelocityMps: 0.61, peakVelocityMps: 1.02,
            meanPropulsiveVelocityMps: 0.66, romMm: 512.5, concentricS: 0.84, timeToPeakS: 0.31, velocityLossPct: 7.5,
            tEnd: 1_700_000_003.25, detector: "rep-detector-1", concentricStartT: 1_700_000_002.2, concentricEndT: 1_700_000_003.04,
            exercise: "squat", loadKg: 100, zone: "strength-speed", meanPowerW: 690.5, sensor: "distance")
        (rep.tInput, rep.receivedTs, rep.lateS, rep.peakPowerW) = (1_700_000_003.27, 1_700_000_003.29, 2.5, 1_402.7)
        (rep.eccentricS, rep.eccentricMeanMps, rep.pauseBottomS, rep.pauseTopS) = (1.9, 0.27, 0.4, 1.2)
        (rep.tempo, rep.tempoMet, rep.tempoMissed) = ("3-1-X-0", false, ["eccentric", "pause_top"])
        return rep
    }

    static func object(_ rep: RepMessage) throws -> JSONObject {
        var writer = JSONWriter()
        writer.beginObject()
        rep.write(to: &writer)
        writer.endObject()
        guard case .object(let object) = try JSONParser.parse(writer.bytes) else { throw PayloadError("not an object") }
        return object
    }

    @Test("the table names each field of proto/rep.schema.json once; the envelope's and the late marker are not its rows")
    func matchesSchema() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let schema = try JSONParser.parse(Array(Data(contentsOf: root.appendingPathComponent("proto/rep.schema.json"))))
        guard case .object(let top) = schema, case .object(let properties)? = top["properties"] else {
            Issue.record("proto/rep.schema.json has no properties")
            return
        }
        let keys = RepMessage.fields.map(\.key.description)
        #expect(Set(keys).count == keys.count, "a key twice: \(keys)")
        let schemaKeys = Set(properties.fields.map(\.key)).subtracting(["type", "late"])
        #expect(Set(keys) == schemaKeys, "only in the table: \(Set(keys).subtracting(schemaKeys)), only in the schema: \(schemaKeys.subtracting(keys))")
    }

    @Test("a rep with every field is written in the table's order (late just before late_s) and read back equal")
    func roundTrip() throws {
        let object = try Self.object(Self.full)
        var expected = RepMessage.fields.map(\.key.description)
        expected.insert("late", at: try #require(expected.firstIndex(of: "late_s")))
        #expect(object.fields.map(\.key) == expected)
        #expect(try RepMessage(fields: object) == Self.full)
        #expect(object["t_end"] == .number(1_700_000_003.25) && object["late"] == .bool(true))
    }

    @Test("a missing required field, and a field of the wrong kind, are refused naming it")
    func refusals() throws {
        let object = try Self.object(Self.full)
        for required in ["set_id", "rep_id", "index", "mean_velocity_mps", "velocity_loss_pct", "t_end", "detector"] {
            var missing = object
            missing[required] = nil
            #expect(throws: PayloadError.self) { try RepMessage(fields: missing) }
            #expect((try? RepMessage(fields: missing)) == nil)
            do { _ = try RepMessage(fields: missing) } catch { #expect(error.reason == "missing field \(required)") }
        }
        let wrong: [(String, JSONValue, String)] = [
            ("index", .number(1.5), "index must be an integer"), ("rom_mm", .string("x"), "rom_mm must be a number"),
            ("zone", .number(1), "zone must be a string"), ("tempo_met", .number(1), "tempo_met must be a boolean"),
            ("tempo_missed", .array([.number(1)]), "tempo_missed must hold strings"),
        ]
        for (key, value, reason) in wrong {
            var bad = object
            bad[key] = value
            do {
                _ = try RepMessage(fields: bad)
                Issue.record("\(key) = \(value) was read")
            } catch { #expect(error.reason == reason) }
        }
    }

    @Test("the rules across fields hold after the table: late with late_s, late_s not negative")
    func lateness() throws {
        var object = try Self.object(Self.full)
        object["late"] = nil
        do {
            _ = try RepMessage(fields: object)
            Issue.record("late_s without late was read")
        } catch { #expect(error.reason == "late and late_s come together") }
        object["late"] = .bool(true)
        object["late_s"] = .number(-1)
        do {
            _ = try RepMessage(fields: object)
            Issue.record("a negative late_s was read")
        } catch { #expect(error.reason == "late_s must not be negative") }
    }

    @Test("the stored columns: the key unless renamed; times of the phase and of the input are not stored")
    func columns() {
        let columns = RepMessage.fields.compactMap(\.column)
        #expect(columns.contains("id") && columns.contains("idx") && !columns.contains("rep_id") && !columns.contains("index"))
        #expect(!columns.contains("t_input") && !columns.contains("concentric_start_t"))
        let stored = Dictionary(uniqueKeysWithValues: RepMessage.fields.compactMap { field in field.column.map { ($0, field.stored(Self.full)) } })
        #expect(stored["tempo_missed"] == .text("eccentric,pause_top") && stored["tempo_met"] == .integer(0))
        #expect(stored["idx"] == .integer(3) && stored["late_s"] == .real(2.5))
    }
}
