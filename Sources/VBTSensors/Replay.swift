import Foundation
import Logging
import VBTBus
import VBTWire

/// One message of a recording, ready to publish again.
public struct RecordedMessage: Sendable {
    /// Seconds since the first message the replay keeps (`Recording`).
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
    /// The readings of the sample messages kept (those with a numeric `t`).
    public var readings = 0
    /// The span of the reading times, s (0 without readings).
    public var readingSpan: Double { (lastReadingT ?? 0) - (firstReadingT ?? 0) }

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
                        readings += 1
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
        // The timeline starts at the first message kept: the lines left out before it (a recording's
        // opening commands) would otherwise delay every reading's publication behind its shifted time,
        // which places the first reading at the start.
        if let lead = messages.map(\.t).min(), lead > 0 {
            for index in messages.indices { messages[index].t -= lead }
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
    /// With N > 1 copies: the seconds over which their starts are spread (`ReplayStagger`);
    /// 0 publishes every copy of a message at once.
    public let stagger: Double

    public var name: String { "replay:\(path)" }

    /// Creates a replay source.
    public init(path: String, recording: Recording, speed: Double, loop: Bool, stations: Int, startT: Double? = nil, stagger: Double = 0) {
        (self.path, self.recording, self.speed, self.loop, self.stations) = (path, recording, speed, loop, stations)
        (self.startT, self.stagger) = (startT, stagger)
    }

    /// The station names one recorded station is published as.
    public func copies(of station: String) -> [String] {
        stations > 1 ? (1...stations).map { "\(station)-\($0)" } : [station]
    }

    public func run(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        if stagger > 0, stations > 1, speed > 0 {
            runStaggered(into: queue, stop: stop, logger: logger)
            return
        }
        let duration = recording.messages.last?.t ?? 0
        let readingSpan = recording.readingSpan
        let step = ReplayStagger.readingStep(readingSpan: readingSpan, readings: recording.readings)
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
                // One station's readings are batched again by the bridge's --batch-size and
                // --batch-delay, as a live bridge's are: a replay then tries the consumers with
                // other groupings than the recording's. Copies (a load test) keep the recorded
                // messages, written once for every copy.
                if stations == 1, message.type == SampleMessage.type, message.athlete == nil,
                    let sample = try? SampleMessage(fields: fields), let device = sample.device
                {
                    queue.push(.readings(station: message.station, device: device, sample.readings))
                    continue
                }
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

    /// The copies each on a timeline of its own (`ReplayStagger`): copy k publishes the
    /// recording `stagger.delay(k)` recorded seconds after the first (divided by the speed),
    /// readings shifted by its group's delay. A pass lasts the recording's length (or its
    /// reading span and a step, if longer) and passes follow each other without a gap, so
    /// sensor time never goes back.
    private func runStaggered(into queue: EventQueue, stop: StopFlag, logger: Logger) {
        let spread = ReplayStagger(seconds: stagger, copies: stations)
        let messages = recording.messages
        let passS = ReplayStagger.passSeconds(lastMessageT: messages.last?.t ?? 0, readingSpan: recording.readingSpan, readings: recording.readings)
        let startedAt = monotonicSeconds()
        let base = (startT ?? wallClockSeconds()) - (recording.firstReadingT ?? 0)
        // Looked at for every copy every round (a thousand copies a millisecond): each message's time and
        // station by number, not the message itself (copying it retained and released its strings:
        // a third of this thread's time at 1,000 stations) nor its copies' names by a hash.
        let times = messages.map(\.t)
        // Each message's type and athlete, likewise (reading them off the message copied it:
        // its fields retained and released at every send).
        let types = messages.map(\.type), athletes = messages.map(\.athlete)
        let stationNames = Array(Set(messages.map(\.station)))
        let stationNumbers = Dictionary(uniqueKeysWithValues: stationNames.enumerated().map { ($1, $0) })
        let stationOf = messages.map { stationNumbers[$0.station]! }
        let names = stationNames.map { copies(of: $0) }
        // Where each copy is: its pass and its next message; nil once a copy without --loop is done.
        var cursor: [(pass: Int, index: Int)?] = Array(repeating: (0, 0), count: stations)
        // A group's copies share the samples they publish (a message's readings shifted once per group and pass);
        // other messages are written once for all.
        var shared: [[Int: EncodedMembers]] = Array(repeating: [:], count: spread.groups)
        let templates = messages.map { $0.type == SampleMessage.type ? ShiftableMembers($0.fields) : nil }
        let constant = messages.map { $0.type == SampleMessage.type ? nil : EncodedMembers($0.fields) }
        var batch: [BridgeEvent] = []
        while !stop.isSet {
            let now = monotonicSeconds() - startedAt
            var next = Double.infinity
            for copy in 0..<stations {
                let delay = spread.delay(copy)
                let group = spread.group(copy)
                while let at = cursor[copy] {
                    let due = (delay + Double(at.pass) * passS + times[at.index]) / speed
                    if due > now {
                        next = min(next, due)
                        break
                    }
                    let key = at.pass * messages.count + at.index
                    let members: EncodedMembers
                    if let fixed = constant[at.index] {
                        members = fixed
                    } else if let known = shared[group][key] {
                        members = known
                    } else {
                        members = templates[at.index]!.shifted(by: base + spread.groupDelay(group) + Double(at.pass) * passS)
                        shared[group][key] = members
                    }
                    batch.append(.message(type: types[at.index], station: names[stationOf[at.index]][copy], athlete: athletes[at.index], members: members))
                    if at.index + 1 < messages.count {
                        cursor[copy] = (at.pass, at.index + 1)
                    } else {
                        cursor[copy] = loop ? (at.pass + 1, 0) : nil
                    }
                }
                // A group's last copy lags the rest of it: what it has published, the group needs no more.
                if spread.isLastOfGroup(copy), shared[group].count > 64, let at = cursor[copy] {
                    let lagging = at.pass * messages.count + at.index
                    shared[group] = shared[group].filter { $0.key >= lagging }
                }
            }
            queue.push(contentsOf: batch)
            batch.removeAll(keepingCapacity: true)
            guard next.isFinite else { break }
            // Whatever is due within the next millisecond goes with the next round.
            if !stop.sleep(max(0.001, next - (monotonicSeconds() - startedAt))) { break }
        }
        let passes = cursor.compactMap { $0?.pass }.max() ?? (loop ? 0 : 1)
        logger.info(
            "replay finished",
            metadata: ["passes": "\(passes)", "messages": "\(messages.count)", "copies": "\(stations)", "stagger_s": "\(stagger)"])
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

/// A sample message's members written once, with where each reading's `t` is. A copy shifted
/// in time is written by copying the text between the times and writing the times alone: a
/// staggered replay writes each recorded message once per group of copies, up to 64 times, and
/// need not build and write the whole message each time. (Measured at 1,000 stations: the
/// replay's CPU 17 % -> 16 % of a core; most of the rest is thread wake-ups.)
struct ShiftableMembers: Sendable {
    /// The text around the times: one piece more than there are times.
    let pieces: [[UInt8]]
    /// Each reading's recorded `t`.
    let times: [Double]
    let sawNonFiniteNumber: Bool

    /// The members of `fields` not in the envelope, as `EncodedMembers` writes them.
    init(_ fields: JSONObject) {
        var writer = JSONWriter(capacity: 512)
        var pieces: [[UInt8]] = []
        var times: [Double] = []
        var cut = 0
        for field in fields.fields where !EncodedMembers.envelopeKeys.contains(field.key) {
            writer.key(field.key)
            guard field.key == "samples", case .array(let items) = field.value else {
                writer.value(field.value)
                continue
            }
            writer.beginArray()
            for item in items {
                guard case .object(let reading) = item else {
                    writer.value(item)
                    continue
                }
                writer.beginObject()
                for member in reading.fields {
                    writer.key(member.key)
                    guard member.key == "t", case .number(let t) = member.value, t.isFinite else {
                        writer.value(member.value)
                        continue
                    }
                    pieces.append(Array(writer.bytes[cut...]))
                    writer.fixed(t, decimals: 6)
                    cut = writer.bytes.count
                    times.append(t)
                }
                writer.endObject()
            }
            writer.endArray()
        }
        pieces.append(Array(writer.bytes[cut...]))
        (self.pieces, self.times, self.sawNonFiniteNumber) = (pieces, times, writer.sawNonFiniteNumber)
    }

    /// The members with every reading's `t` moved by `offset` seconds, to the microsecond (as
    /// `ReplaySource.shifted` moves them).
    func shifted(by offset: Double) -> EncodedMembers {
        var writer = JSONWriter(capacity: pieces.reduce(0) { $0 + $1.count } + 18 * times.count)
        for (piece, t) in zip(pieces, times) {
            writer.fragment(piece)
            writer.fixed(t + offset, decimals: 6)
        }
        writer.fragment(pieces[pieces.count - 1])
        return EncodedMembers(written: writer.bytes, sawNonFiniteNumber: sawNonFiniteNumber)
    }
}
