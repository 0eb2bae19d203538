import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTPosture
@testable import VBTWire

/// The posture evaluator's runtime over the in-memory bus: calibrate by
/// command, then the hysteresis as the bus sees it. (tests/python/
/// test_posture_e2e.py keeps the process run.)
@Suite("posture-evaluator runtime, in memory")
struct PostureRuntimeTests {
    static let logger = Logger(label: "test.posture") { _ in SwiftLogNoOpLogHandler() }

    @Test("calibrate by command; a slouch is one change after the hysteresis; a blip of odd readings changes nothing")
    func hysteresis() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let runtime = try PostureRuntime(
            transport: bus, queryEndpoint: "memory", settings: PostureSettings(),
            storePath: dir.path("calibrations.json"), logger: Self.logger)
        let listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(PostureMessage.self, CalibrationMessage.self), logger: Self.logger)
        let coach = try Publisher(transport: bus, program: "vbt")
        let wearable = try Publisher(transport: bus, program: "sensor-bridge")
        var t = bus.manualClock.wallSeconds()
        func play(tiltDeg: Double, seconds: Double, seed: Int) throws -> [BusMessage] {
            let data = readings(Int(seconds / 0.02), tiltDeg: tiltDeg, seed: seed)
            var batch: [SampleMessage.PostureReading] = []
            for (a, m) in zip(data.acc, data.mag) {
                batch.append(SampleMessage.PostureReading(t: t, acc: a, mag: m))
                t += 0.02
                if batch.count == 5 {
                    try wearable.publish(SampleMessage(.posture(batch)), station: "desk-1", ts: t)
                    batch = []
                    bus.manualClock.advance(0.1)
                }
            }
            var out: [BusMessage] = []
            repeat {
                try runtime.step(timeoutMs: 0)
                while let message = try listener.next(timeoutMs: 0) { out.append(message) }
            } while bus.queued > 0
            return out
        }
        func reports(_ messages: [BusMessage]) -> [PostureMessage] { messages.compactMap { try? $0.payload(as: PostureMessage.self) } }

        try coach.publish(
            CommandMessage(
                id: "c1", command: CommandName.postureCalibrate, target: "*",
                args: JSONObject([("athlete", .string("ana")), ("seconds", .number(2))])), station: "desk-1")
        try runtime.step(timeoutMs: 0)
        let calibration = try play(tiltDeg: 0, seconds: 2.4, seed: 1)
        #expect(calibration.contains { $0.envelope.type == CalibrationMessage.type }, "the calibration is published")

        let upright = reports(try play(tiltDeg: 0, seconds: 2, seed: 2))
        #expect(!upright.isEmpty && upright.allSatisfy(\.correct))
        let blip = reports(try play(tiltDeg: 40, seconds: 0.1, seed: 3) + play(tiltDeg: 0, seconds: 1, seed: 4))
        #expect(blip.allSatisfy { $0.correct && !$0.changed }, "a 0.1 s blip is under the hysteresis")
        let slouch = reports(try play(tiltDeg: 25, seconds: 3, seed: 5))
        #expect(slouch.filter(\.changed).count == 1 && slouch.last?.correct == false, "one change, once the slouch has held")
    }
    @Test("a posture sample whose readings are not readings is counted as malformed and shown in the heartbeat; the evaluator goes on")
    func malformedPostureSample() throws {
        let rig = try Rig()
        let bus = rig.bus
        let wearable = try Publisher(transport: bus, program: "sensor-bridge")
        func heartbeatInputs() throws -> InputCounters? { try rig.heartbeat()?.inputs }
        try wearable.publish(StatusMessage(state: .streaming, sensor: SampleMessage.postureSensor, device: "sim"), station: "desk-1")
        #expect(try heartbeatInputs()?.malformed == 0)
        // The envelope and the readings' extent are sound (the subscriber only locates them); the readings are not.
        let bad = JSONValue.array([.object(JSONObject([("t", .string("noon")), ("acc", .array([]))]))])
        for _ in 0..<3 {
            try wearable.publish(
                type: SampleMessage.type, station: "desk-1",
                fields: JSONObject([("sensor", .string(SampleMessage.postureSensor)), ("device", .string("sim")), ("samples", bad)]))
        }
        let good = SampleMessage.PostureReading(t: bus.manualClock.wallSeconds(), acc: Vector3(0, 0, 1), mag: Vector3(0.3, 0, 0.4))
        try wearable.publish(SampleMessage(.posture([good])), station: "desk-1")
        let inputs = try #require(try heartbeatInputs())
        #expect(inputs.malformed == 3)
        #expect(inputs.received >= 4, "the good sample after them is received too")
    }

    @Test("samples come only from the stations whose bridge says they have a posture wearable, from its status on")
    func onlyPostureStationsAreFollowed() throws {
        let rig = try Rig()
        let (bus, runtime) = (rig.bus, rig.runtime)
        let bridge = try Publisher(transport: bus, program: "sensor-bridge")
        func reading() -> SampleMessage {
            SampleMessage(.posture([SampleMessage.PostureReading(t: bus.manualClock.wallSeconds(), acc: Vector3(0, 0, 1), mag: Vector3(0.3, 0, 0.4))]))
        }
        func subscribes() throws -> [String] { try #require(try rig.heartbeat()?.subscribes) }
        // A rack whose bridge has a laser only: its samples never reach the evaluator.
        try bridge.publish(StatusMessage(state: .streaming, sensor: "distance", device: "sim"), station: "rack-1")
        for _ in 0..<5 { try bridge.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 900)])), station: "rack-1") }
        let before = try subscribes()
        #expect(!before.contains { $0.hasPrefix(SampleMessage.topicPrefix) }, "no samples asked for yet: \(before)")
        // A wearable comes up at desk-1: its status, then its readings, come in.
        try bridge.publish(StatusMessage(state: .connected, sensor: SampleMessage.postureSensor, device: "sim"), station: "desk-1")
        _ = try subscribes()
        for _ in 0..<4 { try bridge.publish(reading(), station: "desk-1") }
        // desk-10 begins with desk-1's topic: its readings reach the socket, but are not evaluated.
        for _ in 0..<3 { try bridge.publish(reading(), station: "desk-10") }
        try bridge.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: 1, distanceMm: 900)])), station: "rack-1")
        let after = try subscribes()
        #expect(after.contains("sample.desk-1") && !after.contains("sample.rack-1"))
        let received = runtime.receivedByTopic
        #expect(received["sample.rack-1"] == nil && received["status.rack-1"] == 1)
        #expect(received["sample.desk-1"] == 4 && received["sample.desk-10"] == 3)
        #expect(runtime.followedStations == ["desk-1"], "desk-10's readings are dropped unread")
    }
}

/// An evaluator on the in-memory bus, and a listener for its heartbeat.
private struct Rig {
    let dir: TemporaryDirectory
    let bus = MemoryBus()
    let runtime: PostureRuntime
    let listener: Subscriber

    init() throws {
        dir = try TemporaryDirectory()
        runtime = try PostureRuntime(
            transport: bus, queryEndpoint: "memory", settings: PostureSettings(), storePath: dir.path("calibrations.json"),
            logger: PostureRuntimeTests.logger)
        listener = try Subscriber(transport: bus, prefixes: MessageTypes.prefixes(HeartbeatMessage.self), logger: PostureRuntimeTests.logger)
    }

    /// Takes every message waiting, then returns the evaluator's heartbeat that comes due after them.
    func heartbeat() throws -> HeartbeatMessage? {
        var last: HeartbeatMessage?
        func drain() throws {
            while let message = try listener.next(timeoutMs: 0) {
                if message.topic == "heartbeat.posture-evaluator" { last = try message.payload(as: HeartbeatMessage.self) }
            }
        }
        repeat {
            try runtime.step(timeoutMs: 0)
            try drain()
        } while bus.queued > 0
        last = nil
        bus.manualClock.advance(30)
        try runtime.step(timeoutMs: 0)
        try drain()
        return last
    }
}
