import Logging
import VBTBus
import VBTWire

/// Fetches the reps `vbt loadtest`'s own subscriber missed from the rep-detector's journal
/// (proto/replay.md): the bus disconnects a subscriber that falls behind, the listener included, and
/// a rep the listener never heard would make the installation look short (a 10-minute run at
/// 1,000 stations counted 85,151 reps of 85,170 while the rep-detector lost nothing). A rep fetched
/// again is counted received, and as recovered; it is not timed (it came late to this listener,
/// not to the installation's consumers). Owned by the listener's thread; never waits.
final class MissedRepsFetcher {
    private(set) var tracker = HeardStreams { streamTopic($0).hasPrefix(RepMessage.topicPrefix) }
    private let transport: any BusTransport
    private let logger: Logger
    /// Per producer (heartbeat station): its replay endpoint.
    private var endpoints: [String: String] = [:]
    /// The CURVE key each `tcp://` endpoint offered (its producer's), to connect to it with.
    private var serverKeys: [String: String?] = [:]
    private var clients: [String: ReplayClient] = [:]
    /// Offered endpoints no socket may use (off this computer: proto/security.md), logged once each.
    private var unusable: Set<String> = []
    /// Per stream asked for: when to ask again if no answer came.
    private var asked: [String: Double] = [:]
    private var nextPass = 0.0
    /// Reps fetched again, and reps no journal held any more.
    private(set) var recovered = 0
    private(set) var givenUp = 0
    static let passIntervalS = 0.2
    static let answerTimeoutS = 3.0
    static let maxAsked = 8

    init(transport: any BusTransport, logger: Logger) {
        self.transport = transport
        self.logger = logger
    }

    /// A rep heard live: false when it was heard before.
    func heard(_ message: BusMessage) -> Bool { tracker.heard(src: message.envelope.src, seq: message.envelope.seq) }

    /// A heartbeat: its replay offer says where its producer answers and how far its streams went.
    func note(heartbeat: HeartbeatMessage, envelope: Envelope) {
        guard let offer = heartbeat.replay else { return }
        endpoints[envelope.station] = offer.endpoint
        serverKeys[offer.endpoint] = offer.serverKey
        tracker.offered(by: envelope.station, instance: String(streamInstance(envelope.src)), lastSeq: offer.lastSeq)
    }

    /// Takes the answers that came and asks for what is still missed; returns the reps fetched that
    /// were missed (each once).
    func poll(now: Double) -> [BusMessage] {
        var fetched: [BusMessage] = []
        for client in clients.values {
            while let reply = try? client.nextReply() { fetched += take(reply) }
        }
        guard now >= nextPass else { return fetched }
        nextPass = now + Self.passIntervalS
        for (src, deadline) in asked where deadline <= now { asked[src] = nil }
        for (src, list) in tracker.holes where asked.count < Self.maxAsked && asked[src] == nil {
            guard let hole = list.first, let producer = tracker.producers[src], let endpoint = endpoints[producer], let client = client(endpoint)
            else { continue }
            let to = min(hole.upperBound, hole.lowerBound + 999)
            if (try? client.request(src: src, from: Int(hole.lowerBound), to: Int(to))) != nil { asked[src] = now + Self.answerTimeoutS }
        }
        return fetched
    }

    private func client(_ endpoint: String) -> ReplayClient? {
        if let client = clients[endpoint] { return client }
        guard !unusable.contains(endpoint) else { return nil }
        do {
            let client = try ReplayClient(transport: transport, endpoint: endpoint, serverKey: serverKeys[endpoint] ?? nil)
            clients[endpoint] = client
            return client
        } catch {
            unusable.insert(endpoint)
            logger.warning(
                "a replay endpoint offered is unusable; the reps this listener missed of its streams stay missed",
                metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            return nil
        }
    }

    private func take(_ reply: ReplayReply) -> [BusMessage] {
        let header = reply.header
        asked[header.src] = nil
        // What the journal no longer holds (or never held) is given up, loudly.
        let keptFrom = header.keptFrom.map { UInt64(max($0, 0)) } ?? UInt64(max(header.to, 0)) + 1
        let given = tracker.giveUp(src: header.src, below: keptFrom)
        if given > 0 {
            givenUp += given
            logger.warning("reps this listener missed are no longer in the rep-detector's journal", metadata: ["src": "\(header.src)", "reps": "\(given)"])
        }
        var fetched: [BusMessage] = []
        for (topic, body) in reply.messages {
            guard let message = try? decodeMessage(topic: topic, body: body), message.envelope.type == RepMessage.type,
                tracker.heard(src: message.envelope.src, seq: message.envelope.seq)
            else { continue }
            recovered += 1
            fetched.append(message)
        }
        return fetched
    }
}
