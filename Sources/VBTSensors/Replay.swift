import Foundation
import Logging
import VBTBus
import VBTWire

/// One message of a recording, ready to publish again.
public struct RecordedMessage: Sendable {
    /// Seconds since the recording's first line.
    public var t: Double
    /// The message type (topic before the dot).
    public var type: String
    /// The recorded station.
    public var station: String
    /// The recorded athlete, if any.
    public var athlete: String?
    /// The type's own fields (envelope fields removed).
    public var fields: JSONObject
}

/// A recording loaded for replay (proto/README.md, "Recordings").
public struct Recording: Sendable {
    /// The messages in file order.
    public var messages: [RecordedMessage]
    /// Lines skipped because they were not valid recording lines, with the first reason.
    public var skippedLines = 0
    /// Lines of types the replay does not publish (e.g. the bus's heartbeats), by type.
    public var skippedTypes: [String: Int] = [:]
    /// The first reading time in the recording, if it holds readings.
    public var firstReadingT: Double?
    /// The last reading time.
    public var lastReadingT: Double?

    /// Loads `path`, keeping the message types in `types`.
    public init(path: String, types: Set<String>) throws(SensorError) {
        let data: [UInt8]
        do { data = try RecordingReader.contents(path: path) } catch { throw SensorError(error.description) }
        messages = []
        var firstError: String?
        for (number, line) in data.split(separator: 0x0A).enumerated() where !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) {
            do {
                guard case .object(let object) = try JSONParser.parse(Array(line)),
                    case .number(let t)? = object["t"], t.isFinite, t >= 0,
                    case .string(let topic)? = object["topic"], case .object(var msg)? = object["msg"]
                else { throw SensorError("line \(number + 1): needs t, topic and msg") }
                let (type, station) = try splitTopic(Array(topic.utf8))
                guard types.contains(type) else {
                    skippedTypes[type, default: 0] += 1
                    continue
                }
                var athlete: String?
                if case .string(let name)? = msg["athlete"] { athlete = name }
                for key in ["v", "type", "station", "src", "seq", "ts", "athlete"] { msg[key] = nil }
                if type == SampleMessage.type {
                    for reading in Self.readingTimes(msg) {
                        firstReadingT = min(firstReadingT ?? reading, reading)
                        lastReadingT = max(lastReadingT ?? reading, reading)
                    }
                }
                messages.append(RecordedMessage(t: t, type: type, station: station, athlete: athlete, fields: msg))
            } catch {
                skippedLines += 1
                if firstError == nil { firstError = "line \(number + 1): \(error)" }
            }
        }
        if messages.isEmpty {
            throw SensorError(
                "Recording \(path) has nothing to replay (\(firstError ?? "no \(types.sorted().joined(separator: "/")) messages")): record one with `vbt record --out FILE sample.`"
            )
        }
    }

    static func readingTimes(_ fields: JSONObject) -> [Double] {
        guard case .array(let items)? = fields["samples"] else { return [] }
        return items.compactMap { item in
            guard case .object(let reading) = item, case .number(let t)? = reading["t"] else { return nil }
            return t
        }
    }
}

/// Replays a recording: fresh src/seq/ts, every reading's `t` shifted by one
/// constant per pass so the recording starts now (or at `startT`), paced by `speed`.
public struct ReplaySource: SensorSource {
    public let recording: Recording
    /// 1 = real time, 2 = twice as fast, 0 = as fast as possible.
    public let speed: Double
    /// Start again at the end, forever.
    public let loop: Bool
    /// With N > 1, each recorded station is published N times as `<station>-1` ... `<station>-N`.
    public let stations: Int
    public let path: String
    /// Where the first pass's first reading is placed (Unix seconds); nil is now.
    /// With it, two replays of one recording give the same reading times (and so
    /// the same rep ids), whenever they run; later passes follow at the recording's
    /// reading span, as without it.
    public let startT: Double?

    public var name: String { "replay:\(path)" }

    /// Creates a replay source.
    public init(path: String, recording: Recording, speed: Double, loop: Bool, stations: Int, startT: Double? = nil) {
        (self.path, self.recording, self.speed, self.loop, self.stations) = (path, recording, speed, loop, stations)
        self.startT = startT
    }

    /// The station names one recorded station is published as.
    public func copies(of station: String) -> [String] {
        stations > 1 ? (1...stations).map { "\(station)-\($0)" } : [station]
    }

    public func run(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        let duration = recording.messages.last?.t ?? 0
        let readingSpan = (recording.lastReadingT ?? 0) - (recording.firstReadingT ?? 0)
        // Keep the recorded spacing across passes: the next pass starts one
        // average reading interval after the previous pass's last reading.
        let readingCount = recording.messages.reduce(0) { $0 + Recording.readingTimes($1.fields).count }
        let step = readingCount > 1 ? readingSpan / Double(readingCount - 1) : 0.01
        var pass = 0
        var passStartT = startT ?? wallClockSeconds()
        repeat {
            let offset = passStartT - (recording.firstReadingT ?? 0)
            let startedAt = monotonicSeconds()
            for message in recording.messages {
                if stop.isSet { break }
                if speed > 0 {
                    let due = startedAt + message.t / speed
                    let wait = due - monotonicSeconds()
                    if wait > 0, !stop.sleep(wait) { break }
                }
                let fields = message.type == SampleMessage.type ? Self.shifted(message.fields, by: offset) : message.fields
                let members = EncodedMembers(fields)
                for station in copies(of: message.station) {
                    queue.push(.message(type: message.type, station: station, athlete: message.athlete, members: members))
                }
            }
            pass += 1
            // The next pass starts now on the wall clock (right after the previous
            // one with a fixed start), but never before the previous pass's last
            // reading (sensor time must not go backwards).
            passStartT = max(startT == nil ? wallClockSeconds() : -Double.infinity, passStartT + readingSpan + step)
            if speed > 0 && loop && !stop.isSet {
                // Wait out the recording's tail so the next pass keeps real-time pacing.
                let tail = startedAt + duration / speed - monotonicSeconds()
                if tail > 0 { stop.sleep(tail) }
            }
        } while loop && !stop.isSet
        logger.info("replay finished", metadata: ["passes": "\(pass)", "messages": "\(recording.messages.count)", "copies": "\(stations)"])
        queue.push(.finished(source: name))
    }

    /// The fields with every reading's `t` moved by `offset` seconds.
    static func shifted(_ fields: JSONObject, by offset: Double) -> JSONObject {
        guard case .array(let items)? = fields["samples"] else { return fields }
        var copy = fields
        copy["samples"] = .array(
            items.map { item in
                guard case .object(var reading) = item, case .number(let t)? = reading["t"] else { return item }
                // Microsecond resolution, as the bridge writes readings.
                reading["t"] = .number(((t + offset) * 1e6).rounded() / 1e6)
                return .object(reading)
            })
        return copy
    }
}
