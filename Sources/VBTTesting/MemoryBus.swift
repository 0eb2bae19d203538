import Synchronization
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// A test double, labelled as such: the bus and the query endpoint as queues in
// memory, and a clock a test moves by hand. It stands in for libzmq only where
// a test wants a runtime's whole behaviour in milliseconds; every behaviour
// also keeps a run over real sockets and real processes.
//
// Semantics kept from the real bus: a subscriber receives the messages whose
// topic starts with one of its prefixes, from the moment it subscribed, in the
// order they were sent; a publisher learns every subscription (1 + prefix);
// a client's request reaches the server on its endpoint with the client's
// identity first, and the reply goes back to that client only. Nothing is
// dropped unless the test asks for it (`drop`).

/// A clock that moves only when told to. Starts at a fixed, plausible time.
public final class ManualClock: BusClock {
    private let now: Mutex<(wall: Double, monotonic: Double)>

    /// A clock at `wall` seconds since 1970 (default 2026-11-23 12:00 UTC).
    public init(wall: Double = 1_795_435_200) { now = Mutex((wall, 1_000)) }

    public func wallSeconds() -> Double { now.withLock { $0.wall } }
    public func monotonicSeconds() -> Double { now.withLock { $0.monotonic } }

    /// Moves both clocks forward by `seconds`.
    public func advance(_ seconds: Double) {
        precondition(seconds >= 0, "a clock does not go back")
        now.withLock { $0 = ($0.wall + seconds, $0.monotonic + seconds) }
    }
}

/// The bus and the query endpoint in memory, for runtimes in one thread.
public final class MemoryBus: BusTransport {
    public let clock: any BusClock
    /// The clock, to move.
    public let manualClock: ManualClock
    private var subscribers: [Weak<Queue>] = []
    private var publishers: [Weak<Queue>] = []
    private var servers: [String: Queue] = [:]
    private var clients: [[UInt8]: Weak<Queue>] = [:]
    private var nextClient = 0
    /// Messages sent on the bus so far.
    public private(set) var sent = 0
    /// A lossy network, when a test wants one: a message for which this says
    /// true reaches no subscriber (counted in `dropped`).
    public var drop: (([[UInt8]]) -> Bool)?
    public private(set) var dropped = 0

    /// An empty bus with its own clock.
    public init(clock: ManualClock = ManualClock()) {
        self.clock = clock
        manualClock = clock
    }

    /// Messages waiting for a subscriber (a test's check that a runtime drained its input).
    public var queued: Int { subscribers.compactMap(\.value).reduce(0) { $0 + $1.messages.count - $1.head } }

    /// Replies waiting for a query client (a test's check that a program reads every answer).
    public var repliesQueued: Int { clients.values.compactMap(\.value).reduce(0) { $0 + $1.messages.count - $1.head } }

    public func subscriberLink(prefixes: [String]) -> any FrameLink {
        let queue = Queue(prefixes: prefixes.map { Array($0.utf8) })
        subscribers.append(Weak(queue))
        for prefix in queue.prefixes { announce(prefix) }
        let link = Link(queue) { [unowned self] frames in self.deliver(frames) }
        link.subscriber = { [unowned self] prefix in
            queue.prefixes.append(prefix)
            self.announce(prefix)
        }
        return link
    }

    /// Tells every publisher of a subscription, as the bus forwards it.
    private func announce(_ prefix: [UInt8]) {
        // A subscriber's word on itself is the bus's (BusPriority), not passed on.
        guard prefix.withUnsafeBytes({ BusPriority.declared(by: $0) }) == nil else { return }
        for publisher in publishers.compactMap(\.value) { publisher.messages.append([[1] + prefix]) }
    }

    public func publisherLink(lingerMs: Int32) -> any FrameLink {
        let queue = Queue(prefixes: [])
        publishers.append(Weak(queue))
        for subscriber in subscribers.compactMap(\.value) {
            for prefix in subscriber.prefixes { queue.messages.append([[1] + prefix]) }
        }
        return Link(queue) { [unowned self] frames in self.deliver(frames) }
    }

    public func queryClientLink() -> any FrameLink { clientLink(endpoint: Self.queryEndpoint) }

    public func queryServerLink() -> any FrameLink { serverLink(endpoint: Self.queryEndpoint) }

    /// The endpoint name the query links use on this bus.
    public static let queryEndpoint = "memory://query"

    public func clientLink(endpoint: String) -> any FrameLink {
        nextClient += 1
        let identity = Array("client-\(nextClient)".utf8)
        let queue = Queue(prefixes: [])
        clients[identity] = Weak(queue)
        return Link(queue) { [unowned self] frames in
            // A request to an endpoint nobody serves waits nowhere: it is lost, as with nobody bound.
            self.servers[endpoint]?.messages.append([identity] + frames)
        }
    }

    public func serverLink(endpoint: String) -> any FrameLink {
        let queue = Queue(prefixes: [])
        servers[endpoint] = queue
        return Link(queue) { [unowned self] frames in
            // A reply to a client that is gone is dropped, as ROUTER does.
            guard let identity = frames.first, let client = self.clients[identity]?.value else { return }
            client.messages.append(Array(frames.dropFirst()))
        }
    }

    private lazy var busPublisher: Publisher? = try? Publisher(transport: self, program: "vbt-bus")

    /// Publishes the bus's own heartbeat (`heartbeat.bus`), as vbt-bus does
    /// every second: subscribers learn from it that the bus is there.
    public func heartbeat() throws {
        try busPublisher?.publish(HeartbeatMessage(role: "vbt-bus", uptimeS: 1, intervalS: 1, bus: HeartbeatMessage.BusCounters()), station: "bus")
    }

    /// What the bus at its memory budget does to a subscriber: the messages queued for each
    /// subscriber that said `priority` (`BusPriority`) are freed, unread; returns how many. (The
    /// real bus also ends the connection, and libzmq connects again; here the link stays.)
    @discardableResult
    public func disconnect(saying priority: BusPriority) -> Int {
        var freed = 0
        for subscriber in subscribers.compactMap(\.value)
        where subscriber.prefixes.contains(where: { prefix in prefix.withUnsafeBytes { BusPriority.declared(by: $0) } == priority }) {
            freed += subscriber.messages.count - subscriber.head
            (subscriber.messages, subscriber.head) = ([], 0)
        }
        return freed
    }

    /// Sends already-encoded frames to every matching subscriber (a forged or
    /// malformed message a test wants a runtime to meet).
    public func inject(_ frames: [[UInt8]]) { deliver(frames) }

    private func deliver(_ frames: [[UInt8]]) {
        sent += 1
        if let drop, drop(frames) {
            dropped += 1
            return
        }
        let live = subscribers.compactMap(\.value)
        var topics = [frames.first ?? []]
        // As vbt-bus routes samples (`ShardRoute`): once more under the station's route for each
        // count of shards some subscriber asked for, to whoever's prefix matches that.
        let sample = Array(SampleMessage.topicPrefix.utf8)
        if topics[0].count > sample.count, topics[0].starts(with: sample) {
            let counts = Set(live.flatMap { $0.prefixes.compactMap { ShardRoute.parse($0)?.shards } })
            topics += counts.sorted().map { ShardRoute.routed(topics[0], stationFrom: sample.count, shards: $0) }
        }
        for (index, topic) in topics.enumerated() {
            for subscriber in live where subscriber.prefixes.contains(where: { topic.starts(with: $0) }) {
                subscriber.messages.append(index == 0 ? frames : [topic] + frames.dropFirst())
            }
        }
    }

    final class Queue {
        var prefixes: [[UInt8]]
        var messages: [[[UInt8]]] = []
        var head = 0
        init(prefixes: [[UInt8]]) { self.prefixes = prefixes }

        func pop() -> [[UInt8]]? {
            guard head < messages.count else { return nil }
            defer {
                head += 1
                if head > 1_024, head * 2 > messages.count {
                    messages.removeFirst(head)
                    head = 0
                }
            }
            return messages[head]
        }
    }

    final class Weak<T: AnyObject> {
        weak var value: T?
        init(_ value: T) { self.value = value }
    }

    final class Link: FrameLink {
        let queue: Queue
        let sender: ([[UInt8]]) -> Void
        /// A subscriber link's: takes a prefix more.
        var subscriber: (([UInt8]) -> Void)?
        init(_ queue: Queue, sender: @escaping ([[UInt8]]) -> Void) { (self.queue, self.sender) = (queue, sender) }

        var waits: Bool { false }
        var socket: ZMQSocket? { nil }

        func subscribe(_ prefix: String) throws(ZMQError) {
            guard let subscriber else { throw ZMQError(code: EINVAL, operation: "zmq_setsockopt(ZMQ_SUBSCRIBE) on a link that does not subscribe") }
            subscriber(Array(prefix.utf8))
        }

        func send(_ frames: [[UInt8]], dontWait: Bool) -> Bool {
            sender(frames)
            return true
        }

        func send(topic: [UInt8], body: [UInt8]) { sender([topic, body]) }

        func receive(timeoutMs: Int32, maxFrames: Int) -> ReceivedMessage? {
            guard let frames = queue.pop() else { return nil }
            var message = ReceivedMessage()
            message.frames = Array(frames.prefix(maxFrames))
            message.frameCount = frames.count
            message.byteCount = frames.reduce(0) { $0 + $1.count }
            return message
        }
    }
}
