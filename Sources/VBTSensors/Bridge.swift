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
