import Foundation
import VBTConsole
import VBTQuery

/// Puts each station's readiness on the board: the recorder computes it when one of a session's
/// first sets ends (docs/detection.md, "Readiness"), so the feed asks for an athlete's latest
/// after each set of theirs ends, and once more a few seconds later for a set the recorder
/// had not stored yet. One question per set, not a poll per station.
struct ReadinessFeed {
    let live: LiveBoard
    let queries: QueryWorker
    /// Only a session begun this recently is today's.
    let freshS = 12.0 * 3_600
    /// The second question's delay.
    let againAfterS = 3.0

    func run() async {
        // Per station: the athlete and last set asked about, and when to ask again (nil: done).
        var asked: [String: (key: String, again: Double?)] = [:]
        while !Task.isCancelled {
            let now = Date().timeIntervalSince1970
            for state in live.snapshot.stations.values {
                guard let athlete = state.athlete else { continue }
                let key = athlete + "/" + (state.lastSet?.setId ?? "")
                var ask = false
                if asked[state.station]?.key != key {
                    asked[state.station] = (key, now + againAfterS)
                    ask = true
                } else if let again = asked[state.station]?.again, now >= again {
                    asked[state.station] = (key, nil)
                    ask = true
                }
                guard ask else { continue }
                let rows = try? await queries.ask(.readiness, ReadinessArgs(athlete: athlete, limit: 1), as: [SessionReadiness].self)
                guard let row = rows?.first, row.sessionStartedTs >= Date().timeIntervalSince1970 - freshS else { continue }
                let line = ReadinessLine(athlete: athlete, verdict: row.assessment.verdict.rawValue, text: row.text)
                live.update { board, _ in board.note(readiness: line, station: state.station) }
            }
            try? await Task.sleep(nanoseconds: 500_000_000)
        }
    }
}
