import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Keeps every thread of a program at the niceness it was started with
/// (its systemd unit's `Nice=`, deploy/README.md "Priorities").
///
/// On Linux a niceness belongs to a thread, and a new thread inherits its
/// creator's. The Swift runtime's threads are created by libdispatch, which
/// sets each worker's niceness from its quality of service (0 for the default
/// one), and the socket loop and ZeroMQ's I/O threads descend from those: left
/// alone, the unit's `Nice=` would stay on the main thread, which only waits, and
/// the loop would run at 0 (`ps -L` shows each thread's). So the loop thread takes the
/// main thread's niceness when it starts (ZeroMQ's threads, created by its
/// first socket, inherit it), and `keep()` gives it to threads started later.
///
/// A raise (a lower niceness than the thread has) needs CAP_SYS_NICE or a
/// high enough RLIMIT_NICE: the units that ask for one also set `LimitNICE=`.
/// Without it the threads keep what they have: the loop logs so when it starts.
public enum ThreadPriority {
    /// The main thread's niceness: the one the program was started with.
    /// (For PRIO_PROCESS Linux reads the thread whose id is `who`; the main
    /// thread's id is the process id.)
    public static var started: Int32 {
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
        return errno == 0 ? nice : 0
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var threadsSeen = 0

    /// Gives the calling thread the program's niceness; false when it may not.
    @discardableResult
    public static func adopt() -> Bool {
        set(thread: 0, to: started)  // 0: the calling thread
    }

    /// Gives every thread the program's niceness when threads were started
    /// since the last call (a look at /proc/self/task's link count otherwise);
    /// returns how many threads could not take it.
    @discardableResult
    public static func keep() -> Int {
        var info = stat()
        guard stat("/proc/self/task", &info) == 0 else { return 0 }
        let threads = Int(info.st_nlink)
        lock.lock()
        defer { lock.unlock() }
        guard threads != threadsSeen else { return 0 }
        threadsSeen = threads
        let nice = started
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return 0 }
        return tasks.compactMap { pid_t($0) }.filter { !set(thread: $0, to: nice) }.count
    }

    private static func set(thread: pid_t, to nice: Int32) -> Bool {
        let which = __priority_which_t(PRIO_PROCESS.rawValue)
        errno = 0
        let current = getpriority(which, id_t(thread))
        if errno == 0, current == nice { return true }
        return setpriority(which, id_t(thread), nice) == 0
    }
}

/// The rep path's real-time scheduling (deploy/README.md, "Priorities").
///
/// The programs a rep passes through (a station's sensor-bridge, the bus,
/// the rep-detector) run under SCHED_RR: ahead of every thread of the normal
/// scheduler, so a reading is forwarded and a rep published as soon as they
/// come, not when the recorder or the notifier give up a core. Their systemd
/// units set it (`CPUSchedulingPolicy=rr`, `CPUSchedulingPriority=`
/// `repPathPriority`), and every thread a program starts inherits it. A
/// niceness cannot do this: a nice -5 thread still waits up to a scheduler
/// tick behind a nice-0 one that has the core (docs/decisions/0033-rep-path-scheduling.md).
///
/// The kernel keeps 5 % of every second for the normal scheduler
/// (`kernel.sched_rt_runtime_us`), so a real-time program that spins cannot
/// take the computer. `vbt loadtest` uses `apply(_:to:)` to give its listener
/// and its replaying bridge the rep path's priority.
public enum RealtimeScheduling {
    /// The units' `CPUSchedulingPriority=` (deploy/systemd: vbt-bus, rep-detector, sensor-bridge@).
    public static let repPathPriority: Int32 = 10

    /// Puts every thread of process `pid` (0: this one) under SCHED_RR at
    /// `priority`, or back under the normal scheduler with 0; returns how
    /// many threads refused (SCHED_RR needs CAP_SYS_NICE or an RLIMIT_RTPRIO
    /// as high). Threads it starts later inherit it from their creators.
    @discardableResult
    public static func apply(_ priority: Int32, to pid: pid_t = 0) -> Int {
        let folder = pid == 0 ? "/proc/self/task" : "/proc/\(pid)/task"
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return 1 }
        var parameters = sched_param()
        parameters.sched_priority = priority
        let policy = priority > 0 ? SCHED_RR : SCHED_OTHER
        return tasks.compactMap { pid_t($0) }.filter { sched_setscheduler($0, policy, &parameters) != 0 && errno != ESRCH }.count
    }

    /// The policies of every thread of process `pid`, each once (`rr:10`, or
    /// `rr:10, other` when some thread is not on it); nil without such a process.
    public static func describe(process pid: pid_t) -> String? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        let policies = Set(tasks.compactMap { pid_t($0) }.compactMap { describe($0) })
        return policies.isEmpty ? nil : policies.sorted().joined(separator: ", ")
    }

    /// Puts the calling thread under the normal scheduler (its niceness kept),
    /// if it was real-time: for a thread that writes files, not the rep path.
    /// Lowering needs no privilege.
    public static func leave() {
        let policy = sched_getscheduler(0)
        guard policy == SCHED_RR || policy == SCHED_FIFO else { return }
        var parameters = sched_param()
        _ = sched_setscheduler(0, SCHED_OTHER, &parameters)
    }

    /// A thread's policy as a report says it: `rr:10`, `fifo:98`, `other`
    /// (nil when there is no such thread).
    public static func describe(_ thread: pid_t) -> String? {
        let policy = sched_getscheduler(thread)
        var parameters = sched_param()
        guard policy >= 0, sched_getparam(thread, &parameters) == 0 else { return nil }
        switch policy {
        case SCHED_RR: return "rr:\(parameters.sched_priority)"
        case SCHED_FIFO: return "fifo:\(parameters.sched_priority)"
        default: return "other"
        }
    }
}
