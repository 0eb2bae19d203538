/// A command a vbt program acts on, read once from a `CommandMessage`: its arguments checked
/// against its declaration (`CommandName.specs`) and decoded by their typed reader. Programs
/// switch over it; none compares command names or reads `args` itself.
public enum Command: Sendable, Equatable {
    case athleteAssign(AthleteAssign)
    case athleteUnassign
    case planAssign(Plan)
    case setEnd
    case setLoad(SetLoad)
    case postureCalibrate(PostureCalibrate)
    case restPause
    case restResume
    case restSkip
    case restExtend(RestExtend)
    case adviceAccept

    /// Reads `message`'s command: nil for one no vbt program acts on (programs ignore those);
    /// throws, naming the argument, when its arguments are refused: by the declaration first
    /// (unknown arguments, types, bounds), then by the reader (what the declaration cannot say).
    public init?(_ message: CommandMessage) throws(PayloadError) {
        try self.init(name: message.command, args: message.args)
    }

    /// Reads the command `name` with `args` (as `init(_:)`).
    public init?(name: String, args: JSONObject) throws(PayloadError) {
        guard let known = Name(rawValue: name) else { return nil }
        try known.spec.check(args)
        switch known {
        case .athleteAssign: self = .athleteAssign(try AthleteAssign(args: args))
        case .planAssign: self = .planAssign(try Plan(assignArgs: args))
        case .setLoad: self = .setLoad(try SetLoad(args: args))
        case .postureCalibrate: self = .postureCalibrate(try PostureCalibrate(args: args))
        case .restExtend: self = .restExtend(try RestExtend(args: args))
        // The rest take no arguments: their declaration refused any.
        case .athleteUnassign, .setEnd, .restPause, .restResume, .restSkip, .adviceAccept:
            self =
                switch known {
                case .athleteUnassign: .athleteUnassign
                case .setEnd: .setEnd
                case .restPause: .restPause
                case .restResume: .restResume
                case .restSkip: .restSkip
                default: .adviceAccept
                }
        }
    }

    /// Its name.
    public var name: Name {
        switch self {
        case .athleteAssign: .athleteAssign
        case .athleteUnassign: .athleteUnassign
        case .planAssign: .planAssign
        case .setEnd: .setEnd
        case .setLoad: .setLoad
        case .postureCalibrate: .postureCalibrate
        case .restPause: .restPause
        case .restResume: .restResume
        case .restSkip: .restSkip
        case .restExtend: .restExtend
        case .adviceAccept: .adviceAccept
        }
    }

    /// Whether `program` acts on it (its declaration's `programs`).
    public func isActedOn(by program: String) -> Bool { name.spec.programs.contains(program) }

    /// Whether `program` acts on the command `name` (nil: no vbt program knows it).
    public static func isActedOn(_ name: String, by program: String) -> Bool { CommandName.spec(name)?.programs.contains(program) == true }
}

extension Command {
    /// A command's name, as a message's `command` carries it (`<subject>.<verb>`).
    public enum Name: String, Sendable, CaseIterable {
        case athleteAssign = "athlete.assign"
        case athleteUnassign = "athlete.unassign"
        case planAssign = "plan.assign"
        case setEnd = "set.end"
        case setLoad = "set.load"
        case postureCalibrate = "posture.calibrate"
        case restPause = "rest.pause"
        case restResume = "rest.resume"
        case restSkip = "rest.skip"
        case restExtend = "rest.extend"
        case adviceAccept = "advice.accept"

        /// Its declaration (a test holds every name declared, and every declaration named).
        public var spec: CommandSpec {
            guard let spec = CommandName.spec(rawValue) else { preconditionFailure("\(rawValue) has no declaration in CommandName.specs") }
            return spec
        }

        /// Whether it changes who lifts what at a station, and so the station's assignment that
        /// the recorder stores and a restarted rep-detector catches up on.
        public var changesAssignment: Bool { self == .athleteAssign || self == .athleteUnassign || self == .setLoad }
    }

    /// Every command's declaration, in the order `vbt wire --commands` and proto/ list them.
    public static var specs: [CommandSpec] { CommandName.specs }

    /// Every name a vbt program acts on.
    public static var names: Set<String> { CommandName.all }

    /// The commands `program` acts on, as its `--help` lists them (`CommandName.help(for:)`).
    public static func help(for program: String) -> String { CommandName.help(for: program) }

    /// Refuses arguments the declaration of `name` does not take, naming the argument; a command
    /// no vbt program acts on is left alone.
    public static func checkArguments(_ name: String, _ args: JSONObject) throws(PayloadError) {
        try CommandName.checkArguments(name, args)
    }
}

extension CommandMessage {
    /// Creates a command named `name`.
    public init(id: String, command name: Command.Name, target: String = "*", args: JSONObject = JSONObject()) {
        self.init(id: id, command: name.rawValue, target: target, args: args)
    }

    /// The command's name when a vbt program acts on it.
    public var name: Command.Name? { Command.Name(rawValue: command) }
}
