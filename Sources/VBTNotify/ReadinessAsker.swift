import Foundation
import Logging
import VBTBus
import VBTQuery

/// Asks the session-recorder for today's readiness (its `readiness` query) after one of an
/// exercise's first sets ends at a station with load advice (docs/programs/notifier.md, "Load
/// advice"). Never waits: a question goes out without blocking and its answer is taken whenever
/// the loop next looks, so a slow or absent recorder never holds up the bus.
///
/// The recorder stores the figure when it takes the same set's end, which may be after the
/// question: a station is asked about up to `tries` times, `againAfterS` apart, until an answer
/// has read that set (the stored `ts` is the set message's). Each answer of today's session of
/// the exercise is handed on; the notifier keeps the latest. Owned by the loop's thread.
final class ReadinessAsker {
    /// Questions about one set at most, and the seconds between them (also how long one answer
    /// is waited for), as the coach console asks.
    static let tries = 5
    static let againAfterS = 2.0
    /// Only a session begun this recently is today's.
    static let freshS = 12.0 * 3_600

    private struct Pending {
        var question: ReadinessQuestion
        var left = ReadinessAsker.tries
        var next: Double
        /// The request in flight and when to stop waiting for it.
        var id: String?
        var deadline = 0.0
    }

    private let client: QueryClient?
    private let endpoint: String
    private let clock: any BusClock
    private let logger: Logger
    private var pending: [String: Pending] = [:]
    /// Whether the one line about a recorder that does not answer was logged.
    private var toldAbsent = false

    /// Asks at `endpoint` on `transport` (nil: never asks).
    init(transport: any BusTransport, endpoint: String?, logger: Logger) {
        clock = transport.clock
        self.logger = logger
        self.endpoint = endpoint ?? "none"
        var client: QueryClient? = nil
        var failure: String? = nil
        if let endpoint {
            do { client = try QueryClient(transport: transport, endpoint: endpoint, timeoutS: Self.againAfterS) } catch { failure = "\(error)" }
        }
        self.client = client
        if let failure { tellAbsent(failure) }
    }

    /// Questions waiting for an answer or their next try.
    var waiting: Int { pending.count }

    /// Asks about `question`'s station from now on (a later set's question replaces an earlier one).
    func ask(_ question: ReadinessQuestion) {
        guard client != nil else { return }
        pending[question.station] = Pending(question: question, next: clock.monotonicSeconds())
    }

    /// Takes the answers that came (never waits) and sends the questions due; returns each
    /// answer about today's session of the exercise asked about, with its station.
    func poll() -> [(station: String, readiness: SessionReadiness)] {
        guard let client, !pending.isEmpty else { return [] }
        var out: [(station: String, readiness: SessionReadiness)] = []
        let wall = clock.wallSeconds()
        do {
            while let reply = try client.nextReply() {
                guard let station = pending.first(where: { $0.value.id == reply.id })?.key, var entry = pending[station] else { continue }
                entry.id = nil
                pending[station] = entry
                let rows: [SessionReadiness]
                do { rows = try QueryClient.decode(reply.data, of: .readiness) } catch {
                    // A recorder that refuses the query (one from before readiness) will not change its mind.
                    pending[station] = nil
                    tellAbsent("\(error)")
                    continue
                }
                let question = entry.question
                guard let row = rows.first(where: { $0.exercise == question.exercise && $0.sessionStartedTs >= wall - Self.freshS }) else { continue }
                out.append((station, row))
                if row.ts >= question.setTs - 1e-3 {
                    pending[station] = nil
                    logger.info(
                        "readiness from the session-recorder",
                        metadata: ["station": "\(station)", "athlete": "\(question.athlete)", "exercise": "\(question.exercise)", "readiness": "\(row.text)"])
                }
            }
        } catch {
            tellAbsent("\(error)")
        }
        let now = clock.monotonicSeconds()
        for station in pending.keys.sorted() {
            guard var entry = pending[station] else { continue }
            if entry.id != nil {
                guard now >= entry.deadline else { continue }
                entry.id = nil
                tellAbsent("no answer within \(whole(Self.againAfterS)) s")
            }
            guard entry.left > 0 else {
                pending[station] = nil
                continue
            }
            if now >= entry.next {
                entry.left -= 1
                entry.next = now + Self.againAfterS
                let question = entry.question
                let args = ReadinessArgs(athlete: question.athlete, exercise: question.exercise, sinceTs: wall - Self.freshS, limit: 1)
                do {
                    entry.id = try client.request(.readiness, args)
                    entry.deadline = now + Self.againAfterS
                } catch {
                    tellAbsent("\(error)")
                }
            }
            pending[station] = entry
        }
        return out
    }

    /// Says once per process that readiness is not coming, and that the notifier carries on.
    private func tellAbsent(_ reason: String) {
        guard !toldAbsent else { return }
        toldAbsent = true
        logger.notice(
            "today's readiness not known: the session-recorder does not answer; load advice goes on without it (--query-endpoint, VBT_QUERY_ENDPOINT)",
            metadata: ["query_endpoint": "\(endpoint)", "reason": "\(reason)"])
    }
}
