import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import VBTBus
import VBTWire

/// This build's version, the same for every program: raised with each
/// release (CHANGELOG.md says what changed).
public let vbtVersion = "0.15.0"

/// What `--version` prints: the program, its version, the wire format it
/// speaks (proto/README.md, `v`) and the libzmq it runs on.
public func versionText(_ program: String) -> String {
    "\(program) \(vbtVersion) (wire v\(BusLimits.version), libzmq \(ZMQContext.version))"
}

/// The bus endpoint options every program takes (proto/README.md, "Wire format").
public struct BusOptions: ParsableArguments {
    @Option(help: "Endpoint publishers connect to, or the bus binds (overrides VBT_PUB_ENDPOINT).")
    public var pubEndpoint: String?

    @Option(help: "Endpoint subscribers connect to, or the bus binds (overrides VBT_SUB_ENDPOINT).")
    public var subEndpoint: String?

    @Flag(
        help: ArgumentHelp(
            "Run without keys (plaintext; also VBT_INSECURE=1): only when every endpoint is on this computer.",
            discussion: """
                Without it a program needs its keys: VBT_CERT and VBT_BUS_CERT, and for vbt-bus and the session-recorder \
                VBT_SERVER_CERT and VBT_AUTHORIZED too (proto/security.md).
                """))
    public var insecure = false

    public init() {}

    /// Missing or unreadable keys end the program here with one line saying what to do and
    /// exit status 64 (EX_USAGE): thrown, the argument parser would print the whole `--help`
    /// after it whenever the program was started without arguments, as units often are.
    /// (With `--help` or `--version` asked for, the parser answers them whatever the keys.)
    public func validate() throws {
        let answering = CommandLine.arguments.dropFirst().contains { ["--help", "-h", "--version"].contains($0) }
        do { _ = try security() } catch let error where !answering {
            let program = URL(fileURLWithPath: CommandLine.arguments.first ?? "vbt").lastPathComponent
            reportProblem("Error: \(program): \(error)")
            Foundation.exit(64)
        }
    }

    /// The keys from the environment; nil (plaintext) only when asked for with
    /// --insecure or VBT_INSECURE=1. Every socket refuses a non-loopback
    /// endpoint without keys (`ZMQTransport`), whatever the options.
    public func security() throws -> BusSecurity? {
        let security: BusSecurity?
        do { security = try BusSecurity.fromEnvironment() } catch { throw ValidationError(error.description) }
        if security != nil { return security }
        guard insecure || environment("VBT_INSECURE") == "1" else {
            throw ValidationError(
                "no keys: set VBT_CERT and VBT_BUS_CERT (vbt-bus and session-recorder also VBT_SERVER_CERT and VBT_AUTHORIZED); "
                    + "`vbt keys init` and `vbt keys add` make them, `make run` does it all. "
                    + "To run without keys on this computer only, pass --insecure.")
        }
        return nil
    }

    /// Defaults, overridden by the environment, overridden by these options, with the keys.
    public var config: BusConfig {
        var config = BusConfig.fromEnvironment()
        if let pubEndpoint { config.pubEndpoint = pubEndpoint }
        if let subEndpoint { config.subEndpoint = subEndpoint }
        config.security = try? security()
        return config
    }
}

/// Runs a program's socket loop until it ends or SIGTERM/SIGINT; a bus error
/// becomes one line saying what to check, and exit 1.
public func runProgram(
    _ program: String, logger: Logger, hint: String = "check VBT_PUB_ENDPOINT/VBT_SUB_ENDPOINT and that vbt-bus is running",
    onShutdown: (@Sendable () -> Void)? = nil, before services: [any Service] = [], _ body: @escaping @Sendable (ZMQContext) throws -> Void
) async throws {
    do {
        let loop = SocketLoopService(name: program, context: ZMQContext(), onShutdown: onShutdown, body: body)
        try await runSocketLoops(services + [loop], logger: logger)
    } catch let error as ZMQError {
        reportProblem("\(program): \(error); \(hint)")
        throw ExitCode.failure
    }
}

/// The journal options every producer takes (proto/replay.md).
public struct JournalOptions: ParsableArguments {
    @Option(
        help:
            "Journal everything published into this folder (one process per folder; default data/journal/<program>, the sensor-bridge's data/journal/bridge-<station>) and answer replay requests, so consumers can fetch what they missed."
    )
    public var journal: String?

    @Flag(
        help:
            "Keep no journal. What this program publishes while a consumer is down, slow or cut off is then lost for good: its heartbeat offers no journal, so consumers count what they missed of it lost at once (a critical data-lost alert)."
    )
    public var noJournal = false

    @Option(
        help:
            "The replay endpoint (default: ipc://<journal folder>/replay.sock, or an abstract ipc://@vbt-replay-<hash> when that path is too long for a socket); the heartbeat names it. tcp://ADDRESS:PORT (this computer's address) lets consumers on other computers fetch: CURVE with this program's key, service keys only (needs VBT_AUTHORIZED)."
    )
    public var replayEndpoint: String?

    @Option(help: "Journal retention: records older than this many seconds are deleted.")
    public var journalMaxAge: Double = 1_800

    @Option(help: "Journal retention: the folder never holds more than this many MiB.")
    public var journalMaxMb: Int = 1_024

    public init() {}

    public func validate() throws {
        guard journalMaxAge > 0, journalMaxMb >= 1 else { throw ValidationError("--journal-max-age must be above 0 and --journal-max-mb at least 1") }
        if noJournal, journal != nil || replayEndpoint != nil {
            throw ValidationError("--no-journal keeps no journal: drop --journal and --replay-endpoint, or --no-journal")
        }
    }

    /// The journal's settings and replay endpoint: in `data/journal/<program>` (this executable's
    /// name) unless `--journal` moves it; nil with `--no-journal`. Every producer journals by
    /// default, so one started by hand loses nothing it published when a consumer was away.
    public var plan: (settings: JournalSettings, endpoint: String)? {
        plan(defaultFolder: "data/journal/" + ProcessInfo.processInfo.processName)
    }

    /// The journal's settings and replay endpoint, in `defaultFolder` unless `--journal` moves it;
    /// nil with `--no-journal`.
    public func plan(defaultFolder: String) -> (settings: JournalSettings, endpoint: String)? {
        guard !noJournal else { return nil }
        let given = journal ?? defaultFolder
        // Absolute, so the endpoint the heartbeat offers works from any folder.
        let journal = URL(fileURLWithPath: given).standardizedFileURL.path
        var settings = JournalSettings(directory: journal)
        settings.maxAgeS = journalMaxAge
        settings.maxBytes = journalMaxMb << 20
        return (settings, replayEndpoint ?? Self.defaultEndpoint(journal: journal))
    }

    /// `ipc://<journal>/replay.sock`; when that path is longer than a Unix socket's name may be
    /// (108 bytes with its end, unix(7)), a Linux abstract socket named after the folder instead,
    /// the same for the same folder (so a restarted producer answers where its predecessor did).
    static func defaultEndpoint(journal: String) -> String {
        let path = journal + "/replay.sock"
        guard path.utf8.count > 100 else { return "ipc://" + path }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a, 64-bit
        for byte in journal.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "ipc://@vbt-replay-" + String(hash, radix: 16)
    }
}

/// Starts a producer's journal (`start`), or stops the program with one line saying what to do.
public func openJournal(_ program: String, endpoint: String, _ start: () throws -> Void) throws {
    do { try start() } catch let error as JournalError {
        reportProblem("\(program): \(error)")
        throw ExitCode.failure
    } catch let error as ZMQError {
        reportProblem("\(program): cannot bind the replay endpoint \(endpoint): \(error); give another with --replay-endpoint")
        throw ExitCode.failure
    }
}

extension LogFormat: ExpressibleByArgument {}

/// The log options every long-running program takes.
public struct LogOptions: ParsableArguments {
    @Option(help: "Log lines as text, or json (one object a line, for journald and log shippers); default VBT_LOG_FORMAT, else text.")
    public var logFormat: LogFormat?

    public init() {}

    /// The format asked for.
    public var format: LogFormat { logFormat ?? .fromEnvironment }
}
