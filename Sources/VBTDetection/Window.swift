// A station's latest readings (its last 20-25 s, for every station of a gym
// at once) are most of the rep-detector's memory: 1,000 stations' windows
// (issue 17). Kept in one array each, they cost twice over:
// - an array appended to doubles its storage when full, and trimming its
//   front keeps the storage, so a window peaking just past a power of two
//   holds nearly twice what it uses, for good;
// - the checkpoint writer encodes a snapshot of every station's state off
//   the loop (CheckpointWriter), and the loop's next append to each window
//   copies the whole window, so for the length of a write the process held
//   every window twice.
// Chunks of a fixed size fix both: a window holds at most two chunks beyond
// what it uses, and an append after a snapshot copies one chunk. Swift's
// standard library and swift-collections have no such chunked sequence
// (swift-collections' Deque is one contiguous ring, copied whole), so it is
// written here.

/// The latest readings of a stream, appended at the end and dropped from the
/// front, stored in chunks of `chunkSize`: a copy (a checkpoint's snapshot)
/// shares every chunk, and an append then copies only the last.
struct ChunkedWindow<Element>: RandomAccessCollection {
    /// Elements a chunk holds (a power of two).
    static var chunkSize: Int { 128 }
    private static var shift: Int { 7 }

    private var chunks: [[Element]] = []
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
        return chunks[at >> Self.shift][at & (Self.chunkSize - 1)]
    }

    mutating func append(_ element: Element) {
        // (No binding of the last chunk here: a second reference would make the append copy it.)
        if let filled = chunks.last?.count, filled < Self.chunkSize {
            chunks[chunks.count - 1].append(element)
        } else {
            var chunk: [Element] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunk.append(element)
            chunks.append(chunk)
        }
        count += 1
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
