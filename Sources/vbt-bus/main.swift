import ArgumentParser
import Logging
import VBTBus
import VBTCommandLine
import VBTForwarder
import VBTWire

@main
struct VBTBusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vbt-bus",
        abstract: "The vbt message bus: an XSUB/XPUB forwarder every other program connects to.",
        discussion: """
            Publishers connect to the XSUB side (VBT_PUB_ENDPOINT, default tcp://127.0.0.1:7701),
            subscribers to the XPUB side (VBT_SUB_ENDPOINT, default tcp://127.0.0.1:7702).
            Every --heartbeat-interval seconds, and at once after each new subscription, the bus
            publishes heartbeat.bus with its message and byte counters. SIGTERM or SIGINT stops
            it cleanly (exit 0).
            """,
        version: versionText("vbt-bus"))

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions

    @Option(help: "Seconds between heartbeat.bus messages.")
    var heartbeatInterval: Double = 1.0

    @Option(
        help: ArgumentHelp(
            "The bus's resident memory, MiB, a ceiling: from 7/8 of it, the subscriber furthest behind is disconnected; 0: no budget but the high-water mark (the systemd unit gives \(BusConfig.unitMemoryBudgetMB)).",
            discussion:
                "It connects again at once, counts what it missed as gaps and fetches it from the producers' journals. A subscriber that keeps up is never disconnected."
        ))
    var memoryBudgetMb: Int = 0

    @Option(help: "Messages queued per peer before a slow peer loses messages; 0: unbounded (then the memory budget alone).")
    var highWaterMark: Int32 = BusConfig.defaultHighWaterMark

    func validate() throws {
        guard heartbeatInterval > 0, heartbeatInterval <= 60 else {
            throw ValidationError("--heartbeat-interval must be between 0 and 60 seconds")
        }
        guard highWaterMark >= 0 else { throw ValidationError("--high-water-mark must be 0 (unbounded) or more") }
        guard memoryBudgetMb >= 0 else { throw ValidationError("--memory-budget-mb must be 0 (no budget) or more") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt-bus", format: logging.format)
        var configuration = Forwarder.Configuration()
        configuration.bus = bus.config
        configuration.bus.highWaterMark = highWaterMark
        configuration.memoryBudgetMB = memoryBudgetMb == 0 ? nil : memoryBudgetMb
        configuration.heartbeatIntervalS = heartbeatInterval
        let settings = configuration
        try await runProgram("vbt-bus", logger: logger, hint: "is another vbt-bus already running? Stop it or set VBT_PUB_ENDPOINT/VBT_SUB_ENDPOINT") {
            context in
            let forwarder = try Forwarder(context: context, configuration: settings, logger: logger)
            try forwarder.run()
        }
    }
}
