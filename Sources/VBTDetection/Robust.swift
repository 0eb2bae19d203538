// Distance readings as real sensors send them: a lidar over a dark mat or a
// laser catching a plate's edge jumps for 0.1-0.3 s at what would be 1.5-5
// m/s, then jumps back; some readings have no return at all (0 mm). No
// library on the package list filters a stream like this, so it is here.
//
// The gate predicts each reading from the accepted track (its last position
// and its velocity over the last 0.1 s). A reading off the prediction by more
// than noise and the hardest believable acceleration allow is a jump; the
// readings from there are held (suspect). A jump back to the track within
// `maxSpikeS` makes the held readings a spike: they are dropped. Otherwise the
// jump was real (the bar did move that fast, or the sensor was moved) and the
// held readings are passed on, late but complete. So a false alarm costs at
// most `maxSpikeS` of delay, never a reading. A reading only a little odd
// (past a softer gate) waits for the next one alone: if that one steps back,
// it was a lone spike; if not, both pass on at once.

/// Spike and dropout rejection for one distance stream (metres, seconds).
struct SpikeGate: Sendable, Codable, Equatable {
    /// A reading taken at `t`, the bar at `m` metres, with the laser unit's accelerometer when sent.
    struct Reading: Sendable, Codable, Equatable { var t: Double; var m: Double; var acc: BoardAcceleration? = nil }

    /// The hardest acceleration a barbell sees, m/s^2 (light jumps reach about 20 at their peak, briefly).
    var maxAccelerationMps2 = 15.0
    /// A track slower than this is at rest, and held to `restMissSdM` and
    /// `startAccelerationMps2`.
    var stillMps = 0.05
    var startAccelerationMps2 = 5.0
    /// A jump that has not come back within this long was real.
    var maxSpikeS = 0.35
    /// A track older than this is forgotten (after a gap anything may follow).
    var forgetS = 0.5
    /// Readings outside (0, maxRangeM) carry no distance (no return, out of range codes).
    var maxRangeM = 8.0

    private var track: [Reading] = []
    private var held: [Reading] = []
    private var jumpM = 0.0
    /// The held reading only passed the softer gate: the next one decides.
    private var suspect = false
    /// Typical size of a prediction's miss on accepted readings (an EMA of |miss| / 0.8, the Gaussian ratio).
    private var missSdM = 0.003
    /// The same, learned only while the bar is at rest.
    private var restMissSdM = 0.003
    /// Readings dropped: no return, or part of a spike.
    private(set) var dropped = 0

    /// Feeds a reading in time order; returns the readings to use (none while a jump is suspect).
    mutating func feed(t: Double, m: Double, acc: BoardAcceleration? = nil) -> [Reading] {
        guard m.isFinite, m > 0, m < maxRangeM else {
            dropped += 1
            return []
        }
        let reading = Reading(t: t, m: m, acc: acc)
        if let last = track.last, t - last.t > forgetS { track.removeAll() }
        guard let prediction = predict(at: t) else {
            accept(reading)
            return [reading]
        }
        let miss = m - prediction
        let dt = t - track.last!.t
        // A bar at rest is held to its own noise at rest (a spike at the top of
        // a rep must stand out from the pause, not from the rise before it);
        // one starting off fast is only delayed (see above).
        let still = abs(Self.velocity(track, over: 0.3) ?? 0) < stillMps
        func gate(_ dt: Double, soft: Bool) -> Double {
            let (spread, acceleration) = still ? (restMissSdM, startAccelerationMps2) : (missSdM, maxAccelerationMps2)
            // A softer gate flags a lone odd reading for one reading's look-ahead.
            return soft ? max(0.012, 3.5 * spread) + 0.25 * acceleration * dt * dt : max(0.012, 6 * spread) + 0.5 * acceleration * dt * dt
        }
        if held.isEmpty {
            guard abs(miss) > gate(dt, soft: true) else {
                missSdM += 0.02 * (abs(miss) / 0.8 - missSdM)
                if still { restMissSdM += 0.05 * (abs(miss) / 0.8 - restMissSdM) }
                accept(reading)
                return [reading]
            }
            jumpM = miss
            held = [reading]
            suspect = abs(miss) <= gate(dt, soft: false)
            return []
        }
        // Held readings ride the jump and move as the bar does: a step off the held readings'
        // own track back to where the track before the jump would be ends a spike. A step
        // anywhere else is the bar's own (a touch-and-go's sharp turn, then a stop at the top):
        // the held readings stay held until they have lasted `maxSpikeS`, and pass on.
        let heldMiss = m - predictHeld(at: t)
        let heldDt = t - held.last!.t
        // Where the track before the jump would be: between where it last was and its own
        // prediction (a bar that has stopped since, as at a rep's top, is anywhere between).
        let before = track.last?.m ?? m, predicted = predict(at: t) ?? m
        let backMiss = m - min(max(m, min(before, predicted)), max(before, predicted))
        if abs(heldMiss) > gate(heldDt, soft: suspect), abs(heldMiss + jumpM) < abs(heldMiss), abs(backMiss) < abs(heldMiss) {
            dropped += held.count
            // The track goes on from the held readings with the jump taken off
            // (the bar's motion during the spike), then this reading.
            for r in held { accept(Reading(t: r.t, m: r.m - jumpM, acc: r.acc)) }
            held.removeAll()
            accept(reading)
            return [reading]
        }
        if suspect {
            // The odd reading was followed, not undone: it was the bar.
            let real = held + [reading]
            held.removeAll()
            for r in real { accept(r) }
            return real
        }
        held.append(reading)
        guard t - held[0].t >= maxSpikeS else { return [] }
        // It stayed: real. Start the track again from what was held.
        let real = held
        held.removeAll()
        track.removeAll()
        for r in real { accept(r) }
        return real
    }

    /// The velocity of `readings` over their last `span` seconds, when two or more span it.
    /// Fitted where they lie, with no array made and no sequence over them (a filtered lazy
    /// sequence into `LineFit` was four fifths of the gate, which runs this two or three times a
    /// laser reading). The same sums in the same order as `LineFit`, so the
    /// same slope to the last bit.
    private static func velocity(_ readings: [Reading], over span: Double = 0.1) -> Double? {
        guard let last = readings.last else { return nil }
        var count = 0.0, sumT = 0.0, sumM = 0.0
        var firstT: Double?
        for reading in readings where last.t - reading.t <= span {
            if firstT == nil { firstT = reading.t }
            count += 1
            sumT += reading.t
            sumM += reading.m
        }
        guard count >= 2, let firstT, last.t > firstT else { return nil }
        let (meanT, meanM) = (sumT / count, sumM / count)
        var stt = 0.0, stm = 0.0
        for reading in readings where last.t - reading.t <= span {
            stt += (reading.t - meanT) * (reading.t - meanT)
            stm += (reading.t - meanT) * (reading.m - meanM)
        }
        return stt > 0 ? stm / stt : 0
    }

    /// Where the held readings predict the next: their last moved on by their
    /// own velocity (the track's, until two are held).
    private func predictHeld(at t: Double) -> Double {
        let last = held.last!
        return last.m + (Self.velocity(held) ?? Self.velocity(track) ?? 0) * (t - last.t)
    }

    /// The readings held as a possible spike, passed on as real: the readings have ended, so
    /// nothing can show them to be a spike (a recording ending mid-rise keeps its rise).
    mutating func finish() -> [Reading] {
        let real = held
        held.removeAll()
        for r in real { accept(r) }
        return real
    }

    /// The position predicted at `t` from the track: its last reading moved on by the track's
    /// velocity over its last 0.1 s (`velocitySpan`).
    private func predict(at t: Double) -> Double? {
        guard let last = track.last else { return nil }
        return last.m + (Self.velocity(track, over: Self.velocitySpan(track)) ?? 0) * (t - last.t)
    }

    /// The span the track's velocity is fitted over: 0.1 s, or 0.2 s when the readings within
    /// 0.1 s lie closer together than 0.05 s. A 20 Hz sensor's uneven readings can leave two
    /// readings 10 ms apart, whose noise alone makes a resting bar move at a metre a second.
    private static func velocitySpan(_ readings: [Reading]) -> Double {
        guard let last = readings.last, let first = readings.first(where: { last.t - $0.t <= 0.1 }) else { return 0.1 }
        return last.t - first.t < 0.05 ? 0.2 : 0.1
    }

    private mutating func accept(_ reading: Reading) {
        track.append(reading)
        if track.count > 16 { track.removeFirst(track.count - 16) }
    }
}

/// The vertical acceleration, in g, of a bar IMU that sends no angles, from
/// readings in any units.
///
/// "Up" in the sensor's frame is tracked by a complementary
/// filter: rotated by the gyro between readings, pulled towards the measured
/// acceleration with a time constant of `upTimeConstantS`. A barbell's
/// acceleration is vertical, so the measured vector points along "up" (or
/// against it, when the bar slows faster than gravity) whatever the bar does;
/// the pull only has to undo the gyro's drift. (Mahony et al. 2008, IEEE
/// Trans. Automatic Control 53(5), is the classic form of such a filter.)
///
/// Gravity's size is learned, never assumed: its first estimate is the
/// reading's length, then it follows the vertical reading while the bar is
/// still, so a sensor reading 1.024 g at rest, or counts or m/s^2, is fine.
struct VerticalEstimator: Sendable, Codable, Equatable {
    var upTimeConstantS = 1.0
    private var up: BoardAcceleration?
    private var lastT: Double?
    /// The reading at rest (1 g in the sensor's units).
    private(set) var oneG: Double?
    /// The latest reading's component along "up", in the sensor's units.
    private(set) var lastAlong = 0.0

    /// The vertical acceleration of the bar, in g (0 at rest).
    mutating func vertical(t: Double, acc: (Double, Double, Double), gyroDps: (Double, Double, Double)?) -> Double? {
        let a = BoardAcceleration(x: acc.0, y: acc.1, z: acc.2)
        let length = a.length
        guard length.isFinite, length > 0 else { return nil }
        let dt = lastT.map { min(0.2, max(0, t - $0)) } ?? 0
        lastT = t
        var u = up ?? BoardAcceleration(x: a.x / length, y: a.y / length, z: a.z / length)
        if let g = gyroDps, dt > 0 {
            // A vector fixed in the world turns by -omega in the sensor's frame: u' = u - (omega x u) dt.
            let w = (g.0 * .pi / 180, g.1 * .pi / 180, g.2 * .pi / 180)
            u = BoardAcceleration(
                x: u.x - (w.1 * u.z - w.2 * u.y) * dt, y: u.y - (w.2 * u.x - w.0 * u.z) * dt,
                z: u.z - (w.0 * u.y - w.1 * u.x) * dt)
        }
        // Pull towards the measured direction (signed: a bar slowing faster than gravity reads "down").
        let dot = a.x * u.x + a.y * u.y + a.z * u.z
        let sign: Double = dot < 0 ? -1 : 1
        let k = up == nil ? 1 : min(1, dt / upTimeConstantS)
        u = BoardAcceleration(
            x: u.x + k * (sign * a.x / length - u.x), y: u.y + k * (sign * a.y / length - u.y),
            z: u.z + k * (sign * a.z / length - u.z))
        let n = u.length
        guard n > 0 else { return nil }
        u = BoardAcceleration(x: u.x / n, y: u.y / n, z: u.z / n)
        up = u
        let along = a.x * u.x + a.y * u.y + a.z * u.z
        let g = oneG ?? length
        oneG = g
        lastAlong = along
        return along / g - 1
    }

    /// At rest the reading along "up" is 1 g: learn it from a rest reading's
    /// `along` (as `vertical` last saw it), by `rate` of the difference.
    mutating func learnRest(along: Double, rate: Double) {
        guard let g = oneG else { return }
        oneG = g + rate * (along - g)
    }
}
