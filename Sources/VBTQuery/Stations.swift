// The station registry's records and arguments (proto/query.md, "Stations").

/// A station the recorder knows: registered with `station.add`, or seen on the bus (a live
/// bridge's heartbeat, its status or its readings).
public struct StationRecord: Codable, Sendable, Equatable {
    /// The name in topics (`sample.<name>`).
    public var name: String
    /// What people call it ("squat rack by the window"), when given.
    public var label: String?
    /// When it was registered (nil: only seen on the bus).
    public var addedTs: Double?
    /// When anything from it was first and last on the bus (nil: never).
    public var firstSeenTs: Double?
    public var lastSeenTs: Double?
    /// Seconds since it was last heard from, at the time of the answer (nil: never heard).
    public var silentForS: Double?
    /// Whether it is live: heard from within `StationRecord.liveWithinS`.
    public var live: Bool
    /// Who is at it now (its latest assignment), and what they lift.
    public var athlete: String?
    public var exercise: String?
    public var loadKg: Double?
    /// When that assignment was made.
    public var assignedTs: Double?

    /// A bridge sends a heartbeat every second: a station not heard from for this long is silent.
    public static let liveWithinS = 10.0

    /// Creates a record.
    public init(
        name: String, label: String? = nil, addedTs: Double? = nil, firstSeenTs: Double? = nil, lastSeenTs: Double? = nil,
        silentForS: Double? = nil, live: Bool = false, athlete: String? = nil, exercise: String? = nil, loadKg: Double? = nil,
        assignedTs: Double? = nil
    ) {
        (self.name, self.label, self.addedTs, self.firstSeenTs, self.lastSeenTs) = (name, label, addedTs, firstSeenTs, lastSeenTs)
        (self.silentForS, self.live, self.athlete, self.exercise, self.loadKg, self.assignedTs) = (
            silentForS, live, athlete, exercise, loadKg, assignedTs
        )
    }

    enum CodingKeys: String, CodingKey {
        case name, label, live, athlete, exercise
        case addedTs = "added_ts"
        case firstSeenTs = "first_seen_ts"
        case lastSeenTs = "last_seen_ts"
        case silentForS = "silent_for_s"
        case loadKg = "load_kg"
        case assignedTs = "assigned_ts"
    }

    /// Why a command that needs the station's sensors cannot be sent to it now, or nil when
    /// it can: never heard from, or silent.
    public var silenceReason: String? {
        guard !live else { return nil }
        guard let silentForS else {
            return "\(name) has never been heard from on the bus: is its sensor-bridge running (vbt status)?"
        }
        return "\(name) has been silent for \(Int(silentForS.rounded())) s: is its sensor-bridge running (vbt status)?"
    }
}

/// `station.add`.
public struct StationAddArgs: Codable, Sendable {
    public var name: String
    public var label: String?
    public init(name: String, label: String? = nil) { (self.name, self.label) = (name, label) }
}

/// `station.rename`.
public struct StationRenameArgs: Codable, Sendable {
    public var name: String
    public var to: String
    public init(name: String, to: String) { (self.name, self.to) = (name, to) }
}

/// `station.remove`.
public struct StationNameArgs: Codable, Sendable {
    public var name: String
    public init(name: String) { self.name = name }
}

/// The station registry's answer to a change (`station.add`, `station.rename`, `station.remove`).
public struct StationChange: Codable, Sendable, Equatable {
    public var station: StationRecord?
    /// Rows of history moved to the new name (`station.rename`).
    public var movedRows: Int?
    public init(station: StationRecord?, movedRows: Int? = nil) { (self.station, self.movedRows) = (station, movedRows) }
    enum CodingKeys: String, CodingKey {
        case station
        case movedRows = "moved_rows"
    }
}
