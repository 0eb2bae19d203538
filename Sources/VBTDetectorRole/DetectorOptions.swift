import Foundation
import VBTBus
import VBTDetection
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// How a rep-detector process runs.
public struct DetectorOptions: Sendable {
    /// The stations to serve: a --stations glob and a --shard of the gym.
    public var stations = StationSelection()
    /// Take over from a running detector instead of starting fresh.
    public var takeover = false
    /// Longest wait for the running detector's hand-over before starting fresh.
    public var takeoverTimeoutS = 10.0
    public var settings = DetectorSettings()
    /// The pattern library's file (learned patterns survive restarts); nil keeps them in memory.
    public var patternsPath: String? = "data/patterns.json"
    /// Share learned patterns with the session-recorder (and start from its patterns when the file has none).
    public var askRecorder = true
    /// How long an unanswered question to the recorder is remembered. The
    /// loop never waits for the answer: it detects on, and uses it when it comes.
    public var recorderTimeoutS = 10.0
    /// Journal what is published (reps, sets, rejections, profiles) and answer replay requests (nil: no journal).
    /// With a journal, each station's state is also checkpointed into its folder, and restored after a crash.
    public var journal: (settings: JournalSettings, endpoint: String)?
    /// Longest time between checkpoints while readings come (one is also written after every command and every set the wall clock ends).
    public var checkpointIntervalS = 2.0
    /// How input holes are fetched from the producers' journals.
    public var recovery = InOrderInput.Settings()
    /// Creates the defaults.
    public init() {}
}

/// The stations one detector serves: those its glob matches and whose name falls in its shard.
///
/// A gym too large for one detector runs N of them (`--shard 1/N` ... `N/N`), each serving the
/// stations whose name hashes to its shard: FNV-1a 64 of the name's UTF-8 bytes, modulo N, is
/// K-1. The hash is written down (not Swift's `Hasher`, seeded anew in each process) so that
/// every detector, every restart and every other program computes the same split.
public struct StationSelection: Sendable, Equatable, CustomStringConvertible {
    /// The --stations glob (`*`, `rack-*`).
    public let glob: String
    /// This detector's shard, from 1, of `shards`.
    public let shard: Int
    /// How many detectors split the gym (1: this one serves every station the glob matches).
    public let shards: Int

    /// Every station.
    public init() { (glob, shard, shards) = ("*", 1, 1) }

    /// The stations `glob` matches in shard `shard` of `shards`; shards are counted from 1.
    public init(glob: String, shard: Int = 1, of shards: Int = 1) throws(StationSelectionError) {
        guard !glob.isEmpty else { throw StationSelectionError("--stations needs a glob, e.g. '*' or 'rack-*'") }
        guard shards >= 1, shard >= 1, shard <= shards else {
            throw StationSelectionError("--shard \(shard)/\(shards): K/N needs 1 <= K <= N, e.g. --shard 1/2 and --shard 2/2 for two detectors")
        }
        // The bus routes samples to at most that many (`ShardRoute`): a larger N would get none.
        guard shards <= ShardRoute.maxShards else {
            throw StationSelectionError("--shard \(shard)/\(shards): at most \(ShardRoute.maxShards) detectors split a gym, e.g. --shard 1/2")
        }
        (self.glob, self.shard, self.shards) = (glob, shard, shards)
    }

    /// The stations `glob` matches in the shard written `K/N` (`--shard 2/3`).
    public init(glob: String, shard text: String) throws(StationSelectionError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let shard = Int(parts[0]), let shards = Int(parts[1]) else {
            throw StationSelectionError("--shard \(text): write K/N, this detector's shard K of N detectors, e.g. --shard 1/2")
        }
        try self.init(glob: glob, shard: shard, of: shards)
    }

    /// The glob, and the shard when the gym is split (`rack-* shard 2/3`), for the logs.
    public var description: String { shardText.map { "\(glob) shard \($0)" } ?? glob }

    /// Whether this detector serves every station (the default): nothing to decide per message.
    public var servesAll: Bool { glob == "*" && shards == 1 }

    /// Whether this detector serves `station`: the glob matches it and it falls in this shard.
    public func serves(_ station: String) -> Bool {
        if shards > 1, Self.shard(of: station, shards: shards) != shard { return false }
        return glob == "*" || fnmatch(glob, station, 0) == 0
    }

    /// The shard, from 1, that `station` falls in when `shards` detectors split the gym: the
    /// bus routes its samples by the same function (`ShardRoute`).
    public static func shard(of station: String, shards: Int) -> Int {
        ShardRoute.shard(of: station.utf8, shards: shards)
    }

    /// FNV-1a, 64-bit, of the UTF-8 bytes (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
    public static func fnv1a64(_ text: String) -> UInt64 { ShardRoute.fnv1a64(text.utf8) }

    /// The prefix this detector's samples are routed under (`~K/N/`), when the gym is split.
    public var routePrefix: String? { shards > 1 ? ShardRoute.prefix(shard: shard, of: shards) : nil }

    /// The shard as the takeover message and the logs write it (`2/3`); nil for a detector
    /// that does not split the gym, which old takeover messages (without the field) name.
    public var shardText: String? { shards > 1 ? "\(shard)/\(shards)" : nil }

    /// The program's name on the bus (its heartbeat's station): `rep-detector`, or
    /// `rep-detector-K` for shard K, so that each shard is watched, and alerted on, by itself.
    public var programName: String { shards > 1 ? "rep-detector-\(shard)" : "rep-detector" }

    /// The heartbeat schedule under `programName`, saying the prefixes it subscribes to.
    public func heartbeat(subscribes: [String]?) -> HeartbeatSchedule {
        var schedule = HeartbeatSchedule(role: "rep-detector", name: programName)
        schedule.subscribes = subscribes
        return schedule
    }

    /// The takeover request of a new detector serving these stations (`--takeover`).
    public func takeoverRequest(instance: String, firstSeq: [String: Int]) -> TakeoverMessage {
        TakeoverMessage(instance: instance, stations: glob, shard: shardText, firstSeq: firstSeq)
    }

    /// Whether a takeover request names the stations this detector serves: the same glob and
    /// the same shard (a request without a shard names the unsplit gym).
    public func isAsked(by request: TakeoverMessage) -> Bool {
        request.stations == glob && request.shard == shardText
    }
}

/// A --stations or --shard value that cannot be used; the message says what to write.
public struct StationSelectionError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
