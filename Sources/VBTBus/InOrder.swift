import Foundation
import Logging
import VBTWire

/// Delivers each input stream's messages in seq order with none missing, for
/// a consumer whose results depend on order (the rep detector, the posture
/// evaluator, the notifier): a message ahead of its stream's next seq is held
/// while the seqs between are fetched from the producer's journal
/// (proto/replay.md); a stream that stops short of what its producer's
/// heartbeat says it sent (a silent tail) is fetched too. What no journal
/// holds any more, or what no producer answers for within `giveUpS`, is
/// counted lost and skipped, loudly. Owned by the consumer's loop thread;
/// never waits.
///
/// Where to ask comes from heartbeats: a journalling producer's offer names
/// its endpoint and the streams it holds. A consumer resuming from a
/// checkpoint passes the positions it had reached (`positions`), and then
/// also fetches streams it has never seen from their first seq (they began
/// while it was down); a consumer starting fresh takes each stream from the
/// first message it receives.
public final class InOrderInput {
    /// How long recovery waits.
    public struct Settings: Sendable {
        /// How long a hole may wait for a producer that answers before it is counted lost: seconds
        /// during which the producer is heard (its silences, past 3 s between heartbeats, pause it).
        public var giveUpS = 15.0
        /// The longest any hole waits without a reply that fills part of it, even while its
        /// producer answers other streams first (or answers it with nothing): every wait is bounded.
        public var maxWaitS = 60.0
        /// How long a hole waits when no heartbeat has said who can answer for its stream.
        public var unknownProducerS = 3.0
        /// ...and until the bus has beaten this many times since (its heartbeat goes every second,
        /// through the same queue as the producers' own): a consumer working through a backlog
        /// would otherwise give up a stream whose producer's offer is queued behind the hole, its
        /// own clock running on meanwhile (a posture-evaluator the bus had disconnected at 500
        /// stations lost 950,000 messages its producer could have given it that way). Past
        /// `giveUpS` the hole is given up all the same.
        public var unknownProducerBeats = 3
        /// How long one question may go unanswered before it is asked again.
        public var answerTimeoutS = 3.0
        /// Most seqs asked for in one question.
        public var maxRange: UInt64 = 1_000
        /// Most messages held behind one stream's hole (beyond: the hole is given up).
        public var maxHeld = 100_000
        /// Least time between two recovery passes over the streams that miss
        /// something (asking, asking again, giving up), s. Each pass looks at every
        /// such stream: run for every message, it took a consumer the bus had
        /// disconnected (every stream missing what the bus dropped) past its core,
        /// at 1,000 stations. The first pass after none missed anything
        /// runs at once; what waits here is a fraction of `answerTimeoutS`.
        public var passIntervalS = 0.01
        /// Most messages held over every stream: the memory budget of a consumer
        /// that fell behind (some 1.5 KB a message, so about 30 MB). Beyond it the
        /// streams holding most give up their holes, counted lost and logged, until an
        /// eighth of it is free again.
        public var maxHeldTotal = 20_000
        /// Most questions in flight at once, over every stream. Each answer holds up to
        /// `maxRange` messages: a consumer the bus had disconnected at 500 stations asked for
        /// every stream's hole at once and held 337 MB of answers. A stream
        /// waiting for its turn while its producer answers others is not given up.
        public var maxQuestions = 16
        /// Creates the defaults.
        public init() {}
    }

    /// What recovery did so far.
    public struct Counters: Sendable, Equatable {
        /// Messages fetched from journals and delivered.
        public var recovered = 0
        /// Messages counted lost: no journal held them, or nobody answered in time.
        public var lost = 0
        /// Questions asked.
        public var requests = 0
        /// Messages received again after their seq was delivered (dropped).
        public var duplicates = 0
        /// Messages dropped because their `seq` ran far past what their
        /// producer has published (forged or corrupt: they would silence the stream).
        public var ahead = 0
        /// Holes given up because what was held passed `maxHeldTotal` (their messages are in `lost`).
        public var overBudget = 0
    }

    private struct Stream {
        /// The next seq to deliver.
        var next: UInt64
        /// Messages received ahead of `next`, by seq.
        var held = HeldMessages()
        /// The last seq the producer says it sent (its heartbeat), when above what was received.
        var tail: UInt64 = 0
        /// The question in flight: its id, range and deadline.
        var asked: (id: String, range: ClosedRange<UInt64>, deadline: Double, endpoint: String)?
        /// When the question in flight was asked (monotonic), and its number in the order asked.
        var askedAt = 0.0
        var askedNumber: UInt64 = 0
        /// Since when `next` has been missing (monotonic), while it is.
        var missingSince: Double?
        /// Whether its last question went unanswered past its deadline (until an answer comes),
        /// and how many times in a row: each is given twice as long as the one before, up to 8x.
        var unanswered = false
        var repeats = 0
        /// The bus's heartbeats noted when it began to miss something (`InOrderInput.busBeats`).
        var missingBeat = 0
        /// Taken from its start by a resumed consumer that had never seen it:
        /// a start the journal no longer holds may predate the checkpoint, so
        /// it is skipped, not counted lost (the session-recorder counts what
        /// is lost for good).
        var unseen = false

        /// The last seq this consumer knows exists beyond `next - 1`, if any.
        var wanted: UInt64? {
            if let heldFirst = held.first { return heldFirst > next ? heldFirst - 1 : nil }
            return tail >= next ? tail : nil
        }
    }

    /// Messages held behind a stream's hole, by seq, and the lowest seq held (`Stream.wanted`,
    /// asked for every stream missing something at every recovery pass). Found by a scan of
    /// every key, each pass cost as much as all that was held: a posture-evaluator the bus
    /// had disconnected at 500 stations spent 45 % of its time in its in-order input. Kept here, it is looked for again only when it is taken out, a few seqs on first
    /// (what is delivered is taken in order).
    struct HeldMessages {
        private var bySeq: [UInt64: BusMessage] = [:]
        /// The lowest seq held.
        private(set) var first: UInt64?

        var count: Int { bySeq.count }
        var isEmpty: Bool { bySeq.isEmpty }
        var keys: Dictionary<UInt64, BusMessage>.Keys { bySeq.keys }
        subscript(seq: UInt64) -> BusMessage? { bySeq[seq] }

        mutating func insert(_ message: BusMessage, at seq: UInt64) {
            bySeq[seq] = message
            if first.map({ seq < $0 }) ?? true { first = seq }
        }

        @discardableResult
        mutating func remove(_ seq: UInt64) -> BusMessage? {
            guard let message = bySeq.removeValue(forKey: seq) else { return nil }
            if seq == first { first = lowest(above: seq) }
            return message
        }

        /// The lowest seq held, every one of which is above `seq`.
        private func lowest(above seq: UInt64) -> UInt64? {
            guard !bySeq.isEmpty else { return nil }
            for probe in seq + 1...seq + 8 where bySeq[probe] != nil { return probe }
            return bySeq.keys.min()
        }
    }

    /// The streams, and which of them miss something: the recovery pass, run
    /// for every message received, looks at those alone (a thousand stations'
    /// streams are not walked, nor sorted, per message).
    private struct StreamTable {
        private(set) var all: [String: Stream] = [:]
        private(set) var missing: Set<String> = []
        /// Messages held over every stream.
        private(set) var heldTotal = 0

        subscript(src: String) -> Stream? {
            get { all[src] }
            set {
                let old = newValue.map { all.updateValue($0, forKey: src) } ?? all.removeValue(forKey: src)
                heldTotal += (newValue?.held.count ?? 0) - (old?.held.count ?? 0)
                if newValue?.missingSince != nil { missing.insert(src) } else { missing.remove(src) }
            }
        }

        /// Delivers `seq` the common way in place, with one lookup: it is the next of a stream
        /// that holds nothing and misses nothing, and whose producer has said of nothing after
        /// it. False (nothing changed) otherwise: the caller takes the general way. Taking the
        /// stream out and putting it back, twice, hashed its name eight times a message, in
        /// every consumer.
        mutating func advanceInOrder(_ src: String, seq: UInt64) -> Bool {
            guard let index = all.index(forKey: src) else { return false }
            return Self.advance(&all.values[index], seq: seq)
        }

        private static func advance(_ stream: inout Stream, seq: UInt64) -> Bool {
            guard stream.next == seq, stream.held.isEmpty, stream.missingSince == nil, stream.tail <= seq else { return false }
            stream.next = seq + 1
            stream.asked = nil
            return true
        }

        // Below, a stream is reached through `all.values[index]` passed inout (the
        // dictionary's modify accessor: in place). Read alone, `all.values[index].next` goes
        // through the getter, which copies the whole stream out (its held messages retained
        // and released): four such reads a message were a fifth of a posture-evaluator behind
        // its input at 500 stations.

        /// Changes `src`'s stream in place, if there is one; what `change` returns.
        @discardableResult
        mutating func update<R>(_ src: String, _ change: (inout Stream) -> R) -> R? {
            guard let index = all.index(forKey: src) else { return nil }
            let (result, heldChange, wasMissing, isMissing) = Self.changing(&all.values[index], change)
            heldTotal += heldChange
            if isMissing != wasMissing {
                if isMissing { missing.insert(src) } else { missing.remove(src) }
            }
            return result
        }

        private static func changing<R>(_ stream: inout Stream, _ change: (inout Stream) -> R) -> (R, heldChange: Int, wasMissing: Bool, isMissing: Bool) {
            let held = stream.held.count
            let wasMissing = stream.missingSince != nil
            let result = change(&stream)
            return (result, stream.held.count - held, wasMissing, stream.missingSince != nil)
        }

        /// Takes `src`'s stream out, so what it holds is changed in place, not copied; put it back with the subscript.
        mutating func take(_ src: String) -> Stream? {
            missing.remove(src)
            let stream = all.removeValue(forKey: src)
            heldTotal -= stream?.held.count ?? 0
            return stream
        }

        /// The streams holding anything, those holding most first (ties by name). One that holds
        /// anything misses what comes before it: those that miss something are looked through,
        /// not every stream of a thousand stations.
        mutating func holdingMostFirst() -> [String] {
            var holding = missing.map { ($0, heldCount($0)) }.filter { $0.1 > 0 }
            if holding.isEmpty {
                for index in all.indices where Self.read(&all.values[index], { $0.held.count }) > 0 {
                    holding.append((all.keys[index], Self.read(&all.values[index], { $0.held.count })))
                }
            }
            return holding.sorted { ($0.1, $1.0) > ($1.1, $0.0) }.map(\.0)
        }

        /// How many messages `src` holds.
        mutating func heldCount(_ src: String) -> Int {
            guard let index = all.index(forKey: src) else { return 0 }
            return Self.read(&all.values[index], { $0.held.count })
        }

        /// Whether `src` has a question in flight at `now`.
        mutating func isAsking(_ src: String, now: Double) -> Bool {
            guard let index = all.index(forKey: src), let asked = Self.read(&all.values[index], { $0.asked }) else { return false }
            return now < asked.deadline
        }

        /// Reads one property of a stream reached in place (see above).
        static func read<T>(_ stream: inout Stream, _ property: (Stream) -> T) -> T { property(stream) }
    }

    public let settings: Settings
    public private(set) var counters = Counters()
    private let transport: any BusTransport
    private let logger: Logger
    private let clock: any BusClock
    private let wants: (String) -> Bool
    private let fromStart: Bool
    private var streams = StreamTable()
    /// Not before this (monotonic s): the next recovery pass (`Settings.passIntervalS`).
    private var nextPass = 0.0
    /// Who answers for each stream, asking, replies and when to give up: shared with the
    /// session-recorder's recovery. A hole in a stream whose producer's heartbeat offers no
    /// journal, and that no other producer offers, is given up at once: once the producer's own
    /// heartbeat has said it keeps none, nothing is coming (waiting `unknownProducerS`, a
    /// rep-detector the bus disconnected at 1,000 stations of such a replay held every stream's
    /// later messages for nine seconds, its reps 3.3 s late).
    private let engine: RecoveryEngine
    /// Per stream: its producer (the heartbeat's station); per producer: where it answers.
    public var producers: [String: String] { engine.producers }
    public var endpoints: [String: String] { engine.endpoints }
    private var ready: [BusMessage] = []
    private var catchUp = CatchUpReport()
    /// The bus's own heartbeats noted so far (`Settings.unknownProducerBeats`).
    private var busBeats = 0
    /// Questions asked and not yet answered nor timed out (`Settings.maxQuestions`).
    public private(set) var questionsInFlight = 0

    /// Follows the streams whose topic `wants` accepts. `positions` are the
    /// last seqs already delivered per stream (a checkpoint's); with them,
    /// streams not among them are fetched from their start.
    public init(
        transport: any BusTransport, logger: Logger, settings: Settings = Settings(), wants: @escaping (String) -> Bool,
        positions: [String: UInt64]? = nil, producers: [String: String] = [:], endpoints: [String: String] = [:]
    ) {
        self.transport = transport
        self.logger = logger
        self.settings = settings
        clock = transport.clock
        self.wants = wants
        fromStart = positions != nil
        for (src, seq) in positions ?? [:] { streams[src] = Stream(next: seq + 1) }
        engine = RecoveryEngine(transport: transport, logger: logger, producers: producers, endpoints: endpoints)
    }

    /// The last seq delivered per stream (what a checkpoint keeps).
    public var positions: [String: UInt64] { streams.all.mapValues { $0.next - 1 } }

    /// The last seq delivered of `src`'s stream (nil: a stream it does not follow).
    public func position(of src: String) -> UInt64? { streams[src].map { $0.next - 1 } }

    /// The positions, producers and endpoints, for a state file.
    public var snapshot: InputPositions { InputPositions(positions: positions, producers: producers, endpoints: endpoints) }

    /// Resumes from `snapshot` (nil: starts fresh).
    public convenience init(
        transport: any BusTransport, logger: Logger, settings: Settings = Settings(), wants: @escaping (String) -> Bool, resuming snapshot: InputPositions?
    ) {
        self.init(
            transport: transport, logger: logger, settings: settings, wants: wants, positions: snapshot?.positions,
            producers: snapshot?.producers ?? [:], endpoints: snapshot?.endpoints ?? [:])
    }

    /// Messages held behind holes, over every stream.
    public var held: Int { streams.all.values.reduce(0) { $0 + $1.held.count } }

    /// Messages missed and still waited for over every stream: the seqs between each stream's next
    /// and the last it knows of (held or said sent), less what is held. Looks at the streams that miss
    /// something alone.
    public var outstanding: Int {
        var total = 0
        for src in streams.missing {
            total +=
                streams.update(src) { stream in
                    let top = max(stream.held.keys.max() ?? 0, stream.tail)
                    return top >= stream.next ? Int(top - stream.next + 1) - stream.held.count : 0
                } ?? 0
        }
        return total
    }

    /// Whether any stream waits for a hole or a tail.
    public var isRecovering: Bool { streams.all.values.contains { $0.wanted != nil } }

    /// Whether a stream of `topic` waits for a hole or a tail (its consumer
    /// should not judge it silent meanwhile).
    public func isRecovering(topic: String) -> Bool {
        // A stream that wants something is among those missing something (`drain`, `note(heartbeat:)`).
        return streams.missing.contains { src in
            src.hasSuffix(topic) && src.dropLast(topic.utf8.count).hasSuffix("/") && streams.update(src, { $0.wanted != nil }) == true
        }
    }

    /// Forgets a stream (its producer is long gone).
    public func forget(_ src: String) { streams[src] = nil }

    /// Takes one message received on the bus and hands `deliver` what may be processed now, in
    /// order. A message in order with nothing held before it, nearly every one, goes straight
    /// through: returned in an array, it would cost an allocation a message.
    public func accept(_ message: BusMessage, deliver: (BusMessage) throws -> Void) rethrows {
        if ready.isEmpty, streams.advanceInOrder(message.envelope.src, seq: message.envelope.seq) {
            try deliver(message)
            return
        }
        for ready in accept(message) { try deliver(ready) }
    }

    /// Takes one message received on the bus; returns what may be processed now, in order.
    public func accept(_ message: BusMessage) -> [BusMessage] {
        let src = message.envelope.src, seq = message.envelope.seq
        if streams.advanceInOrder(src, seq: seq) {
            ready.append(message)
            return take()
        }
        var stream = streams.take(src) ?? Stream(next: fromStart ? 1 : seq, unseen: fromStart)
        if seq < stream.next || stream.held[seq] != nil {
            counters.duplicates += 1
            streams[src] = stream
            return []
        }
        if seq > stream.next {
            if stream.missingSince == nil {
                stream.missingSince = clock.monotonicSeconds()
                stream.missingBeat = busBeats
            }
            stream.held.insert(message, at: seq)
            streams[src] = stream
            if stream.held.count > settings.maxHeld { giveUp(src) }
            keepWithinBudget()
            return take()
        }
        stream.next = seq + 1
        streams[src] = stream
        ready.append(message)
        drain(src)
        return take()
    }

    /// Past `maxHeldTotal` messages held, gives up holes, the fullest streams' first, until an eighth of it is free.
    private func keepWithinBudget() {
        guard streams.heldTotal > settings.maxHeldTotal else { return }
        // Down to seven eighths of the budget at once, the streams holding most first, ordered
        // once: finding the fullest looks through every stream that misses something, and done
        // for each message held past the budget it took a tenth of a consumer's time the bus
        // had disconnected.
        let target = settings.maxHeldTotal - settings.maxHeldTotal / 8
        while streams.heldTotal > target {
            let fullestFirst = streams.holdingMostFirst()
            guard !fullestFirst.isEmpty else { return }
            for src in fullestFirst where streams.heldTotal > target {
                counters.overBudget += 1
                if counters.overBudget == 1 || counters.overBudget % 1_000 == 0 {
                    logger.warning(
                        "input held past its memory budget; the fullest stream's hole given up",
                        metadata: ["src": "\(src)", "held_total": "\(streams.heldTotal)", "times": "\(counters.overBudget)"])
                }
                giveUp(src)
            }
        }
    }

    /// Takes note of a heartbeat: where its producer answers, and each stream's last seq sent.
    public func note(heartbeat message: BusMessage) {
        if message.topic == Subscriber.busHeartbeatTopic { busBeats += 1 }
        let now = clock.monotonicSeconds()
        engine.note(heartbeat: message, tracks: { wants(String(streamTopic($0))) }) { src, last, _ in
            // Nil when the stream is not known yet.
            let known: Void? = streams.update(src) { stream in
                if last >= stream.next, last > stream.tail {
                    stream.tail = last
                    if stream.missingSince == nil { stream.missingSince = now }
                }
            }
            if known == nil, fromStart {
                // A fresh consumer starts each stream at what it receives; a resumed one, at 1.
                var stream = Stream(next: 1, unseen: true)
                if last >= 1 {
                    stream.tail = last
                    stream.missingSince = now
                }
                streams[src] = stream
            }
        }
    }

    /// One pass: takes replies, asks for what is missing, gives up on what
    /// waited too long. Returns what may be processed now, in order.
    public func poll() -> [BusMessage] {
        engine.takeReplies { reply, endpoint in take(reply, from: endpoint) }
        // Only the streams that miss something are looked at, at most every `passIntervalS` (this runs for every message received).
        let missing = !streams.missing.isEmpty
        catchUp.update(missing: missing, recovered: counters.recovered, lost: counters.lost, clock: clock, logger: logger)
        guard missing else {
            nextPass = 0
            return take()
        }
        let now = clock.monotonicSeconds()
        guard now >= nextPass else { return take() }
        nextPass = now + settings.passIntervalS
        // Changed in place, never copied out: a copy alive while `giveUp` drains the stream made
        // every held message's dictionary be copied (seen in a consumer the bus had disconnected).
        let waiting = Array(streams.missing)
        questionsInFlight = waiting.reduce(0) { $0 + (streams.isAsking($1, now: now) ? 1 : 0) }
        let (engine, patienceS) = (engine, settings.maxWaitS)
        for src in waiting {
            var due: (since: Double, next: UInt64, last: UInt64, repeats: Int, unanswered: Bool, beat: Int)?
            streams.update(src) { stream in
                guard let since = stream.missingSince else { return }
                // Before `wanted`, which looks through what is held: a question in flight is waited for.
                if let asked = stream.asked, now < asked.deadline { return }
                // Past its deadline, but its producer has answered since, questions asked before
                // it: a slow link works through them in order. Asked again it would only queue
                // another copy on that link (at 1 Mbit/s the repeats outgrew the answers and a
                // detector counted 184 readings lost that the journal held), so it waits its turn.
                if let asked = stream.asked, !asked.id.isEmpty, engine.isInLine(asked.endpoint, askedAt: stream.askedAt, number: stream.askedNumber),
                    now - stream.askedAt < patienceS
                {
                    stream.asked?.deadline = now + settings.answerTimeoutS
                    return
                }
                guard let last = stream.wanted else {
                    stream.missingSince = nil
                    return
                }
                if let asked = stream.asked {
                    stream.unanswered = true
                    // (Not a wait for what the producer has yet to publish, which asks nothing.)
                    if !asked.id.isEmpty { stream.repeats += 1 }
                }
                stream.asked = nil
                due = (since, stream.next, last, stream.repeats, stream.unanswered, stream.missingBeat)
            }
            guard let due else { continue }
            let givesUp = engine.liveGivesUp(
                src, waited: now - due.since, beatsWaited: busBeats - due.beat, unanswered: due.unanswered, repeats: due.repeats, now: now,
                settings: settings)
            if givesUp {
                giveUp(src)
                continue
            }
            guard questionsInFlight < settings.maxQuestions else { continue }
            let range = due.next...min(due.last, due.next + settings.maxRange - 1)
            guard let question = engine.ask(src, range: range, now: now) else { continue }
            streams.update(src) {
                $0.asked = (question.id, range, now + settings.answerTimeoutS * Double(1 << min($0.repeats, 3)), question.endpoint)
                ($0.askedAt, $0.askedNumber) = (now, question.number)
            }
            counters.requests += 1
            questionsInFlight += 1
        }
        return take()
    }

    private func take() -> [BusMessage] {
        defer { ready.removeAll(keepingCapacity: true) }
        return ready
    }

    /// Delivers what is held from `next` on, in order.
    private func drain(_ src: String) {
        guard var stream = streams.take(src) else { return }
        while let message = stream.held.remove(stream.next) {
            ready.append(message)
            stream.next += 1
        }
        if stream.wanted == nil {
            stream.missingSince = nil
            stream.asked = nil
        } else if stream.missingSince == nil {
            stream.missingSince = clock.monotonicSeconds()
            stream.missingBeat = busBeats
        }
        streams[src] = stream
    }

    /// One reply: its messages delivered in order; what the journal no longer holds counted lost.
    private func take(_ reply: ReplayReply, from endpoint: String) {
        let src = reply.header.src
        guard let asked = streams[src]?.asked, asked.id == reply.header.id, asked.endpoint == endpoint else {
            return takeLate(reply, from: endpoint)
        }
        if let number = streams[src]?.askedNumber { engine.answered(endpoint, number: number) }
        guard var stream = streams.take(src) else { return }
        let nextBefore = stream.next
        stream.asked = nil
        stream.unanswered = false
        stream.repeats = 0
        var returned: [UInt64: BusMessage] = [:]
        for message in RecoveryEngine.messages(of: reply) { returned[message.envelope.seq] = message }
        if stream.unseen, let keptFrom = reply.header.keptFrom, UInt64(keptFrom) > stream.next, returned[stream.next] == nil {
            logger.info(
                "a stream begun before this consumer's checkpoint is taken from what its producer still holds",
                metadata: ["src": "\(src)", "from": "\(keptFrom)"])
            stream.next = UInt64(keptFrom)
        }
        stream.unseen = false
        let live = engine.isLive(src)
        let end = reply.header.lostThrough(asked: asked.range, live: live)
        // A held message far past a live stream's journal end (more than a question's worth) is forged
        // or corrupt: dropped, or it would hold the stream back and at last make it skip ahead.
        if live, !reply.header.more, let keptTo = reply.header.keptTo, keptTo >= 0 {
            let published = UInt64(keptTo)
            let implausible = stream.held.keys.filter { $0 > published + settings.maxRange }
            if !implausible.isEmpty {
                for seq in implausible { stream.held.remove(seq) }
                counters.ahead += implausible.count
                logger.warning(
                    "messages far past what their producer has published dropped (forged or corrupt seq)",
                    metadata: ["src": "\(src)", "published_through": "\(published)", "dropped": "\(implausible.count)"])
            }
        }
        var lostFrom: UInt64?
        while stream.next <= asked.range.upperBound {
            // What is held first (a late answer may have brought it): taken out, so nothing stays held below `next`.
            var message = stream.held.remove(stream.next)
            if message == nil, let fetched = returned[stream.next] {
                message = fetched
                counters.recovered += 1
            }
            if let message {
                if let from = lostFrom { logLoss(src, from...(stream.next - 1), reason: "the producer's journal no longer holds them") }
                lostFrom = nil
                ready.append(message)
            } else if stream.next <= end {
                counters.lost += 1
                if lostFrom == nil { lostFrom = stream.next }
            } else {
                break  // `more`: asked again from here
            }
            stream.next += 1
        }
        if let from = lostFrom { logLoss(src, from...(stream.next - 1), reason: "the producer's journal no longer holds them") }
        let aheadOfProducer = end < asked.range.upperBound && !reply.header.more
        streams[src] = stream
        drain(src)
        if streams[src]?.wanted != nil {
            // The wait starts again only when the reply filled some of the hole: a producer that
            // answers with nothing (the seqs run past what it has published) is not waited for forever.
            if (streams[src]?.next ?? 0) > nextBefore { streams[src]?.missingSince = clock.monotonicSeconds() }
            // Waiting for what the producer has not published yet: not asked again at once.
            if aheadOfProducer { streams[src]?.asked = ("", end...end, clock.monotonicSeconds() + 1, asked.endpoint) }
        }
    }

    /// A reply to a question no longer waited for (it timed out and was asked
    /// again, or given up): its messages still fill what is missing, each seq
    /// once, and nothing is counted lost from it (proto/replay.md). A producer
    /// slow to answer, as a busy bridge is, was otherwise asked again and again,
    /// each answer dropped, until the hole was given up as lost.
    /// Only seqs this consumer knows were published are taken (up to the last
    /// held or the heartbeat's tail), so a reply cannot push a stream ahead.
    private func takeLate(_ reply: ReplayReply, from endpoint: String) {
        let src = reply.header.src
        // Only the stream's own producer answers for it.
        guard !reply.messages.isEmpty, engine.endpoint(of: src) == endpoint, var stream = streams.take(src) else { return }
        let known = max(stream.held.keys.max() ?? 0, stream.tail)
        for message in RecoveryEngine.messages(of: reply) {
            let seq = message.envelope.seq
            guard seq >= stream.next, seq <= known, stream.held[seq] == nil else { continue }
            stream.held.insert(message, at: seq)
            counters.recovered += 1
        }
        streams[src] = stream
        drain(src)
        keepWithinBudget()
    }

    /// Skips what `src` waited for too long: counted lost, and what was held after it delivered.
    private func giveUp(_ src: String) {
        // In place: a copy alive while `drain` takes what is held would copy all of it.
        var range: ClosedRange<UInt64>?
        streams.update(src) { stream in
            guard let last = stream.wanted else { return }
            range = stream.next...last
            stream.next = last + 1
            stream.asked = nil
            stream.missingSince = nil
        }
        guard let range else { return }
        counters.lost += range.count
        let reason =
            producers[src].map { "\($0) did not answer in time (\(settings.giveUpS) s while heard; \(settings.maxWaitS) s in all)" }
            ?? (engine.isJournalless(src) ? "its producer keeps no journal" : "no producer offers its journal")
        logLoss(src, range, reason: reason)
        drain(src)
    }

    private func logLoss(_ src: String, _ range: ClosedRange<UInt64>, reason: String) {
        logger.error(
            "input messages lost",
            metadata: ["src": "\(src)", "from": "\(range.lowerBound)", "through": "\(range.upperBound)", "count": "\(range.count)", "reason": "\(reason)"])
    }
}

/// Where a consumer's input streams stood: kept in its state file, so a
/// restarted consumer fetches what it missed (`InOrderInput(resuming:)`).
public struct InputPositions: Sendable, Codable, Equatable {
    /// The last seq processed per stream.
    public var positions: [String: UInt64]
    /// Per stream its producer; per producer where it answers replay requests.
    public var producers: [String: String]
    public var endpoints: [String: String]
}

/// Says once per episode when a consumer that was missing messages (a hole, a
/// silent tail, a restart) has them all again: `caught up`, with the wall time,
/// how long it took and what was fetched. The fault run (tests/python/fault_run.py)
/// reads it to time recovery after each kind of kill.
public struct CatchUpReport: Sendable {
    private var since: Double?
    private var recoveredBefore = 0
    private var lostBefore = 0

    public init() {}

    /// Call on every pass with whether anything is still missing and the running counts.
    public mutating func update(missing: Bool, recovered: Int, lost: Int, clock: any BusClock, logger: Logger) {
        switch (since, missing) {
        case (nil, true):
            (since, recoveredBefore, lostBefore) = (clock.monotonicSeconds(), recovered, lost)
        case (let start?, false):
            since = nil
            logger.notice(
                "caught up",
                metadata: [
                    "at": "\(String(format: "%.3f", clock.wallSeconds()))", "after_s": "\(String(format: "%.3f", clock.monotonicSeconds() - start))",
                    "recovered": "\(recovered - recoveredBefore)", "lost": "\(lost - lostBefore)",
                ])
        default:
            break
        }
    }
}
