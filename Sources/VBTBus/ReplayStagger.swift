// How `sensor-bridge --replay --stations N --stagger S` spreads a recording's copies in
// time, shared with `vbt loadtest`, which must know each copy's delay to count the reps it
// expects.

/// How a replay spreads its copies in time. Copies of one recording in lockstep are no gym:
/// every copy would complete a rep on the same reading, and the consumers would see a burst
/// of hundreds of reps at once, then nothing. Copy k (from 0) of N starts k/N of `seconds`
/// late. The copies fall in `groups` groups of neighbours, and a group's readings are shifted
/// by its first copy's delay, so a copy's reading times lag its publishing by less than
/// `seconds / groups` (31 ms for 2 s over 64 groups, about what a batching bridge holds a reading) while the replay encodes a
/// message's readings once a group, not once a copy. `vbt loadtest` computes the same delays.
public struct ReplayStagger: Sendable, Equatable {
    public let seconds: Double
    public let copies: Int
    public let groups: Int

    public init(seconds: Double, copies: Int) {
        self.seconds = max(0, seconds)
        self.copies = max(1, copies)
        self.groups = min(self.copies, 64)
    }

    /// How long one pass of a looping staggered replay lasts, s: the recording's length (its last
    /// replayed message, `lastMessageT` seconds after its first line), or its readings' span and one
    /// reading's interval if longer, so sensor time never goes back. `vbt loadtest` counts the reps
    /// it expects with the same length (a pass a few tenths of a second longer than the readings'
    /// span would move each later pass's reps by as much).
    public static func passSeconds(lastMessageT: Double, readingSpan: Double, readings: Int) -> Double {
        max(lastMessageT, readingSpan + readingStep(readingSpan: readingSpan, readings: readings), 0.01)
    }

    /// The average interval between a recording's readings, s (10 ms with fewer than two): a
    /// pass that follows another starts this long after the previous pass's last reading, so
    /// the recorded spacing holds across passes (the unstaggered replay's rule too).
    public static func readingStep(readingSpan: Double, readings: Int) -> Double {
        readings > 1 ? readingSpan / Double(readings - 1) : 0.01
    }

    /// How late copy `copy` (from 0) publishes, in seconds.
    public func delay(_ copy: Int) -> Double { seconds * Double(copy) / Double(copies) }

    /// The group of copy `copy`.
    public func group(_ copy: Int) -> Int { copy * groups / copies }

    /// The delay of a group's readings: its first copy's delay.
    public func groupDelay(_ group: Int) -> Double { delay((group * copies + groups - 1) / groups) }

    /// Whether `copy` is the last of its group.
    public func isLastOfGroup(_ copy: Int) -> Bool { copy + 1 == copies || group(copy + 1) != group(copy) }
}
