import Foundation
import VBTBus

#if canImport(Glibc)
import Glibc
#endif

/// This computer's own stalls, measured beside a load test: the baseline of
/// the latency it reports. A thread asks to wake every millisecond and
/// records how late it woke (the method of the kernel's cyclictest, written
/// here because it is a dozen lines around clock_nanosleep(2)).
///
/// Under SCHED_FIFO (when this user may: root, or an RLIMIT_RTPRIO) it runs
/// ahead of every vbt thread, the rep path's SCHED_RR ones included, so what delays it is the computer itself: a
/// virtual machine's host taking its cores away, or the kernel. On the 2-core
/// development VM it found both cores stopped at once for 6-70 ms a few times
/// a minute, idle or loaded. Without the privilege it runs as vbt's
/// threads do and measures how late a thread with nothing to do is woken.
final class StallProbe: @unchecked Sendable {
    /// A wake-up later than `stallMs`: when it was due (wall clock, Unix s) and how late it came.
    struct Stall: Sendable {
        var dueWall: Double
        var lateMs: Double
    }

    /// What the probe saw (the report's `machine_stalls`).
    struct Summary: Encodable, Sendable {
        /// `fifo`: ahead of every vbt thread; `other`: a thread like vbt's (no privilege for SCHED_FIFO).
        var policy: String
        var wakeups: Int
        var over2Ms: Int
        var over5Ms: Int
        var worstMs: Double
        /// The lateness of the wake-ups over 2 ms, summed.
        var stalledS: Double
        enum CodingKeys: String, CodingKey {
            case policy, wakeups
            case over2Ms = "over_2ms"
            case over5Ms = "over_5ms"
            case worstMs = "worst_ms"
            case stalledS = "stalled_s"
        }
    }

    /// Its SCHED_FIFO priority: above every vbt thread, the rep path's SCHED_RR
    /// included (`RealtimeScheduling`), under the kernel's own at 99.
    static let priority: Int32 = 98
    /// A wake-up this late is a stall.
    static let stallMs = 2.0
    /// At most this many stalls are kept (a second of stalls every second for a day would be more).
    static let keptStalls = 100_000

    private let condition = NSCondition()
    private var stopping = false
    private var running = false
    private var summary = Summary(policy: "other", wakeups: 0, over2Ms: 0, over5Ms: 0, worstMs: 0, stalledS: 0)
    private var stalls: [Stall] = []

    /// Starts the probe's thread.
    func start() {
        condition.withLock { running = true }
        let thread = Thread { [self] in probe() }
        thread.name = "vbt.stall-probe"
        thread.start()
    }

    /// Stops the probe and returns what it saw.
    func finish() -> Summary {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        while running { condition.wait() }
        return summary
    }

    /// How many milliseconds of stalls fell within `from...to` (wall clock, Unix s).
    func stalledMs(from: Double, to: Double) -> Double {
        condition.withLock {
            // The stalls are kept in the order they came: the first that can reach `from` is found by halving.
            let reach = from - summary.worstMs / 1000
            var low = 0
            var high = stalls.count
            while low < high {
                let middle = (low + high) / 2
                if stalls[middle].dueWall < reach { low = middle + 1 } else { high = middle }
            }
            var total = 0.0
            for stall in stalls[low...] {
                if stall.dueWall > to { break }
                total += max(0, min(to, stall.dueWall + stall.lateMs / 1000) - max(from, stall.dueWall)) * 1000
            }
            return total
        }
    }

    private func probe() {
        var parameters = sched_param()
        parameters.sched_priority = Self.priority
        let fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters) == 0
        condition.withLock { summary.policy = fifo ? "fifo" : "other" }
        func seconds(_ time: timespec) -> Double { Double(time.tv_sec) + Double(time.tv_nsec) / 1e9 }
        var due = timespec()
        clock_gettime(CLOCK_MONOTONIC, &due)
        while true {
            due.tv_nsec += 1_000_000
            if due.tv_nsec >= 1_000_000_000 {
                due.tv_nsec -= 1_000_000_000
                due.tv_sec += 1
            }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, nil)
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let lateMs = max(0, seconds(now) - seconds(due)) * 1000
            condition.lock()
            summary.wakeups += 1
            summary.worstMs = max(summary.worstMs, lateMs)
            if lateMs > Self.stallMs {
                summary.over2Ms += 1
                summary.stalledS += lateMs / 1000
                if stalls.count < Self.keptStalls { stalls.append(Stall(dueWall: wallClockSeconds() - lateMs / 1000, lateMs: lateMs)) }
            }
            if lateMs > 5 { summary.over5Ms += 1 }
            if stopping {
                running = false
                condition.broadcast()
                condition.unlock()
                return
            }
            condition.unlock()
            // After a stall the next wake-up is a millisecond from now, not a burst to catch up.
            if lateMs > 1 { due = now }
        }
    }
}
