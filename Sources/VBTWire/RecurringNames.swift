/// Names that recur on the bus, each stream's `src` and each topic, made into a `String` once
/// and handed out again for every message that carries them: a `src` made anew is an
/// allocation and a free, and the consumer's tables compare two equal but separate strings
/// byte by byte, while the same string compares at once (docs/decisions/0034-wire-codec-hot-paths.md).
///
/// Written by hand: a table this small and single-purpose (direct-mapped, a name replacing the
/// one in its slot) is a few lines, and nothing in the package mirror offers one. A name not
/// in the table is made as before, so a full or thrashing table costs only what it saves.
/// Owned by one thread (a subscriber's).
public final class RecurringNames {
    private var slots: [String?]
    private let mask: Int
    /// Names made because the table did not hold them (a first sighting, or one replaced).
    private(set) var made = 0

    /// A table of `slots` names (a power of two, at least two), each name in one of a pair of
    /// slots. 16,384 hold the `src` and topic of a thousand stations, a few names in a hundred
    /// replaced (`RecurringNamesTests`).
    public init(slots: Int = 16_384) {
        precondition(slots > 1 && slots & (slots - 1) == 0, "slots must be a power of two, at least two")
        self.slots = Array(repeating: nil, count: slots)
        mask = slots - 1
    }

    /// The name whose UTF-8 bytes are `bytes` (valid UTF-8: the caller checked them).
    public func name(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let hash = Self.hash(bytes)
        // Two slots a name may be in (a pair): one slot a name had too many rivals at a thousand
        // stations (a fifth of the names in a table three-quarters empty), two few.
        let first = hash & mask & ~1
        for slot in first...(first + 1) {
            if var known = slots[slot], known.withUTF8({ Self.same($0, bytes) }) { return known }
        }
        let made = String(decoding: bytes, as: UTF8.self)
        self.made += 1
        // An empty slot of the pair, else the one the hash's next bit picks.
        let slot = slots[first] == nil ? first : slots[first + 1] == nil ? first + 1 : first + (hash >> 20) & 1
        slots[slot] = made
        return made
    }

    /// Whether `a` and `b` hold the same bytes, compared eight at a time (the standard library's
    /// `elementsEqual` takes some 800 instructions for a 40-byte name).
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
    /// time, then the rest, then MurmurHash3's 64-bit finalizer (`fmix64`, Austin Appleby,
    /// github.com/aappleby/smhasher, public domain). Without the finalizer the table used the
    /// hash's low bits, which a word's high bytes never reach through the multiplications: a
    /// name's last word's high bytes, where station numbers are, picked no slot, and names of
    /// stations that differ only there shared one (half the names made anew at 1,000 stations).
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
        hash ^= hash >> 33
        hash &*= 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash &*= 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        return Int(truncatingIfNeeded: hash)
    }
}
