import Foundation
import Testing

@testable import VBTDetection
@testable import VBTSensors

@Suite("Bar IMU: a rise told from a pick-up while the bar comes down")
struct IMULoweringTests {
    /// Feeds a station's bar IMU (with angles) the heights `moves` pass through, each a cosine
    /// move to a height (m) over seconds, at 60 Hz with white noise of `noiseG` (seeded); returns
    /// each output with the reading time that produced it.
    /// Readings within `silent` (s) are not sent, as a sensor that drops out.
    func run(
        _ moves: [(toM: Double, s: Double)], exercise: String, seed: UInt64 = 1, noiseG: Double = 0, silent: ClosedRange<Double>? = nil
    ) -> [(t: Double, output: DetectorOutput)] {
        var detector = StationDetector(station: "p01")
        detector.assignment.exercise = exercise
        var random = SeededGenerator(seed: seed)
        var out: [(t: Double, output: DetectorOutput)] = []
        let readings = cosineMoves(moves)
        for (t, a) in readings where silent?.contains(t) != true {
            out += detector.feedIMU(t: t, accG: (0, 0, 1 + a / standardGravity + random.normal(sd: noiseG)), angleDeg: (0, 0)).map { (t, $0) }
        }
        let end = (readings.last?.t ?? -1.0 / 60) + 1.0 / 60
        return out + detector.finish(at: end).map { (end, $0) }
    }

    @Test("a first rep from the floor is a rep while the bar is still on its way down, not at the rest after it")
    func firstRepOnTheWayDown() {
        // 3 s on the floor, 0.55 m up in 1 s, 0.8 s at the top, down in 1.2 s (ending at 5.8 s), 3 s on the floor.
        let out = run([(0, 3), (0.55, 1), (0.55, 0.8), (0, 1.2), (0, 3)], exercise: "generic")
        let given = out.compactMap { item -> Double? in if case .rep = item.output { item.t } else { nil } }
        #expect(given.count == 1, "\(out.map(\.output))")
        #expect(given.first.map { $0 < 5.8 } == true, "given at \(given) s, the descent ends at 5.8 s")
    }

    @Test(
        "a deadlift's first pull from the floor is a rep within 0.5 s of its top at 20 mg; a rise from its lockout (a hang clean to the shoulders) still waits for a lowering, and is no rep without one"
    )
    func deadliftFromTheFloor() {
        for seed: UInt64 in 1...5 {
            // 3 s on the floor, 0.55 m up in 1 s (its top at 4 s), 1.5 s at the lockout, a clean of 0.45 m
            // in 0.4 s to the shoulders, 3 s there.
            let out = run([(0, 3), (0.55, 1), (0.55, 1.5), (1.0, 0.4), (1.0, 3)], exercise: "deadlift", seed: seed, noiseG: 0.02)
            let given = out.compactMap { item -> Double? in if case .rep = item.output { item.t } else { nil } }
            #expect(given.count == 1 && given.allSatisfy { $0 <= 4.5 }, "seed \(seed): reps given at \(given) s, the pull's top at 4 s")
            let reasons = out.compactMap { item -> String? in if case .rejected(let r) = item.output { r.reason } else { nil } }
            #expect(reasons == ["not-a-rep"], "seed \(seed): \(reasons)")
        }
    }

    @Test(
        "a pull to the hang the IMU did not hear (it dropped out), then a clean from there: not taken for a deadlift from the floor, as the heights before the silence are the floor's"
    )
    func hangCleanAfterSilence() {
        for seed: UInt64 in 1...5 {
            // 3 s on the floor; the sensor silent from 2.9 s to 6 s, over a pull to the hang (0.55 m,
            // top at 4 s) and 1.5 s there; 0.5 s more at the hang, then a clean of 0.45 m in 0.4 s.
            let out = run(
                [(0, 3), (0.55, 1), (0.55, 2), (1.0, 0.4), (1.0, 3)], exercise: "deadlift", seed: seed, noiseG: 0.02, silent: 2.9...6.0)
            let given = out.compactMap { item -> Double? in if case .rep = item.output { item.t } else { nil } }
            #expect(given.isEmpty, "seed \(seed): reps given at \(given) s; the clean from the hang is none")
        }
    }

    @Test("a pick-up to the shoulders, pressed on from there, is still no rep at 20 mg: the drift of a movement in progress makes no lowering")
    func pickupStaysNoRep() {
        for seed: UInt64 in 1...10 {
            // 3 s at the hips, 0.42 m up to the shoulders in 0.3 s, 1.5 s there, a press of 0.55 m in 1 s,
            // 0.6 s at the top, back to the shoulders in 1.2 s, 2 s there, and down to the hips.
            let moves: [(toM: Double, s: Double)] = [(0, 3), (0.42, 0.3), (0.42, 1.5), (0.97, 1), (0.97, 0.6), (0.42, 1.2), (0.42, 2), (0, 0.8), (0, 3)]
            let out = run(moves, exercise: "press", seed: seed, noiseG: 0.02)
            let tops = out.compactMap { item -> Double? in if case .rep(let rep) = item.output { rep.measurement.concentricEndT } else { nil } }
            #expect(tops.allSatisfy { $0 > 3.5 }, "seed \(seed): reps with tops at \(tops) s; the pick-up's is at 3.3 s")
            #expect(tops.filter { abs($0 - 5.8) < 0.3 }.count == 1, "seed \(seed): reps with tops at \(tops) s; the press's is at 5.8 s")
        }
    }

    @Test("a rise the IMU saw lowered into by a third of it is a rep; a pick-up after its own dip (a fifth of it) is still none")
    func loweredIntoShare() {
        func repTops(_ moves: [(toM: Double, s: Double)]) -> [Double] {
            run(moves, exercise: "generic").compactMap { item -> Double? in
                if case .rep(let rep) = item.output { rep.measurement.concentricEndT } else { nil }
            }
        }
        // 0.16 m down, 1.5 s still, 0.45 m up (its top at 5.5 s), 1.5 s there.
        let partLowered = repTops([(0, 3), (-0.16, 0.5), (-0.16, 1.5), (0.29, 0.5), (0.29, 1.5), (0.29, 2)])
        #expect(partLowered.count == 1 && partLowered.allSatisfy { abs($0 - 5.5) < 0.3 }, "reps with tops at \(partLowered) s")
        // A dip of 0.1 m and a pick-up of 0.45 m from it (its top at 3.8 s), 1.5 s at the shoulders,
        // a press of 0.5 m (its top at 6.3 s), 0.6 s there, and back to the shoulders.
        let pickup = repTops([(0, 3), (-0.1, 0.3), (0.35, 0.5), (0.35, 1.5), (0.85, 1), (0.85, 0.6), (0.35, 1.2), (0.35, 3)])
        #expect(pickup.count == 1 && pickup.allSatisfy { abs($0 - 6.3) < 0.3 }, "reps with tops at \(pickup) s")
    }

    @Test(
        "squat and bench: a rise the IMU saw lowered into by only 60 mm is a rep at its top at 20 mg, as is one of a rep's size it saw lowered into by nothing (a 3-1-X descent read as rest); an un-rack (80 mm from rest) is none"
    )
    func takenFromTheRack() {
        // Reps and rejections (a set's start and end are not counted).
        func outcomes(_ out: [(t: Double, output: DetectorOutput)]) -> [String] {
            out.compactMap { item -> String? in
                switch item.output {
                case .rep: "rep"
                case .rejected(let r): r.reason
                default: nil
                }
            }
        }
        for exercise in ["squat", "bench"] {
            for seed: UInt64 in 1...5 {
                // 3 s at the top, 60 mm down in 0.5 s, 1 s still, 0.45 m up in 0.8 s (its top at 5.3 s), 3 s there.
                let out = run([(0, 3), (-0.06, 0.5), (-0.06, 1), (0.39, 0.8), (0.39, 3)], exercise: exercise, seed: seed, noiseG: 0.02)
                let given = out.compactMap { item -> (t: Double, top: Double)? in
                    if case .rep(let rep) = item.output { (item.t, rep.measurement.concentricEndT) } else { nil }
                }
                #expect(
                    given.count == 1 && given.allSatisfy { abs($0.top - 5.3) < 0.3 && $0.t - $0.top <= 0.7 },
                    "\(exercise) seed \(seed): reps (given at, top) \(given); the rise's top at 5.3 s")
                // 3 s at rest, 0.45 m up in 0.8 s (its top at 3.8 s), 3 s there: over 0.7 of the ROM
                // expected (squat 600 mm, bench 450 mm), so a rep at its top though nothing was seen lowered.
                let whole = run([(0, 3), (0.45, 0.8), (0.45, 3)], exercise: exercise, seed: seed, noiseG: 0.02)
                let wholeTops = whole.compactMap { item -> (t: Double, top: Double)? in
                    if case .rep(let rep) = item.output { (item.t, rep.measurement.concentricEndT) } else { nil }
                }
                #expect(
                    outcomes(whole) == ["rep"] && wholeTops.allSatisfy { abs($0.top - 3.8) < 0.3 && $0.t - $0.top <= 0.7 },
                    "\(exercise) seed \(seed): \(outcomes(whole)), (given at, top) \(wholeTops)")
                // An un-rack: 3 s in the hooks, 80 mm up in 0.5 s, 3 s at the top. Nothing lowered into it,
                // far under a rep's size: no rep.
                let unrack = run([(0, 3), (0.08, 0.5), (0.08, 3)], exercise: exercise, seed: seed, noiseG: 0.02)
                #expect(outcomes(unrack) == ["not-a-rep"], "\(exercise) seed \(seed): \(outcomes(unrack))")
            }
        }
    }
}
