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
    static let configuration = CommandConfiguration(
        abstract: "The stations: registered and seen on the bus, and who is at each.",
        discussion: """
            The session-recorder keeps the registry: the stations added here and every station a live
            bridge speaks for (its heartbeat, status or readings). Commands to a station the registry does
            not know are refused; one athlete is at one station at a time.
            """,
        subcommands: [List.self, Add.self, Rename.self, Remove.self, Assign.self, Unassign.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the stations: live or silent, and who is at each.")
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let stations = try recorder.withClient { try $0.ask(.stationList, NoArgs()) }
            recorder.output(stations) {
                renderTable(
                    ["station", "label", "state", "athlete", "exercise", "load kg", "since"],
                    stations.map {
                        [
                            $0.name, $0.label ?? "-", Station.describeState($0), $0.athlete ?? "-", $0.athlete == nil ? "-" : $0.exercise ?? "-",
                            $0.athlete == nil ? "-" : show($0.loadKg, 1), $0.athlete == nil ? "-" : localDate($0.assignedTs),
                        ]
                    })
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a station (before its bridge first runs), or give one a label.")
        @Argument(help: "The station's name in topics, e.g. rack-01 (the bridge's --station).") var name: String
        @Option(help: "What people call it, e.g. \"squat rack by the window\".") var label: String?
        @OptionGroup var recorder: RecorderOptions

        func validate() throws { try validateStation(name) }

        func run() throws {
            let change = try recorder.withClient { try $0.ask(.stationAdd, StationAddArgs(name: name, label: label)) }
            recorder.output(change) { "station \(name) registered\(change.station.map { " (\(Station.describeState($0)))" } ?? "")\n" }
        }
    }

    struct Rename: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rename a station, its history with it (or merge it into another).",
            discussion: """
                Every stored set, rep, assignment, calibration, posture change, profile and alert of NAME is
                moved to NEW (raw readings are not: they expire). Refused while NAME is live: restart its
                bridge with --station NEW first.
                """)
        @Argument(help: "The station's name now.") var name: String
        @Argument(help: "Its new name.") var new: String
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            try validateStation(name)
            try validateStation(new)
        }

        func run() throws {
            let change = try recorder.withClient { try $0.ask(.stationRename, StationRenameArgs(name: name, to: new)) }
            recorder.output(change) { "station \(name) is now \(new): \(change.movedRows ?? 0) stored rows moved\n" }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a station off the registry (its history stays).",
            discussion: "Refused while its bridge is live or someone is assigned to it.")
        @Argument(help: "The station.") var name: String
        @OptionGroup var recorder: RecorderOptions

        func validate() throws { try validateStation(name) }

        func run() throws {
            let change = try recorder.withClient { try $0.ask(.stationRemove, StationNameArgs(name: name)) }
            recorder.output(change) { "station \(name) removed from the registry; its history stays\n" }
        }
    }

    struct Assign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Assign an athlete, exercise and load to a station.",
            discussion: """
                Checks the station, athlete and exercise with the recorder, publishes cmd.<station>
                athlete.assign (with the exercise's expected ROM and default rest) for the detector, posture
                evaluator and notifier, and waits until the recorder has stored it. An athlete at another
                station is refused there unless --move (which unassigns them there first).
                """)
        @Argument(help: "The station, e.g. rack-01.") var station: String
        @Option(help: "Athlete id.") var athlete: String
        @Option(help: "Exercise id (see vbt exercise list).") var exercise: String
        @Option(help: "Load on the bar, kg.") var load: Double
        @Option(help: "Velocity loss that stops the set, % (default 20).") var vlThreshold: Double?
        @Flag(help: "Move the athlete here from the station they are at (it is unassigned).") var move = false
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            try validateStation(station)
            guard (0...600).contains(load) else { throw ValidationError("--load must be 0 to 600 kg") }
            if let vlThreshold, !(1...90).contains(vlThreshold) { throw ValidationError("--vl-threshold must be 1 to 90 %") }
        }

        func run() throws {
            try recorder.withClient { client in
                _ = try client.ask(.athleteShow, IdArgs(id: athlete))
                let entry = try client.ask(.exerciseShow, IdArgs(id: exercise))
                try client.prepareAssignment(athlete: athlete, at: station, move: move, recorder: recorder)
                let args = assignmentArgs(
                    athlete: athlete, exercise: exercise, loadKg: load, restS: entry.defaultRestS, entry: entry,
                    vlThresholdPct: vlThreshold)
                let sent = try publishCommands(station: station, athlete: athlete, config: recorder.config, [(Command.Name.athleteAssign.rawValue, args)])
                let stored = try client.waitStored(station: station, commandId: sent.ids[0], timeoutS: recorder.timeout)
                recorder.output(stored) {
                    "\(station): \(athlete), \(exercise) at \(show(load, 1)) kg\(sent.answers.isEmpty ? "" : " (\(describe(sent.answers)))")\n"
                }
            }
        }
    }

    struct Unassign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Nobody at a station any more: its set ends, its rest and plan stop.",
            discussion: "Publishes cmd.<station> athlete.unassign and waits until the recorder has stored it.")
        @Argument(help: "The station, e.g. rack-01.") var station: String
        @OptionGroup var recorder: RecorderOptions

        func validate() throws { try validateStation(station) }

        func run() throws {
            try recorder.withClient { client in
                let record = try client.knownStation(station)
                guard let athlete = record.athlete else {
                    throw QueryError(kind: "invalid", message: "nobody is at \(station): vbt station list shows who is where")
                }
                let stored = try client.unassign(station, athlete: athlete, recorder: recorder)
                recorder.output(stored) { "\(station): \(athlete) unassigned; nobody is at \(station)\n" }
            }
        }
    }

    static func describeState(_ station: StationRecord) -> String {
        if station.live { return "live" }
        guard let silent = station.silentForS else { return "never heard" }
        return "silent \(describeDuration(silent))"
    }
}

/// A station's name as people mistype it: case, separators and leading zeros ignored
/// (`Rack-1`, `rack01` and `rack-01` are the same).
func looseStationName(_ name: String) -> String {
    var out = "", digits = ""
    func number() -> String {
        let trimmed = digits.drop { $0 == "0" }
        return trimmed.isEmpty ? (digits.isEmpty ? "" : "0") : String(trimmed)
    }
    for character in name.lowercased() where character != "-" && character != "_" && character != "." {
        if character.isNumber {
            digits.append(character)
        } else {
            out += number() + String(character)
            digits = ""
        }
    }
    return out + number()
}

/// "45 s", "12 min", "3 h", "2 d".
func describeDuration(_ seconds: Double) -> String {
    switch seconds {
    case ..<120: "\(Int(seconds.rounded())) s"
    case ..<7_200: "\(Int((seconds / 60).rounded())) min"
    case ..<172_800: "\(Int((seconds / 3_600).rounded())) h"
    default: "\(Int((seconds / 86_400).rounded())) d"
    }
}

extension QueryClient {
    /// The registry's record of `station`, or an error naming what to do when it is unknown.
    func knownStation(_ station: String) throws -> StationRecord {
        try knownStation(station, in: try ask(.stationList, NoArgs()))
    }

    /// `station`'s record among `stations` (the registry, as `station.list` answered).
    func knownStation(_ station: String, in stations: [StationRecord]) throws -> StationRecord {
        guard let record = stations.first(where: { $0.name == station }) else {
            let near = stations.map(\.name).filter { looseStationName($0) == looseStationName(station) }
            throw QueryError(
                kind: "invalid",
                message: "no station '\(station)' is known\(near.isEmpty ? "" : " (did you mean \(near.joined(separator: " or "))?)"): "
                    + "vbt station list shows the stations; vbt station add \(station) registers one")
        }
        return record
    }

    /// Before `athlete` is assigned to `station`: the station must be known, and the athlete at no
    /// other station (with `move`, unassigned there first). A silent station is said on stderr:
    /// the assignment waits for it.
    func prepareAssignment(athlete: String, at station: String, move: Bool, recorder: RecorderOptions) throws {
        let stations = try ask(.stationList, NoArgs())
        let record = try knownStation(station, in: stations)
        if let reason = record.silenceReason { reportProblem("vbt: note: \(reason); the assignment is kept for when it speaks") }
        for other in stations where other.athlete == athlete && other.name != station {
            guard move else {
                throw QueryError(
                    kind: "invalid",
                    message: "\(athlete) is at \(other.name): vbt station unassign \(other.name) first, or --move to move them to \(station)")
            }
            try unassign(other.name, athlete: athlete, recorder: recorder)
        }
    }

    /// Publishes `athlete.unassign` to `station` and waits until the recorder has stored it.
    @discardableResult
    func unassign(_ station: String, athlete: String, recorder: RecorderOptions) throws -> AssignmentRecord {
        let sent = try publishCommands(station: station, athlete: athlete, config: recorder.config, [(Command.Name.athleteUnassign.rawValue, JSONObject())])
        return try waitStored(station: station, commandId: sent.ids[0], timeoutS: recorder.timeout)
    }
}

func validateStation(_ station: String) throws {
    guard isStationName(station) else {
        throw ValidationError("the station must be a name such as rack-01: 1 to 64 letters, digits, '.', '_' or '-'")
    }
}

/// The programs that act on each command vbt sends to a station and answer it on
/// `ack.<station>` (proto/README.md).
let commandAnswerers: [String: [String]] = [
    Command.Name.athleteAssign.rawValue: ["rep-detector", "notifier"],
    Command.Name.athleteUnassign.rawValue: ["rep-detector", "notifier"],
    Command.Name.planAssign.rawValue: ["notifier"],
]

/// One program's answer to a command: carried out, with what it said.
struct CommandAnswer: Equatable {
    var program: String
    var command: String
    var detail: String?
}

/// "rep-detector: squat at 100 kg for ana; notifier: done".
func describe(_ answers: [CommandAnswer]) -> String {
    answers.map { "\($0.program): \($0.detail ?? "done")" }.joined(separator: "; ")
}

/// Publishes commands to every program serving `station` (on this command's bus options) and
/// waits for the answers of the programs that act on them and run (their heartbeat heard):
/// a refusal, or a running program's silence, is one line and exit 1. Returns the commands'
/// correlation ids and the answers.
@discardableResult
func publishCommands(
    station: String, athlete: String, config: BusConfig, _ commands: [(String, JSONObject)]
) throws -> (ids: [String], answers: [CommandAnswer]) {
    let context = ZMQContext()
    defer { context.terminate() }
    do {
        let logger = Logger(label: "vbt") { _ in SwiftLogNoOpLogHandler() }
        // Subscribed to heartbeats and answers before anything goes out, so no answer is missed.
        let inbox = try Subscriber(
            context: context, config: config, prefixes: [HeartbeatMessage.topicPrefix, AckMessage.topic(station: station)], logger: logger)
        let publisher = try Publisher(context: context, config: config, program: "vbt")
        // Every program beats once a second: 1.2 s hears each one running.
        let started = monotonicSeconds()
        var running: Set<String> = []
        while monotonicSeconds() - started < 1.2 {
            if busSilent(inbox, since: started) { throw busUnreachable(config) }
            if let message = try inbox.next(timeoutMs: 100), message.envelope.type == HeartbeatMessage.type { running.insert(message.envelope.station) }
        }
        if inbox.stats.busHeartbeats == 0 { throw busUnreachable(config) }
        let ids = try sendCommands(publisher, station: station, athlete: athlete, target: "*", commands, whoListens: "vbt-bus and session-recorder")
        var awaited = zip(ids, commands).flatMap { id, command in
            (commandAnswerers[command.0] ?? []).filter(running.contains).map { (id: id, command: command.0, program: $0) }
        }
        var answers: [CommandAnswer] = []
        let deadline = monotonicSeconds() + 5
        while !awaited.isEmpty, monotonicSeconds() < deadline {
            guard let message = try inbox.next(timeoutMs: 200), message.envelope.type == AckMessage.type,
                let ack = try? message.payload(as: AckMessage.self),
                let index = awaited.firstIndex(where: { $0.id == ack.cmdId && $0.program == ack.program })
            else { continue }
            awaited.remove(at: index)
            guard ack.state == .done else {
                reportProblem("vbt: the \(ack.program) did not carry out \(ack.command) at \(station): \(ack.reason ?? "no reason given")")
                throw ProgramExit()
            }
            answers.append(CommandAnswer(program: ack.program, command: ack.command, detail: ack.reason))
        }
        if let silent = awaited.first {
            reportProblem("vbt: \(silent.command) \(silent.id) sent to \(station), but the \(silent.program) (running) did not answer within 5 s; see its log")
            throw ProgramExit()
        }
        // In a fixed order (programs answer in whatever order they run).
        return (ids, answers.sorted { ($0.program, $0.command) < ($1.program, $1.command) })
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
            if let stored = try ask(.assignmentGet, StationArgs(station: station, cmdId: commandId)), stored.cmdId == commandId {
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
