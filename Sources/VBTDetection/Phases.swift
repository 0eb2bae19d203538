import Foundation
import VBTWire

// The whole rep, not only its concentric phase: the descent into it, the pause at the bottom
// and the pause at the top before the descent, measured from the readings before the
// concentric phase; and a prescribed tempo ("3-1-X-0") judged against them.
//
// A rep is published as its concentric phase ends, before the pause at the top that follows
// it is over. So each rep carries the phases that led into its concentric phase: the pause at
// the top after the previous rep of the set (none on a set's first rep: the set-up before it
// is no part of the tempo), its descent, the pause at the bottom. Every pause between two reps
// is then judged once, on the rep that follows it.

/// The phases of a rep before its concentric phase (docs/detection.md "Phases and tempo").
public struct RepPhases: Sendable, Codable, Equatable {
    /// Where the bar left the top for the descent, reading time (Unix s).
    public var eccentricStartT: Double
    /// Where the descent came to rest (or turned, touch-and-go) at the bottom.
    public var eccentricEndT: Double
    /// The descent's mean speed: how far the bar went down over how long, m/s (positive).
    public var eccentricMeanMps: Double
    /// From the end of the descent to the start of the concentric phase, seconds.
    public var pauseBottomS: Double
    /// From the previous rep's top to this rep's descent, seconds; nil on a set's first rep.
    public var pauseTopS: Double?

    /// The descent's duration, seconds.
    public var eccentricS: Double { eccentricEndT - eccentricStartT }

    /// Creates phases.
    public init(eccentricStartT: Double, eccentricEndT: Double, eccentricMeanMps: Double, pauseBottomS: Double, pauseTopS: Double?) {
        (self.eccentricStartT, self.eccentricEndT, self.eccentricMeanMps) = (eccentricStartT, eccentricEndT, eccentricMeanMps)
        (self.pauseBottomS, self.pauseTopS) = (pauseBottomS, pauseTopS)
    }
}

/// Velocity beyond this is the bar moving (m/s): five standard deviations of a 2 mm laser's
/// velocity fitted over 0.2 s at 50 Hz, and a third of the slowest descent a coach prescribes
/// (0.6 m in 6 s peaks at 0.16 m/s).
let phaseMovingMps = 0.05
/// A descent takes the bar at least this share of the rep's rise down (a walk-out's wobble,
/// a breath at the top do not).
let phaseDescentShare = 0.5

/// Measures the phases that led into a concentric phase starting at `concentricStartT` and
/// rising `romM`, from the bar's heights `readings` (time order, reading times, metres) up to
/// and a little past it. `previousTopT` is the end of the previous rep's concentric phase in
/// the same set (nil on a set's first rep); the descent is looked for after it.
///
/// The descent is the last run of readings moving down faster than `phaseMovingMps` before the
/// concentric start that takes the bar `phaseDescentShare` of `romM` down; its ends are refined
/// as the concentric phase's are, by fitting the positions around each turning point
/// (`refineTurningPoint`, on the heights turned upside down). Nil with no such descent.
public func measurePhases(_ readings: [(t: Double, m: Double)], concentricStartT: Double, romM: Double, previousTopT: Double?) -> RepPhases? {
    let minimumDropM = phaseDescentShare * romM
    return findDescent(readings, concentricStartT: concentricStartT, minimumDropM: minimumDropM, previousTopT: previousTopT)?
        .phases(concentricStartT: concentricStartT, minimumDropM: minimumDropM, previousTopT: previousTopT)
}

/// Where the heights the phases of a concentric phase starting at `concentricStartT` are read from
/// begin: 15 s before it (a set's first rep: its walk-out, its descent and a long pause), or a
/// second before the previous rep's top. They end 0.3 s past that start.
func phasesSpanStart(concentricStartT: Double, previousTopT: Double?) -> Double {
    max(concentricStartT - 15, (previousTopT ?? -.infinity) - 1)
}

/// A descent into a concentric phase as `findDescent` found it: its ends and the heights there,
/// and the drops that chose it. Found while a rise is still going on (`PhasesAhead`), it gives
/// the rep's phases once the rise is measured, where that would find the same descent.
struct Descent: Sendable, Codable, Equatable {
    /// Where the bar left the top, and its height there.
    var startT: Double, startM: Double
    /// Where the descent came to rest, as fitted (it may lie past a touch-and-go rep's
    /// concentric start: the phases end it there), and the bar's height there.
    var endT: Double, endM: Double
    /// The concentric start searched back from, and the bar's height at the descent's end
    /// bounded by it.
    var searchedFromT: Double, boundedEndM: Double
    /// How far the chosen run of readings went down (metres).
    var dropM: Double
    /// The largest drop among the later runs passed over as too small (0 with none).
    var skippedDropM: Double

    /// The phases of a rep whose concentric phase starts at `concentricStartT`, when a search
    /// asking `minimumDropM` would choose this descent (nil otherwise). An end fitted past the
    /// start ends there, at the height read there when that is where the search began; else at
    /// the fitted end's, which is the bottom of a turn the bar has barely left.
    func phases(concentricStartT: Double, minimumDropM: Double, previousTopT: Double?) -> RepPhases? {
        let end = min(endT, concentricStartT)
        guard dropM >= minimumDropM, skippedDropM < minimumDropM, end > startT else { return nil }
        let atEndM = end < endT && concentricStartT == searchedFromT ? boundedEndM : endM
        return RepPhases(
            eccentricStartT: startT, eccentricEndT: end, eccentricMeanMps: max(0, startM - atEndM) / (end - startT),
            pauseBottomS: max(0, concentricStartT - end), pauseTopS: previousTopT.map { max(0, startT - $0) })
    }
}

/// The descent into a concentric phase starting at `concentricStartT`: the last run of readings
/// moving down that takes the bar at least `minimumDropM` down, after `previousTopT`, its ends
/// refined (`measurePhases`). Nil with no such run.
func findDescent(_ readings: [(t: Double, m: Double)], concentricStartT: Double, minimumDropM: Double, previousTopT: Double?) -> Descent? {
    let window = readings.filter { $0.t <= concentricStartT + 0.3 }
    guard window.count >= 8, let first = window.first, let last = window.last, last.t > first.t else { return nil }
    // Velocity fitted over about 0.2 s whatever the rate (at least five readings).
    let interval = (last.t - first.t) / Double(window.count - 1)
    let halfWidth = max(2, Int((0.1 / interval).rounded()))
    // Only the velocity is read, and only walking back from the concentric start to the descent
    // (up to 15 s of readings are given for a set's first rep): each reading's is fitted when
    // first read, the same fit over the same neighbours as `differentiate`'s.
    // (Closures, not key paths: a key path into a tuple is looked up at run time, reading by
    // reading, which was a tenth of a rep's time.)
    let times = window.map { $0.t }, positions = window.map { $0.m }
    let trace = window.map { KinematicSample(t: $0.t, positionM: $0.m, velocityMps: 0, accelerationMps2: 0) }
    var velocities = [Double](repeating: .nan, count: window.count)
    func velocity(_ index: Int) -> Double {
        if velocities[index].isNaN {
            let low = max(0, index - halfWidth), high = min(window.count - 1, index + halfWidth)
            velocities[index] = regressionSlope(times[low...high], positions[low...high])
        }
        return velocities[index]
    }
    // The descent: the last qualifying run of downward movement before the concentric start.
    guard var index = trace.lastIndex(where: { $0.t <= concentricStartT }) else { return nil }
    var run: (from: Int, to: Int, dropM: Double)?
    var skippedDropM = 0.0
    while index >= 0, trace[index].t > (previousTopT ?? -.infinity) {
        guard velocity(index) < -phaseMovingMps else { index -= 1; continue }
        var start = index
        while start > 0, velocity(start - 1) < -phaseMovingMps { start -= 1 }
        let heights = trace[start...index].map { $0.positionM }
        let dropM = (heights.max() ?? 0) - (heights.min() ?? 0)
        if dropM >= minimumDropM {
            run = (start, index, dropM)
            break
        }
        skippedDropM = max(skippedDropM, dropM)
        index = start - 1
    }
    guard let run else { return nil }
    // Upside down, the descent's start is a rise's start (the moving side after it) and its
    // end a rise's end; the fits' windows scale with the descent as the concentric phase's do.
    // The fits see only the readings between the previous rep's top and this rep's rise: a
    // rise on either side is another movement, and taken as the turn's far side it bends the
    // fit (a slow descent leaves the top by millimetres in its first tenth of a second).
    // (The fits read times and heights only.)
    let flipped = trace.filter { $0.t >= (previousTopT ?? -.infinity) && $0.t <= concentricStartT }.map {
        KinematicSample(t: $0.t, positionM: -$0.positionM, velocityMps: 0, accelerationMps2: 0)
    }
    // The fits' windows scale with the descent: a slow one's ends are parabolas over a
    // second or more. The velocity threshold lies 0.6 s inside a 5 s descent, so a fit
    // starting there may not reach the turn: the heights place it (`turnFromHeights`).
    let runS = trace[run.to].t - trace[run.from].t
    let halfWindowS = min(1.2, max(0.06, 0.25 * runS))
    let middle = (run.from + run.to) / 2
    let before = trace[..<run.from].filter { $0.t >= max(previousTopT ?? -.infinity, trace[run.from].t - 1) }.map { $0.positionM }
    let after = trace[run.to...].filter { $0.t <= concentricStartT }.map { $0.positionM }
    // The rests' levels: the highest reading in the second before the descent's run, the
    // lowest between it and the rise (a turn without a pause is its extreme too).
    let (top, bottom) = ((before.max() ?? trace[run.from].positionM), (after.min() ?? trace[run.to].positionM))
    // From the threshold, the fit reaches a turn within half its window; from the heights'
    // turn only beyond that (a fit centred on the turn sees less of the movement it fits).
    func guess(_ edge: Double, _ heights: Double?, within bounds: ClosedRange<Double>) -> Double {
        guard let heights, abs(heights - edge) > halfWindowS / 2 else { return edge }
        return min(max(heights, bounds.lowerBound), bounds.upperBound)
    }
    let (firstT, lastT) = (trace[run.from].t, trace[run.to].t)
    // The previous rep's top bounds the descent's start, unless a sensor placed it after the
    // run began (an IMU at 10 Hz can): then the run's own first time does.
    let earliest = min(firstT, max(previousTopT ?? -.infinity, firstT - 2))
    let startGuess = guess(
        firstT, turnFromHeights(trace, from: middle, step: -1, restM: top, dropM: top - bottom), within: earliest...firstT)
    let endGuess = guess(
        lastT, turnFromHeights(trace, from: middle, step: 1, restM: bottom, dropM: bottom - top), within: lastT...max(lastT, concentricStartT))
    let start = refineTurningPoint(flipped, near: startGuess, halfWindowS: halfWindowS, minimum: true).t
    let end = refineTurningPoint(flipped, near: endGuess, halfWindowS: halfWindowS, minimum: false).t
    guard min(end, concentricStartT) > start else { return nil }
    return Descent(
        startT: start, startM: interpolatedPosition(trace, at: start), endT: end, endM: interpolatedPosition(trace, at: end),
        searchedFromT: concentricStartT, boundedEndM: interpolatedPosition(trace, at: min(end, concentricStartT)), dropM: run.dropM,
        skippedDropM: skippedDropM)
}

/// Where the bar left (or reached) its rest at `restM`, from the heights alone: walking from
/// `from` (inside the descent) by `step` (-1: back to its start, +1: on to its end), the times
/// the bar is 20 % and 5 % of `dropM` (signed: rest minus the far end) away from its rest. Near
/// the rest the distance grows with the square of the time from the turn (the acceleration is
/// continuous), so a quarter of the distance is half the time: the turn is twice the 5 %
/// time minus the 20 % time. 5 % of the shortest ROM is several times a laser's noise; it
/// crosses that far from the turn whatever the descent's speed. Nil when a level is never crossed.
func turnFromHeights(_ trace: [KinematicSample], from: Int, step: Int, restM: Double, dropM: Double) -> Double? {
    /// The interpolated time the heights, walking out, come within `share` of the drop of the rest.
    func crossing(_ share: Double) -> Double? {
        let level = restM - share * dropM
        var index = from
        while index + step >= 0, index + step < trace.count {
            let (inner, outer) = (trace[index], trace[index + step])
            // Walked out past the level: on the rest's side of it.
            if (outer.positionM - level) * dropM >= 0 {
                let span = outer.positionM - inner.positionM
                let share = span == 0 ? 0 : (level - inner.positionM) / span
                return inner.t + min(1, max(0, share)) * (outer.t - inner.t)
            }
            index += step
        }
        return nil
    }
    guard dropM != 0, let near = crossing(0.05), let far = crossing(0.2) else { return nil }
    return 2 * near - far
}

// MARK: - Tempo

extension Tempo {
    /// Judges a rep: each phase prescribed and measured (a phase unknown, such as the pause at
    /// the top before a set's first rep, is not judged).
    public func judge(_ phases: RepPhases?, concentricS: Double) -> TempoVerdict {
        let measured: [TempoPhase: Double?] = [
            .eccentric: phases?.eccentricS, .pauseBottom: phases?.pauseBottomS, .concentric: concentricS, .pauseTop: phases?.pauseTopS,
        ]
        var judged = 0
        var missed: [TempoPhase] = []
        for (phase, prescribed) in zip(TempoPhase.allCases, seconds) {
            guard let prescribed, let value = measured[phase] ?? nil else { continue }
            judged += 1
            if !Self.meets(value, prescribed) { missed.append(phase) }
        }
        return TempoVerdict(met: judged > 0 ? missed.isEmpty : nil, missed: missed)
    }
}

/// Whether a rep met its tempo, and which phases missed.
public struct TempoVerdict: Sendable, Codable, Equatable {
    /// Nil when no prescribed phase could be judged.
    public var met: Bool?
    public var missed: [TempoPhase]
}
