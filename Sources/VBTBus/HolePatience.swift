/// How long a consumer waits for a hole in a stream before it counts it lost
/// (proto/replay.md): every wait is bounded, so no hole stays outstanding for
/// good, and each bound says what it waits for. A producer that is heard (its
/// heartbeats come) while its replay endpoint answers nothing cannot answer
/// from here (an `ipc://` endpoint on another computer): its holes go after
/// `unansweredS` of that. A producer neither heard nor answering (its link
/// partitioned, or it is down) may answer once it is back: its holes wait up
/// to `maxWaitS`, about as long as a journal keeps what it holds.
public struct HolePatience: Sendable, Equatable {
    /// How long a hole waits when no heartbeat has offered its stream's journal.
    public var unknownProducerS: Double
    /// How long a producer's heartbeats may come while its replay endpoint answers nothing.
    public var unansweredS: Double
    /// The longest any hole waits.
    public var maxWaitS: Double

    /// Creates a patience.
    public init(unknownProducerS: Double, unansweredS: Double, maxWaitS: Double) {
        (self.unknownProducerS, self.unansweredS, self.maxWaitS) = (unknownProducerS, unansweredS, maxWaitS)
    }

    /// The session-recorder's: it keeps history, not a live view, so it waits for a partitioned
    /// station as long as the station's journal keeps its readings (30 minutes by default).
    public static let history = HolePatience(unknownProducerS: 30, unansweredS: 30, maxWaitS: 1_800)
}

/// Whether a hole is waited for still, or given up and why.
public enum HoleVerdict: Sendable, Equatable {
    case wait
    case giveUp(reason: String)
}

/// What a consumer knows of the producers it fetches from: when each was last
/// heard, and for how long its replay endpoint has answered nothing while it
/// was heard. Owned by the consumer's loop thread; monotonic seconds.
public struct ProducerLiveness: Sendable {
    private struct Endpoint: Sendable {
        /// When the oldest question asked since the last answer was asked.
        var unansweredSince: Double?
        /// Seconds of that time during which the producer was heard.
        var unansweredWhileHeard = 0.0
    }

    private var lastHeard: [String: Double] = [:]
    /// Per producer, its latest silences (a gap between heartbeats past `heartbeatGapS`), oldest first.
    private var silences: [String: [ClosedRange<Double>]] = [:]
    private var endpoints: [String: Endpoint] = [:]
    /// A gap between two heartbeats longer than this counts as not heard (a partition).
    public var heartbeatGapS = 3.0
    /// Most silences kept per producer. Each is a gap past `heartbeatGapS`, so 64 span at least
    /// 192 s, more than any hole waits by default (`maxWaitS`, 60 s); with a longer wait the oldest
    /// are forgotten and count as heard, so a hole is given up sooner, never later.
    private static let silencesKept = 64

    /// Creates an empty record.
    public init() {}

    /// A heartbeat of `producer`, which offers `endpoint` (nil: none), at `now`.
    public mutating func heard(_ producer: String, endpoint: String?, at now: Double) {
        if let endpoint, var state = endpoints[endpoint], let since = state.unansweredSince {
            let from = max(since, lastHeard[producer] ?? since)
            if now - from <= heartbeatGapS { state.unansweredWhileHeard += max(0, now - from) }
            endpoints[endpoint] = state
        }
        if let last = lastHeard[producer], now - last > heartbeatGapS {
            silences[producer, default: []].append((last + heartbeatGapS)...now)
            if silences[producer]!.count > Self.silencesKept { silences[producer]!.removeFirst() }
        }
        lastHeard[producer] = now
    }

    /// Seconds from `since` to `now` during which `producer` was heard: the time less its
    /// silences (each gap between its heartbeats beyond `heartbeatGapS`, and the one going on).
    /// A hole's patience runs on this clock: a producer behind a partition, a flapping link or a
    /// bus that is down may answer once it is heard again, and its silence is not its delay. A
    /// producer not heard at all since this consumer started (known from its checkpoint) has no
    /// silence known: all of the wait counts, as it did before silences were counted.
    public func heardSeconds(_ producer: String, since: Double, now: Double) -> Double {
        var silent = 0.0
        for silence in silences[producer] ?? [] where silence.upperBound > since {
            silent += silence.upperBound - max(silence.lowerBound, since)
        }
        if let last = lastHeard[producer], now - last > heartbeatGapS {
            silent += now - max(last + heartbeatGapS, since)
        }
        return max(0, now - since - silent)
    }

    /// A question sent to `endpoint` at `now`.
    public mutating func asked(_ endpoint: String, at now: Double) {
        if endpoints[endpoint]?.unansweredSince == nil { endpoints[endpoint] = Endpoint(unansweredSince: now) }
    }

    /// An answer from `endpoint`: it is reachable.
    public mutating func answered(_ endpoint: String) { endpoints[endpoint] = Endpoint() }

    /// Seconds `endpoint` has answered nothing while its producer was heard.
    public func unansweredWhileHeard(_ endpoint: String) -> Double { endpoints[endpoint]?.unansweredWhileHeard ?? 0 }

    /// Whether a hole missing since `since` is still waited for at `now`. `producer` offers its
    /// stream's journal on `endpoint` (nil: no heartbeat has); `journalless`: its instance's
    /// heartbeat offered none; `unusable`: the endpoint may not be used from here.
    public func verdict(
        since: Double, now: Double, producer: String?, endpoint: String?, journalless: Bool, unusable: Bool, patience: HolePatience
    ) -> HoleVerdict {
        let waited = now - since
        guard let producer, let endpoint else {
            if journalless { return .giveUp(reason: "its producer keeps no journal") }
            return waited > patience.unknownProducerS ? .giveUp(reason: "no producer offered its journal within \(patience.unknownProducerS) s") : .wait
        }
        if unusable { return .giveUp(reason: "\(producer)'s replay endpoint \(endpoint) cannot be used from here") }
        if unansweredWhileHeard(endpoint) > patience.unansweredS {
            return .giveUp(
                reason: "\(producer) was heard for \(patience.unansweredS) s while its replay endpoint \(endpoint) answered nothing (unreachable from here?)")
        }
        if waited > patience.maxWaitS { return .giveUp(reason: "waited \(patience.maxWaitS) s for \(producer), longer than a journal keeps") }
        return .wait
    }
}
