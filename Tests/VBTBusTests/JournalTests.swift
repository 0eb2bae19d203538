import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// The producers' journal: real files in a folder of the test's own.
@Suite("Journal")
struct JournalTests {
    static func body(_ src: String, _ seq: UInt64) -> [UInt8] {
        Array("{\"src\":\"\(src)\",\"seq\":\(seq),\"pad\":\"\(String(repeating: "x", count: 40))\"}".utf8)
    }

    static func fill(_ journal: Journal, streams: [String], count: UInt64, clock: ManualClock) throws {
        for seq in 1...count {
            for src in streams {
                try journal.append(src: src, seq: seq, ts: clock.wallSeconds(), topic: Array("sample.\(src)".utf8), body: body(src, seq))
            }
            clock.advance(0.01)
        }
        try journal.sync()
    }

    @Test("a range of a stream reads back in order, byte for byte; a restarted producer still answers for the streams before it")
    func rangesAndRestart() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        do {
            let journal = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: "bridge-1", clock: clock)
            try Self.fill(journal, streams: ["a", "b", "c"], count: 500, clock: clock)
            let range = try journal.read(src: "b", from: 100, to: 199)
            #expect(range.map(\.seq) == Array(100...199))
            #expect(range.allSatisfy { $0.body == Self.body("b", $0.seq) && $0.topic == Array("sample.b".utf8) })
            #expect(try journal.read(src: "b", from: 490, to: 600).count == 11, "a range past the end gives what there is")
            #expect(try journal.read(src: "b", from: 1, to: 500, limit: 7).map(\.seq) == Array(1...7))
            #expect(try journal.read(src: "z", from: 1, to: 10).isEmpty)
        }
        // The next process start: another instance, the same folder.
        let again = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: "bridge-2", clock: clock)
        #expect(again.streams["a"] == 1...500 && again.streams.count == 3)
        try again.append(src: "d", seq: 1, ts: clock.wallSeconds(), topic: Array("sample.d".utf8), body: Self.body("d", 1))
        #expect(try again.read(src: "a", from: 499, to: 500).map(\.seq) == [499, 500])
        #expect(try again.read(src: "d", from: 1, to: 1).map(\.seq) == [1], "what is only buffered is read too")
        #expect(again.repairedBytes == 0)
    }

    @Test("many streams interleaved over several files: every range reads back exactly, from the file being written, closed files and a restarted producer's")
    func manyStreams() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let streams = (1...40).map { "bridge-replay/sample.rack-\($0)" }
        var settings = JournalSettings(directory: dir.path("j"))
        settings.segmentBytes = 64 << 10  // about 25 files for what follows
        func check(_ journal: Journal, _ label: String) throws {
            for (number, src) in streams.enumerated() {
                let from = UInt64(1 + number * 7), to = UInt64(1 + number * 7 + 90)
                let range = try journal.read(src: src, from: from, to: to)
                #expect(range.map(\.seq) == Array(from...to), "\(label): \(src)")
                #expect(range.allSatisfy { $0.src == src && $0.body == Self.body(src, $0.seq) }, "\(label): \(src)")
            }
            #expect(try journal.read(src: streams[3], from: 1, to: 400, limit: 50).map(\.seq) == Array(1...50), "\(label)")
            #expect(try journal.read(src: streams[5], from: 395, to: 500).map(\.seq) == Array(395...400), "\(label): past the end")
        }
        do {
            let journal = try Journal(settings: settings, instance: "bridge-1", clock: clock)
            try Self.fill(journal, streams: streams, count: 400, clock: clock)
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir.path("j")).filter { $0.hasSuffix(".journal") }).count > 10)
            try check(journal, "written by this process")
            try check(journal, "read again (the closed files' indexes kept or built again)")
        }
        let again = try Journal(settings: settings, instance: "bridge-2", clock: clock)
        try check(again, "a restarted producer")
        #expect(again.repairedBytes == 0)
    }

    @Test("an appended message is in the file at once, before any sync: a producer killed right after sending it leaves it journalled")
    func writeThrough() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let journal = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: "bridge-1", clock: clock)
        for seq in 1...3 {
            try journal.append(src: "a", seq: UInt64(seq), ts: clock.wallSeconds(), topic: Array("sample.a".utf8), body: Self.body("a", UInt64(seq)))
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path("j")).filter { $0.hasSuffix(".journal") }
        let onFile = try names.reduce(0) { total, name in
            total + ((try FileManager.default.attributesOfItem(atPath: dir.path("j") + "/" + name)[.size] as? Int) ?? 0)
        }
        #expect(onFile == journal.totalBytes && onFile > 3 * Self.body("a", 1).count, "the kernel has every record without a sync")
    }

    @Test("a torn tail (a crash mid-write) and a corrupt record are cut off at open; every whole record before them reads back")
    func tornTail() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        let folder = dir.path("j")
        do {
            let journal = try Journal(settings: JournalSettings(directory: folder), instance: "p-1", clock: clock)
            try Self.fill(journal, streams: ["a"], count: 100, clock: clock)
        }
        let file = folder + "/p-1-1.journal"
        let whole = try Data(contentsOf: URL(fileURLWithPath: file))
        // Half of the last record is missing.
        try whole.prefix(whole.count - 30).write(to: URL(fileURLWithPath: file))
        do {
            let reopened = try Journal(settings: JournalSettings(directory: folder), instance: "p-2", clock: clock)
            #expect(reopened.repairedBytes > 0)
            #expect(try reopened.read(src: "a", from: 1, to: 100).map(\.seq) == Array(1...99))
        }
        // One flipped byte inside record 50: it and everything after it in that file are not trusted.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let recordSize = bytes.count / 99
        bytes[49 * recordSize + 40] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let repaired = try Journal(settings: JournalSettings(directory: folder), instance: "p-3", clock: clock)
        #expect(try repaired.read(src: "a", from: 1, to: 100).map(\.seq) == Array(1...49))
    }

    @Test("bounded by size and by age: the oldest files go first, and what the journal holds says so")
    func retention() throws {
        let dir = try TemporaryDirectory()
        let clock = ManualClock()
        var settings = JournalSettings(directory: dir.path("j"))
        settings.segmentBytes = 8 * 1024
        settings.maxBytes = 32 * 1024
        settings.maxAgeS = 60
        let journal = try Journal(settings: settings, instance: "p-1", clock: clock)
        try Self.fill(journal, streams: ["a"], count: 2_000, clock: clock)
        #expect(journal.pruned > 0)
        #expect(journal.totalBytes <= settings.maxBytes + settings.segmentBytes)
        let kept = try #require(journal.streams["a"])
        #expect(kept.lowerBound > 1 && kept.upperBound == 2_000, "the oldest readings are gone, the newest kept: \(kept)")
        #expect(try journal.read(src: "a", from: 1, to: kept.lowerBound - 1).isEmpty)
        // Two minutes later only the file being written is left.
        clock.advance(120)
        try journal.append(src: "a", seq: 2_001, ts: clock.wallSeconds(), topic: Array("sample.a".utf8), body: Self.body("a", 2_001))
        clock.advance(1)
        try journal.tick()
        #expect(journal.streams["a"]?.lowerBound ?? 0 > 1_900)
    }

    @Test("the records' checksum is CRC-32 (IEEE): the standard check value, and one flipped bit always changes it")
    func checksum() {
        let check = Array("123456789".utf8)
        #expect(check.withUnsafeBufferPointer { CRC32.checksum($0) } == 0xCBF4_3926)
        var state: UInt64 = 42
        let bytes = (0..<1_000).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        // Every length (the 8-byte steps and the byte-at-a-time tail) against the plain bitwise definition.
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 999] {
            var crc: UInt32 = 0xFFFF_FFFF
            for byte in bytes.prefix(length) {
                crc ^= UInt32(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
            }
            #expect(bytes.withUnsafeBufferPointer { CRC32.checksum(UnsafeBufferPointer(rebasing: $0[..<length])) } == crc ^ 0xFFFF_FFFF, "length \(length)")
        }
        var flipped = bytes
        flipped[500] ^= 0x10
        #expect(bytes.withUnsafeBufferPointer { CRC32.checksum($0) } != flipped.withUnsafeBufferPointer { CRC32.checksum($0) })
    }

    @Test("one process per folder: a second journal on it is refused, saying why")
    func oneWriter() throws {
        let dir = try TemporaryDirectory()
        let first = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: "p-1")
        #expect(first.appended == 0)
        do {
            _ = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: "p-2")
            Issue.record("two journals shared a folder")
        } catch {
            #expect(error.description.contains("in use by another process"))
        }
    }

    @Test("a publisher with a journal journals exactly what it sends, under the message's own src and seq")
    func publisherJournal() throws {
        let dir = try TemporaryDirectory()
        let bus = MemoryBus()
        let logger = Logger(label: "test.journal") { _ in SwiftLogNoOpLogHandler() }
        let subscriber = try Subscriber(transport: bus, prefixes: ["status."], logger: logger)
        let publisher = try Publisher(transport: bus, program: "sensor-bridge")
        publisher.journal = try Journal(settings: JournalSettings(directory: dir.path("j")), instance: publisher.stamper.instance, clock: bus.clock)
        for _ in 0..<5 { try publisher.publish(StatusMessage(state: .streaming, sensor: "distance", device: "/dev/ttyACM0", rateHz: 50), station: "rack-01") }
        var received: [BusMessage] = []
        while let message = try subscriber.next(timeoutMs: 0) { received.append(message) }
        #expect(received.count == 5)
        let src = try #require(received.first?.envelope.src)
        let journalled = try #require(publisher.journal).read(src: src, from: 1, to: 5)
        #expect(journalled.map(\.seq) == received.map(\.envelope.seq))
        #expect(journalled.map(\.body) == received.map(\.body))
    }
}
