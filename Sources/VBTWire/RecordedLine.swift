// A recording's lines as values (proto/README.md, "Recordings"): VBTBus reads the files
// (RecordingReader), and `vbt eval`'s offline run in VBTDetection takes the lines without the bus.

/// One line of a recording read back: when it was received and the message,
/// checked against the envelope rules exactly as a subscriber checks it.
public struct RecordedLine: Sendable {
    /// 1-based line number in the file.
    public var number: Int
    /// Seconds since the recording's first line.
    public var t: Double
    /// The recorded message.
    public var message: BusMessage

    /// Creates a line.
    public init(number: Int, t: Double, message: BusMessage) { (self.number, self.t, self.message) = (number, t, message) }
}

/// A recording line that is not a usable message, and why.
public struct UnreadableLine: Error, Sendable, Equatable, CustomStringConvertible {
    /// 1-based line number in the file.
    public var number: Int
    /// What was wrong.
    public var reason: String
    public var description: String { "line \(number): \(reason)" }

    /// Creates a report.
    public init(number: Int, reason: String) { (self.number, self.reason) = (number, reason) }
}
