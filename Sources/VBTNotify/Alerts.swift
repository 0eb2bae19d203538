// Threshold alerts: which conditions are open, their rate-limited repeats,
// their clears, and the one-off notices. Pure, on an injected wall clock.
import VBTBus
import VBTWire

/// The open alerts and what was already noticed; decides what gets published.
public struct AlertBook: Sendable, Codable, Equatable {
    /// Open conditions by `alertId`, as last published (with `suppressed` counting since).
    public private(set) var open: [String: OpenAlert] = [:]
    /// One-off notices already sent (a velocity-loss stop seen on a rep and on the set end counts once), oldest first.
    private var noticed: [String] = []
    /// Repeats and duplicate notices held back by the rate limit, since start.
    public private(set) var suppressedTotal = 0

    /// An open alert and when it was last published.
    public struct OpenAlert: Sendable, Codable, Equatable {
        public var alert: AlertMessage
        public var lastPublishedAt: Double
    }

    /// An empty book.
    public init() {}

    /// The condition of `alert` holds at `now`. Returns what to publish: the raise the
    /// first time, a `repeat` once every `repeatS` while it holds, nothing in between.
    public mutating func raise(_ alert: AlertMessage, now: Double, repeatS: Double) -> AlertMessage? {
        if var existing = open[alert.alertId] {
            guard now - existing.lastPublishedAt >= repeatS else {
                existing.alert.suppressed += 1
                suppressedTotal += 1
                open[alert.alertId] = existing
                return nil
            }
            var reminder = alert
            reminder.state = .repeat
            reminder.since = existing.alert.since
            reminder.suppressed = existing.alert.suppressed
            var kept = reminder
            kept.suppressed = 0
            open[alert.alertId] = OpenAlert(alert: kept, lastPublishedAt: now)
            return reminder
        }
        var raised = alert
        raised.state = .raised
        raised.suppressed = 0
        open[alert.alertId] = OpenAlert(alert: raised, lastPublishedAt: now)
        return raised
    }

    /// The condition of `alertId` no longer holds: the clear to publish, if it was open.
    public mutating func clear(_ alertId: String, message: String, now: Double) -> AlertMessage? {
        guard let existing = open.removeValue(forKey: alertId) else { return nil }
        var cleared = existing.alert
        cleared.state = .cleared
        cleared.message = message
        cleared.suppressed = existing.alert.suppressed
        return cleared
    }

    /// A one-off event: published once per `alertId` (the last 500 are remembered).
    public mutating func notice(_ alert: AlertMessage) -> AlertMessage? {
        guard !noticed.contains(alert.alertId) else {
            suppressedTotal += 1
            return nil
        }
        noticed.append(alert.alertId)
        if noticed.count > 500 { noticed.removeFirst(noticed.count - 500) }
        var notice = alert
        notice.state = .notice
        return notice
    }

    /// Whether `alertId` is open.
    public func isOpen(_ alertId: String) -> Bool { open[alertId] != nil }
}

/// A program's heartbeat as the notifier last saw it.
public struct WatchedHeartbeat: Sendable, Codable, Equatable {
    /// When it arrived (the notifier's wall clock).
    public var lastSeen: Double
    /// The interval it announced.
    public var intervalS: Double
}
