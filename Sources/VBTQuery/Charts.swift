import Foundation

// Charts as standalone SVG files (no script, no external font or image), for
// `vbt progress --chart` and `vbt stats week --chart`: a coach opens them in
// any browser or drops them into a report.

/// One panel of a chart: a line chart over numbers, or bars over categories.
public struct ChartPanel: Sendable {
    /// What is drawn.
    public enum Kind: Sendable {
        /// Lines through points; `xLabel` formats an x value for the axis.
        case lines([Series], xLabel: @Sendable (Double) -> String)
        /// One bar per category.
        case bars(categories: [String], values: [Double])
        /// A load-velocity profile: the best mean velocity at each load (points), the fitted
        /// line, the minimal velocity threshold (MVT) and the estimated 1RM where they meet.
        case loadVelocity(LoadVelocityPlot)
    }

    /// What a load-velocity panel draws: the points, the fitted line, the MVT and the e1RM.
    public struct LoadVelocityPlot: Sendable {
        /// (load kg, best mean velocity m/s).
        public var points: [(x: Double, y: Double)]
        /// v = intercept + slope x load, when there are two loads or more.
        public var line: (interceptMps: Double, slopeMpsPerKg: Double)?
        public var mvtMps: Double?
        public var e1rmKg: Double?
        /// Written under the e1RM: its day and, when unreliable, why.
        public var note: String?

        public init(
            points: [(x: Double, y: Double)], line: (interceptMps: Double, slopeMpsPerKg: Double)?, mvtMps: Double?, e1rmKg: Double?, note: String? = nil
        ) {
            (self.points, self.line, self.mvtMps, self.e1rmKg, self.note) = (points, line, mvtMps, e1rmKg, note)
        }

        /// The profile behind an athlete's latest e1RM in `progress`: that day's points (the best
        /// rep at each load), its line, MVT and e1RM, the very estimate `progress` lists. Without
        /// an estimate, the best velocity ever at each load as points alone.
        public init(progress: ExerciseProgress) {
            guard let latest = progress.e1rm.max(by: { $0.ts < $1.ts }) else {
                self.init(points: progress.bestByLoad.map { (x: $0.loadKg, y: $0.bestMeanVelocityMps) }, line: nil, mvtMps: nil, e1rmKg: nil)
                return
            }
            self.init(
                points: zip(latest.loadsKg, latest.meanVelocitiesMps).map { (x: $0, y: $1) },
                line: (interceptMps: latest.interceptMps, slopeMpsPerKg: latest.slopeMpsPerKg), mvtMps: latest.mvtMps, e1rmKg: latest.e1rmKg,
                note: latest.day + (latest.reliable ? "" : " · unreliable: " + latest.warnings.map(\.words).joined(separator: "; ")))
        }
    }

    /// A named line.
    public struct Series: Sendable {
        public var name: String
        public var points: [(x: Double, y: Double)]
        /// Creates a series.
        public init(name: String, points: [(x: Double, y: Double)]) { (self.name, self.points) = (name, points) }
    }

    public var title: String
    public var yUnit: String
    public var kind: Kind

    /// Creates a panel.
    public init(title: String, yUnit: String, kind: Kind) { (self.title, self.yUnit, self.kind) = (title, yUnit, kind) }
}

/// Renders panels stacked vertically into one SVG document.
public enum SVGChart {
    static let width = 760.0, panelHeight = 300.0
    static let left = 70.0, right = 20.0, top = 40.0, bottom = 50.0
    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

    /// The SVG text of `panels` under `title`.
    public static func render(title: String, panels: [ChartPanel]) -> String {
        let height = 40 + Double(max(1, panels.count)) * panelHeight
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(fmt(width))" height="\(fmt(height))" viewBox="0 0 \(fmt(width)) \(fmt(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="\(fmt(width / 2))" y="26" text-anchor="middle" font-size="18" font-weight="bold">\(escape(title))</text>

            """
        for (index, panel) in panels.enumerated() {
            svg += renderPanel(panel, originY: 40 + Double(index) * panelHeight)
        }
        svg += "</svg>\n"
        return svg
    }

    static func renderPanel(_ panel: ChartPanel, originY: Double) -> String {
        let plotW = width - left - right, plotH = panelHeight - top - bottom
        let x0 = left, y0 = originY + top
        var out = "<g>\n<text x=\"\(fmt(x0))\" y=\"\(fmt(originY + 24))\" font-size=\"14\" font-weight=\"bold\">\(escape(panel.title))</text>\n"
        let values: [Double]
        switch panel.kind {
        case .lines(let series, _): values = series.flatMap { $0.points.map(\.y) }
        case .bars(_, let bars): values = bars + [0]
        case .loadVelocity(let plot): values = plot.points.isEmpty ? [] : plot.points.map(\.y) + [0] + (plot.mvtMps.map { [$0] } ?? [])
        }
        guard !values.isEmpty else {
            return out + "<text x=\"\(fmt(x0 + plotW / 2))\" y=\"\(fmt(y0 + plotH / 2))\" text-anchor=\"middle\" fill=\"#888\">no data yet</text>\n</g>\n"
        }
        // Counts (sets, reps) are whole numbers: their axis steps are too.
        let integral = values.allSatisfy { $0 == $0.rounded() }
        let (yMin, yMax, yStep) = niceRange(values.min()!, values.max()!, integral: integral)
        func y(_ value: Double) -> Double { y0 + plotH - (value - yMin) / (yMax - yMin) * plotH }
        // Horizontal grid with labels.
        var tick = yMin
        while tick <= yMax + yStep / 2 {
            out += "<line x1=\"\(fmt(x0))\" y1=\"\(fmt(y(tick)))\" x2=\"\(fmt(x0 + plotW))\" y2=\"\(fmt(y(tick)))\" stroke=\"#e0e0e0\"/>\n"
            out += "<text x=\"\(fmt(x0 - 6))\" y=\"\(fmt(y(tick) + 4))\" text-anchor=\"end\">\(label(tick, step: yStep))</text>\n"
            tick += yStep
        }
        out += "<text transform=\"translate(\(fmt(16)),\(fmt(y0 + plotH / 2))) rotate(-90)\" text-anchor=\"middle\">\(escape(panel.yUnit))</text>\n"
        out += "<line x1=\"\(fmt(x0))\" y1=\"\(fmt(y0 + plotH))\" x2=\"\(fmt(x0 + plotW))\" y2=\"\(fmt(y0 + plotH))\" stroke=\"#333\"/>\n"
        switch panel.kind {
        case .bars(let categories, let bars):
            let slot = plotW / Double(max(1, bars.count))
            for (index, value) in bars.enumerated() {
                let x = x0 + Double(index) * slot
                out +=
                    "<rect x=\"\(fmt(x + slot * 0.15))\" y=\"\(fmt(y(value)))\" width=\"\(fmt(slot * 0.7))\" height=\"\(fmt(max(0, y(yMin) - y(value))))\" fill=\"\(palette[0])\"><title>\(escape(categories[index])): \(label(value, step: yStep / 10))</title></rect>\n"
                out += "<text x=\"\(fmt(x + slot / 2))\" y=\"\(fmt(y0 + plotH + 18))\" text-anchor=\"middle\">\(escape(categories[index]))</text>\n"
                if value > 0 {
                    out +=
                        "<text x=\"\(fmt(x + slot / 2))\" y=\"\(fmt(y(value) - 4))\" text-anchor=\"middle\" font-size=\"11\">\(label(value, step: yStep / 10))</text>\n"
                }
            }
        case .loadVelocity(let plot):
            out += loadVelocity(plot, x0: x0, y0: y0, plotW: plotW, plotH: plotH, y: y, yStep: yStep)
        case .lines(let series, let xLabel):
            let xs = series.flatMap { $0.points.map(\.x) }
            let xMin = xs.min() ?? 0, xMax = xs.max() ?? 1
            let span = xMax > xMin ? xMax - xMin : 1
            func x(_ value: Double) -> Double { xMax > xMin ? x0 + (value - xMin) / span * plotW : x0 + plotW / 2 }
            // Five labels at most, each shown once (two days span five ticks of the same date),
            // the first and last kept inside the plot.
            var shown: [String] = []
            for index in 0..<5 {
                let value = xMin + span * Double(index) / 4
                if xMax == xMin && index > 0 { break }
                let text = xLabel(value)
                if shown.contains(text) { continue }
                shown.append(text)
                let anchor = xMax == xMin ? "middle" : index == 0 ? "start" : index == 4 ? "end" : "middle"
                out += "<text x=\"\(fmt(x(value)))\" y=\"\(fmt(y0 + plotH + 18))\" text-anchor=\"\(anchor)\">\(escape(text))</text>\n"
            }
            for (index, line) in series.enumerated() {
                let color = palette[index % palette.count]
                let points = line.points.sorted { $0.x < $1.x }
                if points.count > 1 {
                    let path = points.map { "\(fmt(x($0.x))),\(fmt(y($0.y)))" }.joined(separator: " ")
                    out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
                }
                for point in points {
                    out +=
                        "<circle cx=\"\(fmt(x(point.x)))\" cy=\"\(fmt(y(point.y)))\" r=\"3.5\" fill=\"\(color)\"><title>\(escape(line.name)) \(escape(xLabel(point.x))): \(label(point.y, step: yStep / 10))</title></circle>\n"
                }
                let legendX = x0 + plotW - 150, legendY = originY + 20 + Double(index) * 16
                out += "<rect x=\"\(fmt(legendX))\" y=\"\(fmt(legendY - 9))\" width=\"10\" height=\"10\" fill=\"\(color)\"/>"
                out += "<text x=\"\(fmt(legendX + 14))\" y=\"\(fmt(legendY))\">\(escape(line.name))</text>\n"
            }
        }
        return out + "</g>\n"
    }

    /// The load axis from 0 to past the heaviest load and the e1RM, the points, the fitted
    /// line down to the MVT, the MVT as a dashed line and the e1RM marked where they meet.
    static func loadVelocity(
        _ plot: ChartPanel.LoadVelocityPlot, x0: Double, y0: Double, plotW: Double, plotH: Double, y: (Double) -> Double, yStep: Double
    ) -> String {
        let heaviest = max(plot.points.map(\.x).max() ?? 1, plot.e1rmKg ?? 0)
        let (_, xMax, xStep) = niceRange(0, heaviest * 1.05, integral: true)
        func x(_ load: Double) -> Double { x0 + load / xMax * plotW }
        var out = ""
        var tick = 0.0
        while tick <= xMax + xStep / 2 {
            out += "<text x=\"\(fmt(x(tick)))\" y=\"\(fmt(y0 + plotH + 18))\" text-anchor=\"middle\">\(label(tick, step: xStep)) kg</text>\n"
            tick += xStep
        }
        if let mvt = plot.mvtMps {
            out +=
                "<line class=\"mvt\" x1=\"\(fmt(x0))\" y1=\"\(fmt(y(mvt)))\" x2=\"\(fmt(x0 + plotW))\" y2=\"\(fmt(y(mvt)))\" stroke=\"#d62728\" stroke-dasharray=\"6 4\"/>\n"
            // At the left: the e1RM is marked at the right end of the line.
            out += "<text x=\"\(fmt(x0 + 6))\" y=\"\(fmt(y(mvt) - 6))\" fill=\"#d62728\">MVT \(String(format: "%.2f", mvt)) m/s</text>\n"
        }
        if let line = plot.line {
            // From the lightest load to the e1RM (or the heaviest load without one).
            let from = plot.points.map(\.x).min() ?? 0, to = plot.e1rmKg ?? heaviest
            out +=
                "<line class=\"fit\" x1=\"\(fmt(x(from)))\" y1=\"\(fmt(y(line.interceptMps + line.slopeMpsPerKg * from)))\" x2=\"\(fmt(x(to)))\" y2=\"\(fmt(y(line.interceptMps + line.slopeMpsPerKg * to)))\" stroke=\"\(palette[0])\" stroke-width=\"2\"/>\n"
        }
        if let e1rm = plot.e1rmKg, let mvt = plot.mvtMps {
            out += "<circle class=\"e1rm\" cx=\"\(fmt(x(e1rm)))\" cy=\"\(fmt(y(mvt)))\" r=\"6\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n"
            // Anchored at the end, so a long note under an e1RM at the right edge stays in the panel.
            out +=
                "<text x=\"\(fmt(x(e1rm)))\" y=\"\(fmt(y(mvt) + 20))\" text-anchor=\"end\" font-weight=\"bold\">e1RM \(E1RMEstimator.text(e1rm)) kg</text>\n"
            if let note = plot.note {
                out += "<text class=\"e1rm-note\" x=\"\(fmt(x(e1rm)))\" y=\"\(fmt(y(mvt) + 36))\" text-anchor=\"end\">\(escape(note))</text>\n"
            }
        }
        for point in plot.points {
            out +=
                "<circle cx=\"\(fmt(x(point.x)))\" cy=\"\(fmt(y(point.y)))\" r=\"4.5\" fill=\"\(palette[0])\"><title>\(label(point.x, step: 0.5)) kg: \(String(format: "%.2f", point.y)) m/s</title></circle>\n"
        }
        return out
    }

    /// A range covering [low, high] with 4-6 round steps; whole steps of 1, 2
    /// or 5 times a power of ten (at least 1) when `integral`.
    static func niceRange(_ low: Double, _ high: Double, integral: Bool = false) -> (Double, Double, Double) {
        let nonNegative = low >= 0
        var low = low, high = high
        if high - low < 1e-9 { low -= max(1, abs(low) * 0.1); high += max(1, abs(high) * 0.1) }
        let raw = (high - low) / 5
        let magnitude = pow(10, floor(log10(raw)))
        let multiples: [Double] = integral ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]
        var step = multiples.map { $0 * magnitude }.first { $0 >= raw } ?? raw
        if integral { step = max(1, step.rounded()) }
        // Loads, velocities and counts are never negative: neither is the axis.
        let bottom = floor(low / step) * step
        return (nonNegative ? max(0, bottom) : bottom, ceil(high / step) * step, step)
    }

    /// `value` with as many decimals as `step` needs (2.5 steps: one), so no two ticks read the same.
    static func label(_ value: Double, step: Double) -> String {
        if value == value.rounded(), abs(value) < 1e9 { return String(Int(value)) }
        var decimals = 0
        while decimals < 3, abs(step * pow(10, Double(decimals)) - (step * pow(10, Double(decimals))).rounded()) > 1e-6 { decimals += 1 }
        return String(format: "%.\(max(decimals, 1))f", value)
    }

    static func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

    /// Text made safe for SVG.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// The progress chart: e1RM per day per exercise (`E1RMEstimator.daily`), each exercise's
    /// load-velocity profile behind its latest e1RM (the points, line, MVT and e1RM; without
    /// one, the best velocity at each load as points), body weight.
    public static func progress(_ report: ProgressReport, utcOffsetS: Int) -> String {
        let dayLabel: @Sendable (Double) -> String = { DayStats.day($0, offset: Double(utcOffsetS)) }
        let e1rm = report.exercises.filter { !$0.e1rm.isEmpty }.map {
            ChartPanel.Series(name: $0.exercise, points: $0.e1rm.map { (x: $0.ts, y: $0.e1rmKg) })
        }
        let velocity = report.exercises.filter { !$0.bestByLoad.isEmpty }.map { exercise in
            ChartPanel(
                title: exercise.e1rm.isEmpty
                    ? "\(exercise.exercise): load-velocity profile (best rep at each load)"
                    : "\(exercise.exercise): load-velocity profile of the latest e1RM (best rep at each load that day)", yUnit: "m/s",
                kind: .loadVelocity(ChartPanel.LoadVelocityPlot(progress: exercise)))
        }
        let weight = report.bodyWeight.isEmpty ? [] : [ChartPanel.Series(name: "body weight", points: report.bodyWeight.map { (x: $0.ts, y: $0.weightKg) })]
        return render(
            title: "Progress: \(report.athlete)",
            panels: [ChartPanel(title: "Estimated 1RM per day", yUnit: "kg", kind: .lines(e1rm, xLabel: dayLabel))] + velocity + [
                ChartPanel(title: "Body weight", yUnit: "kg", kind: .lines(weight, xLabel: dayLabel))
            ])
    }

    /// The weekly chart: sets, reps, volume and time under tension per day.
    public static func week(_ stats: WeekStats) -> String {
        let days = stats.days.map { String($0.day.suffix(5)) }
        return render(
            title: "Last 7 days" + (stats.athlete.map { ": \($0)" } ?? ""),
            panels: [
                ChartPanel(title: "Volume (load x reps)", yUnit: "kg", kind: .bars(categories: days, values: stats.days.map(\.volumeKg))),
                ChartPanel(title: "Reps", yUnit: "reps", kind: .bars(categories: days, values: stats.days.map { Double($0.reps) })),
                ChartPanel(title: "Sets", yUnit: "sets", kind: .bars(categories: days, values: stats.days.map { Double($0.sets) })),
                ChartPanel(title: "Time under tension (concentric)", yUnit: "s", kind: .bars(categories: days, values: stats.days.map(\.timeUnderTensionS))),
            ])
    }
}
