import Foundation
import Testing
import VBTDetection
import VBTQuery

// The one e1RM estimator: known lines give known e1RMs, each unreliable case is flagged, a day's
// reps make that day's estimate, and the detector's profile gives the same number.

@Suite("e1RM estimator")
struct E1RMTests {
    /// Points on v = a + b x load exactly.
    static func line(_ a: Double, _ b: Double, loads: [Double]) -> [(loadKg: Double, meanVelocityMps: Double)] {
        loads.map { (loadKg: $0, meanVelocityMps: a + b * $0) }
    }

    @Test("an exact line: e1RM = (MVT - a) / b, r² 1, reliable")
    func exactLine() throws {
        // v = 1.5 - 0.01 x load at the squat's MVT 0.30: 120 kg.
        let fit = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [40, 60, 80, 100]), mvtMps: 0.30))
        #expect(abs(fit.interceptMps - 1.5) < 1e-12 && abs(fit.slopeMpsPerKg + 0.01) < 1e-12)
        #expect(abs(try #require(fit.e1rmKg) - 120) < 1e-9)
        #expect(abs(fit.r2 - 1) < 1e-12 && fit.warnings.isEmpty)
        // The bench's MVT on another line: v = 1.2 - 0.0125 x load meets 0.17 at 82.4 kg.
        let bench = try #require(E1RMEstimator.fit(reps: Self.line(1.2, -0.0125, loads: [30, 45, 60]), mvtMps: 0.17))
        #expect(abs(try #require(bench.e1rmKg) - 82.4) < 1e-9)
    }

    @Test("the fastest rep at each load is fitted; slower reps and reps without a load or velocity are not")
    func bestRepPerLoad() throws {
        var reps = Self.line(1.5, -0.01, loads: [40, 60, 80])
        reps += [(loadKg: 40, meanVelocityMps: 0.9), (loadKg: 60, meanVelocityMps: 0.5), (loadKg: 0, meanVelocityMps: 2), (loadKg: 80, meanVelocityMps: .nan)]
        let fit = try #require(E1RMEstimator.fit(reps: reps, mvtMps: 0.30))
        #expect(fit.points.map(\.loadKg) == [40, 60, 80])
        #expect(zip(fit.points, [1.1, 0.9, 0.7]).allSatisfy { abs($0.meanVelocityMps - $1) < 1e-12 })
        #expect(abs(try #require(fit.e1rmKg) - 120) < 1e-9)
    }

    @Test("least squares through scattered points, checked by hand")
    func scatteredPoints() throws {
        // Loads 60, 80, 100; velocities 1.02, 0.81, 0.55: mean 80, 0.7933...; Sxx 800; Sxy -9.4;
        // slope -0.01175, intercept 1.7333...; at 0.30: 121.985...; r² = 9.4² / (800 x 0.11053...) = 0.99924.
        let reps = [(loadKg: 60.0, meanVelocityMps: 1.02), (loadKg: 80, meanVelocityMps: 0.81), (loadKg: 100, meanVelocityMps: 0.55)]
        let fit = try #require(E1RMEstimator.fit(reps: reps, mvtMps: 0.30))
        #expect(abs(fit.slopeMpsPerKg + 0.01175) < 1e-12)
        #expect(abs(fit.interceptMps - (2.38 / 3 + 0.01175 * 80)) < 1e-12)
        let e1rm = try #require(fit.e1rmKg)
        #expect(abs(e1rm - (0.30 - fit.interceptMps) / fit.slopeMpsPerKg) < 1e-12 && abs(e1rm - 121.985_815_602_836_9) < 1e-9)
        let syy = [1.02, 0.81, 0.55].map { ($0 - 2.38 / 3) * ($0 - 2.38 / 3) }.reduce(0, +)
        #expect(abs(fit.r2 - 9.4 * 9.4 / (800 * syy)) < 1e-12)
        #expect(fit.warnings.isEmpty, "three loads spanning 40 kg of 122 with r² 0.999")
        // The order the reps come in changes nothing, to the last bit.
        #expect(E1RMEstimator.fit(reps: reps.reversed(), mvtMps: 0.30) == fit)
    }

    @Test("unreliable: fewer than 3 loads, loads spanning under 20 % of the e1RM, r² under 0.9")
    func unreliableCases() throws {
        let two = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [60, 100]), mvtMps: 0.30))
        #expect(two.e1rmKg != nil && two.warnings == [.fewLoads])
        // 100-120 kg span 20 kg of an e1RM of 120: under 24 kg.
        let narrow = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [100, 110, 120]), mvtMps: 0.30))
        #expect(narrow.warnings == [.narrowRange])
        // 40-64 kg span exactly 24 kg, 20 % of 120: reliable at the bound.
        let bound = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [40, 52, 64]), mvtMps: 0.30))
        #expect(bound.warnings == [] && abs(bound.e1rmKg! - 120) < 1e-9)
        let scattered = try #require(
            E1RMEstimator.fit(
                reps: [
                    (loadKg: 40, meanVelocityMps: 1.0), (loadKg: 60, meanVelocityMps: 1.2), (loadKg: 80, meanVelocityMps: 0.6),
                    (loadKg: 100, meanVelocityMps: 0.7),
                ], mvtMps: 0.30))
        #expect(scattered.r2 < 0.9 && scattered.warnings == [.poorFit])
        let all = try #require(
            E1RMEstimator.fit(reps: [(loadKg: 100, meanVelocityMps: 0.8), (loadKg: 105, meanVelocityMps: 0.79)], mvtMps: 0.30))
        #expect(all.warnings == [.fewLoads, .narrowRange])
        let entry = ExerciseProgress.E1RM(day: "2026-12-05", ts: 0, fit: all)
        #expect(!entry.reliable && entry.reliability == "unreliable: fewer than 3 loads; loads span under 20% of the e1RM")
    }

    @Test("no e1RM: one load, velocity not falling with load, or a line under the MVT")
    func noEstimate() {
        #expect(E1RMEstimator.fit(reps: [(loadKg: 60, meanVelocityMps: 1), (loadKg: 60, meanVelocityMps: 0.9)], mvtMps: 0.3) == nil)
        let rising = E1RMEstimator.fit(reps: Self.line(0.5, 0.002, loads: [60, 80, 100]), mvtMps: 0.3)
        #expect(rising != nil && rising?.e1rmKg == nil && rising?.warnings == [])
        let flat = E1RMEstimator.fit(reps: Self.line(0.8, 0, loads: [60, 80]), mvtMps: 0.3)
        #expect(flat?.e1rmKg == nil && flat?.r2 == 1)
        // Falling, but already under the MVT at no load: no positive load to name.
        #expect(E1RMEstimator.fit(reps: Self.line(0.25, -0.001, loads: [60, 80, 100]), mvtMps: 0.3)?.e1rmKg == nil)
    }

    @Test("one estimate per local day from that day's reps, dated by its last rep")
    func daily() throws {
        let day = 86_400.0, start = 1_795_392_000.0  // 2026-11-23 00:00 UTC
        func reps(_ a: Double, _ b: Double, loads: [Double], at t: Double) -> [E1RMEstimator.Rep] {
            loads.enumerated().map { E1RMEstimator.Rep(loadKg: $1, meanVelocityMps: a + b * $1, ts: t + Double($0) * 600) }
        }
        var all = reps(1.5, -0.01, loads: [60, 80, 100], at: start + 10 * 3_600)  // 10:00-10:20: 120 kg
        all += reps(1.56, -0.01, loads: [60, 100], at: start + day + 9 * 3_600)  // the next day: 126 kg, two loads
        all += reps(1.0, -0.01, loads: [60], at: start + 2 * day + 9 * 3_600)  // one load: no estimate
        let estimates = E1RMEstimator.daily(reps: all.shuffled(), mvtMps: 0.30, utcOffsetS: 0)
        #expect(estimates.map(\.day) == ["2026-11-23", "2026-11-24"])
        #expect(abs(estimates[0].e1rmKg - 120) < 1e-9 && abs(estimates[1].e1rmKg - 126) < 1e-9)
        #expect(estimates[0].ts == start + 10 * 3_600 + 1_200 && estimates[0].loadsKg == [60, 80, 100] && estimates[0].reliable)
        #expect(estimates[1].warnings == [.fewLoads] && estimates[1].mvtMps == 0.30)
        // At UTC-11 the first day's 10:00-10:20 UTC reps fall on the 22nd, and the next day's 09:00 too.
        let west = E1RMEstimator.daily(reps: all, mvtMps: 0.30, utcOffsetS: -11 * 3_600)
        #expect(west.map(\.day) == ["2026-11-22", "2026-11-23"])
        // A day split by the offset: 23:50 and 00:00 UTC are two days of one load each.
        let split = reps(1.5, -0.01, loads: [60, 100], at: start + day - 600)
        #expect(E1RMEstimator.daily(reps: split, mvtMps: 0.30, utcOffsetS: 0).isEmpty)
        #expect(E1RMEstimator.daily(reps: split, mvtMps: 0.30, utcOffsetS: 3_600).count == 1)
    }

    @Test("the detector's profile is the estimator's: the same line and e1RM for the same points")
    func detectorAgrees() throws {
        let points = [(60.0, 1.02), (80, 0.81), (100, 0.55), (120, 0.41)]
        let squat = try #require(ExerciseProfile.catalogue["squat"])
        let profile = try #require(
            LoadVelocityProfile.fit(
                station: "rack-01", athlete: "ana", exercise: squat,
                points: points.map { LoadVelocityProfile.Point(loadKg: $0.0, meanVelocityMps: $0.1) }))
        let fit = try #require(E1RMEstimator.fit(reps: points.map { (loadKg: $0.0, meanVelocityMps: $0.1) }, mvtMps: 0.30))
        #expect(profile.e1rmKg == fit.e1rmKg && profile.interceptMps == fit.interceptMps && profile.slopeMpsPerKg == fit.slopeMpsPerKg)
        #expect(profile.r2 == fit.r2)
    }

    @Test("the recorder's answer carries the data and reliability, and reads an older answer without them")
    func codable() throws {
        let fit = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [60, 100]), mvtMps: 0.30))
        let entry = ExerciseProgress.E1RM(day: "2026-12-05", ts: 1_800_000_000, fit: fit)
        let json = try #require(String(data: try JSONEncoder().encode(entry), encoding: .utf8))
        #expect(json.contains(#""reliable":false"#) && json.contains(#""warnings":["few-loads"]"#) && json.contains(#""loads_kg":[60,100]"#))
        #expect(try JSONDecoder().decode(ExerciseProgress.E1RM.self, from: Data(json.utf8)) == entry)
        let old = try JSONDecoder().decode(ExerciseProgress.E1RM.self, from: Data(#"{"day":"2026-12-05","ts":1,"e1rm_kg":140,"r2":1}"#.utf8))
        #expect(old.e1rmKg == 140 && old.loadsKg.isEmpty && old.reliable)
    }

    @Test("the athlete's chart draws the latest day's estimate, its number as everywhere, and says when it is unreliable")
    func chart() throws {
        let first = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.01, loads: [40, 60, 80]), mvtMps: 0.30))
        let latest = try #require(E1RMEstimator.fit(reps: Self.line(1.5, -0.0115, loads: [60, 100]), mvtMps: 0.30))
        let progress = ExerciseProgress(
            exercise: "squat", bestByLoad: [.init(loadKg: 40, bestMeanVelocityMps: 1.1, reps: 3)],
            e1rm: [.init(day: "2026-12-04", ts: 1, fit: first), .init(day: "2026-12-05", ts: 2, fit: latest)])
        let plot = ChartPanel.LoadVelocityPlot(progress: progress)
        #expect(plot.points.map(\.x) == [60, 100] && plot.e1rmKg == latest.e1rmKg && plot.line?.slopeMpsPerKg == latest.slopeMpsPerKg)
        let svg = SVGChart.render(title: "squat", panels: [ChartPanel(title: "p", yUnit: "m/s", kind: .loadVelocity(plot))])
        #expect(svg.contains("e1RM \(E1RMEstimator.text(try #require(latest.e1rmKg))) kg") && svg.contains("e1RM 104.3 kg"))
        #expect(svg.contains("2026-12-05 · unreliable: fewer than 3 loads"))
        // Without an estimate: the best at each load as points, no line, no e1RM.
        let none = ChartPanel.LoadVelocityPlot(progress: ExerciseProgress(exercise: "squat", bestByLoad: progress.bestByLoad, e1rm: []))
        #expect(none.points.count == 1 && none.line == nil && none.e1rmKg == nil)
    }
}
