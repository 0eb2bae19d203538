import Foundation
import VBTConsole
import VBTQuery

/// The pages built from the session-recorder's history: the athletes, one athlete (the week,
/// the load-velocity profile behind the latest e1RM with its line, MVT, day, loads and
/// reliability, e1RM over the weeks, recent sets) and the leaderboards. Rendered on the server as HTML with inline SVG charts: they
/// need no script and draw on any tablet.
struct HistoryPages {
    let queries: QueryWorker
    /// The gym's clock offset from UTC, for days and "today".
    let utcOffsetS: Int

    func athletes() async throws -> String {
        let athletes = try await queries.ask(.athleteList, AthleteListArgs())
        let rows = athletes.sorted { $0.id < $1.id }.map { athlete in
            """
            <tr data-athlete="\(Pages.escape(athlete.id))"><td><a href="/athlete/\(Pages.escape(athlete.id))">\(Pages.escape(athlete.name))</a></td>\
            <td>\(Pages.escape(athlete.id))</td><td class="num">\(athlete.sessions)</td><td class="num">\(athlete.sets)</td><td class="num">\(athlete.reps)</td></tr>
            """
        }
        return """
            <h1>Athletes</h1>
            <table class="data"><thead><tr><th>Name</th><th>Id</th><th>Sessions</th><th>Sets</th><th>Reps</th></tr></thead>
            <tbody>\(rows.joined(separator: "\n"))</tbody></table>
            \(athletes.isEmpty ? #"<p class="muted">No athletes yet: vbt athlete add ID --name NAME.</p>"# : "")
            """
    }

    /// One line: `Readiness 96 % (as usual) · squat, session of 2026-12-05 · TE 2.1 %, SWC 1.0 %`.
    static func readinessLine(_ row: SessionReadiness?, offset: Double) -> String {
        guard let row else { return #"<p class="facts muted" data-field="readiness">No readiness yet: it is measured on a session's first sets.</p>"# }
        let a = row.assessment
        let spread = a.typicalErrorPct.map { String(format: " · TE %.1f %%, SWC %.1f %%", $0, a.swcPct ?? 0) } ?? ""
        return """
            <p class="facts" data-field="readiness" data-verdict="\(a.verdict.rawValue)" data-score-pct="\(a.scorePct.map { String(format: "%.1f", $0) } ?? "")">\
            Readiness <b>\(Pages.escape(row.text))</b> · \(Pages.escape(row.exercise)), session of \(DayStats.day(row.sessionStartedTs, offset: offset))\(spread)</p>
            """
    }

    func athlete(_ id: String) async throws -> String {
        async let profile = queries.ask(.athleteShow, IdArgs(id: id))
        async let week = queries.ask(.statsWeek, WeekArgs(athlete: id, utcOffsetS: utcOffsetS))
        async let progress = queries.ask(.progress, ProgressArgs(athlete: id, utcOffsetS: utcOffsetS))
        async let history = queries.ask(.history, HistoryArgs(athlete: id, limit: 20))
        let (athlete, stats, report, sets) = try await (profile, week, progress, history)
        let offset = Double(utcOffsetS)
        // The latest session's stored readiness (docs/detection.md, "Readiness"); a recorder
        // without the query leaves the line out rather than the page.
        let readiness = (try? await queries.ask(.readiness, ReadinessArgs(athlete: id, limit: 1)))?.first
        var out = """
            <h1 data-athlete="\(Pages.escape(athlete.id))">\(Pages.escape(athlete.name)) <span class="muted">\(Pages.escape(athlete.id))</span></h1>
            <p class="facts">\(athlete.weightKg.map { String(format: "%.1f kg · ", $0) } ?? "")\(athlete.sessions) sessions · \(athlete.sets) sets · \(athlete.reps) reps</p>
            \(Self.readinessLine(readiness, offset: offset))
            <h2>Progress</h2>
            """
        if report.exercises.isEmpty { out += #"<p class="muted">No sets recorded yet.</p>"# }
        for exercise in report.exercises {
            // The profile behind the latest e1RM of `progress`: the figure the chart below ends on,
            // the leaderboard ranks and `vbt progress` lists, with its day, loads and reliability.
            let plot = ChartPanel.LoadVelocityPlot(progress: exercise)
            let latest = exercise.e1rm.max { $0.ts < $1.ts }
            let e1rm = ChartPanel.Series(name: exercise.exercise, points: exercise.e1rm.map { (x: $0.ts, y: $0.e1rmKg) })
            let chart = SVGChart.render(
                title: exercise.exercise,
                panels: [
                    ChartPanel(
                        title: "Load-velocity profile\(latest.map { " of \($0.day)" } ?? "") (best rep at each load that day)", yUnit: "m/s",
                        kind: .loadVelocity(plot)),
                    ChartPanel(
                        title: "Estimated 1RM over the weeks", yUnit: "kg", kind: .lines([e1rm], xLabel: { DayStats.day($0, offset: offset) })),
                ])
            let facts =
                latest.map {
                    """
                    <p class="facts" data-field="e1rm" data-day="\($0.day)" data-reliable="\($0.reliable)">e1RM \
                    <b>\(E1RMEstimator.text($0.e1rmKg)) kg</b> · \(Pages.escape($0.source)) · \(Pages.escape($0.reliability))</p>
                    """
                } ?? #"<p class="facts muted" data-field="e1rm">No e1RM yet: sets at two loads or more on one day are needed.</p>"#
            out += """
                <section class="exercise" data-exercise="\(Pages.escape(exercise.exercise))" data-points="\(plot.points.count)" \
                data-e1rm-kg="\(latest.map { E1RMEstimator.text($0.e1rmKg) } ?? "")">
                \(facts)
                <div class="chart">\(chart)</div>
                </section>
                """
        }
        out += """
                <h2>This week</h2>
                <p class="facts" data-field="week">\(stats.totals.sets) sets · \(stats.totals.reps) reps · \(String(format: "%.0f", stats.totals.volumeKg)) kg lifted · \
                \(String(format: "%.0f", stats.totals.timeUnderTensionS)) s under tension\(stats.mostTrainedExercise.map { " · most: " + Pages.escape($0) } ?? "")</p>
                <div class="chart">\(SVGChart.week(stats))</div>
                <h2>Recent sets</h2>
            \(setsTable(sets))
            """
        return out
    }

    func leaders(period: String) async throws -> String {
        let now = Date().timeIntervalSince1970
        let midnight = (floor((now + Double(utcOffsetS)) / 86_400) * 86_400) - Double(utcOffsetS)
        // The week as `vbt stats week` counts it: today and the six days before.
        let since = period == "week" ? midnight - 6 * 86_400 : midnight
        async let history = queries.ask(.history, HistoryArgs(limit: 10_000))
        let athletes = try await queries.ask(.athleteList, AthleteListArgs())
        var reports: [ProgressReport] = []
        for athlete in athletes {
            reports.append(try await queries.ask(.progress, ProgressArgs(athlete: athlete.id, utcOffsetS: utcOffsetS)))
        }
        let board = Leaderboard(sets: try await history, progress: reports, since: since)
        var out = """
            <h1>Leaderboards</h1>
            <p class="tabs"><a href="/leaders?period=today" class="\(period == "week" ? "" : "on")">Today</a> \
            <a href="/leaders?period=week" class="\(period == "week" ? "on" : "")">This week</a></p>
            """
        if board.boards.isEmpty { out += #"<p class="muted">No sets in this period yet.</p>"# }
        for exercise in board.boards {
            let e1rm = exercise.e1rm.enumerated().map { rank, entry in
                """
                <tr><td class="num">\(rank + 1)</td><td><a href="/athlete/\(Pages.escape(entry.athlete))">\(Pages.escape(entry.athlete))</a></td>\
                <td class="num" data-field="e1rm">\(E1RMEstimator.text(entry.e1rmKg))</td><td>\(Pages.escape(entry.day))</td>\
                <td>\(entry.estimate.loadsKg.map { String(format: "%g", $0) }.joined(separator: ", "))</td>\
                <td data-field="e1rm-reliable" data-reliable="\(entry.estimate.reliable)">\(Pages.escape(entry.estimate.reliability))</td></tr>
                """
            }
            let loads = exercise.velocityAtLoad.map { load in
                load.entries.enumerated().map { rank, entry in
                    """
                    <tr><td class="num">\(rank == 0 ? String(format: "%g kg", load.loadKg) : "")</td><td class="num">\(rank + 1)</td>\
                    <td><a href="/athlete/\(Pages.escape(entry.athlete))">\(Pages.escape(entry.athlete))</a></td>\
                    <td class="num" data-field="velocity">\(String(format: "%.2f", entry.bestMeanVelocityMps))</td></tr>
                    """
                }.joined(separator: "\n")
            }
            out += """
                <section class="leaders" data-exercise="\(Pages.escape(exercise.exercise))">
                <h2>\(Pages.escape(exercise.exercise))</h2>
                <div class="two">
                <table class="data"><caption>Best estimated 1RM (best rep at each load that day, at the MVT)</caption>\
                <thead><tr><th>#</th><th>Athlete</th><th>kg</th><th>Day</th><th>Loads kg</th><th>Reliability</th></tr></thead>
                <tbody>\(e1rm.joined(separator: "\n"))</tbody></table>
                <table class="data"><caption>Fastest at each load (best mean velocity, m/s)</caption><thead><tr><th>Load</th><th>#</th><th>Athlete</th><th>m/s</th></tr></thead>
                <tbody>\(loads.joined(separator: "\n"))</tbody></table>
                </div>
                </section>
                """
        }
        return out
    }

    private func setsTable(_ sets: [SetSummary]) -> String {
        let offset = Double(utcOffsetS)
        let rows = sets.map { set in
            let number = { (value: Double?, format: String) in value.map { String(format: format, $0) } ?? "–" }
            return """
                <tr><td>\(DayStats.day(set.startedTs, offset: offset))</td><td>\(Pages.escape(set.station))</td><td>\(Pages.escape(set.exercise ?? "–"))</td>\
                <td class="num">\(number(set.loadKg, "%g"))</td><td class="num">\(set.reps)</td><td class="num">\(number(set.bestMeanVelocityMps, "%.2f"))</td>\
                <td class="num">\(number(set.velocityLossPct, "%.0f"))</td><td>\(Pages.escape(set.reason ?? (set.endedTs == nil ? "in progress" : "–")))</td></tr>
                """
        }
        return """
            <table class="data sets"><thead><tr><th>Day</th><th>Station</th><th>Exercise</th><th>kg</th><th>Reps</th><th>Best m/s</th><th>VL %</th><th>Ended by</th></tr></thead>
            <tbody>\(rows.joined(separator: "\n"))</tbody></table>
            """
    }
}
