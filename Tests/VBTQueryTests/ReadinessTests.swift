import Foundation
import Testing
import VBTQuery

// Readiness on simulated athletes whose true profile (v = a - b x load) and day-to-day
// variation are known: a day drawn 2.5 SD above is "better", 2.5 SD below "below", a day at
// the athlete's usual "as usual", and a short history says so rather than giving a number.

@Suite("readiness estimator")
struct ReadinessTests {
    /// SplitMix64: the same draws for a seed on every machine.
    struct Draws {
        var state: UInt64
        mutating func uniform() -> Double {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
        }
        /// Box-Muller.
        mutating func normal() -> Double {
            let u = max(uniform(), 1e-300)
            return (-2 * log(u)).squareRoot() * cos(2 * .pi * uniform())
        }
    }

    /// A simulated athlete: true v = 1.30 - 0.008 x load (squat), each day's velocities scaled
    /// by 1 + dayEffect (day-to-day SD `daySD`), each set's best rep with its own noise (`setSD`).
    struct Athlete {
        var daySD = 0.03
        var setSD = 0.01
        let loads: [Double] = [40, 60, 80, 100, 100, 100]

        func session(dayEffect: Double, draws: inout Draws) -> Readiness.Session {
            loads.map { load in
                let v = (1.30 - 0.008 * load) * (1 + dayEffect) * (1 + setSD * draws.normal())
                return Readiness.SetBest(loadKg: load, bestMeanVelocityMps: v)
            }
        }

        func history(_ count: Int, draws: inout Draws) -> [Readiness.Session] {
            (0..<count).map { _ in session(dayEffect: daySD * draws.normal(), draws: &draws) }
        }
    }

    /// The verdicts of `seeds` simulated days `sds` day-to-day SDs from usual, after 10 sessions.
    static func verdicts(atSDs sds: Double, seeds: Int, athlete: Athlete = Athlete()) -> [ReadinessVerdict: Int] {
        var counts: [ReadinessVerdict: Int] = [:]
        for seed in 0..<seeds {
            var draws = Draws(state: UInt64(seed) &* 7919 &+ 17)
            let history = athlete.history(10, draws: &draws)
            let today = athlete.session(dayEffect: sds * athlete.daySD, draws: &draws)
            counts[Readiness.assess(today: today, history: history, mvtMps: 0.30).verdict, default: 0] += 1
        }
        return counts
    }

    @Test("a good day (+2.5 SD) is better than usual, a bad day (-2.5 SD) below, in at least 98 of 100 seeds")
    func goodAndBadDays() {
        let good = Self.verdicts(atSDs: 2.5, seeds: 400)
        let bad = Self.verdicts(atSDs: -2.5, seeds: 400)
        #expect(good[.better, default: 0] >= 392, "\(good)")
        #expect(bad[.below, default: 0] >= 392, "\(bad)")
        // Never the opposite verdict.
        #expect(good[.below, default: 0] == 0 && bad[.better, default: 0] == 0)
    }

    @Test("a usual day (0 SD) is as usual in at least 75 of 100 seeds; the profile's own error is the rest")
    func usualDay() {
        let usual = Self.verdicts(atSDs: 0, seeds: 400)
        #expect(usual[.usual, default: 0] >= 300, "\(usual)")
        #expect(usual[.tooLittleHistory, default: 0] == 0)
    }

    @Test("the typical error is the athlete's own: a steadier athlete has a smaller SWC")
    func ownVariation() {
        var draws = Draws(state: 42)
        let steady = Athlete(daySD: 0.01, setSD: 0.005)
        let variable = Athlete(daySD: 0.05, setSD: 0.005)
        let a = Readiness.assess(today: steady.session(dayEffect: 0, draws: &draws), history: steady.history(10, draws: &draws), mvtMps: 0.3)
        let b = Readiness.assess(
            today: variable.session(dayEffect: 0, draws: &draws), history: variable.history(10, draws: &draws), mvtMps: 0.3)
        let (te1, te2) = (a.typicalErrorPct ?? .nan, b.typicalErrorPct ?? .nan)
        #expect(te1 > 0.3 && te1 < 2.5, "\(a)")
        #expect(te2 > 2.5 && te2 < 9, "\(b)")
        #expect(abs((a.swcPct ?? .nan) - 0.5 * te1) < 1e-12)
        // A +4 % day: clearly better for the steady athlete, within the variable one's usual range.
        let plus4 = steady.loads.map { Readiness.SetBest(loadKg: $0, bestMeanVelocityMps: (1.30 - 0.008 * $0) * 1.04) }
        #expect(Readiness.assess(today: plus4, history: steady.history(10, draws: &draws), mvtMps: 0.3).verdict == .better)
    }

    @Test("an exact day on an exact profile scores 100 %; the score is observed / predicted of the first 3 sets")
    func exactScore() throws {
        let line = [40.0, 60, 80, 100].map { Readiness.SetBest(loadKg: $0, bestMeanVelocityMps: 1.30 - 0.008 * $0) }
        var history = Array(repeating: line, count: 6)
        // Spread in the history so the typical error is not zero: +-2 % days.
        history[0] = line.map { .init(loadKg: $0.loadKg, bestMeanVelocityMps: $0.bestMeanVelocityMps * 1.02) }
        history[1] = line.map { .init(loadKg: $0.loadKg, bestMeanVelocityMps: $0.bestMeanVelocityMps * 0.98) }
        let usual = Readiness.assess(today: line, history: history, mvtMps: 0.3)
        #expect(abs(try #require(usual.scorePct) - 100) < 1e-9 && usual.verdict == .usual && usual.sets == 3)
        #expect(usual.text == "100 % (as usual)")
        // Only the first three sets count: a fast fourth set changes nothing.
        var today = line.map { Readiness.SetBest(loadKg: $0.loadKg, bestMeanVelocityMps: $0.bestMeanVelocityMps * 0.9) }
        today[3].bestMeanVelocityMps = 2
        let slow = Readiness.assess(today: today, history: history, mvtMps: 0.3)
        #expect(abs(try #require(slow.scorePct) - 90) < 1e-9 && slow.verdict == .below && slow.text == "90 % (below usual)")
    }

    @Test("too little history: fewer than 5 earlier sessions with loads, or no profile, give no number")
    func tooLittleHistory() {
        var draws = Draws(state: 7)
        let athlete = Athlete()
        let today = athlete.session(dayEffect: 0, draws: &draws)
        for count in 0..<Readiness.minSessions {
            let result = Readiness.assess(today: today, history: athlete.history(count, draws: &draws), mvtMps: 0.3)
            #expect(result.verdict == .tooLittleHistory && result.scorePct == nil && result.pastSessions == count)
            #expect(result.text == "too little history (\(count) of 5 sessions)")
        }
        // Sessions without loads do not count.
        let unloaded = Array(repeating: [Readiness.SetBest(loadKg: 0, bestMeanVelocityMps: 1)], count: 8)
        #expect(Readiness.assess(today: today, history: unloaded + athlete.history(4, draws: &draws), mvtMps: 0.3).verdict == .tooLittleHistory)
        // Every session at one load: no line, no profile.
        let oneLoad = Array(repeating: [Readiness.SetBest(loadKg: 60, bestMeanVelocityMps: 0.8)], count: 8)
        let flat = Readiness.assess(today: today, history: oneLoad, mvtMps: 0.3)
        #expect(flat.verdict == .tooLittleHistory && flat.text == "too little history (no load-velocity profile)")
        // No loaded set today.
        #expect(Readiness.assess(today: [], history: athlete.history(10, draws: &draws), mvtMps: 0.3).verdict == .tooLittleHistory)
    }
}
