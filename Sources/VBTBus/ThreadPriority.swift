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
