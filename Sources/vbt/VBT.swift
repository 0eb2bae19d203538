import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTQuery
import VBTWire

@main
struct VBT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vbt",
        abstract: "Operator tools: watch, measure, record and publish bus messages; athletes, plans, stations, history, progress, statistics, exports.",
        discussion: """
            Endpoints come from VBT_PUB_ENDPOINT and VBT_SUB_ENDPOINT (proto/README.md, "Wire format")
            unless given as options. Topics are <type>.<station>; a PREFIX such as `rep.` or
            `sample.rack-01` selects what to receive (none: everything).
            """,
        version: versionText("vbt"),
        subcommands: [
            Echo.self, Hz.self, Record.self, Pub.self, Posture.self, Athlete.self, Exercise.self, PlanCommand.self, ReadinessCommand.self,
            Station.self, History.self, Progress.self, Stats.self, Export.self, Rest.self, Watch.self, Eval.self, Wire.self, Keys.self, Status.self,
            Topics.self, Report.self,
            ConsoleCommand.self, Backup.self, SetCommand.self, LoadTest.self,
            ChainCommand.self, AdviceCommand.self,
        ])
}

struct Posture: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Posture commands for the posture-evaluator.", subcommands: [Calibrate.self])

    struct Calibrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Calibrate an athlete's posture at a station: sit or stand well for --seconds.",
            discussion: """
                Checks with the session-recorder that the athlete and the station are known and the station
                is live, sends cmd.<station> posture.calibrate and waits for the posture-evaluator's answer;
                the calibration itself follows as calibration.<station> when the seconds are over. It is
                the athlete's: it does not change who is at the station (only an assignment does).
                """)

        @OptionGroup var recorder: RecorderOptions

        @Option(help: "The station the athlete wears the sensor at.")
        var station: String

        @Option(help: "The athlete to calibrate.")
        var athlete: String

        @Option(help: "Seconds of readings to collect.")
        var seconds: Double = 10

        @Flag(help: "Send without asking the session-recorder (an installation without one).")
        var noCheck = false

        func validate() throws {
            guard seconds >= 1, seconds <= 600 else { throw ValidationError("--seconds must be between 1 and 600") }
            try validateStation(station)
        }

        func run() async throws {
            if !noCheck {
                try recorder.withClient { client in
                    _ = try client.ask(.athleteShow, IdArgs(id: athlete))
                    if let reason = try client.knownStation(station).silenceReason {
                        throw QueryError(kind: "invalid", message: "cannot calibrate at \(station): \(reason)")
                    }
                }
            }
            let args = PostureCalibrate(athlete: athlete, seconds: seconds).args
            let answer = try await sendAwaitingAnswer(
                Command.Name.postureCalibrate.rawValue, station: station, athlete: athlete, args: args, program: "posture-evaluator", bus: recorder.bus)
            print(
                "calibration \(answer.id) started at \(station): \(answer.detail ?? "calibrating \(athlete) for \(Int(seconds)) s"); "
                    + "watch with `vbt echo calibration.\(station)`")
        }
    }
}

/// Refuses a topic prefix no message can have (`reps.` for `rep.`: it would wait for ever):
/// its type part (up to the first dot, or all of it) must begin a type of proto/.
func validatePrefixes(_ prefixes: [String]) throws {
    let types = MessageTypes.all.map { $0.type }
    for prefix in prefixes {
        let typePart = prefix.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let complete = prefix.contains(".")
        guard complete ? types.contains(typePart) : types.contains(where: { $0.hasPrefix(typePart) }) else {
            let near = types.filter { typePart.hasPrefix($0) || $0.hasPrefix(typePart.prefix(3)) }
            throw ValidationError(
                "no message type '\(typePart)' (in '\(prefix)')\(near.isEmpty ? "" : "; did you mean \(near.map { "\($0)." }.joined(separator: " or "))?"); "
                    + "types: \(types.joined(separator: ", "))")
        }
    }
}

/// Ends a command quietly with exit 1 after its one-line message.
struct ProgramExit: Error {}

/// How long a command waits for the bus's heartbeat (which the bus sends at once to every
/// new subscriber) before it says the bus is not reachable.
let busTimeoutS = 3.0

/// The one line for a bus that did not answer, and the exit that follows it.
func busUnreachable(_ config: BusConfig) -> ProgramExit {
    reportProblem(
        "vbt: vbt-bus is not reachable at \(config.subEndpoint): no heartbeat within \(Int(busTimeoutS)) s; "
            + "start it (make run starts everything), check VBT_SUB_ENDPOINT/--sub-endpoint, and with keys VBT_CERT/VBT_BUS_CERT")
    return ProgramExit()
}

/// Whether a subscriber started at `started` has still not heard the bus (`busTimeoutS` on).
func busSilent(_ subscriber: Subscriber, since started: Double) -> Bool {
    subscriber.stats.busHeartbeats == 0 && monotonicSeconds() - started > busTimeoutS
}

/// Waits for the bus's heartbeat on a subscriber of its own (for commands that only
/// publish); without it, one line and exit 1.
func requireBus(_ context: ZMQContext, _ config: BusConfig, logger: Logger) throws {
    let probe = try Subscriber(context: context, config: config, prefixes: [Subscriber.busHeartbeatTopic], logger: logger)
    let started = monotonicSeconds()
    while probe.stats.busHeartbeats == 0 {
        if busSilent(probe, since: started) { throw busUnreachable(config) }
        _ = try probe.next(timeoutMs: 100)
    }
}

/// Runs one socket loop as the whole program; a bus error becomes one line and exit 1.
func runLoop(_ name: String, logger: Logger, _ body: @escaping @Sendable (ZMQContext) throws -> Void) async throws {
    do {
        try await runProgram("vbt", logger: logger, body)
    } catch let error as RecordingError {
        reportProblem("vbt: \(error)")
        throw ExitCode.failure
    } catch is ProgramExit {
        throw ExitCode.failure
    }
}

struct Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print live messages as `<topic> <json>`, one a line.")

    @OptionGroup var bus: BusOptions

    @Argument(help: "Topic prefixes to receive (none: everything).")
    var prefixes: [String] = []

    @Option(help: "Exit after this many messages.")
    var count: Int?

    func validate() throws { try validatePrefixes(prefixes) }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.echo")
        let config = bus.config, prefixes = self.prefixes, count = self.count
        try await runLoop("vbt.echo", logger: logger) { context in
            let subscriber = try Subscriber(context: context, config: config, prefixes: prefixes, logger: logger)
            let started = monotonicSeconds()
            var printed = 0
            while count.map({ printed < $0 }) ?? true {
                if busSilent(subscriber, since: started) { throw busUnreachable(config) }
                guard let message = try subscriber.next(timeoutMs: 250) else { continue }
                print(message.topic, String(decoding: message.body, as: UTF8.self))
                fflush(nil)
                printed += 1
            }
        }
    }
}

struct Hz: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the message rate per topic and per src, with gap and duplicate counts.")

    @OptionGroup var bus: BusOptions

    @Argument(help: "Topic prefixes to measure (none: everything).")
    var prefixes: [String] = []

    @Option(help: "Seconds per report.")
    var window: Double = 1.0

    @Option(help: "Exit after this many reports.")
    var reports: Int?

    func validate() throws {
        try validatePrefixes(prefixes)
        guard window >= 0.05, window <= 3600 else { throw ValidationError("--window must be between 0.05 and 3600 seconds") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.hz")
        let config = bus.config, prefixes = self.prefixes, window = self.window, reports = self.reports
        try await runLoop("vbt.hz", logger: logger) { context in
            let subscriber = try Subscriber(context: context, config: config, prefixes: prefixes, logger: logger)
            var previous: [String: Int] = [:]
            var windowStart = monotonicSeconds()
            let started = windowStart
            var printed = 0
            while reports.map({ printed < $0 }) ?? true {
                if busSilent(subscriber, since: started) { throw busUnreachable(config) }
                let remaining = windowStart + window - monotonicSeconds()
                if remaining > 0 {
                    _ = try subscriber.next(timeoutMs: Int32(min(remaining, 0.25) * 1000) + 1)
                    continue
                }
                let elapsed = monotonicSeconds() - windowStart
                windowStart = monotonicSeconds()
                print(HzReport.render(subscriber.stats, previous: previous, elapsedS: elapsed))
                fflush(nil)
                previous = subscriber.stats.sources.mapValues(\.received)
                printed += 1
            }
        }
    }
}

/// The table `vbt hz` prints.
enum HzReport {
    static func render(_ stats: SubscriberStats, previous: [String: Int], elapsedS: Double) -> String {
        func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
            let padding = String(repeating: " ", count: max(0, width - text.count))
            return right ? padding + text : text + padding
        }
        var lines = [
            pad("topic", 24) + " " + pad("src", 44) + pad("msg/s", 10, right: true) + pad("received", 11, right: true)
                + pad("gaps", 7, right: true) + pad("missing", 9, right: true) + pad("dups", 7, right: true)
        ]
        let byTopic = Dictionary(grouping: stats.sources, by: { $0.value.topic })
        for topic in byTopic.keys.sorted() {
            for (src, source) in byTopic[topic]!.sorted(by: { $0.key < $1.key }) {
                let rate = Double(source.received - previous[src, default: 0]) / max(elapsedS, 1e-6)
                lines.append(
                    pad(topic, 24) + " " + pad(src, 44) + pad(String(format: "%.1f", rate), 10, right: true)
                        + pad("\(source.received)", 11, right: true) + pad("\(source.gaps)", 7, right: true)
                        + pad("\(source.missing)", 9, right: true) + pad("\(source.duplicates)", 7, right: true))
            }
        }
        let malformed = stats.malformed.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }
        lines.append(
            "malformed: \(stats.totals.malformed)" + (malformed.isEmpty ? "" : " (" + malformed.joined(separator: ", ") + ")")
                + "  bus heartbeats: \(stats.busHeartbeats)  bus restarts: \(stats.busRestarts)")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// `vbt record`: `vbt record --out FILE [PREFIX...]` records (its default subcommand,
/// `start`); `vbt record info FILE` reads one back.
struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record bus messages to a JSON Lines file, or tell what a recording holds.",
        subcommands: [RecordStart.self, RecordInfo.self], defaultSubcommand: RecordStart.self)
}

struct RecordStart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Record bus messages to a JSON Lines file (proto/README.md, Recordings); the default of vbt record.",
        discussion: """
            Each line is {"t": seconds since the first line, "topic": ..., "msg": the JSON frame}.
            Malformed messages are not recorded; they are counted in the stats. Stops on SIGINT,
            SIGTERM, --count or --duration, then flushes and syncs the file. An --out ending in .gz is
            written gzip-compressed; every reader (sensor-bridge --replay, vbt eval, vbt record info) takes both.
            `vbt record info FILE` tells what a recording holds.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: "The recording file to write (an existing file only with --force).")
    var out: String

    @Flag(help: "Overwrite --out if it exists.")
    var force = false

    @Argument(help: "Topic prefixes to record (none: everything).")
    var prefixes: [String] = []

    @Option(help: "Stop after this many messages.")
    var count: Int?

    @Option(help: "Stop after this many seconds.")
    var duration: Double?

    @Option(help: "Also write the subscriber's counters as JSON to this file, periodically and at the end.")
    var stats: String?

    @Option(help: "Seconds between stats file updates.")
    var statsInterval: Double = 1.0

    func validate() throws {
        try validatePrefixes(prefixes)
        guard statsInterval >= 0.05, statsInterval <= 3600 else { throw ValidationError("--stats-interval must be between 0.05 and 3600 seconds") }
        if let duration { guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be more than 0 seconds") } }
        if let count { guard count >= 1 else { throw ValidationError("--count must be 1 or more") } }
        if !force && FileManager.default.fileExists(atPath: out) {
            throw ValidationError("\(out) exists: choose another --out, or pass --force to overwrite it")
        }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.record")
        let config = bus.config, prefixes = self.prefixes, out = self.out, count = self.count
        let duration = self.duration, statsPath = self.stats, statsInterval = self.statsInterval
        try await runLoop("vbt.record", logger: logger) { context in
            let writer = try RecordingWriter(path: out)
            let subscriber = try Subscriber(context: context, config: config, prefixes: prefixes, logger: logger)
            let started = monotonicSeconds()
            var nextStats = started
            func saveStats() {
                guard let statsPath else { return }
                do { try subscriber.stats.write(toPath: statsPath) } catch {
                    logger.error("stats file not written", metadata: ["path": "\(statsPath)", "error": "\(error)"])
                }
            }
            defer {
                writer.close()
                saveStats()
                let totals = subscriber.stats.totals
                logger.info(
                    "recording closed",
                    metadata: [
                        "path": "\(out)", "lines": "\(writer.lines)", "gaps": "\(totals.gaps)",
                        "missing": "\(totals.missing)", "duplicates": "\(totals.duplicates)", "malformed": "\(totals.malformed)",
                    ])
            }
            while count.map({ writer.lines < $0 }) ?? true {
                let now = monotonicSeconds()
                if busSilent(subscriber, since: started) { throw busUnreachable(config) }
                if let duration, now - started >= duration { break }
                if now >= nextStats {
                    writer.flush()
                    saveStats()
                    nextStats = now + statsInterval
                }
                guard let message = try subscriber.next(timeoutMs: Int32(min(statsInterval, 0.25) * 1000)) else { continue }
                try writer.append(message, receivedAt: monotonicSeconds())
            }
        }
    }
}

struct Pub: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a message (stamped with a fresh envelope) once or repeatedly.",
        discussion: """
            Example: vbt pub cmd.rack-01 '{"id":"c1","command":"set.end","target":"*"}'
            The JSON object holds the type's own fields; v, type, station, src, seq and ts are
            stamped here. By default it waits up to --wait-subscribers seconds for someone to
            subscribe to the topic, because the bus drops messages nobody subscribed to.
            """)

    @OptionGroup var bus: BusOptions

    @Argument(help: "The topic, <type>.<station>.")
    var topic: String

    @Argument(help: "The type's fields as one JSON object.")
    var json: String = "{}"

    @Option(help: "How many messages to send.")
    var count: Int = 1

    @Option(help: "Messages per second (0: as fast as possible).")
    var rate: Double = 10

    @Option(help: "Seconds to wait for a subscriber before sending anyway (0: do not wait).")
    var waitSubscribers: Double = 5

    @Option(help: "The athlete field of the envelope.")
    var athlete: String?

    @Flag(help: "Send it even when this build's decoders refuse it (proto/ checks skipped): to test how consumers take bad input.")
    var noCheck = false

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be 1 or more") }
        if !noCheck { try checkAgainstProto() }
        guard rate == 0 || (rate >= 0.01 && rate <= 1_000_000) else {
            throw ValidationError("--rate must be 0 (as fast as possible) or between 0.01 and 1000000")
        }
        do { _ = try splitTopic(Array(topic.utf8)) } catch {
            throw ValidationError("topic \(topic): \(error.detail), e.g. cmd.rack-01")
        }
        guard case .object? = try? JSONParser.parse(Array(json.utf8)) else {
            throw ValidationError("the message must be one JSON object, e.g. '{\"command\":\"set.end\"}'")
        }
    }

    /// The message must be one proto/ knows, with fields its type's decoder takes, and a
    /// command one some program acts on: what every consumer would refuse is refused here.
    private func checkAgainstProto() throws {
        guard let (type, _) = try? splitTopic(Array(topic.utf8)), case .object(let fields)? = try? JSONParser.parse(Array(json.utf8)) else { return }
        guard let payload = MessageTypes.named(type) else {
            throw ValidationError(
                "no message type '\(type)' in proto/; known: \(MessageTypes.all.map { $0.type }.joined(separator: ", ")) (--no-check sends it anyway)")
        }
        do { _ = try payload.init(fields: fields) } catch {
            throw ValidationError("\(type) message refused by proto/\(type).schema.json: \(error) (--no-check sends it anyway)")
        }
        if type == CommandMessage.type, case .string(let command)? = fields["command"], !Command.names.contains(command) {
            throw ValidationError(
                "no command '\(command)'; known: \(Command.names.sorted().joined(separator: ", ")) (--no-check sends it anyway)")
        }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.pub", defaultLevel: .notice)
        guard case .object(let fields) = try JSONParser.parse(Array(json.utf8)) else { return }
        let (type, station) = try splitTopic(Array(topic.utf8))
        let config = bus.config, topic = self.topic, count = self.count, rate = self.rate
        let wait = waitSubscribers, athlete = self.athlete
        try await runLoop("vbt.pub", logger: logger) { context in
            try requireBus(context, config, logger: logger)
            let publisher = try Publisher(context: context, config: config, program: "vbt-pub")
            if wait > 0, try !publisher.waitForSubscriber(topic: topic, timeoutS: wait) {
                logger.warning("no subscriber for topic; sending anyway", metadata: ["zmq.topic": "\(topic)"])
            }
            let started = monotonicSeconds()
            for index in 0..<count {
                if rate > 0 {
                    let due = started + Double(index) / rate
                    let delay = due - monotonicSeconds()
                    if delay > 0 { usleep(UInt32(delay * 1_000_000)) }
                }
                try publisher.publish(type: type, station: station, fields: fields, athlete: athlete)
            }
            logger.info("published", metadata: ["count": "\(count)", "zmq.topic": "\(topic)"])
        }
    }
}
