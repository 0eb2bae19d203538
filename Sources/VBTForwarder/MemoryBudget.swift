import CZeroMQ
import VBTBus

#if canImport(Glibc)
import Glibc
#endif

/// Holds the bus to a budget of resident memory however many of its subscribers fall behind.
///
/// libzmq bounds each subscriber's queue in messages, never their sum, and lowering a connected
/// peer's mark cuts off readers that keep up. So the bus reads its resident memory every
/// `checkIntervalS`; from seven eighths of the budget (`actBytes`) it gives freed heap back
/// (`trimRetryS`), then disconnects the subscriber whose kernel send queue (`SIOCOUTQ`) has been
/// non-empty longest, at least `behindS`; from fifteen sixteenths (`hardBytes`) the one behind
/// longest, however short. It acts below the ceiling because a freed queue takes milliseconds to
/// leave the heap. Subscribers behind go by priority (`BusPriority.bulk` first, `.realtime`
/// last): short of `hardBytes`, one goes only while none of a lower priority is connected or
/// was disconnected within `rejoinS`. A subscriber disconnected connects again and fetches what
/// it missed from the producers' journals (proto/replay.md). Why each rule, with the runs that
/// measured the rules it replaced: docs/decisions/0030-memory-budget.md.
///
/// The policy is here, as a value a test drives with its own numbers; the
/// `Forwarder` reads the queues and closes the connection.
public struct BusMemoryBudget: Sendable {
    /// What to do at a check.
    public enum Decision: Sendable, Equatable {
        /// Disconnect this subscriber (its connection's descriptor): it is furthest behind.
        case disconnect(Int32)
        /// At the budget, and no subscriber to disconnect: none behind for `behindS`, or, short of fifteen
        /// sixteenths, only ones a lower priority connected holds back (said once until back under it).
        case noneToDisconnect
    }

    /// The resident memory the bus keeps to, bytes: its ceiling.
    public let limitBytes: Int
    /// From here, a subscriber behind for `behindS` is disconnected (seven eighths of the budget).
    public var actBytes: Int { limitBytes - limitBytes / 8 }
    /// From here, the subscriber behind longest, however short (fifteen sixteenths of the budget).
    public var hardBytes: Int { limitBytes - limitBytes / 16 }
    /// From here, even while the last disconnection settles (thirty-one thirty-seconds of the budget).
    public var urgentBytes: Int { limitBytes - limitBytes / 32 }
    public var checkIntervalS = 0.025
    /// How long a subscriber's send queue must have stayed non-empty for it to be disconnected.
    public var behindS = 0.5
    /// After a disconnection: how long libzmq gets to free the queue before the memory is read again.
    public var settleS = 0.2
    /// Near the budget, freed heap is given back at most this often before a subscriber is chosen, s
    /// (a trim walks the whole heap: some milliseconds of the forwarding thread).
    public var trimRetryS = 1.0
    private var nextTrimTry = 0.0
    /// Subscribers disconnected at the budget.
    public private(set) var disconnections = 0
    /// The largest resident memory read, bytes.
    public private(set) var peakBytes = 0
    /// Per connection (descriptor): since when its send queue has not been empty.
    private var backedUp: [Int32: Double] = [:]
    /// How long a disconnected subscriber counts as connected, for the order of disconnection, s.
    /// libzmq connects again after 0.1 s, but a recorder may say its priority again seconds later
    /// (up to 4 s at 1,000 stations), and with a shorter time the next priority up went meanwhile.
    public var rejoinS = 5.0
    /// Per priority (`BusPriority.shedOrder`): when a subscriber of it was last disconnected.
    private var lastShed: [Int: Double] = [:]
    private var nextCheck = 0.0
    private var settled = 0.0
    private var trimDue = false
    private var saidNoneToDisconnect = false

    /// Messages queued from one publisher that the forwarding has not taken yet, under a budget
    /// of `megabytes` MiB: an eighth of it in messages of 1 KiB (11,520 for 90 MiB; a station's
    /// bridge sends some 70 a second). Past it libzmq stops reading that publisher, whose own
    /// queue then fills and drops what the consumers count as gaps and fetch from its journal.
    /// Bounded here because a replay of 2,000 stations sends over one connection: with the
    /// high-water mark's 65,536 this queue alone took the bus past its budget, no subscriber behind.
    public static func inboundMark(megabytes: Int) -> Int32 {
        let (messages, overflow) = max(1, megabytes).multipliedReportingOverflow(by: 128)
        return overflow ? Int32.max : Int32(clamping: max(1_024, messages))
    }

    /// A budget of `megabytes` MiB.
    public init(megabytes: Int) {
        limitBytes = max(1, megabytes) << 20
    }

    /// Whether a check is due (`check` reads the queues only then).
    public func isDue(now: Double) -> Bool { now >= nextCheck }

    /// Seconds until the next check is due (for a poll's timeout).
    public func untilNextCheck(now: Double) -> Double { max(0, nextCheck - now) }

    /// One check: `queued` is each subscriber connection's bytes in its send queue now, and
    /// `priorities` what those that said so are (the rest are `.normal`), asked for only when the
    /// memory is past seven eighths of the budget (a look at every connection, 40 times a second).
    /// Past a disconnection, gives the freed heap back (`trim`) before reading the memory again.
    /// (`resident` and `trim` are this process's by default; a test gives its own.)
    public mutating func check(
        now: Double, queued: [Int32: Int], priorities: () -> [Int32: BusPriority] = { [:] }, resident: () -> Int? = { HeapTrim.residentBytes },
        trim: () -> Void = { HeapTrim.giveBackFreed() }
    ) -> Decision? {
        guard isDue(now: now) else { return nil }
        nextCheck = now + checkIntervalS
        var since: [Int32: Double] = [:]
        for (link, bytes) in queued where bytes > 0 { since[link] = backedUp[link] ?? now }
        backedUp = since
        guard var bytes = resident() else { return nil }
        if trimDue, now >= settled {
            trimDue = false
            if bytes >= actBytes {
                trim()
                bytes = resident() ?? bytes
            }
        }
        peakBytes = max(peakBytes, bytes)
        // Memory the bus freed but still holds counts too: given back first (at most every
        // `trimRetryS`), a subscriber is disconnected only if the queues themselves are too much:
        // heap freed but kept otherwise costs a subscriber a moment behind its queue, again and again.
        if bytes >= actBytes, now >= nextTrimTry {
            nextTrimTry = now + trimRetryS
            trim()
            bytes = resident() ?? bytes
        }
        guard bytes >= actBytes else {
            saidNoneToDisconnect = false
            return nil
        }
        // While the last disconnection's queue is being freed, only the budget's last thirty-second is reason to go on.
        guard now >= settled || bytes >= urgentBytes else { return nil }
        let hard = bytes >= hardBytes
        // The lowest priority first; of those, the one behind longest. Short of `hardBytes`, a
        // subscriber behind for `behindS` goes only if none of a lower priority is connected (or was
        // disconnected within `rejoinS`), behind or not: the lower one's turn comes first. From
        // `hardBytes`, those behind for `behindS` first, by priority (one stopped for good must go
        // before its queue takes the budget, whoever keeps the others' queues busy), then the rest,
        // by priority.
        let said = priorities()
        let rank = { (link: Int32) in (said[link] ?? .normal).shedOrder }
        let rejoining = lastShed.filter { now - $0.value < rejoinS }.keys
        let lowest = (queued.keys.map(rank) + rejoining).min()
        let long = backedUp.filter { now - $0.value >= behindS }
        let candidates = hard ? (long.isEmpty ? backedUp : long) : long.filter { rank($0.key) == lowest }
        let furthest = candidates.min { (rank($0.key), $0.value, $0.key) < (rank($1.key), $1.value, $1.key) }
        guard let furthest else {
            defer { saidNoneToDisconnect = true }
            return saidNoneToDisconnect ? nil : .noneToDisconnect
        }
        backedUp[furthest.key] = nil
        lastShed[rank(furthest.key)] = now
        disconnections += 1
        settled = now + settleS
        trimDue = true
        return .disconnect(furthest.key)
    }
}

/// What the bus asks the kernel about its subscribers' connections: libzmq
/// gives no per-peer queue depth nor a way to close one peer of a bound socket,
/// but its monitor reports each accepted connection's descriptor. These
/// functions only read, or shut the connection down (shutdown(2)); the
/// descriptor stays libzmq's, which sees the connection end as a peer's and
/// closes it itself.
enum KernelSocket {
    /// What tells one connection from a later one given the same descriptor: the socket's inode.
    struct Identity: Equatable, Sendable {
        var device: UInt64
        var inode: UInt64
    }

    static func identity(_ descriptor: Int32) -> Identity? {
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return Identity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Bytes written to the connection that its peer has not taken yet; nil on error.
    static func queuedBytes(_ descriptor: Int32) -> Int? {
        let bytes = czmq_socket_unsent_bytes(descriptor)
        return bytes < 0 ? nil : Int(bytes)
    }

    /// The peer's address ("127.0.0.1:50312", "[::1]:50312"), or "local" (a Unix socket's unnamed peer).
    static func peerName(_ descriptor: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard named == 0 else { return "unknown" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var ip = address.pointee.sin_addr
                    inet_ntop(AF_INET, &ip, &text, socklen_t(text.count))
                    return "\(cText(text)):\(UInt16(bigEndian: address.pointee.sin_port))"
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var ip = address.pointee.sin6_addr
                    inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count))
                    return "[\(cText(text))]:\(UInt16(bigEndian: address.pointee.sin6_port))"
                }
            }
        default:
            return "local"
        }
    }

    /// Ends the connection both ways; libzmq's I/O thread sees it end and closes the descriptor.
    static func shutDown(_ descriptor: Int32) {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR))
    }
}

/// The text of a NUL-terminated C string held in an array.
private func cText(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
