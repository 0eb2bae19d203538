import Logging
import VBTWire

/// A consumer's part on the bus: the publisher it sends with, the subscriber its input comes on,
/// the input's recovery and its logger. The extension is the one place a role publishes, counts
/// its input for the heartbeat and ticks the heartbeat; the rep-detector, the posture-evaluator,
/// the notifier and the session-recorder conform. A role is one thread's: nothing here locks.
package protocol BusRole: AnyObject {
    associatedtype Input: RecoveryCounts
    /// Sends every message of the role, heartbeats included.
    var publisher: Publisher { get }
    /// The role's input connection.
    var subscriber: Subscriber { get }
    /// What recovery fetched again, lost and still waits for (the in-order input, say).
    var input: Input { get }
    /// Where a message dropped for its values is told.
    var logger: Logger { get }
    /// What arrived, over every input stream; `subscriber`'s counts unless the role reads more connections.
    var arrivals: SubscriberStats { get }
    /// The journal's replay endpoint the heartbeat offers; nil (the default) when nothing is journalled.
    var replay: ReplayServer? { get }
}

extension BusRole {
    /// `subscriber`'s counts.
    package var arrivals: SubscriberStats { subscriber.stats }

    /// No journal.
    package var replay: ReplayServer? { nil }

    /// What the heartbeat says of the input: what arrived, and what recovery fetched again, lost
    /// and still waits for. Summed over every stream, so taken only when a heartbeat is due.
    package var inputCounters: InputCounters { arrivals.inputs(recovery: input) }

    /// Publishes; a message that cannot be encoded is logged and dropped, a failure to send
    /// throws (`Publisher.send`).
    package func send<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil, ts: Double? = nil) throws {
        try publisher.send(payload, station: station, athlete: athlete, ts: ts, logger: logger)
    }
}

extension HeartbeatSchedule {
    /// Publishes `role`'s heartbeat when one is due: its input's counts and its journal's endpoint,
    /// changed by `amend` (a role's own figures).
    package mutating func tick(_ role: some BusRole, amend: (inout HeartbeatMessage) -> Void = { _ in }) throws {
        try tick(role.publisher, inputs: role.inputCounters, replay: role.replay, amend: amend)
    }
}
