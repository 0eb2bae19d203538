// What a station's name may be, and how a bridge's heartbeat names its station.

/// Whether `name` can be a station in a topic (`<type>.<station>`, proto/README.md): 1 to 64
/// letters, digits, '.', '_' or '-'.
public func isStationName(_ name: String) -> Bool {
    (1...64).contains(name.utf8.count)
        && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }
}

extension HeartbeatMessage {
    /// The station whose live bridge sends heartbeats as `heartbeat.<name>` (`bridge-<station>`,
    /// proto/heartbeat.schema.json), or nil for any other program (a replay's `bridge-replay`
    /// is a load generator, not a station).
    public static func bridgeStation(heartbeatName name: String) -> String? {
        guard name.hasPrefix("bridge-"), name != "bridge-replay" else { return nil }
        return String(name.dropFirst("bridge-".count))
    }
}
