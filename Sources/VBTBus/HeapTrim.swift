#if canImport(Glibc)
import Glibc
#endif

/// Gives the kernel back the heap pages a process freed.
///
/// glibc's allocator keeps freed blocks for reuse: after a backlog of thousands
/// of messages is written and freed, a daemon's resident memory stays at the
/// backlog's peak (the session-recorder grew by tens of MB at each stall of the
/// disk in issue 17's 10-minute load test, and never shrank). `malloc_trim(3)`
/// returns every whole free page. Swift's Glibc module does not declare it, so it
/// is looked up by name (dlsym(3)); elsewhere, or without it, nothing is done.
public enum HeapTrim {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim: Trim? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
        #else
        return nil
        #endif
    }()

    /// Whether trimming is possible here (glibc).
    public static var isAvailable: Bool { trim != nil }

    /// Returns free heap pages to the kernel; true when some were.
    @discardableResult
    public static func giveBackFreed() -> Bool {
        guard let trim else { return false }
        return trim(0) == 1
    }
}
