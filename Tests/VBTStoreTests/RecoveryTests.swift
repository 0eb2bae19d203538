import Foundation
import GRDB
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTQuery
@testable import VBTStore
@testable import VBTWire

/// The recorder fetching what it missed from a producer's journal, over the
/// in-memory bus (a lossy one), with a real SQLite file.
@Suite("session-recorder recovery, in memory")
struct RecoveryTests {
    /// A journalling producer on `bus`: publishes samples, answers replay, sends heartbeats that offer it.
    final class Producer {
        let publisher: Publisher
        let server: ReplayServer
        var heartbeat = HeartbeatSchedule(role: "sensor-bridge", name: "bridge-rack-01")
        var t: Double

        init(bus: MemoryBus, dir: TemporaryDirectory, settings: ((inout JournalSettings) -> Void)? = nil) throws {
            publisher = try Publisher(transport: bus, program: "sensor-bridge")
            var journal = JournalSettings(directory: dir.path("journal"))
            settings?(&journal)
            publisher.journal = try Journal(settings: journal, instance: publisher.stamper.instance, clock: bus.clock)
            server = try ReplayServer(journal: try #require(publisher.journal), transport: bus, endpoint: "memory://bridge-rack-01/replay")
            t = bus.clock.wallSeconds()
        }

        func samples(_ count: Int, station: String = "rack-01") throws {
            for _ in 0..<count {
                t += 0.02
                try publisher.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: t, distanceMm: 500)])), station: station, ts: t)
            }
        }

        func beat() throws {
            try heartbeat.tick(publisher, inputs: nil, replay: server)
        }
    }

    /// A recorder on a real SQLite file and a journalling producer, on one in-memory bus.
    final class Rig {
        let dir: TemporaryDirectory
        let folder = TempFolder()
        let bus = MemoryBus()
        let store: TrainingStore
        let recorder: RecorderRuntime
        let producer: Producer

        init(settings: RecorderSettings = RecorderSettings()) throws {
            dir = try TemporaryDirectory()
            store = try makeStore(folder)
            recorder = try RecorderRuntime(transport: bus, store: store, settings: settings, logger: quietLogger)
            producer = try Producer(bus: bus, dir: dir)
        }
    }

    /// Steps the recorder and the producer's replay endpoint until nothing changes for a while of the clock.
    static func settle(_ recorder: RecorderRuntime, _ producer: Producer, _ bus: MemoryBus) throws {
        for _ in 0..<100 {
            try recorder.step(maxWaitMs: 0)
            try producer.server.serve()
            bus.manualClock.advance(0.05)
        }
    }

    /// Makes the bus lose the rack's sample messages whose number (from 1) `lost` picks.
    static func dropSamples(_ bus: MemoryBus, _ lost: @escaping (Int) -> Bool) {
        var number = 0
        bus.drop = { frames in
            guard frames.first.map({ String(decoding: $0, as: UTF8.self) }) == "sample.rack-01" else { return false }
            number += 1
            return lost(number)
        }
    }

    static func rows(_ store: TrainingStore) throws -> Int {
        try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM samples") ?? 0 }
    }

    @Test("a hole and a silent tail are fetched from the producer's journal: every reading stored once, none lost")
    func holeAndTail() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        // The network loses samples 30-49 and, after 90, everything until the heartbeat.
        Self.dropSamples(bus) { (30...49).contains($0) || $0 > 90 }
        try producer.samples(100)
        try Self.settle(recorder, producer, bus)
        #expect(try Self.rows(store) == 70, "what arrived live")
        bus.manualClock.advance(1)
        try producer.beat()  // says the stream went to 100
        try Self.settle(recorder, producer, bus)
        #expect(bus.dropped == 30)
        #expect(try Self.rows(store) == 100, "every reading, once")
        #expect(recorder.counters.recovered == 30 && recorder.counters.lost == 0)
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
    }

    @Test("a producer that answers every question after it has timed out still fills the hole: late answers are taken, not dropped")
    func lateAnswers() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        Self.dropSamples(bus) { (30...49).contains($0) }
        try producer.samples(100)
        // The producer answers one question every 7 s of the clock, the oldest first: each answer
        // comes after its question has waited its 5 s (RecorderRecovery.answerTimeoutS) and been asked again.
        var sinceServed = 0.0
        for _ in 0..<400 {
            try producer.beat()  // once a second: offers the journal and says how far the stream went
            try recorder.step(maxWaitMs: 0)
            if sinceServed >= 7 {
                try producer.server.serve(limit: 1)
                sinceServed = 0
            }
            bus.manualClock.advance(0.05)
            sinceServed += 0.05
        }
        #expect(bus.dropped == 20)
        let stored = try Self.rows(store)
        #expect(stored == 100, "every reading, once (\(recorder.counters), \(producer.server.answered) answers)")
        #expect(recorder.counters.recovered == 20 && recorder.counters.lost == 0)
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
    }

    @Test("a posture stream keeps only its changes, yet every message moves its progress: no hole, nothing fetched, nothing lost")
    func postureProgress() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        // 60 readings of posture, a change every 10th (the evaluator's live stream).
        var t = bus.clock.wallSeconds()
        for index in 1...60 {
            t += 0.02
            let change = index % 10 == 0
            let message = PostureMessage(
                correct: index % 20 != 0, changed: change, accDensity: 1, magDensity: 1, accThreshold: 2, magThreshold: 2,
                badForS: 0, sustainedBad: false, t: t)
            try producer.publisher.publish(message, station: "rack-01", ts: t)
        }
        try Self.settle(recorder, producer, bus)
        bus.manualClock.advance(1)
        try producer.beat()
        try Self.settle(recorder, producer, bus)
        let changes = try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM posture_changes") }
        #expect(changes == 6, "only the changes are history")
        let lastSeq = try store.read { db in try Int.fetchOne(db, sql: "SELECT last_seq FROM sources WHERE topic = 'posture.rack-01'") }
        #expect(lastSeq == 60)
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
        #expect(recorder.counters.recovered == 0 && recorder.counters.lost == 0)
        #expect(recorder.counters.ignored >= 54)
    }

    @Test("a producer's streams of types the recorder does not keep (sensor status) are not tracked: no tail, no hole, only the kept ones fetched")
    func unkeptStreams() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        // The network loses everything after the 40th message; the heartbeat says what was sent.
        var number = 0
        bus.drop = { frames in
            guard frames.first.map({ String(decoding: $0, as: UTF8.self).hasPrefix("heartbeat.") }) == false else { return false }
            number += 1
            return number > 40
        }
        for state in [StatusMessage.State.connecting, .streaming] {
            try producer.publisher.publish(StatusMessage(state: state, sensor: "distance", device: "sim"), station: "rack-01")
        }
        try producer.samples(60)
        try producer.publisher.publish(StatusMessage(state: .disconnected, sensor: "distance", device: "sim", reason: "cable"), station: "rack-01")
        try Self.settle(recorder, producer, bus)
        bus.manualClock.advance(1)
        try producer.beat()
        try Self.settle(recorder, producer, bus)
        #expect(try Self.rows(store) == 60, "every reading, once")
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty, "no hole for the status stream")
        let tracked = try store.read { db in try String.fetchAll(db, sql: "SELECT topic FROM sources ORDER BY topic") }
        #expect(tracked == ["sample.rack-01"])
        #expect(recorder.counters.recovered == 22 && recorder.counters.lost == 0)
    }

    @Test("two heartbeats of a stream's growing silent tail before the recorder writes: one tail, fetched whole")
    func growingTail() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        try producer.samples(10)
        try Self.settle(recorder, producer, bus)
        bus.drop = { frames in frames.first.map { String(decoding: $0, as: UTF8.self).hasPrefix("sample.") } == true }
        for _ in 0..<2 {
            try producer.samples(10)
            bus.manualClock.advance(1)
            try producer.beat()
        }
        bus.drop = nil
        try Self.settle(recorder, producer, bus)
        #expect(try Self.rows(store) == 30, "every reading, once")
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
        #expect(recorder.counters.recovered == 20 && recorder.counters.lost == 0)
    }

    @Test("a forged message with a stream's src and a huge seq does not silence the stream: nothing counted lost, every real reading stored")
    func hostileSeq() throws {
        let rig = try Rig()
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        try producer.samples(10)
        try Self.settle(recorder, producer, bus)
        // An attacker copies the stream's src (visible on the bus) with seq 2^53 - 1.
        let journal = try #require(producer.publisher.journal)
        let src = try #require(journal.streams.keys.first { $0.hasSuffix("/sample.rack-01") })
        let original = try #require(try journal.read(src: src, from: 1, to: 1).first)
        let forgedBody = String(decoding: original.body, as: UTF8.self).replacingOccurrences(of: "\"seq\":1,", with: "\"seq\":9007199254740991,")
        #expect(forgedBody.contains("9007199254740991"))
        try bus.publisherLink(lingerMs: 0).send(topic: original.topic, body: Array(forgedBody.utf8))
        try producer.samples(20)
        bus.manualClock.advance(1)
        try producer.beat()
        try Self.settle(recorder, producer, bus)
        bus.manualClock.advance(10)
        try Self.settle(recorder, producer, bus)
        try producer.samples(10)
        bus.manualClock.advance(1)
        try producer.beat()
        try Self.settle(recorder, producer, bus)
        #expect(recorder.counters.lost == 0, "nothing the producer has not published is counted lost")
        // The 40 real readings, and the forged copy of the first (authentication, not this, keeps it out).
        let rows = try Self.rows(store)
        #expect(rows == 41, "every real reading stored, also those after the forgery: \(rows) \(recorder.counters)")
    }

    @Test("after the recorder's own restart it fetches what it missed while down; what the journal no longer holds is counted lost, exactly")
    func restartAndRetention() throws {
        let dir = try TemporaryDirectory()
        let folder = TempFolder()
        let bus = MemoryBus()
        let store = try makeStore(folder)
        let producer = try Producer(bus: bus, dir: dir) {
            $0.segmentBytes = 4_096
            $0.maxBytes = 12_288
        }
        do {
            let recorder = try RecorderRuntime(transport: bus, store: store, settings: RecorderSettings(), logger: quietLogger)
            try producer.beat()
            try producer.samples(20)
            try Self.settle(recorder, producer, bus)
            #expect(try Self.rows(store) == 20)
        }
        // The recorder is down: 400 samples go by, more than the journal keeps.
        try producer.samples(400)
        let kept = try #require(producer.publisher.journal?.streams.values.first)
        #expect(kept.lowerBound > 21, "the journal dropped some of what the recorder missed")
        let again = try RecorderRuntime(transport: bus, store: store, settings: RecorderSettings(), logger: quietLogger)
        let heartbeats = try Subscriber(transport: bus, prefixes: [HeartbeatMessage.topic(station: "session-recorder")], logger: quietLogger)
        bus.manualClock.advance(1)
        try producer.beat()
        try Self.settle(again, producer, bus)
        let lost = Int(kept.lowerBound) - 21
        #expect(again.counters.lost == lost, "samples 21-\(kept.lowerBound - 1) are gone, and counted")
        var said: Int?
        while let beat = try heartbeats.next(timeoutMs: 0) { said = try beat.payload(as: HeartbeatMessage.self).inputs?.lost }
        #expect(said == lost, "the recorder's heartbeat says so (the notifier turns it into an alert)")
        let stored = try Self.rows(store)
        #expect(stored == 420 - lost, "kept \(kept), counters \(again.counters)")
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
    }

    @Test(
        "the database locked for long: the backlog is bounded in memory, what is dropped from it is fetched from the journal once the lock goes; every reading once"
    )
    func boundedBacklog() throws {
        var settings = RecorderSettings()
        settings.maxPending = 100
        let rig = try Rig(settings: settings)
        let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
        try producer.beat()
        try producer.samples(10)
        try Self.settle(recorder, producer, bus)
        #expect(try Self.rows(store) == 10)

        // Another connection holds the write lock (as another process would).
        let other = try DatabaseQueue(path: store.settings.path)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? other.write { db in
                try db.execute(sql: "INSERT INTO athletes (id, name, created_ts) VALUES ('lock', 'Lock', 1)")
                held.signal()
                release.wait()
                throw CancellationError()  // roll back
            }
            done.signal()
        }
        held.wait()
        // rack-01 then stops; rack-02 goes on: every one of rack-01's queued readings is dropped from memory (a silent tail).
        try producer.samples(140)
        try producer.samples(150, station: "rack-02")
        for _ in 0..<20 {
            try recorder.step(maxWaitMs: 0)
            bus.manualClock.advance(0.05)
        }
        #expect(recorder.counters.droppedSamples > 0, "the backlog was held to its bound: \(recorder.counters)")
        release.signal()
        done.wait()
        bus.manualClock.advance(6)  // past the longest retry delay
        try producer.beat()  // says how far the stream went
        try Self.settle(recorder, producer, bus)
        try producer.beat()
        try Self.settle(recorder, producer, bus)
        #expect(try Self.rows(store) == 300, "every reading, once: \(recorder.counters)")
        #expect(recorder.counters.lost == 0 && recorder.counters.recovered > 0)
        #expect(try Ingestor(store: store, logger: quietLogger).streamHoles().isEmpty)
    }
}

extension RecoveryTests {
    @Test("a hole in a stream whose producer's heartbeat offers no journal is given up, counted lost; with no heartbeat at all, after 30 s")
    func journallessHoleGivenUp() throws {
        for heard in [true, false] {
            let rig = try Rig()
            let (bus, store, recorder, producer) = (rig.bus, rig.store, rig.recorder, rig.producer)
            // The producer's heartbeat without an offer: it keeps no journal (a replay's, `bridge-replay`).
            if heard { try producer.heartbeat.tick(producer.publisher, inputs: nil, replay: nil) }
            Self.dropSamples(bus) { (30...49).contains($0) }
            try producer.samples(100)
            try Self.settle(recorder, producer, bus)
            #expect(try Self.rows(store) == 80, "what arrived live")
            let ingestor = Ingestor(store: store, logger: quietLogger)
            if heard {
                #expect(recorder.counters.lost == 20 && recorder.counters.recovered == 0, "\(recorder.counters)")
                #expect(try ingestor.streamHoles().isEmpty && ingestor.outstanding == 0)
                let lost = try store.read { db in try Int.fetchOne(db, sql: "SELECT sum(lost) FROM sources") }
                #expect(lost == 20, "written with the stream")
            } else {
                #expect(recorder.counters.lost == 0, "\(recorder.counters)")
                #expect(ingestor.outstanding == 20, "waited for a producer to offer it")
                bus.manualClock.advance(HolePatience.history.unknownProducerS)
                try Self.settle(recorder, producer, bus)
                #expect(recorder.counters.lost == 20, "none did: given up, counted (\(recorder.counters))")
                #expect(try Ingestor(store: store, logger: quietLogger).outstanding == 0)
            }
        }
    }

    /// Runs the recorder for `seconds` of the clock in 50 ms steps; the producer beats once a
    /// second when `heard`, and answers replay when `answers`.
    static func run(_ rig: Rig, seconds: Double, heard: Bool, answers: Bool) throws {
        for step in 0..<Int(seconds / 0.05) {
            if heard, step % 20 == 0 { try rig.producer.beat() }
            try rig.recorder.step(maxWaitMs: 0)
            if answers { try rig.producer.server.serve() }
            rig.bus.manualClock.advance(0.05)
        }
    }

    /// The recorder's heartbeat's `inputs.lost` (what the notifier turns into a data-lost alert).
    static func heartbeatLost(_ rig: Rig, _ heartbeats: Subscriber) throws -> Int? {
        var said: Int?
        while let beat = try heartbeats.next(timeoutMs: 0) { said = try beat.payload(as: HeartbeatMessage.self).inputs?.lost }
        return said
    }

    @Test(
        "a producer heard while its replay endpoint answers nothing (an ipc:// endpoint on another computer): its hole is counted lost after 30 s, and the heartbeat says so"
    )
    func heardButUnansweredGivenUp() throws {
        let rig = try Rig()
        let heartbeats = try Subscriber(transport: rig.bus, prefixes: [HeartbeatMessage.topic(station: "session-recorder")], logger: quietLogger)
        try rig.producer.beat()
        Self.dropSamples(rig.bus) { (30...49).contains($0) }
        try rig.producer.samples(100)
        try Self.run(rig, seconds: 20, heard: true, answers: false)
        #expect(rig.recorder.counters.lost == 0, "still waited for after 20 s (\(rig.recorder.counters))")
        #expect(try Ingestor(store: rig.store, logger: quietLogger).outstanding == 20)
        try Self.run(rig, seconds: 15, heard: true, answers: false)
        #expect(rig.recorder.counters.lost == 20, "\(rig.recorder.counters)")
        #expect(try Ingestor(store: rig.store, logger: quietLogger).outstanding == 0, "no hole left outstanding")
        #expect(try Self.heartbeatLost(rig, heartbeats) == 20)
    }

    @Test(
        "a producer neither heard nor answering (a partitioned station) is waited for: back after 10 minutes, its hole is fetched whole; silent past the journal's 30 minutes, counted lost"
    )
    func silentProducerWaitedForWithinRetention() throws {
        for back in [true, false] {
            let rig = try Rig()
            try rig.producer.beat()
            Self.dropSamples(rig.bus) { (30...49).contains($0) }
            try rig.producer.samples(100)
            rig.bus.manualClock.advance(1)
            try rig.producer.beat()  // offers the stream's journal
            try Self.run(rig, seconds: 1, heard: false, answers: false)
            // The link is down: nothing heard, nothing answered, the recorder asking all along.
            for _ in 0..<(back ? 10 : 31) {
                rig.bus.manualClock.advance(59)
                try Self.run(rig, seconds: 1, heard: false, answers: false)
            }
            if back {
                #expect(rig.recorder.counters.lost == 0, "waited for (\(rig.recorder.counters))")
                try Self.run(rig, seconds: 10, heard: true, answers: true)
                #expect(rig.recorder.counters.recovered == 20 && rig.recorder.counters.lost == 0, "\(rig.recorder.counters)")
                #expect(try Self.rows(rig.store) == 100, "every reading, once")
            } else {
                #expect(rig.recorder.counters.lost == 20, "given up past the journal's retention (\(rig.recorder.counters))")
            }
            #expect(try Ingestor(store: rig.store, logger: quietLogger).outstanding == 0)
        }
    }
}
