import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// Where the bus is and how much it may queue. Defaults are the bus endpoints of proto/README.md ("Wire format").
public struct BusConfig: Sendable, Equatable {
    /// Publishers connect here (the bus's XSUB side). Env `VBT_PUB_ENDPOINT`.
    public var pubEndpoint = "tcp://127.0.0.1:7701"
    /// Subscribers connect here (the bus's XPUB side). Env `VBT_SUB_ENDPOINT`.
    public var subEndpoint = "tcp://127.0.0.1:7702"
    /// Messages queued per peer before libzmq drops (PUB/XPUB never block),
    /// sized to a memory budget (`highWaterMark(forMemoryMB:)`): by default
    /// 512 MiB over 8 queues of 1 KiB messages, 65,536 messages a queue, about
    /// 6 s of a 1,000-station gym (10,000 messages a second). A consumer that
    /// falls further behind loses messages at the bus, never memory beyond
    /// the budget: it counts them as gaps and fetches them from the producers'
    /// journals (proto/replay.md) once it catches up.
    public var highWaterMark: Int32 = BusConfig.highWaterMark(forMemoryMB: BusConfig.defaultQueueMemoryMB)
    /// Messages a subscriber's own socket queues (its receive side; 0 is unbounded). The
    /// bus's queue for it (`highWaterMark`) is where a consumer that falls
    /// behind is waited for, within the bus's budget; the consumer's own
    /// needs only ride out its short stalls. As deep as the bus's, it made
    /// each consumer of a 1,000-station gym hold up to 100 MB of messages
    /// of its own (issue 17).
    public var subscriberHighWaterMark: Int32 = 8_192
    /// The largest frame a bus socket reads (`ZMQSocket.setMaxFrameBytes`):
    /// the largest message any consumer accepts (`BusLimits.maxMessageBytes`).
    /// A peer sending more is disconnected by libzmq before the frame is
    /// queued, so an oversize message never reaches the bus's subscribers
    /// and never takes their memory. Subscriptions (inbound on XPUB sockets)
    /// are topic prefixes, far smaller.
    public static let maxFrameBytes = BusLimits.maxMessageBytes
    /// The largest request frame the query and replay endpoints read (a request
    /// is a small JSON object; a pattern put is the largest, far under this).
    public static let maxRequestBytes = 1 << 20
    /// ZMTP heartbeats on every bus socket (`ZMQSocket.setLiveness`): a ping
    /// every second, and a peer silent for 5 s is disconnected (and a
    /// connecting side connects again), so a dropped Wi-Fi link is noticed in
    /// seconds; the lost messages are then counted as gaps.
    public static let livenessIntervalMs: Int32 = 1_000
    public static let livenessTimeoutMs: Int32 = 5_000
    /// The keys this program runs with (`BusSecurity.fromEnvironment()`); nil
    /// runs plaintext, which the programs allow on loopback only (`--insecure`).
    public var security: BusSecurity?

    /// The default memory budget for one process's bus queues, MiB.
    public static let defaultQueueMemoryMB = 512
    /// The message size the budget is reckoned in (a 16-reading IMU batch is about 2 KiB, a rep under 1 KiB).
    public static let budgetMessageBytes = 1_024
    /// The queues a budget is shared by (a bus's slow subscribers, at once).
    public static let budgetQueues = 8

    /// The high-water mark that keeps `budgetQueues` full queues within `memoryMB`.
    public static func highWaterMark(forMemoryMB memoryMB: Int) -> Int32 {
        Int32(clamping: max(1, memoryMB) * (1 << 20) / budgetMessageBytes / budgetQueues)
    }
    /// The session-recorder's request/reply endpoint (it binds, clients connect). Env `VBT_QUERY_ENDPOINT`.
    public var queryEndpoint = "tcp://127.0.0.1:7703"

    /// The defaults.
    public init() {}

    /// Defaults overridden by `VBT_PUB_ENDPOINT` and `VBT_SUB_ENDPOINT`.
    public static func fromEnvironment() -> BusConfig {
        var config = BusConfig()
        if let value = environment("VBT_PUB_ENDPOINT") { config.pubEndpoint = value }
        if let value = environment("VBT_SUB_ENDPOINT") { config.subEndpoint = value }
        if let value = environment("VBT_QUERY_ENDPOINT") { config.queryEndpoint = value }
        return config
    }
}

/// A non-empty environment variable, or nil.
public func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    let text = String(cString: value)
    return text.isEmpty ? nil : text
}

/// Wall-clock time, Unix seconds (for `ts` and readings' `t`).
public func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Monotonic time in seconds, for intervals and deadlines.
public func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
