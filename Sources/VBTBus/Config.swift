#if canImport(Glibc)
import Glibc
#endif

/// Where the bus is and how much it may queue. Defaults are the bus endpoints of proto/README.md ("Wire format").
public struct BusConfig: Sendable, Equatable {
    /// Publishers connect here (the bus's XSUB side). Env `VBT_PUB_ENDPOINT`.
    public var pubEndpoint = "tcp://127.0.0.1:7701"
    /// Subscribers connect here (the bus's XPUB side). Env `VBT_SUB_ENDPOINT`.
    public var subEndpoint = "tcp://127.0.0.1:7702"
    /// Messages queued per peer before libzmq drops (PUB/XPUB never block).
    /// One million 200-byte messages is minutes of a full gym (50 racks at
    /// 100 Hz is 5,000 msg/s), so only a stuck consumer ever reaches it, and
    /// then its gap counters say so.
    public var highWaterMark: Int32 = 1_000_000
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
