import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTQuery
import VBTStore
import VBTWire

@main
struct SessionRecorder: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session-recorder",
        abstract: "Keeps the gym's history in SQLite and answers queries about it.",
        discussion: """
            Subscribes to what it keeps, raw samples on a connection of their own (the bus at its \
            memory budget disconnects that one first: proto/README.md), and stores reps, sets, \
            rejected reps, load-velocity profiles, assignments (the commands below), calibrations, \
            posture changes, alerts and raw samples (rows of up to a second of one sensor's \
            readings, kept --sample-retention-days) in --db, in WAL mode with numbered migrations.

            Idempotent: a message seen twice (same src and seq, or the same rep_id) is stored once; \
            per-stream progress is stored, so a restart knows what it has. Writes are batched (a \
            transaction every 200 ms, or every 5,000 messages); when the disk is full, the file \
            read-only or locked, messages are kept in memory and retried, and nothing stored is lost.

            Answers JSON queries on --query-endpoint (a ROUTER socket; proto/query.md): athletes, \
            exercises, plans, assignments, calibrations, patterns, history, progress, weekly \
            statistics, export pages. `vbt` is its client.

            Commands it stores (cmd.<station>; proto/cmd.schema.json gives every argument's type and \
            bounds):
            \(Command.help(for: "session-recorder"))
            """,
        version: versionText("session-recorder"))

    @Option(help: "The SQLite database (overrides VBT_DB; default data/vbt.sqlite).")
    var db: String?

    @Option(help: "Endpoint the query socket binds (overrides VBT_QUERY_ENDPOINT; default tcp://127.0.0.1:7703).")
    var queryEndpoint: String?

    @Option(help: "Days raw readings are kept; 0 stores none.")
    var sampleRetentionDays: Double = 7

    @Option(help: "Seconds without a set after which a station's next set opens a new session.")
    var sessionGap: Double = 3_600

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions

    /// Messages each of the recorder's two sockets queues: about 30 ms of a 1,000-station gym (some
    /// 63,000 messages a second). What arrives beyond it while a batch is written waits in the bus's
    /// queue for the recorder; the bus at its memory budget cuts the samples' connection
    /// (`bulk`) first, and the recorder then fetches what it missed from the producers' journals,
    /// so nothing is lost. At 1,002 stations the queues held 10-14 MB of the recorder's memory at
    /// the default 8,192, 4.9 MB at 2,048 (docs/performance.md).
    static let receiveHighWaterMark: Int32 = 2_048

    func validate() throws {
        guard sampleRetentionDays >= 0, sampleRetentionDays <= 3_650 else { throw ValidationError("--sample-retention-days must be 0 to 3650") }
        guard sessionGap > 0 else { throw ValidationError("--session-gap must be more than 0") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "session-recorder", format: logging.format)
        var config = bus.config
        config.subscriberHighWaterMark = Self.receiveHighWaterMark
        if let queryEndpoint { config.queryEndpoint = queryEndpoint }
        var storeSettings = StoreSettings()
        if let db { storeSettings.path = db }
        storeSettings.sampleRetentionDays = sampleRetentionDays
        storeSettings.sessionGapS = sessionGap
        // The log is copied into the database by a thread of its own (WALCheckpointer), not by the loop's writes.
        storeSettings.walPagesBeforeWriterCopies = 10_000
        let busConfig = config, settings = storeSettings
        let stop = StopFlag()
        try await runProgram(
            "session-recorder", logger: logger,
            hint: "check VBT_PUB_ENDPOINT/VBT_SUB_ENDPOINT, that vbt-bus is running, and that no other recorder holds VBT_QUERY_ENDPOINT",
            onShutdown: { stop.set() }
        ) { context in
            // Opened on the socket thread, which alone uses it from then on.
            let store: TrainingStore
            do { store = try TrainingStore(settings: settings, openLater: true) } catch {
                reportProblem("session-recorder: \((error as? StoreError)?.message ?? "\(error)")")
                throw ExitCode.failure
            }
            if let trouble = store.openError {
                // Passing trouble (a read-only or full disk, a lock): run anyway, keep what arrives, retry.
                logger.error("database not open yet; messages are kept and retried", metadata: ["error": "\(trouble.message)"])
            }
            let runtime = try RecorderRuntime(context: context, config: busConfig, store: store, settings: RecorderSettings(), logger: logger)
            let checkpointer = WALCheckpointer(path: settings.path, logger: logger)
            checkpointer.start()
            defer { checkpointer.stop() }
            try runtime.run(stop: stop)
        }
    }
}
