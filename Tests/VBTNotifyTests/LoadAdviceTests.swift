import Foundation
import Testing
import VBTNotify

// Load advice on simulated athletes whose true profile and day-to-day variation are known:
// today's true line is v = v0 + d - s x load (d drawn with a known day-to-day SD), each rep's
// mean velocity that plus rep noise. The advice is right when its load is within one plate
// step of the load today's true line gives for the target.

/// A seeded generator (SplitMix64), so each seed is one reproducible athlete and day.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// A normal draw (Box-Muller).
    mutating func gauss(_ sd: Double) -> Double {
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let u2 = Double.random(in: 0..<1, using: &self)
        return sd * (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    }
}

/// One simulated athlete on one day.
struct SimulatedAthlete {
    /// Velocity at zero load, m/s, and its fall per kg: the true, long-run profile.
    var v0: Double
    var slope: Double
    /// Today's offset from that profile, m/s.
    var dayOffset: Double
    /// Each rep's noise, m/s (SD).
    var repSD: Double
    /// The slope the store holds: the true one with an error.
    var storedSlope: Double
    var random: SeededRandom

    /// Squat-like athletes: 1RM 100-200 kg at an MVT of 0.30 m/s, v0 1.2-1.5 m/s.
    init(seed: UInt64, daySD: Double = 0.05, repSD: Double = 0.015, storedSlopeErrorShare: Double = 0.1) {
        random = SeededRandom(seed: seed)
        let oneRM = Double.random(in: 100...200, using: &random)
        v0 = Double.random(in: 1.2...1.5, using: &random)
        slope = (v0 - 0.30) / oneRM
        dayOffset = random.gauss(daySD)
        self.repSD = repSD
        storedSlope = -slope * (1 + random.gauss(storedSlopeErrorShare))
    }

    /// The load today's true line gives for `target`, kg.
    func trueLoad(for target: Double) -> Double { (v0 + dayOffset - target) / slope }

    /// The load the stored profile alone gives for `target` (what a plan resolves ahead of the day).
    func profileLoad(for target: Double) -> Double { (v0 - target) / slope }

    /// One set of `reps` at `load`, as advice reads it.
    mutating func set(at load: Double, reps: Int = 5) -> AdvisedSet {
        let velocities = (0..<reps).map { _ in v0 + dayOffset - slope * load + random.gauss(repSD) }
        return AdvisedSet(loadKg: load, velocityMps: LoadAdvisor.setVelocity(velocities) ?? 0)
    }
}

@Suite("load advice")
struct LoadAdviceTests {
    static let gym = GymLoads(plateStepKg: 2.5, barKg: 20)
    static let seeds: ClosedRange<UInt64> = 1...1000

    /// Shares of seeds whose advice after 1, 2 and 3 working sets is within one plate step of
    /// the true load: the first set at the stored profile's load for the target, each next set
    /// at the advice (as a coach accepting every advice would do).
    static func hitRates(repSD: Double) -> [Double] {
        var hits = [0, 0, 0]
        for seed in seeds {
            var athlete = SimulatedAthlete(seed: seed, repSD: repSD)
            let target = Double.random(in: 0.55...0.85, using: &athlete.random)
            var load = gym.rounded(athlete.profileLoad(for: target))
            var sets: [AdvisedSet] = []
            for index in 0..<3 {
                sets.append(athlete.set(at: load))
                let advice = LoadAdvisor.advise(sets: sets, targetMps: target, profileSlopeMpsPerKg: athlete.storedSlope, gym: gym)
                guard let next = advice.loadKg else { break }
                if abs(next - athlete.trueLoad(for: target)) <= gym.plateStepKg + 1e-9 { hits[index] += 1 }
                load = next
            }
        }
        return hits.map { Double($0) / Double(seeds.count) }
    }

    @Test("working sets: within one plate step on 95 % of 1000 athletes from the second set on")
    func workingSets() {
        // Day-to-day SD 0.05 m/s, rep SD 0.015 m/s, stored slope off by 10 % (SD). Measured:
        // 88 %, 97 %, 98 % after sets 1, 2, 3 (one set's three reps leave a noise of
        // 0.009 m/s, a plate step or more for a strong athlete; later sets average it out).
        let rates = Self.hitRates(repSD: 0.015)
        print("load advice, working sets: hit rates after sets 1, 2, 3: \(rates)")
        #expect(rates[0] >= 0.85, "after the first set: \(rates)")
        #expect(rates[1] >= 0.95, "after the second set: \(rates)")
        #expect(rates[2] >= 0.95, "after the third set: \(rates)")
    }

    @Test("noisier reps (0.02 m/s): still mostly within one step by the third set")
    func noisierReps() {
        // Measured: about 80 %, 92 %, 96 % after sets 1, 2, 3.
        let rates = Self.hitRates(repSD: 0.02)
        print("load advice, noisier reps: hit rates after sets 1, 2, 3: \(rates)")
        #expect(rates[2] >= 0.93, "\(rates)")
        #expect(rates[0] < rates[2], "more sets must help: \(rates)")
    }

    @Test("without a stored profile: today's line through a warm-up ramp and the first working set")
    func warmUpRamp() {
        // Warm-ups at 50, 65 and 80 % of the planned load, then the first working set; no stored
        // slope, so the advice is today's line alone. Measured: 94 % of 1000 within one step
        // (the warm-ups alone, extrapolated to the target, only 73 %: a working set near the
        // target is what pins the line down there).
        var hits = 0
        var exactSum = 0.0
        for seed in Self.seeds {
            var athlete = SimulatedAthlete(seed: seed)
            let target = Double.random(in: 0.55...0.85, using: &athlete.random)
            let top = athlete.profileLoad(for: target)
            let sets = [0.5, 0.65, 0.8, 1].map { athlete.set(at: Self.gym.rounded($0 * top)) }
            let advice = LoadAdvisor.advise(sets: sets, targetMps: target, profileSlopeMpsPerKg: nil, gym: Self.gym)
            #expect(advice.method == .todayFit && advice.loads == 4)
            exactSum += advice.exactLoadKg ?? 0
            if let load = advice.loadKg, abs(load - athlete.trueLoad(for: target)) <= Self.gym.plateStepKg + 1e-9 { hits += 1 }
        }
        // The sum of the unrounded loads, every digit: a change to today's line shows here first.
        print("load advice, warm-up ramp: \(hits) of \(Self.seeds.count) within one step, exact loads sum to \(exactSum)")
        #expect(Double(hits) / Double(Self.seeds.count) >= 0.90, "\(hits) of \(Self.seeds.count)")
    }

    @Test("a slow set asks for less, a fast one for more, rounded to the plate step")
    func slowAndFast() throws {
        // One set at 100 kg made 0.62 m/s against a 0.75 target; on a slope of -0.0075 m/s per
        // kg today's line is v = 1.37 - 0.0075 x load, at 0.75 m/s at 82.67 kg.
        let slow = LoadAdvisor.advise(
            sets: [AdvisedSet(loadKg: 100, velocityMps: 0.62)], targetMps: 0.75, profileSlopeMpsPerKg: -0.0075, gym: Self.gym)
        #expect(slow.method == .profileOffset && slow.loads == 1)
        #expect(abs(try #require(slow.exactLoadKg) - 82.6667) < 1e-3)
        #expect(slow.loadKg == 82.5)  // to the nearest 2.5
        let fast = LoadAdvisor.advise(
            sets: [AdvisedSet(loadKg: 100, velocityMps: 0.80)], targetMps: 0.75, profileSlopeMpsPerKg: -0.008, gym: GymLoads(plateStepKg: 5, barKg: 20))
        #expect(fast.loadKg == 105)  // 106.25 to the nearest 5
        let light = LoadAdvisor.advise(
            sets: [AdvisedSet(loadKg: 25, velocityMps: 0.5)], targetMps: 0.75, profileSlopeMpsPerKg: -0.02, gym: Self.gym)
        #expect(light.loadKg == 20 && light.reason.contains("less than the bar"))
    }

    @Test("nothing sensible to say: no set, no target, one load without a profile, a rising line")
    func noAdvice() {
        let one = [AdvisedSet(loadKg: 100, velocityMps: 0.62)]
        let cases: [(LoadAdvice, String)] = [
            (LoadAdvisor.advise(sets: [], targetMps: 0.75, profileSlopeMpsPerKg: -0.008), "no set"),
            (LoadAdvisor.advise(sets: one, targetMps: .nan, profileSlopeMpsPerKg: -0.008), "no velocity target"),
            (LoadAdvisor.advise(sets: one, targetMps: 0.75, profileSlopeMpsPerKg: nil), "no stored profile"),
            (LoadAdvisor.advise(sets: one, targetMps: 0.75, profileSlopeMpsPerKg: 0.01), "no stored profile"),
            (LoadAdvisor.advise(sets: one, targetMps: 2.0, profileSlopeMpsPerKg: -0.008), "above the line"),
            (
                LoadAdvisor.advise(
                    sets: [AdvisedSet(loadKg: 100, velocityMps: 0.6), AdvisedSet(loadKg: 102.5, velocityMps: 0.61)], targetMps: 0.75,
                    profileSlopeMpsPerKg: nil),
                "too close together"
            ),
        ]
        for (advice, words) in cases {
            #expect(advice.loadKg == nil && advice.reason.contains(words), "\(advice.reason)")
        }
    }

    @Test("fewer sets exactly when the last set's velocity loss passes the cut-off, or readiness is low")
    func fewerSets() {
        func advice(_ loss: Double?, cutoff: Double? = nil, readiness: String? = nil) -> LoadAdvice {
            let sets = [AdvisedSet(loadKg: 100, velocityMps: 0.7, velocityLossPct: 35), AdvisedSet(loadKg: 100, velocityMps: 0.7, velocityLossPct: loss)]
            return LoadAdvisor.advise(sets: sets, targetMps: 0.7, profileSlopeMpsPerKg: -0.008, cutoffPct: cutoff, readinessLow: readiness)
        }
        #expect(!advice(15).fewerSets && advice(15).fewerSetsReason == nil)
        #expect(!advice(20).fewerSets)  // at the default cut-off, not past it
        #expect(advice(20.5).fewerSets && advice(20.5).fewerSetsReason == "the last set lost 20 % velocity, past the 20 % cut-off")
        #expect(!advice(25, cutoff: 30).fewerSets && advice(31, cutoff: 30).fewerSets)
        #expect(!advice(nil).fewerSets)  // only the last set counts
        #expect(advice(10, readiness: "readiness 0.8 of usual").fewerSetsReason == "readiness 0.8 of usual")
        #expect(advice(15).loadKg == 100)  // the load advice stands either way
    }

    @Test("a set's velocity: the mean of its first three reps")
    func setVelocity() {
        #expect(abs((LoadAdvisor.setVelocity([0.8, 0.7, 0.6, 0.2]) ?? 0) - 0.7) < 1e-12)
        #expect(LoadAdvisor.setVelocity([0.5]) == 0.5)
        #expect(LoadAdvisor.setVelocity([]) == nil)
    }
}
