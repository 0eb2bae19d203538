import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus

@Suite("checkpoint files read an element at a time")
struct CheckpointReadingTests {
    struct Station: Codable, Equatable {
        var name: String
        var best: Double
        var points: [[Double]]
        var notes: [String: String]
    }

    /// Stations whose strings hold what the structure is made of: brackets, braces, commas,
    /// escaped quotes and backslashes, a `"state":[` of their own.
    static func stations(_ count: Int) -> [Station] {
        (0..<count).map { (index: Int) -> Station in
            let best: Double = index % 3 == 0 ? .infinity : (index % 3 == 1 ? -.infinity : Double(index) / 7)
            let points: [[Double]] = (0..<index % 5).map { (k: Int) -> [Double] in [Double(k), Double(k) * 0.5] }
            let notes: [String: String] = index % 2 == 0 ? [:] : ["state": #""state":[1,2]"#, "]": "}"]
            return Station(name: "rack-\(index) [\"x\"], {y}\\", best: best, points: points, notes: notes)
        }
    }

    static func checkpoint(_ state: [Station]) throws -> ConsumerCheckpoint<[Station]> {
        let bus = MemoryBus()
        let input = InOrderInput(transport: bus, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, wants: { _ in true })
        var checkpoint = ConsumerCheckpoint(
            publisher: try Publisher(transport: bus, program: "rep-detector"), input: input, inputs: ["a/sample.rack-1": 7], state: state)
        checkpoint.generation = 12
        return checkpoint
    }

    static func same(_ a: ConsumerCheckpoint<[Station]>?, _ b: ConsumerCheckpoint<[Station]>?) throws -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        guard let a, let b else { return false }
        return try encoder.encode(a) == encoder.encode(b)
    }

    @Test("a written checkpoint reads the same element by element as whole, its elements' strings whatever they hold")
    func writtenFiles() throws {
        let dir = try TemporaryDirectory()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        for count in [0, 1, 2, 40] {
            let checkpoint = try Self.checkpoint(Self.stations(count))
            try checkpoint.write(to: file)
            let whole = try ConsumerCheckpoint<[Station]>.load(file)
            let streamed = try ConsumerCheckpoint<[Station]>.loadElements(file)
            #expect(streamed?.state == Self.stations(count))
            #expect(try Self.same(streamed, whole))
            let head = try ConsumerCheckpoint<[Station]>.loadHead(file)
            #expect(head?.state == [] && head?.generation == 12 && head?.inputs == ["a/sample.rack-1": 7])
        }
        #expect(try ConsumerCheckpoint<[Station]>.loadElements(CheckpointFile(path: dir.path("none.json"))) == nil)
    }

    @Test("a file of another shape reads as whole: spacing, the state not last, an empty state with spaces")
    func otherShapes() throws {
        let dir = try TemporaryDirectory()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        let checkpoint = try Self.checkpoint(Self.stations(7))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        // Sorted, the state is the last key: `{` + the rest + `,"state":` + the state + `}`; moved to the front.
        let sorted = Array(try checkpoint.encoded())
        let key = try #require(sorted.firstRange(of: Array(#","state":"#.utf8)))
        let stateFirst =
            Array(#"{"state":"#.utf8) + sorted[key.upperBound..<(sorted.count - 1)] + [UInt8(ascii: ",")] + sorted[1..<key.lowerBound] + [UInt8(ascii: "}")]
        for bytes in [
            stateFirst,
            Array(try encoder.encode(checkpoint)),
            Array(try checkpoint.encoded()).replacing(Array(#""state":["#.utf8), with: Array(#""state" :  [ "#.utf8)),
            // The key written with an escape: where the state is cannot be told byte by byte, so
            // the file is read whole (not taken for a state-less one).
            Array(try checkpoint.encoded()).replacing(Array(#""state":["#.utf8), with: Array(#""st\u0061te":["#.utf8)),
        ] {
            try file.write(bytes)
            #expect(try Self.same(try ConsumerCheckpoint<[Station]>.loadElements(file), try ConsumerCheckpoint<[Station]>.load(file)))
        }
        let empty = Array(try Self.checkpoint([]).encoded()).replacing(Array(#""state":[]"#.utf8), with: Array(#""state":[ ]"#.utf8))
        try file.write(empty)
        #expect(try ConsumerCheckpoint<[Station]>.loadElements(file)?.state == [])
    }

    @Test("a cut or damaged file is refused as whole reading refuses it")
    func damaged() throws {
        let dir = try TemporaryDirectory()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        let bytes = Array(try Self.checkpoint(Self.stations(10)).encoded())
        for cut in [bytes.count / 2, bytes.count - 1] {
            try file.write(Array(bytes[..<cut]))
            #expect(throws: (any Error).self) { try ConsumerCheckpoint<[Station]>.load(file) }
            #expect(throws: (any Error).self) { try ConsumerCheckpoint<[Station]>.loadElements(file) }
        }
        // An element missing between commas, or after the last; the state given twice.
        let stateKey = try #require(bytes.firstRange(of: Array(#""state":["#.utf8)))
        let opened = stateKey.upperBound
        for damaged in [
            Array(bytes[..<opened]) + Array(",".utf8) + Array(bytes[opened...]),
            Array(bytes[..<(bytes.count - 2)]) + Array(",]}".utf8),
            Array(bytes[..<(bytes.count - 1)]) + Array(#","state":[]}"#.utf8),
        ] {
            try file.write(damaged)
            let whole = Result { try ConsumerCheckpoint<[Station]>.load(file) }
            let streamed = Result { try ConsumerCheckpoint<[Station]>.loadElements(file) }
            switch (whole, streamed) {
            case (.failure, .failure): break
            case (.success(let a), .success(let b)): #expect(try Self.same(a, b), "read as whole reads it")
            default: Issue.record("whole \(whole), element by element \(streamed)")
            }
        }
    }

    @Test("the writer loads the newer of its two files, either alone, and numbers after it")
    func writerPicksNewer() throws {
        let dir = try TemporaryDirectory()
        let writer = CheckpointWriter<Station>(file: CheckpointFile(path: dir.path("checkpoint.json")))
        var older = try Self.checkpoint(Self.stations(3))
        older.generation = 4
        var newer = try Self.checkpoint(Self.stations(5))
        newer.generation = 9
        try newer.write(to: writer.commandFile)
        #expect(try CheckpointWriter<Station>(file: writer.file).load()?.state == Self.stations(5), "the command file alone")
        try older.write(to: writer.file)
        let again = CheckpointWriter<Station>(file: writer.file)
        #expect(try again.load()?.generation == 9)
        #expect(again.submitNow(older) == 10)
        again.wait()
        #expect(try CheckpointWriter<Station>(file: writer.file).load()?.state == Self.stations(3), "the command file, newer again")
        try FileManager.default.removeItem(atPath: writer.commandFile.path)
        #expect(try CheckpointWriter<Station>(file: writer.file).load()?.generation == 4, "the regular file alone")
    }
}
