import Foundation

/// A bar passing through heights, each move a half cosine to its height (m) over its seconds,
/// read at 60 Hz from t = 0: each reading's time and the bar's vertical acceleration (m/s^2,
/// gravity not included). The IMU tests feed it to a tracker or a detector with the noise
/// they need.
func cosineMoves(_ moves: [(toM: Double, s: Double)]) -> [(t: Double, a: Double)] {
    var readings: [(t: Double, a: Double)] = []
    var (t, from) = (0.0, 0.0)
    for move in moves {
        let start = t
        while t < start + move.s {
            let x = (t - start) / move.s
            readings.append((t, (move.toM - from) * .pi * .pi / (2 * move.s * move.s) * cos(.pi * x)))
            t += 1.0 / 60
        }
        from = move.toM
    }
    return readings
}
