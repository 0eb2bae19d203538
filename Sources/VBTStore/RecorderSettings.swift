import VBTBus

/// How the recorder paces its writes.
public struct RecorderSettings: Sendable, Equatable {
    /// Longest a received message waits before its batch is written, s.
    public var flushIntervalS = 0.2
    /// A batch is written at once when this many messages wait. A batch's cost is mostly per
    /// stream (a row of readings and a progress row per station's sensor), so at 1,000 stations,
    /// 2,000 streams, batches of 10,000 messages cost 7-24 % less a message than batches of 5,000
    /// (`vbt-bench --only recorder`), but hold 5 MB more of the recorder's heap, which at 1,002
    /// stations has to stay under 50 MB (docs/decisions/0046-recorder-batches-of-5000.md).
    public var flushAtMessages = 5_000
    /// First retry after a failed write, s; doubles up to `maxRetryS`.
    public var firstRetryS = 0.25
    /// Longest wait between retries of a failed write, s.
    public var maxRetryS = 5.0
    /// How often old raw samples are pruned, s.
    public var pruneIntervalS = 600.0
    /// Most messages held in memory while the database is unavailable; beyond
    /// it the oldest are fetched again from the producers' journals later (`Ingestor.maxPending`).
    public var maxPending = 50_000
    /// After a pass that found the input's queue nearly empty, the loop rests this long before it
    /// looks again, s (0: never): what is stored waits `flushIntervalS` anyway, so the recorder
    /// is woken a couple of hundred times a second, not for every message, and what arrives
    /// meanwhile is read in one pass (woken for each of 35,000 messages a second, it spent a
    /// sixth of its time in the scheduler). A query waits at most this much longer.
    public var gatherS = 0.004
    /// How long a hole waits for a journal to fill it before it is counted lost (`HolePatience`).
    public var holePatience = HolePatience.history
    /// Creates the defaults.
    public init() {}
}
