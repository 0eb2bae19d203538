import ArgumentParser
import Dispatch
import Foundation
import Logging
import VBTBus
import VBTChain
import VBTCommandLine

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

    @OptionGroup var chain: ChainOptions
    @OptionGroup var logging: LogOptions

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
        logger.info("uplink started", metadata: ["gym": "\(gym)", "db": "\(db)", "schema": "\(ChainSchema.current)"])
        while !stop.isSet {
            do {
                if connection == nil {
                    let made = try PostgresConnection(endpoint)
                    try ChainSchema.check(made)
                    try ChainSchema.checkRole(made, gym: gym)
                    connection = made
                    logger.info("chain store connected", metadata: ["tls": "\(made.usesTLS)", "server": "\(made.serverVersion)"])
                }
                guard let connection else { continue }
                let status = try uplink.cycle(connection, now: Date().timeIntervalSince1970) { stop.isSet }
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
                if once { throw ExitCode.failure }
            }
            stop.sleep(interval)
        }
        logger.info("uplink stopped")
    }
}
