// A station's latest readings (its last 20 s, for every station of a gym
// at once) are most of the rep-detector's memory. Kept in one array each,
// they would cost twice over:
// - an array appended to doubles its storage when full, and trimming its
//   front keeps the storage, so a window peaking just past a power of two
//   holds nearly twice what it uses, for good;
// - the checkpoint writer encodes a snapshot of every station's state off
//   the loop (CheckpointWriter), and the loop's next append to each window
//   copies the whole window, so for the length of a write the process would hold
//   every window twice.
// Chunks of a fixed size fix both: a window holds at most two chunks beyond
// what it uses, and an append after a snapshot copies one chunk. Swift's
// standard library and swift-collections have no such chunked sequence
// (swift-collections' Deque is one contiguous ring, copied whole), so it is
// written here.
//
// A window also keeps its readings smaller than they are in use
// (`WindowElement`): a reading's time as 32-bit microseconds from the
// window's base, not a 64-bit Unix time, which halves a height (16 bytes to
// 8) and takes a third off a bar IMU's reading (24 to 16); a laser reading keeps
// its accelerometer in half precision as well (14 bytes: DistanceTracker.swift). The figures at
// 1,000 and 2,000 stations: docs/decisions/0035-detector-memory-and-checkpoints.md.

/// What a `ChunkedWindow` keeps of an element: a smaller form (`Stored`)
/// whose time is 32-bit microseconds from the window's base. Storing an
/// element read back gives it again, so a window, its checkpoint and a
/// hand-over of it hold the same times.
protocol WindowElement {
    associatedtype Stored: Sendable
    /// The element's time, whole microseconds (a reading's: `WindowTime.microseconds`).
    var microseconds: Int64 { get }
    /// The element as a window keeps it, its time `offset` microseconds after the window's base.
    func stored(offset: Int32) -> Stored
    /// A stored element's time: microseconds after the window's base.
    static func offset(of stored: Stored) -> Int32
    /// The element a window keeps as `stored`, whose time is `microseconds`.
    init(stored: Stored, microseconds: Int64)
}

/// A reading's time as a window keeps it: whole microseconds. A reading's
/// time is Unix seconds with a fraction (proto/sample.schema.json `t`); a
/// Double near today's Unix time is itself good to 0.24 µs only, and
/// sensors at up to a few hundred hertz need nothing finer than a
/// microsecond. A time read back (`seconds`) gives the same microseconds again.
enum WindowTime {
    /// `t` (seconds) in whole microseconds; 0 for what no reading's time is (not finite, or past year 100,000: two such times' difference fits an Int64).
    static func microseconds(_ t: Double) -> Int64 {
        guard t.isFinite, abs(t) < 4e12 else { return 0 }
        return Int64((t * 1e6).rounded())
    }

    /// Whole microseconds as seconds: the Double nearest to them.
    static func seconds(_ microseconds: Int64) -> Double { Double(microseconds) / 1e6 }
}

/// The latest readings of a stream, appended at the end and dropped from the
/// front, stored in chunks of `chunkSize`: a copy (a checkpoint's snapshot)
/// shares every chunk, and an append then copies only the last.
///
/// Times are kept as 32-bit offsets from a base, so a window spans at most
/// `spanMicroseconds` (35 minutes; a station's windows hold seconds): an
/// element appended further from the base moves the base up to it, and drops
/// the oldest elements that are then too far behind.
struct ChunkedWindow<Element: WindowElement>: RandomAccessCollection {
    /// Elements a chunk holds (a power of two). A window leaves up to a chunk unused at each
    /// end, and an append after a snapshot copies one: a station's 20 s of laser readings
    /// (1,000 of 14 bytes) take 15.8 KB of heap in chunks of 64 (docs/performance.md); at 32
    /// the chunks' own headers would cost what the slack saves.
    static var chunkSize: Int { 64 }
    private static var shift: Int { 6 }

    /// How far (µs) an element may be from the window's base either way.
    static var spanMicroseconds: Int64 { Int64(Int32.max) }

    private var chunks: [[Element.Stored]] = []
    /// The time (µs) element times are kept from.
    private var base: Int64 = 0
    /// Elements of the first chunk already dropped.
    private var dropped = 0
    private(set) var count = 0

    init() {}

    init<Elements: Sequence>(_ elements: Elements) where Elements.Element == Element {
        for element in elements { append(element) }
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "ChunkedWindow index out of range")
        let at = dropped + position
        let stored = chunks[at >> Self.shift][at & (Self.chunkSize - 1)]
        return Element(stored: stored, microseconds: base + Int64(Element.offset(of: stored)))
    }

    /// Each element as the window stores it, oldest first, without building the element: for a
    /// reader of one or two of its fields over the whole window.
    func forEachStored(_ body: (Element.Stored) -> Void) {
        var at = dropped
        for _ in 0..<count {
            body(chunks[at >> Self.shift][at & (Self.chunkSize - 1)])
            at += 1
        }
    }

    mutating func append(_ element: Element) {
        let microseconds = element.microseconds
        if count == 0 {
            base = microseconds
        } else if abs(microseconds - base) > Self.spanMicroseconds {
            rebase(towards: microseconds)
        }
        keep(element, at: microseconds)
    }

    /// Appends `element`, whose time (`microseconds`) is within a span of the base.
    private mutating func keep(_ element: Element, at microseconds: Int64) {
        let stored = element.stored(offset: Int32(microseconds - base))
        // (No binding of the last chunk here: a second reference would make the append copy it.)
        if let filled = chunks.last?.count, filled < Self.chunkSize {
            chunks[chunks.count - 1].append(stored)
        } else {
            var chunk: [Element.Stored] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunk.append(stored)
            chunks.append(chunk)
        }
        count += 1
    }

    /// Moves the base to half a span short of `microseconds` (a time too far from it to
    /// keep), keeping the elements still within a span of it, the newest ones.
    private mutating func rebase(towards microseconds: Int64) {
        let elements = Array(self)
        let newBase = microseconds > base ? microseconds - Self.spanMicroseconds / 2 : microseconds + Self.spanMicroseconds / 2
        let keptFrom = elements.lastIndex { abs($0.microseconds - newBase) > Self.spanMicroseconds }.map { $0 + 1 } ?? 0
        removeAll()
        base = newBase
        for element in elements[keptFrom...] { keep(element, at: element.microseconds) }
    }

    mutating func append<Elements: Sequence>(contentsOf elements: Elements) where Elements.Element == Element {
        for element in elements { append(element) }
    }

    /// Drops the `k` oldest elements.
    mutating func removeFirst(_ k: Int) {
        precondition(k >= 0 && k <= count, "ChunkedWindow can't remove more elements than it has")
        guard k < count else { return removeAll() }
        dropped += k
        count -= k
        let whole = dropped >> Self.shift
        if whole > 0 {
            chunks.removeFirst(whole)
            dropped -= whole << Self.shift
        }
    }

    mutating func removeAll() {
        chunks = []
        dropped = 0
        count = 0
    }
}

extension ChunkedWindow: Sendable where Element: Sendable {}

/// Coded as the array of its elements (as the window was before it was chunked).
extension ChunkedWindow: Codable where Element: Codable {
    init(from decoder: any Decoder) throws {
        self.init(try [Element](from: decoder))
    }

    func encode(to encoder: any Encoder) throws {
        try Array(self).encode(to: encoder)
    }
}
