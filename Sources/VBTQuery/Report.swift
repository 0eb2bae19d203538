import Foundation

// The session report a coach sends (`vbt report`): one athlete's day of training as the
// recorder's `report` query answers it, rendered here as text for a terminal and as one
// self-contained HTML page (inline CSS and SVG, no script, A4 when printed). Pure: the same
// value gives the same text and page, so tests compare them with figures of their own.

/// One athlete's training on one local day.
public struct SessionReport: Codable, Sendable, Equatable {
    /// One rep of a set, with the metrics a coach reads.
    public struct Rep: Codable, Sendable, Equatable {
        public var index: Int
        public var meanVelocityMps: Double
        public var peakVelocityMps: Double
        public var romMm: Double
        public var concentricS: Double
        /// Below the set's best so far, % of that best (as the detector published it).
        public var velocityLossPct: Double
        /// The rep's phases and tempo, once the detector measures them (nil: not measured).
        public var eccentricS: Double?
        public var pauseBottomS: Double?
        public var tempo: String?
        public var tempoMet: Bool?

        public init(
            index: Int, meanVelocityMps: Double, peakVelocityMps: Double, romMm: Double, concentricS: Double, velocityLossPct: Double,
            eccentricS: Double? = nil, pauseBottomS: Double? = nil, tempo: String? = nil, tempoMet: Bool? = nil
        ) {
            (self.index, self.meanVelocityMps, self.peakVelocityMps, self.romMm, self.concentricS) = (
                index, meanVelocityMps, peakVelocityMps, romMm, concentricS
            )
            (self.velocityLossPct, self.eccentricS, self.pauseBottomS, self.tempo, self.tempoMet) = (
                velocityLossPct, eccentricS, pauseBottomS, tempo, tempoMet
            )
        }

        enum CodingKeys: String, CodingKey {
            case index, tempo
            case meanVelocityMps = "mean_velocity_mps"
            case peakVelocityMps = "peak_velocity_mps"
            case romMm = "rom_mm"
            case concentricS = "concentric_s"
            case velocityLossPct = "velocity_loss_pct"
            case eccentricS = "eccentric_s"
            case pauseBottomS = "pause_bottom_s"
            case tempoMet = "tempo_met"
        }
    }

    /// One set and its reps.
    public struct Set: Codable, Sendable, Equatable {
        public var id: String
        public var exercise: String?
        public var loadKg: Double?
        public var startedTs: Double
        public var endedTs: Double?
        /// Why it ended (idle, velocity-loss, command); nil while in progress.
        public var reason: String?
        public var rpe: Double?
        public var note: String?
        /// The reps stored, in order.
        public var reps: [Rep]

        public init(
            id: String, exercise: String?, loadKg: Double?, startedTs: Double, endedTs: Double?, reason: String?, rpe: Double?, note: String?, reps: [Rep]
        ) {
            (self.id, self.exercise, self.loadKg, self.startedTs, self.endedTs) = (id, exercise, loadKg, startedTs, endedTs)
            (self.reason, self.rpe, self.note, self.reps) = (reason, rpe, note, reps)
        }

        /// The fastest rep's mean velocity.
        public var bestMeanVelocityMps: Double? { reps.map(\.meanVelocityMps).max() }
        /// The mean of the reps' mean velocities.
        public var averageMeanVelocityMps: Double? { reps.isEmpty ? nil : reps.reduce(0) { $0 + $1.meanVelocityMps } / Double(reps.count) }
        /// Velocity loss of the set as docs/detection.md defines it: the last rep against the
        /// fastest, (best - last) / best in %; nil without reps.
        public var velocityLossPct: Double? {
            guard let best = bestMeanVelocityMps, best > 0, let last = reps.last?.meanVelocityMps else { return nil }
            return (best - last) / best * 100
        }
        /// Reps that met their tempo, of those whose tempo was measured (nil: none measured).
        public var tempoCompliance: (met: Int, measured: Int)? { SessionReport.compliance(reps) }

        enum CodingKeys: String, CodingKey {
            case id, exercise, reason, rpe, note, reps
            case loadKg = "load_kg"
            case startedTs = "started_ts"
            case endedTs = "ended_ts"
            case bestMeanVelocityMps = "best_mean_velocity_mps"
            case averageMeanVelocityMps = "average_mean_velocity_mps"
            case velocityLossPct = "velocity_loss_pct"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                id: try c.decode(String.self, forKey: .id), exercise: try c.decodeIfPresent(String.self, forKey: .exercise),
                loadKg: try c.decodeIfPresent(Double.self, forKey: .loadKg), startedTs: try c.decode(Double.self, forKey: .startedTs),
                endedTs: try c.decodeIfPresent(Double.self, forKey: .endedTs), reason: try c.decodeIfPresent(String.self, forKey: .reason),
                rpe: try c.decodeIfPresent(Double.self, forKey: .rpe), note: try c.decodeIfPresent(String.self, forKey: .note),
                reps: try c.decode([Rep].self, forKey: .reps))
        }

        /// Also writes the figures derived from the reps, for scripts reading the JSON.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(exercise, forKey: .exercise)
            try c.encodeIfPresent(loadKg, forKey: .loadKg)
            try c.encode(startedTs, forKey: .startedTs)
            try c.encodeIfPresent(endedTs, forKey: .endedTs)
            try c.encodeIfPresent(reason, forKey: .reason)
            try c.encodeIfPresent(rpe, forKey: .rpe)
            try c.encodeIfPresent(note, forKey: .note)
            try c.encode(reps, forKey: .reps)
            try c.encodeIfPresent(bestMeanVelocityMps, forKey: .bestMeanVelocityMps)
            try c.encodeIfPresent(averageMeanVelocityMps, forKey: .averageMeanVelocityMps)
            try c.encodeIfPresent(velocityLossPct, forKey: .velocityLossPct)
        }
    }

    /// One session: an athlete's sets at one station without a long break (the recorder's sessions).
    public struct Session: Codable, Sendable, Equatable {
        public var id: Int64
        public var station: String
        public var startedTs: Double
        public var endedTs: Double
        /// That day's sets of the athlete in this session, in order.
        public var sets: [Set]
        /// Attempts the detector refused (too short, too slow...) at this station while the session ran.
        public var rejected: Int
        /// Readiness per exercise, as stored when the session's first sets ended (empty: not measured).
        public var readiness: [Readiness]

        public init(id: Int64, station: String, startedTs: Double, endedTs: Double, sets: [Set], rejected: Int, readiness: [Readiness] = []) {
            (self.id, self.station, self.startedTs, self.endedTs, self.sets, self.rejected) = (id, station, startedTs, endedTs, sets, rejected)
            self.readiness = readiness
        }

        /// Readiness in words: `squat 96 % (as usual)`, or "not measured".
        public var readinessWords: String {
            readiness.isEmpty ? SessionReport.notMeasured : readiness.map { "\($0.exercise) \($0.assessment.text)" }.joined(separator: "; ")
        }

        enum CodingKeys: String, CodingKey {
            case id, station, sets, rejected, readiness
            case startedTs = "started_ts"
            case endedTs = "ended_ts"
        }
    }

    /// One exercise trained that day: its e1RM that day and over the weeks before.
    public struct Exercise: Codable, Sendable, Equatable {
        public var exercise: String
        /// That day's estimate (nil: fewer than two loads that day, or no falling line).
        public var e1rm: ExerciseProgress.E1RM?
        /// Every daily estimate in the report's window, oldest first (that day's included).
        public var trend: [ExerciseProgress.E1RM]

        public init(exercise: String, e1rm: ExerciseProgress.E1RM?, trend: [ExerciseProgress.E1RM]) {
            (self.exercise, self.e1rm, self.trend) = (exercise, e1rm, trend)
        }
    }

    /// The readiness the recorder stored for one exercise of a session (docs/detection.md, "Readiness").
    public struct Readiness: Codable, Sendable, Equatable {
        public var exercise: String
        public var assessment: ReadinessAssessment
        public init(exercise: String, assessment: ReadinessAssessment) { (self.exercise, self.assessment) = (exercise, assessment) }
    }

    public var athlete: String
    /// The athlete's full name (nil: not in the athlete list, e.g. a station's own id).
    public var name: String?
    /// `YYYY-MM-DD`, in the asker's time zone (`utcOffsetS`).
    public var date: String
    public var utcOffsetS: Int
    /// How many weeks of e1RM `exercises[].trend` spans.
    public var weeks: Int
    public var sessions: [Session]
    public var exercises: [Exercise]

    public init(
        athlete: String, name: String?, date: String, utcOffsetS: Int, weeks: Int, sessions: [Session], exercises: [Exercise]
    ) {
        (self.athlete, self.name, self.date, self.utcOffsetS, self.weeks) = (athlete, name, date, utcOffsetS, weeks)
        (self.sessions, self.exercises) = (sessions, exercises)
    }

    enum CodingKeys: String, CodingKey {
        case athlete, name, date, weeks, sessions, exercises
        case utcOffsetS = "utc_offset_s"
    }

    /// Every set of the day, in order.
    public var sets: [Set] { sessions.flatMap(\.sets) }
    /// Every rep of the day.
    public var repCount: Int { sets.reduce(0) { $0 + $1.reps.count } }
    /// Refused attempts over the day's sessions.
    public var rejected: Int { sessions.reduce(0) { $0 + $1.rejected } }
    /// The day's readiness in words: each measured session's (see `Session.readinessWords`), or "not measured".
    public var readinessWords: String {
        let measured = sessions.filter { !$0.readiness.isEmpty }
        return measured.isEmpty ? Self.notMeasured : measured.map(\.readinessWords).joined(separator: "; ")
    }

    /// Reps that met their tempo, of those measured; nil when no rep's tempo was measured.
    static func compliance(_ reps: [Rep]) -> (met: Int, measured: Int)? {
        let measured = reps.compactMap(\.tempoMet)
        return measured.isEmpty ? nil : (measured.filter { $0 }.count, measured.count)
    }

    /// The day's tempo compliance over every rep (nil: not measured).
    public var tempoCompliance: (met: Int, measured: Int)? { Self.compliance(sets.flatMap(\.reps)) }

    /// The day's compliance in words with the tempos prescribed: `11 of 15 reps (73%) at 3-1-X-0`.
    public var tempoWords: String {
        var tempos: [String] = []
        for tempo in sets.flatMap(\.reps).compactMap(\.tempo) where !tempos.contains(tempo) { tempos.append(tempo) }
        let words = Self.complianceWords(tempoCompliance)
        return tempoCompliance == nil || tempos.isEmpty ? words : words + " at " + tempos.joined(separator: ", ")
    }

    /// Days since 1970-01-01 of a `YYYY-MM-DD` date (nil: not such a date).
    public static func dayNumber(_ date: String) -> Int? {
        let parts = date.split(separator: "-", omittingEmptySubsequences: false)
        guard date.count == 10, parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...12).contains(m), (1...31).contains(d)
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let when = calendar.date(from: DateComponents(year: y, month: m, day: d)),
            calendar.component(.day, from: when) == d
        else { return nil }
        return Int((when.timeIntervalSince1970 / 86_400).rounded(.down))
    }

    /// The words for a section without data yet.
    public static let notMeasured = "not measured"

    // MARK: Text

    /// The report for a terminal.
    public var text: String {
        var out = "Session report: \(title)\n"
        out += "\(sessions.count) session\(sessions.count == 1 ? "" : "s"), \(sets.count) sets, \(repCount) reps, \(rejected) rejected attempts\n"
        out += "readiness: \(readinessWords)\n"
        out += "tempo compliance: \(tempoWords)\n"
        for (number, session) in sessions.enumerated() {
            out += "\nsession \(number + 1) at \(session.station), \(clock(session.startedTs))-\(clock(session.endedTs)), \(session.rejected) rejected\n"
            out += "readiness: \(session.readinessWords)\n"
            out += Self.table(
                ["set", "exercise", "load kg", "reps", "best m/s", "mean m/s", "last m/s", "VL %", "ended by", "RPE", "tempo"],
                session.sets.enumerated().map { index, set in
                    [
                        "\(index + 1)", set.exercise ?? "-", Self.number(set.loadKg, 1), "\(set.reps.count)", Self.number(set.bestMeanVelocityMps, 2),
                        Self.number(set.averageMeanVelocityMps, 2), Self.number(set.reps.last?.meanVelocityMps, 2), Self.number(set.velocityLossPct, 1),
                        set.reason ?? (set.endedTs == nil ? "(in progress)" : "-"), set.rpe.map { String(format: "%g", $0) } ?? "-",
                        set.tempoCompliance.map { "\($0.met)/\($0.measured)" } ?? "-",
                    ]
                })
            for (index, set) in session.sets.enumerated() where !set.reps.isEmpty {
                out += "  set \(index + 1) reps m/s: " + set.reps.map { String(format: "%.2f", $0.meanVelocityMps) }.joined(separator: " ") + "\n"
                if let note = set.note, !note.isEmpty { out += "  set \(index + 1) note: \(note)\n" }
            }
        }
        out += "\ne1RM (the best rep at each load that day, at the exercise's MVT; trend over \(weeks) weeks)\n"
        out += Self.table(
            ["exercise", "e1RM kg", "reliability", "trend kg"],
            exercises.map { e in
                [
                    e.exercise, e.e1rm.map { E1RMEstimator.text($0.e1rmKg) } ?? "-", e.e1rm?.reliability ?? "fewer than 2 loads that day",
                    e.trend.isEmpty ? "-" : e.trend.map { "\($0.day.suffix(5)) \(E1RMEstimator.text($0.e1rmKg))" }.joined(separator: ", "),
                ]
            })
        return out
    }

    var title: String { (name.map { "\($0) (\(athlete))" } ?? athlete) + ", \(date)" }

    static func complianceWords(_ value: (met: Int, measured: Int)?) -> String {
        guard let value else { return notMeasured }
        return String(format: "%d of %d reps (%.0f%%)", value.met, value.measured, Double(value.met) / Double(value.measured) * 100)
    }

    /// `HH:mm` of a Unix time in the report's time zone.
    func clock(_ ts: Double) -> String {
        let seconds = Int(floor(ts + Double(utcOffsetS))) % 86_400
        let day = seconds < 0 ? seconds + 86_400 : seconds
        return String(format: "%02d:%02d", day / 3_600, day % 3_600 / 60)
    }

    static func number(_ value: Double?, _ decimals: Int) -> String { value.map { String(format: "%.\(decimals)f", $0) } ?? "-" }

    static func table(_ header: [String], _ rows: [[String]]) -> String {
        guard !rows.isEmpty else { return "(none)\n" }
        var widths = header.map(\.count)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces) + "\n"
        }
        return line(header) + line(widths.map { String(repeating: "-", count: $0) }) + rows.map(line).joined()
    }

    // MARK: HTML

    /// One self-contained page: inline CSS and SVG, no script, no external resource; A4 when
    /// printed (`vbt report --pdf` prints it with headless Chromium).
    public var html: String {
        var body = "<header><h1>Session report</h1><p class=\"who\">\(Self.escape(name ?? athlete))"
        body += name == nil ? "" : " <span class=\"id\">(\(Self.escape(athlete)))</span>"
        body += " · <span data-field=\"date\">\(Self.escape(date))</span></p></header>\n"
        body += "<section class=\"summary\"><dl>"
        body += Self.fact("sessions", "\(sessions.count)") + Self.fact("sets", "\(sets.count)") + Self.fact("reps", "\(repCount)")
        body += Self.fact("rejected", "\(rejected)", label: "rejected attempts")
        body += Self.fact("readiness", readinessWords, muted: sessions.allSatisfy { $0.readiness.isEmpty })
        body += Self.fact("tempo", tempoWords, label: "tempo compliance", muted: tempoCompliance == nil)
        body += "</dl></section>\n"
        for (number, session) in sessions.enumerated() {
            body += "<section class=\"session\" data-session=\"\(session.id)\"><h2>Session \(number + 1) · \(Self.escape(session.station)) · "
            body += "\(clock(session.startedTs))–\(clock(session.endedTs))</h2>\n"
            body += "<table><thead><tr><th>Set</th><th>Exercise</th><th class=\"num\">Load kg</th><th class=\"num\">Reps</th>"
            body += "<th class=\"num\">Best m/s</th><th class=\"num\">Mean m/s</th><th class=\"num\">VL %</th><th>Mean velocity per rep, m/s</th>"
            body += "<th>Ended by</th><th class=\"num\">RPE</th><th class=\"num\">Tempo</th></tr></thead><tbody>\n"
            for (index, set) in session.sets.enumerated() {
                body += "<tr data-set=\"\(Self.escape(set.id))\"><td>\(index + 1)</td><td>\(Self.escape(set.exercise ?? "-"))</td>"
                body += "<td class=\"num\" data-field=\"load\">\(Self.number(set.loadKg, 1))</td><td class=\"num\" data-field=\"reps\">\(set.reps.count)</td>"
                body += "<td class=\"num\" data-field=\"best\">\(Self.number(set.bestMeanVelocityMps, 2))</td>"
                body += "<td class=\"num\" data-field=\"mean\">\(Self.number(set.averageMeanVelocityMps, 2))</td>"
                body += "<td class=\"num vl\" data-field=\"vl\">\(Self.number(set.velocityLossPct, 1))</td>"
                body += "<td class=\"bars\">\(Self.repBars(set))</td>"
                body += "<td>\(Self.escape(set.reason ?? (set.endedTs == nil ? "in progress" : "-")))</td>"
                body += "<td class=\"num\">\(set.rpe.map { String(format: "%g", $0) } ?? "–")</td>"
                body += "<td class=\"num\" data-field=\"tempo\">\(set.tempoCompliance.map { "\($0.met)/\($0.measured)" } ?? "–")</td></tr>\n"
                if let note = set.note, !note.isEmpty {
                    body += "<tr class=\"note\"><td></td><td colspan=\"10\">Note: \(Self.escape(note))</td></tr>\n"
                }
            }
            body += "</tbody></table>\n"
            body += "<p class=\"aside\">\(session.rejected) rejected attempt\(session.rejected == 1 ? "" : "s") at this station during the session. "
            body += "Readiness: <span data-field=\"session-readiness\">\(Self.escape(session.readinessWords))</span>.</p>"
            body += "</section>\n"
        }
        body += "<section class=\"e1rm\"><h2>Estimated 1RM</h2>\n<table><thead><tr><th>Exercise</th><th class=\"num\">e1RM kg</th>"
        body += "<th>From</th><th>Reliability</th><th class=\"num\">Change over \(weeks) weeks</th></tr></thead><tbody>\n"
        for e in exercises {
            let change: String
            if let first = e.trend.first, let last = e.trend.last, e.trend.count > 1 {
                change = String(format: "%+.1f kg since %@", last.e1rmKg - first.e1rmKg, first.day)
            } else {
                change = "–"
            }
            body += "<tr data-exercise=\"\(Self.escape(e.exercise))\"><td>\(Self.escape(e.exercise))</td>"
            body += "<td class=\"num\" data-field=\"e1rm\">\(e.e1rm.map { E1RMEstimator.text($0.e1rmKg) } ?? "–")</td>"
            let loads = e.e1rm.map { $0.loadsKg.map { String(format: "%g", $0) }.joined(separator: ", ") + " kg" }
            body += "<td>\(Self.escape(loads ?? "fewer than 2 loads"))</td>"
            body += "<td>\(Self.escape(e.e1rm?.reliability ?? "no estimate that day"))</td><td class=\"num\">\(Self.escape(change))</td></tr>\n"
        }
        body += "</tbody></table>\n<div class=\"chart\">\(trendChart)</div></section>\n"
        body += "<footer>Velocity loss (VL) is the set's last rep against its fastest, (best − last) / best. e1RM: the fastest rep "
        body += "at each load that day, a least-squares load-velocity line read at the exercise's minimal velocity threshold. "
        body += "Made by vbt report.</footer>\n"
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>Session report: \(Self.escape(title))</title>
            <style>\(Self.style)</style></head>
            <body>
            \(body)</body></html>

            """
    }

    /// The e1RM per day over the window, one line per exercise (SVGChart, as `vbt progress --chart`).
    var trendChart: String {
        let offset = Double(utcOffsetS)
        let series = exercises.filter { !$0.trend.isEmpty }.map { e in
            ChartPanel.Series(name: e.exercise, points: e.trend.map { (x: $0.ts, y: $0.e1rmKg) })
        }
        let panel = ChartPanel(title: "e1RM per day, last \(weeks) weeks", yUnit: "kg", kind: .lines(series, xLabel: { DayStats.day($0, offset: offset) }))
        // Inline in the page, scaled to the column by its viewBox. Not pulled up over its empty
        // title band: its white background would hide the table above.
        return SVGChart.render(title: "", panels: [panel])
    }

    /// Each rep's mean velocity as a small bar, the set's fastest full height; the number on top.
    static func repBars(_ set: Set) -> String {
        guard let best = set.bestMeanVelocityMps, best > 0 else { return "–" }
        return set.reps.map { rep in
            let height = max(2, Int((rep.meanVelocityMps / best * 22).rounded()))
            return "<span class=\"rep\" title=\"rep \(rep.index)\"><i style=\"height:\(height)px\"></i>\(String(format: "%.2f", rep.meanVelocityMps))</span>"
        }.joined()
    }

    static func fact(_ field: String, _ value: String, label: String? = nil, muted: Bool = false) -> String {
        "<div><dt>\(escape(label ?? field))</dt><dd data-field=\"\(field)\"\(muted ? " class=\"muted\"" : "")>\(escape(value))</dd></div>"
    }

    /// Text made safe for HTML.
    public static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static let style = """
        @page { size: A4; margin: 14mm; }
        * { box-sizing: border-box; }
        body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 10.5pt; color: #1a1a1a; margin: 0 auto; max-width: 182mm; padding: 8mm 0; }
        header { border-bottom: 2px solid #1f77b4; margin-bottom: 4mm; }
        h1 { font-size: 18pt; margin: 0 0 1mm; }
        h2 { font-size: 12pt; margin: 5mm 0 2mm; }
        .who { margin: 0 0 2mm; font-size: 12pt; }
        .id { color: #666; }
        dl { display: flex; flex-wrap: wrap; gap: 2mm 6mm; margin: 0; }
        dl div { min-width: 24mm; }
        dt { font-size: 8pt; color: #666; text-transform: uppercase; letter-spacing: .04em; }
        dd { margin: 0; font-size: 13pt; font-weight: bold; }
        dd.muted { color: #999; font-weight: normal; font-style: italic; font-size: 11pt; }
        table { border-collapse: collapse; width: 100%; font-size: 9pt; }
        th, td { padding: 1.2mm 1.5mm; border-bottom: 1px solid #ddd; text-align: left; vertical-align: bottom; }
        th { font-size: 8pt; color: #444; border-bottom: 1.5px solid #888; }
        .num { text-align: right; font-variant-numeric: tabular-nums; }
        tr.note td { color: #555; font-style: italic; border-bottom: 1px solid #ddd; }
        .bars { white-space: nowrap; }
        .rep { display: inline-flex; flex-direction: column; align-items: center; justify-content: flex-end; width: 8.5mm; font-size: 7pt; color: #444; }
        .rep i { display: block; width: 4mm; background: #1f77b4; margin-bottom: 0.5mm; }
        .aside { color: #666; font-size: 8.5pt; margin: 1mm 0 0; }
        section { break-inside: avoid; }
        .chart svg { width: 100%; height: auto; display: block; margin-top: 2mm; }
        dd[data-field="readiness"] { font-size: 11pt; }
        footer { margin-top: 6mm; font-size: 8pt; color: #666; border-top: 1px solid #ddd; padding-top: 2mm; }
        """
}
