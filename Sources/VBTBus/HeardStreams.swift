import VBTWire

/// A stream's holes: the seqs it missed, as disjoint ranges in order (what the session-recorder keeps
/// per stream, and what `vbt loadtest`'s subscriber keeps of the rep streams).
extension Array where Element == ClosedRange<UInt64> {
    /// The index of the hole that holds `seq`, found by halving.
    public func holeIndex(holding seq: UInt64) -> Int? {
        var (low, high) = (0, count)
        while low < high {
            let middle = (low + high) / 2
            if self[middle].upperBound < seq { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low].contains(seq) ? low : nil
    }

    /// Takes `seq` out of the hole that holds it, split in place so the list stays in order (sorting
    /// it again for each seq filled was O(n log n), and a stream a consumer often fell behind on has
    /// hundreds of holes); false when no hole holds it.
    public mutating func fill(_ seq: UInt64) -> Bool {
        guard let index = holeIndex(holding: seq) else { return false }
        let hole = self[index]
        var pieces: [ClosedRange<UInt64>] = []
        if hole.lowerBound < seq { pieces.append(hole.lowerBound...(seq - 1)) }
        if seq < hole.upperBound { pieces.append((seq + 1)...hole.upperBound) }
        replaceSubrange(index...index, with: pieces)
        return true
    }

    /// Takes out every seq below `first`; returns how many there were.
    public mutating func removeAll(below first: UInt64) -> Int {
        var removed = 0
        var kept: [ClosedRange<UInt64>] = []
        for hole in self {
            if hole.upperBound < first {
                removed += hole.count
            } else if hole.lowerBound < first {
                removed += Int(first - hole.lowerBound)
                kept.append(first...hole.upperBound)
            } else {
                kept.append(hole)
            }
        }
        self = kept
        return removed
    }

    /// The seqs in the holes.
    public var seqCount: Int { reduce(0) { $0 + $1.count } }
}

/// What a subscriber heard of some streams, and the holes it missed (to fetch from their producers'
/// journals, proto/replay.md), for one that does not need them in order: it takes each message as it
/// comes and counts the ones it fetches again (`vbt loadtest`'s listener, of the rep streams).
///
/// A stream is taken from where it stood when this subscriber first heard of it: the first heartbeat
/// offer of a producer instance says where each of its streams stood (what came before is not this
/// subscriber's), and a stream that offer did not list began since, from seq 1. Before any offer of its
/// producer, a stream is taken from its first message heard.
public struct HeardStreams: Sendable {
    /// Per stream: the last seq heard of (live, or said sent by an offer).
    public private(set) var last: [String: UInt64] = [:]
    /// Per stream: the seqs missed, in order, disjoint.
    public private(set) var holes: [String: [ClosedRange<UInt64>]] = [:]
    /// Per stream: the producer (its heartbeat's station) whose offer named it: where to ask.
    public private(set) var producers: [String: String] = [:]
    /// Producer instances (a `src`'s part before the slash) whose first offer was taken.
    private var baselined: Set<String> = []
    /// The streams kept (by `src`); others are ignored.
    private let keeps: @Sendable (String) -> Bool
    /// Messages and offers whose seq ran more than `maxJump` past what was heard of their stream
    /// (forged or corrupt: taken as heard, but they open no hole and move nothing, so one cannot make
    /// a stream look short by billions, nor silence what follows it).
    public private(set) var ahead = 0
    /// The largest jump taken as a hole: far more than any stream sends while a subscriber is away.
    public static let maxJump: UInt64 = 1_000_000

    /// Keeps the streams `keeps` says yes to.
    public init(keeps: @escaping @Sendable (String) -> Bool) { self.keeps = keeps }

    /// A message heard live or fetched: false when it was heard before (a duplicate), or its stream is not kept.
    public mutating func heard(src: String, seq: UInt64) -> Bool {
        guard keeps(src) else { return false }
        guard let known = last[src] else {
            let begunHere = baselined.contains(String(streamInstance(src)))
            if begunHere && seq - 1 > Self.maxJump {
                ahead += 1
                return true
            }
            last[src] = seq
            if seq > 1 && begunHere { holes[src, default: []].append(1...(seq - 1)) }
            return true
        }
        if seq > known && seq - known > Self.maxJump {
            ahead += 1
            return true
        }
        if seq > known {
            if seq > known + 1 { holes[src, default: []].append((known + 1)...(seq - 1)) }
            last[src] = seq
            return true
        }
        guard var list = holes[src], list.fill(seq) else { return false }
        holes[src] = list.isEmpty ? nil : list
        return true
    }

    /// A heartbeat's replay offer from `producer` (its station), running as `instance`: where each of
    /// its streams stands. A stream past what was heard has a tail to fetch.
    public mutating func offered(by producer: String, instance: String, lastSeq: [String: Int]) {
        let first = baselined.insert(instance).inserted
        for (src, sent) in lastSeq where sent > 0 && keeps(src) {
            let through = UInt64(sent)
            producers[src] = producer
            guard let known = last[src] else {
                if !first && through > Self.maxJump {
                    ahead += 1
                    continue
                }
                last[src] = through
                if !first { holes[src, default: []].append(1...through) }
                continue
            }
            if through > known && through - known > Self.maxJump {
                ahead += 1
                continue
            }
            if through > known {
                holes[src, default: []].append((known + 1)...through)
                last[src] = through
            }
        }
    }

    /// Seqs of `src` below `first` no journal holds any more: given up; returns how many.
    public mutating func giveUp(src: String, below first: UInt64) -> Int {
        guard var list = holes[src] else { return 0 }
        let removed = list.removeAll(below: first)
        holes[src] = list.isEmpty ? nil : list
        return removed
    }

    /// Seqs missed and not fetched or given up yet.
    public var missing: Int { holes.values.reduce(0) { $0 + $1.seqCount } }
}
