import VBTWire

// Both sides of the replay protocol (proto/replay.md): a producer answers
// from its journal; a consumer asks for the ranges it lacks.

/// A producer's replay endpoint, answering from its journal. Owned by the
/// producer's loop thread (the journal's owner); `serve` never waits.
public final class ReplayServer {
    /// The endpoint it is bound on (for the heartbeat's offer).
    public let endpoint: String
    /// The CURVE public key consumers connect with, for an endpoint off this computer (the offer's `server_key`).
    public let serverKey: String?
    private let journal: Journal
    private let link: any FrameLink
    /// Most messages in one reply, and most bytes (a reply says `more` beyond either).
    public var maxMessages = 1_000
    public var maxBytes = 4 << 20
    /// Requests answered, and messages sent in replies.
    public private(set) var answered = 0
    public private(set) var replayed = 0

    /// Binds `endpoint` on `transport`.
    public init(journal: Journal, transport: any BusTransport, endpoint: String) throws(ZMQError) {
        self.journal = journal
        self.endpoint = endpoint
        link = try transport.serverLink(endpoint: endpoint)
        serverKey = transport.replayServerKey(endpoint: endpoint)
    }

    /// The heartbeat's offer of this endpoint for `publisher`'s journalled streams.
    public func offer(for publisher: Publisher) -> HeartbeatMessage.ReplayOffer? {
        guard var offer = publisher.replayOffer(endpoint: endpoint) else { return nil }
        offer.serverKey = serverKey
        return offer
    }

    /// The socket under it, for a loop that polls it beside others; nil without sockets.
    public var socket: ZMQSocket? { link.socket }

    /// Answers the requests waiting, at most `limit` of them (a flood cannot
    /// hold the producer's loop). Returns how many it answered.
    @discardableResult
    public func serve(limit: Int = 10) throws -> Int {
        var count = 0
        while count < limit, let request = try link.receive(timeoutMs: 0, maxFrames: 4) {
            // [peer, empty delimiter (DEALER, REQ), request]; anything else is answered if it can be.
            guard let peer = request.frames.first, request.frames.count >= 2, let body = request.frames.last else { continue }
            let delimiter: [[UInt8]] = request.frames.count >= 3 ? [[]] : []
            try link.send([peer] + delimiter + answer(body), dontWait: true)
            count += 1
        }
        answered += count
        return count
    }

    /// The reply frames (header, then topic and body of each message) to one request frame.
    func answer(_ body: [UInt8]) throws -> [[UInt8]] {
        let request: ReplayRequest
        do { request = try ReplayRequest(json: body) } catch {
            return [ReplayHeader(id: "", src: "", from: 0, to: 0, count: 0, keptFrom: nil, keptTo: nil, more: false, error: error.reason).json]
        }
        let kept = journal.range(of: request.src)
        var frames: [[UInt8]] = []
        var count = 0, bytes = 0, more = false
        if let kept, request.to >= Int(kept.lowerBound), request.from <= Int(kept.upperBound) {
            let from = UInt64(max(request.from, Int(kept.lowerBound))), to = UInt64(min(request.to, Int(kept.upperBound)))
            for record in try journal.read(src: request.src, from: from, to: to, limit: maxMessages + 1) {
                guard count < maxMessages, bytes + record.topic.count + record.body.count <= maxBytes || count == 0 else {
                    more = true
                    break
                }
                frames.append(record.topic)
                frames.append(record.body)
                bytes += record.topic.count + record.body.count
                count += 1
            }
        }
        replayed += count
        let header = ReplayHeader(
            id: request.id, src: request.src, from: request.from, to: request.to, count: count,
            keptFrom: kept.map { Int($0.lowerBound) }, keptTo: kept.map { Int($0.upperBound) }, more: more)
        return [header.json] + frames
    }
}

/// A producer's journal and its replay endpoint, set up together on a publisher.
public final class ProducerJournal {
    public let journal: Journal
    public let replay: ReplayServer

    /// Journals everything `publisher` sends from now on into `settings.directory`,
    /// and answers replay requests on `endpoint`.
    public init(settings: JournalSettings, endpoint: String, publisher: Publisher, transport: any BusTransport, lockWaitS: Double = 0) throws {
        journal = try Journal(settings: settings, instance: publisher.stamper.instance, clock: transport.clock, lockWaitS: lockWaitS)
        replay = try ReplayServer(journal: journal, transport: transport, endpoint: endpoint)
        publisher.journal = journal
    }
}

/// A reply to a replay request: its header and the messages, as received.
public struct ReplayReply: Sendable {
    public var header: ReplayHeader
    public var messages: [(topic: [UInt8], body: [UInt8])]
}

/// Asks one producer's replay endpoint. Owned by one thread; never waits.
public final class ReplayClient {
    public let endpoint: String
    private let link: any FrameLink
    private var counter = 0

    /// Connects to `endpoint` (nothing is sent yet); `serverKey` is its producer's offered key,
    /// for an endpoint off this computer.
    public init(transport: any BusTransport, endpoint: String, serverKey: String? = nil) throws(ZMQError) {
        self.endpoint = endpoint
        link = try transport.clientLink(endpoint: endpoint, serverKey: serverKey)
    }

    /// Asks for `src` from `from` through `to`; returns the request's id, or
    /// nil when it could not even be queued (the endpoint is gone).
    public func request(src: String, from: Int, to: Int) throws(ZMQError) -> String? {
        counter += 1
        let id = "r-\(counter)"
        let sent = try link.send([[], ReplayRequest(id: id, src: src, from: from, to: to).json], dontWait: true)
        return sent ? id : nil
    }

    /// A reply that has arrived, or nil (never waits). A reply that cannot be
    /// read is skipped.
    public func nextReply() throws(ZMQError) -> ReplayReply? {
        while let reply = try link.receive(timeoutMs: 0, maxFrames: 2 * 1_000 + 4) {
            // [empty delimiter, header, topic, body, ...]
            var frames = reply.frames[...]
            if frames.first?.isEmpty == true { frames = frames.dropFirst() }
            guard let first = frames.first, let header = try? ReplayHeader(json: first),
                reply.frameCount == reply.frames.count, (frames.count - 1) == 2 * header.count
            else { continue }
            var messages: [(topic: [UInt8], body: [UInt8])] = []
            var index = frames.startIndex + 1
            while index + 1 < frames.endIndex {
                messages.append((frames[index], frames[index + 1]))
                index += 2
            }
            return ReplayReply(header: header, messages: messages)
        }
        return nil
    }
}
