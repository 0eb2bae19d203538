import Foundation
import VBTBus
import VBTWire

// `vbt eval`: the detector run offline over a recording and compared with
// reference labels (proto/labels.md, proto/eval.md).
// Reading the recording and the labels file is the only I/O; the detectors
// are the live ones fed through the same path (Feeding.swift), and matching
// and statistics are plain functions of numbers.

// MARK: - Offline run

/// A rep the detector found in a recording.
public struct EvaluatedRep: Sendable, Equatable {
    public var station: String
    public var setId: String
    /// The rep's number within its set, from 1.
    public var index: Int
    /// Top of the concentric phase (`concentricEndT`), sensor time in Unix s.
    public var tTop: Double
    public var meanVelocityMps: Double
    public var peakVelocityMps: Double
    /// The reading that completed it (as the live detector's `t_input`: the last reading of the sample
    /// message it came from, at least its `t_end`), sensor time in Unix s; nil for a rep made without one
    /// (a set closed by the clock).
    public var tInput: Double?

    /// Creates a rep.
    public init(station: String, setId: String = "", index: Int = 1, tTop: Double, meanVelocityMps: Double, peakVelocityMps: Double) {
        (self.station, self.setId, self.index, self.tTop) = (station, setId, index, tTop)
        (self.meanVelocityMps, self.peakVelocityMps) = (meanVelocityMps, peakVelocityMps)
    }
}

/// What the detectors produced over a recording.
public struct OfflineRun: Sendable {
    /// Every rep in the order the detectors produced them.
    public var reps: [EvaluatedRep] = []
    /// Rejected rep attempts per station.
    public var rejectedByStation: [String: Int] = [:]
    /// Every station that had a sample or a detector command, sorted.
    public var stations: [String] = []
    /// Recording lines read as messages (of any type).
    public var messages = 0
    /// Readings skipped because their time is implausibly far from their message's `ts` (as the live detector does).
    public var skippedReadings = 0
    /// Lines that are not usable messages, and why; they are skipped.
    public var unreadable: [UnreadableLine] = []
}

/// Runs the live detectors over a recording, without bus or processes.
public enum OfflineRunner {
    /// Reads `path` and runs it line by line (see `run(lines:unreadable:settings:)`).
    public static func run(path: String, settings: DetectorSettings = DetectorSettings()) throws(RecordingError) -> OfflineRun {
        var state = State(settings: settings)
        try RecordingReader.forEachLine(path: path) { line in
            switch line {
            case .success(let line): state.consume(line)
            case .failure(let bad): state.result.unreadable.append(bad)
            }
        }
        return state.finish()
    }

    /// Feeds, in file order, every `sample` message to its station's detector
    /// and every `cmd` addressed to `*` or `rep-detector` through `apply`; other
    /// types are ignored. At the end each station is given an hour of silence
    /// (`closeIdleSet(at: lastReadingT + 3600)`) so its last set closes. A
    /// sample or command whose fields are not usable is reported as an
    /// unreadable line and skipped.
    public static func run(
        lines: [RecordedLine], unreadable: [UnreadableLine] = [],
        settings: DetectorSettings = DetectorSettings()
    ) -> OfflineRun {
        var state = State(settings: settings)
        state.result.unreadable = unreadable
        for line in lines { state.consume(line) }
        return state.finish()
    }

    /// The detectors and what they produced so far.
    struct State {
        let settings: DetectorSettings
        var result = OfflineRun()
        var detectors: [String: StationDetector] = [:]
        /// Stations in the order they first appeared.
        var order: [String] = []

        init(settings: DetectorSettings) { self.settings = settings }

        mutating func consume(_ line: RecordedLine) {
            result.messages += 1
            let message = line.message
            let station = message.envelope.station
            var detector = detectors[station] ?? StationDetector(station: station, settings: settings)
            let outputs: [DetectorOutput]
            var inputT: Double?
            switch message.envelope.type {
            case SampleMessage.type:
                let sample: SampleMessage
                do { sample = try message.payload(as: SampleMessage.self) } catch {
                    result.unreadable.append(UnreadableLine(number: line.number, reason: error.description))
                    return
                }
                // The live runtime's rule (DetectorRuntime.process): a reading far from its message's send time is skipped.
                let ts = message.envelope.ts
                var skipped = 0
                outputs = detector.feed(sample.readings) { t in
                    let usable = abs(t - ts) <= DetectorRuntime.maxReadingSkewS
                    if !usable { skipped += 1 }
                    return usable
                }
                result.skippedReadings += skipped
                inputT = sample.readings.latestTime
            case CommandMessage.type:
                let command: CommandMessage
                do { command = try message.payload(as: CommandMessage.self) } catch {
                    result.unreadable.append(UnreadableLine(number: line.number, reason: error.description))
                    return
                }
                guard command.target == "*" || command.target == "rep-detector" else { return }
                do { outputs = try detector.apply(command) } catch {
                    result.unreadable.append(UnreadableLine(number: line.number, reason: "\(command.command): \(error)"))
                    return
                }
            default:
                return
            }
            if detectors[station] == nil { order.append(station) }
            detectors[station] = detector
            collect(outputs, station: station, inputT: inputT)
        }

        mutating func collect(_ outputs: [DetectorOutput], station: String, inputT: Double? = nil) {
            for output in outputs {
                switch output {
                case .rep(let rep):
                    let m = rep.measurement
                    var evaluated = EvaluatedRep(
                        station: rep.station, setId: rep.setId, index: rep.index, tTop: m.concentricEndT,
                        meanVelocityMps: m.meanVelocityMps, peakVelocityMps: m.peakVelocityMps)
                    evaluated.tInput = inputT.map { max($0, rep.tEnd) }
                    result.reps.append(evaluated)
                case .rejected:
                    result.rejectedByStation[station, default: 0] += 1
                default:
                    break
                }
            }
        }

        mutating func finish() -> OfflineRun {
            for station in order {
                guard var detector = detectors[station] else { continue }
                let outputs = detector.closeIdleSet(at: detector.lastReadingT + 3_600)
                detectors[station] = detector
                collect(outputs, station: station)
            }
            result.stations = order.sorted()
            result.unreadable.sort { $0.number < $1.number }
            return result
        }
    }
}

// MARK: - Reference labels

/// One true rep of a labels file (proto/labels.md).
public struct ReferenceLabel: Sendable, Equatable {
    public var station: String
    /// Sensor time `t` at the top of the concentric phase, Unix s.
    public var tTop: Double
    public var meanVelocityMps: Double?
    public var peakVelocityMps: Double?
    /// 1-based line number in the labels file.
    public var line: Int

    /// Creates a label.
    public init(station: String, tTop: Double, meanVelocityMps: Double? = nil, peakVelocityMps: Double? = nil, line: Int = 0) {
        (self.station, self.tTop, self.meanVelocityMps, self.peakVelocityMps, self.line) = (station, tTop, meanVelocityMps, peakVelocityMps, line)
    }
}

/// A labels file that cannot be used; the message names the line and what to fix.
public struct LabelsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line number, when one line is at fault.
    public var line: Int?
    /// What is wrong and what to do.
    public var message: String
    public var description: String { message }
}

/// Parses reference labels (proto/labels.md).
public enum ReferenceLabels {
    /// The one accepted header.
    public static let header = "station,t_top,mean_velocity_mps,peak_velocity_mps"

    /// Reads and parses `path`.
    public static func load(path: String) throws(LabelsError) -> [ReferenceLabel] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LabelsError(line: nil, message: "cannot read labels \(path): check the path")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw LabelsError(line: nil, message: "\(path): labels must be UTF-8 text")
        }
        return try parse(text, source: path)
    }

    /// Parses CSV text: the exact header, then one row per rep with four
    /// fields; no quoting. Blank lines are skipped; LF or CRLF line ends.
    /// `source` names the file in error messages.
    public static func parse(_ text: String, source: String = "labels") throws(LabelsError) -> [ReferenceLabel] {
        // "\r\n" is one Character in Swift, a newline like "\n".
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        if lines.last?.isEmpty == true { lines.removeLast() }
        func fail(_ number: Int, _ what: String) -> LabelsError {
            LabelsError(line: number, message: "\(source) line \(number): \(what)")
        }
        guard let first = lines.first else {
            throw LabelsError(line: 1, message: "\(source) line 1: empty file; the first line must be the header `\(header)`")
        }
        let firstLine = first.hasPrefix("\u{FEFF}") ? first.dropFirst() : first
        guard firstLine == Substring(header) else {
            throw fail(1, "the header must be exactly `\(header)`, found `\(first)`")
        }
        var labels: [ReferenceLabel] = []
        for (index, line) in lines.enumerated().dropFirst() {
            let number = index + 1
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            let cells = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 4 else {
                throw fail(number, "expected 4 comma-separated fields (\(header)), found \(cells.count)")
            }
            let station = cells[0]
            guard !station.isEmpty, station.allSatisfy({ $0.isASCII && $0 > " " && $0 != "\"" && $0 != "\u{7F}" }) else {
                throw fail(number, "station `\(cells[0])` must be a station name (printable ASCII, no spaces or quotes)")
            }
            guard let tTop = Self.number(cells[1]) else {
                throw fail(number, "t_top `\(cells[1])` is not a number (sensor time in Unix seconds, e.g. 1763812345.25)")
            }
            func velocity(_ cell: String, _ name: String) throws(LabelsError) -> Double? {
                if cell.isEmpty { return nil }
                guard let value = Self.number(cell), value >= 0 else {
                    throw fail(number, "\(name) `\(cell)` is not a velocity (a number >= 0 in m/s, or empty)")
                }
                return value
            }
            labels.append(
                ReferenceLabel(
                    station: station, tTop: tTop, meanVelocityMps: try velocity(cells[2], "mean_velocity_mps"),
                    peakVelocityMps: try velocity(cells[3], "peak_velocity_mps"), line: number))
        }
        return labels
    }

    /// A finite decimal number (`12`, `-0.5`, `1.7e9`); not `inf`, `nan` or hex.
    static func number(_ text: String) -> Double? {
        guard !text.isEmpty, text.allSatisfy({ "0123456789+-.eE".contains($0) }), let value = Double(text), value.isFinite else { return nil }
        return value
    }
}

// MARK: - Matching

/// Matches detected reps to labels one-to-one by time.
public enum RepMatching {
    /// The default tolerance, seconds.
    public static let defaultToleranceS = 0.5

    /// Pairs (detected index, label index). A pair qualifies when the times
    /// differ by at most `toleranceS` (inclusive). Pairs are chosen greedily:
    /// the qualifying pair with the smallest time difference first, then the
    /// next smallest among reps and labels still free, and so on; ties go to
    /// the earlier rep, then the earlier label. Sorted by detected index.
    public static func match(detected: [Double], labels: [Double], toleranceS: Double) -> [(detected: Int, label: Int)] {
        let labelOrder = labels.indices.sorted { labels[$0] < labels[$1] }
        let sortedTimes = labelOrder.map { labels[$0] }
        var candidates: [(dt: Double, detected: Int, label: Int)] = []
        for (i, t) in detected.enumerated() {
            // The first label not earlier than t - tolerance, then forward while within the window.
            var low = 0, high = sortedTimes.count
            while low < high {
                let mid = (low + high) / 2
                if t - sortedTimes[mid] > toleranceS { low = mid + 1 } else { high = mid }
            }
            var k = low
            while k < sortedTimes.count, sortedTimes[k] - t <= toleranceS {
                let dt = abs(t - sortedTimes[k])
                if dt <= toleranceS { candidates.append((dt, i, labelOrder[k])) }
                k += 1
            }
        }
        candidates.sort { ($0.dt, $0.detected, $0.label) < ($1.dt, $1.detected, $1.label) }
        var detectedUsed = Set<Int>(), labelUsed = Set<Int>()
        var pairs: [(detected: Int, label: Int)] = []
        for candidate in candidates where !detectedUsed.contains(candidate.detected) && !labelUsed.contains(candidate.label) {
            detectedUsed.insert(candidate.detected)
            labelUsed.insert(candidate.label)
            pairs.append((candidate.detected, candidate.label))
        }
        return pairs.sorted { $0.detected < $1.detected }
    }
}

// MARK: - Statistics

/// How well detection found the true reps.
public struct DetectionCounts: Sendable, Equatable {
    public var truePositives: Int
    public var falsePositives: Int
    public var falseNegatives: Int

    /// Creates counts.
    public init(truePositives: Int, falsePositives: Int, falseNegatives: Int) {
        (self.truePositives, self.falsePositives, self.falseNegatives) = (truePositives, falsePositives, falseNegatives)
    }

    /// TP / (TP + FP); nil without detections.
    public var precision: Double? {
        truePositives + falsePositives == 0 ? nil : Double(truePositives) / Double(truePositives + falsePositives)
    }
    /// TP / (TP + FN); nil without labels.
    public var recall: Double? {
        truePositives + falseNegatives == 0 ? nil : Double(truePositives) / Double(truePositives + falseNegatives)
    }
    /// 2 TP / (2 TP + FP + FN), the harmonic mean of precision and recall; nil with neither detections nor labels.
    public var f1: Double? {
        let denominator = 2 * truePositives + falsePositives + falseNegatives
        return denominator == 0 ? nil : Double(2 * truePositives) / Double(denominator)
    }

    /// The sum of two counts (the overall figures pool every station's reps).
    public static func + (a: DetectionCounts, b: DetectionCounts) -> DetectionCounts {
        DetectionCounts(
            truePositives: a.truePositives + b.truePositives, falsePositives: a.falsePositives + b.falsePositives,
            falseNegatives: a.falseNegatives + b.falseNegatives)
    }
}

/// Agreement of detected with reference values (Bland JM, Altman DG. Statistical
/// methods for assessing agreement between two methods of clinical measurement.
/// The Lancet 1986;327(8476):307-310). Differences are detected - reference.
public struct Agreement: Sendable, Equatable {
    /// Pairs compared.
    public var n: Int
    /// Mean difference; nil when n = 0.
    public var biasMps: Double?
    /// Mean absolute difference; nil when n = 0.
    public var meanAbsoluteErrorMps: Double?
    /// Sample standard deviation of the differences (n - 1); nil when n < 2.
    public var sdMps: Double?

    /// bias - 1.96 SD, the lower 95 % limit of agreement; nil when n < 2.
    public var lowerLimitMps: Double? { biasMps.flatMap { bias in sdMps.map { bias - 1.96 * $0 } } }
    /// bias + 1.96 SD, the upper 95 % limit of agreement; nil when n < 2.
    public var upperLimitMps: Double? { biasMps.flatMap { bias in sdMps.map { bias + 1.96 * $0 } } }

    /// The agreement of the differences `detected - reference`.
    public init(differences: [Double]) {
        n = differences.count
        guard n > 0 else { return }
        let bias = differences.reduce(0, +) / Double(n)
        biasMps = bias
        meanAbsoluteErrorMps = differences.reduce(0) { $0 + abs($1) } / Double(n)
        if n > 1 {
            sdMps = (differences.reduce(0) { $0 + ($1 - bias) * ($1 - bias) } / Double(n - 1)).squareRoot()
        }
    }
}

// MARK: - Evaluation

/// One detected rep and the label it matched, if any.
public struct RepVerdict: Sendable, Equatable {
    public var rep: EvaluatedRep
    /// The matched label; nil for a false positive (or without labels).
    public var label: ReferenceLabel?
}

/// The figures of one station, or of all stations together.
public struct EvaluationSummary: Sendable, Equatable {
    /// The station; nil for the overall row.
    public var station: String?
    public var detectedReps: Int
    public var rejectedAttempts: Int
    /// Mean of the detected reps' mean velocities; nil without reps.
    public var averageMeanVelocityMps: Double?
    /// Mean of the detected reps' peak velocities; nil without reps.
    public var averagePeakVelocityMps: Double?
    /// Labels of the station; nil without a labels file.
    public var labels: Int?
    /// Nil without a labels file.
    public var counts: DetectionCounts?
    /// Over matched pairs whose label has a mean velocity; nil without a labels file.
    public var meanVelocity: Agreement?
    /// Over matched pairs whose label has a peak velocity; nil without a labels file.
    public var peakVelocity: Agreement?
}

/// A whole evaluation: per station, overall, every rep's verdict.
public struct Evaluation: Sendable {
    /// Whether labels were given.
    public var labelled: Bool
    public var toleranceS: Double
    /// One per station that had readings, commands or labels, sorted by name.
    public var stations: [EvaluationSummary]
    /// Every station pooled: counts summed, agreement over all pairs together.
    public var overall: EvaluationSummary
    /// Every detected rep, by station then time.
    public var reps: [RepVerdict]
    /// Labels no rep matched (false negatives), by station then time.
    public var unmatchedLabels: [ReferenceLabel]
    /// The run the evaluation is of.
    public var run: OfflineRun

    /// Compares `run`'s reps with `labels` (nil: no labels, detection figures only).
    public init(run: OfflineRun, labels: [ReferenceLabel]?, toleranceS: Double = RepMatching.defaultToleranceS) {
        self.run = run
        self.labelled = labels != nil
        self.toleranceS = toleranceS
        let allLabels = labels ?? []
        let names = Set(run.stations).union(allLabels.map(\.station)).union(run.reps.map(\.station)).sorted()
        var summaries: [EvaluationSummary] = []
        var verdicts: [RepVerdict] = []
        var unmatched: [ReferenceLabel] = []
        var allMean: [Double] = [], allPeak: [Double] = []
        for station in names {
            let reps = run.reps.filter { $0.station == station }.sorted { $0.tTop < $1.tTop }
            let stationLabels = allLabels.filter { $0.station == station }.sorted { ($0.tTop, $0.line) < ($1.tTop, $1.line) }
            var summary = Self.detectionSummary(station: station, reps: reps, rejected: run.rejectedByStation[station] ?? 0)
            var matchedLabel: [Int: Int] = [:]
            if labels != nil {
                for pair in RepMatching.match(detected: reps.map(\.tTop), labels: stationLabels.map(\.tTop), toleranceS: toleranceS) {
                    matchedLabel[pair.detected] = pair.label
                }
                let used = Set(matchedLabel.values)
                unmatched += stationLabels.indices.filter { !used.contains($0) }.map { stationLabels[$0] }
                var meanDiffs: [Double] = [], peakDiffs: [Double] = []
                for (i, l) in matchedLabel.sorted(by: { $0.key < $1.key }) {
                    if let reference = stationLabels[l].meanVelocityMps { meanDiffs.append(reps[i].meanVelocityMps - reference) }
                    if let reference = stationLabels[l].peakVelocityMps { peakDiffs.append(reps[i].peakVelocityMps - reference) }
                }
                allMean += meanDiffs
                allPeak += peakDiffs
                summary.labels = stationLabels.count
                summary.counts = DetectionCounts(
                    truePositives: matchedLabel.count, falsePositives: reps.count - matchedLabel.count,
                    falseNegatives: stationLabels.count - matchedLabel.count)
                summary.meanVelocity = Agreement(differences: meanDiffs)
                summary.peakVelocity = Agreement(differences: peakDiffs)
            }
            for (i, rep) in reps.enumerated() {
                verdicts.append(RepVerdict(rep: rep, label: matchedLabel[i].map { stationLabels[$0] }))
            }
            summaries.append(summary)
        }
        var overall = Self.detectionSummary(station: nil, reps: run.reps, rejected: run.rejectedByStation.values.reduce(0, +))
        if labels != nil {
            overall.labels = allLabels.count
            overall.counts = summaries.compactMap(\.counts).reduce(DetectionCounts(truePositives: 0, falsePositives: 0, falseNegatives: 0), +)
            overall.meanVelocity = Agreement(differences: allMean)
            overall.peakVelocity = Agreement(differences: allPeak)
        }
        stations = summaries
        self.overall = overall
        reps = verdicts
        unmatchedLabels = unmatched
    }

    static func detectionSummary(station: String?, reps: [EvaluatedRep], rejected: Int) -> EvaluationSummary {
        let n = Double(reps.count)
        return EvaluationSummary(
            station: station, detectedReps: reps.count, rejectedAttempts: rejected,
            averageMeanVelocityMps: reps.isEmpty ? nil : reps.reduce(0) { $0 + $1.meanVelocityMps } / n,
            averagePeakVelocityMps: reps.isEmpty ? nil : reps.reduce(0) { $0 + $1.peakVelocityMps } / n)
    }

    /// The (mean of the two, detected - reference) points of mean velocity, for a Bland-Altman plot.
    public var meanVelocityPoints: [(mean: Double, difference: Double)] {
        reps.compactMap { verdict in
            guard let reference = verdict.label?.meanVelocityMps else { return nil }
            return ((verdict.rep.meanVelocityMps + reference) / 2, verdict.rep.meanVelocityMps - reference)
        }
    }
}
