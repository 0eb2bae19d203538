import Foundation
import VBTConsole
import VBTQuery

/// Puts each station's readiness on the board: the recorder computes it when one of a session's
/// first sets ends (docs/detection.md, "Readiness"), so the feed asks for an athlete's latest
/// after each set of theirs ends, and again every few seconds, `tries` questions in all: the
/// recorder may not have stored the set yet, and an early answer may be the previous set's.
/// A few questions per set, not a poll per station.
struct ReadinessFeed {
    let live: LiveBoard
    let queries: QueryWorker
    /// Only a session begun this recently is today's.
    let freshS = 12.0 * 3_600
    /// Seconds between the questions about one set, and how many at most.
    let againAfterS = 2.0
    let tries = 5

    func run() async {
        // Per station: the athlete and last set asked about, questions left, when to ask next.
        var asked: [String: (key: String, left: Int, next: Double)] = [:]
        while !Task.isCancelled {
            let now = Date().timeIntervalSince1970
            for state in live.snapshot.stations.values {
                guard let athlete = state.athlete else { continue }
                let key = athlete + "/" + (state.lastSet?.setId ?? "")
                if asked[state.station]?.key != key { asked[state.station] = (key, tries, now) }
                guard let entry = asked[state.station], entry.left > 0, now >= entry.next else { continue }
                asked[state.station] = (key, entry.left - 1, now + againAfterS)
                // Sessions begun before now: the bound also makes each question its own, where the
                // worker would give the same arguments its cached answer for 10 s.
                let args = ReadinessArgs(athlete: athlete, untilTs: Date().timeIntervalSince1970, limit: 1)
                let rows = try? await queries.ask(.readiness, args)
                guard let row = rows?.first, row.sessionStartedTs >= Date().timeIntervalSince1970 - freshS else { continue }
                let line = ReadinessLine(athlete: athlete, verdict: row.assessment.verdict.rawValue, text: row.text)
                live.update { board, _ in board.note(readiness: line, station: state.station) }
            }
            try? await Task.sleep(nanoseconds: 500_000_000)
        }
    }
}
