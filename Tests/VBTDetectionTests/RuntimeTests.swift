import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTSensors
@testable import VBTWire

/// The rep-detector's runtime over the in-memory bus with a hand-moved clock:
/// the same code as the process, without sockets, processes or waiting.
/// (SwapProcessTests keeps the run over real processes.)
@Suite("rep-detector runtime, in memory")
struct DetectorRuntimeTests {
    static let logger = Logger(label: "test.detector") { _ in SwiftLogNoOpLogHandler() }
    /// Two sets of four reps, laser at 50 Hz (the process test's session).
    static let session = SwapProcessTests.session()

    static func detector(_ bus: MemoryBus, takeover: Bool, dir: TemporaryDirectory, askRecorder: Bool = false) throws -> DetectorRuntime {
        var options = DetectorOptions()
        options.takeover = takeover
        options.patternsPath = dir.path("patterns.json")
        options.askRecorder = askRecorder
        return try DetectorRuntime(transport: bus, queryEndpoint: "memory", options: options, logger: logger)
    }

    /// A detector on an in-memory bus, a subscriber to its reps, and a publisher to feed it (the bus's first heartbeat sent).
    static func withRepSubscriber() throws -> (MemoryBus, Subscriber, Publisher, DetectorRuntime, TemporaryDirectory) {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: logger)
        let player = try Publisher(transport: bus, program: "test")
        let runtime = try detector(bus, takeover: false, dir: dir)
        try bus.heartbeat()
        return (bus, reps, player, runtime, dir)
    }

    /// Plays the session (one 0.1 s message per 0.1 s of the clock); before
    /// the messages numbered in `swapsAt` a new detector starts with
    /// `--takeover` while the stream goes on. Returns the rep stream.
    static func run(swapsAt: Set<Int>, askRecorder: Bool = false) throws -> (reps: [SwapProcessTests.RepKey], detectors: Int, stats: SubscriberStats) {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: logger)
        let player = try Publisher(transport: bus, program: "test")
        var running = [try detector(bus, takeover: false, dir: dir, askRecorder: askRecorder)]
        var started = 1
        var received: [SwapProcessTests.RepKey] = []
        func settle() throws {
            // Every detector reads all it has; a finished one is let go (its process exits).
            for _ in 0..<10_000 {
                for runtime in running { try runtime.step(timeoutMs: 0) }
                running.removeAll { $0.isFinished }
                while let message = try reps.next(timeoutMs: 0) {
                    received.append(SwapProcessTests.RepKey(try message.payload(as: RepMessage.self)))
                }
                if bus.queued == 0 { return }
            }
            Issue.record("the runtimes never drained their input")
        }
        try bus.heartbeat()
        for (index, message) in Self.session.messages.enumerated() {
            if swapsAt.contains(index) {
                running.append(try detector(bus, takeover: true, dir: dir, askRecorder: askRecorder))
                started += 1
                try bus.heartbeat()
            }
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            bus.manualClock.advance(0.1)
            try settle()
        }
        #expect(running.count == 1 && running[0].isActive, "one detector is left, detecting")
        return (received, started, reps.stats)
    }

    /// The rep stream of one detector alone.
    static let baseline = Result { try run(swapsAt: []) }

    @Test("commands are answered on ack.<station>: done, or refused with the reason; others' commands are not")
    func commandsAreAnswered() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let acks = try Subscriber(transport: bus, prefixes: [AckMessage.topicPrefix], logger: Self.logger)
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let coach = try Publisher(transport: bus, program: "vbt")
        try bus.heartbeat()
        try coach.publish(CommandMessage(id: "c1", command: CommandName.setEnd), station: "rack-01")
        try coach.publish(
            CommandMessage(id: "c2", command: CommandName.athleteAssign, args: AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100).args),
            station: "rack-01")
        try coach.publish(CommandMessage(id: "c3", command: CommandName.setLoad, args: JSONObject([("load_kg", .number(-3))])), station: "rack-01")
        try coach.publish(CommandMessage(id: "c4", command: CommandName.restPause), station: "rack-01")
        for _ in 0..<1_000 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
        var answers: [AckMessage] = []
        while let message = try acks.next(timeoutMs: 0) { answers.append(try message.payload(as: AckMessage.self)) }
        #expect(answers.map(\.cmdId) == ["c1", "c2", "c3"], "rest.pause is the notifier's")
        #expect(answers.allSatisfy { $0.program == "rep-detector" })
        #expect(answers.first?.state == .refused && answers.first?.reason == "no set in progress at rack-01")
        #expect(answers.dropFirst().first?.state == .done && answers.dropFirst().first?.reason == "squat at 100 kg for ana")
        #expect(answers.last?.state == .refused && answers.last?.reason?.hasPrefix("set.load: ") == true)
    }

    @Test("an input stream that has not moved for an hour is forgotten within two minutes more; one that goes on is kept")
    func finishedStreamsForgotten() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let finished = try Publisher(transport: bus, program: "sensor-bridge")
        let going = try Publisher(transport: bus, program: "sensor-bridge")
        try bus.heartbeat()
        let sample = SampleMessage(.distance([SampleMessage.DistanceReading(t: bus.clock.wallSeconds(), distanceMm: 900)]))
        func run() throws { for _ in 0..<100 where bus.queued > 0 { try runtime.step(timeoutMs: 0) } }
        try finished.publish(sample, station: "rack-01", ts: bus.clock.wallSeconds())
        try run()
        let finishedSrc = try #require(runtime.streamsKept.first { $0.hasSuffix("/sample.rack-01") })
        func minute() throws {
            bus.manualClock.advance(60)
            try going.publish(sample, station: "rack-02", ts: bus.clock.wallSeconds())
            try run()
        }
        for _ in 0..<60 { try minute() }
        #expect(runtime.streamsKept.contains(finishedSrc), "an hour still: kept")
        try minute()
        try minute()
        #expect(!runtime.streamsKept.contains(finishedSrc))
        #expect(runtime.streamsKept.contains { $0.hasSuffix("/sample.rack-02") })
    }

    @Test("each input stream's last seq processed is kept: samples (the in-order input's) and commands alike")
    func positionsKept() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let bridge = try Publisher(transport: bus, program: "sensor-bridge")
        let coach = try Publisher(transport: bus, program: "vbt")
        try bus.heartbeat()
        for index in 0..<3 {
            let t = bus.clock.wallSeconds() + Double(index) * 0.02
            try bridge.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: t, distanceMm: 900)])), station: "rack-01", ts: t)
        }
        try coach.publish(CommandMessage(id: "c1", command: CommandName.setEnd), station: "rack-01")
        for _ in 0..<100 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
        let kept = runtime.positionsKept
        #expect(kept.count == 2, "\(kept)")
        #expect(kept.first { $0.key.hasSuffix("/sample.rack-01") }?.value == 3)
        #expect(kept.first { $0.key.hasSuffix("/cmd.rack-01") }?.value == 1)
    }

    @Test("athlete.unassign ends the set in progress as the athlete's, and what follows belongs to nobody")
    func unassign() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let out = try Subscriber(transport: bus, prefixes: [AckMessage.topicPrefix, "rep.", "set."], logger: Self.logger)
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let coach = try Publisher(transport: bus, program: "vbt"), player = try Publisher(transport: bus, program: "sensor-bridge")
        try bus.heartbeat()
        try coach.publish(
            CommandMessage(id: "a", command: CommandName.athleteAssign, args: AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100).args),
            station: "swap-1")
        var seen: [BusMessage] = []
        func drain() throws {
            for _ in 0..<1_000 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
            while let message = try out.next(timeoutMs: 0) { seen.append(message) }
        }
        var remaining = Self.session.messages[...]
        // Up to the first rep: a set is in progress.
        while !seen.contains(where: { $0.envelope.type == RepMessage.type }), let message = remaining.popFirst() {
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            try drain()
        }
        try coach.publish(CommandMessage(id: "u", command: CommandName.athleteUnassign), station: "swap-1")
        try drain()
        let ended = seen.last { $0.envelope.type == SetMessage.type }
        #expect(try ended.map { try $0.payload(as: SetMessage.self) }?.reason == .command)
        #expect(ended?.envelope.athlete == "ana", "the set was hers")
        let ack = try seen.last { $0.envelope.type == AckMessage.type }.map { try $0.payload(as: AckMessage.self) }
        #expect(ack?.cmdId == "u" && ack?.state == .done && ack?.reason == "the set in progress ended")
        let before = seen.count
        for message in remaining {
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            try drain()
        }
        let after = seen[before...].filter { $0.envelope.type == RepMessage.type }
        #expect(!after.isEmpty && after.allSatisfy { $0.envelope.athlete == nil })
    }

    @Test("an exercise the detector has no profile of is measured under its own name, with the assignment's ROM")
    func customExercise() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let reps = try Subscriber(transport: bus, prefixes: ["rep."], logger: Self.logger)
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let coach = try Publisher(transport: bus, program: "vbt"), player = try Publisher(transport: bus, program: "sensor-bridge")
        try bus.heartbeat()
        let assign = AthleteAssign(athlete: "ana", exercise: "box-squat", loadKg: 80, romMm: 590, mvtMps: 0.35)
        #expect(try AthleteAssign(args: assign.args) == assign, "rom_mm and mvt_mps travel")
        try coach.publish(CommandMessage(id: "a", command: CommandName.athleteAssign, args: assign.args), station: "swap-1")
        var measured: [RepMessage] = []
        for message in Self.session.messages {
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            for _ in 0..<1_000 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
            while let rep = try reps.next(timeoutMs: 0) { measured.append(try rep.payload(as: RepMessage.self)) }
        }
        #expect(measured.count == Self.session.reps)
        #expect(measured.allSatisfy { $0.exercise == "box-squat" && $0.loadKg == 80 })
        #expect(throws: PayloadError.self) { try AthleteAssign(args: AthleteAssign(athlete: "ana", mvtMps: 3).args) }
    }

    @Test(
        "an athlete's pattern learned at one station is used at every other station of theirs, also one the detector was feeding before it was learned; nobody else's reps are relaxed"
    )
    func patternsReachEveryStation() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: Self.logger)
        let runtime = try Self.detector(bus, takeover: false, dir: dir)
        let coach = try Publisher(transport: bus, program: "vbt"), player = try Publisher(transport: bus, program: "sensor-bridge")
        try bus.heartbeat()
        func settle() throws {
            for _ in 0..<1_000 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
        }
        func play(_ path: [(t: Double, mm: Double)], at station: String) throws {
            for start in stride(from: 0, to: path.count, by: 5) {
                let readings = path[start..<min(start + 5, path.count)].map { SampleMessage.DistanceReading(t: $0.t, distanceMm: $0.mm) }
                try player.publish(SampleMessage(.distance(readings), device: "test"), station: station, ts: readings.last!.t)
                bus.manualClock.advance(0.1)
                try settle()
            }
        }
        // DetectionTests' adaptation: three reps of 0.36 s concentric, too fast for a `strength`
        // target (0.4 s) unless a pattern of how the lift is done relaxes it.
        func lift(at station: String, start: Double) throws -> Int {
            var t = start
            for _ in 0..<3 {
                let path = distancePath([(523, 0), (523, 0.3), (135, 1.0), (520, 0.36), (520, 1.0)], start: t)
                try play(path, at: station)
                t = path.last!.t
            }
            var count = 0
            while let message = try reps.next(timeoutMs: 0), message.envelope.station == station { count += 1 }
            return count
        }
        func assign(_ station: String, _ assignment: AthleteAssign) throws {
            try coach.publish(CommandMessage(id: "assign-\(station)", command: CommandName.athleteAssign, args: assignment.args), station: station)
            try settle()
        }
        let strength = AthleteAssign(athlete: "ana", loadKg: 102, targetZone: "strength")
        let start = 1_763_812_345.0
        try assign("rack-02", strength)
        try assign("rack-03", strength)
        // rack-02 is fed (the bar at rest) before any pattern is learned; rack-03 lifts without one.
        try play(distancePath([(523, 0), (523, 1.0)], start: start), at: "rack-02")
        #expect(try lift(at: "rack-03", start: start) == 0, "too fast without a pattern")
        try assign("rack-01", AthleteAssign(athlete: "ana", loadKg: 100))
        #expect(try lift(at: "rack-01", start: start + 2) == 3)
        try coach.publish(CommandMessage(id: "e", command: CommandName.setEnd), station: "rack-01")
        try settle()
        // A station first heard after the pattern, and the one fed before it, accept the same reps.
        try assign("rack-04", strength)
        let fresh = try lift(at: "rack-04", start: start + 20)
        let known = try lift(at: "rack-02", start: start + 20)
        #expect(fresh > 0 && known == fresh, "ana's pattern relaxes rack-02's and rack-04's judging alike (\(known), \(fresh))")
        try assign("rack-05", AthleteAssign(athlete: "ben", loadKg: 102, targetZone: "strength"))
        #expect(try lift(at: "rack-05", start: start + 40) == 0, "ana's pattern does not relax ben's reps")
        runtime.finishPatterns()  // written on a thread of its own
        let library = try PatternLibrary.load(path: dir.path("patterns.json"))
        let saved = Array(library.patterns.values.joined())
        #expect(!saved.isEmpty && saved.allSatisfy { $0.owner == "ana" }, "ana's patterns, learned at her stations, saved with her as owner")
    }

    @Test("a station's checkpoint leaves the learned patterns out (the library has its own file), and reads one that has them")
    func checkpointLeavesPatternsOut() throws {
        var detector = StationDetector(station: "rack-01")
        detector.patterns = [RepPattern(exercise: "squat", curve: Array(repeating: 0.5, count: RepPattern.length), loadKg: 100, reps: 3, recordedT: 1)]
        let encoded = try ConsumerCheckpoint<[StationDetector]>.encoder.encode(detector)
        var object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(object["patterns"] == nil)
        #expect(object["station"] as? String == "rack-01")
        object["patterns"] = try JSONSerialization.jsonObject(with: JSONEncoder().encode(detector.patterns))
        let older = try ConsumerCheckpoint<[StationDetector]>.decoder.decode(StationDetector.self, from: JSONSerialization.data(withJSONObject: object))
        #expect(older.station == "rack-01" && older.patterns.isEmpty && older.patternsVersion == -1, "given the library by the runtime instead")
    }

    @Test("each rep names the last reading of the message that let it be counted (t_input), never before its t_end")
    func repsNameTheirCompletingMessage() throws {
        let (bus, reps, player, runtime, dir) = try Self.withRepSubscriber()
        _ = dir  // kept until the test ends: the detector's patterns file is in it
        var checked = 0
        for message in Self.session.messages {
            try player.publish(message, station: "swap-1", ts: SwapProcessTests.lastT(message))
            bus.manualClock.advance(0.1)
            for _ in 0..<100 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
            while let received = try reps.next(timeoutMs: 0) {
                let rep = try received.payload(as: RepMessage.self)
                #expect(rep.tInput == SwapProcessTests.lastT(message) && rep.tInput! >= rep.tEnd, "\(rep.repId)")
                checked += 1
            }
        }
        #expect(checked == Self.session.reps)
        // The wire carries it to the microsecond, as t_end.
        var stamper = EnvelopeStamper(program: "test")
        var rep = RepMessage(
            setId: "s", repId: "r", index: 1, meanVelocityMps: 0.5, peakVelocityMps: 0.9, meanPropulsiveVelocityMps: 0.6, romMm: 500,
            concentricS: 0.8, timeToPeakS: 0.3, velocityLossPct: 0, tEnd: 1_763_812_345.123456, detector: "d", concentricStartT: nil, concentricEndT: nil)
        rep.tInput = 1_763_812_345.223457
        let frames = try stamper.encode(rep, station: "rack-01", ts: 1_763_812_346)
        #expect(try decodeMessage(topic: frames.topic, body: frames.body).payload(as: RepMessage.self) == rep)
    }

    /// Plays the session with the wall clock `delayS` after each message's last reading (as live
    /// readings arrive, or as readings fetched from a journal after an outage), and returns the reps.
    static func reps(arrivingAfter delayS: Double) throws -> [RepMessage] {
        let dir = try TemporaryDirectory()
        let first = try #require(session.messages.first.map(SwapProcessTests.lastT))
        let clock = ManualClock(wall: first + delayS)
        let bus = MemoryBus(clock: clock)
        let reps = try Subscriber(transport: bus, prefixes: [RepMessage.topicPrefix], logger: logger)
        let player = try Publisher(transport: bus, program: "test")
        let runtime = try detector(bus, takeover: false, dir: dir)
        try bus.heartbeat()
        var got: [RepMessage] = []
        for message in session.messages {
            let lastT = SwapProcessTests.lastT(message)
            clock.advance(max(0, lastT + delayS - clock.wallSeconds()))
            try player.publish(message, station: "swap-1", ts: clock.wallSeconds())
            for _ in 0..<100 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
            while let received = try reps.next(timeoutMs: 0) {
                let rep = try received.payload(as: RepMessage.self)
                // The wire says how late: publication (`ts`) minus the completing reading's time.
                if let lateS = rep.lateS { #expect(abs(lateS - (received.envelope.ts - rep.tInput!)) < 0.001, "\(rep.repId)") }
                got.append(rep)
            }
        }
        return got
    }

    @Test("a rep counted from readings that arrive 5 minutes late is marked late, with how late; a rep counted live is not")
    func lateRepsMarked() throws {
        let live = try Self.reps(arrivingAfter: 0.05)
        #expect(live.count == Self.session.reps)
        #expect(live.allSatisfy { !$0.isLate }, "\(live.compactMap(\.lateS))")
        let late = try Self.reps(arrivingAfter: 300)
        #expect(late.map(\.repId) == live.map(\.repId), "the same reps, only later")
        #expect(late.allSatisfy { $0.lateS.map { $0 >= 300 && $0 < 301 } == true }, "\(late.map(\.lateS))")
        // Just over the rule's second is late; just under it is not.
        var rep = try #require(live.first)
        rep.markLateness(publishedAt: rep.tInput! + RepMessage.lateAfterS + 0.01)
        #expect(rep.isLate)
        rep.markLateness(publishedAt: rep.tInput! + RepMessage.lateAfterS - 0.01)
        #expect(!rep.isLate)
        // On the wire as late/late_s, back as lateS.
        var stamper = EnvelopeStamper(program: "test")
        let marked = try #require(late.first)
        let frames = try stamper.encode(marked, station: "rack-01", ts: marked.tInput! + marked.lateS!)
        let body = String(decoding: frames.body, as: UTF8.self)
        #expect(body.contains(#""late":true"#) && body.contains(#""late_s":3"#), "\(body)")
        #expect(try decodeMessage(topic: frames.topic, body: frames.body).payload(as: RepMessage.self) == marked)
    }

    /// A station's laser and bar IMU as a bridge sends them: 5 readings a message each,
    /// interleaved by time; the laser goes quiet from `laserUntil` on.
    static func bothSensors(station: String, laserUntil: Double) -> [SampleMessage] {
        var config = SimulationConfig()
        config.station = station
        config.sets = 2
        config.repsPerSet = 4
        config.restS = 6
        var sensors = SimulatedSensors(config)
        let origin = 1_763_812_345.0
        var messages: [(t: Double, message: SampleMessage)] = []
        var distance: [SampleMessage.DistanceReading] = [], imu: [SampleMessage.IMUReading] = []
        var t = 0.0
        while t <= sensors.timeline.duration {
            if t < laserUntil, Int((t * 100).rounded()) % 2 == 0 { distance.append(sensors.distance(at: t, wallOrigin: origin)) }
            imu.append(sensors.imu(at: t, wallOrigin: origin))
            if distance.count == 5 {
                messages.append((distance[4].t, SampleMessage(.distance(distance))))
                distance.removeAll()
            }
            if imu.count == 5 {
                messages.append((imu[4].t, SampleMessage(.imu(imu))))
                imu.removeAll()
            }
            t += 0.01
        }
        return messages.sorted { $0.t < $1.t }.map(\.message)
    }

    @Test(
        "a bar IMU's readings not built while the laser speaks: the reps are those of the station's detector fed every reading",
        arguments: [1_000.0, 12.0])
    func imuUnbuiltWhileTheLaserSpeaks(laserUntil: Double) throws {
        let (bus, reps, player, runtime, dir) = try Self.withRepSubscriber()
        _ = dir  // kept until the test ends: the detector's patterns file is in it
        let messages = Self.bothSensors(station: "both-1", laserUntil: laserUntil)
        var reference = StationDetector(station: "both-1")
        var expected: [DetectedRep] = []
        var received: [RepMessage] = []
        for message in messages {
            for case .rep(let rep) in reference.feed(message.readings) { expected.append(rep) }
            try player.publish(message, station: "both-1", ts: message.readings.times.max() ?? 0)
            bus.manualClock.advance(0.05)
            for _ in 0..<100 where bus.queued > 0 { try runtime.step(timeoutMs: 0) }
            while let rep = try reps.next(timeoutMs: 0) { received.append(try rep.payload(as: RepMessage.self)) }
        }
        #expect(expected.count >= 6, "the session's reps are found")
        #expect(received.map(\.repId) == expected.map(\.repId))
        #expect(received.map(\.meanVelocityMps) == expected.map(\.measurement.meanVelocityMps))
        #expect(received.map(\.sensor) == expected.map(\.sensor))
        if laserUntil < 100 { #expect(Set(expected.map(\.sensor)) == ["distance", "imu"], "the IMU counts once the laser is quiet") }
        #expect(runtime.inputCounters.malformed == 0)
    }

    @Test("one detector alone counts every rep of the session")
    func alone() throws {
        #expect(try Self.baseline.get().reps.count == Self.session.reps)
    }

    @Test("takeover mid-set, mid-rep and between sets: the rep stream is the one a single detector gives", arguments: 0..<4)
    func takeover(run: Int) throws {
        let session = Self.session.messages
        // 12 moments over the 4 cases, spread over the session (inside reps, between reps, in the rest between sets), 3 swaps a case.
        let moments = Set((0..<3).map { (run + 1) * session.count / 17 + $0 * session.count / 3 })
        let swapped = try Self.run(swapsAt: moments)
        #expect(swapped.detectors == 4)
        #expect(swapped.reps == (try Self.baseline.get().reps), "swaps before messages \(moments.sorted())")
        #expect(swapped.stats.totals.gaps == 0 && swapped.stats.totals.duplicates == 0, "each rep published once")
    }

    @Test("a recorder that never answers stalls nothing: the detector asks for patterns, and every rep comes as it does without asking")
    func silentRecorder() throws {
        // No query server on this bus: the detector's question for patterns goes unanswered.
        let asking = try Self.run(swapsAt: [], askRecorder: true)
        #expect(asking.reps == (try Self.baseline.get().reps))
    }
}
