import ArgumentParser
import Foundation
import Logging
import Synchronization
import VBTBus
import VBTCommandLine
import VBTWire

/// `vbt rest pause|resume|skip|extend STATION`: the notifier's rest timer at a station.
struct Rest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause, resume, skip or extend a station's rest timer (the notifier runs it).",
        discussion: """
            Sends cmd.<station> rest.<verb> with target notifier and waits for its answer (ack.<station>): exits 0 when
            it carried the command out, 1 with its reason when it refused (e.g. no rest timer at the station) or did
            not answer within 5 s. Watch the timer with `vbt watch` or `vbt echo timer.`.
            """,
        subcommands: [Pause.self, Resume.self, Skip.self, Extend.self])

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause the rest timer; the remaining time is kept.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(Command.Name.restPause.rawValue, station: station, args: JSONObject(), bus: bus) }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused rest timer.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(Command.Name.restResume.rawValue, station: station, args: JSONObject(), bus: bus) }
    }

    struct Skip: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End the rest now: the plan moves to the next set or exercise.")
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station, e.g. rack-01.") var station: String
        func validate() throws { try validateStation(station) }
        func run() async throws { try await sendRestCommand(Command.Name.restSkip.rawValue, station: station, args: JSONObject(), bus: bus) }
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
            try await sendRestCommand(Command.Name.restExtend.rawValue, station: station, args: RestExtend(seconds: seconds).args, bus: bus)
        }
    }
}

private func sendRestCommand(_ command: String, station: String, args: JSONObject, bus: BusOptions) async throws {
    let id = try await sendAwaitingAnswer(command, station: station, args: args, program: "notifier", bus: bus)
    print("\(command) \(id) carried out at \(station) by the notifier")
}

/// Sends one command to `program` once its heartbeat says it is there, and waits for its
/// answer (an `ack`); a missing program, a refusal or no answer is one line and exit 1.
/// Returns the command's id and the answer's detail.
@discardableResult
func sendAwaitingAnswer(
    _ command: String, station: String, athlete: String? = nil, args: JSONObject, program: String, bus: BusOptions
) async throws -> (id: String, detail: String?) {
    let logger = bootstrapLogging(label: "vbt.cmd", defaultLevel: .notice)
    let config = bus.config
    let answer = Mutex<(id: String, detail: String?)?>(nil)
    try await runLoop("vbt.cmd", logger: logger) { context in
        // Other programs listen to cmd.* too: only the program's own heartbeat says it is there.
        // Subscribed to the answers before the command goes out, so none is missed.
        try requireBus(context, config, logger: logger)
        let heartbeat = HeartbeatMessage.topic(station: program)
        let inbox = try Subscriber(context: context, config: config, prefixes: [heartbeat, AckMessage.topic(station: station)], logger: logger)
        let deadline = monotonicSeconds() + 5
        var alive = false
        while !alive, monotonicSeconds() < deadline {
            alive = try inbox.next(timeoutMs: 200)?.topic == heartbeat
        }
        guard alive else {
            reportProblem("vbt: no heartbeat from the \(program) within 5 s; start it (\(program)) and check VBT_SUB_ENDPOINT")
            throw ProgramExit()
        }
        let publisher = try Publisher(context: context, config: config, program: "vbt")
        let id = try sendCommands(publisher, station: station, athlete: athlete, target: program, [(command, args)], whoListens: "the \(program)")[0]
        let answerBy = monotonicSeconds() + 5
        while monotonicSeconds() < answerBy {
            guard let message = try inbox.next(timeoutMs: 200), message.envelope.type == AckMessage.type,
                let ack = try? message.payload(as: AckMessage.self), ack.cmdId == id
            else { continue }
            guard ack.state == .done else {
                reportProblem("vbt: the \(program) did not carry out \(command) at \(station): \(ack.reason ?? "no reason given")")
                throw ProgramExit()
            }
            answer.withLock { $0 = (id, ack.reason) }  // a done answer's reason is its detail
            return
        }
        reportProblem("vbt: \(command) \(id) sent to \(station), but the \(program) did not answer within 5 s; see its log")
        throw ProgramExit()
    }
    guard let answered = answer.withLock({ $0 }) else { throw ExitCode.failure }
    return answered
}
