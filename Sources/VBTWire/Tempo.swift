// A tempo as a coach prescribes it, read where it is written (a plan's item, an
// assignment's argument) and judged where reps are measured (VBTDetection's Phases).

/// The four phases of a tempo, in the notation's order, by the names the wire uses.
public enum TempoPhase: String, Sendable, Codable, CaseIterable {
    case eccentric
    case pauseBottom = "pause_bottom"
    case concentric
    case pauseTop = "pause_top"
}

/// A prescribed tempo "E-B-C-T": seconds of eccentric, pause at the bottom, concentric and
/// pause at the top, each a number or X (as fast as possible, or any: not judged). "3-1-X-0"
/// and its compact form "31X0" say the same.
public struct Tempo: Sendable, Codable, Equatable {
    /// The seconds of each phase, in `TempoPhase` order; nil for X.
    public var seconds: [Double?]

    /// Reads a tempo; nil unless it has four phases, each X or a number of seconds 0 to 30.
    public init?(_ text: String) {
        let trimmed = text.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()
        let parts: [Substring]
        if trimmed.contains("-") {
            parts = String(trimmed).split(separator: "-", omittingEmptySubsequences: false)
        } else {
            parts = trimmed.map { Substring(String($0)) }
        }
        guard parts.count == 4 else { return nil }
        var seconds: [Double?] = []
        for part in parts {
            if part == "X" || part == "x" {
                seconds.append(nil)
            } else if let value = Double(part), value.isFinite, (0...30).contains(value) {
                seconds.append(value)
            } else {
                return nil
            }
        }
        self.seconds = seconds
    }

    /// The tempo in its dashed form ("3-1-X-0").
    public var text: String {
        seconds.map { value in
            guard let value else { return "X" }
            return value == value.rounded() ? String(Int(value)) : String(value)
        }.joined(separator: "-")
    }

    /// A prescribed 0 is met under this long: no pause (touch-and-go) or no hold at the top.
    public static let zeroUnderS = 0.3
    /// A prescribed duration is met within this many seconds ...
    public static let toleranceS = 0.5
    /// ... or this share of it, whichever is wider: "3" means about three seconds, and a
    /// lifter counting in their head is off by a count's half.
    public static let toleranceShare = 0.2

    /// Whether `measured` seconds meets `prescribed` (nil: X, always met).
    public static func meets(_ measured: Double, _ prescribed: Double?) -> Bool {
        guard let prescribed else { return true }
        if prescribed == 0 { return measured < zeroUnderS }
        return abs(measured - prescribed) <= max(toleranceS, toleranceShare * prescribed)
    }
}
