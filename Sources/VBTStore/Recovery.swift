import Logging
import VBTBus
import VBTQuery
import VBTWire

/// The recorder's side of replay (proto/replay.md): it learns from the
/// producers' heartbeats where each stream can be asked for, turns a stream's
/// silent tail into a hole, fetches every hole from the producer's journal,
/// and counts what no journal holds any more as lost. A hole no journal answers
/// for is counted lost after a bounded wait (`HolePatience`), so none stays
/// outstanding for good: the heartbeat's `inputs.lost` grows and the notifier
/// raises `data-lost`. The holes live in the database (`Ingestor`); who answers for
/// each stream, asking, replies and when to give up are the `RecoveryEngine` the in-order
/// input drives too. Owned by the recorder's loop thread; never waits.
final class RecorderRecovery {
    private let ingestor: Ingestor
    private let logger: Logger
    private let clock: any BusClock
    /// Who answers for each stream (its producers start from the database, so a restarted
    /// recorder still knows), asking and replies, and the verdict on a hole that waited. A hole
    /// in a stream whose producer keeps no journal, and that no producer offers, is given up at
    /// the next pass: waiting would keep it outstanding for good, and every pass would look
    /// through the holes of a thousand streams again.
    private let engine: RecoveryEngine
    /// How long holes wait, and when each stream's began to (monotonic).
    private let patience: HolePatience
    private var holeSince: [String: Double] = [:]
    /// Per stream: the question asked and when to give up on it.
    private var asked: [String: (id: String, range: ClosedRange<UInt64>, deadline: Double)] = [:]
    /// Per stream: not asked again before this time (a reply's messages are being stored:
    /// a little over the recorder's 100 ms batch, so the hole has shrunk when asked again).
    private var calm: [String: Double] = [:]
    private var tails: [(src: String, after: UInt64, through: UInt64, ts: Double)] = []
    private var nextFetch = 0.0
    /// The stream asked for last: the next pass starts after it.
    private var lastAsked = ""
    private var catchUp = CatchUpReport()
    /// Questions asked, and messages received in replies.
    private(set) var requests = 0
    private(set) var replayed = 0
    /// Questions in flight at most, and seqs per question.
    static let maxAsked = 16
    static let maxRange: UInt64 = 1_000
    static let answerTimeoutS = 5.0
    static let calmS = 0.25
    /// How long a stream whose hole runs past its producer's journal waits before it is asked again.
    static let aheadCalmS = 5.0
    /// Streams already reported as running ahead of their producer (logged once each).
    private var warnedAhead: Set<String> = []

    init(transport: any BusTransport, ingestor: Ingestor, patience: HolePatience = .history, logger: Logger) throws(StoreError) {
        self.patience = patience
        self.ingestor = ingestor
        self.logger = logger
        clock = transport.clock
        engine = RecoveryEngine(transport: transport, logger: logger, producers: try ingestor.producers())
    }

    /// Per stream: its producer (the heartbeat's station).
    private var producers: [String: String] { engine.producers }

    /// Takes note of a heartbeat: a journalling producer's offer says where to
    /// ask, and whether a stream has a tail this recorder never received.
    /// `seen` is the last seq the subscriber received of a stream.
    func note(heartbeat message: BusMessage, seen: (String) -> UInt64?) {
        // Streams of types not kept (status, timers, heartbeats...) are not tracked: no tail, no hole.
        engine.note(heartbeat: message, tracks: { ingestor.keeps(src: $0) }) { src, last, _ in
            let have = max(seen(src) ?? 0, (try? ingestor.storedLastSeq(src)) ?? 0)
            guard last > have else { return }
            if let index = tails.firstIndex(where: { $0.src == src }) {
                tails[index].through = max(tails[index].through, last)
            } else {
                tails.append((src, have, last, message.envelope.ts))
            }
        }
    }

    /// One pass: records tails (`flush` must leave nothing pending first),
    /// takes the replies that came, asks for holes, gives up on silent
    /// questions. Returns the replayed messages, for the ingestor.
    func step(flush: () -> Bool) -> [BusMessage] {
        recordTails(flush: flush)
        var fetched: [BusMessage] = []
        engine.takeReplies { reply, _ in fetched += take(reply) }
        let now = clock.monotonicSeconds()
        for (src, question) in asked where now > question.deadline {
            asked[src] = nil
            logger.info("replay request unanswered; asking again later", metadata: ["src": "\(src)"])
        }
        if now >= nextFetch {
            nextFetch = now + 0.2
            giveUpStale(now: now)
            ask(now: now)
            let holes = (try? ingestor.streamHoles()) ?? [:]
            let missing = !tails.isEmpty || holes.contains { ingestor.keeps(src: $0.key) && producers[$0.key] != nil }
            catchUp.update(missing: missing, recovered: ingestor.counters.recovered, lost: ingestor.counters.lost, clock: clock, logger: logger)
        }
        return fetched
    }

    /// Gives up the holes that waited past their bound (`HolePatience`): counted lost, in one
    /// transaction per reason, one line each with the first few streams named. A stream whose
    /// producer keeps no journal goes at once; one no producer offers, or whose producer is heard
    /// while its endpoint answers nothing, after half a minute; one whose producer is silent (a
    /// partitioned station), once its journal would no longer hold the hole anyway.
    private func giveUpStale(now: Double) {
        guard let holes = try? ingestor.streamHoles() else { return }
        var byReason: [String: [String]] = [:]
        for src in holes.keys where ingestor.keeps(src: src) {
            let since = holeSince[src] ?? now
            holeSince[src] = since
            if case .giveUp(let reason) = engine.historyVerdict(src, since: since, now: now, patience: patience) { byReason[reason, default: []].append(src) }
        }
        if holeSince.count > holes.count { holeSince = holeSince.filter { holes[$0.key] != nil } }
        for (reason, list) in byReason {
            let sources = list.sorted()
            do {
                let lost = try ingestor.giveUpHoles(of: sources)
                for src in sources {
                    asked[src] = nil
                    holeSince[src] = nil
                }
                logger.error(
                    "messages lost for good: no journal answered for them",
                    metadata: [
                        "reason": "\(reason)", "streams": "\(sources.count)", "count": "\(lost)",
                        "src": "\(sources.prefix(Self.tailsNamed).joined(separator: ","))\(sources.count > Self.tailsNamed ? ",..." : "")",
                    ])
            } catch {
                logger.warning("loss not recorded; will retry", metadata: ["streams": "\(sources.count)", "error": "\(error.message)"])
            }
        }
    }

    private func recordTails(flush: () -> Bool) {
        guard !tails.isEmpty, flush() else { return }
        let list = tails.map { tail in
            Ingestor.Tail(
                src: tail.src, topic: String(streamTopic(tail.src)), after: tail.after, through: tail.through, ts: tail.ts, producer: producers[tail.src])
        }
        do { try ingestor.addTails(list) } catch {
            logger.warning("tails not recorded; will retry", metadata: ["streams": "\(list.count)", "error": "\(error.message)"])
            return
        }
        // Each stream named for the first few; past them, how many (a disconnected recorder
        // learns of a thousand at once, and a line each was a line a stream a heartbeat).
        for (index, tail) in tails.enumerated() {
            ingestor.tailRecorded(tail.src)
            if index < Self.tailsNamed {
                logger.notice(
                    "stream stopped short of what its producer sent; fetching the rest",
                    metadata: ["src": "\(tail.src)", "from": "\(tail.after + 1)", "through": "\(tail.through)"])
            }
        }
        if tails.count > Self.tailsNamed {
            logger.notice(
                "more streams stopped short of what their producers sent; fetching the rest",
                metadata: [
                    "streams": "\(tails.count - Self.tailsNamed)",
                    "messages": "\(tails.dropFirst(Self.tailsNamed).reduce(0) { $0 + Int($1.through - $1.after) })",
                ])
        }
        tails.removeAll()
    }

    /// Tails recorded at once that are each named in the log.
    static let tailsNamed = 5

    private func ask(now: Double) {
        guard asked.count < Self.maxAsked, let holes = try? ingestor.streamHoles() else { return }
        // Round robin from where the last pass stopped, so many holes of some
        // producers never starve the others'.
        let sorted = holes.filter { ingestor.keeps(src: $0.key) }.sorted { $0.key < $1.key }
        let start = sorted.firstIndex { $0.key > lastAsked } ?? 0
        for (src, list) in sorted[start...] + sorted[..<start] where asked[src] == nil && calm[src, default: 0] <= now {
            guard asked.count < Self.maxAsked, let first = list.first else { continue }
            let range = first.lowerBound...min(first.upperBound, first.lowerBound + Self.maxRange - 1)
            // Nil without a usable endpoint, or when it cannot be queued yet (no connection).
            guard let question = engine.ask(src, range: range, now: now) else { continue }
            asked[src] = (question.id, range, now + Self.answerTimeoutS)
            lastAsked = src
            requests += 1
        }
    }

    /// The messages of one reply; what the journal no longer holds is counted lost.
    private func take(_ reply: ReplayReply) -> [BusMessage] {
        let src = reply.header.src
        guard let question = asked[src], question.id == reply.header.id else {
            // A late answer to a question since timed out (a producer slow to answer would
            // otherwise be asked again and again, each answer late and dropped): its messages
            // still fill holes (the ingestor stores each seq once); nothing is counted lost from it.
            let late = RecoveryEngine.messages(of: reply)
            replayed += late.count
            return late
        }
        asked[src] = nil
        calm[src] = clock.monotonicSeconds() + Self.calmS
        let messages = RecoveryEngine.messages(of: reply)
        let returned = Set(messages.map(\.envelope.seq))
        replayed += messages.count
        let end = reply.header.lostThrough(asked: question.range, live: engine.isLive(src))
        // Past a live stream's journal end: the real messages fill that hole as they come. Asked again later, not at once.
        if end < question.range.upperBound, !reply.header.more, let keptTo = reply.header.keptTo {
            calm[src] = clock.monotonicSeconds() + Self.aheadCalmS
            if !warnedAhead.contains(src) {
                warnedAhead.insert(src)
                logger.warning(
                    "a stream's seq ran ahead of what its producer has published (forged or corrupt?); not counted lost",
                    metadata: ["src": "\(src)", "published_through": "\(keptTo)"])
            }
        }
        var runStart: UInt64?
        if end >= question.range.lowerBound {
            for seq in question.range.lowerBound...end {
                if returned.contains(seq) {
                    if let start = runStart { markLost(src, start...(seq - 1)) }
                    runStart = nil
                } else if runStart == nil {
                    runStart = seq
                }
            }
            if let start = runStart { markLost(src, start...end) }
        }
        return messages
    }

    private func markLost(_ src: String, _ range: ClosedRange<UInt64>) {
        do {
            try ingestor.markLost(src: src, range: range)
            logger.error(
                "messages lost: no journal holds them any more",
                metadata: ["src": "\(src)", "from": "\(range.lowerBound)", "through": "\(range.upperBound)", "count": "\(range.count)"])
        } catch {
            logger.warning("loss not recorded; will retry", metadata: ["src": "\(src)", "error": "\(error.message)"])
        }
    }
}
