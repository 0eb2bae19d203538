/// Samples routed by station to the detectors that split a gym between them.
///
/// A subscription is a topic prefix, and one station's name may begin another's (`rack-1`,
/// `rack-10`), so a detector serving half of a gym cannot ask for its half by name. It subscribes
/// to `~K/N/sample.` instead. The bus, once it has seen such a subscription, sends each sample a
/// second time under `~K/N/<topic>`, K being the station's shard of N, and the detector takes the
/// prefix off as it reads. Every other subscriber still receives `sample.<station>` alone.
///
/// A station's shard is FNV-1a 64 of its name's UTF-8 bytes, modulo N, plus 1: written down (not
/// Swift's `Hasher`, seeded anew in each process) so that the bus, every detector and every
/// restart compute the same split.
public enum ShardRoute {
    /// The first byte of a routed topic. No message type begins with it, and the bus refuses a
    /// publisher's message whose topic does (`isRouted`).
    public static let marker = UInt8(ascii: "~")
    /// The most detectors a gym is split between.
    public static let maxShards = 64

    /// What a routed topic begins with for shard `shard` of `shards`: `~2/3/`.
    public static func prefix(shard: Int, of shards: Int) -> String { "~\(shard)/\(shards)/" }

    /// The shard, from 1, that `station` falls in when `shards` detectors split the gym.
    @inlinable
    public static func shard(of station: some Sequence<UInt8>, shards: Int) -> Int {
        Int(fnv1a64(station) % UInt64(max(1, shards))) + 1
    }

    /// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
    @inlinable
    public static func fnv1a64(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }

    /// Whether a topic is routed (begins with the marker).
    @inlinable
    public static func isRouted(_ topic: some Collection<UInt8>) -> Bool { topic.first == marker }

    /// A routed prefix or topic read apart: its shard, its count of shards and where what it
    /// routes begins; nil when `bytes` is not `~K/N/...` with 1 <= K <= N <= `maxShards`.
    @inlinable
    public static func parse(_ bytes: some Collection<UInt8>) -> (shard: Int, shards: Int, rest: Int)? {
        guard bytes.first == marker else { return nil }
        // K, then N, each of one to three digits and ended by a slash.
        var (shard, number, digits, offset) = (0, 0, 0, 1)
        for byte in bytes.dropFirst() {
            offset += 1
            if byte == UInt8(ascii: "/") {
                guard digits > 0 else { return nil }
                if shard > 0 {
                    guard shard <= number, number <= maxShards else { return nil }
                    return (shard, number, offset)
                }
                guard number >= 1 else { return nil }
                (shard, number, digits) = (number, 0, 0)
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3 {
                number = number * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            } else {
                return nil
            }
        }
        return nil
    }

    /// The topic a routed topic carries (`~1/2/sample.rack-7` -> `sample.rack-7`); nil when
    /// `topic` is not a routed one.
    public static func unrouted(_ topic: [UInt8]) -> [UInt8]? {
        guard let route = parse(topic) else { return nil }
        return Array(topic[route.rest...])
    }

    /// The routed topic of `topic` (`sample.<station>`) for `shards` detectors: the prefix of
    /// the station's shard, then the topic.
    public static func routed(_ topic: some Collection<UInt8>, stationFrom start: Int, shards: Int) -> [UInt8] {
        let station = topic.dropFirst(start)
        var routed = Array(prefix(shard: shard(of: station, shards: shards), of: shards).utf8)
        routed.append(contentsOf: topic)
        return routed
    }
}
