import Foundation
import Logging
import VBTBus
import VBTQuery
import VBTStore
import VBTTesting
import VBTWire

// How fast the session-recorder recovers what it missed: a producer journals
// `messages` sample messages the recorder never receives (a lossy in-memory
// bus), then its heartbeat says how far the stream went; timed from there
// until every one is fetched from the journal and stored. In-process with the
// clock moved by hand, so it measures the work (journal reads, replies,
// decoding, SQLite), not the waits between questions.

/// Messages recovered per second (one stream), over `runs` runs.
func recoveryRates(messages: Int, runs: Int) throws -> [Double] {
    var logger = Logger(label: "vbt-bench")
    logger.logLevel = .critical
    var rates: [Double] = []
    for _ in 0..<runs {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        var settings = StoreSettings()
        settings.path = dir.path("vbt.sqlite")
        let store = try TrainingStore(settings: settings)
        let recorder = try RecorderRuntime(transport: bus, store: store, settings: RecorderSettings(), logger: logger)
        let publisher = try Publisher(transport: bus, program: "sensor-bridge")
        let journal = try ProducerJournal(
            settings: JournalSettings(directory: dir.path("journal")), endpoint: "memory://bench/replay", publisher: publisher, transport: bus)
        var heartbeat = HeartbeatSchedule(role: "sensor-bridge", name: "bridge-bench")
        try heartbeat.tick(publisher, inputs: nil, replay: journal.replay)
        var t = bus.clock.wallSeconds()
        func sample() throws {
            t += 0.02
            try publisher.publish(SampleMessage(.distance([SampleMessage.DistanceReading(t: t, distanceMm: 500)])), station: "bench", ts: t)
        }
        try sample()
        try recorder.step(maxWaitMs: 0)
        bus.drop = { $0.first?.starts(with: Array("sample.".utf8)) == true }
        for _ in 0..<messages { try sample() }
        bus.drop = nil
        try journal.journal.sync()
        bus.manualClock.advance(1)
        let started = monotonicSeconds()
        try heartbeat.tick(publisher, inputs: nil, replay: journal.replay)
        var steps = 0
        while recorder.counters.recovered < messages {
            steps += 1
            precondition(steps < 1_000_000, "recovery stalled at \(recorder.counters.recovered) of \(messages)")
            try recorder.step(maxWaitMs: 0)
            try journal.replay.serve()
            bus.manualClock.advance(0.05)
        }
        rates.append(Double(messages) / (monotonicSeconds() - started))
    }
    return rates
}

/// Reading a range of one stream from a journal of `streams` interleaved (a rep-detector's outputs for a
/// thousand stations, `vbt loadtest --journal`'s replay): each stream's `perStream` records of about 1 KB,
/// then `hole` of each read back. Returns the medians, ms a read, with the exact index and without it
/// (the nearest of every 32nd record, then past every other stream's records: the code before), over
/// `reads` streams each.
func journalRangeReads(streams: Int, perStream: UInt64, hole: UInt64, reads: Int) throws -> (exact: Double, strided: Double) {
    let dir = try TemporaryDirectory()
    let body = Array(String(repeating: "x", count: 1_000).utf8)
    var settings = JournalSettings(directory: dir.path("journal"))
    settings.maxBytes = 4 << 30
    var journal: Journal? = try Journal(settings: settings, instance: "bench-1")
    let names = (1...streams).map { "bench-1/sample.rack-\($0)" }
    let start = wallClockSeconds()  // records older than the journal keeps would be pruned
    for seq in 1...perStream {
        for src in names { try journal!.append(src: src, seq: seq, ts: start + Double(seq) * 0.04, topic: Array("sample".utf8), body: body) }
    }
    try journal!.sync()
    func time(_ reader: Journal) throws -> Double {
        var times: [Double] = []
        for src in names.prefix(reads) {
            let started = monotonicSeconds()
            let records = try reader.read(src: src, from: perStream - hole + 1, to: perStream)
            times.append((monotonicSeconds() - started) * 1_000)
            precondition(records.count == Int(hole), "read \(records.count) of \(hole)")
        }
        return times.sorted()[times.count / 2]
    }
    let exact = try time(journal!)
    journal = nil  // lets go of the folder
    // The same files opened again without the exact index.
    var strided = settings
    strided.exactIndex = false
    let other = try Journal(settings: strided, instance: "bench-2")
    return (exact, try time(other))
}
