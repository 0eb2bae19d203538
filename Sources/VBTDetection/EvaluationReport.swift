import Foundation
import VBTWire

// What `vbt eval` prints: a table for people, one JSON object for programs
// (proto/eval.md), and a Bland-Altman plot of mean velocity as a standalone
// SVG (no script, font or image from outside the file).

extension Evaluation {
    // MARK: JSON

    /// The evaluation as one JSON object (proto/eval.md); `recording` names the input.
    public func json(recording: String) -> String {
        var w = JSONWriter(capacity: 4096)
        w.beginObject()
        w.key("recording"); w.string(recording)
        w.key("labelled"); w.bool(labelled)
        w.key("matching"); if let kind { w.string(kind.rawValue) } else { w.null() }
        w.key("tolerance_s"); if kind == .order { w.null() } else { w.number(toleranceS) }
        w.key("messages"); w.int(run.messages)
        w.key("skipped_readings"); w.int(run.skippedReadings)
        w.key("unreadable_lines")
        w.beginArray()
        for line in run.unreadable {
            w.beginObject()
            w.key("line"); w.int(line.number)
            w.key("reason"); w.string(line.reason)
            w.endObject()
        }
        w.endArray()
        w.key("stations")
        w.beginArray()
        for summary in stations { Self.write(summary, to: &w) }
        w.endArray()
        w.key("exercises")
        w.beginArray()
        for summary in exercises { Self.write(summary, to: &w) }
        w.endArray()
        w.key("overall"); Self.write(overall, to: &w)
        w.key("reps")
        w.beginArray()
        for verdict in reps {
            let rep = verdict.rep
            w.beginObject()
            w.key("station"); w.string(rep.station)
            w.key("set_id"); w.string(rep.setId)
            w.key("index"); w.int(rep.index)
            w.key("exercise"); w.string(rep.exercise)
            w.key("t_top"); w.number(rep.tTop)
            w.key("mean_velocity_mps"); w.number(rep.meanVelocityMps)
            w.key("peak_velocity_mps"); w.number(rep.peakVelocityMps)
            w.key("matched"); if labelled { w.bool(verdict.reference != nil) } else { w.null() }
            w.key("label")
            switch verdict.reference {
            case .time(let label): Self.write(label, to: &w, dt: rep.tTop - label.tTop)
            case .order(let label): Self.write(label, to: &w)
            case nil: w.null()
            }
            w.endObject()
        }
        w.endArray()
        w.key("unmatched_labels")
        w.beginArray()
        for miss in unmatched {
            switch miss.reference {
            case .time(let label): Self.write(label, to: &w, dt: nil, exercise: miss.exercise)
            case .order(let label): Self.write(label, to: &w, exercise: miss.exercise)
            }
        }
        w.endArray()
        w.key("rejected")
        w.beginArray()
        for rejection in rejections {
            w.beginObject()
            w.key("station"); w.string(rejection.station)
            w.key("t"); w.number(rejection.t)
            w.key("reason"); w.string(rejection.reason)
            w.key("detail"); w.string(rejection.detail)
            w.endObject()
        }
        w.endArray()
        w.key("sets")
        if kind == .order {
            w.beginArray()
            for set in sets {
                w.beginObject()
                w.key("station"); w.string(set.station)
                w.key("set"); if let number = set.labelSet { w.int(number) } else { w.null() }
                w.key("set_id"); if let id = set.setId { w.string(id) } else { w.null() }
                w.key("exercise"); w.string(set.exercise)
                w.key("detected_reps"); w.int(set.detectedReps)
                w.key("labels"); w.int(set.labels)
                w.endObject()
            }
            w.endArray()
        } else {
            w.null()
        }
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    private static func optional(_ value: Double?, _ w: inout JSONWriter) {
        if let value { w.number(value) } else { w.null() }
    }

    private static func write(_ label: ReferenceLabel, to w: inout JSONWriter, dt: Double?, exercise: String? = nil) {
        w.beginObject()
        w.key("line"); w.int(label.line)
        w.key("station"); w.string(label.station)
        w.key("t_top"); w.number(label.tTop)
        w.key("mean_velocity_mps"); optional(label.meanVelocityMps, &w)
        w.key("peak_velocity_mps"); optional(label.peakVelocityMps, &w)
        if let dt { w.key("dt_s"); w.number(dt) }
        if let exercise { w.key("exercise"); w.string(exercise) }
        w.endObject()
    }

    private static func write(_ label: OrderLabel, to w: inout JSONWriter, exercise: String? = nil) {
        w.beginObject()
        w.key("line"); w.int(label.line)
        w.key("station"); w.string(label.station)
        w.key("set"); w.int(label.set)
        w.key("rep"); w.int(label.rep)
        w.key("mean_velocity_mps"); optional(label.meanVelocityMps, &w)
        w.key("peak_velocity_mps"); optional(label.peakVelocityMps, &w)
        if let exercise { w.key("exercise"); w.string(exercise) }
        w.endObject()
    }

    private static func write(_ s: EvaluationSummary, to w: inout JSONWriter) {
        w.beginObject()
        if let station = s.station { w.key("station"); w.string(station) }
        if let exercise = s.exercise { w.key("exercise"); w.string(exercise) }
        w.key("detected_reps"); w.int(s.detectedReps)
        w.key("rejected_attempts"); w.int(s.rejectedAttempts)
        w.key("average_mean_velocity_mps"); optional(s.averageMeanVelocityMps, &w)
        w.key("average_peak_velocity_mps"); optional(s.averagePeakVelocityMps, &w)
        w.key("labels"); if let labels = s.labels { w.int(labels) } else { w.null() }
        for (key, value) in [
            ("true_positives", s.counts?.truePositives), ("false_positives", s.counts?.falsePositives),
            ("false_negatives", s.counts?.falseNegatives),
        ] {
            w.key(key); if let value { w.int(value) } else { w.null() }
        }
        w.key("precision"); optional(s.counts?.precision, &w)
        w.key("recall"); optional(s.counts?.recall, &w)
        w.key("f1"); optional(s.counts?.f1, &w)
        for (key, agreement) in [("mean_velocity", s.meanVelocity), ("peak_velocity", s.peakVelocity)] {
            w.key(key)
            guard let a = agreement else { w.null(); continue }
            w.beginObject()
            w.key("n"); w.int(a.n)
            w.key("bias_mps"); optional(a.biasMps, &w)
            w.key("mae_mps"); optional(a.meanAbsoluteErrorMps, &w)
            w.key("sd_mps"); optional(a.sdMps, &w)
            w.key("loa_lower_mps"); optional(a.lowerLimitMps, &w)
            w.key("loa_upper_mps"); optional(a.upperLimitMps, &w)
            w.key("sem_mps"); optional(a.semMps, &w)
            w.key("sdc_mps"); optional(a.smallestDetectableChangeMps, &w)
            w.endObject()
        }
        w.endObject()
    }

    // MARK: Table

    /// The evaluation as aligned text tables for people.
    public func table(recording: String) -> String {
        var out = "recording \(recording): \(run.messages) messages"
        if !run.unreadable.isEmpty {
            let shown = run.unreadable.prefix(5).map(\.description).joined(separator: "; ")
            out +=
                ", \(run.unreadable.count) unreadable line\(run.unreadable.count == 1 ? "" : "s") skipped (\(shown)\(run.unreadable.count > 5 ? "; ..." : ""))"
        }
        if run.skippedReadings > 0 { out += ", \(run.skippedReadings) readings with implausible times skipped" }
        out += "\n\n"
        func name(_ s: EvaluationSummary) -> String { s.station ?? s.exercise ?? "overall" }
        /// Station rows, then a line `exercise` and the exercises' rows, then overall.
        func rows(_ cells: (EvaluationSummary) -> [String], header: [String]) -> String {
            var table = [header] + stations.map(cells)
            if !exercises.isEmpty {
                table.append(["exercise"] + Array(repeating: "", count: header.count - 1))
                table += exercises.map(cells)
            }
            table.append(cells(overall))
            return Self.align(table)
        }
        if labelled {
            if kind == .order {
                out += "Detection (labels matched in order within each set: the detector's n-th set at a station is the labels' n-th)\n"
            } else {
                out += "Detection (a rep matches a label within \(Self.fixed(toleranceS, 2)) s of its top)\n"
            }
            out += rows(
                { s in
                    let c = s.counts
                    return [
                        name(s), "\(s.detectedReps)", "\(s.labels ?? 0)", "\(c?.truePositives ?? 0)", "\(c?.falsePositives ?? 0)",
                        "\(c?.falseNegatives ?? 0)", Self.fixed(c?.precision, 3), Self.fixed(c?.recall, 3), Self.fixed(c?.f1, 3),
                    ]
                }, header: ["station", "reps", "labels", "TP", "FP", "FN", "precision", "recall", "F1"])
            for (title, pick) in [("Mean velocity", \EvaluationSummary.meanVelocity), ("Peak velocity", \EvaluationSummary.peakVelocity)] {
                out += "\n\(title), detected - reference, m/s (Bland-Altman: LoA = bias +- 1.96 SD; SDC = 1.96 SD)\n"
                out += rows(
                    { s in
                        let a = s[keyPath: pick]
                        return [
                            name(s), "\(a?.n ?? 0)", Self.fixed(a?.biasMps, 3), Self.fixed(a?.meanAbsoluteErrorMps, 3),
                            Self.fixed(a?.sdMps, 3), Self.fixed(a?.lowerLimitMps, 3), Self.fixed(a?.upperLimitMps, 3),
                            Self.fixed(a?.smallestDetectableChangeMps, 3),
                        ]
                    }, header: ["station", "n", "bias", "MAE", "SD", "LoA low", "LoA high", "SDC"])
            }
            if kind == .order, !sets.isEmpty {
                out += "\nSets (the detector's n-th set at a station beside the labels' n-th)\n"
                var table: [[String]] = [["station", "label set", "detector set", "exercise", "reps", "labels"]]
                for set in sets {
                    table.append([
                        set.station, set.labelSet.map { "\($0)" } ?? "-", set.setId ?? "-", set.exercise, "\(set.detectedReps)", "\(set.labels)",
                    ])
                }
                out += Self.align(table, leftColumns: [2, 3])
            }
            if !unmatched.isEmpty {
                out += "\nLabels without a rep (false negatives): "
                out += unmatched.prefix(10).map { miss in
                    switch miss.reference {
                    case .time(let l): "\(l.station) t_top \(Self.fixed(l.tTop, 3)) (line \(l.line))"
                    case .order(let l): "\(l.station) set \(l.set) rep \(l.rep) (line \(l.line))"
                    }
                }.joined(separator: ", ")
                out += unmatched.count > 10 ? ", ...\n" : "\n"
            }
        } else {
            out += "Detected reps (no labels given: add --labels FILE to compare)\n"
            out += rows(
                { s in
                    [
                        name(s), "\(s.detectedReps)", "\(s.rejectedAttempts)", Self.fixed(s.averageMeanVelocityMps, 3),
                        Self.fixed(s.averagePeakVelocityMps, 3),
                    ]
                }, header: ["station", "reps", "rejected", "mean velocity m/s", "peak velocity m/s"])
        }
        if !rejections.isEmpty {
            out += "\nRejected attempts (\(rejections.count); t is the top of the attempt, sensor time)\n"
            var table: [[String]] = [["t", "station", "reason", "detail"]]
            for r in rejections { table.append([Self.fixed(r.t, 3), r.station, r.reason, r.detail]) }
            out += Self.align(table, leftColumns: [1, 2, 3])
        }
        return out
    }

    static func fixed(_ value: Double?, _ decimals: Int) -> String {
        guard let value, value.isFinite else { return "-" }
        return String(format: "%.\(decimals)f", value)
    }

    /// Columns: the first (and `leftColumns`) left-aligned, the rest right-aligned, two spaces apart.
    static func align(_ rows: [[String]], leftColumns: Set<Int> = []) -> String {
        guard let columns = rows.first?.count else { return "" }
        let widths = (0..<columns).map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { c, cell in
                let padding = String(repeating: " ", count: widths[c] - cell.count)
                return c == 0 || leftColumns.contains(c) ? cell + padding : padding + cell
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }.joined(separator: "\n") + "\n"
    }

    // MARK: Bland-Altman plot

    /// A Bland-Altman plot of mean velocity (Bland & Altman, The Lancet 1986):
    /// x the mean of detected and reference, y their difference, with the
    /// bias and the 95 % limits of agreement (pooled over every station).
    public func blandAltmanSVG(title: String) -> String {
        BlandAltmanPlot.svg(points: meanVelocityPoints, agreement: overall.meanVelocity ?? Agreement(differences: []), title: title)
    }
}

extension String {
    /// The string without spaces at its end (a table's last column left-aligned pads them).
    fileprivate func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

/// Draws a Bland-Altman plot as a standalone SVG document.
public enum BlandAltmanPlot {
    static let width = 760.0, height = 520.0
    static let left = 80.0, right = 150.0, top = 60.0, bottom = 70.0

    /// The SVG text. `agreement` gives the bias and limit lines (drawn when known).
    public static func svg(points: [(mean: Double, difference: Double)], agreement: Agreement, title: String) -> String {
        let plotW = width - left - right, plotH = height - top - bottom
        let bias = agreement.biasMps, lower = agreement.lowerLimitMps, upper = agreement.upperLimitMps
        var xs = points.map(\.mean), ys = points.map(\.difference) + [0] + [bias, lower, upper].compactMap { $0 }
        if xs.isEmpty { xs = [0, 1] }
        if ys.count < 2 { ys.append(0.1) }
        let xTicks = ticks(xs.min()!, xs.max()!), yTicks = ticks(ys.min()!, ys.max()!)
        let xLow = xTicks.first!, xHigh = xTicks.last!, yLow = yTicks.first!, yHigh = yTicks.last!
        func px(_ x: Double) -> Double { left + (x - xLow) / (xHigh - xLow) * plotW }
        func py(_ y: Double) -> Double { top + (yHigh - y) / (yHigh - yLow) * plotH }
        var s = """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" viewBox="0 0 \(f(width)) \(f(height))" font-family="sans-serif" font-size="12">
            <title>\(escape(title))</title>
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="\(f(left + plotW / 2))" y="28" text-anchor="middle" font-size="16" font-weight="bold">\(escape(title))</text>
            <text x="\(f(left + plotW / 2))" y="46" text-anchor="middle" font-size="11" fill="#555555">n = \(points.count) matched reps with a reference mean velocity</text>
            <rect id="plot-area" x="\(f(left))" y="\(f(top))" width="\(f(plotW))" height="\(f(plotH))" fill="none" stroke="#333333"/>

            """
        s += "<g id=\"x-axis\">\n"
        for tick in xTicks {
            let x = px(tick)
            s += "<line x1=\"\(f(x))\" y1=\"\(f(top + plotH))\" x2=\"\(f(x))\" y2=\"\(f(top + plotH + 5))\" stroke=\"#333333\"/>"
            s += "<text x=\"\(f(x))\" y=\"\(f(top + plotH + 19))\" text-anchor=\"middle\">\(label(tick, step: xTicks))</text>\n"
        }
        s +=
            "<text x=\"\(f(left + plotW / 2))\" y=\"\(f(height - 20))\" text-anchor=\"middle\">Mean of detected and reference mean velocity (m/s)</text>\n</g>\n"
        s += "<g id=\"y-axis\">\n"
        for tick in yTicks {
            let y = py(tick)
            s += "<line x1=\"\(f(left - 5))\" y1=\"\(f(y))\" x2=\"\(f(left))\" y2=\"\(f(y))\" stroke=\"#333333\"/>"
            s += "<line x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(left + plotW))\" y2=\"\(f(y))\" stroke=\"#eeeeee\"/>"
            s += "<text x=\"\(f(left - 8))\" y=\"\(f(y + 4))\" text-anchor=\"end\">\(label(tick, step: yTicks))</text>\n"
        }
        s +=
            "<text x=\"20\" y=\"\(f(top + plotH / 2))\" text-anchor=\"middle\" transform=\"rotate(-90 20 \(f(top + plotH / 2)))\">Detected - reference (m/s)</text>\n</g>\n"
        s += "<line id=\"zero\" x1=\"\(f(left))\" y1=\"\(f(py(0)))\" x2=\"\(f(left + plotW))\" y2=\"\(f(py(0)))\" stroke=\"#999999\"/>\n"
        func line(_ id: String, _ value: Double?, _ color: String, dashed: Bool, _ text: String) {
            guard let value else { return }
            let y = py(value)
            s +=
                "<line id=\"\(id)\" x1=\"\(f(left))\" y1=\"\(f(y))\" x2=\"\(f(left + plotW))\" y2=\"\(f(y))\" stroke=\"\(color)\" stroke-width=\"1.5\"\(dashed ? " stroke-dasharray=\"6 4\"" : "")/>"
            s += "<text x=\"\(f(left + plotW + 6))\" y=\"\(f(y + 4))\" fill=\"\(color)\">\(escape(text)) \(String(format: "%+.3f", value))</text>\n"
        }
        line("bias", bias, "#1f77b4", dashed: false, "bias")
        line("loa-upper", upper, "#d62728", dashed: true, "+1.96 SD")
        line("loa-lower", lower, "#d62728", dashed: true, "-1.96 SD")
        s += "<g id=\"points\" fill=\"#1f77b4\" fill-opacity=\"0.7\">\n"
        for point in points {
            s += "<circle cx=\"\(f(px(point.mean)))\" cy=\"\(f(py(point.difference)))\" r=\"3.5\"/>\n"
        }
        s += "</g>\n</svg>\n"
        return s
    }

    /// About five round tick values covering [low, high] (1, 2 or 5 times a power of ten apart).
    static func ticks(_ low: Double, _ high: Double) -> [Double] {
        var low = low, high = high
        if high - low < 1e-9 { low -= 0.05; high += 0.05 }
        let raw = (high - low) / 5
        let power = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= raw } ?? 10 * power
        let first = floor(low / step) * step, last = ceil(high / step) * step
        return stride(from: 0, through: Int(((last - first) / step).rounded()), by: 1).map { first + Double($0) * step }
    }

    static func label(_ value: Double, step ticks: [Double]) -> String {
        let step = ticks.count > 1 ? ticks[1] - ticks[0] : 1
        let decimals = max(0, Int(-floor(log10(step) + 1e-9)))
        let text = String(format: "%.\(decimals)f", value)
        return text.hasPrefix("-") && Double(text) == 0 ? String(text.dropFirst()) : text
    }

    static func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
