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
    /// Messages queued per peer before libzmq drops (PUB/XPUB never block):
    /// 65,536, about 2.5 s of a 1,000-station gym (26,000 messages a second of
    /// about 1 KiB; a full queue holds some 62-66 MB of the bus's memory). A consumer that falls further behind loses messages at the
    /// bus: it counts them as gaps and fetches them from the producers'
    /// journals (proto/replay.md) once it catches up. The bus's memory as a
    /// whole is held to its budget (`BusMemoryBudget`), however many queues fill.
    public var highWaterMark: Int32 = BusConfig.defaultHighWaterMark
    /// Messages a subscriber's own socket queues (its receive side; 0 is unbounded). The
    /// bus's queue for it (`highWaterMark`) is where a consumer that falls
    /// behind is waited for, within the bus's budget; the consumer's own
    /// needs only ride out its short stalls: as deep as the bus's, it let
    /// each consumer of a 1,000-station gym hold up to 100 MB of messages.
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
    /// Liveness on every bus socket (`ZMQSocket.setLiveness`): a ZMTP ping
    /// every second where the socket only sends (publishers, the bus towards
    /// subscribers), TCP keepalive where it receives the data (subscribers,
    /// the bus from publishers); a peer silent for about 5 s is disconnected
    /// (and a connecting side connects again), so a dropped Wi-Fi link is
    /// noticed in seconds; the lost messages are then counted as gaps.
    public static let livenessIntervalMs: Int32 = 1_000
    public static let livenessTimeoutMs: Int32 = 5_000
    /// The keys this program runs with (`BusSecurity.fromEnvironment()`); nil
    /// runs plaintext, which the programs allow on loopback only (`--insecure`).
    public var security: BusSecurity?

    /// The default high-water mark (`highWaterMark`).
    public static let defaultHighWaterMark: Int32 = 65_536
    /// The memory budget the bus's systemd unit gives it, MiB of resident memory
    /// (`BusMemoryBudget`, `vbt-bus --memory-budget-mb`), a ceiling under the load test's
    /// goal of 100 MB a daemon (90 MiB is 94.4 MB). The program's own default is
    /// none (0): a flood in a test is then held by the high-water mark alone.
    public static let unitMemoryBudgetMB = 90
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
