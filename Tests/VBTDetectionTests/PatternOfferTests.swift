import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTQuery
@testable import VBTWire

/// A detector offers every pattern it learns to the session-recorder and reads each answer:
/// an answer left unread stays in its socket's queue for good (at 1,002 stations a wave of
/// set ends held megabytes of them), and a refusal read is said, not dropped.
@Suite("learned patterns offered to the recorder")
struct PatternOfferTests {
    /// How the test's recorder answers a pattern.put.
    enum Answer { case kept, refused, never }

    /// Plays the swap session (two sets of four reps, the first ended by the 6 s rest between them)
    /// to a detector whose recorder answers every pattern.put as `answer` says; what it was
    /// offered, what the detector counts as not kept, and the answers it left unread.
    static func offer(_ answer: Answer) throws -> (offered: Int, notKept: Int, unread: Int, patterns: Int) {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let server = bus.queryServerLink()
        let player = try Publisher(transport: bus, program: "test")
        var options = DetectorOptions()
        options.patternsPath = dir.path("patterns.json")
        options.settings.idleTimeoutS = 5
        let runtime = try DetectorRuntime(
            transport: bus, queryEndpoint: MemoryBus.queryEndpoint, options: options, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        var offered = 0
        func serve() throws {
            while let request = try server.receive(timeoutMs: 0, maxFrames: 3), let body = request.frames.last {
                let fields = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
                let id = try #require(fields["id"] as? String)
                var reply: [String: Any] = ["id": id, "ok": true, "result": NSNull()]
                switch fields["query"] as? String {
                case QueryName.patternList.rawValue: reply["result"] = [Any]()
                case QueryName.patternPut.rawValue:
                    offered += 1
                    reply["result"] = fields["args"]
                    if answer == .never { continue }
                    if answer == .refused { reply = ["id": id, "ok": false, "error": ["kind": "storage", "message": "disk full"]] }
                default: break
                }
                try server.send([request.frames[0], [], Array(try JSONSerialization.data(withJSONObject: reply))], dontWait: true)
            }
        }
        try bus.heartbeat()
        for message in SwapProcessTests.session().messages {
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            bus.manualClock.advance(0.1)
            for _ in 0..<100 where bus.queued > 0 || bus.repliesQueued > 0 {
                try runtime.step(timeoutMs: 0)
                try serve()
            }
        }
        // The last set ends once the station is silent (wall time), and its pattern is offered.
        bus.manualClock.advance(options.settings.idleTimeoutS + 2)
        for _ in 0..<5 {
            try runtime.step(timeoutMs: 0)
            try serve()
            try runtime.step(timeoutMs: 0)
        }
        // An offer unanswered is given up after the recorder's timeout.
        bus.manualClock.advance(options.recorderTimeoutS + 1)
        try runtime.step(timeoutMs: 0)
        return (offered, runtime.patternsNotKeptCount, bus.repliesQueued, runtime.patterns.library.patterns.values.joined().count)
    }

    @Test("every confirmation is read, none left queued, and a pattern kept is not counted lost")
    func confirmationsRead() throws {
        let run = try Self.offer(.kept)
        #expect(run.patterns == 2, "each set of four reps is a pattern")
        #expect(run.offered == 2)
        #expect(run.unread == 0, "the recorder's answers were left on the socket")
        #expect(run.notKept == 0)
    }

    @Test("a refusal is read and counted as a pattern not kept; the detector keeps the pattern")
    func refusalCounted() throws {
        let run = try Self.offer(.refused)
        #expect(run.offered == 2 && run.patterns == 2)
        #expect(run.unread == 0)
        #expect(run.notKept == 2)
    }

    @Test("an offer the recorder never answers is given up after its timeout and counted as not kept")
    func unansweredCounted() throws {
        let run = try Self.offer(.never)
        #expect(run.offered == 2 && run.patterns == 2)
        #expect(run.notKept == 2)
    }
}
