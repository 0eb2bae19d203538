import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Gives the kernel back the heap pages a process freed.
///
/// glibc's allocator keeps freed blocks for reuse, so after a backlog of thousands
/// of messages is written and freed a daemon's resident memory stays at the
/// backlog's peak (docs/decisions/0031-heap-trim.md). `malloc_trim(3)` returns
/// every whole free page. Swift's Glibc module does not declare it, so it
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

extension HeapTrim {
    /// This process's resident memory, bytes (`/proc/self/statm`'s second field, in pages); nil where there is none.
    public static var residentBytes: Int? {
        // Read with one read(2) into a small buffer: the bus asks 40 times a second, and
        // Foundation's whole-file reading (a stat, a growing buffer) was most of its idle time.
        let descriptor = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// When a program whose memory rises and falls with its queues gives the
/// freed part back (`HeapTrim`): the bus, whose queue for a consumer that fell
/// behind may hold 80 MB of messages that would otherwise stay resident after
/// the consumer has caught up.
///
/// Due when the resident memory is `growthBytes` above the lowest seen after
/// a trim (the program's own size), at most every `minIntervalS`: while a
/// queue is still full a trim finds little to give back, and the next one,
/// after it has drained, finds the rest.
public struct HeapTrimSchedule: Sendable {
    public var minIntervalS = 10.0
    public var growthBytes = 16 << 20
    private var floor: Int?
    private var next = 0.0

    public init() {}

    /// Whether to trim now. The first call only notes the program's size.
    public mutating func due(residentBytes: Int, now: Double) -> Bool {
        guard let floor else {
            self.floor = residentBytes
            return false
        }
        if residentBytes < floor { self.floor = residentBytes }
        return now >= next && residentBytes > floor + growthBytes
    }

    /// Notes a trim: what was resident after it, and when.
    public mutating func trimmed(residentBytes: Int, now: Double) {
        floor = min(floor ?? residentBytes, residentBytes)
        next = now + minIntervalS
    }

    /// Trims when due, reading the resident memory before and after; true when it did.
    /// (`resident` and `trim` are this process's by default; a test gives its own.)
    @discardableResult
    public mutating func run(
        now: Double, resident: () -> Int? = { HeapTrim.residentBytes }, trim: () -> Void = { HeapTrim.giveBackFreed() }
    ) -> Bool {
        guard let before = resident(), due(residentBytes: before, now: now) else { return false }
        trim()
        trimmed(residentBytes: resident() ?? before, now: now)
        return true
    }
}
