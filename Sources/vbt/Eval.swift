import ArgumentParser
import Foundation
import VBTBus
import VBTDetection
import VBTWire

/// `vbt eval`: the live detectors run offline over a recording, compared with reference labels.
struct Eval: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run rep detection offline over a recording and compare it with reference labels.",
        discussion: """
            Reads RECORDING (JSON Lines from `vbt record`, proto/README.md, "Recordings") and feeds every \
            sample and rep-detector command, in file order, to the same per-station detectors the \
            rep-detector runs; no bus or other process is needed. Without --labels it lists what was \
            detected.

            With --labels (proto/labels.md) the reps are compared with a reference. Time labels (CSV \
            station,t_top,mean_velocity_mps,peak_velocity_mps) are matched one-to-one to the rep whose \
            top is within --tolerance seconds of their t_top (closest pairs first). Order-only labels \
            (CSV station,set,rep,mean_velocity_mps,peak_velocity_mps, a reference device's per-rep \
            export without times) are matched in order within each set: the labels' n-th set at a \
            station is the detector's n-th set there, and rep k its k-th rep; what one side has and the \
            other not counts as a false positive or negative. It reports, per station, per exercise \
            and overall, true and false positives, false negatives, precision, recall and F1, and for \
            mean and peak velocity the bias, mean absolute error, SD, 95 % limits of agreement (Bland & \
            Altman, The Lancet 1986) and smallest detectable change (1.96 SD), and lists every attempt \
            the detector rejected. --json prints one JSON object instead (proto/eval.md).

            Example:
              vbt eval session.jsonl --labels session-labels.csv --plot agreement.svg
            """)

    @Argument(help: "The recording (JSON Lines, as `vbt record --out FILE` writes).")
    var recording: String

    @Option(
        help: """
            Reference labels: CSV with the header station,t_top,mean_velocity_mps,peak_velocity_mps (time) \
            or station,set,rep,mean_velocity_mps,peak_velocity_mps (order-only).
            """)
    var labels: String?

    @Flag(help: "Print one JSON object (proto/eval.md) instead of tables.")
    var json = false

    @Option(help: "Also write a Bland-Altman plot of mean velocity to this SVG file (needs --labels).")
    var plot: String?

    @Option(help: "Seconds a rep's top may be from a label's t_top to match it (time labels; default 0.5).")
    var tolerance: Double?

    func validate() throws {
        if let tolerance, !(tolerance.isFinite && tolerance >= 0 && tolerance <= 60) {
            throw ValidationError("--tolerance must be between 0 and 60 seconds")
        }
        if plot != nil, labels == nil { throw ValidationError("--plot needs --labels: the plot compares detected with reference velocities") }
    }

    func run() throws {
        let references: LabelsFile?
        do {
            references = try labels.map { path throws(LabelsError) in try ReferenceLabels.loadFile(path: path) }
        } catch {
            reportProblem("vbt: \(error)")
            throw ExitCode.failure
        }
        if references?.kind == .order, tolerance != nil, let labels {
            reportProblem("vbt: --tolerance applies to time labels; \(labels) holds order-only labels (station,set,rep,...), matched in order")
            throw ExitCode.failure
        }
        let offline: OfflineRun
        do {
            offline = try OfflineRunner.run(path: recording)
        } catch {
            reportProblem("vbt: \(error)")
            throw ExitCode.failure
        }
        if offline.messages == 0 {
            let why = offline.unreadable.first.map { " (\($0))" } ?? ""
            reportProblem("vbt: \(recording) holds no readable messages\(why); record one with `vbt record --out FILE sample. cmd.`")
            throw ExitCode.failure
        }
        let evaluation = Evaluation(run: offline, file: references, toleranceS: tolerance ?? RepMatching.defaultToleranceS)
        if let plot {
            let svg = evaluation.blandAltmanSVG(title: "Mean velocity: vbt vs reference (\(URL(fileURLWithPath: recording).lastPathComponent))")
            do { try Data(svg.utf8).write(to: URL(fileURLWithPath: plot), options: .atomic) } catch {
                reportProblem("vbt: cannot write the plot to \(plot): \(error.localizedDescription)")
                throw ExitCode.failure
            }
        }
        if json {
            print(evaluation.json(recording: recording))
        } else {
            print(evaluation.table(recording: recording), terminator: "")
            if let plot { print("\nplot: \(plot)") }
        }
    }
}

// MARK: - The files

extension OfflineRunner {
    /// Reads the recording at `path` line by line (it may be large: no line is kept once fed)
    /// and runs it as `run(lines:unreadable:settings:)` does.
    static func run(path: String, settings: DetectorSettings = DetectorSettings()) throws(RecordingError) -> OfflineRun {
        var state = State(settings: settings)
        try RecordingReader.forEachLine(path: path) { line in
            switch line {
            case .success(let line): state.consume(line)
            case .failure(let bad): state.result.unreadable.append(bad)
            }
        }
        return state.finish()
    }
}

extension ReferenceLabels {
    /// Reads `path` and parses it as the kind of labels its header names (`parseFile`).
    static func loadFile(path: String) throws(LabelsError) -> LabelsFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LabelsError(line: nil, message: "cannot read labels \(path): check the path")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw LabelsError(line: nil, message: "\(path): labels must be UTF-8 text")
        }
        return try parseFile(text, source: path)
    }
}
