import Foundation
import Histogram

/// Where each timed rep's latency went, stage by stage, from the times the messages carry: the
/// completing reading's own time (`t_input`), its sample message's publication (`ts`), the
/// detector taking that message from its input (the rep's `received_ts`), the rep's publication
/// (its `ts`) and this listener's receipt. One computer's clock throughout, so the stages add
/// up to the latency (`to_detector` + `detector` + `to_listener`); `bridge`, the wait between a
/// reading and its message, comes before what `latency_ms` times and is reported beside it.
struct LoadStages: Sendable {
    /// The stages in the order a rep's readings pass them.
    static let names = ["bridge", "to_detector", "detector", "to_listener"]
    /// The stages `latency_ms` is made of.
    static let timed = ["to_detector", "detector", "to_listener"]

    private var histograms = Dictionary(uniqueKeysWithValues: names.map { ($0, Self.histogram()) })
    /// Per timed rep: its latency and each timed stage's part, µs (for where the tail went).
    private var parts: [(total: UInt64, stages: [UInt64])] = []

    private static func histogram() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    }

    private static func micros(_ seconds: Double) -> UInt64 { UInt64(max(0, seconds * 1e6)) }

    /// Records one rep. Without `received` (a detector that does not stamp it) only `bridge` and
    /// `to_listener` are known, and the rep does not count towards the tail's attribution.
    mutating func record(readingT: Double, samplePublished: Double, received: Double?, repPublished: Double, arrived: Double) {
        _ = histograms["bridge"]!.record(Self.micros(samplePublished - readingT))
        let toListener = Self.micros(arrived - repPublished)
        _ = histograms["to_listener"]!.record(toListener)
        guard let received else { return }
        let toDetector = Self.micros(received - samplePublished), detector = Self.micros(repPublished - received)
        _ = histograms["to_detector"]!.record(toDetector)
        _ = histograms["detector"]!.record(detector)
        parts.append((toDetector + detector + toListener, [toDetector, detector, toListener]))
    }

    /// The report: each stage's p50/p99/max, and the stage that holds the tail.
    var report: LoadReport.Stages {
        var stages: [String: LoadReport.Latency] = [:]
        for (name, histogram) in histograms where histogram.totalCount > 0 {
            let p = { (q: Double) in Double(histogram.valueAtPercentile(q)) / 1000 }
            stages[name] = .init(p50: p(50), p99: p(99), max: Double(histogram.max) / 1000, count: Int(histogram.totalCount))
        }
        return LoadReport.Stages(stages: stages, tail: tail)
    }

    /// The reps at or over the 99th percentile of the latency, and the stage that took the largest
    /// part of their summed time, with that share: what to make faster for a lower p99.
    private var tail: LoadReport.Stages.Tail? {
        guard !parts.isEmpty else { return nil }
        let sorted = parts.sorted { $0.total < $1.total }
        let slowest = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.down)))...]
        var sums = [UInt64](repeating: 0, count: Self.timed.count)
        for rep in slowest { for index in sums.indices { sums[index] += rep.stages[index] } }
        let total = sums.reduce(0, +)
        guard total > 0, let top = sums.indices.max(by: { sums[$0] < sums[$1] }) else { return nil }
        return .init(stage: Self.timed[top], share: Double(sums[top]) / Double(total), reps: slowest.count)
    }
}

extension LoadReport {
    /// `stages`: each stage's latency and the stage that holds the tail (`LoadStages`).
    struct Stages: Encodable, Sendable {
        var stages: [String: Latency]
        var tail: Tail?

        struct Tail: Encodable, Sendable {
            /// The stage with the largest part of the slowest 1 % of reps' time, and that part.
            var stage: String
            var share: Double
            var reps: Int
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: DynamicKey.self)
            for (name, latency) in stages { try container.encode(latency, forKey: DynamicKey(name)) }
            if let tail { try container.encode(tail, forKey: DynamicKey("tail")) }
        }

        /// One line a stage, in the rep's path order, and where the tail went.
        var table: String {
            var text = "stage              p50 ms   p99 ms   max ms\n"
            for name in LoadStages.names {
                guard let s = stages[name] else { continue }
                text += name.padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: " %8.2f %8.2f %8.2f\n", s.p50, s.p99, s.max)
            }
            if let tail {
                text += "the slowest 1 % (\(tail.reps) reps) spent " + String(format: "%.0f", tail.share * 100) + " % of their time in \(tail.stage)\n"
            }
            return text
        }
    }

    private struct DynamicKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
