import VBTWire

// Reading times for a sensor whose readings arrive in bursts. A WitMotion
// over BLE samples on its own clock, queues readings and sends them at the
// link's connection events: 4 (sometimes 8 or 12) come within microseconds,
// then nothing for 30-odd ms. Its `55 61` packets carry no counter or time,
// so the readings are spread by the sensor's rate (the one asked of it, then
// the one measured), following its cadence from burst to burst, and placed
// as late as the least-delayed arrivals allow: never after a reading's
// arrival, never at or before the previous reading's time.

/// Stamps groups of readings that arrived together, spread by the sensor's own period.
public struct SensorClock: Sendable {
    /// The period asked of the sensor, seconds (nil: measured from the arrivals alone).
    public var nominalPeriodS: Double?
    /// Seconds of arrivals in a block: each block's least-delayed group marks the sensor's cadence,
    /// and the period is measured between the first block's mark and the latest's.
    public var blockS = 1.0
    /// A group later than the cadence predicts by more than this was preceded by a gap (readings
    /// lost, the sensor paused): it is placed at its arrival anew, and the period measured anew.
    public var resyncS = 0.3
    /// Every this many seconds the cadence moves later by the least delay seen in them, so the
    /// stamps follow the least-delayed arrivals: `windowS.lowerBound` while the period is the
    /// nominal one (it may be off by a percent), `upperBound` once it is measured (then the least
    /// delay of many bursts is close to none).
    public var windowS: ClosedRange<Double> = 0.5...2

    private var last: Double?
    private var lastUs = Int64.min
    private var carry = 0.0
    private var windowEnd = -Double.infinity
    private var windowMinSlack = Double.infinity
    // The measurement: readings since the first group, and each block's least-delayed group's last
    // reading (its index, and its arrival less the index's nominal time).
    private var firstArrival: Double?
    private var lastArrival = 0.0
    private var readings = 0
    private var blockEnd = -Double.infinity
    private var blockMark: (index: Int, residual: Double)?
    private var firstMark: (index: Int, residual: Double)?
    private var latestMark: (index: Int, residual: Double)?

    /// Creates a clock for a sensor asked for `nominalRateHz` readings a second (nil: unknown).
    public init(nominalRateHz: Double?) {
        nominalPeriodS = nominalRateHz.flatMap { $0 > 0 ? 1 / $0 : nil }
    }

    /// A period to measure against: the nominal one, else the arrivals' mean.
    private var basePeriodS: Double? {
        if let nominalPeriodS { return nominalPeriodS }
        guard let firstArrival, readings > 0, lastArrival - firstArrival >= blockS else { return nil }
        return (lastArrival - firstArrival) / Double(readings)
    }

    /// The period in use, seconds: the measured one once two blocks have been seen, else the nominal one.
    public var periodS: Double? {
        guard let base = basePeriodS else { return nil }
        if let firstMark, let latestMark, latestMark.index > firstMark.index {
            return base + (latestMark.residual - firstMark.residual) / Double(latestMark.index - firstMark.index)
        }
        return base
    }

    /// Forgets the cadence (after a reconnect); the nominal period stays.
    public mutating func reset() {
        self = SensorClock(nominalRateHz: nominalPeriodS.map { 1 / $0 })
    }

    /// Times for `count` readings that arrived together at `arrivalS` (host seconds), oldest
    /// first: strictly increasing, whole microseconds, none after `arrivalS` (unless the previous
    /// reading's time leaves no microsecond before it).
    public mutating func stamp(arrivalS: Double, count: Int) -> [Double] {
        guard count > 0 else { return [] }
        measure(arrivalS: arrivalS, count: count)
        guard let period = periodS else {
            return (0..<count).map { _ in microsecond(arrivalS) }
        }
        var end = arrivalS
        if let last {
            end = last + Double(count) * period + carry
            carry = 0
            let slack = arrivalS - end
            if slack > resyncS {
                end = arrivalS
                restartMeasurement(arrivalS: arrivalS, count: count)
            } else if slack < 0 {
                end = arrivalS
            } else {
                windowMinSlack = min(windowMinSlack, slack)
            }
        }
        var times = (0..<count).map { end - Double(count - 1 - $0) * period }
        if let last, times[0] <= last {
            // Early against the previous group: squeeze this one in after it.
            let step = (end - last) / Double(count)
            times = (0..<count).map { last + Double($0 + 1) * step }
        }
        if arrivalS >= windowEnd {
            if windowMinSlack.isFinite, windowMinSlack > 0 { carry = windowMinSlack }
            windowMinSlack = .infinity
            windowEnd = arrivalS + (latestMark == nil ? windowS.lowerBound : windowS.upperBound)
        }
        var stamped: [Double] = []
        stamped.reserveCapacity(count)
        for t in times { stamped.append(microsecond(t)) }
        last = stamped.last
        return stamped
    }

    /// `t` down to the microsecond (the wire's), after the previous stamp by one at least.
    private mutating func microsecond(_ t: Double) -> Double {
        let us = (t * 1e6).rounded(.down)
        lastUs = max(us.isFinite && abs(us) < 9e15 ? Int64(us) : 0, lastUs &+ 1)
        return Double(lastUs) / 1e6
    }

    /// Counts the readings and marks each block's least-delayed group.
    private mutating func measure(arrivalS: Double, count: Int) {
        guard firstArrival != nil else {
            restartMeasurement(arrivalS: arrivalS, count: count)
            return
        }
        readings += count
        lastArrival = arrivalS
        guard let base = basePeriodS else { return }
        let residual = arrivalS - Double(readings) * base
        if arrivalS >= blockEnd {
            if let blockMark {
                if firstMark == nil { firstMark = blockMark } else { latestMark = blockMark }
            }
            blockMark = nil
            blockEnd = arrivalS + blockS
        }
        if blockMark.map({ residual < $0.residual }) ?? true { blockMark = (readings, residual) }
    }

    /// After a gap the count no longer matches the sensor's: measure from here.
    private mutating func restartMeasurement(arrivalS: Double, count: Int) {
        firstArrival = arrivalS
        lastArrival = arrivalS
        readings = count - 1  // the index of the group's last reading
        blockEnd = arrivalS + blockS
        blockMark = nil
        firstMark = nil
        latestMark = nil
    }
}
/// A WitMotion's notifications as readings: decoded, and stamped by its `SensorClock`.
public struct WitMotionStream {
    /// The decoder (its counters say what was skipped).
    public private(set) var decoder = WitMotionDecoder()
    /// The clock that stamps the readings.
    public var clock: SensorClock

    /// Creates a stream for a sensor asked for `rateHz` readings a second.
    public init(rateHz: Double?) { clock = SensorClock(nominalRateHz: rateHz) }

    /// The readings in `notifications` (arrived together at `arrivalS`), and any other frames.
    public mutating func feed(_ notifications: [[UInt8]], arrivalS: Double) -> (readings: [SampleMessage.IMUReading], other: [WitMotionFrame]) {
        var values: [(acc: Vector3, gyro: Vector3, angle: Vector3)] = []
        var other: [WitMotionFrame] = []
        for notification in notifications {
            for frame in decoder.feed(notification) {
                if case .imu(let acc, let gyro, let angle) = frame { values.append((acc, gyro, angle)) } else { other.append(frame) }
            }
        }
        let times = clock.stamp(arrivalS: arrivalS, count: values.count)
        return (zip(times, values).map { .init(t: $0, accG: $1.acc, gyroDps: $1.gyro, angleDeg: $1.angle) }, other)
    }
}
