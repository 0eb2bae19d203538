/// What a subscriber tells the bus of itself, for the bus at its memory budget to choose whom to
/// disconnect (`BusMemoryBudget`): it subscribes to `subscription`, a prefix no topic starts with
/// (topics are printable ASCII; it starts with DEL, 0x7F), which the bus keeps and does not
/// pass on to the publishers (proto/README.md, "The bus at its memory budget"). On a secured bus,
/// only a service's key may say `.realtime`; anyone may say `.bulk`.
public enum BusPriority: String, Sendable, CaseIterable {
    /// Disconnected first: a consumer that fetches what it missed and is on no rep's path.
    case bulk
    /// What a subscriber that says nothing is.
    case normal
    /// Disconnected last: a consumer on the real-time path (reading -> rep).
    case realtime

    /// The prefix of the subscription that says it.
    static let marker = "\u{7F}vbt.priority="
    /// The marker's bytes, compared with every subscription the bus reads.
    private static let markerBytes = Array(marker.utf8)

    /// The subscription that says this priority (nil for `.normal`, which is said by saying nothing).
    public var subscription: String? { self == .normal ? nil : Self.marker + rawValue }

    /// The priority a subscription's prefix says; nil when it is a topic prefix. An unknown
    /// priority is `.normal` (a later version's word for something this one does not know).
    public static func declared(by prefix: UnsafeRawBufferPointer) -> BusPriority? {
        let marker = Self.markerBytes
        guard prefix.count >= marker.count, prefix.prefix(marker.count).elementsEqual(marker) else { return nil }
        return BusPriority(rawValue: String(decoding: prefix.dropFirst(marker.count), as: UTF8.self)) ?? .normal
    }

    /// The order the bus disconnects in (lowest first).
    package var shedOrder: Int {
        switch self {
        case .bulk: 0
        case .normal: 1
        case .realtime: 2
        }
    }
}
