import CZeroMQ
import Logging
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// What one consumer saw of one publishing stream (`src`).
public struct SourceStats: Sendable, Equatable, Codable {
    /// The stream's topic.
    public var topic: String
    /// Good messages delivered (duplicates excluded).
    public var received = 0
    /// Times the sequence jumped forward.
    public var gaps = 0
    /// Messages missing inside those jumps.
    public var missing = 0
    /// Messages with a sequence number already seen.
    public var duplicates = 0
    /// The first sequence number seen (above 1: this consumer joined late).
    public var firstSeq: UInt64
    /// The highest sequence number seen.
    public var lastSeq: UInt64

    enum CodingKeys: String, CodingKey {
        case topic, received, gaps, missing, duplicates
        case firstSeq = "first_seq"
        case lastSeq = "last_seq"
    }
}

/// A consumer's counters: per stream, malformed by reason, and bus liveness.
public struct SubscriberStats: Sendable, Equatable, Codable {
    /// Per `src`.
    public var sources: [String: SourceStats] = [:]
    /// Rejected messages, by `MalformedMessage.Kind` raw value.
    public var malformed: [String: Int] = [:]
    /// Heartbeats seen from the bus itself.
    public var busHeartbeats = 0
    /// The bus instance that sent the last heartbeat (changes when the bus restarts).
    public var busInstance: String?
    /// How many times a new bus instance was seen after the first.
    public var busRestarts = 0

    /// Creates empty stats.
    public init() {}

    /// Totals over every stream.
    public var totals: InputCounters {
        var counters = InputCounters()
        for source in sources.values {
            counters.received += source.received
            counters.gaps += source.gaps
            counters.missing += source.missing
            counters.duplicates += source.duplicates
        }
        counters.malformed = malformed.values.reduce(0, +)
        return counters
    }

    /// These counters and those of another connection of the same consumer: its streams these
    /// lack, and its malformed messages (the bus's own heartbeat, which every connection follows,
    /// is counted once, from these).
    public func merging(_ other: SubscriberStats) -> SubscriberStats {
        var merged = self
        merged.sources.merge(other.sources) { mine, _ in mine }
        merged.malformed.merge(other.malformed, uniquingKeysWith: +)
        return merged
    }

    enum CodingKeys: String, CodingKey {
        case sources, malformed
        case busHeartbeats = "bus_heartbeats"
        case busInstance = "bus_instance"
        case busRestarts = "bus_restarts"
    }

    /// Accounts for one good message; returns false when it is a duplicate.
    /// Mutates the stream's entry in place (one hash lookup on the hot path).
    mutating func account(_ envelope: Envelope, topic: String) -> Bool {
        guard let index = sources.index(forKey: envelope.src) else {
            sources[envelope.src] = SourceStats(topic: topic, received: 1, firstSeq: envelope.seq, lastSeq: envelope.seq)
            return true
        }
        return sources.values[index].account(seq: envelope.seq)
    }
}

extension SourceStats {
    /// Counts one sequence number; returns false when it is a duplicate.
    mutating func account(seq: UInt64) -> Bool {
        if seq <= lastSeq {
            duplicates += 1
            return false
        }
        if seq > lastSeq + 1 {
            gaps += 1
            missing += Int(seq - lastSeq - 1)
        }
        lastSeq = seq
        received += 1
        return true
    }
}

/// Receives, checks and counts bus messages. Owned by one thread (not `Sendable`).
///
/// Every message is checked against the envelope rules; malformed ones are
/// counted by reason and logged (the first few of each reason, then every
/// 1000th), never delivered and never fatal. Duplicates are counted and
/// dropped; gaps are counted and the message delivered. The subscriber also
/// follows the bus's own heartbeat (`heartbeat.bus`) to know the bus is there
/// and to notice a bus restart.
public final class Subscriber {
    /// The counters so far.
    public private(set) var stats = SubscriberStats()
    private let link: any FrameLink
    private let clock: any BusClock
    private var prefixes: [[UInt8]]
    /// The route the samples are asked for under (`ShardRoute`), if any.
    private let route: String?
    private let logger: Logger
    /// Each source's count received, looked at once a minute to forget finished streams (not
    /// a time written for each message: one more hash of its source a message, in every
    /// consumer).
    private var stillSources = StillCounts()
    private var nextEviction: Double
    /// Streams silent this long are forgotten (every process start and every
    /// `vbt pub` run is a new stream; a long-running server must not keep them all).
    public var forgetAfterS = 3_600.0
    /// How a sample's readings are decoded on receipt (`SampleReadings`): the
    /// rep-detector has a laser's read at once, a bar IMU's only located; the
    /// posture-evaluator, which drops many unread, has them only located.
    public var samples = SampleReadings.checked
    /// The sensors whose samples the caller reads (nil: every one). Another sensor's sample is
    /// read only as far as its envelope (`decodeSkippedSample`), counted for its stream, and
    /// handed on with `sensor` its only field: the posture-evaluator uses one sample in four of
    /// the stations it follows. Its readings are then never checked here; the
    /// consumers that read them check them.
    public var sampleSensors: Set<String>?
    /// The stations whose samples the caller reads (nil: every one), by the name in the topic
    /// (`sample.<station>`). Another station's sample is dropped on receipt, neither read nor
    /// counted for its stream: a rep-detector serving part of a gym (`--stations GLOB`, `--shard`)
    /// reads and counts only its own stations' samples.
    public var sampleStations: (@Sendable (String) -> Bool)?
    /// Samples of stations `sampleStations` turned away, unread.
    public private(set) var otherStationsSkipped = 0
    /// Each sample stream's `src` and topic, made once, not for every message (`RecurringNames`).
    private let names = RecurringNames()
    /// How long `next` lets messages gather once the queue is empty before it
    /// waits on the socket, s (0: it waits at once). Waiting at once, a consumer
    /// that keeps up is woken for nearly every message: at 1,000 stations the
    /// posture-evaluator spent a fifth of its time being switched in and out.
    /// A few milliseconds make it a few hundred wake-ups a second,
    /// for a consumer whose answers are not on a rep's path. Only on a
    /// transport whose calls really wait (not the in-memory bus of tests).
    public var gatherS = 0.0

    /// The topic prefixes asked for ("" is everything), as a heartbeat says them.
    public var subscribedPrefixes: [String] { prefixes.map { String(decoding: $0, as: UTF8.self) } }

    /// The topic of the bus's own heartbeat.
    public static let busHeartbeatTopic = HeartbeatMessage.topic(station: "bus")

    /// Connects to `config.subEndpoint` and subscribes to each prefix ("" is everything).
    public convenience init(context: ZMQContext, config: BusConfig, prefixes: [String], priority: BusPriority = .normal, logger: Logger) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), prefixes: prefixes, priority: priority, logger: logger)
    }

    /// Subscribes on `transport` to each prefix ("" is everything), and to the bus's heartbeat;
    /// tells the bus its `priority` (`BusPriority`: whom the bus disconnects first at its memory budget).
    /// With `route` (`~K/N/`, `ShardRoute`), the samples asked for are asked for as routed to
    /// that shard: the bus sends only that shard's stations' samples, and this subscriber takes
    /// the prefix off as it reads them.
    public init(
        transport: any BusTransport, prefixes: [String], route: String? = nil, priority: BusPriority = .normal, logger: Logger
    ) throws(ZMQError) {
        let prefixes = prefixes.isEmpty ? [""] : prefixes
        var subscribed = prefixes.map { Self.linkPrefix($0, route: route) }
        if !prefixes.contains(where: { Self.busHeartbeatTopic.hasPrefix($0) }) { subscribed.append(Self.busHeartbeatTopic) }
        if let said = priority.subscription { subscribed.append(said) }
        link = try transport.subscriberLink(prefixes: subscribed)
        self.route = route
        clock = transport.clock
        nextEviction = clock.monotonicSeconds() + 60
        self.prefixes = prefixes.map { Array($0.utf8) }
        self.logger = logger
    }

    /// From now on, also the messages whose topic starts with `prefix` (one already
    /// covered by a prefix asked for changes nothing).
    public func subscribe(_ prefix: String) throws(ZMQError) {
        guard !wanted(prefix) else { return }
        try link.subscribe(Self.linkPrefix(prefix, route: route))
        prefixes.append(Array(prefix.utf8))
    }

    /// What the link subscribes to for `prefix`: a sample prefix under `route`, when there is one.
    private static func linkPrefix(_ prefix: String, route: String?) -> String {
        guard let route, prefix.hasPrefix(SampleMessage.topicPrefix) else { return prefix }
        return route + prefix
    }

    /// Hands `body` the next good message (waiting up to `timeoutMs` for it, as `next` does)
    /// and then those already queued behind it, at most `limit` in all: for a loop whose other
    /// work (heartbeat, recovery, replies) is looked at once a batch, not once a message.
    public func forEachQueued(waitingMs timeoutMs: Int32, upTo limit: Int, _ body: (BusMessage) throws -> Void) throws {
        guard let first = try next(timeoutMs: timeoutMs) else { return }
        try body(first)
        var taken = 1
        while taken < limit, let queued = try next(timeoutMs: 0) {
            try body(queued)
            taken += 1
        }
    }

    /// The next good message, or nil when `timeoutMs` passes first (-1 waits forever).
    /// Throws `ZMQError` with `isTerminated` when the context shuts down.
    public func next(timeoutMs: Int32 = -1) throws(ZMQError) -> BusMessage? {
        let deadline = timeoutMs < 0 ? Double.infinity : clock.monotonicSeconds() + Double(timeoutMs) / 1000
        var gathered = gatherS <= 0 || timeoutMs == 0 || !link.waits
        while true {
            let remaining = deadline == .infinity ? -1 : Int32(max(0, ((deadline - clock.monotonicSeconds()) * 1000).rounded(.up)))
            // A message not for the caller (malformed, a duplicate) does not end
            // the wait: reading goes on until the deadline or an empty queue.
            // Before gathering, what is queued is read without waiting.
            guard let received = try link.receive(timeoutMs: gathered ? remaining : 0, maxFrames: 3) else {
                guard !gathered else { return nil }
                gathered = true
                let pause = min(gatherS, deadline - clock.monotonicSeconds())
                if pause > 0 { usleep(UInt32(pause * 1_000_000)) }
                continue
            }
            if let message = accept(received) { return message }
        }
    }

    /// The socket under this subscriber, for a loop that polls it beside
    /// other sockets; nil on a transport without sockets.
    public var socket: ZMQSocket? { link.socket }

    /// Routed copies of samples (`ShardRoute`) this subscriber, which did not ask for them by
    /// route, received (a prefix such as "" matches them too) and dropped unread: it receives
    /// each of them under its own topic as well.
    public private(set) var routedCopiesSkipped = 0

    /// Checks and counts one received message; returns it when it is for the caller.
    func accept(_ received: ReceivedMessage) -> BusMessage? {
        var received = received
        if let topic = received.frames.first, ShardRoute.isRouted(topic) {
            guard route != nil, let unrouted = ShardRoute.unrouted(topic) else {
                routedCopiesSkipped += 1
                return nil
            }
            received.frames[0] = unrouted
        }
        // Another station's sample goes before any of it is read (the other shard's half of the
        // gym, at two detectors): it is no input of this consumer's, and its stream is not its to count.
        guard servesStation(of: received) else {
            otherStationsSkipped += 1
            return nil
        }
        let message: BusMessage
        do {
            message = try decodeMessage(received, samples: samples, using: sampleSensors, names: names)
        } catch {
            reject(error, topic: received.frames.first)
            return nil
        }
        guard stats.account(message.envelope, topic: message.topic) else { return nil }
        let now = clock.monotonicSeconds()
        if now >= nextEviction { forgetSilentSources(now: now) }
        let forCaller = wanted(message.topic)
        if message.topic == Self.busHeartbeatTopic { noteBusHeartbeat(message) }
        return forCaller ? message : nil
    }

    /// Whether the frame is no sample, or one of a station the caller reads (`sampleStations`).
    private func servesStation(of received: ReceivedMessage) -> Bool {
        guard let sampleStations, let topic = received.frames.first else { return true }
        let prefix = SampleMessage.topicPrefix.utf8
        guard topic.count > prefix.count, topic.starts(with: prefix) else { return true }
        return sampleStations(String(decoding: topic.dropFirst(prefix.count), as: UTF8.self))
    }

    /// Forgets the sources that received nothing for `forgetAfterS` (to within the minute between looks).
    private func forgetSilentSources(now: Double) {
        nextEviction = now + Self.evictionIntervalS
        for src in stillSources.stale(stats.sources.mapValues(\.received), now: now, afterS: forgetAfterS) { stats.sources[src] = nil }
    }

    /// How often the sources are looked at for silence, s.
    static let evictionIntervalS = 60.0

    /// Whether one of the prefixes asked for begins `topic`. Compared as bytes in place: the
    /// generic `starts(with:)` over the topic's UTF-8 view was a thirteenth of the time of a
    /// subscriber with a hundred prefixes (`vbt loadtest`'s probe stations).
    private func wanted(_ topic: String) -> Bool {
        var topic = topic
        return topic.withUTF8 { bytes in
            prefixes.contains { prefix in
                prefix.isEmpty
                    || (prefix.count <= bytes.count && prefix.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, prefix.count) == 0 })
            }
        }
    }

    private func noteBusHeartbeat(_ message: BusMessage) {
        let instance = message.envelope.src.split(separator: "/").first.map(String.init) ?? message.envelope.src
        stats.busHeartbeats += 1
        if stats.busInstance == nil {
            logger.info("bus connected", metadata: ["bus.instance": "\(instance)"])
        } else if stats.busInstance != instance {
            stats.busRestarts += 1
            logger.warning("bus restarted", metadata: ["bus.instance": "\(instance)"])
        }
        stats.busInstance = instance
    }

    /// Counts a received message its consumer found malformed on reading it
    /// (a member the subscriber had only located, SampleReadings.located) as
    /// one it refused itself: in `stats.malformed`, logged the first five
    /// times and every thousandth.
    public func countMalformed(_ error: MalformedMessage, topic: String) {
        reject(error, topic: Array(topic.utf8))
    }

    private func reject(_ error: MalformedMessage, topic: [UInt8]?) {
        let count = stats.malformed[error.kind.rawValue, default: 0] + 1
        stats.malformed[error.kind.rawValue] = count
        if count <= 5 || count % 1000 == 0 {
            let shownTopic = topic.map { String(decoding: $0.prefix(64), as: UTF8.self) } ?? ""
            logger.warning(
                "malformed message dropped",
                metadata: [
                    "reason": "\(error.kind.rawValue)",
                    "detail": "\(error.detail)",
                    "zmq.topic": "\(shownTopic)",
                    "count": "\(count)",
                ])
        }
    }
}

/// Which of a set of counts (a source's messages received, a stream's position) have stood
/// still for a while, found by looking now and then rather than by a time written at every
/// change: the keys that move on cost nothing between looks.
public struct StillCounts: Sendable {
    /// Per key, its count at the last look and since when (monotonic s) it has stood there.
    private var seen: [String: (count: Int, since: Double)] = [:]

    public init() {}

    /// Looks at `counts` at `now`; returns the keys whose count has not moved for more than
    /// `afterS` (to within the time between looks), which are no longer followed.
    public mutating func stale(_ counts: [String: Int], now: Double, afterS: Double) -> [String] {
        var looked: [String: (count: Int, since: Double)] = [:]
        looked.reserveCapacity(counts.count)
        var stale: [String] = []
        for (key, count) in counts {
            guard let last = seen[key], last.count == count else {
                looked[key] = (count, now)
                continue
            }
            if now - last.since > afterS { stale.append(key) } else { looked[key] = last }
        }
        seen = looked
        return stale
    }
}
