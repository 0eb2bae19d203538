import VBTBus

/// How a rep-detector process runs.
public struct DetectorOptions: Sendable {
    /// Stations to serve, a shell glob (`*`, `rack-*`).
    public var stationsGlob = "*"
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
