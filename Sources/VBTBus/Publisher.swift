import CZeroMQ
import VBTWire

/// Publishes typed messages onto the bus. Owned by one thread (not `Sendable`).
///
/// The socket is an XPUB connected to the bus's XSUB side, so the publisher
/// sees the subscriptions the bus forwards upstream and can wait until someone
/// listens before it sends (the "slow joiner" problem), and report when
/// nobody does.
public final class Publisher {
    private let link: any FrameLink
    /// The transport's clock: the `ts` of what is published.
    public let clock: any BusClock
    /// Stamps `src`, `seq` and `ts`.
    public private(set) var stamper: EnvelopeStamper
    /// Where every stamped message is appended before it is sent (nil: nowhere).
    public var journal: Journal?
    /// Messages handed to libzmq so far.
    public private(set) var published = 0
    private var subscriptions: [[UInt8]: Int] = [:]

    /// Connects to `config.pubEndpoint`. Closing waits at most `lingerMs` for
    /// queued messages to reach the bus.
    public convenience init(context: ZMQContext, config: BusConfig, program: String, lingerMs: Int32 = 5_000) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), program: program, lingerMs: lingerMs)
    }

    /// Connects on `transport`; its clock stamps `ts`.
    public init(transport: any BusTransport, program: String, instance: String? = nil, lingerMs: Int32 = 5_000) throws(ZMQError) {
        link = try transport.publisherLink(lingerMs: lingerMs)
        clock = transport.clock
        stamper = EnvelopeStamper(program: program, instance: instance)
    }

    /// Per stream, the last seq an earlier process of this instance already
    /// published (its journal's): a message stamped at or below it is not sent again.
    private var alreadySent: [String: UInt64] = [:]
    /// Messages not sent because the earlier process had sent them.
    public private(set) var suppressed = 0

    /// Continues an earlier process's streams (this publisher was created with
    /// its instance name, and has its journal): each topic goes on after
    /// `positions[topic]` (a checkpoint's), and what is stamped again up to
    /// the journal's last seq is not sent twice: the earlier process sent it,
    /// and a consumer that missed it fetches it from the journal. Topics
    /// `regenerated` says false for (heartbeats: made afresh, never
    /// recomputed) go on after the journal's last seq instead.
    public func resume(positions: [String: UInt64], regenerated: (String) -> Bool) {
        let own = stamper.instance + "/"
        let sent = journal?.streams.filter { $0.key.hasPrefix(own) }.mapValues(\.upperBound) ?? [:]
        for (src, last) in sent {
            let topic = String(src.dropFirst(own.count))
            // A topic the checkpoint does not name had published nothing when it was written.
            if regenerated(topic), case let position = positions[topic] ?? 0, position < last {
                stamper.resume(topic: topic, after: position)
                alreadySent[src] = last
            } else {
                stamper.resume(topic: topic, after: regenerated(topic) ? max(last, positions[topic] ?? 0) : last)
            }
        }
        for (topic, position) in positions where sent[own + topic] == nil { stamper.resume(topic: topic, after: position) }
    }

    /// Per stream: what an earlier process of this instance sent after its
    /// last saved state, by identity (see `resume(afterSaved:identity:)`), and
    /// until when it is looked for (monotonic).
    private var sentSinceSave: [String: [String: Int]] = [:]
    private var sentSinceSaveUntil = 0.0
    private var identity: ((_ topic: [UInt8], _ body: [UInt8]) -> String?)?

    /// Continues an earlier process's streams when its state was saved at
    /// `positions` (the last seq per topic then) and it may have sent more
    /// before it died. What it sent after `positions` (its journal's records)
    /// is remembered by `identity` (nil: a message never matched, e.g. a
    /// timer tick); for `windowS` seconds a message this process makes again
    /// with the same identity is not sent twice. New messages go on after the
    /// journal's last seq, so no seq is reused. Unlike `resume(positions:regenerated:)`
    /// it does not need the outputs regenerated in the same order (a notifier's
    /// depend on the wall clock).
    public func resume(
        afterSaved positions: [String: UInt64], identity: @escaping (_ topic: [UInt8], _ body: [UInt8]) -> String?, windowS: Double = 60
    ) throws {
        let own = stamper.instance + "/"
        let streams = journal?.streams.filter { $0.key.hasPrefix(own) } ?? [:]
        for (src, range) in streams {
            let topic = String(src.dropFirst(own.count))
            let saved = positions[topic] ?? 0
            stamper.resume(topic: topic, after: max(range.upperBound, saved))
            guard range.upperBound > saved, let journal else { continue }
            for record in try journal.read(src: src, from: saved + 1, to: range.upperBound) {
                guard let id = identity(record.topic, record.body) else { continue }
                sentSinceSave[src, default: [:]][id, default: 0] += 1
            }
        }
        for (topic, position) in positions where streams[own + topic] == nil { stamper.resume(topic: topic, after: position) }
        self.identity = identity
        sentSinceSaveUntil = clock.monotonicSeconds() + windowS
    }

    /// Stamps and sends a typed payload for `station`.
    public func publish<P: BusPayload>(_ payload: P, station: String, athlete: String? = nil, ts: Double? = nil) throws {
        let ts = ts ?? clock.wallSeconds()
        let frames = try stamper.encode(payload, station: station, athlete: athlete, ts: ts)
        try journalled(frames, ts: ts)
    }

    /// Stamps and sends a message given as loose fields (operator tools, tests).
    /// Envelope fields in `fields` are replaced by fresh ones.
    public func publish(type: String, station: String, fields: JSONObject, athlete: String? = nil, ts: Double? = nil) throws {
        try publish(type: type, station: station, members: EncodedMembers(fields), athlete: athlete, ts: ts)
    }

    /// Stamps and sends a message whose members (other than the envelope's) are written already.
    public func publish(type: String, station: String, members: EncodedMembers, athlete: String? = nil, ts: Double? = nil) throws {
        let ts = ts ?? clock.wallSeconds()
        let frames = try stamper.encode(type: type, station: station, athlete: athlete, ts: ts, members: members)
        try journalled(frames, ts: ts)
    }

    /// A heartbeat's replay offer: `endpoint`, and the last seq of each of this
    /// process's own journalled streams (so a consumer sees a silent tail),
    /// and of the most recent streams of the processes before it in the same
    /// folder (at most `earlierStreams`: a consumer sees the tail of a
    /// producer that died, or ended, before it could fetch it); nil without a journal.
    public func replayOffer(endpoint: String, earlierStreams: Int = 64) -> HeartbeatMessage.ReplayOffer? {
        guard let journal else { return nil }
        let own = stamper.instance + "/"
        var last = journal.recentStreams(excluding: { $0.hasPrefix(own) }, limit: earlierStreams).mapValues { Int($0) }
        for (src, range) in journal.streams where src.hasPrefix(own) { last[src] = Int(range.upperBound) }
        return HeartbeatMessage.ReplayOffer(endpoint: endpoint, lastSeq: last)
    }

    /// Journals a stamped message (when there is a journal), then sends it.
    private func journalled(_ frames: (topic: [UInt8], body: [UInt8]), ts: Double) throws {
        if !sentSinceSave.isEmpty, sentSinceSave[stamper.lastSrc] != nil {
            if clock.monotonicSeconds() > sentSinceSaveUntil {
                sentSinceSave.removeAll()
            } else if let id = identity?(frames.topic, frames.body), let count = sentSinceSave[stamper.lastSrc]?[id] {
                sentSinceSave[stamper.lastSrc]?[id] = count > 1 ? count - 1 : nil
                if sentSinceSave[stamper.lastSrc]?.isEmpty == true { sentSinceSave[stamper.lastSrc] = nil }
                // Not sent: the seq it took is given back.
                stamper.resume(topic: String(decoding: frames.topic, as: UTF8.self), after: stamper.lastSeq - 1)
                suppressed += 1
                return
            }
        }
        if !alreadySent.isEmpty, let sent = alreadySent[stamper.lastSrc] {
            if stamper.lastSeq <= sent {
                suppressed += 1
                return
            }
            alreadySent[stamper.lastSrc] = nil
        }
        if let journal {
            try journal.append(src: stamper.lastSrc, seq: stamper.lastSeq, ts: ts, topic: frames.topic, body: frames.body)
            try journal.tick()
        }
        try send(topic: frames.topic, body: frames.body)
    }

    /// Sends two already-encoded frames (the bus-level path; no stamping, no journal).
    public func send(topic: [UInt8], body: [UInt8]) throws(ZMQError) {
        try link.send(topic: topic, body: body)
        published += 1
        if published & 1023 == 0 { try drainSubscriptions() }
    }

    /// Reads the subscription changes the bus forwarded (never blocks).
    public func drainSubscriptions() throws(ZMQError) {
        while let message = try link.receive(timeoutMs: 0, maxFrames: 1) {
            guard let frame = message.frames.first, let flag = frame.first else { continue }
            let prefix = Array(frame.dropFirst())
            if flag == 1 {
                subscriptions[prefix, default: 0] += 1
            } else if flag == 0 {
                subscriptions[prefix] = nil
            }
        }
    }

    /// Whether any subscription the bus forwarded matches `topic`.
    public func hasSubscriber(for topic: String) -> Bool {
        let bytes = Array(topic.utf8)
        return subscriptions.keys.contains { bytes.starts(with: $0) }
    }

    /// Waits up to `timeoutS` until a subscription matching `topic` has
    /// reached this publisher. Returns whether one did.
    public func waitForSubscriber(topic: String, timeoutS: Double) throws(ZMQError) -> Bool {
        let deadline = clock.monotonicSeconds() + timeoutS
        while true {
            try drainSubscriptions()
            if hasSubscriber(for: topic) { return true }
            let remaining = deadline - clock.monotonicSeconds()
            // Without a socket the subscriptions are all here already: nothing to wait for.
            guard remaining > 0, let socket = link.socket else { return false }
            var poller = ZMQPoller()
            poller.addReadable(socket)
            _ = try poller.poll(timeoutMs: Int((min(remaining, 0.1) * 1000).rounded(.up)))
        }
    }
}

/// Publishes a process's own `heartbeat.<name>` every `intervalS`, with the
/// counters of what it has received, so operators (and the notifier) see every
/// program alive, and see its gaps and malformed input, not only the bus's.
public struct HeartbeatSchedule {
    /// The program, e.g. `rep-detector`.
    public let role: String
    /// The heartbeat's station: the program's name on the bus.
    public let name: String
    public let intervalS: Double
    /// The topic prefixes the program subscribes to, said in each heartbeat (`vbt topics`).
    public var subscribes: [String]?
    private var started: Double?
    private var next = -Double.infinity

    /// Creates a schedule; the first heartbeat is due at once.
    public init(role: String, name: String, intervalS: Double = 1) {
        (self.role, self.name, self.intervalS) = (role, name, intervalS)
    }

    /// Publishes when due, or now with `force` (a program whose news should not wait for the
    /// next beat); `inputs` and `amend` (what the program adds of its own, such as the
    /// notifier's webhook counters) are only evaluated then. Threads started since the last
    /// heartbeat are given the program's niceness (`ThreadPriority.keep`).
    public mutating func tick(
        _ publisher: Publisher, inputs: @autoclosure () -> InputCounters?, replay: ReplayServer? = nil, force: Bool = false,
        amend: (inout HeartbeatMessage) -> Void = { _ in }
    ) throws {
        let now = publisher.clock.monotonicSeconds()
        guard force || now >= next else { return }
        next = now + intervalS
        ThreadPriority.keep()
        try publish(publisher, now: now, inputs: inputs(), replay: replay, stopping: false, amend: amend)
    }

    /// Publishes the last heartbeat, `stopping`: the process stops as asked, so it is gone, not
    /// silent. Its journal (`replay`) stays offered: a restarted producer answers where it did.
    public mutating func part(
        _ publisher: Publisher, inputs: InputCounters?, replay: ReplayServer? = nil, amend: (inout HeartbeatMessage) -> Void = { _ in }
    ) throws {
        let now = publisher.clock.monotonicSeconds()
        try publish(publisher, now: now, inputs: inputs, replay: replay, stopping: true, amend: amend)
        next = .infinity
    }

    private mutating func publish(
        _ publisher: Publisher, now: Double, inputs: InputCounters?, replay: ReplayServer?, stopping: Bool,
        amend: (inout HeartbeatMessage) -> Void = { _ in }
    ) throws {
        let started = self.started ?? now
        self.started = started
        var message = HeartbeatMessage(role: role, uptimeS: now - started, intervalS: intervalS, inputs: inputs)
        if let replay { message.replay = replay.offer(for: publisher) }
        message.subscribes = subscribes
        message.stopping = stopping ? true : nil
        amend(&message)
        try publisher.publish(message, station: name)
    }
}
