/// One argument of a command as the wire carries it: its name, JSON type, whether it
/// must be given, and its bounds. proto/cmd.schema.json says the same in JSON Schema;
/// tests/python/test_commands.py holds the two and every program's `--help` together.
public struct CommandArgument: Sendable {
    /// What the argument's value is on the wire.
    public indirect enum Kind: Sendable {
        /// A string.
        case string
        /// One of these strings.
        case choice([String])
        /// A number.
        case number
        /// A whole number.
        case integer
        /// An array of numbers.
        case numbers
        /// A non-empty array of objects with these fields.
        case objects([CommandArgument])
    }

    /// The argument's key in `args`.
    public let name: String
    /// Its type.
    public let kind: Kind
    /// Whether a command without it is refused.
    public let required: Bool
    /// The values it may take (numbers only; nil: any finite number).
    public let range: ClosedRange<Double>?
    /// One line saying what it is, for `--help` and proto/.
    public let summary: String

    /// Creates an argument.
    public init(_ name: String, _ kind: Kind, required: Bool = false, range: ClosedRange<Double>? = nil, _ summary: String) {
        (self.name, self.kind, self.required, self.range, self.summary) = (name, kind, required, range, summary)
    }
}

/// A command a vbt program acts on: its name, what it does, who acts on it and its arguments.
/// The one declaration of a command's arguments in Swift: the typed readers (`AthleteAssign`,
/// `Plan`, ...) check what they read against it, and `vbt wire --commands` prints it.
public struct CommandSpec: Sendable {
    /// `<subject>.<verb>`, as `command` carries it.
    public let name: String
    /// One line saying what it does.
    public let summary: String
    /// The programs that act on it (a command's `target` names one of them, or `*`).
    public let programs: [String]
    /// Its arguments; empty for a command that takes none.
    public let arguments: [CommandArgument]

    /// Creates a command's declaration.
    public init(_ name: String, _ summary: String, programs: [String], arguments: [CommandArgument] = []) {
        (self.name, self.summary, self.programs, self.arguments) = (name, summary, programs, arguments)
    }

    /// Refuses arguments this command does not take, values of the wrong type and values out
    /// of bounds, naming the argument and what it takes. `null` is the same as absent.
    public func check(_ args: JSONObject) throws(PayloadError) {
        try Self.check(args, against: arguments, in: name, at: "")
    }

    private static func check(_ args: JSONObject, against arguments: [CommandArgument], in command: String, at path: String) throws(PayloadError) {
        for (key, _) in args.fields where !arguments.contains(where: { $0.name == key }) {
            let known = arguments.map(\.name).joined(separator: ", ")
            throw PayloadError(
                arguments.isEmpty
                    ? "\(command) takes no arguments, not \(path)\(key)"
                    : "\(command) takes no argument \(path)\(key) (it takes \(known))")
        }
        for argument in arguments {
            let name = path + argument.name
            guard let value = args[argument.name], value != .null else {
                if argument.required { throw PayloadError("\(command) needs \(name)") }
                continue
            }
            try check(value, of: argument, in: command, named: name)
        }
    }

    private static func check(_ value: JSONValue, of argument: CommandArgument, in command: String, named name: String) throws(PayloadError) {
        switch (argument.kind, value) {
        case (.string, .string):
            return
        case (.choice(let allowed), .string(let text)):
            guard allowed.contains(text) else { throw PayloadError("\(name) must be one of \(allowed.joined(separator: ", ")), not \(text)") }
        case (.number, .number(let number)):
            try within(number, argument.range, name)
        case (.integer, .number(let number)):
            guard number == number.rounded(), abs(number) < 9e15 else { throw PayloadError("\(name) must be a whole number") }
            try within(number, argument.range, name)
        case (.numbers, .array(let items)):
            for item in items {
                guard case .number(let number) = item else { throw PayloadError("\(name) must be an array of numbers") }
                try within(number, argument.range, name)
            }
        case (.objects(let fields), .array(let items)):
            guard !items.isEmpty else { throw PayloadError("\(name) must not be empty") }
            for (index, item) in items.enumerated() {
                guard case .object(let object) = item else { throw PayloadError("\(name)[\(index)] must be an object") }
                try check(object, against: fields, in: command, at: "\(name)[\(index)].")
            }
        default:
            throw PayloadError("\(name) must be \(argument.kind.noun)")
        }
    }

    private static func within(_ number: Double, _ range: ClosedRange<Double>?, _ name: String) throws(PayloadError) {
        guard number.isFinite else { throw PayloadError("\(name) must be a finite number") }
        if let range, !range.contains(number) {
            throw PayloadError("\(name) must be \(plain(range.lowerBound)) to \(plain(range.upperBound))")
        }
    }
}

/// A bound as a person writes it: 1000, not 1000.0.
private func plain(_ number: Double) -> String {
    number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
}

extension CommandArgument.Kind {
    /// The type as a sentence names it.
    var noun: String {
        switch self {
        case .string, .choice: "a string"
        case .number: "a number"
        case .integer: "a whole number"
        case .numbers: "an array of numbers"
        case .objects: "an array of objects"
        }
    }
}

extension CommandName {
    /// Every command a vbt program acts on, with its arguments: what `vbt wire --commands`
    /// prints and proto/cmd.schema.json declares.
    public static let specs: [CommandSpec] = [
        CommandSpec(
            athleteAssign, "Who lifts what at the station, and how their sets are measured and rested.",
            programs: ["rep-detector", "notifier", "posture-evaluator", "session-recorder"],
            arguments: [
                CommandArgument("athlete", .string, "the athlete's id"),
                CommandArgument("exercise", .string, "the exercise, e.g. squat"),
                CommandArgument("load_kg", .number, range: 0...1_000, "the load on the bar, kg"),
                CommandArgument("rest_s", .number, range: 0...3_600, "the rest after each set, s"),
                CommandArgument("vl_threshold_pct", .number, range: 0...100, "the velocity loss that ends a set, %"),
                CommandArgument("vl_reference", .choice(["fastest", "first"]), "what velocity loss is measured against"),
                CommandArgument("target_zone", .string, "the velocity zone the athlete trains in"),
                CommandArgument("rom_mm", .number, range: 10...3_000, "the athlete's own range of motion, mm"),
                CommandArgument("mvt_mps", .number, range: 0.05...1.5, "the mean velocity at 1RM, m/s, for an exercise without a profile"),
                CommandArgument("tempo", .string, "the prescribed tempo, E-B-C-T seconds or X, e.g. 3-1-X-0"),
            ]),
        CommandSpec(
            athleteUnassign, "Nobody is at the station any more: the set ends, rest and plan stop.",
            programs: ["rep-detector", "notifier", "posture-evaluator", "session-recorder"]),
        CommandSpec(
            planAssign, "A whole training plan for the station's athlete, walked through by the notifier.",
            programs: ["notifier", "session-recorder"],
            arguments: [
                CommandArgument("athlete", .string, required: true, "the athlete's id"),
                CommandArgument("plan", .string, "the plan's id"),
                CommandArgument(
                    "exercises",
                    .objects([
                        CommandArgument("exercise", .string, required: true, "the exercise"),
                        CommandArgument("sets", .integer, required: true, range: 1...100, "how many sets"),
                        CommandArgument("reps", .integer, required: true, range: 1...1_000, "reps a set"),
                        CommandArgument("rest_s", .number, range: 0...3_600, "the rest after each set, s"),
                        CommandArgument("load_kg", .number, range: 0...1_000, "the load, kg (the first set's, with loads_kg)"),
                        CommandArgument("loads_kg", .numbers, range: 0...1_000, "one load a set, kg"),
                        CommandArgument("load_pct_e1rm", .number, range: 1...120, "the load as % of the athlete's e1RM"),
                        CommandArgument("load_unit", .choice(["kg", "lb"]), "the unit the coach wrote the loads in"),
                        CommandArgument("target_mean_velocity_mps", .number, range: 0.01...3, "the mean velocity each rep should reach, m/s"),
                        CommandArgument("advice", .choice(["ask", "auto"]), "load advice: ask the coach (default) or apply it"),
                        CommandArgument("tempo", .string, "each rep's tempo, E-B-C-T seconds or X, e.g. 3-1-X-0"),
                    ]), required: true, "the exercises in order"),
            ]),
        CommandSpec(setEnd, "Ends the station's open set now.", programs: ["rep-detector"]),
        CommandSpec(
            setLoad, "The load changed during the session.", programs: ["rep-detector"],
            arguments: [CommandArgument("load_kg", .number, required: true, range: 0...1_000, "the load now on the bar, kg")]),
        CommandSpec(
            postureCalibrate, "Records the athlete sitting or standing well as their posture baseline.",
            programs: ["posture-evaluator"],
            arguments: [
                CommandArgument("athlete", .string, "whose posture (default: the station's athlete, else the station)"),
                CommandArgument("seconds", .number, range: 0.5...600, "how long to record, s (default 10)"),
            ]),
        CommandSpec(restPause, "Pauses the station's rest timer.", programs: ["notifier"]),
        CommandSpec(restResume, "Resumes a paused rest timer.", programs: ["notifier"]),
        CommandSpec(restSkip, "Ends the rest now.", programs: ["notifier"]),
        CommandSpec(
            restExtend, "Adds to (or, negative, takes from) the rest.", programs: ["notifier"],
            arguments: [CommandArgument("seconds", .number, required: true, range: -3_600...3_600, "seconds to add")]),
        CommandSpec(adviceAccept, "Carries the station's load advice into its plan's next set.", programs: ["notifier"]),
    ]

    /// The declaration of `name`, if a vbt program acts on it.
    public static func spec(_ name: String) -> CommandSpec? { specs.first { $0.name == name } }

    /// The commands `program` acts on, as its `--help` lists them: a command a line with the
    /// arguments it takes, `?` after one that may be left out, continued on lines indented by
    /// six spaces within 78 columns (`--help` wraps longer lines where it likes).
    public static func help(for program: String) -> String {
        specs.filter { $0.programs.contains(program) }.map { spec in
            guard !spec.arguments.isEmpty else { return "  \(spec.name)" }
            let names = spec.arguments.map { $0.required ? $0.name : $0.name + "?" }
            var lines = ["  \(spec.name) {"]
            for (index, name) in names.enumerated() {
                let word = name + (index == names.count - 1 ? "}" : ",")
                let joined = lines[lines.count - 1] + (lines[lines.count - 1].hasSuffix("{") ? "" : " ") + word
                if joined.count <= 78 { lines[lines.count - 1] = joined } else { lines.append("      " + word) }
            }
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
