import Logging
import VBTWire

/// What a consumer fetched again, gave up and still waits for: the part of its heartbeat's
/// `inputs` its recovery knows (the in-order input's, or the recorder's stored holes).
public protocol RecoveryCounts {
    /// Messages fetched again from a producer's journal since the process started.
    var recoveredMessages: Int { get }
    /// Messages no journal held any more, or that nobody answered for in time: lost for good.
    var lostMessages: Int { get }
    /// Messages missed and still waited for.
    var outstanding: Int { get }
}

extension InOrderInput: RecoveryCounts {
    public var recoveredMessages: Int { counters.recovered }
    public var lostMessages: Int { counters.lost }
}

extension SubscriberStats {
    /// A heartbeat's `inputs`: what arrived (these counts over every stream) and what `recovery`
    /// fetched again, lost and still waits for.
    public func inputs(recovery: some RecoveryCounts) -> InputCounters {
        var counters = totals
        counters.lost = recovery.lostMessages
        counters.recovered = recovery.recoveredMessages
        counters.outstanding = recovery.outstanding
        return counters
    }
}

extension Publisher {
    /// Publishes, but a message that cannot be encoded (a NaN that slipped through a check) is
    /// logged and dropped: one bad value never stops a consumer. A failure to send still throws.
    public func send<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil, ts: Double? = nil, logger: Logger) throws {
        do {
            try publish(payload, station: station, athlete: athlete, ts: ts)
        } catch let error as EncodeError {
            logger.error("message not encodable; dropped", metadata: ["type": "\(P.type)", "station": "\(station)", "error": "\(error)"])
        }
    }
}
