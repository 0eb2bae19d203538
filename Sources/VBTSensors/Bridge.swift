import Foundation
import Logging
import Synchronization
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// The bridge runtime. Each source (BLE device, serial port, replay file,
// simulator) runs on its own thread with plain blocking I/O and timeouts,
// and hands what it reads to one `EventQueue`. A single publishing thread
// owns the ZeroMQ socket: it batches readings per stream (bounded size and
// delay) and publishes `sample` and `status` messages.

/// What a source reports to the publishing thread.
public enum BridgeEvent: Sendable {
    /// Readings of one sensor at a station, each with its host time `t`.
    case readings(station: String, device: String, SampleMessage.Readings)
    /// A link state change or a periodic rate report.
    case status(station: String, StatusMessage)
    /// A whole message to publish under a fresh envelope (replay): its
    /// members other than the envelope's, written once for every copy.
    case message(type: String, station: String, athlete: String?, members: EncodedMembers)
    /// A finite source (replay without --loop) has nothing more to send.
    case finished(source: String)
}

/// A multi-producer queue with a self-pipe the publishing thread can poll.
public final class EventQueue: Sendable {
    private let events = Mutex<[BridgeEvent]>([])
    /// Readable whenever events are waiting.
    public let fd: Int32
    private let writeFD: Int32

    /// Creates an empty queue.
    public init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0, "pipe failed")
        for end in fds {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        fd = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(fd)
        close(writeFD)
    }

    /// Adds an event (any thread).
    public func push(_ event: BridgeEvent) {
        events.withLock { $0.append(event) }
        var one: UInt8 = 1
        _ = write(writeFD, &one, 1)  // a full pipe is fine: the reader is already due
    }

    /// Adds several events at once (any thread): one lock and one wake-up for all of them.
    public func push(contentsOf batch: [BridgeEvent]) {
        guard !batch.isEmpty else { return }
        events.withLock { $0.append(contentsOf: batch) }
        var one: UInt8 = 1
        _ = write(writeFD, &one, 1)
    }

    /// Takes every waiting event (the publishing thread).
    public func drain() -> [BridgeEvent] {
        var scratch = [UInt8](repeating: 0, count: 512)
        while read(fd, &scratch, scratch.count) > 0 {}
        return events.withLock { events in
            let taken = events
            events.removeAll(keepingCapacity: true)
            return taken
        }
    }
}

/// A source of readings with its own thread.
public protocol SensorSource: Sendable {
    /// A short name for logs (`serial:/dev/ttyUSB0`, `ble:witmotion`, ...).
    var name: String { get }
    /// Reads until `stop` is set (or, for finite sources, until done), pushing events.
    func run(into queue: EventQueue, stop: StopFlag, logger: Logger)
}

/// Retry timing for lost links: a few quick tries, then a growing wait.
public struct ReconnectPolicy: Sendable, Equatable {
    /// Tries at `quickDelayS` before backing off.
    public var quickTries = 3
    /// Seconds between the quick tries.
    public var quickDelayS = 2.0
    /// The longest wait between tries.
    public var maxDelayS = 30.0

    /// The defaults: 3 tries 2 s apart, then doubling up to 30 s.
    public init() {}

    /// Seconds to wait after `failures` consecutive failed tries (1-based).
    public func delay(afterFailures failures: Int) -> Double {
        if failures <= quickTries { return quickDelayS }
        return min(maxDelayS, quickDelayS * Double(1 << min(failures - quickTries, 16)))
    }
}

/// Estimates a stream's real rate over a sliding window of reading times.
public struct RateEstimator: Sendable {
    private var times: [Double] = []
    private let windowS: Double

    /// Creates an estimator over the last `windowS` seconds.
    public init(windowS: Double = 2.0) { self.windowS = windowS }

    /// Adds one reading time.
    public mutating func add(_ t: Double) {
        times.append(t)
        if let first = times.first, t - first > windowS * 1.5 {
            times.removeAll { t - $0 > windowS }
        }
    }

    /// Readings per second over the window, or nil with fewer than 3 readings.
    public func rateHz(now: Double) -> Double? {
        let recent = times.filter { now - $0 <= windowS }
        guard recent.count >= 3, let first = recent.first, let last = recent.last, last > first else { return nil }
        return Double(recent.count - 1) / (last - first)
    }

    /// Forgets everything (after a reconnect).
    public mutating func reset() { times.removeAll() }
}

/// Makes host timestamps strictly increasing: readings that arrive together
/// (one BLE connection event, one serial read) would otherwise share a time.
public struct MonotonicStamper: Sendable {
    /// In whole microseconds: the wire carries `t` to 6 decimals, and near
    /// 1.8e9 s adding 1e-6 to a Double moves it by 4 or 5 ulps (0.95-1.19 µs),
    /// so two stamps could print as the same microsecond.
    private var lastUs: Int64 = .min
    /// Creates a stamper.
    public init() {}
    /// A time no earlier than `t` (to the microsecond) and 1 µs after the previous one at least.
    public mutating func stamp(_ t: Double) -> Double {
        let us = (t * 1e6).rounded()
        lastUs = max(us.isFinite && abs(us) < 9e15 ? Int64(us) : 0, lastUs + 1)
        return Double(lastUs) / 1e6
    }
}

/// How the bridge batches readings into messages.
public struct BatchPolicy: Sendable, Equatable {
    /// Most readings in one `sample` message.
    public var maxReadings = 16
    /// Longest a reading waits for its batch, in seconds. At 0 (the default)
    /// none waits: the reading that completes a rep is on the bus as soon as
    /// the bridge has it, and what arrived while the bridge was busy
    /// publishing leaves together, so messages grow only under load.
    public var maxDelayS = 0.0
    /// Creates the defaults: at most 16 readings a message, none waiting.
    public init() {}
}

/// The publishing side of a bridge: batches and publishes everything the
/// sources report. Runs on the calling thread until `stop` is set and every
/// finite source has finished; flushes what it holds before returning.
public final class BridgePublisher {
    private let publisher: Publisher
    private let queue: EventQueue
    private let policy: BatchPolicy
    private let logger: Logger
    private let clock: any BusClock
    private var pending: [String: Pending] = [:]
    private var lastStatus: [String: String] = [:]
    /// Counts of published messages by type.
    public private(set) var published: [String: Int] = [:]
    /// The bridge's own heartbeat (`heartbeat.<name>`); nil publishes none.
    public var heartbeat: HeartbeatSchedule?
    /// Where what is published is journalled (nil: nowhere), and where ranges of it are answered.
    public var journal: Journal? {
        get { publisher.journal }
        set { publisher.journal = newValue }
    }
    public private(set) var replay: ReplayServer?
    private let transport: any BusTransport

    /// Journals every message from now on into `settings.directory` and answers replay requests on `endpoint`.
    public func startJournal(_ settings: JournalSettings, endpoint: String) throws {
        replay = try ProducerJournal(settings: settings, endpoint: endpoint, publisher: publisher, transport: transport).replay
    }

    private struct Pending {
        var station: String
        var device: String
        var readings: SampleMessage.Readings
        var since: Double
    }

    /// Creates the publisher side; the socket connects to `config.pubEndpoint`.
    public convenience init(context: ZMQContext, config: BusConfig, queue: EventQueue, policy: BatchPolicy, logger: Logger) throws(ZMQError) {
        try self.init(transport: ZMQTransport(context: context, config: config), queue: queue, policy: policy, logger: logger)
    }

    /// Creates the publisher side on `transport`, whose clock paces the batches.
    public init(transport: any BusTransport, queue: EventQueue, policy: BatchPolicy, logger: Logger) throws(ZMQError) {
        publisher = try Publisher(transport: transport, program: "sensor-bridge")
        clock = transport.clock
        self.transport = transport
        self.queue = queue
        self.policy = policy
        self.logger = logger
    }

    /// Waits up to `timeoutS` for a subscriber to `topic` (replay at full speed must not publish into the void).
    public func waitForSubscriber(topic: String, timeoutS: Double) throws(ZMQError) -> Bool {
        try publisher.waitForSubscriber(topic: topic, timeoutS: timeoutS)
    }

    /// Publishes until stopped, or until `finiteSources` sources have finished
    /// and `lingerS` more seconds have gone by: a journalling bridge whose
    /// replay or simulation has ended keeps sending heartbeats and answering
    /// replay requests that long, so consumers still fetch what they missed.
    public func run(stop: StopFlag, finiteSources: Int, lingerS: Double = 0) throws {
        var finished = 0
        var endedAt: Double?
        var pollItems = [readablePollFD(queue.fd)]
        while true {
            let now = clock.monotonicSeconds()
            let oldest = pending.values.map(\.since).min()
            let waitS = oldest.map { max(0, $0 + policy.maxDelayS - now) } ?? 0.05
            // poll counts whole milliseconds: the last one of a batch's wait is slept through
            // (truncated to 0, the loop spun through it, polling); what the sources report
            // meanwhile waits at most that millisecond.
            let waitMs = Int32(min(waitS, 0.05) * 1000)
            if waitMs == 0, waitS > 0 {
                usleep(UInt32(waitS * 1e6))
            } else {
                _ = poll(&pollItems, 1, waitMs)
            }
            for event in queue.drain() {
                switch event {
                case .readings(let station, let device, let readings):
                    try add(readings, station: station, device: device)
                case .status(let station, let status):
                    try flush(station: station)
                    try publish(status, station: station)
                    // Log changes once; retries (connecting, the same failure again)
                    // and periodic rate reports only at debug.
                    let key = "\(station)|\(status.sensor)"
                    let summary = "\(status.state.rawValue)|\(status.reason ?? "")|\(status.device)"
                    let routine = status.state == .streaming || status.state == .connecting
                    let level: Logger.Level = routine || lastStatus[key] == summary ? .debug : .info
                    if !routine { lastStatus[key] = summary }
                    logger.log(
                        level: level, "sensor status",
                        metadata: [
                            "station": "\(station)", "state": "\(status.state.rawValue)", "device": "\(status.device)",
                            "sensor": "\(status.sensor)", "reason": "\(status.reason ?? "")",
                            "rate_hz": "\(status.rateHz.map { String(format: "%.1f", $0) } ?? "")",
                        ])
                case .message(let type, let station, let athlete, let members):
                    try publisher.publish(type: type, station: station, members: members, athlete: athlete)
                    published[type, default: 0] += 1
                case .finished:
                    finished += 1
                }
            }
            try flushDue(now: clock.monotonicSeconds())
            try heartbeat?.tick(publisher, inputs: nil, replay: replay)
            try replay?.serve()
            let sourcesDone = finiteSources > 0 && finished >= finiteSources
            if sourcesDone, endedAt == nil, lingerS > 0, !stop.isSet {
                try flushAll()
                try journal?.sync()
                endedAt = clock.monotonicSeconds()
                logger.info("sources finished; answering replay requests a while longer", metadata: ["linger_s": "\(lingerS)"])
            }
            if stop.isSet || (sourcesDone && clock.monotonicSeconds() - (endedAt ?? -.infinity) >= lingerS) {
                try flushAll()
                try journal?.sync()
                // Gone, not silent: the notifier stops watching a bridge that says so (a station shut
                // down for the night, a load test's replay that has ended) instead of raising it
                // missing until it is back. A bridge that crashes says nothing, and is raised.
                try heartbeat?.part(publisher, inputs: nil, replay: replay)
                logger.info(
                    "bridge stopped",
                    metadata: [
                        "published": "\(published.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))"
                    ])
                return
            }
        }
    }

    private func publish<P: BusPayload>(_ payload: P, station: String) throws {
        try publisher.publish(payload, station: station)
        published[P.type, default: 0] += 1
    }

    private func add(_ readings: SampleMessage.Readings, station: String, device: String) throws {
        let key = "\(station)|\(readings.sensor)|\(device)"
        if var batch = pending[key] {
            switch (batch.readings, readings) {
            case (.imu(let a), .imu(let b)): batch.readings = .imu(a + b)
            case (.distance(let a), .distance(let b)): batch.readings = .distance(a + b)
            case (.posture(let a), .posture(let b)): batch.readings = .posture(a + b)
            default: break  // the key includes the sensor kind, so kinds always match
            }
            pending[key] = batch
        } else {
            pending[key] = Pending(station: station, device: device, readings: readings, since: clock.monotonicSeconds())
        }
        if let batch = pending[key], batch.readings.count >= policy.maxReadings {
            try flush(key: key)
        }
    }

    private func flushDue(now: Double) throws {
        for (key, batch) in pending where now - batch.since >= policy.maxDelayS {
            try flush(key: key)
        }
    }

    private func flush(station: String) throws {
        for (key, batch) in pending where batch.station == station { try flush(key: key) }
    }

    private func flushAll() throws {
        for key in Array(pending.keys) { try flush(key: key) }
    }

    /// Publishes a batch in messages of at most `maxReadings` readings.
    private func flush(key: String) throws {
        guard let batch = pending.removeValue(forKey: key) else { return }
        for chunk in batch.readings.chunked(maxReadings: policy.maxReadings) {
            try publish(SampleMessage(chunk, device: batch.device), station: batch.station)
        }
    }
}

/// A pollfd for one readable descriptor.
func readablePollFD(_ fd: Int32) -> pollfd {
    pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
}

extension SampleMessage.Readings {
    /// Splits into pieces of at most `maxReadings`.
    func chunked(maxReadings: Int) -> [SampleMessage.Readings] {
        func split<T>(_ list: [T], _ make: ([T]) -> SampleMessage.Readings) -> [SampleMessage.Readings] {
            stride(from: 0, to: list.count, by: maxReadings).map { make(Array(list[$0..<min($0 + maxReadings, list.count)])) }
        }
        switch self {
        case .imu(let list): return split(list, SampleMessage.Readings.imu)
        case .distance(let list): return split(list, SampleMessage.Readings.distance)
        case .posture(let list): return split(list, SampleMessage.Readings.posture)
        }
    }
}

/// A source's thread, to wait for at shutdown.
public final class SourceThread: Sendable {
    /// The source's name.
    public let name: String
    fileprivate let finished = DispatchSemaphore(value: 0)

    fileprivate init(name: String) { self.name = name }

    /// Waits up to `timeoutS` for the source's `run` to return; says whether it did.
    public func join(timeoutS: Double) -> Bool {
        finished.wait(timeout: .now() + timeoutS) == .success
    }
}

extension SensorSource {
    /// Starts `run` on a dedicated, named thread; the handle joins it.
    public func start(into queue: EventQueue, stop: StopFlag, logger: Logger) -> SourceThread {
        let handle = SourceThread(name: name)
        let thread = Thread {
            self.run(into: queue, stop: stop, logger: logger)
            handle.finished.signal()
        }
        thread.name = "sensor-bridge.\(name)"
        thread.start()
        return handle
    }
}
