// The table of message types and their topics. A topic is `<type>.<station>`
// (proto/README.md, "Topics"); a subscriber selects a type at every station
// with the prefix `<type>.`. Programs name topics through this table, never
// with string literals.

/// Every message type of proto/, each with its one Swift type.
public enum MessageTypes {
    /// All of them, in proto/README.md's order.
    public static let all: [any BusPayload.Type] = [
        SampleMessage.self, StatusMessage.self, HeartbeatMessage.self, CommandMessage.self, AckMessage.self,
        RepMessage.self, SetMessage.self, RejectedMessage.self, ProfileMessage.self,
        TakeoverMessage.self, HandoffMessage.self,
        PostureMessage.self, CalibrationMessage.self,
        TimerMessage.self, AlertMessage.self, WorkoutMessage.self,
    ]

    /// The prefixes that subscribe to `types` at every station.
    public static func prefixes(_ types: any BusPayload.Type...) -> [String] { types.map { $0.topicPrefix } }

    /// The Swift type of the message type named `type`, if there is one.
    public static func named(_ type: String) -> (any BusPayload.Type)? {
        all.first { $0.type == type }
    }
}

extension BusPayload {
    /// The prefix that subscribes to this type at every station, `<type>.`.
    public static var topicPrefix: String { type + "." }

    /// This type's topic at `station`, `<type>.<station>`.
    public static func topic(station: String) -> String { type + "." + station }
}
