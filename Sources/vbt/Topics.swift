import ArgumentParser
import Foundation
import Logging
import Synchronization
import VBTBus
import VBTCommandLine
import VBTWire

/// `vbt topics`: who publishes each message type and who listens to it.
struct Topics: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Who publishes each message type on the bus, how often, and who listens to it.",
        discussion: """
            Listens to everything for --seconds: the publishers are the programs whose messages arrived
            (by their instance in src), with messages per second and stations; the listeners are the
            programs whose heartbeat says which topic prefixes they subscribe to (proto/heartbeat.schema.json,
            `subscribes`). A type nobody listens to, or that nobody published meanwhile, says so.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: "Seconds to listen (every program beats at least every few seconds).")
    var seconds: Double = 3

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 60 else { throw ValidationError("--seconds must be between 0 and 60") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.topics", defaultLevel: .notice)
        let config = bus.config, seconds = self.seconds
        let map = Mutex(TopicMap())
        try await runLoop("vbt.topics", logger: logger) { context in
            let heard = try listen(context, config, prefixes: [""], seconds: seconds, logger: logger) { message in map.withLock { $0.add(message) } }
            if heard.busHeartbeats == 0 { throw busUnreachable(config) }
        }
        let rows = map.withLock { $0.rows(seconds: seconds) }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(rows), as: UTF8.self))
            return
        }
        print(
            renderTable(
                ["TYPE", "PUBLISHED BY", "MSG/S", "STATIONS", "LISTENED TO BY"],
                rows.map { row in
                    [
                        row.type,
                        row.publishers.isEmpty ? "(none heard)" : row.publishers.map(\.program).joined(separator: ", "),
                        String(format: "%.1f", row.publishers.reduce(0) { $0 + $1.perS }),
                        row.stations.isEmpty ? "-" : row.stations.count <= 3 ? row.stations.joined(separator: " ") : "\(row.stations.count)",
                        row.listeners.isEmpty
                            ? "(nobody)"
                            : row.listeners.map { listener in listener.scope.map { "\(listener.program) (\(Self.shortened($0)))" } ?? listener.program }
                                .joined(separator: ", "),
                    ]
                }),
            terminator: "")
    }

    /// A scope of many prefixes (a posture-evaluator follows every station with a wearable) as its
    /// first three and how many there are; `--json` keeps them all.
    static func shortened(_ scope: String) -> String {
        let prefixes = scope.split(separator: " ")
        return prefixes.count <= 3 ? scope : prefixes.prefix(3).joined(separator: " ") + " and \(prefixes.count - 3) more"
    }
}

/// What `vbt topics` heard: messages by type and program, and each program's subscriptions.
struct TopicMap {
    struct Row: Encodable {
        var type: String
        var publishers: [Publisher]
        var stations: [String]
        var listeners: [Listener]
    }

    struct Publisher: Encodable {
        var program: String
        var messages: Int
        var perS: Double
        enum CodingKeys: String, CodingKey {
            case program, messages
            case perS = "per_s"
        }
    }

    struct Listener: Encodable {
        var program: String
        /// Which part of the type it takes: nil for all of it, `everything` for a program that
        /// takes every message, else its station-specific prefixes.
        var scope: String?
    }

    private var counts: [String: [String: Int]] = [:]
    private var stations: [String: Set<String>] = [:]
    private var subscriptions: [String: [String]] = [:]

    mutating func add(_ message: BusMessage) {
        let type = message.envelope.type
        counts[type, default: [:]][Self.program(ofSource: message.envelope.src), default: 0] += 1
        if type != HeartbeatMessage.type { stations[type, default: []].insert(message.envelope.station) }
        if type == HeartbeatMessage.type, let beat = try? message.payload(as: HeartbeatMessage.self), let prefixes = beat.subscribes {
            subscriptions[message.envelope.station] = prefixes
        }
    }

    /// `rep-detector` of `rep-detector-0000abcd/rep.rack-01`.
    static func program(ofSource src: String) -> String {
        let instance = streamInstance(src)
        guard let dash = instance.lastIndex(of: "-"), instance[instance.index(after: dash)...].allSatisfy(\.isHexDigit) else { return String(instance) }
        return String(instance[..<dash])
    }

    /// Every known type and every type heard, in proto/README.md's order, then the others.
    func rows(seconds: Double) -> [Row] {
        let known = MessageTypes.all.map { $0.type }
        let types = known + counts.keys.filter { !known.contains($0) }.sorted()
        return types.map { type in
            let publishers = (counts[type] ?? [:]).sorted { $0.key < $1.key }.map {
                Publisher(program: $0.key, messages: $0.value, perS: Double($0.value) / seconds)
            }
            let listeners = subscriptions.sorted { $0.key < $1.key }.compactMap { program, prefixes -> Listener? in
                let typePrefix = type + "."
                if prefixes.contains("") { return Listener(program: program, scope: "everything") }
                if prefixes.contains(where: { typePrefix.hasPrefix($0) }) { return Listener(program: program, scope: nil) }
                let partial = prefixes.filter { $0.hasPrefix(typePrefix) }
                return partial.isEmpty ? nil : Listener(program: program, scope: partial.joined(separator: " "))
            }
            return Row(type: type, publishers: publishers, stations: (stations[type] ?? []).sorted(), listeners: listeners)
        }
    }
}
