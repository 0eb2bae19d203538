import Foundation
import VBTWire

// `vbt eval`: the detector run offline over a recording and compared with
// reference labels (proto/labels.md, proto/eval.md).
// No I/O: `vbt` reads the recording and the labels file and hands their lines
// and text in. The detectors are the live ones fed through the same path
// (Feeding.swift), and matching and statistics are plain functions of numbers.

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
    /// The exercise the rep was measured under (the detector's rep carries it).
    public var exercise: String

    /// Creates a rep.
    public init(
        station: String, setId: String = "", index: Int = 1, tTop: Double, meanVelocityMps: Double, peakVelocityMps: Double,
        exercise: String = ExerciseProfile.defaultExercise
    ) {
        (self.station, self.setId, self.index, self.tTop) = (station, setId, index, tTop)
        (self.meanVelocityMps, self.peakVelocityMps, self.exercise) = (meanVelocityMps, peakVelocityMps, exercise)
    }
}

/// A rep attempt the detector rejected in a recording.
public struct EvaluatedRejection: Sendable, Equatable {
    public var station: String
    /// Top of the attempt's concentric phase (`concentricEndT`), sensor time in Unix s: the same
    /// instant a rep's `tTop` is, so an attempt lines up with a label.
    public var t: Double
    /// The detector's reason (`partial`, `rom-too-long`, `too-fast`, `too-slow`, `refractory`, ...).
    public var reason: String
    /// The same in words, with the numbers.
    public var detail: String
    /// The exercise assigned at the station when the attempt was judged.
    public var exercise: String

    /// Creates a rejection.
    public init(station: String, t: Double, reason: String, detail: String, exercise: String = ExerciseProfile.defaultExercise) {
        (self.station, self.t, self.reason, self.detail, self.exercise) = (station, t, reason, detail, exercise)
    }
}

/// From when (sensor time) an exercise was assigned at a station.
public struct ExerciseSpan: Sendable, Equatable {
    /// The station's last reading before the assignment, Unix s; the exercise holds for later readings.
    public var sinceT: Double
    public var exercise: String

    /// Creates a span.
    public init(sinceT: Double, exercise: String) { (self.sinceT, self.exercise) = (sinceT, exercise) }
}

/// What the detectors produced over a recording.
public struct OfflineRun: Sendable {
    /// Every rep in the order the detectors produced them.
    public var reps: [EvaluatedRep] = []
    /// Rejected rep attempts per station.
    public var rejectedByStation: [String: Int] = [:]
    /// Every rejected attempt in the order the detectors produced them.
    public var rejections: [EvaluatedRejection] = []
    /// Per station, each exercise assigned in turn, from when; before the first, a station has
    /// `ExerciseProfile.defaultExercise`, as the detector does.
    public var exerciseSpans: [String: [ExerciseSpan]] = [:]
    /// Every station that had a sample or a detector command, sorted.
    public var stations: [String] = []
    /// Recording lines read as messages (of any type).
    public var messages = 0
    /// Readings skipped because their time is implausibly far from their message's `ts` (as the live detector does).
    public var skippedReadings = 0
    /// Lines that are not usable messages, and why; they are skipped.
    public var unreadable: [UnreadableLine] = []

    /// The exercise assigned at `station` for a reading at `t`: the last assignment made before it.
    public func exercise(at t: Double, station: String) -> String {
        exerciseSpans[station]?.last { $0.sinceT < t }?.exercise ?? ExerciseProfile.defaultExercise
    }

    /// The exercise assigned at `station` when the recording ended.
    public func finalExercise(station: String) -> String {
        exerciseSpans[station]?.last?.exercise ?? ExerciseProfile.defaultExercise
    }
}

/// Runs the live detectors over a recording, without bus or processes.
public enum OfflineRunner {
    /// Feeds, in file order, every `sample` message to its station's detector
    /// and every `cmd` addressed to `*` or `rep-detector` through `apply`; other
    /// types are ignored. At the end each station's readings end (`finish`: a rise in
    /// progress is judged where it stands) and it is given an hour of silence
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

    /// The detectors and what they produced so far: `vbt eval` feeds it a recording line by line
    /// as it reads it.
    package struct State {
        let settings: DetectorSettings
        package var result = OfflineRun()
        var detectors: [String: StationDetector] = [:]
        /// Stations in the order they first appeared.
        var order: [String] = []

        package init(settings: DetectorSettings) { self.settings = settings }

        package mutating func consume(_ line: RecordedLine) {
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
                    let usable = abs(t - ts) <= StationDetector.maxReadingSkewS
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
            let exercise = detector.assignment.exercise
            if (result.exerciseSpans[station]?.last?.exercise ?? ExerciseProfile.defaultExercise) != exercise {
                result.exerciseSpans[station, default: []].append(ExerciseSpan(sinceT: detector.lastReadingT, exercise: exercise))
            }
            collect(outputs, station: station, exercise: exercise, inputT: inputT)
        }

        mutating func collect(_ outputs: [DetectorOutput], station: String, exercise: String, inputT: Double? = nil) {
            for output in outputs {
                switch output {
                case .rep(let rep):
                    let m = rep.measurement
                    var evaluated = EvaluatedRep(
                        station: rep.station, setId: rep.setId, index: rep.index, tTop: m.concentricEndT,
                        meanVelocityMps: m.meanVelocityMps, peakVelocityMps: m.peakVelocityMps, exercise: rep.exercise)
                    evaluated.tInput = inputT.map { max($0, rep.tEnd) }
                    result.reps.append(evaluated)
                case .rejected(let rejected):
                    result.rejectedByStation[station, default: 0] += 1
                    result.rejections.append(
                        EvaluatedRejection(
                            station: station, t: rejected.measurement.concentricEndT, reason: rejected.reason, detail: rejected.detail,
                            exercise: exercise))
                default:
                    break
                }
            }
        }

        package mutating func finish() -> OfflineRun {
            for station in order {
                guard var detector = detectors[station] else { continue }
                // The recording has ended: a rise in progress or held is judged where it stands.
                var outputs = detector.finish(at: detector.lastReadingT)
                outputs += detector.closeIdleSet(at: detector.lastReadingT + 3_600)
                detectors[station] = detector
                collect(outputs, station: station, exercise: detector.assignment.exercise)
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

/// One rep of an order-only labels file (proto/labels.md): a reference device's per-rep export
/// without times, placed by its set and its number in the set.
public struct OrderLabel: Sendable, Equatable {
    public var station: String
    /// The set's number at the station, from 1; the labels' n-th number is the detector's n-th set.
    public var set: Int
    /// The rep's number in its set, from 1; rep k is the detector's k-th rep of the set.
    public var rep: Int
    public var meanVelocityMps: Double?
    public var peakVelocityMps: Double?
    /// 1-based line number in the labels file.
    public var line: Int

    /// Creates a label.
    public init(station: String, set: Int, rep: Int, meanVelocityMps: Double? = nil, peakVelocityMps: Double? = nil, line: Int = 0) {
        (self.station, self.set, self.rep, self.line) = (station, set, rep, line)
        (self.meanVelocityMps, self.peakVelocityMps) = (meanVelocityMps, peakVelocityMps)
    }
}

/// How labels are matched to reps: by time, or in order within each set.
public enum LabelKind: String, Sendable, Equatable {
    /// `station,t_top,...`: matched by the time of the rep's top.
    case time
    /// `station,set,rep,...`: matched in order within each set.
    case order
}

/// The contents of a labels file of either kind.
public enum LabelsFile: Sendable, Equatable {
    case time([ReferenceLabel])
    case order([OrderLabel])

    /// Which kind of labels the file holds.
    public var kind: LabelKind {
        switch self {
        case .time: .time
        case .order: .order
        }
    }
}

/// A labels file that cannot be used; the message names the line and what to fix.
public struct LabelsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line number, when one line is at fault.
    public var line: Int?
    /// What is wrong and what to do.
    public var message: String
    public var description: String { message }

    /// Creates an error (`vbt eval` makes one for a labels file it cannot read).
    package init(line: Int?, message: String) { (self.line, self.message) = (line, message) }
}

/// Parses reference labels (proto/labels.md).
public enum ReferenceLabels {
    /// The header of time labels.
    public static let header = "station,t_top,mean_velocity_mps,peak_velocity_mps"
    /// The header of order-only labels.
    public static let orderHeader = "station,set,rep,mean_velocity_mps,peak_velocity_mps"

    /// Parses either kind of labels, told apart by the header.
    public static func parseFile(_ text: String, source: String = "labels") throws(LabelsError) -> LabelsFile {
        let lines = Self.lines(text)
        let both = "`\(header)` (time labels) or `\(orderHeader)` (order-only labels)"
        guard let first = lines.first else {
            throw LabelsError(line: 1, message: "\(source) line 1: empty file; the first line must be the header \(both)")
        }
        switch withoutBOM(first) {
        case Substring(header): return .time(try parse(text, source: source))
        case Substring(orderHeader): return .order(try parseOrder(text, source: source))
        default: throw LabelsError(line: 1, message: "\(source) line 1: the header must be exactly \(both), found `\(first)`")
        }
    }

    /// Parses CSV text: the exact header, then one row per rep with four
    /// fields; no quoting. Blank lines are skipped; LF or CRLF line ends.
    /// `source` names the file in error messages.
    public static func parse(_ text: String, source: String = "labels") throws(LabelsError) -> [ReferenceLabel] {
        var labels: [ReferenceLabel] = []
        for (number, cells) in try rows(text, header: header, source: source) {
            let fail = Failure(source: source, number: number)
            let station = try Self.station(cells[0], fail)
            guard let tTop = Self.number(cells[1]) else {
                throw fail("t_top `\(cells[1])` is not a number (sensor time in Unix seconds, e.g. 1763812345.25)")
            }
            labels.append(
                ReferenceLabel(
                    station: station, tTop: tTop, meanVelocityMps: try velocity(cells[2], "mean_velocity_mps", fail),
                    peakVelocityMps: try velocity(cells[3], "peak_velocity_mps", fail), line: number))
        }
        return labels
    }

    /// Parses order-only labels: the exact header `orderHeader`, then one row
    /// per rep with five fields; set and rep are whole numbers from 1, and each
    /// (station, set, rep) appears once. Otherwise as `parse`.
    public static func parseOrder(_ text: String, source: String = "labels") throws(LabelsError) -> [OrderLabel] {
        var labels: [OrderLabel] = []
        var seen: [String: Int] = [:]
        for (number, cells) in try rows(text, header: orderHeader, source: source) {
            let fail = Failure(source: source, number: number)
            let station = try Self.station(cells[0], fail)
            func position(_ cell: String, _ name: String, _ what: String) throws(LabelsError) -> Int {
                guard !cell.isEmpty, cell.allSatisfy(\.isASCII), cell.allSatisfy(\.isNumber), let value = Int(cell), value >= 1 else {
                    throw fail("\(name) `\(cell)` is not a positive integer (\(what), 1, 2, 3...)")
                }
                return value
            }
            let set = try position(cells[1], "set", "the set's number at the station")
            let rep = try position(cells[2], "rep", "the rep's number in its set")
            let key = "\(station)\u{0}\(set)\u{0}\(rep)"
            if let earlier = seen[key] {
                throw fail("\(station) set \(set) rep \(rep) is also on line \(earlier); each rep must appear once")
            }
            seen[key] = number
            labels.append(
                OrderLabel(
                    station: station, set: set, rep: rep, meanVelocityMps: try velocity(cells[3], "mean_velocity_mps", fail),
                    peakVelocityMps: try velocity(cells[4], "peak_velocity_mps", fail), line: number))
        }
        return labels
    }

    /// Makes the one-line error of a line of a labels file.
    struct Failure {
        let source: String
        let number: Int
        func callAsFunction(_ what: String) -> LabelsError {
            LabelsError(line: number, message: "\(source) line \(number): \(what)")
        }
    }

    /// The text's lines ("\r\n" is one Character in Swift, a newline like "\n"), without a last empty one.
    static func lines(_ text: String) -> [Substring] {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    static func withoutBOM(_ line: Substring) -> Substring {
        line.hasPrefix("\u{FEFF}") ? line.dropFirst() : line
    }

    /// The rows after the exact `header`, as trimmed cells with their line numbers; blank lines
    /// skipped, every row with as many fields as the header.
    static func rows(_ text: String, header: String, source: String) throws(LabelsError) -> [(number: Int, cells: [String])] {
        let lines = Self.lines(text)
        guard let first = lines.first else {
            throw LabelsError(line: 1, message: "\(source) line 1: empty file; the first line must be the header `\(header)`")
        }
        guard withoutBOM(first) == Substring(header) else {
            throw Failure(source: source, number: 1)("the header must be exactly `\(header)`, found `\(first)`")
        }
        let fields = header.split(separator: ",").count
        var rows: [(number: Int, cells: [String])] = []
        for (index, line) in lines.enumerated().dropFirst() {
            let number = index + 1
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            let cells = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == fields else {
                throw Failure(source: source, number: number)("expected \(fields) comma-separated fields (\(header)), found \(cells.count)")
            }
            rows.append((number, cells))
        }
        return rows
    }

    static func station(_ cell: String, _ fail: Failure) throws(LabelsError) -> String {
        guard !cell.isEmpty, cell.allSatisfy({ $0.isASCII && $0 > " " && $0 != "\"" && $0 != "\u{7F}" }) else {
            throw fail("station `\(cell)` must be a station name (printable ASCII, no spaces or quotes)")
        }
        return cell
    }

    static func velocity(_ cell: String, _ name: String, _ fail: Failure) throws(LabelsError) -> Double? {
        if cell.isEmpty { return nil }
        guard let value = Self.number(cell), value >= 0 else {
            throw fail("\(name) `\(cell)` is not a velocity (a number >= 0 in m/s, or empty)")
        }
        return value
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

/// Matches detected reps to order-only labels, in order within each set.
public enum OrderMatching {
    /// Pairs (label index, detector's set, rep in that set), both 0-based, sorted by label index.
    /// `detectedSets[i]` is how many reps the detector counted in its i-th set at the station;
    /// `labels` are the station's (set, rep) numbers. The labels' n-th set number, in increasing
    /// order, is the detector's n-th set; label rep k is the detector's k-th rep of that set (by
    /// its number, so a rep missing from the labels leaves the detector's rep unmatched). Labels in
    /// a set the detector did not count, or past its last rep, are unmatched (false negatives);
    /// detected reps no label names are unmatched (false positives).
    public static func match(detectedSets: [Int], labels: [(set: Int, rep: Int)]) -> [(label: Int, set: Int, rep: Int)] {
        let setOrder = setNumbers(labels.map(\.set))
        var pairs: [(label: Int, set: Int, rep: Int)] = []
        for (index, label) in labels.enumerated() {
            guard let set = setOrder[label.set], set < detectedSets.count, label.rep <= detectedSets[set] else { continue }
            pairs.append((index, set, label.rep - 1))
        }
        return pairs
    }

    /// Each set number's position (0-based) among the distinct numbers in increasing order.
    public static func setNumbers(_ numbers: [Int]) -> [Int: Int] {
        Dictionary(uniqueKeysWithValues: Set(numbers).sorted().enumerated().map { ($1, $0) })
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
    /// Standard error of measurement, SD / sqrt(2): the two instruments' random error shared
    /// equally between them (proto/eval.md); nil when n < 2.
    public var semMps: Double? { sdMps.map { $0 / 2.0.squareRoot() } }
    /// Smallest detectable change, 1.96 x sqrt(2) x SEM = 1.96 SD: the smallest change between two
    /// measurements that is beyond their error with 95 % confidence (proto/eval.md); nil when n < 2.
    public var smallestDetectableChangeMps: Double? { sdMps.map { 1.96 * $0 } }

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

/// A reference rep of either kind of labels.
public enum Reference: Sendable, Equatable {
    case time(ReferenceLabel)
    case order(OrderLabel)

    public var station: String {
        switch self {
        case .time(let label): label.station
        case .order(let label): label.station
        }
    }
    /// 1-based line number in the labels file.
    public var line: Int {
        switch self {
        case .time(let label): label.line
        case .order(let label): label.line
        }
    }
    public var meanVelocityMps: Double? {
        switch self {
        case .time(let label): label.meanVelocityMps
        case .order(let label): label.meanVelocityMps
        }
    }
    public var peakVelocityMps: Double? {
        switch self {
        case .time(let label): label.peakVelocityMps
        case .order(let label): label.peakVelocityMps
        }
    }
}

/// One detected rep and the label it matched, if any.
public struct RepVerdict: Sendable, Equatable {
    public var rep: EvaluatedRep
    /// The matched reference; nil for a false positive (or without labels).
    public var reference: Reference?
    /// The matched time label; nil for a false positive, without labels or with order-only labels.
    public var label: ReferenceLabel? {
        if case .time(let label) = reference { return label }
        return nil
    }
}

/// A label no rep matched (a false negative), and the exercise it counts under.
public struct UnmatchedReference: Sendable, Equatable {
    public var reference: Reference
    /// Time labels: the exercise assigned at the station at the label's `t_top`. Order-only
    /// labels: the exercise of the detector's set it fell in; in a set the detector did not
    /// count, the exercise assigned at the station when the recording ended.
    public var exercise: String
}

/// With order-only labels: the detector's n-th set at a station beside the labels' n-th.
public struct SetAlignment: Sendable, Equatable {
    public var station: String
    /// The labels' set number; nil when the labels have fewer sets.
    public var labelSet: Int?
    /// The detector's set; nil when it counted fewer sets.
    public var setId: String?
    /// The detector's set's exercise; for a set only the labels have, the station's at the end.
    public var exercise: String
    public var detectedReps: Int
    public var labels: Int
}

/// The figures of one station, of one exercise, or of all stations together.
public struct EvaluationSummary: Sendable, Equatable {
    /// The station; nil for an exercise's row and the overall row.
    public var station: String?
    /// The exercise; nil for a station's row and the overall row.
    public var exercise: String? = nil
    public var detectedReps: Int
    public var rejectedAttempts: Int
    /// Mean of the detected reps' mean velocities; nil without reps.
    public var averageMeanVelocityMps: Double?
    /// Mean of the detected reps' peak velocities; nil without reps.
    public var averagePeakVelocityMps: Double?
    /// Labels of the station (or exercise); nil without a labels file.
    public var labels: Int? = nil
    /// Nil without a labels file.
    public var counts: DetectionCounts? = nil
    /// Over matched pairs whose label has a mean velocity; nil without a labels file.
    public var meanVelocity: Agreement? = nil
    /// Over matched pairs whose label has a peak velocity; nil without a labels file.
    public var peakVelocity: Agreement? = nil
}

/// A whole evaluation: per station, per exercise, overall, every rep's verdict.
public struct Evaluation: Sendable {
    /// Whether labels were given.
    public var labelled: Bool
    /// How the labels were matched; nil without labels.
    public var kind: LabelKind?
    public var toleranceS: Double
    /// One per station that had readings, commands or labels, sorted by name.
    public var stations: [EvaluationSummary]
    /// One per exercise with reps, rejected attempts or false negatives, sorted by name.
    public var exercises: [EvaluationSummary]
    /// Every station pooled: counts summed, agreement over all pairs together.
    public var overall: EvaluationSummary
    /// Every detected rep, by station then time.
    public var reps: [RepVerdict]
    /// Labels no rep matched (false negatives), by station then time (order-only: then set and rep).
    public var unmatched: [UnmatchedReference]
    /// With order-only labels, every set of either side, by station then position; empty otherwise.
    public var sets: [SetAlignment]
    /// Every attempt the detector rejected, by station then time.
    public var rejections: [EvaluatedRejection]
    /// The run the evaluation is of.
    public var run: OfflineRun

    /// Time labels no rep matched (false negatives), by station then time.
    public var unmatchedLabels: [ReferenceLabel] {
        unmatched.compactMap { if case .time(let label) = $0.reference { label } else { nil } }
    }

    /// Compares `run`'s reps with time `labels` (nil: no labels, detection figures only).
    public init(run: OfflineRun, labels: [ReferenceLabel]?, toleranceS: Double = RepMatching.defaultToleranceS) {
        self.init(run: run, file: labels.map(LabelsFile.time), toleranceS: toleranceS)
    }

    /// Compares `run`'s reps with the labels of `file` (nil: no labels, detection figures only);
    /// `toleranceS` matters for time labels only.
    public init(run: OfflineRun, file: LabelsFile?, toleranceS: Double = RepMatching.defaultToleranceS) {
        self.run = run
        self.labelled = file != nil
        self.kind = file?.kind
        self.toleranceS = toleranceS
        let references: [Reference]
        switch file {
        case .time(let labels): references = labels.map(Reference.time)
        case .order(let labels): references = labels.map(Reference.order)
        case nil: references = []
        }
        let names = Set(run.stations).union(references.map(\.station)).union(run.reps.map(\.station)).sorted()
        var verdicts: [RepVerdict] = [], unmatched: [UnmatchedReference] = [], alignments: [SetAlignment] = []
        for station in names {
            let reps = run.reps.filter { $0.station == station }.sorted { $0.tTop < $1.tTop }
            var matched: [Int: Reference] = [:]  // rep index -> its label
            var missed: [UnmatchedReference] = []
            switch file {
            case .time(let all):
                let labels = all.filter { $0.station == station }.sorted { ($0.tTop, $0.line) < ($1.tTop, $1.line) }
                var used = Set<Int>()
                for pair in RepMatching.match(detected: reps.map(\.tTop), labels: labels.map(\.tTop), toleranceS: toleranceS) {
                    matched[pair.detected] = .time(labels[pair.label])
                    used.insert(pair.label)
                }
                missed = labels.indices.filter { !used.contains($0) }.map {
                    UnmatchedReference(reference: .time(labels[$0]), exercise: run.exercise(at: labels[$0].tTop, station: station))
                }
            case .order(let all):
                let labels = all.filter { $0.station == station }.sorted { ($0.set, $0.rep) < ($1.set, $1.rep) }
                // The detector's sets in the order of their first rep, each with its reps in time order.
                var setIds: [String] = [], members: [String: [Int]] = [:]
                for (index, rep) in reps.enumerated() {
                    if members[rep.setId] == nil { setIds.append(rep.setId) }
                    members[rep.setId, default: []].append(index)
                }
                let sizes = setIds.map { members[$0]?.count ?? 0 }
                let pairs = OrderMatching.match(detectedSets: sizes, labels: labels.map { ($0.set, $0.rep) })
                for pair in pairs { matched[members[setIds[pair.set]]![pair.rep]] = .order(labels[pair.label]) }
                let used = Set(pairs.map(\.label))
                let positions = OrderMatching.setNumbers(labels.map(\.set))
                func exercise(ofSet position: Int) -> String {
                    guard position < setIds.count, let first = members[setIds[position]]?.first else { return run.finalExercise(station: station) }
                    return reps[first].exercise
                }
                missed = labels.indices.filter { !used.contains($0) }.map {
                    UnmatchedReference(reference: .order(labels[$0]), exercise: exercise(ofSet: positions[labels[$0].set] ?? setIds.count))
                }
                let labelSets = positions.sorted { $0.value < $1.value }.map(\.key)
                for position in 0..<max(setIds.count, labelSets.count) {
                    let labelSet = position < labelSets.count ? labelSets[position] : nil
                    alignments.append(
                        SetAlignment(
                            station: station, labelSet: labelSet, setId: position < setIds.count ? setIds[position] : nil,
                            exercise: exercise(ofSet: position), detectedReps: position < sizes.count ? sizes[position] : 0,
                            labels: labelSet.map { set in labels.count { $0.set == set } } ?? 0))
                }
            case nil:
                break
            }
            for (index, rep) in reps.enumerated() { verdicts.append(RepVerdict(rep: rep, reference: matched[index])) }
            unmatched += missed
        }
        reps = verdicts
        self.unmatched = unmatched
        sets = alignments
        rejections = run.rejections.enumerated().sorted { ($0.element.station, $0.element.t, $0.offset) < ($1.element.station, $1.element.t, $1.offset) }
            .map(\.element)
        let labelled = labelled
        stations = names.map { station in
            Self.summary(
                station: station, verdicts: verdicts.filter { $0.rep.station == station },
                unmatched: unmatched.count { $0.reference.station == station }, rejected: run.rejectedByStation[station] ?? 0,
                labelled: labelled)
        }
        let exerciseNames = Set(verdicts.map(\.rep.exercise)).union(unmatched.map(\.exercise)).union(run.rejections.map(\.exercise)).sorted()
        exercises = exerciseNames.map { exercise in
            var summary = Self.summary(
                station: nil, verdicts: verdicts.filter { $0.rep.exercise == exercise }, unmatched: unmatched.count { $0.exercise == exercise },
                rejected: run.rejections.count { $0.exercise == exercise }, labelled: labelled)
            summary.exercise = exercise
            return summary
        }
        var overall = Self.summary(
            station: nil, verdicts: verdicts, unmatched: unmatched.count, rejected: run.rejectedByStation.values.reduce(0, +), labelled: labelled)
        // The averages over every rep in the order the detectors produced them.
        let n = Double(run.reps.count)
        overall.averageMeanVelocityMps = run.reps.isEmpty ? nil : run.reps.reduce(0) { $0 + $1.meanVelocityMps } / n
        overall.averagePeakVelocityMps = run.reps.isEmpty ? nil : run.reps.reduce(0) { $0 + $1.peakVelocityMps } / n
        self.overall = overall
    }

    /// The figures of `verdicts` (in station then time order) and `unmatched` false negatives.
    static func summary(station: String?, verdicts: [RepVerdict], unmatched: Int, rejected: Int, labelled: Bool) -> EvaluationSummary {
        let n = Double(verdicts.count)
        var summary = EvaluationSummary(
            station: station, detectedReps: verdicts.count, rejectedAttempts: rejected,
            averageMeanVelocityMps: verdicts.isEmpty ? nil : verdicts.reduce(0) { $0 + $1.rep.meanVelocityMps } / n,
            averagePeakVelocityMps: verdicts.isEmpty ? nil : verdicts.reduce(0) { $0 + $1.rep.peakVelocityMps } / n)
        guard labelled else { return summary }
        let truePositives = verdicts.count { $0.reference != nil }
        summary.labels = truePositives + unmatched
        summary.counts = DetectionCounts(truePositives: truePositives, falsePositives: verdicts.count - truePositives, falseNegatives: unmatched)
        summary.meanVelocity = Agreement(
            differences: verdicts.compactMap { v in v.reference?.meanVelocityMps.map { v.rep.meanVelocityMps - $0 } })
        summary.peakVelocity = Agreement(
            differences: verdicts.compactMap { v in v.reference?.peakVelocityMps.map { v.rep.peakVelocityMps - $0 } })
        return summary
    }

    /// The (mean of the two, detected - reference) points of mean velocity, for a Bland-Altman plot.
    public var meanVelocityPoints: [(mean: Double, difference: Double)] {
        reps.compactMap { verdict in
            guard let reference = verdict.reference?.meanVelocityMps else { return nil }
            return ((verdict.rep.meanVelocityMps + reference) / 2, verdict.rep.meanVelocityMps - reference)
        }
    }
}
