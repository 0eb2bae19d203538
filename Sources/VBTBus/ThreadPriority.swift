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
/// one), and the socket loop and ZeroMQ's I/O threads descend from those: the
/// unit's `Nice=-5` stayed on the main thread, which only waits, and the
/// loop ran at 0 (issue 17, seen in `ps -L`). So the loop thread takes the
/// main thread's niceness when it starts (ZeroMQ's threads, created by its
/// first socket, inherit it), and `keep()` gives it to threads started later.
///
/// A raise (a lower niceness than the thread has) needs CAP_SYS_NICE or a
/// high enough RLIMIT_NICE: the units that ask for one also set `LimitNICE=`.
/// Without it the threads keep what they have, and `shortfall` says so.
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
    nonisolated(unsafe) private static var lastShortfall: String?

    /// Gives the calling thread the program's niceness; false when it may not.
    @discardableResult
    public static func adopt() -> Bool {
        set(thread: 0, to: started)  // 0: the calling thread
    }

    /// Gives every thread the program's niceness when threads were started
    /// since the last call (a look at /proc/self/task's link count otherwise).
    public static func keep() {
        var info = stat()
        guard stat("/proc/self/task", &info) == 0 else { return }
        let threads = Int(info.st_nlink)
        lock.lock()
        defer { lock.unlock() }
        guard threads != threadsSeen else { return }
        threadsSeen = threads
        let nice = started
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return }
        var refused = 0
        for task in tasks {
            guard let tid = pid_t(task) else { continue }
            if !set(thread: tid, to: nice) { refused += 1 }
        }
        lastShortfall =
            refused == 0
            ? nil
            : "\(refused) of \(tasks.count) threads could not take the niceness \(nice) the program was started with "
                + "(a raise needs CAP_SYS_NICE or LimitNICE= in the unit)"
    }

    /// Why the last `keep()` left threads at another niceness; nil when it did not.
    public static var shortfall: String? {
        lock.lock()
        defer { lock.unlock() }
        return lastShortfall
    }

    private static func set(thread: pid_t, to nice: Int32) -> Bool {
        let which = __priority_which_t(PRIO_PROCESS.rawValue)
        errno = 0
        let current = getpriority(which, id_t(thread))
        if errno == 0, current == nice { return true }
        return setpriority(which, id_t(thread), nice) == 0
    }
}
