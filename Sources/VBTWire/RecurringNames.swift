/// Names that recur on the bus, each stream's `src` and each topic, made into a `String` once
/// and handed out again for every message that carries them. A consumer made each one anew for
/// every message (a `src` is longer than a string kept in place, so each was an allocation and
/// a free), then looked it up by source in several tables, where each comparison of two equal
/// but separate strings went over their bytes; the same string compares at once (callgrind of
/// the rep-detector, issue 17).
///
/// Written by hand: a table this small and single-purpose (direct-mapped, a name replacing the
/// one in its slot) is a few lines, and nothing in the package mirror offers one. A name not
/// in the table is made as before, so a full or thrashing table costs only what it saves.
/// Owned by one thread (a subscriber's).
public final class RecurringNames {
    private var slots: [String?]
    private let mask: Int

    /// A table of `slots` names (a power of two).
    public init(slots: Int = 8192) {
        precondition(slots > 0 && slots & (slots - 1) == 0, "slots must be a power of two")
        self.slots = Array(repeating: nil, count: slots)
        mask = slots - 1
    }

    /// The name whose UTF-8 bytes are `bytes` (valid UTF-8: the caller checked them).
    public func name(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let slot = Self.hash(bytes) & mask
        if var known = slots[slot], known.withUTF8({ Self.same($0, bytes) }) { return known }
        let made = String(decoding: bytes, as: UTF8.self)
        slots[slot] = made
        return made
    }

    /// Whether `a` and `b` hold the same bytes, compared eight at a time.
    private static func same(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        var at = 0
        while at + 8 <= a.count {
            guard UnsafeRawPointer(x + at).loadUnaligned(as: UInt64.self) == UnsafeRawPointer(y + at).loadUnaligned(as: UInt64.self) else { return false }
            at += 8
        }
        while at < a.count {
            guard x[at] == y[at] else { return false }
            at += 1
        }
        return true
    }

    /// FNV-1a (Fowler, Noll and Vo; www.isthe.com/chongo/tech/comp/fnv) over eight bytes at a
    /// time, then the rest; its high bits folded into the low ones the table uses.
    private static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let prime: UInt64 = 0x100_0000_01b3
        var at = 0
        if let base = bytes.baseAddress {
            while at + 8 <= bytes.count {
                hash = (hash ^ UnsafeRawPointer(base + at).loadUnaligned(as: UInt64.self)) &* prime
                at += 8
            }
        }
        while at < bytes.count {
            hash = (hash ^ UInt64(bytes[at])) &* prime
            at += 1
        }
        return Int(truncatingIfNeeded: hash ^ hash >> 29)
    }
}
