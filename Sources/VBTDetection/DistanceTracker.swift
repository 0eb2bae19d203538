import Foundation

// The laser's side of a station: its readings' window, the turning points that find a rise,
// and each rise's trace (fused with the unit's accelerometer when it rides the bar). The
// station's detector (StationDetector.swift) judges what it finds.

/// The laser: EMA for the state machine; for the metrics, the readings fused
/// with the unit's accelerometer when it rides the bar (Fusion.swift), else
/// centred regression.
struct DistanceTracker: Sendable, Codable {
    private var points = ChunkedWindow<Point>()
    private var ema: Double?
    private var turning: TurningPoints
    private var gate = SpikeGate()
    /// The top of the latest rise: the descent into the next one is looked for after it.
    private var lastPeakT = -Double.infinity
    private static let fusion = FusionSettings()
    /// Readings taken into the window so far: the window is as it was while this stays.
    private var appended = 0
    /// The board's gravity over the window as last found (`lookAhead`, `measured`) at `appended`
    /// == `stamp`: any fusion of the same window takes the same figure without finding it again.
    /// Not checkpointed (the same window gives the same figure).
    private var gravity: (stamp: Int, value: BoardGravity?)?
    /// The lowest reading since the latest rise's top, and the last time the bar was near it
    /// (`PhasesAhead.nearBottomM`): where the rise to come leaves the bottom.
    private var bottom: (t: Double, m: Double, leftT: Double)?
    /// The descent into the rise going on, found while it rises (`lookAhead`).
    private var ahead: PhasesAhead?

    /// A reading: time, height in metres, the accelerometer when sent. The
    /// height and the accelerometer are kept in single precision (its 24-bit
    /// significand steps 0.24 µm at 2 m, against a laser's 0.1 mm, and holds a
    /// MEMS accelerometer's 16 bits): 24 bytes a reading, not 48, and 20 in
    /// a station's window, whose times are 32 bits (Window.swift).
    struct Point: Sendable, TimedHeight {
        var t: Double
        private var height: Float
        /// The accelerometer in g; `x` is NaN when none was sent (a sent one is JSON numbers, never NaN).
        private var x: Float, y: Float, z: Float

        init(t: Double, m: Double, acc: BoardAcceleration?) {
            self.t = t
            height = Float(m)
            (x, y, z) = acc.map { (Float($0.x), Float($0.y), Float($0.z)) } ?? (.nan, .nan, .nan)
        }

        var m: Double { Double(height) }
        var acc: BoardAcceleration? { x.isNaN ? nil : BoardAcceleration(x: Double(x), y: Double(y), z: Double(z)) }
    }

    init(settings: DetectorSettings) {
        turning = TurningPoints(hysteresisM: settings.hysteresisM, settleS: settings.settleS)
        alpha = settings.emaAlpha
    }

    private let alpha: Double

    /// Feeds a reading; `previousTopT` is the top of the previous rep of an open set (nil
    /// with none), after which a descent into the next rep is looked for.
    mutating func feed(
        t: Double, distanceMm: Double, accG: (Double, Double, Double)?, previousTopT: Double?
    ) -> [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] {
        var found: [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] = []
        for reading in gate.feed(t: t, m: distanceMm / 1000, acc: accG.map { BoardAcceleration(x: $0.0, y: $0.1, z: $0.2) }) {
            found += feedAccepted(reading, previousTopT: previousTopT)
        }
        return found
    }

    /// The phases of a rep whose concentric phase starts at `concentricStartT` and rises `romM`,
    /// from the descent found while it rose (`lookAhead`): none when no descent was (a pull from
    /// the floor); nil when that search was made from another start or top, or would not choose
    /// the same descent (the caller measures them).
    func phasesAhead(concentricStartT: Double, romM: Double, previousTopT: Double?) -> RepPhases?? {
        let minimumDropM = phaseDescentShare * romM
        guard let ahead, abs(concentricStartT - ahead.fromT) <= PhasesAhead.sameStartS, ahead.previousTopT == previousTopT,
            minimumDropM >= PhasesAhead.minimumDropM
        else { return nil }
        // A search asking less found nothing back from nearly the same start: one asking more won't.
        guard let descent = ahead.descent else { return .some(nil) }
        guard let phases = descent.phases(concentricStartT: concentricStartT, minimumDropM: minimumDropM, previousTopT: previousTopT) else { return nil }
        return phases
    }

    /// Follows the bottom the bar was lowered to and, once a rise has been clear of it for
    /// `PhasesAhead.afterS`, finds the descent into that rise: the phases' fusion and fits are
    /// done while the bar rises, not on the reading that completes the rep (a thousand stations
    /// completing reps on one reading queue behind each other's), and the rise's fusion then
    /// takes the board's gravity found here.
    private mutating func lookAhead(t: Double, m: Double, previousTopT: Double?) {
        guard t > lastPeakT else { return }
        if let low = bottom, m >= low.m {
            if m <= low.m + PhasesAhead.nearBottomM { bottom?.leftT = t }
        } else {
            bottom = (t, m, t)
        }
        guard let low = bottom, t >= low.leftT + PhasesAhead.afterS, m >= low.m + PhasesAhead.risenM, ahead?.leftT != low.leftT else { return }
        if gravity?.stamp != appended, points.last?.acc != nil { gravity = (appended, windowGravity()) }
        let (readings, fused) = fusedHeights(from: phasesSpanStart(concentricStartT: low.leftT, previousTopT: previousTopT), to: low.leftT + 0.3)
        // The bar left the bottom a little before it was clear of it: the turn, fitted as a
        // rise's start is, is where the concentric phase will be measured to start.
        let near = readings.filter { abs($0.t - low.leftT) <= 2 * PhasesAhead.afterS }
        let startT = refineTurningPoint(
            near.map { KinematicSample(t: $0.t, positionM: $0.m, velocityMps: 0, accelerationMps2: 0) }, near: low.leftT, halfWindowS: 0.15, minimum: true
        ).t
        ahead = PhasesAhead(
            fromT: startT, leftT: low.leftT, previousTopT: previousTopT,
            descent: findDescent(readings, concentricStartT: startT, minimumDropM: PhasesAhead.minimumDropM, previousTopT: previousTopT),
            gravity: gravity?.value, ridesTheBar: fused)
    }

    /// The lowest the bar has been after `lowest.after` (nil: no reading since), brought up to date.
    func lowest(_ lowest: inout LowestHeight) -> Double? { lowest.update(points) }

    /// The mean height of the readings in the last `overS` seconds (nil: none).
    func recentMean(overS: Double) -> Double? {
        guard let newest = points.last?.t else { return nil }
        var sum = 0.0, count = 0.0
        for point in points.reversed() {
            guard newest - point.t <= overS else { break }
            sum += point.m
            count += 1
        }
        return count > 0 ? sum / count : nil
    }

    /// The trace of the readings from `from` to `to`, as a rise's is made (`measured`); nil
    /// with too few readings.
    func trace(from: Double, to: Double) -> ([KinematicSample], ConcentricEndpoints)? {
        let window = indices(from: from, to: to)
        guard window.count >= 4 else { return nil }
        if let fused = fused(indices(from: from - 0.5, to: to)) { return (fused, .velocityZeros) }
        return (differentiate(times: window.map { points[$0].t }, positions: window.map { points[$0].m }, halfWidth: 2), .fittedPositions)
    }

    /// The bar's heights from `from` to `to` as `trace` gives them, without its velocities (the
    /// phases read heights only): fused, else the readings themselves (a differentiated trace
    /// keeps them raw); none with too few readings.
    func heights(from: Double, to: Double) -> [(t: Double, m: Double)] { fusedHeights(from: from, to: to).heights }

    /// `heights`, and whether they were fused (the board rode the bar over them).
    private func fusedHeights(from: Double, to: Double) -> (heights: [(t: Double, m: Double)], fused: Bool) {
        let window = indices(from: from, to: to)
        guard window.count >= 4 else { return ([], false) }
        if let fused = fused(indices(from: from - 0.5, to: to)) { return (fused.map { (t: $0.t, m: $0.positionM) }, true) }
        return (window.map { (t: points[$0].t, m: points[$0].m) }, false)
    }

    private mutating func feedAccepted(
        _ reading: SpikeGate.Reading, previousTopT: Double?
    ) -> [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] {
        let t = reading.t, m = reading.m
        if let last = points.last, t - last.t > 1.0 {  // a gap: start over
            turning.reset()
            ema = nil
            bottom = nil
        }
        points.append(Point(t: t, m: m, acc: reading.acc))
        appended += 1
        // Keep what a rep can span: 20 s of readings (a window drops its oldest without moving the rest: Window.swift).
        if let first = points.first, t - first.t > 20 { points.removeFirst(points.firstIndex { t - $0.t <= 20 } ?? 0) }
        let smoothed = ema.map { alpha * m + (1 - alpha) * $0 } ?? m
        ema = smoothed
        lookAhead(t: t, m: m, previousTopT: previousTopT)
        guard let candidate = turning.feed(t: t, positionM: smoothed) else { return [] }
        return measured(candidate, lastM: m)
    }

    /// The rise in progress as complete: the readings have ended (a recording's end).
    mutating func finish(at t: Double, previousTopT: Double?) -> [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] {
        var found: [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] = []
        for reading in gate.finish() { found += feedAccepted(reading, previousTopT: previousTopT) }
        guard let last = points.last, let candidate = turning.finish(at: max(t, last.t)) else { return found }
        return found + measured(candidate, lastM: last.m)
    }

    /// A rise the turning points found, located on the unlagged readings, with its trace.
    private mutating func measured(_ candidate: ConcentricCandidate, lastM m: Double) -> [(ConcentricCandidate, [KinematicSample], ConcentricEndpoints)] {
        // The EMA lags: widen the window so the true valley and peak are inside
        // (but not back into the previous rise, which may have ended lower).
        let window = readings(from: max(candidate.valleyT - 0.5, lastPeakT), to: candidate.completedT)
        var refined = candidate
        // Locate the valley and peak on the unlagged readings (the first lowest and highest).
        var low: Point?, high: Point?
        for point in window where point.t <= candidate.peakT { if low == nil || point.m < low!.m { low = point } }
        if let low { refined.valleyT = low.t }
        for point in window where point.t >= refined.valleyT { if high == nil || point.m > high!.m { high = point } }
        if let high { refined.peakT = high.t }
        // What came before the rise: how far the bar was lowered into it.
        var lowest: Double?, highest: Double?, before: Double?
        for point in window where point.t >= refined.valleyT - 0.1 && point.t <= refined.peakT { if lowest == nil || point.m < lowest! { lowest = point.m } }
        for point in window where point.t >= refined.valleyT { if highest == nil || point.m > highest! { highest = point.m } }
        let valleyM = lowest ?? m
        let since = max(refined.valleyT - 8, lastPeakT)
        for index in indices(from: since, to: refined.valleyT) {
            let height = points[index].m
            if before == nil || height > before! { before = height }
        }
        refined.descentBeforeM = max(0, (before ?? valleyM) - valleyM)
        refined.peakM = highest ?? m
        lastPeakT = refined.peakT
        bottom = nil
        let span = indices(from: refined.valleyT - 1.0, to: candidate.completedT)
        // What was found as this rise left the bottom (`lookAhead`) serves its fusion: the board's
        // gravity (the 20 s window it is found over has moved by a second or less since), and
        // whether the board rode the bar through the descent into it.
        let early = ahead.flatMap { $0.fromT >= refined.valleyT - 1 && $0.fromT <= refined.peakT && $0.gravity != nil ? $0 : nil }
        if gravity?.stamp != appended, let first = span.first, points[first].acc != nil { gravity = (appended, early?.gravity ?? windowGravity()) }
        if let fused = fused(span, ridesTheBar: early?.ridesTheBar ?? false) { return [(refined, fused, .velocityZeros)] }
        return [(refined, differentiate(times: window.map { $0.t }, positions: window.map { $0.m }, halfWidth: 2), .fittedPositions)]
    }

    /// The readings from `from` to `to`, both included. Readings enter in time order
    /// (`StationDetector.feedDistance`), so they are one run of the window, found by two binary
    /// searches: a rep reads four such runs of a 20 s window, and each reading of it is unpacked
    /// when read.
    private func readings(from: Double, to: Double) -> [Point] {
        let range = indices(from: from, to: to)
        return range.isEmpty ? [] : Array(points[range])
    }

    /// Where in the window the readings from `from` to `to` are (`readings`), for a reader of a
    /// few of their fields.
    private func indices(from: Double, to: Double) -> Range<Int> {
        func firstIndex(after bound: Double, orAt: Bool) -> Int {
            var low = 0, high = points.count
            while low < high {
                let middle = (low + high) / 2
                let t = points[middle].t
                if orAt ? t < bound : t <= bound { low = middle + 1 } else { high = middle }
            }
            return low
        }
        let start = firstIndex(after: from, orAt: true), end = firstIndex(after: to, orAt: false)
        return start < end ? start..<end : start..<start
    }

    /// `window`'s readings fused with the accelerometer, when every one of them carries it and
    /// it rides the bar (checked, unless `ridesTheBar` says it was just before).
    private func fused(_ window: Range<Int>, ridesTheBar: Bool = false) -> [KinematicSample]? {
        // (A laser without the accelerometer is told by its first reading, before any gravity is found.)
        guard let first = window.first, points[first].acc != nil else { return nil }
        let estimate = gravity.flatMap { $0.stamp == appended ? $0.value : nil } ?? windowGravity()
        guard let gravity = estimate else { return nil }
        // Each reading unpacked once: read, checked, taken.
        var readings: [FusionReading] = []
        readings.reserveCapacity(window.count)
        for index in window {
            let point = points[index]
            guard let acc = point.acc else { return nil }
            readings.append(FusionReading(t: point.t, positionM: point.m, vertical: gravity.vertical(acc)))
        }
        return fuse(readings, oneG: gravity.oneG, settings: Self.fusion, ridesTheBar: ridesTheBar)
    }

    /// The board's gravity over the window, `BoardGravity(points.compactMap { $0.acc })`, read
    /// from the window's stored halves without building its readings (the same sum in the same
    /// order, the same lengths).
    private func windowGravity() -> BoardGravity? {
        var lengths: [Double] = []
        lengths.reserveCapacity(points.count)
        var sum = BoardAcceleration(x: 0, y: 0, z: 0)
        points.forEachStored { stored in
            // A reading without the accelerometer holds NaN (`Point`).
            let x = Double(Point.widened(stored.x)), y = Double(Point.widened(stored.y)), z = Double(Point.widened(stored.z))
            guard !x.isNaN else { return }
            sum = BoardAcceleration(x: sum.x + x, y: sum.y + y, z: sum.z + z)
            lengths.append((x * x + y * y + z * z).squareRoot())
        }
        return BoardGravity(sum: sum, lengths: &lengths)
    }
}

/// The descent into a rise, found while the bar rises (`DistanceTracker.lookAhead`) from where
/// it left the bottom, as `measurePhases` would find it from a concentric phase starting there.
/// The rep's phases are taken from it once the rise is measured, when its concentric phase
/// starts within `sameStartS` of there and a search with its ROM would choose the same descent
/// (`Descent.phases`); otherwise they are measured then, as without it.
struct PhasesAhead: Sendable, Codable, Equatable {
    /// Where the bar turned to rise, fitted as a concentric phase's start is: the start the
    /// descent was searched back from.
    var fromT: Double
    /// The last reading near the bottom before the bar rose clear of it: one search for each.
    var leftT: Double
    /// The previous rep's top the search began after (nil: none, a set's first rep).
    var previousTopT: Double?
    /// The descent found (nil: none dropping `minimumDropM`).
    var descent: Descent?
    /// The board's gravity the heights were fused with (nil without the accelerometer).
    var gravity: BoardGravity?
    /// Whether the board rode the bar over them (they were fused).
    var ridesTheBar: Bool

    /// Within this of the bottom (metres) the bar is still there: three times a laser's noise.
    static let nearBottomM = 0.006
    /// The search waits this long after the bar left the bottom (seconds): `measurePhases` reads
    /// the readings up to 0.3 s past a concentric start.
    static let afterS = 0.3
    /// ... and for the bar to have risen this far (metres): a rise, not a wobble.
    static let risenM = 0.05
    /// The least drop the search asks of a descent (metres): half a rep's ROM is asked when it
    /// is measured, so any rep of 0.1 m or more finds the same descent or a larger one.
    static let minimumDropM = 0.05
    /// A rise measured to start this close to `fromT` (seconds) is the one searched for.
    static let sameStartS = 0.15
}

/// In a window a laser reading is 14 bytes, not 24: its time 32 bits (Window.swift), its
/// height single precision, and its accelerometer half precision (`Float16`, 11 significant
/// bits), all in 16-bit halves so that no 4-byte alignment pads the 14 to 16.
///
/// Half precision holds the accelerometer to 0.05 % of what it reads (0.5 mg at 1 g, rounded to
/// the nearest, so unbiased): under a MEMS part's own noise over the laser's 25 Hz band (about
/// 1-2 mg for 100-300 ug per root hertz), and a fifth of what the fusion assumes (0.01 g,
/// `FusionSettings`). Its range (65,504) holds any 16-bit part's raw counts; a board reading
/// more is infinite here, so no gravity is found and the rep is measured from the laser alone,
/// as for a board that does not ride the bar.
extension DistanceTracker.Point: WindowElement {
    struct Stored: Sendable {
        var offset: (UInt16, UInt16)
        var height: (UInt16, UInt16)
        var x: Float16, y: Float16, z: Float16
    }

    var microseconds: Int64 { WindowTime.microseconds(t) }
    func stored(offset: Int32) -> Stored {
        Stored(offset: Self.halves(UInt32(bitPattern: offset)), height: Self.halves(height.bitPattern), x: Float16(x), y: Float16(y), z: Float16(z))
    }
    static func offset(of stored: Stored) -> Int32 { Int32(bitPattern: whole(stored.offset)) }

    init(stored: Stored, microseconds: Int64) {
        t = WindowTime.seconds(microseconds)
        height = Float(bitPattern: Self.whole(stored.height))
        (x, y, z) = (Self.widened(stored.x), Self.widened(stored.y), Self.widened(stored.z))
    }

    /// `Float(half)`, exactly, in a few integer operations: without the F16C instructions (not
    /// assumed of the target) Swift converts through a library call, which unpacking a station's
    /// 20 s window for the board's gravity made 3 % of the rep path. The half's exponent and
    /// significand move into place and the exponent is rebased; infinities and NaN keep the
    /// largest exponent; a subnormal half is renormalised by a subtraction, which is exact
    /// (F. Giesen's method, "half_to_float_fast5", 2012).
    @inline(__always) static func widened(_ half: Float16) -> Float {
        let bits = UInt32(half.bitPattern)
        var widened = (bits & 0x7FFF) << 13
        let exponent = widened & 0x0F80_0000
        widened += (127 - 15) << 23
        var value: Float
        if exponent == 0x0F80_0000 {
            value = Float(bitPattern: widened + ((128 - 16) << 23))
        } else if exponent == 0 {
            value = Float(bitPattern: widened + (1 << 23)) - Float(bitPattern: 113 << 23)
        } else {
            value = Float(bitPattern: widened)
        }
        value = Float(bitPattern: value.bitPattern | (bits & 0x8000) << 16)
        return value
    }

    private static func halves(_ value: UInt32) -> (UInt16, UInt16) { (UInt16(truncatingIfNeeded: value), UInt16(truncatingIfNeeded: value >> 16)) }
    private static func whole(_ halves: (UInt16, UInt16)) -> UInt32 { UInt32(halves.0) | UInt32(halves.1) << 16 }
}

// MARK: - Checkpointed packed (Packed.swift)

/// A reading as checkpoints before packing wrote it, one object each (read only).
extension DistanceTracker.Point: Decodable {
    private enum CodingKeys: String, CodingKey { case t, m, acc }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            t: try container.decode(Double.self, forKey: .t), m: try container.decode(Double.self, forKey: .m),
            acc: try container.decodeIfPresent(BoardAcceleration.self, forKey: .acc))
    }
}

extension DistanceTracker {
    private enum CodingKeys: String, CodingKey { case points, ema, turning, gate, lastPeakT, alpha, bottom, ahead }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        points = ChunkedWindow(
            try container.decodeRows(.points, width: 5) { row in
                Point(t: row[0], m: row[1], acc: row[2].isNaN && row[3].isNaN && row[4].isNaN ? nil : BoardAcceleration(x: row[2], y: row[3], z: row[4]))
            })
        ema = try container.decodeIfPresent(Double.self, forKey: .ema)
        turning = try container.decode(TurningPoints.self, forKey: .turning)
        gate = try container.decode(SpikeGate.self, forKey: .gate)
        lastPeakT = try container.decode(Double.self, forKey: .lastPeakT)
        alpha = try container.decode(Double.self, forKey: .alpha)
        // A checkpoint an earlier build wrote holds neither: the next rise is searched for anew.
        if let low = try container.decodeIfPresent([Double].self, forKey: .bottom), low.count == 3 { bottom = (low[0], low[1], low[2]) }
        ahead = try container.decodeIfPresent(PhasesAhead.self, forKey: .ahead)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        // A reading's accelerometer is three JSON numbers when sent, so never NaN: three NaN mark none.
        try container.encode(
            PackedRows(points, width: 5) { point, out in
                out += [point.t, point.m, point.acc?.x ?? .nan, point.acc?.y ?? .nan, point.acc?.z ?? .nan]
            }, forKey: .points)
        try container.encodeIfPresent(ema, forKey: .ema)
        try container.encode(turning, forKey: .turning)
        try container.encode(gate, forKey: .gate)
        try container.encode(lastPeakT, forKey: .lastPeakT)
        try container.encode(alpha, forKey: .alpha)
        try container.encodeIfPresent(bottom.map { [$0.t, $0.m, $0.leftT] }, forKey: .bottom)
        try container.encodeIfPresent(ahead, forKey: .ahead)
    }
}
