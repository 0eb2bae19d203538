import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTQuery
@testable import VBTStore
@testable import VBTWire

/// The session-recorder's runtime over the in-memory bus, with a real SQLite
/// file and a hand-moved clock. (The recorder's process is exercised by
/// tests/python/test_recorder.py.)
@Suite("session-recorder runtime, in memory")
struct RecorderRuntimeTests {
    /// A recorder with the default settings on an in-memory bus, over a fresh SQLite file.
    struct Rig {
        let folder = TempFolder()
        let bus = MemoryBus()
        let settings = RecorderSettings()
        let store: TrainingStore
        let recorder: RecorderRuntime

        init() throws {
            store = try makeStore(folder)
            recorder = try RecorderRuntime(transport: bus, store: store, settings: settings, logger: quietLogger)
        }
    }

    @Test(
        "a set arrives, some messages twice (the same frame again, and the same rep from a detector that took over): stored once, duplicates counted, answered over the query link"
    )
    func idempotentIngest() throws {
        let rig = try Rig()
        let (bus, recorder) = (rig.bus, rig.recorder)
        func frames<P: BusPayload>(_ stamper: inout EnvelopeStamper, _ payload: P, ts: Double) throws -> [[UInt8]] {
            let encoded = try stamper.encode(payload, station: "rack-01", athlete: "ana", ts: ts)
            return [encoded.topic, encoded.body]
        }
        let t0 = bus.manualClock.wallSeconds()
        var old = EnvelopeStamper(program: "rep-detector"), new = EnvelopeStamper(program: "rep-detector")
        let setId = "rack-01-set-1"
        func rep(_ index: Int) -> RepMessage {
            RepMessage(
                setId: setId, repId: "rack-01-rep-\(index)", index: index, meanVelocityMps: 0.7, peakVelocityMps: 1.1,
                meanPropulsiveVelocityMps: 0.72, romMm: 600, concentricS: 0.85, timeToPeakS: 0.3, velocityLossPct: 0,
                tEnd: t0 + Double(index) * 3, detector: "rep-detector-old", concentricStartT: nil, concentricEndT: nil, exercise: "squat", loadKg: 100,
                sensor: "distance")
        }
        bus.inject(try frames(&old, SetMessage(setId: setId, event: .start, exercise: "squat", loadKg: 100), ts: t0))
        let first = try frames(&old, rep(1), ts: t0 + 3)
        bus.inject(first)
        bus.inject(first)  // the same frame again: same src and seq
        bus.inject(try frames(&old, rep(2), ts: t0 + 6))
        bus.inject(try frames(&new, rep(2), ts: t0 + 6.1))  // the new detector publishes rep 2 again: same rep_id
        bus.inject(try frames(&new, rep(3), ts: t0 + 9))
        bus.inject(
            try frames(
                &new,
                SetMessage(
                    setId: setId, event: .end, reps: 3, reason: .idle, bestMeanVelocityMps: 0.7, velocityLossPct: 0,
                    exercise: "squat", loadKg: 100), ts: t0 + 19))
        try recorder.step(maxWaitMs: 0)
        #expect(bus.queued == 0, "the recorder read everything")
        #expect(recorder.counters.stored[RepMessage.type, default: 0] == 0, "nothing is written before the batch is due")
        bus.manualClock.advance(RecorderSettings().flushIntervalS)
        try recorder.step(maxWaitMs: 0)
        #expect(recorder.counters.stored[RepMessage.type] == 3)
        #expect(recorder.counters.stored[SetMessage.type] == 2)
        #expect(recorder.counters.duplicates == 1, "rep 2 again is a duplicate; \(recorder.counters)")

        // Asked over the query link; the answer comes on the recorder's next step.
        let client = try QueryClient(transport: bus, endpoint: "memory")
        let id = try client.request(.history, HistoryArgs(athlete: "ana"))
        #expect(try client.nextReply() == nil, "no answer before the recorder's loop has run")
        try recorder.step(maxWaitMs: 0)
        let reply = try #require(try client.nextReply())
        #expect(reply.id == id)
        let sets = try QueryClient.decode(reply.data, of: .history)
        #expect(sets.map(\.id) == [setId] && sets.first?.reps == 3 && sets.first?.endedTs != nil)
    }

    @Test(
        "raw samples come on a connection of their own that says bulk: the bus disconnecting it at its budget frees only samples, and every rep queued meanwhile is stored"
    )
    func samplesOnABulkConnection() throws {
        let rig = try Rig()
        let (bus, recorder, settings) = (rig.bus, rig.recorder, rig.settings)
        var bridge = EnvelopeStamper(program: "sensor-bridge"), detector = EnvelopeStamper(program: "rep-detector")
        let t0 = bus.manualClock.wallSeconds()
        for index in 0..<30 {
            let t = t0 + Double(index) / 50
            let sample = try bridge.encode(SampleMessage(.distance([.init(t: t, distanceMm: 500 + Double(index))])), station: "rack-01", athlete: nil, ts: t)
            bus.inject([sample.topic, sample.body])
            guard index % 10 == 9 else { continue }
            let rep = RepMessage(
                setId: "rack-01-set-1", repId: "rack-01-rep-\(index / 10 + 1)", index: index / 10 + 1, meanVelocityMps: 0.7, peakVelocityMps: 1.1,
                meanPropulsiveVelocityMps: 0.72, romMm: 600, concentricS: 0.85, timeToPeakS: 0.3, velocityLossPct: 0, tEnd: t,
                detector: "rep-detector-1", concentricStartT: nil, concentricEndT: nil, exercise: "squat", loadKg: 100, sensor: "distance")
            let encoded = try detector.encode(rep, station: "rack-01", athlete: "ana", ts: t)
            bus.inject([encoded.topic, encoded.body])
        }
        #expect(bus.disconnect(saying: .bulk) == 30, "the bulk connection held the 30 samples, and nothing else")
        #expect(bus.disconnect(saying: .realtime) == 0)
        try recorder.step(maxWaitMs: 0)
        bus.manualClock.advance(settings.flushIntervalS)
        try recorder.step(maxWaitMs: 0)
        #expect(recorder.counters.stored[RepMessage.type] == 3, "\(recorder.counters)")
        #expect(recorder.counters.stored[SampleMessage.type, default: 0] == 0)

        // Samples sent after the disconnection arrive on the same connection, and the history's connection takes no sample.
        let t = t0 + 1
        let sample = try bridge.encode(SampleMessage(.distance([.init(t: t, distanceMm: 480)])), station: "rack-01", athlete: nil, ts: t)
        bus.inject([sample.topic, sample.body])
        try recorder.step(maxWaitMs: 0)
        bus.manualClock.advance(settings.flushIntervalS)
        try recorder.step(maxWaitMs: 0)
        #expect(recorder.counters.stored[SampleMessage.type] == 1)
        #expect(recorder.counters.duplicates == 0, "each message came on one connection only")
        #expect(RecorderRuntime.historyPrefixes.contains(RepMessage.type + ".") && RecorderRuntime.historyPrefixes.contains(HeartbeatMessage.type + "."))
        #expect(!RecorderRuntime.historyPrefixes.contains { (SampleMessage.type + ".").hasPrefix($0) })
    }

    @Test(
        "a backlog is written a batch at a time, never read whole into memory, and the freed heap is given back once the recorder has caught up"
    )
    func backlogInBatches() throws {
        let rig = try Rig()
        let (bus, recorder, settings) = (rig.bus, rig.recorder, rig.settings)
        var bridge = EnvelopeStamper(program: "sensor-bridge")
        let t0 = bus.manualClock.wallSeconds()
        let backlog = 2 * settings.flushAtMessages + settings.flushAtMessages / 2
        for index in 0..<backlog {
            let t = t0 + Double(index) / 1_000
            let encoded = try bridge.encode(SampleMessage(.distance([.init(t: t, distanceMm: 500)])), station: "rack-01", athlete: nil, ts: t)
            bus.inject([encoded.topic, encoded.body])
        }
        var steps = 0
        while bus.queued > 0 || recorder.pendingCount > 0 {
            try recorder.step(maxWaitMs: 0)
            #expect(recorder.pendingCount < settings.flushAtMessages, "a full batch is written in the step that read it")
            if steps == 0 { #expect(recorder.counters.stored[SampleMessage.type] == settings.flushAtMessages, "the first step read one batch, no more") }
            bus.manualClock.advance(settings.flushIntervalS)
            steps += 1
            try #require(steps < 100)
        }
        #expect(recorder.counters.stored[SampleMessage.type] == backlog)
        #expect(steps >= 3, "at most a batch a step: \(steps) steps")
        #expect(recorder.trims == 1, "the heap is given back once, after the last (short) batch")
    }
}
