import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTPosture
import VBTWire

@main
struct PostureEvaluator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "posture-evaluator",
        abstract: "Turns the posture wearable's sample messages into posture and calibration messages.",
        discussion: """
            Subscribes to status.* and cmd.*, and to sample.<station> of each station whose bridge \
            says (its status) it has a posture wearable, or where a calibration is asked for; \
            publishes posture.<station> (at most --max-rate per second, and at once on every change \
            of state) and calibration.<station>.

            posture.calibrate collects that many seconds of readings and fits the calibration (`vbt \
            posture calibrate` sends it); athlete.assign loads the athlete's stored calibration (of \
            its arguments only athlete matters here). Calibrations are kept per athlete in \
            --calibrations and survive restarts.

            Commands it acts on (cmd.<station>, target posture-evaluator or *; an argument marked ? \
            may be left out; proto/cmd.schema.json gives every argument's type and bounds):
            \(Command.help(for: "posture-evaluator"))

            --compute FILE fits a calibration offline from a JSON file {"acc": [[x,y,z],...], \
            "mag": [[x,y,z],...], "accPoints": [...], "magPoints": [...]} and prints it with the \
            densities of the points, then exits (for checking the maths).
            """,
        version: versionText("posture-evaluator"))

    @Option(help: "Where calibrations are stored, per athlete (JSON).")
    var calibrations: String = "data/calibrations.json"

    @Option(help: "Seconds a new posture state must hold before it is reported.")
    var hysteresis: Double = 0.5

    @Option(help: "Seconds of bad posture that count as sustained (the notifier alerts).")
    var sustainedBad: Double = 5

    @Option(help: "Most posture messages per second per station.")
    var maxRate: Double = 5

    @Option(help: "Fit a calibration from a JSON file and print it (no bus).")
    var compute: String?

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions
    @OptionGroup var journalOptions: JournalOptions

    func validate() throws {
        guard hysteresis >= 0, sustainedBad > 0, maxRate > 0 else {
            throw ValidationError("--hysteresis must be 0 or more, --sustained-bad and --max-rate more than 0")
        }
    }

    func run() async throws {
        if let compute {
            do {
                print(try OfflineCalibration.run(path: compute))
                return
            } catch {
                reportProblem("posture-evaluator: \(error)")
                throw ExitCode.failure
            }
        }
        let logger = bootstrapLogging(label: "posture-evaluator", format: logging.format)
        let config = bus.config
        var settings = PostureSettings()
        settings.hysteresisS = hysteresis
        settings.sustainedBadS = sustainedBad
        settings.maxRateHz = maxRate
        let busConfig = config, postureSettings = settings, storePath = calibrations, journalPlan = journalOptions.plan
        let stop = StopFlag()
        try await runProgram("posture-evaluator", logger: logger, onShutdown: { stop.set() }) { context in
            let runtime = try PostureRuntime(context: context, config: busConfig, settings: postureSettings, storePath: storePath, logger: logger)
            if let (settings, endpoint) = journalPlan {
                try openJournal("posture-evaluator", endpoint: endpoint) { try runtime.startJournal(settings, endpoint: endpoint) }
            }
            try runtime.run(stop: stop)
        }
    }
}
