import Foundation
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTWire

/// The old side of a hand-over inside the runtime, on the in-memory bus and its hand-moved clock.
@Suite("hand-over deadline, in the runtime")
struct HandoverRuntimeTests {
    @Test("a detector whose input has stopped still hands over once the deadline passes")
    func quietDeadline() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let handoffs = try Subscriber(transport: bus, prefixes: [HandoffMessage.topicPrefix], logger: DetectorRuntimeTests.logger)
        let successor = try Publisher(transport: bus, program: "rep-detector")
        let old = try DetectorRuntimeTests.detector(bus, takeover: false, dir: dir)
        try bus.heartbeat()
        // A stream the old detector has not reached, and whose producer has gone quiet.
        let request = TakeoverMessage(instance: successor.stamper.instance, stations: "*", firstSeq: ["bridge-x/sample.rack-1": 50])
        try successor.publish(request, station: "detector")
        try old.step(timeoutMs: 0)
        #expect(old.handover.phase != .active && !old.isFinished, "handing over: waiting for the stream")
        bus.manualClock.advance(Handover<StationDetector>.handOverWithinS - 0.1)
        try old.step(timeoutMs: 0)
        #expect(!old.isFinished)
        bus.manualClock.advance(0.1)
        try old.step(timeoutMs: 0)
        #expect(old.isFinished, "no input came, the deadline did")
        var done: HandoffMessage?
        while let message = try handoffs.next(timeoutMs: 0) { done = try message.payload(as: HandoffMessage.self) }
        #expect(done?.done == true && done?.to == successor.stamper.instance)
    }
}
