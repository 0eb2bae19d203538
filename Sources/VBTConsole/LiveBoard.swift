import Foundation
import Synchronization
import VBTWire

/// The board shared between the console's bus thread (which applies messages) and its
/// web connections (which read what changed). Watchers are told of a change at most once
/// per pass of the bus loop, and each keeps only the newest version, so a slow browser
/// skips to the latest state instead of queueing every step.
public final class LiveBoard: Sendable {
    private struct State {
        var board = ConsoleBoard()
        var watchers: [UInt64: AsyncStream<UInt64>.Continuation] = [:]
        var nextWatcher: UInt64 = 0
        var bus = BusLink()
    }
    private let state = Mutex(State())
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    /// The console's own view of its bus link, shown on every page.
    public struct BusLink: Sendable, Equatable, Codable {
        /// Whether messages have arrived within the last few seconds (the bus's heartbeat comes every second).
        public var connected = false
        public var messages = 0
        public var gaps = 0
        public var malformed = 0
    }

    public init(silentAfterS: Double = 3, zones: [ZoneFloor] = []) {
        state.withLock {
            $0.board.silentAfterS = silentAfterS
            $0.board.zones = zones
        }
    }

    /// Applies messages and the clock (the bus thread), then wakes the watchers once if anything changed.
    public func update(_ change: (inout ConsoleBoard, inout BusLink) -> Void) {
        let wake = state.withLock { state -> [AsyncStream<UInt64>.Continuation] in
            let before = (state.board.version, state.bus)
            change(&state.board, &state.bus)
            guard state.board.version != before.0 || state.bus != before.1 else { return [] }
            return Array(state.watchers.values)
        }
        let version = self.version
        for watcher in wake { watcher.yield(version) }
    }

    /// The board's current version.
    public var version: UInt64 { state.withLock { $0.board.version } }

    /// A stream that yields whenever the board changes (newest only); ends when the consumer stops.
    public func changes() -> AsyncStream<UInt64> {
        let (stream, continuation) = AsyncStream.makeStream(of: UInt64.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64 in
            state.nextWatcher += 1
            state.watchers[state.nextWatcher] = continuation
            return state.nextWatcher
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        continuation.yield(0)
        return stream
    }

    /// How many browsers are watching.
    public var watcherCount: Int { state.withLock { $0.watchers.count } }

    /// A copy of the board.
    public var snapshot: ConsoleBoard { state.withLock { $0.board } }

    /// What a browser that last drew `version` must be sent: the stations changed since, the
    /// gym's alerts when they changed (or when `version` is 0: everything), and the bus link.
    public func update(since version: UInt64) -> BoardUpdate {
        state.withLock { state in
            BoardUpdate(
                version: state.board.version, full: version == 0, stations: state.board.changed(since: version),
                gymAlerts: state.board.gymAlertsVersion > version || version == 0
                    ? state.board.gymAlerts.values.sorted { $0.alertId < $1.alertId } : nil,
                bus: state.bus)
        }
    }

    /// What a rack display bound to `station` that last drew `version` must be sent: that
    /// station alone, without the answers to commands, no gym alerts and no bus counters.
    /// The server narrows it; the page is never trusted to.
    public func update(since version: UInt64, station: String) -> BoardUpdate {
        state.withLock { state in
            var stations = state.board.changed(since: version).filter { $0.station == station }
            for index in stations.indices { stations[index].acks = [] }
            return BoardUpdate(
                version: state.board.version, full: version == 0, stations: stations, gymAlerts: nil,
                bus: BusLink(connected: state.bus.connected))
        }
    }

    /// What an athlete's session (her account or her phone) must be sent: the stations whose
    /// athlete is now she, each as `StationState.seen(by:)` shows it, and nothing of any other.
    /// `shown` names the stations her browser holds (nil before the first update): when the
    /// stations that are hers are others (she came to one, or left one for another athlete or
    /// none), the update is full, so the browser drops what is no longer hers; otherwise it
    /// carries her stations changed since `version`. The server narrows it; the page is never
    /// trusted to.
    public func update(since version: UInt64, athlete: String, shown: [String]?) -> BoardUpdate {
        state.withLock { state in
            let mine = state.board.stations.values.filter { $0.athlete == athlete }.sorted { $0.station < $1.station }
            let full = version == 0 || shown != mine.map(\.station)
            let stations = full ? mine : mine.filter { $0.version > version }
            return BoardUpdate(
                version: state.board.version, full: full, stations: stations.map { $0.seen(by: athlete) }, gymAlerts: nil,
                bus: BusLink(connected: state.bus.connected))
        }
    }

    /// An update as the browser reads it:
    /// {"type":"board","version":N,"full":bool,"stations":[...],"gym_alerts":[...] (when changed),"bus":{...}}.
    public func json(_ update: BoardUpdate) -> [UInt8] {
        (try? encoder.encode(update)).map(Array.init) ?? Array(#"{"type":"error"}"#.utf8)
    }
}

/// What changed on the board since a browser last drew it.
public struct BoardUpdate: Encodable, Sendable {
    public var type = "board"
    public var version: UInt64
    public var full: Bool
    public var stations: [StationState]
    public var gymAlerts: [AlertView]?
    public var bus: LiveBoard.BusLink

    /// Whether there is nothing to draw beyond a bus link the browser already has.
    public func isEmpty(sameBus: Bool) -> Bool { !full && stations.isEmpty && gymAlerts == nil && sameBus }

    enum CodingKeys: String, CodingKey {
        case type, version, full, stations, bus
        case gymAlerts = "gym_alerts"
    }
}
