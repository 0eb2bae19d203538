import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus

@Suite("checkpoint files")
struct CheckpointTests {
    struct Station: Codable, Equatable {
        var name: String
        var best: Double
        var points: [Double]
    }

    @Test("a checkpoint written an element at a time is byte for byte the one encoded whole, and reads back")
    func streamedEqualsWhole() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let publisher = try Publisher(transport: bus, program: "rep-detector")
        let input = InOrderInput(transport: bus, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, wants: { _ in true })
        // Infinities (written as strings), a slash and quotes (escaped), an empty element list too.
        let stations = (1...40).map { Station(name: "rack-\($0)/\"x\"", best: $0 % 2 == 0 ? .infinity : Double($0), points: (0..<$0).map(Double.init)) }
        for state in [stations, []] {
            let checkpoint = ConsumerCheckpoint(publisher: publisher, input: input, inputs: ["a/sample.rack-1": 7], state: state)
            let file = CheckpointFile(path: dir.path("checkpoint.json"))
            try checkpoint.write(to: file)
            #expect(try file.read() == checkpoint.encoded())
            #expect(try ConsumerCheckpoint<[Station]>.load(file)?.state == state)
        }
    }

    @Test("a checkpoint that cannot be written leaves the previous one")
    func failedWriteKeepsPrevious() throws {
        let dir = try TemporaryDirectory()
        let file = CheckpointFile(path: dir.path("checkpoint.json"))
        try file.write(Array("previous".utf8))
        struct Refused: Error {}
        #expect(throws: Refused.self) {
            try file.write { emit in
                try emit(Array("half of the new".utf8))
                throw Refused()
            }
        }
        #expect(try file.read() == Array("previous".utf8))
        #expect(!FileManager.default.fileExists(atPath: dir.path("checkpoint.json.tmp")))
    }
}
