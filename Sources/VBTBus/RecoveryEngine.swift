import Logging
import VBTWire

/// The part of fetching missed messages (proto/replay.md) that every consumer shares: the
/// in-order input (`InOrderInput`, its holes in memory) and the session-recorder (its holes in
/// its database) both drive one. It learns from heartbeats who produces each stream, where that
/// producer answers, with which key, the instance it runs as and whether it keeps a journal at
/// all; it asks (one client per endpoint, an endpoint no socket may use logged once and skipped),
/// numbers the questions, takes the replies and notes when each endpoint answered; and it judges
/// when a hole has waited long enough to be given up as lost. Which seqs are missing, and what a
/// reply fills, stay with the consumer that holds them. Owned by the consumer's loop thread;
/// never waits.
package final class RecoveryEngine {
    /// A question asked: its id (what the reply names), where, and its number in the order asked.
    package struct Question: Sendable, Equatable {
        package var id: String
        package var endpoint: String
        package var number: UInt64
    }

    private let transport: any BusTransport
    private let logger: Logger
    private let clock: any BusClock
    /// Per stream: its producer (the heartbeat's station); per producer: where it answers.
    package private(set) var producers: [String: String]
    package private(set) var endpoints: [String: String]
    /// Per producer, the instance it runs as now (its heartbeat's `src` before the slash).
    private var instances: [String: String] = [:]
    /// Instances whose heartbeat came without a replay offer: they keep no journal.
    private var journalless: Set<String> = []
    private var clients: [String: ReplayClient] = [:]
    /// Offered endpoints no socket may use (off this computer without a key: proto/security.md), logged once each.
    private var unusable: Set<String> = []
    /// Per endpoint off this computer, the CURVE key its producer offers it with.
    private var serverKeys: [String: String] = [:]
    /// When each producer was heard and how long each endpoint has answered nothing meanwhile.
    package private(set) var liveness = ProducerLiveness()
    /// Per endpoint, when it last answered a question (monotonic).
    package private(set) var lastAnswer: [String: Double] = [:]
    /// Questions asked so far, and per endpoint the number of the latest-asked question it has
    /// answered: a producer answers its questions in the order they came, so one numbered after
    /// it is still in line.
    private var questionsAsked: UInt64 = 0
    private var answeredNumber: [String: UInt64] = [:]

    /// Starts knowing `producers` (per stream) and `endpoints` (per producer), as a restarted consumer kept them.
    package init(transport: any BusTransport, logger: Logger, producers: [String: String] = [:], endpoints: [String: String] = [:]) {
        self.transport = transport
        self.logger = logger
        clock = transport.clock
        self.producers = producers
        self.endpoints = endpoints
    }

    // MARK: Heartbeats

    /// Takes note of a producer's heartbeat: it was heard; with an offer, where it answers, with
    /// which key, as which instance, and for each stream `tracks` accepts, that it answers for it
    /// (`stream` is told the stream, the last seq sent and the producer). Without an offer its
    /// instance keeps no journal. Returns whether the message was a heartbeat.
    @discardableResult
    package func note(
        heartbeat message: BusMessage, tracks: (String) -> Bool, stream: (_ src: String, _ last: UInt64, _ producer: String) -> Void
    ) -> Bool {
        guard let heartbeat = try? message.payload(as: HeartbeatMessage.self) else { return false }
        let producer = message.envelope.station
        let instance = String(streamInstance(message.envelope.src))
        liveness.heard(producer, endpoint: heartbeat.replay?.endpoint, at: clock.monotonicSeconds())
        guard let offer = heartbeat.replay else {
            journalless.insert(instance)
            return true
        }
        journalless.remove(instance)
        endpoints[producer] = offer.endpoint
        noteKey(offer)
        instances[producer] = instance
        for (src, last) in offer.lastSeq where last > 0 && tracks(src) {
            producers[src] = producer
            stream(src, UInt64(last), producer)
        }
        return true
    }

    /// Remembers the key an endpoint is offered with; a new key makes a new client, and an
    /// endpoint that could not be used is tried again (its producer came back with a key).
    private func noteKey(_ offer: HeartbeatMessage.ReplayOffer) {
        guard serverKeys[offer.endpoint] != offer.serverKey else { return }
        serverKeys[offer.endpoint] = offer.serverKey
        clients[offer.endpoint] = nil
        unusable.remove(offer.endpoint)
    }

    /// Where `src`'s producer answers (nil: no heartbeat has offered its journal).
    package func endpoint(of src: String) -> String? { producers[src].flatMap { endpoints[$0] } }

    /// Whether `src`'s instance said in its heartbeat that it keeps no journal.
    package func isJournalless(_ src: String) -> Bool { journalless.contains(String(streamInstance(src))) }

    /// Whether `endpoint` may not be used from here.
    package func isUnusable(_ endpoint: String) -> Bool { unusable.contains(endpoint) }

    /// Whether `src` belongs to the instance its producer runs as now (so it may still grow).
    package func isLive(_ src: String) -> Bool {
        guard let producer = producers[src], let instance = instances[producer] else { return false }
        return streamInstance(src) == instance
    }

    // MARK: Asking and answers

    /// Asks `src`'s producer for `range` at `now`. Nil when no usable endpoint answers for it or the
    /// question cannot be queued yet (no connection); the endpoint counts as asked all the same, as
    /// far as its liveness goes. An endpoint no socket may use is marked so, logged once.
    package func ask(_ src: String, range: ClosedRange<UInt64>, now: Double) -> Question? {
        guard let endpoint = endpoint(of: src), !unusable.contains(endpoint) else { return nil }
        do {
            let client = try clients[endpoint] ?? ReplayClient(transport: transport, endpoint: endpoint, serverKey: serverKeys[endpoint])
            clients[endpoint] = client
            liveness.asked(endpoint, at: now)
            guard let id = try client.request(src: src, from: Int(range.lowerBound), to: Int(range.upperBound)) else { return nil }
            questionsAsked += 1
            return Question(id: id, endpoint: endpoint, number: questionsAsked)
        } catch {
            if unusable.insert(endpoint).inserted {
                logger.warning("replay endpoint unusable", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            }
            return nil
        }
    }

    /// Hands `take` every reply that has come, with the endpoint it came from, noting that each answered.
    package func takeReplies(_ take: (ReplayReply, String) -> Void) {
        for (endpoint, client) in clients {
            while let reply = try? client.nextReply() {
                lastAnswer[endpoint] = clock.monotonicSeconds()
                liveness.answered(endpoint)
                take(reply, endpoint)
            }
        }
    }

    /// The reply to question `number` at `endpoint` came: those asked there before it are answered too.
    package func answered(_ endpoint: String, number: UInt64) {
        answeredNumber[endpoint] = max(answeredNumber[endpoint] ?? 0, number)
    }

    /// Whether question `number`, asked at `askedAt`, is still in line at `endpoint`: the endpoint
    /// has answered since, questions asked before it (a slow link works through them in order).
    package func isInLine(_ endpoint: String, askedAt: Double, number: UInt64) -> Bool {
        (lastAnswer[endpoint] ?? 0) > askedAt && (answeredNumber[endpoint] ?? 0) < number
    }

    /// A reply's messages that decode and belong to the stream it answers for, in the reply's order.
    package static func messages(of reply: ReplayReply) -> [BusMessage] {
        reply.messages.compactMap { frames in
            guard let message = try? decodeMessage(topic: frames.topic, body: frames.body), message.envelope.src == reply.header.src else { return nil }
            return message
        }
    }

    // MARK: Giving up

    /// The in-order input's judgement of a hole in `src` that has waited `waited` s and
    /// `beatsWaited` of the bus's heartbeats (its patience in `settings`): whether it is given up
    /// now. A stream no heartbeat has offered is not waited for long (its producer may keep no
    /// journal, and is given up at once once its heartbeat says so); an offered one up to
    /// `giveUpS` of the time its producer was heard (`ProducerLiveness.heardSeconds`), longer
    /// while its producer answers others first (`inLine`) or answered before on a slow link,
    /// never past `maxWaitS`. `unanswered`: its last question went unanswered;
    /// `repeats`: how many times in a row.
    package func liveGivesUp(
        _ src: String, waited: Double, beatsWaited: Int, unanswered: Bool, repeats: Int, now: Double, settings: InOrderInput.Settings
    ) -> Bool {
        let endpoint = endpoint(of: src)
        guard producers[src] != nil else {
            return waited > settings.unknownProducerS && beatsWaited >= settings.unknownProducerBeats || waited > settings.giveUpS
                || isJournalless(src)
        }
        if waited > settings.maxWaitS { return true }
        // Its producer's silences (a partition, a flapping link, the bus down) do not count.
        let heard = producers[src].map { liveness.heardSeconds($0, since: now - waited, now: now) } ?? waited
        // Waiting for its turn to ask (`maxQuestions`) while its producer answers the others,
        // and never left unanswered itself: it waits on.
        let inLine = !unanswered && endpoint.flatMap { lastAnswer[$0] }.map { now - $0 < settings.answerTimeoutS } == true
        // Its question unanswered at an endpoint that has answered before: the link is slow, not
        // closed (a station's journal fetched over a throttled Wi-Fi link answered after 16 s),
        // so it waits up to `maxWaitS`, asked again less and less often.
        let slowLink = repeats > 0 && endpoint.map { lastAnswer[$0] != nil } == true
        return heard > settings.giveUpS && !inLine && !slowLink
    }

    /// The history's judgement (`HolePatience`, `ProducerLiveness`) of a hole in `src` missing since `since`.
    package func historyVerdict(_ src: String, since: Double, now: Double, patience: HolePatience) -> HoleVerdict {
        let endpoint = endpoint(of: src)
        return liveness.verdict(
            since: since, now: now, producer: producers[src], endpoint: endpoint, journalless: isJournalless(src),
            unusable: endpoint.map { unusable.contains($0) } ?? false, patience: patience)
    }
}
