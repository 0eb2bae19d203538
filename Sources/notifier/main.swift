import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTNotify
import VBTWebhook
import VBTWire

@main
struct NotifierCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifier",
        abstract: "Rest timers, the live workout and threshold alerts, on the bus and to a webhook.",
        discussion: """
            Subscribes to set.*, rep.*, posture.*, status.*, heartbeat.* and cmd.*; publishes \
            timer.<station> (every second while resting), workout.<station> (plan progress, on \
            change and every 5 s), alert.<station> (raised, repeat, cleared, notice) and \
            heartbeat.notifier.

            A set's end starts a rest: the plan's rest, else athlete.assign's rest_s, else \
            --default-rest. When the plan moves to its next exercise the notifier sends \
            athlete.assign so the rep detector follows. `vbt rest` sends the rest commands.

            Commands it acts on (cmd.<station>, target notifier or *; an argument marked ? may be \
            left out; proto/cmd.schema.json gives every argument's type and bounds):
            \(Command.help(for: "notifier"))

            After one of an exercise's first sets with load advice, the notifier asks the \
            session-recorder for today's readiness (--query-endpoint): below the athlete's usual, \
            beyond noise, the advice carries one set fewer. Without the recorder the advice goes on \
            without it.

            Timers, plans and open alerts are kept in --state and survive a restart. --webhook URL \
            posts every alert as JSON from its own task (bounded queue; a slow or dead webhook never \
            stalls the bus; drops are counted in heartbeat.notifier).
            """,
        version: versionText("notifier"))

    @Option(help: "Where timers, plans and open alerts are kept (JSON).")
    var state: String = "data/notifier.json"

    @Option(help: "Rest in seconds when neither the plan nor the exercise gives one.")
    var defaultRest: Double = 120

    @Option(help: "Seconds between reminders of an alert whose condition still holds.")
    var repeatInterval: Double = 60

    @Option(help: "Heartbeat intervals of silence before a program counts as missing.")
    var missedHeartbeats: Double = 3

    @Option(help: "Seconds of bad posture before the alert (default: the evaluator's sustained_bad flag).")
    var postureLimit: Double?

    @Option(help: "A sensor rate below this fraction of its best since connecting raises an alert.")
    var rateDrop: Double = 0.5

    @Option(help: "Load advice is rounded to this step, kg: the smallest total increment the plates make.")
    var plateStepKg: Double = 2.5

    @Option(help: "Load advice never goes below this, kg: the empty bar.")
    var barKg: Double = 20

    @Option(
        help:
            "The session-recorder's query endpoint, asked for today's readiness after a set (overrides VBT_QUERY_ENDPOINT; default tcp://127.0.0.1:7703)."
    )
    var queryEndpoint: String?

    @Option(help: "Post every alert as JSON to this http:// or https:// address.")
    var webhook: String?

    @Option(help: "Seconds one webhook attempt may take.")
    var webhookTimeout: Double = 2

    @Option(help: "Webhook retries after a failed attempt (backoff 0.5 s, doubling).")
    var webhookRetries: Int = 3

    @Option(help: "Alerts waiting for the webhook at most; more are dropped and counted.")
    var webhookQueue: Int = 256

    @Option(help: "Lowest severity posted to the webhook: info, warning or critical.")
    var webhookSeverity: String = "info"

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions
    @OptionGroup var journalOptions: JournalOptions

    func validate() throws {
        guard defaultRest >= 0, defaultRest <= 3600 else { throw ValidationError("--default-rest must be 0 to 3600 seconds") }
        guard repeatInterval > 0, missedHeartbeats >= 1 else {
            throw ValidationError("--repeat-interval must be more than 0 and --missed-heartbeats 1 or more")
        }
        if let postureLimit { guard postureLimit > 0 else { throw ValidationError("--posture-limit must be more than 0 seconds") } }
        guard rateDrop > 0, rateDrop < 1 else { throw ValidationError("--rate-drop must be between 0 and 1, e.g. 0.5") }
        guard plateStepKg > 0, plateStepKg <= 50, barKg >= 0, barKg <= 100 else {
            throw ValidationError("--plate-step-kg must be more than 0 and at most 50, --bar-kg 0 to 100")
        }
        if let webhook {
            guard let url = URL(string: webhook), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ValidationError("--webhook must be an http:// or https:// address, e.g. http://127.0.0.1:8080/alerts")
            }
        }
        guard webhookTimeout > 0, webhookTimeout <= 300, webhookRetries >= 0, webhookRetries <= 20, webhookQueue >= 1 else {
            throw ValidationError("--webhook-timeout must be more than 0 and at most 300, --webhook-retries 0 to 20, --webhook-queue 1 or more")
        }
        guard AlertMessage.Severity(rawValue: webhookSeverity) != nil else { throw ValidationError("--webhook-severity must be info, warning or critical") }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "notifier", format: logging.format)
        var settings = NotifierSettings()
        settings.defaultRestS = defaultRest
        settings.repeatS = repeatInterval
        settings.missedHeartbeats = missedHeartbeats
        settings.postureLimitS = postureLimit
        settings.rateDropFraction = rateDrop
        settings.gym = GymLoads(plateStepKg: plateStepKg, barKg: barKg)
        let sink: WebhookSink? = webhook.map { url in
            var webhookSettings = WebhookSettings(url: url)
            webhookSettings.timeoutS = webhookTimeout
            webhookSettings.retries = webhookRetries
            webhookSettings.queueCapacity = webhookQueue
            webhookSettings.minSeverity = AlertMessage.Severity(rawValue: webhookSeverity) ?? .info
            return WebhookSink(settings: webhookSettings, logger: logger)
        }
        var config = bus.config
        if let queryEndpoint { config.queryEndpoint = queryEndpoint }
        let busConfig = config, notifierSettings = settings, statePath = state, journalPlan = journalOptions.plan
        let stop = StopFlag()
        // The sink outlives the bus loop: an attempt in flight at shutdown gets a moment to finish, then is cancelled.
        let services = sink.map { [WebhookService(sink: $0, graceS: webhookTimeout + 0.5)] } ?? []
        try await runProgram("notifier", logger: logger, onShutdown: { stop.set() }, before: services) { context in
            let runtime = try NotifierRuntime(
                context: context, config: busConfig, settings: notifierSettings, statePath: statePath,
                sink: sink, logger: logger)
            if let (settings, endpoint) = journalPlan {
                try openJournal("notifier", endpoint: endpoint) { try runtime.startJournal(settings, endpoint: endpoint) }
            }
            try runtime.run(stop: stop)
        }
    }
}
