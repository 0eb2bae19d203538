import ArgumentParser
import Foundation
import Logging
import Synchronization
import VBTBus
import VBTCommandLine
import VBTDetection
import VBTQuery
import VBTWire

// The training-data commands: they ask the session-recorder over its query
// endpoint (proto/query.md), print a table for people or JSON for scripts
// (--json), and publish station commands on the bus.

/// Options every recorder-backed command takes.
struct RecorderOptions: ParsableArguments {
    @Option(help: "The recorder's query endpoint (overrides VBT_QUERY_ENDPOINT; default tcp://127.0.0.1:7703).")
    var queryEndpoint: String?

    @Option(help: "Seconds to wait for the recorder's answer.")
    var timeout: Double = 5

    @Flag(help: "Print JSON (for scripts) instead of a table.")
    var json = false

    @OptionGroup var bus: BusOptions

    var config: BusConfig {
        var config = bus.config
        if let queryEndpoint { config.queryEndpoint = queryEndpoint }
        return config
    }

    /// Runs `body` with a client; every failure is one line on stderr and exit 1.
    func withClient<T>(_ body: (QueryClient) throws -> T) throws -> T {
        let context = ZMQContext()
        defer { context.terminate() }
        do {
            let client = try QueryClient(context: context, config: config, timeoutS: timeout)
            return try body(client)
        } catch let error as QueryError {
            reportProblem("vbt: \(error.message)")
            throw ExitCode.failure
        } catch let error as StoreError {
            reportProblem("vbt: \(error.message)")
            throw ExitCode.failure
        } catch let error as ZMQError {
            reportProblem("vbt: \(error); check --query-endpoint / VBT_QUERY_ENDPOINT")
            throw ExitCode.failure
        }
    }

    /// Prints `value` as JSON, or calls `table` for people.
    func output<T: Encodable>(_ value: T, table: () -> String) {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self))
        } else {
            print(table(), terminator: "")
        }
    }
}

/// Aligned columns for people: a header, a rule, the rows.
func renderTable(_ header: [String], _ rows: [[String]]) -> String {
    guard !rows.isEmpty else { return "(none)\n" }
    var widths = header.map(\.count)
    for row in rows { for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) } }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { index, cell in cell.padding(toLength: widths[index], withPad: " ", startingAt: 0) }
            .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
    }
    return line(header) + line(widths.map { String(repeating: "-", count: $0) }) + rows.map(line).joined()
}

func show(_ value: Double?, _ decimals: Int = 2) -> String { value.map { String(format: "%.\(decimals)f", $0) } ?? "-" }

func localDate(_ ts: Double?) -> String {
    guard let ts else { return "-" }
    let formatter = DateFormatter()
    formatter.dateFormat = "yyyy-MM-dd HH:mm"
    return formatter.string(from: Date(timeIntervalSince1970: ts))
}

/// The caller's UTC offset now, for per-day figures in local days.
var localUTCOffset: Int { TimeZone.current.secondsFromGMT() }

// MARK: athlete

struct Athlete: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Athletes: add, list, show, weigh in, edit, archive, erase.",
        subcommands: [Add.self, List.self, Show.self, WeighInCommand.self, Edit.self, Archive.self, Erase.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an athlete.")
        @Argument(help: "Athlete id: lower-case letters, digits, - or _ (e.g. ana-rossi).") var id: String
        @Option(help: "Full name.") var name: String
        @Option(help: "f, m or x.") var sex: String?
        @Option(help: "Year of birth.") var born: Int?
        @Option(help: "Height, cm.") var heightCm: Double?
        @Option(help: "Body weight today, kg (the first weigh-in).") var weightKg: Double?
        @Option(help: "Goal body weight, kg.") var goalKg: Double?
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let input = AthleteInput(id: id, name: name, sex: sex, birthYear: born, heightCm: heightCm, goalWeightKg: goalKg, weightKg: weightKg)
            let athlete = try recorder.withClient { try $0.ask(.athleteAdd, input) }
            recorder.output(athlete) { describe(athlete) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the athletes (archived ones with --archived).")
        @Flag(help: "Also list archived athletes.") var archived = false
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let athletes = try recorder.withClient {
                try $0.ask(.athleteList, AthleteListArgs(includeArchived: archived ? true : nil))
            }
            recorder.output(athletes) {
                renderTable(
                    ["id", "name", "sex", "born", "height cm", "weight kg", "BMI", "goal kg", "sessions", "sets", "reps"],
                    athletes.map {
                        [
                            $0.id, $0.name, $0.sex ?? "-", $0.birthYear.map(String.init) ?? "-", show($0.heightCm, 0), show($0.weightKg, 1),
                            show($0.bmi, 1), show($0.goalWeightKg, 1), "\($0.sessions)", "\($0.sets)", "\($0.reps)",
                        ]
                    })
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one athlete with weigh-ins and BMI.")
        @Argument(help: "Athlete id.") var id: String
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let athlete = try recorder.withClient { try $0.ask(.athleteShow, IdArgs(id: id)) }
            recorder.output(athlete) { describe(athlete) }
        }
    }

    struct WeighInCommand: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "weigh-in", abstract: "Record a body weight.")
        @Argument(help: "Athlete id.") var id: String
        @Option(help: "Body weight, kg.") var kg: Double
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let athlete = try recorder.withClient { try $0.ask(.athleteWeighIn, WeighInArgs(id: id, weightKg: kg)) }
            recorder.output(athlete) { describe(athlete) }
        }
    }

    struct Edit: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change an athlete's details.", discussion: "e.g. vbt athlete edit ana --name 'Ana Rossi' --clear born")
        @Argument(help: "Athlete id.") var id: String
        @Option(help: "Full name.") var name: String?
        @Option(help: "f, m or x.") var sex: String?
        @Option(help: "Year of birth.") var born: Int?
        @Option(help: "Height, cm.") var heightCm: Double?
        @Option(help: "Goal body weight, kg.") var goalKg: Double?
        @Option(help: "Empty a detail: sex, born, height-cm or goal-kg (repeatable).") var clear: [String] = []
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            let names = ["sex": "sex", "born": "birth_year", "height-cm": "height_cm", "goal-kg": "goal_weight_kg"]
            if let unknown = clear.first(where: { names[$0] == nil }) { throw ValidationError("--clear takes sex, born, height-cm or goal-kg, not \(unknown)") }
        }

        func run() throws {
            let names = ["sex": "sex", "born": "birth_year", "height-cm": "height_cm", "goal-kg": "goal_weight_kg"]
            let edit = AthleteEditArgs(
                id: id, name: name, sex: sex, birthYear: born, heightCm: heightCm, goalWeightKg: goalKg,
                clear: clear.isEmpty ? nil : clear.compactMap { names[$0] })
            let athlete = try recorder.withClient { try $0.ask(.athleteEdit, edit) }
            recorder.output(athlete) { describe(athlete) }
        }
    }

    struct Archive: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Archive an athlete who left: kept with all their history, left out of lists (--undo brings them back).")
        @Argument(help: "Athlete id.") var id: String
        @Flag(help: "Bring the athlete back.") var undo = false
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let athlete = try recorder.withClient { try $0.ask(.athleteArchive, ArchiveArgs(id: id, archived: !undo)) }
            recorder.output(athlete) { "\(athlete.id) \(athlete.archivedTs == nil ? "is active again" : "archived")\n" }
        }
    }

    struct Erase: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Erase an athlete's personal data; their training stays, under a pseudonym. Cannot be undone.",
            discussion: """
                Deletes their details (name, sex, year of birth, height, goal), weigh-ins and posture calibrations from the
                history, takes them off their plans, and replaces their id in every set, rep, session, alert and assignment
                with a random pseudonym. What else holds their name, and for how long, is in proto/query.md (athlete.erase).
                """)
        @Argument(help: "Athlete id.") var id: String
        @Option(help: "The same id again, to confirm.") var confirm: String
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let result = try recorder.withClient { try $0.ask(.athleteErase, EraseArgs(id: id, confirm: confirm)) }
            recorder.output(result) {
                let rows = result.rows.keys.sorted().filter { result.rows[$0]! > 0 }.map { "\($0) \(result.rows[$0]!)" }.joined(separator: ", ")
                return "\(id) erased: their training is now \(result.pseudonym) (\(rows))\n"
            }
        }
    }

    static func describe(_ a: AthleteProfile) -> String {
        var text = """
            \(a.id): \(a.name)
              sex \(a.sex ?? "-"), born \(a.birthYear.map(String.init) ?? "-"), height \(show(a.heightCm, 0)) cm
              weight \(show(a.weightKg, 1)) kg, BMI \(show(a.bmi, 1)), goal \(show(a.goalWeightKg, 1)) kg
              \(a.sessions) sessions, \(a.sets) sets, \(a.reps) reps

            """
        if !a.weighIns.isEmpty {
            text += renderTable(["date", "weight kg"], a.weighIns.map { [localDate($0.ts), show($0.weightKg, 1)] })
        }
        return text
    }
}

// MARK: exercise

struct Exercise: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The exercise catalogue: list, show, add.", subcommands: [List.self, Show.self, Add.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an exercise to the catalogue.",
            discussion: """
                e.g. vbt exercise add zercher-squat --name "Zercher squat" --rom-mm 550 --mvt-mps 0.32 --rest-s 150
                The new exercise can then be assigned (vbt station assign --exercise), planned and listed.
                ROM is the bar's travel in a full rep (50-1500 mm); MVT the mean velocity of a 1RM rep (0.05-1.5 m/s),
                used for e1RM; rest the default rest between sets (0-1800 s, default 120). An id in use is refused.
                """)
        @Argument(help: "Exercise id: 1-64 lower-case letters, digits, - or _ (e.g. zercher-squat).") var id: String
        @Option(help: "Its name.") var name: String
        @Option(help: "Bar travel of a full rep, mm (50-1500).") var romMm: Double
        @Option(help: "Mean velocity at 1RM, m/s (0.05-1.5).") var mvtMps: Double
        @Option(help: "Default rest between sets, s (0-1800; default 120).") var restS: Double?
        @Option(help: "How it is done, in a sentence.") var description: String?
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let input = ExerciseInput(id: id, name: name, description: description, expectedRomMm: romMm, mvtMps: mvtMps, defaultRestS: restS)
            let e = try recorder.withClient { try $0.ask(.exerciseAdd, input) }
            recorder.output(e) { "added " + Show.describe(e) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the exercises.")
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let exercises = try recorder.withClient { try $0.ask(.exerciseList, NoArgs()) }
            recorder.output(exercises) {
                renderTable(
                    ["id", "name", "ROM mm", "MVT m/s", "rest s"],
                    exercises.map {
                        [$0.id, $0.name, show($0.expectedRomMm, 0), show($0.mvtMps), show($0.defaultRestS, 0)]
                    })
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one exercise.")
        @Argument(help: "Exercise id (see vbt exercise list).") var id: String
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let e = try recorder.withClient { try $0.ask(.exerciseShow, IdArgs(id: id)) }
            recorder.output(e) { Self.describe(e) }
        }

        static func describe(_ e: ExerciseRecord) -> String {
            "\(e.id): \(e.name)\n  \(e.description)\n  expected ROM \(show(e.expectedRomMm, 0)) mm, MVT \(show(e.mvtMps)) m/s, default rest \(show(e.defaultRestS, 0)) s\n"
        }
    }
}

// MARK: plan

struct PlanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan", abstract: "Training plans: create, show, list, assign to a station.",
        subcommands: [Create.self, Show.self, List.self, Assign.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a plan from ordered items.",
            discussion: """
                Example: vbt plan create ana-strength --athlete ana --item squat:3x5@80%/180s --item bench:3x5@60,62.5,65kg~0.6mps
                An item is EXERCISE:SETSxREPS[@LOAD][~TARGETmps][/RESTs][:TEMPO][!auto]. LOAD is one of:
                  100kg or 225lb      the load of every set (pounds are stored in kg, 1 lb = 0.45359237 kg, and shown as written);
                  60,62.5,65kg        one load per set, as many as the sets (the notifier tells the detector each set's load);
                  80%                 of the athlete's current e1RM in that exercise (the latest of vbt progress), resolved
                                      when the plan is assigned and rounded to the nearest 2.5 kg (5 lb with --unit lb);
                                      without an e1RM yet the plan refuses to start;
                  a bare number       in --unit (kg by default).
                ~0.75mps (or @0.75mps without a load) is the mean velocity each rep should reach, shown by displays;
                a zone ~0.70-0.80mps aims at its middle. With a target, the notifier advises each next set's load
                (vbt advice accept); !auto applies the advice without asking. :3-1-X-0 prescribes each rep's
                tempo (seconds of eccentric, pause at the bottom, concentric, pause at the top; X: as fast as
                possible); the detector judges every rep against it.
                """)
        @Argument(help: "Plan id: lower-case letters, digits, - or _.") var id: String
        @Option(help: "The athlete the plan is for.") var athlete: String?
        @Option(help: "EXERCISE:SETSxREPS[@LOAD][~TARGETmps][/RESTs][:TEMPO][!auto], in order; without a rest, the exercise's default.")
        var item: [String] = []
        @Option(help: "The unit of loads written without one, and of %e1RM rounding: kg or lb.") var unit = "kg"
        @OptionGroup var recorder: RecorderOptions

        func validate() throws {
            guard ["kg", "lb"].contains(unit) else { throw ValidationError("--unit must be kg or lb") }
        }

        func run() throws {
            let plan = try recorder.withClient { client -> Plan in
                let catalogue = try client.ask(.exerciseList, NoArgs())
                var items: [PlanItem] = []
                for (index, text) in item.enumerated() {
                    do {
                        items.append(try PlanItem.parse(text, unit: unit) { name in catalogue.first { $0.id == name }?.defaultRestS })
                    } catch let error as StoreError {
                        throw StoreError(.invalid, "item \(index + 1) \(error.message)")
                    }
                }
                return try client.ask(.planCreate, Plan(id: id, athlete: athlete, items: items))
            }
            recorder.output(plan) { describe(plan) }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a plan.")
        @Argument(help: "Plan id.") var id: String
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let plan = try recorder.withClient { try $0.ask(.planShow, IdArgs(id: id)) }
            recorder.output(plan) { describe(plan) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the plans.")
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            let plans = try recorder.withClient { try $0.ask(.planList, NoArgs()) }
            recorder.output(plans) {
                renderTable(["id", "athlete", "exercises"], plans.map { [$0.id ?? "-", $0.athlete ?? "-", $0.items.map(\.exercise).joined(separator: ", ")] })
            }
        }
    }

    struct Assign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start a plan at a station.",
            discussion: """
                Publishes cmd.<station> plan.assign (the whole plan, for the notifier's workout flow) and
                athlete.assign for its first exercise (for the detector), and waits until the recorder has
                stored the assignment. Loads given as % of e1RM are resolved first from the athlete's
                latest e1RM per exercise (vbt progress), rounded to 2.5 kg (5 lb for an item in lb), and
                each e1RM used is printed with its day, the loads it came from and its reliability;
                without an e1RM for one of them the plan does not start and says why. The station must be
                known (vbt station list); an athlete at another station is refused there unless --move.
                """)
        @Argument(help: "Plan id.") var id: String
        @Option(help: "The station.") var station: String
        @Option(help: "The athlete (default: the plan's).") var athlete: String?
        @Flag(help: "Move the athlete here from the station they are at (it is unassigned).") var move = false
        @OptionGroup var recorder: RecorderOptions

        func validate() throws { try validateStation(station) }

        func run() throws {
            try recorder.withClient { client in
                let stored = try client.ask(.planShow, IdArgs(id: id))
                let catalogue = try client.ask(.exerciseList, NoArgs())
                guard let who = athlete ?? stored.athlete else { throw QueryError(kind: "invalid", message: "plan \(id) has no athlete: give --athlete") }
                var e1rm: [String: ExerciseProgress.E1RM] = [:]
                if stored.items.contains(where: { $0.loadPctE1rm != nil }) {
                    e1rm = Plan.latestE1RMEstimates(
                        try client.ask(.progress, ProgressArgs(athlete: who, utcOffsetS: localUTCOffset)))
                }
                let plan = try stored.resolvingLoads(athlete: who, e1rmKg: e1rm.mapValues(\.e1rmKg))
                // Each e1RM a %e1RM load came from, with its day, data and reliability.
                let used = Set(stored.items.filter { $0.loadPctE1rm != nil }.map(\.exercise)).sorted().compactMap { name in
                    e1rm[name].map { "e1RM \(name) \(E1RMEstimator.text($0.e1rmKg)) kg (\($0.source); \($0.reliability))\n" }
                }
                let first = plan.items[0]
                try client.prepareAssignment(athlete: who, at: station, move: move, recorder: recorder)
                let sent = try publishCommands(
                    station: station, athlete: who, config: recorder.config,
                    plan.startCommands(athlete: who, catalogue: catalogue).map { ($0.command, $0.args) })
                try client.waitStored(station: station, commandId: sent.ids[1], timeoutS: recorder.timeout)
                recorder.output(plan) {
                    "plan \(id) started at \(station) for \(who): \(first.exercise) \(first.sets)x\(first.reps)"
                        + "\(first.loadKg == nil ? "" : " @ \(first.loadWords)")\(sent.answers.isEmpty ? "" : " (\(vbt.describe(sent.answers)))")\n"
                        + used.joined()
                }
            }
        }
    }

    static func describe(_ plan: Plan) -> String {
        "plan \(plan.id ?? "-")\(plan.athlete.map { " for \($0)" } ?? "")\n"
            + renderTable(
                ["#", "exercise", "sets", "reps", "load", "target m/s", "rest s", "advice"],
                plan.items.enumerated().map {
                    [
                        "\($0.offset + 1)", $0.element.exercise, "\($0.element.sets)", "\($0.element.reps)", $0.element.loadWords,
                        show($0.element.targetMeanVelocityMps), show($0.element.restS, 0),
                        $0.element.targetMeanVelocityMps == nil ? "-" : $0.element.autoAdvice == true ? "auto" : "ask",
                    ]
                })
    }
}

/// `vbt advice accept STATION|ATHLETE`: the notifier's load advice goes into the plan.
struct AdviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advice", abstract: "The notifier's load advice after each set of a plan with a velocity target.",
        subcommands: [Accept.self])

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept the load advice at a station (or an athlete's station): the next set's load, and one set fewer if advised.",
            discussion: """
                Finds the station in the notifier's workout messages (every 5 s; a station name or the athlete
                there), then sends cmd.<station> advice.accept with target notifier and waits for its answer:
                exits 0 when the advice went into the plan, 1 with the reason when there was none to accept,
                it was applied already, or the notifier did not answer within 5 s (docs/detection.md, "Load advice").
                """)
        @OptionGroup var bus: BusOptions
        @Argument(help: "The station (e.g. rack-01) or the athlete at it.") var who: String

        func validate() throws {
            guard !who.isEmpty, who.count <= 64 else { throw ValidationError("STATION|ATHLETE must be 1 to 64 characters") }
        }

        func run() async throws {
            let (station, advice) = try await Self.find(who, bus: bus)
            try await sendAwaitingAnswer(Command.Name.adviceAccept.rawValue, station: station, args: JSONObject(), program: "notifier", bus: bus)
            var words = "advice accepted at \(station): set \(advice.forSet)"
            if let load = advice.loadKg { words += " at " + String(format: "%g kg", load) }
            if advice.fewerSets { words += ", one set fewer" }
            print(words)
        }

        /// The station `who` names (a station, else the athlete at one) and its advice, from the
        /// notifier's `workout` messages within 6 s (it repeats every station's every 5 s).
        static func find(_ who: String, bus: BusOptions) async throws -> (station: String, advice: WorkoutMessage.Advice) {
            // Not bootstrapped here: `sendAwaitingAnswer` bootstraps logging next, which may be done once.
            let logger = {
                var logger = Logger(label: "vbt.advice")
                logger.logLevel = .notice
                return logger
            }()
            let config = bus.config
            let found = Mutex<(String, WorkoutMessage.Advice)?>(nil)
            try await runLoop("vbt.advice", logger: logger) { context in
                try requireBus(context, config, logger: logger)
                let inbox = try Subscriber(context: context, config: config, prefixes: MessageTypes.prefixes(WorkoutMessage.self), logger: logger)
                let deadline = monotonicSeconds() + 6
                var seen = false
                while monotonicSeconds() < deadline {
                    guard let message = try inbox.next(timeoutMs: 200), message.envelope.station == who || message.envelope.athlete == who,
                        let workout = try? message.payload(as: WorkoutMessage.self)
                    else { continue }
                    seen = true
                    guard let advice = workout.advice else { continue }
                    found.withLock { $0 = (message.envelope.station, advice) }
                    return
                }
                reportProblem(
                    seen
                        ? "vbt: no load advice at \(who) (it comes after a set of a plan item with a velocity target)"
                        : "vbt: no workout from the notifier for \(who) within 6 s; is the notifier running and \(who) assigned?")
                throw ProgramExit()
            }
            guard let (station, advice) = found.withLock({ $0 }) else { throw ExitCode.failure }
            return (station, advice)
        }
    }
}

// MARK: history, progress, stats

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The latest sets, newest first.")
    @Option(help: "Only this athlete.") var athlete: String?
    @Option(help: "Only this station.") var station: String?
    @Option(help: "Only this exercise.") var exercise: String?
    @Option(help: "How many sets.") var limit = 20
    @OptionGroup var recorder: RecorderOptions

    func run() throws {
        let sets = try recorder.withClient {
            try $0.ask(.history, HistoryArgs(athlete: athlete, station: station, exercise: exercise, limit: limit))
        }
        recorder.output(sets) {
            renderTable(
                ["started", "station", "athlete", "exercise", "load kg", "reps", "best m/s", "VL %", "ended by", "RPE", "note"],
                sets.map {
                    [
                        localDate($0.startedTs), $0.station, $0.athlete ?? "-", $0.exercise ?? "-", show($0.loadKg, 1), "\($0.reps)",
                        show($0.bestMeanVelocityMps), show($0.velocityLossPct, 1), $0.reason ?? ($0.endedTs == nil ? "(in progress)" : "-"),
                        $0.rpe.map { String(format: "%g", $0) } ?? "-", noteCell($0.note),
                    ]
                })
        }
    }
}

/// A note in one table cell: on one line, cut at 40 characters (all of it is in --json).
func noteCell(_ note: String?) -> String {
    guard let note, !note.isEmpty else { return "-" }
    let line = note.split(whereSeparator: \.isNewline).joined(separator: " ")
    return line.count > 40 ? String(line.prefix(39)) + "…" : line
}

struct Progress: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An athlete's progress: best velocity per load, e1RM over time, body weight over time.")
    @Option(help: "Athlete id.") var athlete: String
    @Option(help: "Only this exercise.") var exercise: String?
    @Option(help: "Also write the charts as an SVG file.") var chart: String?
    @OptionGroup var recorder: RecorderOptions

    func run() throws {
        let offset = localUTCOffset
        let report = try recorder.withClient {
            try $0.ask(.progress, ProgressArgs(athlete: athlete, exercise: exercise, utcOffsetS: offset))
        }
        if let chart { try writeChart(SVGChart.progress(report, utcOffsetS: offset), to: chart) }
        recorder.output(report) {
            var text = "progress of \(report.athlete)\n"
            for e in report.exercises {
                text += "\n\(e.exercise): best mean velocity per load\n"
                text += renderTable(["load kg", "best m/s", "reps"], e.bestByLoad.map { [show($0.loadKg, 1), show($0.bestMeanVelocityMps), "\($0.reps)"] })
                text += "\(e.exercise): estimated 1RM per day (the best rep at each load that day, at the MVT)\n"
                text += renderTable(
                    ["day", "e1RM kg", "R²", "loads kg", "MVT m/s", "reliability"],
                    e.e1rm.map {
                        [
                            $0.day, E1RMEstimator.text($0.e1rmKg), show($0.r2), $0.loadsKg.map { String(format: "%g", $0) }.joined(separator: ","),
                            show($0.mvtMps), $0.reliability,
                        ]
                    })
            }
            text += "\nbody weight\n" + renderTable(["date", "kg"], report.bodyWeight.map { [localDate($0.ts), show($0.weightKg, 1)] })
            return text + (chart.map { "chart: \($0)\n" } ?? "")
        }
    }
}

struct ReadinessCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "readiness",
        abstract: "An athlete's readiness per session: the first sets' velocity against their own profile.",
        discussion: """
            The score is the first 3 loaded sets' best velocity over the athlete's usual velocity at the same load
            (their profile from the last 10 earlier sessions), in %. It is judged against their own day-to-day
            variation (docs/detection.md, "Readiness"). Fewer than 5 earlier sessions: too little history.
            """)
    @Argument(help: "Athlete id.") var athlete: String
    @Option(help: "Only sessions begun on this day, YYYY-MM-DD in this computer's time zone (default: the latest sessions).") var date: String?
    @Option(help: "Only this exercise.") var exercise: String?
    @OptionGroup var recorder: RecorderOptions

    /// The Unix seconds of `date`'s local midnight.
    static func midnight(_ date: String) -> Double? {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(secondsFromGMT: localUTCOffset)
        return formatter.date(from: date).map(\.timeIntervalSince1970)
    }

    func validate() throws {
        if let date, Self.midnight(date) == nil { throw ValidationError("--date must be YYYY-MM-DD, not \(date)") }
    }

    func run() throws {
        let since = date.flatMap(Self.midnight)
        let args = ReadinessArgs(athlete: athlete, exercise: exercise, sinceTs: since, untilTs: since.map { $0 + 86_400 }, limit: since == nil ? 10 : 100)
        let rows = try recorder.withClient { try $0.ask(.readiness, args) }
        recorder.output(rows) {
            "readiness of \(athlete)\n"
                + renderTable(
                    ["session began", "exercise", "readiness", "TE %", "SWC %", "sets", "sessions"],
                    rows.map {
                        [
                            localDate($0.sessionStartedTs), $0.exercise, $0.text, show($0.assessment.typicalErrorPct, 1),
                            show($0.assessment.swcPct, 1), "\($0.assessment.sets)", "\($0.assessment.pastSessions)",
                        ]
                    })
        }
    }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Training statistics.", subcommands: [Week.self])

    struct Week: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Per day for the last 7 days: sets, reps, volume, time under tension; totals; most trained exercise.",
            discussion: "Volume is the sum of each rep's load (kg); time under tension is the sum of the reps' concentric durations.")
        @Option(help: "Only this athlete (default: the whole gym).") var athlete: String?
        @Option(help: "Also write the charts as an SVG file.") var chart: String?
        @OptionGroup var recorder: RecorderOptions

        func run() throws {
            // One athlete's week also shows each day's readiness (the stored figure of each
            // session begun that day, per exercise); the gym's has no one to judge.
            let (stats, readiness) = try recorder.withClient { client in
                let stats = try client.ask(.statsWeek, WeekArgs(athlete: athlete, utcOffsetS: localUTCOffset))
                guard let athlete else { return (stats, [SessionReadiness]()) }
                let since = stats.days.first.flatMap { ReadinessCommand.midnight($0.day) }
                return (stats, try client.ask(.readiness, ReadinessArgs(athlete: athlete, sinceTs: since, limit: 200)))
            }
            if let chart { try writeChart(SVGChart.week(stats), to: chart) }
            var byDay: [String: [String]] = [:]
            for row in readiness.reversed() {
                byDay[DayStats.day(row.sessionStartedTs, offset: Double(localUTCOffset)), default: []].append("\(row.exercise) \(row.text)")
            }
            let header = ["day", "sets", "reps", "volume kg", "TUT s"] + (athlete == nil ? [] : ["readiness"])
            recorder.output(athlete == nil ? WeekWithReadiness(stats: stats, readiness: nil) : WeekWithReadiness(stats: stats, readiness: readiness)) {
                renderTable(
                    header,
                    (stats.days + [stats.totals]).map {
                        [$0.day, "\($0.sets)", "\($0.reps)", show($0.volumeKg, 0), show($0.timeUnderTensionS, 1)]
                            + (athlete == nil ? [] : [byDay[$0.day]?.joined(separator: "; ") ?? "-"])
                    }) + "most trained: \(stats.mostTrainedExercise ?? "-")\n" + (chart.map { "chart: \($0)\n" } ?? "")
            }
        }

        /// The week's JSON: `stats.week`'s result, with `readiness` (the `readiness` query's rows)
        /// when one athlete's week is asked for.
        struct WeekWithReadiness: Encodable {
            var stats: WeekStats
            var readiness: [SessionReadiness]?
            func encode(to encoder: any Encoder) throws {
                try stats.encode(to: encoder)
                var container = encoder.container(keyedBy: Key.self)
                if let readiness { try container.encode(readiness, forKey: .readiness) }
            }
            enum Key: String, CodingKey { case readiness }
        }
    }
}

func writeChart(_ svg: String, to path: String) throws {
    do { try Data(svg.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
        reportProblem("vbt: cannot write the chart to \(path): \(error.localizedDescription)")
        throw ExitCode.failure
    }
}

// MARK: export

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export the history as JSON or CSV into a folder.",
        discussion: """
            Writes only inside --out (created if missing): vbt-export.json, or one <table>.csv per table.
            File names are fixed; a symbolic link in the folder is refused rather than followed.
            Every time column (ts, *_ts, t_end: Unix seconds) is followed by <column>_iso, the same
            instant in ISO 8601 UTC. A CSV text starting like a formula (=, +, -, @) is written with a
            leading apostrophe, so a spreadsheet shows it rather than running it.
            """)
    @Option(help: "json or csv.") var format: String
    @Option(help: "The folder to write into.") var out: String
    @Option(help: "Only this athlete's rows.") var athlete: String?
    @Option(help: "Tables, comma-separated (default: athletes, weigh_ins, sessions, sets, reps, rejected, profiles).")
    var tables = "athletes,weigh_ins,sessions,sets,reps,rejected,profiles"
    @Flag(help: "Start each CSV file with a UTF-8 byte order mark (for spreadsheets that misread non-ASCII names without it).")
    var bom = false
    @OptionGroup var recorder: RecorderOptions

    func validate() throws {
        guard ExportFormat(rawValue: format) != nil else { throw ValidationError("--format must be json or csv") }
        for table in tables.split(separator: ",") where TablePage.tables[String(table)] == nil {
            throw ValidationError("no table '\(table)'; choose from \(TablePage.tables.keys.sorted().joined(separator: ", "))")
        }
    }

    func run() throws {
        let format = ExportFormat(rawValue: self.format)!
        let names = tables.split(separator: ",").map(String.init)
        let summary = try recorder.withClient { client -> [String: Int] in
            let folder = try ExportFolder(out)
            var counts: [String: Int] = [:]
            var everything: [String: [[String: Cell]]] = [:]
            for table in names {
                var columns: [String] = []
                var rows: [[Cell]] = []
                var after: Int64?
                repeat {
                    let page = try client.ask(.exportPage, PageArgs(table: table, athlete: athlete, after: after, limit: 5_000))
                    columns = page.columns
                    rows += page.rows
                    after = page.next
                } while after != nil
                counts[table] = rows.count
                (columns, rows) = ExportFormat.withISOTimes(columns: columns, rows: rows)
                switch format {
                case .csv: try folder.write("\(table).csv", ExportFormat.csv(columns: columns, rows: rows, bom: bom))
                case .json: everything[table] = ExportFormat.jsonObjects(columns: columns, rows: rows)
                }
            }
            if format == .json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                try folder.write("vbt-export.json", try encoder.encode(everything))
            }
            return counts
        }
        recorder.output(summary) {
            renderTable(["table", "rows"], names.map { [$0, "\(summary[$0] ?? 0)"] }) + "written to \(out)\n"
        }
    }
}
