import ArgumentParser
import Foundation
import Hummingbird
import Logging
import Prometheus
import VBTBus
import VBTCommandLine
import VBTConsole
import VBTDetection
import VBTWire

@main
struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coach-console",
        abstract: "The whole gym live in a browser: every station's reps, sets, rest and alerts, for coaches on tablets.",
        discussion: """
            Subscribes to rep.*, set.*, rejected.*, posture.*, timer.*, workout.*, status.*, alert.*, cmd.* and
            heartbeat.*, and serves the live board at / (pushed over a WebSocket at /ws, coalesced: a browser is
            sent the next change only once it has drawn the last). Every page but /login needs an account:
            `vbt console user add NAME --role coach|viewer|athlete` (password on standard input) writes them to --users,
            which the console reads again when it changes; an athlete account sees its own page only. A rack display
            (/rack/STATION) is paired with a code from `vbt console display add STATION` instead, and sees that
            station only. Sessions are cookies (HttpOnly, SameSite=Strict);
            requests that change anything need the session's CSRF token and a same-origin Origin.
            Listening on anything but loopback is refused unless --allow-lan is given: put a TLS proxy in front
            (proto/console.md says how), as the passwords and cookies would otherwise cross the gym's Wi-Fi in clear.
            """,
        version: versionText("coach-console"))

    @Option(help: "HOST:PORT to listen on (overrides VBT_CONSOLE_LISTEN; default 127.0.0.1:8080).")
    var listen: String?

    @Option(help: "The accounts file (overrides VBT_CONSOLE_USERS; default data/console-users).")
    var users: String?

    @Flag(help: "Allow listening on an address other than loopback (behind a TLS proxy).")
    var allowLan = false

    @Option(help: "Hours a login lasts.")
    var sessionHours: Double = 12

    @Flag(help: "Mark the session cookie Secure (browsers send it over HTTPS only): for a console behind a TLS proxy.")
    var secureCookie = false

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions

    func validate() throws {
        _ = try address()
        guard sessionHours > 0, sessionHours <= 24 * 30 else { throw ValidationError("--session-hours must be more than 0 and at most 720") }
    }

    /// The address to listen on, checked.
    func address() throws -> (host: String, port: Int) {
        let text = listen ?? environment("VBT_CONSOLE_LISTEN") ?? "127.0.0.1:8080"
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else {
            throw ValidationError("--listen must be HOST:PORT, e.g. 127.0.0.1:8080, not \(text)")
        }
        let host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        guard !host.isEmpty else { throw ValidationError("--listen must name a host, e.g. 127.0.0.1:8080") }
        let loopback = host == "localhost" || host == "::1" || host.hasPrefix("127.")
        guard loopback || allowLan else {
            throw ValidationError(
                "\(host) is not loopback: passwords and session cookies would cross the network in clear. "
                    + "Serve it behind a TLS proxy and pass --allow-lan (proto/console.md).")
        }
        return (host, port)
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "coach-console", format: logging.format)
        let (host, port) = try address()
        let usersPath = users ?? environment("VBT_CONSOLE_USERS") ?? "data/console-users"
        let accounts: AccountBook
        do { accounts = try AccountBook(path: usersPath) } catch {
            reportProblem("coach-console: \(error.description)")
            throw ExitCode.failure
        }
        if accounts.count == 0 {
            logger.warning(
                "no accounts yet: nobody can log in", metadata: ["users": "\(usersPath)", "add": "vbt console user add NAME --role coach"])
        }
        let displays: DisplayBook
        do { displays = try DisplayBook(path: DisplaysFile.path(forUsers: usersPath)) } catch {
            reportProblem("coach-console: \(error.description)")
            throw ExitCode.failure
        }
        let live = LiveBoard(zones: VelocityZone.defaults.map { ZoneFloor(name: $0.name, fromMps: $0.fromMps) })
        let registry = PrometheusCollectorRegistry()
        let metrics = GymMetrics(factory: PrometheusMetricsFactory(registry: registry))
        let outbox = CommandOutbox()
        let stop = StopFlag()
        let queries = QueryWorker()
        let history = HistoryPages(queries: queries, utcOffsetS: TimeZone.current.secondsFromGMT())
        let server = ConsoleServer(
            live: live, history: history, registry: registry, accounts: accounts, displays: displays, outbox: outbox, host: host, port: port,
            sessionS: sessionHours * 3_600,
            secureCookie: secureCookie, logger: logger)
        let busConfig = bus.config
        ConsoleServer.warmUp(logger: logger)
        // The recorder's queries on a thread of their own, stopped after the web server, by a flag
        // of their own: one shared with the bus loop (stopped first) ended them before their turn,
        // and the service group took that for a failure (exit 1 in about one stop in five).
        let queriesStop = StopFlag()
        let queryLoop = SocketLoopService(name: "console-queries", context: ZMQContext(), onShutdown: { queriesStop.set() }) { context in
            try queries.run(context: context, config: busConfig, stop: queriesStop, logger: logger)
        }
        // Each station's readiness, asked of the recorder after each set (ReadinessFeed).
        let readinessFeed = Task { await ReadinessFeed(live: live, queries: queries).run() }
        defer { readinessFeed.cancel() }
        try await runProgram("coach-console", logger: logger, onShutdown: { stop.set() }, before: [queryLoop] + server.services) { context in
            try ConsoleBusLoop(context: context, config: busConfig, live: live, metrics: metrics, outbox: outbox, logger: logger).run(stop: stop)
        }
    }
}
