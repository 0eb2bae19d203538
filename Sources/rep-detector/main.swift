import ArgumentParser
import Logging
import VBTBus
import VBTCommandLine
import VBTDetection
import VBTDetectorRole
import VBTWire

@main
struct RepDetector: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rep-detector",
        abstract: "Turns sample messages into rep, set and rejected messages (reps, velocity loss, automatic stop).",
        discussion: """
            Subscribes to sample.* and cmd.*; publishes rep.<station>, set.<station> and \
            rejected.<station>. A set starts at a station's first valid rep and ends after \
            --idle-timeout seconds without a rep (reading time), on a velocity-loss stop, or on a \
            set.end command.

            Commands it acts on (cmd.<station>, target rep-detector or *; an argument marked ? may be \
            left out; proto/cmd.schema.json gives every argument's type and bounds):
            \(Command.help(for: "rep-detector"))

            A laser unit that sends its accelerometer (acc_g) and hangs from the bar has each rep \
            measured from both (Kalman smoother); a unit without one, or standing on the floor, is \
            measured from the laser alone. Distance spikes and readings with no return are dropped.

            A bar IMU needs acc_g; gyro_dps and angle_deg are used when sent (without angles, \
            "up" and 1 g are learned from the readings; rests are judged against the sensor's own \
            noise). Rejected attempts carry a reason: partial, rom-too-long, too-fast, too-slow or \
            refractory.

            Sets of 3 or more reps are learned as patterns of how the athlete lifts (kept in --patterns); \
            a live rep that matches one (dynamic time warping) gets relaxed thresholds.

            --takeover replaces a running detector without losing or repeating a rep: the running \
            one hands its state over and exits 0.
            """,
        version: versionText("rep-detector"))

    @Option(help: "Stations to serve, a shell glob, so several detectors can split a large gym.")
    var stations: String = "*"

    @Option(
        help: """
            Serve shard K of N (K/N): the stations whose name hashes to K (FNV-1a 64 of the name, \
            modulo N, plus 1), of those --stations matches. N detectors, --shard 1/N ... N/N, split \
            a large gym; each heartbeats as rep-detector-K and needs its own --journal and --patterns. \
            The bus sends each only its shard's samples.
            """)
    var shard: String = "1/1"

    @Flag(help: "Take over from the running detector (which then exits 0).")
    var takeover = false

    @Option(help: "Seconds without a rep that end a set.")
    var idleTimeout: Double = 10

    @Option(help: "The learned-pattern library (JSON); patterns survive restarts and hand-overs.")
    var patterns: String = "data/patterns.json"

    @Option(help: "Seconds to remember a question to the session-recorder (its patterns, when the library is empty). Detection never waits for the answer.")
    var recorderTimeout: Double = 10

    @OptionGroup var bus: BusOptions
    @OptionGroup var logging: LogOptions
    @OptionGroup var journalOptions: JournalOptions

    func validate() throws {
        guard idleTimeout > 0 else { throw ValidationError("--idle-timeout must be more than 0 seconds") }
        do { _ = try StationSelection(glob: stations, shard: shard) } catch { throw ValidationError(error.description) }
        guard recorderTimeout > 0 else { throw ValidationError("--recorder-timeout must be more than 0 seconds") }
    }

    /// Messages the detector's own socket queues: about 30 ms of a 1,000-station gym (some 63,000
    /// messages a second), enough for its short stalls; a longer backlog waits in the bus's queue for
    /// it, which the bus at its memory budget keeps longest (a `realtime` subscriber). Full at the
    /// default 8,192 the queue held 18 MB of the detector's memory (docs/performance.md).
    static let receiveHighWaterMark: Int32 = 2_048

    /// The program's name on the bus (`rep-detector`, `rep-detector-K` for shard K), then, for a
    /// glob other than `*`, `-` and the glob with each character a file name should not hold as
    /// `_` (`rack-0*` -> `rep-detector-rack-0_`, shard 2: `rep-detector-2-rack-0_`).
    static func journalName(_ selection: StationSelection) -> String {
        guard selection.glob != "*" else { return selection.programName }
        let safe = selection.glob.unicodeScalars.map { scalar -> Character in
            scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-._".unicodeScalars.contains(scalar)
                ? Character(scalar) : "_"
        }
        return selection.programName + "-" + String(safe)
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "rep-detector", format: logging.format)
        var config = bus.config
        config.subscriberHighWaterMark = Self.receiveHighWaterMark
        var options = DetectorOptions()
        options.stations = try StationSelection(glob: stations, shard: shard)
        options.takeover = takeover
        options.settings.idleTimeoutS = idleTimeout
        options.patternsPath = patterns
        options.recorderTimeoutS = recorderTimeout
        // Detectors splitting a gym by --stations or --shard each keep their own journal (one
        // process per folder); a --takeover detector finds the one it replaces by the same name.
        options.journal = journalOptions.plan(defaultFolder: "data/journal/" + Self.journalName(options.stations))
        let settings = options, busConfig = config
        let stop = StopFlag()
        try await runProgram("rep-detector", logger: logger, onShutdown: { stop.set() }) { context in
            let runtime = try DetectorRuntime(context: context, config: busConfig, options: settings, logger: logger)
            do { try runtime.run(stop: stop) } catch let error as JournalError {
                reportProblem("rep-detector: \(error)")
                throw ExitCode.failure
            }
        }
    }
}
