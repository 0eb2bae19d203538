import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTSensors
@testable import VBTWire

/// The live swap over real processes: a replayed multi-set session, detectors
/// replaced at 20 different moments; every run's rep stream must equal the run
/// without a swap (same ids, same metrics).
@Suite("rep-detector processes", .serialized)
struct SwapProcessTests {
    /// A simulated session: 2 sets of 4 reps, laser at 50 Hz, 5 readings a message.
    static func session() -> (messages: [SampleMessage], reps: Int) {
        var config = SimulationConfig()
        config.station = "swap-1"
        config.sets = 2
        config.repsPerSet = 4
        config.restS = 6
        config.imuRateHz = 0
        var sensors = SimulatedSensors(config)
        return (sensors.distanceMessages(perMessage: 5, wallOrigin: 1_763_812_345), sensors.timeline.reps.count)
    }

    /// The time of a message's last reading.
    static func lastT(_ message: SampleMessage) -> Double {
        if case .distance(let list) = message.readings { return list.last?.t ?? 0 }
        return 0
    }

    /// What a rep stream is compared on: everything but the publishing instance.
    struct RepKey: Equatable, CustomStringConvertible {
        let repId: String, setId: String, index: Int
        let mean: Double, peak: Double, propulsive: Double, rom: Double, tEnd: Double
        init(_ rep: RepMessage) {
            (repId, setId, index) = (rep.repId, rep.setId, rep.index)
            (mean, peak, propulsive, rom, tEnd) = (rep.meanVelocityMps, rep.peakVelocityMps, rep.meanPropulsiveVelocityMps, rep.romMm, rep.tEnd)
        }
        var description: String { "\(repId) #\(index) \(String(format: "%.4f", mean))" }
    }

    /// One run: a bus, a detector, a replay at `speed`; a new detector takes over at each of `swapsAtS`.
    /// The test plays the recorded readings itself, with their original times, at 4x
    /// real time, so every run sees identical input.
    func run(session: [SampleMessage], expected: Int, swapsAtS: [Double], dir: TemporaryDirectory) throws -> (reps: [RepKey], detectors: Int) {
        let config = freeBusConfig()
        let env = config.environmentVariables
        let bus = try ManagedProcess("vbt-bus", ["--heartbeat-interval", "0.1"], environment: env, workDirectory: dir.url)
        defer { _ = bus.terminate() }
        let context = ZMQContext()
        let subscriber = try #require(try connectedSubscriber(context: context, config: config, prefixes: ["rep."]), "bus did not answer")
        // Each run learns patterns from scratch, into its own library.
        let library = dir.path("patterns-\(UUID().uuidString).json")
        // ...and journals into its own folder (a detector journals by default, and one started where
        // another run's journal is would resume that run), which each detector taking over shares.
        let journal = dir.path("journal-\(UUID().uuidString)")
        var current = try ManagedProcess("rep-detector", ["--patterns", library, "--journal", journal], environment: env, workDirectory: dir.url)
        #expect(current.waitForStderr("rep detector running", timeoutS: 20))
        var reps: [RepKey] = []
        func drain() throws {
            while let message = try subscriber.next(timeoutMs: 0) {
                if let rep = try? message.payload(as: RepMessage.self) { reps.append(RepKey(rep)) }
            }
        }
        let publisher = try Publisher(context: context, config: config, program: "swap-test")
        #expect(try publisher.waitForSubscriber(topic: "sample.swap-1", timeoutS: 20))
        let started = monotonicSeconds()
        var next = 0
        /// Publishes what is due by now (4x speed: one 0.1 s message every 25 ms).
        func play(until moment: Double) throws {
            while next < session.count {
                let due = Double(next) * 0.025
                if due > moment { return }
                let wait = started + due - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                // Sent "when read": ts follows the recorded reading times.
                try publisher.publish(session[next], station: "swap-1", ts: Self.lastT(session[next]))
                next += 1
                try drain()
            }
        }
        var detectors = 1
        for moment in swapsAtS {
            try play(until: moment)
            let incoming = try ManagedProcess(
                "rep-detector", ["--takeover", "--patterns", library, "--journal", journal], environment: env, workDirectory: dir.url)
            detectors += 1
            // The stream goes on while the new detector starts and takes over.
            let deadline = monotonicSeconds() + 30
            while !incoming.stderrText.contains("took over"), monotonicSeconds() < deadline {
                try play(until: monotonicSeconds() - started + 0.01)
            }
            #expect(incoming.stderrText.contains("took over"), "no takeover: \(incoming.stderrText)")
            let code = current.waitForExit(timeoutS: 20)
            #expect(code == 0, "the old detector exits 0, not \(String(describing: code)): \(current.stderrText)")
            #expect(incoming.stderrText.contains("from=rep-detector-"), "the state came from the running detector")
            current = incoming
        }
        try play(until: .infinity)
        #expect(
            try waitUntil(timeoutS: 30, intervalS: 0) {
                try drain()
                return reps.count >= expected
            }, "\(reps.count) reps of \(expected)")
        #expect(current.terminate() == 0)
        try drain()
        #expect(subscriber.stats.totals.gaps == 0 && subscriber.stats.totals.duplicates == 0)
        return (reps, detectors)
    }

    @Test("a swap at 20 moments (inside reps, between reps, between sets) changes nothing in the rep stream")
    func swap() throws {
        let dir = try TemporaryDirectory()
        let (session, expected) = Self.session()
        let baseline = try run(session: session, expected: expected, swapsAtS: [], dir: dir).reps
        #expect(baseline.count == expected, "the no-swap run counts every rep")
        // 4 runs x 5 swaps; the session lasts ~10 s at 4x, so the moments cover it.
        for runIndex in 0..<4 {
            let moments = (0..<5).map { 0.6 + Double($0) * 1.6 + Double(runIndex) * 0.4 }
            let (reps, detectors) = try run(session: session, expected: expected, swapsAtS: moments, dir: dir)
            #expect(detectors == 6)
            #expect(reps == baseline, "run \(runIndex + 1) with swaps at \(moments): \(reps) vs \(baseline)")
        }
    }
}

@Suite("rep-detector stations split")
struct StationSplitTests {
    @Test("--stations GLOB: two detectors split the gym, each rep published once")
    func split() throws {
        let bus = try TestBus()
        let (config, context) = (bus.config, bus.context)
        let subscriber = try #require(try connectedSubscriber(context: context, config: config, prefixes: ["rep."]), "bus did not answer")
        // Each its own journal folder (one process per folder).
        let racks = try bus.start("rep-detector", ["--stations", "rack-*", "--patterns", bus.dir.path("p1.json"), "--journal", bus.dir.path("j1")])
        let benches = try bus.start("rep-detector", ["--stations", "bench-*", "--patterns", bus.dir.path("p2.json"), "--journal", bus.dir.path("j2")])
        #expect(racks.waitForStderr("bus connected", timeoutS: 20) && benches.waitForStderr("bus connected", timeoutS: 20))
        let publisher = try Publisher(context: context, config: config, program: "split-test")
        #expect(try publisher.waitForSubscriber(topic: "sample.rack-01", timeoutS: 20))
        let path = distancePath([(523, 0), (523, 0.4), (135, 1.1), (520, 0.8), (520, 0.6)])
        for station in ["rack-01", "bench-01", "rack-02"] {
            for chunk in stride(from: 0, to: path.count, by: 5) {
                let readings = path[chunk..<min(chunk + 5, path.count)].map { SampleMessage.DistanceReading(t: $0.t, distanceMm: $0.mm) }
                try publisher.publish(SampleMessage(.distance(readings)), station: station, ts: readings.last!.t)
            }
        }
        var reps: [BusMessage] = []
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0) {
                if let message = try subscriber.next(timeoutMs: 50) { reps.append(message) }
                return reps.count >= 3
            })
        let byStation = Dictionary(grouping: reps, by: \.envelope.station)
        #expect(byStation.mapValues(\.count) == ["rack-01": 1, "bench-01": 1, "rack-02": 1])
        let detectorOf = { (station: String) in (try? byStation[station]?.first?.payload(as: RepMessage.self))??.detector }
        #expect(detectorOf("rack-01") == detectorOf("rack-02"))
        #expect(detectorOf("rack-01") != detectorOf("bench-01"))
        #expect(racks.terminate() == 0 && benches.terminate() == 0)
    }
}

/// A detector's loop never waits on another process.
@Suite("rep-detector and a silent recorder")
struct SilentRecorderTests {
    @Test("a session-recorder that holds the detector's question unanswered stalls nothing: every rep comes while it waits, and its late answer is taken")
    func silentRecorder() throws {
        let bus = try TestBus()
        let (config, context) = (bus.config, bus.context)
        // The recorder's query endpoint, held by the test: it reads the question and answers only when told.
        let recorder = try ZMQSocket(context, .router, lingerMs: 0)
        try recorder.bind(config.queryEndpoint)
        let subscriber = try #require(try connectedSubscriber(context: context, config: config, prefixes: ["rep."]), "bus did not answer")
        // An empty library: the detector asks for the recorder's patterns, and
        // would wait two minutes for them if it waited at all.
        let detector = try bus.start("rep-detector", ["--patterns", bus.dir.path("patterns.json"), "--recorder-timeout", "120"])
        defer { _ = detector.terminate() }
        var question: ReceivedMessage?
        #expect(
            waitUntil(timeoutS: 20) {
                question = try? recorder.receive(dontWait: true, maxFrames: 3)
                return question != nil
            }, "the detector never asked the recorder: \(detector.stderrText)")
        let frames = try #require(question?.frames)
        struct Head: Decodable { var id: String; var query: String }
        let head = try JSONDecoder().decode(Head.self, from: Data(try #require(frames.last)))
        #expect(head.query == "pattern.list")
        #expect(detector.waitForStderr("rep detector running", timeoutS: 20))
        let publisher = try Publisher(context: context, config: config, program: "silent-recorder-test")
        #expect(try publisher.waitForSubscriber(topic: "sample.swap-1", timeoutS: 20))
        let (session, expected) = SwapProcessTests.session()
        for message in session { try publisher.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message)) }
        var reps = 0
        func drain() throws -> Bool {
            while let message = try subscriber.next(timeoutMs: 20) {
                if message.envelope.type == "rep" { reps += 1 }
            }
            return reps >= expected
        }
        let allReps = try waitUntil(timeoutS: 30, intervalS: 0, drain)
        #expect(allReps, "\(reps) reps of \(expected) while the recorder held the question")
        // Still unanswered (nothing was sent back); now it answers, late.
        #expect(!detector.stderrText.contains("patterns fetched"))
        let reply = Array(#"{"id":"\#(head.id)","ok":true,"result":[]}"#.utf8)
        try recorder.send(frames: Array(frames.dropLast()) + [reply])
        #expect(detector.waitForStderr("patterns fetched from the session-recorder", timeoutS: 20), "\(detector.stderrText)")
        #expect(detector.terminate() == 0)
    }
}
