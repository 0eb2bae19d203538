import Foundation
import Testing

@testable import VBTDetection
@testable import VBTSensors

@Suite("Bar IMU: a rest the velocity integral cannot vouch for")
struct IMUGlideTests {
    /// Feeds a bar IMU (with angles) a deadlift in 3-1-X: 0.55 m up from the floor in 0.9 s, 0.8 s
    /// at the top, 3 s down along a cosine (quiet in every window), 1.5 s on the floor and 0.55 m
    /// up again, at 60 Hz with a phone-grade 20 mg of white noise (seeded); returns the rises.
    func rises(seed: UInt64) -> [IMURise] {
        var tracker = IMUTracker(settings: DetectorSettings())
        var random = SeededGenerator(seed: seed)
        var found: [IMURise] = []
        for (t, a) in cosineMoves([(0, 4), (0.55, 0.9), (0.55, 0.8), (0, 3), (0, 1.5), (0.55, 0.9), (0.55, 3)]) {
            found += tracker.feed(t: t, accG: (0, 0, 1 + a / standardGravity + random.normal(sd: 0.02)), gyroDps: nil, angleDeg: (0, 0))
        }
        return found
    }

    /// 20 of 20 seeds today; 15 while such a rest ended the lowering, the braking then read as rising.
    @Test(
        "a 3-1-X lowering whose rest the integral cannot vouch for goes on into the pause: the rise after it is measured within 15 % of its 0.55 m on at least 19 of 20 seeds at 20 mg"
    )
    func glideIntoThePause() {
        var measured: [Double] = []
        for seed: UInt64 in 1...20 {
            let second = rises(seed: seed).filter { $0.candidate.riseM >= 0.2 }.dropFirst().first
            measured.append(second?.candidate.riseM ?? 0)
        }
        let within = measured.filter { abs($0 - 0.55) <= 0.15 * 0.55 }.count
        #expect(within >= 19, "within 15 % on \(within) of 20 seeds: \(measured.map { String(format: "%.2f", $0) })")
    }
}
