import ArgumentParser
import Foundation
import VBTBus
import VBTCommandLine
import VBTWire

/// `vbt rest pause|resume|skip|extend STATION`: the notifier's rest timer at a station.
struct Rest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause, resume, skip or extend a station's rest timer (the notifier runs it).",
        discussion: "Sends cmd.<station> rest.<verb> with target notifier; watch the timer with `vbt watch` or `vbt echo timer.`.",
        subcommands: [Pause.self, Resume.self, Skip.self, Extend.self])

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause the rest timer; the remaining time is kept.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(CommandName.restPause, station: station, args: JSONObject(), bus: bus) }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused rest timer.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(CommandName.restResume, station: station, args: JSONObject(), bus: bus) }
    }

    struct Skip: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End the rest now: the plan moves to the next set or exercise.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(CommandName.restSkip, station: station, args: JSONObject(), bus: bus) }
    }

    struct Extend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add seconds to the rest (negative shortens it).")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        @Argument(help: "Seconds to add.") var seconds: Double = 30
        func validate() throws {
            try validateStation(station)
            guard seconds.isFinite, abs(seconds) <= 3600, seconds != 0 else { throw ValidationError("SECONDS must be between -3600 and 3600, not 0") }
        }
        func run() async throws {
            try await sendRestCommand(CommandName.restExtend, station: station, args: RestExtend(seconds: seconds).args, bus: bus)
        }
    }
}

/// Sends one command to the notifier once it listens; a missing notifier is one line and exit 1.
private func sendRestCommand(_ command: String, station: String, args: JSONObject, bus: BusOptions) async throws {
    let logger = bootstrapLogging(label: "vbt.rest")
    let config = bus.config
    try await runLoop("vbt.rest", logger: logger) { context in
        // Other programs listen to cmd.* too: only the notifier's own heartbeat says it is there.
        let heartbeats = try Subscriber(context: context, config: config, prefixes: [HeartbeatMessage.topic(station: "notifier")], logger: logger)
        let deadline = monotonicSeconds() + 5
        var alive = false
        while !alive, monotonicSeconds() < deadline {
            alive = try heartbeats.next(timeoutMs: 200)?.topic == HeartbeatMessage.topic(station: "notifier")
        }
        guard alive else {
            reportProblem("vbt: no heartbeat from the notifier within 5 s; start it (notifier) and check VBT_SUB_ENDPOINT")
            throw ProgramExit()
        }
        let publisher = try Publisher(context: context, config: config, program: "vbt")
        let id = try sendCommands(publisher, station: station, target: "notifier", [(command, args)], whoListens: "the notifier")[0]
        print("\(command) \(id) sent to \(station)")
    }
}
