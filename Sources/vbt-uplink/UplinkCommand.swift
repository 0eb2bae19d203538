import ArgumentParser
import Dispatch
import Foundation
import Logging
import VBTBus
import VBTChain
import VBTCommandLine
import VBTWire

@main
struct UplinkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vbt-uplink",
        abstract: "Copies a gym's history (its SQLite store) to the chain's PostgreSQL store, exactly once.",
        discussion: """
            Reads the session-recorder's store read-only and sends athletes, sessions, sets, reps, \
            rejected attempts, profiles, posture changes, alerts and plans to the chain store, and applies \
            the gym's athlete erasures there (first in each cycle, each once), a batch per transaction \
            that also moves the gym's cursor there: a kill at any moment neither loses nor doubles a \
            row, and a batch sent twice changes nothing. While the chain store is away nothing is held but the gym's store itself; \
            the uplink catches up, in order, when it is back. A link that silently drops packets is \
            noticed within --dead-link seconds and the connection made again.

            Every cycle it logs how many rows it sent, its backlog (rows not yet in the chain store) and \
            its lag (age of the oldest of them). TLS is always verify-full; the role is the gym's \
            (vbt_gym_<gym>, made with `vbt chain add-gym`), which row-level security confines to the \
            gym's rows. It refuses a chain store whose schema version is not the one it writes.
            """,
        version: versionText("vbt-uplink"))

    @Option(help: "The gym's SQLite store (the session-recorder's --db), opened read-only.")
    var db: String = "data/vbt.sqlite"

    @Option(help: "This gym's name in the chain (lower-case letters, digits, _; its role is vbt_gym_<gym>).")
    var gym: String

    @Option(help: "Seconds between cycles once caught up.")
    var interval: Double = 5

    @Option(help: "Rows per batch (one transaction each), 1 to 2000: the most the uplink holds in memory.")
    var batch: Int = 500

    @Option(help: "Seconds back in which changing rows (sessions, sets) are sent again so later edits reach the chain; athletes are always.")
    var refreshWindow: Double = 172_800

    @Option(help: "Seconds after which a chain connection that gets no answer (packets dropped on the way) is given up and made again.")
    var deadLink: Int = 15

    @Flag(help: "Run one cycle and exit (0 when the backlog is empty at its end).")
    var once = false

    @Flag(
        help: ArgumentHelp(
            "Publish heartbeat.uplink-<gym> on the bus: backlog, lag, rows sent and the last error.",
            discussion: "The bus as every program reaches it: --pub-endpoint or VBT_PUB_ENDPOINT, the keys VBT_CERT and VBT_BUS_CERT, or --insecure."
        ))
    var bus = false

    @Option(help: "With --bus: the endpoint publishers connect to (overrides VBT_PUB_ENDPOINT).")
    var pubEndpoint: String?

    @Flag(help: "With --bus: run without keys (plaintext; also VBT_INSECURE=1), only when the bus is on this computer.")
    var insecure = false

    @OptionGroup var chain: ChainOptions
    @OptionGroup var logging: LogOptions

    /// With --bus, where the bus is and the keys, as every program takes them (BusOptions, which
    /// would make the bus required): the environment's, overridden by --pub-endpoint.
    func busConfig() throws -> BusConfig {
        var config = BusConfig.fromEnvironment()
        if let pubEndpoint { config.pubEndpoint = pubEndpoint }
        do { config.security = try BusSecurity.fromEnvironment() } catch { throw ValidationError("--bus: \(error)") }
        guard config.security != nil || insecure || ProcessInfo.processInfo.environment["VBT_INSECURE"] == "1" else {
            throw ValidationError(
                "--bus needs keys: set VBT_CERT and VBT_BUS_CERT (`vbt keys init` and `vbt keys add` make them), "
                    + "or pass --insecure when the bus is on this computer")
        }
        return config
    }

    func validate() throws {
        guard ChainSchema.isValidGym(gym) else {
            throw ValidationError("--gym must be a lower-case letter then up to 39 lower-case letters, digits or _, e.g. north_side")
        }
        guard interval > 0, interval <= 3_600 else { throw ValidationError("--interval must be above 0 and at most 3600 seconds") }
        guard (1...2_000).contains(batch) else { throw ValidationError("--batch must be 1 to 2000 rows") }
        guard (2...600).contains(deadLink) else { throw ValidationError("--dead-link must be 2 to 600 seconds") }
        guard refreshWindow >= 0 else { throw ValidationError("--refresh-window must be 0 or more seconds") }
        guard FileManager.default.fileExists(atPath: db) else {
            throw ValidationError("no store at \(db): give the session-recorder's --db")
        }
        if bus { _ = try busConfig() }
    }

    func run() throws {
        let logger = bootstrapLogging(label: "vbt-uplink", format: logging.format)
        let stop = StopFlag()
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let signals = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.set() }
            source.resume()
            return source
        }
        defer { for source in signals { source.cancel() } }

        let store: GymStore
        do { store = try GymStore(path: db) } catch {
            reportProblem("vbt-uplink: cannot open \(db) read-only: \(error)")
            throw ExitCode.failure
        }
        let uplink = Uplink(gym: gym, source: store, batch: batch, refreshWindowS: refreshWindow, logger: logger)
        var endpoint = chain.endpoint(applicationName: "vbt-uplink-\(gym)")
        endpoint.deadLinkS = deadLink
        var connection: PostgresConnection?
        var heartbeat: UplinkHeartbeat?
        if bus {
            do { heartbeat = try UplinkHeartbeat(gym: gym, config: busConfig(), intervalS: min(max(interval, 1), 5)) } catch {
                reportProblem("vbt-uplink: the bus: \(error); check --pub-endpoint (VBT_PUB_ENDPOINT) and that vbt-bus is running")
                throw ExitCode.failure
            }
        }
        logger.info("uplink started", metadata: ["gym": "\(gym)", "db": "\(db)", "schema": "\(ChainSchema.current)", "bus": "\(bus)"])
        while !stop.isSet {
            heartbeat?.tick()
            do {
                if connection == nil {
                    let made = try PostgresConnection(endpoint)
                    try ChainSchema.check(made)
                    try ChainSchema.checkRole(made, gym: gym)
                    connection = made
                    logger.info("chain store connected", metadata: ["tls": "\(made.usesTLS)", "server": "\(made.serverVersion)"])
                }
                guard let connection else { continue }
                if let heartbeat {  // what is left before this cycle: seen while a long catch-up runs
                    (heartbeat.progress.backlogRows, heartbeat.progress.lagS) = try uplink.measure(connection, now: Date().timeIntervalSince1970)
                    heartbeat.tick(force: true)
                }
                let status = try uplink.cycle(connection, now: Date().timeIntervalSince1970) {
                    heartbeat?.tick()
                    return stop.isSet
                }
                if let heartbeat {
                    heartbeat.progress.backlogRows = status.backlog
                    heartbeat.progress.lagS = status.lagS
                    heartbeat.progress.sentRows += status.sent.values.reduce(0, +)
                    heartbeat.progress.lastError = nil
                    heartbeat.tick(force: true)
                }
                let sent = ChainTable.all.map { "\($0.name)=\(status.sent[$0.name] ?? 0)" }.joined(separator: " ")
                logger.info(
                    "cycle",
                    metadata: [
                        "sent": "\(sent)", "refreshed": "\(status.refreshed)", "backlog": "\(status.backlog)",
                        "lag_s": "\(String(format: "%.1f", status.lagS))",
                    ])
                if once { throw status.backlog == 0 ? ExitCode.success : ExitCode.failure }
            } catch let error as PostgresError {
                connection = nil
                heartbeat?.progress.lastError = error.description
                heartbeat?.tick(force: true)
                if error.isPermanent {
                    reportProblem("vbt-uplink: \(error)")
                    throw ExitCode.failure
                }
                logger.warning("chain store unavailable; retrying", metadata: ["error": "\(error)", "in_s": "\(interval)"])
                if once { throw ExitCode.failure }
            } catch let error as ExitCode {
                throw error
            } catch {
                // The gym's store unreadable for a moment (busy, being restored): the cursor did not move.
                logger.warning("gym store unreadable; retrying", metadata: ["error": "\(error)", "in_s": "\(interval)"])
                heartbeat?.progress.lastError = "gym store unreadable: \(error)"
                heartbeat?.tick(force: true)
                if once { throw ExitCode.failure }
            }
            // Sleeps in heartbeat intervals, so a long --interval does not silence the heartbeat.
            var left = interval
            while left > 0, !stop.isSet {
                let step = min(left, heartbeat?.intervalS ?? left)
                stop.sleep(step)
                left -= step
                heartbeat?.tick()
            }
        }
        heartbeat?.part()
        logger.info("uplink stopped")
    }
}

/// The uplink's heartbeat on the bus (`heartbeat.uplink-<gym>`, `HeartbeatSchedule`'s with the
/// uplink's progress), published from the uplink's one loop (the publisher is that thread's):
/// when due, and at once when its progress changes.
final class UplinkHeartbeat {
    let context = ZMQContext()
    let publisher: Publisher
    private var schedule: HeartbeatSchedule
    var progress: HeartbeatMessage.UplinkProgress
    var intervalS: Double { schedule.intervalS }

    init(gym: String, config: BusConfig, intervalS: Double) throws {
        publisher = try Publisher(context: context, config: config, program: "vbt-uplink", lingerMs: 1_000)
        schedule = HeartbeatSchedule(role: "vbt-uplink", name: "uplink-" + gym, intervalS: intervalS)
        progress = HeartbeatMessage.UplinkProgress(gym: gym)
        // A moment for a listener (the console, the notifier) to be heard, so the first heartbeat
        // is not sent before anyone is connected; none after it: the uplink runs on regardless.
        _ = try? publisher.waitForSubscriber(topic: "heartbeat." + schedule.name, timeoutS: 1)
    }

    /// Publishes when due, or now with `force`; a bus away loses the heartbeat, never the uplink.
    func tick(force: Bool = false) {
        try? schedule.tick(publisher, inputs: nil, force: force) { $0.uplink = progress }
    }

    /// The last heartbeat: stopped as asked, gone rather than silent.
    func part() { try? schedule.part(publisher, inputs: nil) { $0.uplink = progress } }
}
