import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTSensors
@testable import VBTWire

/// A replay's copies spread in time (`sensor-bridge --replay --stations N --stagger S`).
@Suite("replay copies")
struct ReplayTests {
    static let logger = Logger(label: "test.replay") { _ in SwiftLogNoOpLogHandler() }

    @Test("a copy's delay, its group and its group's delay: neighbours share a group, a copy's readings lag it by less than a group's width")
    func staggerGroups() {
        for copies in [1, 2, 3, 63, 64, 65, 334, 1_000] {
            let spread = ReplayStagger(seconds: 2, copies: copies)
            #expect(spread.groups == min(copies, 64))
            #expect(spread.delay(0) == 0 && spread.groupDelay(0) == 0)
            var previous = -1
            for copy in 0..<copies {
                let group = spread.group(copy)
                #expect(group == previous || group == previous + 1, "groups are neighbours, in order (\(copies) copies, copy \(copy))")
                let lag = spread.delay(copy) - spread.groupDelay(group)
                #expect(lag >= 0 && lag < 2 / Double(spread.groups) + 1e-12, "\(copies) copies, copy \(copy): lag \(lag)")
                #expect(spread.isLastOfGroup(copy) == (copy + 1 == copies || spread.group(copy + 1) != group))
                previous = group
            }
            #expect(previous == spread.groups - 1, "every group has copies")
        }
    }

    @Test("a pass lasts the recording, or its readings' span and one reading's interval if longer")
    func passLength() {
        // The readings span 9 s in 10 readings (1 s apart): a pass of 10 s unless the recording runs longer.
        #expect(ReplayStagger.passSeconds(lastMessageT: 9.5, readingSpan: 9, readings: 10) == 10)
        #expect(ReplayStagger.passSeconds(lastMessageT: 12, readingSpan: 9, readings: 10) == 12)
        #expect(ReplayStagger.passSeconds(lastMessageT: 0, readingSpan: 0, readings: 1) == 0.01)
        // The interval a later pass keeps after the previous one's last reading, staggered or not.
        #expect(ReplayStagger.readingStep(readingSpan: 9, readings: 10) == 1)
        #expect(ReplayStagger.readingStep(readingSpan: 0, readings: 0) == 0.01)
    }

    @Test("the timeline starts at the first message kept: commands recorded before the readings delay nothing")
    func leadingLinesLeftOut() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("recording.jsonl")
        // An assignment at 0 s, then the sensor's first readings 6 s later (a recording begun before the sets).
        let lines = [
            #"{"t":0,"topic":"cmd.rack","msg":{"v":1,"type":"cmd","station":"rack","src":"c","seq":1,"ts":94,"id":"a","command":"athlete.assign","target":"*","args":{"athlete":"ana"}}}"#,
            #"{"t":6.05,"topic":"sample.rack","msg":{"v":1,"type":"sample","station":"rack","src":"x","seq":1,"ts":100.05,"sensor":"distance","device":"sim","samples":[{"t":100,"mm":900}]}}"#,
            #"{"t":6.15,"topic":"sample.rack","msg":{"v":1,"type":"sample","station":"rack","src":"x","seq":2,"ts":100.15,"sensor":"distance","device":"sim","samples":[{"t":100.1,"mm":901}]}}"#,
        ]
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let recording = try Recording(path: path, types: ["sample", "status"])
        #expect(recording.skippedTypes == ["cmd": 1])
        // Published at once and 0.1 s later, as their readings (shifted to start now) were taken.
        #expect(abs(recording.messages[1].t - 0.1) < 1e-9 && recording.messages[0].t == 0)
    }

    @Test("staggered copies: each copy publishes the whole recording in order, its readings shifted by its own delay")
    func staggeredCopies() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("recording.jsonl")
        // Ten sample messages of one reading each, 0.1 s apart, and a status message.
        var lines: [String] = []
        for i in 0..<10 {
            let t = 100 + Double(i) / 10
            lines.append(
                #"{"t":\#(Double(i) / 10),"topic":"sample.rack","msg":{"v":1,"type":"sample","station":"rack","src":"x","seq":\#(i + 1),"ts":\#(t),"sensor":"distance","device":"sim","samples":[{"t":\#(t),"mm":\#(900 + i)}]}}"#
            )
        }
        lines.append(
            #"{"t":0.95,"topic":"status.rack","msg":{"v":1,"type":"status","station":"rack","src":"y","seq":1,"ts":101,"sensor":"distance","state":"ok"}}"#)
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let recording = try Recording(path: path, types: ["sample", "status"])
        #expect(recording.messages.count == 11)
        #expect(recording.readings == 10)
        #expect(abs(recording.readingSpan - 0.9) < 1e-9)

        let copies = 4
        let source = ReplaySource(path: path, recording: recording, speed: 20, loop: false, stations: copies, startT: 1_000, stagger: 1)
        let queue = EventQueue()
        source.run(into: queue, stop: StopFlag(), logger: Self.logger)
        var published: [String: [(type: String, fields: JSONObject)]] = [:]
        var finished = 0
        for event in queue.drain() {
            switch event {
            case .message(let type, let station, _, let members):
                guard case .object(let fields) = try JSONParser.parse(Array("{".utf8) + members.bytes + Array("}".utf8)) else {
                    Issue.record("members are not an object")
                    continue
                }
                published[station, default: []].append((type, fields))
            case .finished:
                finished += 1
            default:
                Issue.record("a replay publishes whole messages only: \(event)")
            }
        }
        #expect(finished == 1)
        #expect(published.keys.sorted() == ["rack-1", "rack-2", "rack-3", "rack-4"])
        for copy in 0..<copies {
            let messages = try #require(published["rack-\(copy + 1)"])
            #expect(messages.map(\.type) == Array(repeating: "sample", count: 10) + ["status"], "copy \(copy + 1): every message, in order")
            // Four copies make four groups: each copy's readings are shifted by its own delay, 0.25 s a copy.
            let times = messages.compactMap { message -> Double? in
                guard case .array(let samples)? = message.fields["samples"], case .object(let reading)? = samples.first,
                    case .number(let t)? = reading["t"]
                else { return nil }
                return t
            }
            let expected = (0..<10).map { 1_000 + Double($0) / 10 + Double(copy) * 0.25 }
            #expect(zip(times, expected).allSatisfy { abs($0 - $1) < 1e-6 } && times.count == 10, "copy \(copy + 1): \(times)")
        }
    }

    @Test("a sample written once with its times' places, then shifted, is the message shifted and written whole")
    func shiftableMembers() throws {
        guard
            case .object(let fields) = try JSONParser.parse(
                Array(
                    #"{"v":1,"type":"sample","station":"rack","src":"s","seq":4,"ts":1,"sensor":"imu","device":"wt \"9\"","samples":[{"t":100.000001,"acc":[0.1,-9.8,1e-3],"gyro":[1,2,3]},{"acc":[0,0,1],"t":100.010002},{"t":"late"},7,{"t":100.02}],"note":null}"#
                        .utf8))
        else {
            Issue.record("the test's message is an object")
            return
        }
        let template = ShiftableMembers(fields)
        #expect(template.times == [100.000001, 100.010002, 100.02], "numeric times only")
        for offset in [0, 0.25, 1_795_751_347.118292, -50.5] {
            func parsed(_ members: EncodedMembers) throws -> JSONValue { try JSONParser.parse(Array("{".utf8) + members.bytes + Array("}".utf8)) }
            let whole = try parsed(EncodedMembers(ReplaySource.shifted(fields, by: offset)))
            #expect(try parsed(template.shifted(by: offset)) == whole, "offset \(offset)")
        }
    }
}
