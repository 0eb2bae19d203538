import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTQuery
import VBTWire

// The station commands: who is at a station, and the commands that reach a station's
// programs over the bus (cmd.<station>, proto/cmd.schema.json).

struct Station: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Station commands.", subcommands: [Assign.self])

    struct Assign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Assign an athlete, exercise and load to a station.",
            discussion: """
                Checks the athlete and exercise with the recorder, publishes cmd.<station> athlete.assign
                (with the exercise's expected ROM and default rest) for the detector, posture evaluator
                and notifier, and waits until the recorder has stored it.
                """)
        @Argument(help: "The station, e.g. rack-01.") var station: String
        @Option(help: "Athlete id.") var athlete: String
        @Option(help: "Exercise id (see vbt exercise list).") var exercise: String
        @Option(help: "Load on the bar, kg.") var load: Double
        @Option(help: "Velocity loss that stops the set, % (default 20).") var vlThreshold: Double?
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            try validateStation(station)
            guard (0...600).contains(load) else { throw ValidationError("--load must be 0 to 600 kg") }
            if let vlThreshold, !(1...90).contains(vlThreshold) { throw ValidationError("--vl-threshold must be 1 to 90 %") }
        }

        func run() throws {
            try recorder.withClient { client in
                _ = try client.ask(.athleteShow, IdArgs(id: athlete), as: AthleteProfile.self)
                let entry = try client.ask(.exerciseShow, IdArgs(id: exercise), as: ExerciseRecord.self)
                let args = assignmentArgs(
                    athlete: athlete, exercise: exercise, loadKg: load, restS: entry.defaultRestS, romMm: entry.expectedRomMm,
                    vlThresholdPct: vlThreshold)
                let ids = try publishCommands(station: station, athlete: athlete, config: recorder.config, [(CommandName.athleteAssign, args)])
                let stored = try client.waitStored(station: station, commandId: ids[0], timeoutS: recorder.timeout)
                recorder.output(stored) { "\(station): \(athlete), \(exercise) at \(show(load, 1)) kg\n" }
            }
        }
    }
}

func validateStation(_ station: String) throws {
    guard (try? splitTopic(Array(CommandMessage.topic(station: station).utf8))) != nil, !station.contains(".") else {
        throw ValidationError("the station must be a name such as rack-01 (printable, no spaces or dots)")
    }
}

/// Publishes commands to every program serving `station` (on this command's bus options);
/// returns their correlation ids.
@discardableResult
func publishCommands(station: String, athlete: String, config: BusConfig, _ commands: [(String, JSONObject)]) throws -> [String] {
    let context = ZMQContext()
    defer { context.terminate() }
    do {
        try requireBus(context, config, logger: Logger(label: "vbt") { _ in SwiftLogNoOpLogHandler() })
        let publisher = try Publisher(context: context, config: config, program: "vbt")
        return try sendCommands(publisher, station: station, athlete: athlete, target: "*", commands, whoListens: "vbt-bus and session-recorder")
    } catch let error as ZMQError {
        reportProblem("vbt: \(error); check VBT_PUB_ENDPOINT and that vbt-bus is running")
        throw ExitCode.failure
    } catch is ProgramExit {
        throw ExitCode.failure
    }
}

/// Sends `commands` as `cmd.<station>` once a subscription for them has reached the bus
/// (else one line naming `whoListens`, and `ProgramExit`); returns their correlation ids.
func sendCommands(
    _ publisher: Publisher, station: String, athlete: String? = nil, target: String,
    _ commands: [(String, JSONObject)], whoListens: String
) throws -> [String] {
    let topic = CommandMessage.topic(station: station)
    guard try publisher.waitForSubscriber(topic: topic, timeoutS: 5) else {
        reportProblem("vbt: nobody listens to \(topic); is \(whoListens) running?")
        throw ProgramExit()
    }
    let id = "vbt-\(String(UInt64.random(in: .min ... .max), radix: 16))"
    return try commands.enumerated().map { index, command in
        let commandId = "\(id)-\(index + 1)"
        try publisher.publish(CommandMessage(id: commandId, command: command.0, target: target, args: command.1), station: station, athlete: athlete)
        return commandId
    }
}

extension QueryClient {
    /// Waits until the recorder has stored the command `commandId` as `station`'s assignment.
    @discardableResult
    func waitStored(station: String, commandId: String, timeoutS: Double) throws -> AssignmentRecord {
        let deadline = monotonicSeconds() + timeoutS
        while true {
            // Asked by its command id: the notifier's own athlete.assign for a plan's next item may come
            // a moment later and be the station's latest by then.
            if let stored = try ask(.assignmentGet, StationArgs(station: station, cmdId: commandId), as: AssignmentRecord?.self), stored.cmdId == commandId {
                return stored
            }
            guard monotonicSeconds() < deadline else {
                throw QueryError(
                    kind: "timeout",
                    message:
                        "the recorder has not stored the assignment of \(station) within \(Int(timeoutS)) s: check it subscribes to the same bus (VBT_SUB_ENDPOINT)"
                )
            }
            usleep(50_000)
        }
    }
}
