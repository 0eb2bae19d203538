import Foundation
import Logging
import Synchronization
import VBTBus
import VBTWire

// What a bridge's sources share: each (BLE device, serial port, replay file, simulator) runs
// `run` on a thread of its own with plain blocking I/O and timeouts, and hands what it reads,
// stamped and rated, to the one `EventQueue` the publishing thread drains (Bridge.swift).

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
