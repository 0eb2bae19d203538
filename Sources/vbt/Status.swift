import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTWire

/// `vbt status`: every program on the bus, from its heartbeat.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Every program on the bus: its heartbeat, counters and problems.",
        discussion: """
            Listens to heartbeat.* for --seconds and prints one line per program: uptime, what it
            received, its gaps, lost and malformed messages (the bus: messages forwarded, connections,
            refused). Exits 1 when nothing was heard: the bus is not reachable, or nothing runs.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: "Seconds to listen (every program beats at least every few seconds).")
    var seconds: Double = 2.5

    @Flag(help: "Print the last heartbeat of each program as JSON lines instead of a table.")
    var json = false

    func validate() throws {
        guard seconds > 0, seconds <= 60 else { throw ValidationError("--seconds must be between 0 and 60") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.status", defaultLevel: .notice)
        let config = bus.config, seconds = self.seconds, json = self.json
        let heard = HeardBox()
        try await runLoop("vbt.status", logger: logger) { context in
            _ = try listen(context, config, prefixes: [HeartbeatMessage.topicPrefix], seconds: seconds, logger: logger) { message in
                guard let beat = try? message.payload(as: HeartbeatMessage.self) else { return }
                heard.add(station: message.envelope.station, src: message.envelope.src, beat: beat, body: message.body)
            }
        }
        let beats = heard.all
        guard !beats.isEmpty else {
            reportProblem("vbt status: no heartbeat in \(seconds) s: is vbt-bus running at \(config.subEndpoint), with these keys?")
            throw ExitCode.failure
        }
        if json {
            for entry in beats { print(String(decoding: entry.body, as: UTF8.self)) }
            return
        }
        let rows = beats.map { entry -> [String] in
            let beat = entry.beat
            var counters = ""
            if let bus = beat.bus {
                counters = "forwarded \(bus.msgsOut), connections \(bus.connections ?? 0), disconnections \(bus.disconnections ?? 0)"
                if let refused = bus.refused { counters += ", refused \(refused) messages, \(bus.refusedConnections ?? 0) connections" }
                if let shed = bus.shedSubscribers, shed > 0 { counters += ", disconnected \(shed) subscribers near its memory budget" }
            } else if let inputs = beat.inputs {
                counters = "received \(inputs.received), gaps \(inputs.gaps), lost \(inputs.lost ?? 0), malformed \(inputs.malformed)"
                if let outstanding = inputs.outstanding, outstanding > 0 { counters += ", still missing \(outstanding)" }
            }
            return [entry.station, beat.role, String(streamInstance(entry.src)), String(format: "%.0f s", beat.uptimeS), counters]
        }
        print(renderTable(["NAME", "PROGRAM", "INSTANCE", "UPTIME", "COUNTERS"], rows), terminator: "")
    }
}

/// Hands every message on `prefixes` to `each` for `seconds`; returns the subscriber's counters.
func listen(
    _ context: ZMQContext, _ config: BusConfig, prefixes: [String], seconds: Double, logger: Logger, _ each: (BusMessage) -> Void
) throws -> SubscriberStats {
    let subscriber = try Subscriber(context: context, config: config, prefixes: prefixes, logger: logger)
    let deadline = monotonicSeconds() + seconds
    while monotonicSeconds() < deadline {
        if let message = try subscriber.next(timeoutMs: Int32(max(1, (deadline - monotonicSeconds()) * 1000))) { each(message) }
    }
    return subscriber.stats
}

/// The last heartbeat of each program heard, by its station (the program's name on the bus).
private final class HeardBox: @unchecked Sendable {
    struct Entry {
        var station: String
        var src: String
        var beat: HeartbeatMessage
        var body: [UInt8]
    }
    private let lock = NSLock()
    private var entries: [String: Entry] = [:]

    func add(station: String, src: String, beat: HeartbeatMessage, body: [UInt8]) {
        lock.withLock { entries[station] = Entry(station: station, src: src, beat: beat, body: body) }
    }

    var all: [Entry] { lock.withLock { entries.values.sorted { $0.station < $1.station } } }
}
