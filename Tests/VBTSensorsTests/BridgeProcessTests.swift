import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTSensors
@testable import VBTWire

/// End-to-end tests of the real `sensor-bridge` process on the real bus.
@Suite("sensor-bridge processes", .serialized)
struct BridgeProcessTests {
    /// A bus process plus an in-test subscriber on it.
    final class Rig {
        let dir: TemporaryDirectory
        let config = freeBusConfig()
        let bus: ManagedProcess
        let context = ZMQContext()
        let subscriber: Subscriber
        var messages: [BusMessage] = []
        private(set) var sampleList: [SampleMessage] = []
        private(set) var statusList: [StatusMessage] = []
        private(set) var readingCount = 0

        init(prefixes: [String]) throws {
            dir = try TemporaryDirectory()
            bus = try ManagedProcess("vbt-bus", ["--heartbeat-interval", "0.1"], environment: config.environmentVariables, workDirectory: dir.url)
            subscriber = try #require(
                try connectedSubscriber(context: context, config: config, prefixes: prefixes),
                "bus did not start: \(bus.stderrText)")
        }

        func bridge(_ arguments: [String]) throws -> ManagedProcess {
            try ManagedProcess("sensor-bridge", arguments, environment: config.environmentVariables, workDirectory: dir.url)
        }

        /// Receives until `condition` holds on what arrived so far.
        @discardableResult
        func receive(timeoutS: Double = 30, until condition: ([BusMessage]) -> Bool) throws -> Bool {
            try waitUntil(timeoutS: timeoutS, intervalS: 0) {
                if let message = try subscriber.next(timeoutMs: 50) {
                    messages.append(message)
                    if let sample = try? message.payload(as: SampleMessage.self) {
                        sampleList.append(sample)
                        readingCount += sample.readings.count
                    }
                    if let status = try? message.payload(as: StatusMessage.self) { statusList.append(status) }
                }
                return condition(messages)
            }
        }

        func statuses() -> [StatusMessage] { statusList }
        func samples() -> [SampleMessage] { sampleList }

        deinit { _ = bus.terminate() }
    }

    @Test("serial WitMotion: device bytes with garbage through a pseudo-terminal become sample messages")
    func serialWitMotion() throws {
        let rig = try Rig(prefixes: ["sample.pty-1", "status.pty-1"])
        let pty = try PseudoTerminal()
        let bridge = try rig.bridge(["--station", "pty-1", "--serial", pty.slavePath, "--protocol", "witmotion"])
        #expect(try rig.receive { _ in rig.statuses().contains { $0.state == .connected } }, "no connected status: \(bridge.stderrText)")

        let raws: [[Int16]] = (0..<5).map { k in (0..<9).map { Int16(truncatingIfNeeded: (k + 1) * 3000 * ($0 % 2 == 0 ? 1 : -1) + $0) } }
        var badChecksum = Bytes.serialFrame(0x51, [1, 2, 3, 4])
        badChecksum[10] &+= 1
        var stream: [UInt8] = [0x00, 0xFF, 0x55]  // garbage, including a lone header byte
        for raw in raws { stream += Bytes.packet61(raw) + [0x13, 0x37] }
        stream += badChecksum
        stream +=
            Bytes.serialFrame(0x51, [16384, 0, -2048, 0]) + Bytes.serialFrame(0x52, [0, 32767, 0, 0])
            + Bytes.serialFrame(0x53, [0, 0, -32768, 0])
        // Written in uneven pieces, as a USB serial driver delivers them.
        for start in stride(from: 0, to: stream.count, by: 7) { pty.write(Array(stream[start..<min(start + 7, stream.count)])) }

        let expected: [SampleMessage.IMUReading] =
            raws.map { raw in
                .init(
                    t: 0, accG: Vector3(Double(raw[0]) / 32768 * 16, Double(raw[1]) / 32768 * 16, Double(raw[2]) / 32768 * 16),
                    gyroDps: Vector3(Double(raw[3]) / 32768 * 2000, Double(raw[4]) / 32768 * 2000, Double(raw[5]) / 32768 * 2000),
                    angleDeg: Vector3(Double(raw[6]) / 32768 * 180, Double(raw[7]) / 32768 * 180, Double(raw[8]) / 32768 * 180))
            } + [.init(t: 0, accG: Vector3(8, 0, -1), gyroDps: Vector3(0, 32767.0 / 32768 * 2000, 0), angleDeg: Vector3(0, 0, -180))]
        func imuReadings() -> [SampleMessage.IMUReading] {
            rig.samples().flatMap { sample -> [SampleMessage.IMUReading] in
                if case .imu(let list) = sample.readings { return list }
                return []
            }
        }
        #expect(try rig.receive { _ in imuReadings().count >= expected.count })
        let readings = imuReadings()
        #expect(readings.count == expected.count)
        for (got, want) in zip(readings, expected) {
            #expect(got.accG == want.accG && got.gyroDps == want.gyroDps && got.angleDeg == want.angleDeg)
        }
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0.t < $1.t }, "host timestamps increase")
        #expect(rig.samples().allSatisfy { $0.device == pty.slavePath })

        // The device goes away: reported, and the bridge keeps running.
        pty.closeAll()
        #expect(try rig.receive { _ in rig.statuses().contains { $0.state == .disconnected && ($0.reason ?? "").contains("check the USB cable") } })
        #expect(bridge.isRunning)
        #expect(bridge.terminate() == 0)
        #expect(rig.subscriber.stats.totals.gaps == 0)
    }

    @Test("serial Arduino distance lines, bad lines skipped")
    func serialArduino() throws {
        let rig = try Rig(prefixes: ["sample.pty-2", "status.pty-2"])
        let pty = try PseudoTerminal()
        let bridge = try rig.bridge(["--station", "pty-2", "--serial", pty.slavePath, "--protocol", "arduino-distance", "--baud", "115200"])
        #expect(try rig.receive { _ in rig.statuses().contains { $0.state == .connected } }, "no connected status: \(bridge.stderrText)")
        pty.write(Array("\u{00}garbage\nD:523,S:IDLE,A:0.01,-0.02,0.98\r\nD:abc\nD:350.5,S:ECCENTRIC\nD:135,S:CONCENTRIC,A:0,0,1.5\n".utf8))
        func distances() -> [SampleMessage.DistanceReading] {
            rig.samples().flatMap { sample -> [SampleMessage.DistanceReading] in
                if case .distance(let list) = sample.readings { return list }
                return []
            }
        }
        #expect(try rig.receive { _ in distances().count >= 3 })
        let readings = distances()
        #expect(readings.map(\.distanceMm) == [523, 350.5, 135])
        #expect(readings.map(\.state) == [.idle, .eccentric, .concentric])
        #expect(readings.first?.accG == Vector3(0.01, -0.02, 0.98))
        #expect(bridge.terminate() == 0)
    }

    @Test("a missing serial device is reported in one line and retried; a wrong flag exits non-zero")
    func missingDevice() throws {
        let rig = try Rig(prefixes: ["status.pty-3"])
        let bridge = try rig.bridge(["--station", "pty-3", "--serial", "/dev/ttyUSB-vbt-missing", "--protocol", "witmotion"])
        #expect(try rig.receive { _ in rig.statuses().filter { $0.state == .disconnected }.count >= 2 })
        let reason = rig.statuses().first { $0.state == .disconnected }?.reason ?? ""
        #expect(reason.contains("not found") && reason.contains("plug the sensor in"))
        #expect(bridge.isRunning, "the bridge keeps retrying instead of dying")
        #expect(
            bridge.stderrText.components(separatedBy: "Serial device /dev/ttyUSB-vbt-missing not found").count - 1 == 1,
            "the same problem is logged once, not on every retry")
        #expect(bridge.terminate() == 0)

        for arguments in [
            ["--station", "x"], ["--serial", "/dev/null", "--station", "x"], ["--simulate"],
            ["--simulate", "--station", "x", "--exercise", "curl"], ["--ble", "fitbit", "--station", "x"],
            ["--replay", "f", "--simulate", "--station", "x"], ["--simulate", "--station", "x", "--t0", "-1"],
            ["--serial", "/dev/null", "--protocol", "witmotion", "--station", "x", "--t0", "1700000000"],
        ] {
            let wrong = try rig.bridge(arguments)
            let code = wrong.waitForExit(timeoutS: 20)
            #expect(code != nil && code != 0, "\(arguments) should fail")
        }
    }

    /// Writes a small recording: two stations, distance samples 20 ms apart, a status, and a heartbeat.
    static func writeRecording(_ path: String) throws -> (readings: Int, intervals: [Double]) {
        var lines: [String] = []
        var t0 = 1_700_000_000.0
        var readingTimes: [Double] = []
        lines.append(
            #"{"t":0.0,"topic":"heartbeat.bus","msg":{"v":1,"type":"heartbeat","station":"bus","src":"old-bus/heartbeat.bus","seq":1,"ts":1700000000.0,"role":"vbt-bus","uptime_s":1,"interval_s":1}}"#
        )
        lines.append(
            #"{"t":0.001,"topic":"status.rack-01","msg":{"v":1,"type":"status","station":"rack-01","src":"old/status.rack-01","seq":1,"ts":1700000000.0,"state":"connected","sensor":"distance","device":"sim"}}"#
        )
        for index in 0..<40 {
            let station = index % 2 == 0 ? "rack-01" : "rack-02"
            var samples: [String] = []
            for _ in 0..<3 {
                samples.append(String(format: #"{"t":%.6f,"distance_mm":%.1f}"#, t0, 300 + Double(index)))
                readingTimes.append(t0)
                t0 += 0.02
            }
            lines.append(
                String(
                    format:
                        #"{"t":%.3f,"topic":"sample.%@","msg":{"v":1,"type":"sample","station":"%@","src":"old/sample.%@","seq":%d,"ts":1700000000.5,"athlete":"ana","sensor":"distance","samples":[%@]}}"#,
                    0.01 + Double(index) * 0.06, station, station, station, index / 2 + 1, samples.joined(separator: ",")))
        }
        try lines.joined(separator: "\n").appending("\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (readingTimes.count, zip(readingTimes, readingTimes.dropFirst()).map { $1 - $0 })
    }

    @Test("replay at full speed: every reading once, fresh src/seq/ts, recorded intervals kept")
    func replayOnce() throws {
        let rig = try Rig(prefixes: ["sample.", "status."])
        let path = rig.dir.path("session.jsonl")
        let (count, intervals) = try Self.writeRecording(path)
        let started = wallClockSeconds()
        let bridge = try rig.bridge(["--replay", path, "--speed", "0"])
        #expect(bridge.waitForExit(timeoutS: 60) == 0, "\(bridge.stderrText)")
        #expect(
            try rig.receive(timeoutS: 10) { messages in
                rig.readingCount >= count && messages.contains { $0.envelope.type == "status" }
            })
        let samples = rig.messages.filter { $0.envelope.type == "sample" }
        let times = rig.samples().flatMap { sample -> [Double] in
            if case .distance(let list) = sample.readings { return list.map(\.t) }
            return []
        }
        #expect(times.count == count, "every reading exactly once")
        for (got, want) in zip(zip(times, times.dropFirst()).map { $1 - $0 }, intervals) {
            #expect(abs(got - want) < 2e-6, "intervals are sensor time and survive replay")
        }
        #expect(abs((times.first ?? 0) - started) < 5, "the recording starts now")
        #expect(Set(samples.map(\.envelope.src)).allSatisfy { $0.hasPrefix("sensor-bridge-") }, "fresh src")
        #expect(samples.allSatisfy { $0.envelope.ts >= started - 1 }, "fresh ts")
        for station in ["rack-01", "rack-02"] {
            #expect(samples.filter { $0.envelope.station == station }.map(\.envelope.seq) == Array(1...20), "fresh seq per stream")
        }
        #expect(samples.allSatisfy { $0.envelope.athlete == "ana" })
        #expect(!rig.messages.contains { $0.envelope.src.hasPrefix("old") })
        #expect(bridge.stderrText.contains("other_types=heartbeat=1"))
    }

    @Test("replay with --t0: the recording's first reading is placed at T, and two replays give the same reading times")
    func replayAtT0() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("session.jsonl")
        let (count, intervals) = try Self.writeRecording(path)
        let t0 = (wallClockSeconds() - 600).rounded()
        var runs: [[Double]] = []
        for _ in 0..<2 {
            let rig = try Rig(prefixes: ["sample.", "status."])  // the recording's first message is a status
            let bridge = try rig.bridge(["--replay", path, "--speed", "0", "--t0", "\(t0)"])
            #expect(bridge.waitForExit(timeoutS: 60) == 0, "\(bridge.stderrText)")
            #expect(try rig.receive(timeoutS: 10) { _ in rig.readingCount >= count })
            runs.append(
                rig.samples().flatMap { sample -> [Double] in
                    if case .distance(let list) = sample.readings { return list.map(\.t) }
                    return []
                })
        }
        #expect(runs[0].count == count && runs[0] == runs[1], "the same reading times in both replays")
        #expect(abs((runs[0].first ?? 0) - t0) < 1e-6, "the recording starts at --t0")
        for (got, want) in zip(zip(runs[0], runs[0].dropFirst()).map { $1 - $0 }, intervals) {
            #expect(abs(got - want) < 2e-6, "intervals are sensor time and survive replay")
        }
    }

    @Test("replay with --stations 50 publishes 50 renamed copies of every station")
    func replayStations() throws {
        let rig = try Rig(prefixes: ["sample."])
        let path = rig.dir.path("session.jsonl")
        let (count, _) = try Self.writeRecording(path)
        let bridge = try rig.bridge(["--replay", path, "--speed", "0", "--stations", "50"])
        #expect(bridge.waitForExit(timeoutS: 120) == 0, "\(bridge.stderrText)")
        #expect(try rig.receive(timeoutS: 30) { _ in rig.readingCount >= count * 50 })
        let stations = Dictionary(grouping: rig.messages, by: \.envelope.station)
        let expectedNames = Set((1...50).flatMap { ["rack-01-\($0)", "rack-02-\($0)"] })
        #expect(Set(stations.keys) == expectedNames)
        #expect(stations.values.allSatisfy { $0.count == 20 })
        #expect(rig.subscriber.stats.totals.gaps == 0 && rig.subscriber.stats.totals.duplicates == 0)
    }

    @Test("the simulator is deterministic per seed and publishes both sensors")
    func simulator() throws {
        var config = SimulationConfig()
        config.sets = 2
        config.repsPerSet = 4
        config.restS = 5
        let first = BarTimeline(config), again = BarTimeline(config)
        #expect(first.reps == again.reps)
        #expect(first.reps.count == 8)
        // Velocity loss across a set, and plausible velocities for 100 of 140 kg.
        let set1 = first.reps.filter { $0.set == 1 }.map(\.meanVelocityMps)
        #expect(set1.first! > set1.last!)
        #expect(set1.allSatisfy { (0.3...1.2).contains($0) })
        config.seed = 2
        #expect(BarTimeline(config).reps != first.reps)

        let rig = try Rig(prefixes: ["sample.sim-1"])
        let bridge = try rig.bridge(["--simulate", "--station", "sim-1", "--speed", "0", "--sets", "1", "--reps", "2", "--rest", "1"])
        #expect(bridge.waitForExit(timeoutS: 60) == 0, "\(bridge.stderrText)")
        #expect(
            try rig.receive(timeoutS: 10) { _ in
                let sensors = Set(rig.samples().map(\.readings.sensor))
                return sensors == ["imu", "distance"] && rig.readingCount >= 1500
            })
    }

    @Test(
        "--journal: the heartbeat offers the replay endpoint and each stream's last seq; a range asked for comes back byte for byte, also from the journal of the bridge before a restart"
    )
    func journalAndReplay() throws {
        let rig = try Rig(prefixes: ["sample.j-1", "heartbeat.bridge-j-1"])
        let folder = rig.dir.path("journal-j-1")
        let arguments = ["--simulate", "--station", "j-1", "--speed", "4", "--sets", "1", "--reps", "2", "--rest", "1", "--journal", folder]
        let bridge = try rig.bridge(arguments)
        var offer: HeartbeatMessage.ReplayOffer?
        #expect(
            try rig.receive(timeoutS: 30) { messages in
                offer = messages.compactMap { try? $0.payload(as: HeartbeatMessage.self).replay }.last
                let samples = rig.samples().count
                return samples >= 30 && (offer?.lastSeq.values.max() ?? 0) >= 30
            }, "\(bridge.stderrText)")
        #expect(bridge.terminate() == 0)
        let endpoint = try #require(offer?.endpoint)
        #expect(endpoint == "ipc://\(folder)/replay.sock")
        let live = rig.messages.filter { $0.envelope.type == SampleMessage.type }
        let src = try #require(live.first?.envelope.src)
        #expect(offer?.lastSeq[src] != nil, "the offer names the sample stream")

        // A new bridge on the same folder answers for the streams of the one before it.
        let again = try rig.bridge(arguments)
        defer { _ = again.terminate() }
        #expect(again.waitForStderr("journalling", timeoutS: 20), "\(again.stderrText)")
        let client = try ReplayClient(transport: ZMQTransport(context: rig.context, config: rig.config), endpoint: endpoint)
        let wanted = live.prefix(20)
        let first = Int(try #require(wanted.first).envelope.seq), last = Int(try #require(wanted.last).envelope.seq)
        var reply: ReplayReply?
        _ = try client.request(src: src, from: first, to: last)
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0.05) {
                reply = try client.nextReply()
                return reply != nil
            }, "no replay answer: \(again.stderrText)")
        let bodies = try #require(reply).messages.map(\.body)
        #expect(bodies == wanted.map(\.body), "the originals, in order")
        #expect(reply?.header.lost == 0)
    }

    @Test("--linger: a simulation that has ended keeps answering replay requests until stopped; --linger with --no-journal is refused")
    func lingerAfterTheEnd() throws {
        let rig = try Rig(prefixes: ["sample.l-1"])
        let folder = rig.dir.path("journal-l-1")
        let bridge = try rig.bridge([
            "--simulate", "--station", "l-1", "--speed", "0", "--sets", "1", "--reps", "1", "--rest", "0", "--journal", folder, "--linger", "600",
        ])
        defer { _ = bridge.terminate() }
        #expect(bridge.waitForStderr("sources finished", timeoutS: 60), "\(bridge.stderrText)")
        #expect(bridge.isRunning, "still there, answering")
        try rig.receive(timeoutS: 10) { _ in rig.samples().count >= 5 }
        let src = try #require(rig.messages.first { $0.envelope.type == SampleMessage.type }?.envelope.src)
        let client = try ReplayClient(transport: ZMQTransport(context: rig.context, config: rig.config), endpoint: "ipc://\(folder)/replay.sock")
        _ = try client.request(src: src, from: 1, to: 5)
        var reply: ReplayReply?
        #expect(
            try waitUntil(timeoutS: 20, intervalS: 0.05) {
                reply = try client.nextReply()
                return reply != nil
            }, "no replay answer after the end: \(bridge.stderrText)")
        #expect(reply?.messages.count == 5)
        #expect(bridge.terminate() == 0)

        let refused = try rig.bridge(["--simulate", "--station", "l-2", "--linger", "5", "--no-journal"])
        #expect(refused.waitForExit(timeoutS: 20) != 0)
        #expect(refused.stderrText.contains("--no-journal"), "\(refused.stderrText)")
    }
}
