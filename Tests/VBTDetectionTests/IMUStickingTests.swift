import Foundation
import Testing

@testable import VBTDetection
@testable import VBTSensors

@Suite("Bar IMU: a grinder that crawls through its sticking point")
struct IMUStickingTests {
    /// A squat from a rest at the top: down 0.6 m, a moment at the bottom, then up at `fastMps`
    /// to 0.25 m, slowing to a crawl of `crawlMps` for `crawlS` (quiet: no acceleration), on up
    /// to the top, and a rest. Each step a velocity ramp (m/s over s), read at 60 Hz: the times
    /// and vertical accelerations (m/s^2).
    func grinder(crawlMps: Double, crawlS: Double, fastMps: Double = 0.5) -> (readings: [(t: Double, a: Double)], topT: Double) {
        // Down 0.6 m in 1.2 s (a half cosine), 0.3 s still, then the rise as ramps.
        var readings = cosineMoves([(0, 3), (-0.6, 1.2), (-0.6, 0.3)])
        var t = (readings.last?.t ?? 0) + 1.0 / 60
        let rampS = 0.25
        // Up: to `fastMps`, on, down to the crawl, the crawl, up again, on, to rest. The first
        // part covers 0.25 m; the rest is what is left of 0.6 m after the crawl.
        let firstOnS = (0.25 - fastMps * rampS / 2 - (fastMps + crawlMps) * rampS / 2) / fastMps
        let secondM = 0.6 - 0.25 - crawlMps * crawlS
        let secondOnS = (secondM - (crawlMps + fastMps) * rampS / 2 - fastMps * rampS / 2) / fastMps
        let ramps: [(from: Double, to: Double, s: Double)] = [
            (0, fastMps, rampS), (fastMps, fastMps, firstOnS), (fastMps, crawlMps, rampS), (crawlMps, crawlMps, crawlS),
            (crawlMps, fastMps, rampS), (fastMps, fastMps, secondOnS), (fastMps, 0, rampS),
        ]
        // Each reading's acceleration is its ramp's slope, on the 60 Hz grid.
        var start = t
        for ramp in ramps {
            let end = start + ramp.s
            while t < end {
                readings.append((t, (ramp.to - ramp.from) / ramp.s))
                t += 1.0 / 60
            }
            start = end
        }
        let topT = start
        for _ in 0..<(60 * 4) {
            readings.append((t, 0))
            t += 1.0 / 60
        }
        return (readings, topT)
    }

    /// Feeds a squat station's bar IMU (with angles) `readings` with white noise of `noiseG`.
    func detect(_ readings: [(t: Double, a: Double)], seed: UInt64, noiseG: Double) -> [DetectorOutput] {
        var detector = StationDetector(station: "p01")
        detector.assignment.exercise = "squat"
        var random = SeededGenerator(seed: seed)
        var out: [DetectorOutput] = []
        for (t, a) in readings {
            out += detector.feedIMU(t: t, accG: (0, 0, 1 + a / standardGravity + random.normal(sd: noiseG)), angleDeg: (0, 0))
        }
        return out + detector.finish(at: (readings.last?.t ?? 0) + 1)
    }

    @Test(
        "a squat that crawls at 0.05 m/s for 0.5 s mid-rise (quiet enough for a rest) is one rep of about 0.6 m, measured from the bottom to the top, with no partial rejected"
    )
    func crawlIsOneRep() {
        let (readings, topT) = grinder(crawlMps: 0.05, crawlS: 0.5)
        let bottomT = 4.5
        for seed: UInt64 in 1...5 {
            let out = detect(readings, seed: seed, noiseG: 0.005)
            let found = reps(out)
            #expect(found.count == 1, "seed \(seed): \(out)")
            if let rep = found.first?.measurement {
                #expect(abs(rep.romMm - 600) < 60, "seed \(seed): ROM \(rep.romMm) mm")
                // Within RealSensorTests' match of a rep to the truth by its top (0.5 s), and from the bottom.
                #expect(abs(rep.concentricEndT - topT) <= 0.5, "seed \(seed): top at \(rep.concentricEndT) s, truly \(topT) s")
                #expect(abs(rep.concentricStartT - bottomT) <= 0.5, "seed \(seed): bottom at \(rep.concentricStartT) s, truly \(bottomT) s")
            }
            #expect(rejections(out).filter { $0.reason == "partial" }.isEmpty, "seed \(seed): \(rejections(out).map(\.reason))")
        }
    }

    @Test(
        "a grinder whose crawl reads as a rest and whose top is followed within 0.4 s by the next rep's descent is one rep: the hold waits for the rest of its rise"
    )
    func crawlThenNextRep() {
        let (grinding, topT) = grinder(crawlMps: 0.05, crawlS: 0.5)
        // 0.4 s at the top, then a second rep (down 0.6 m and up again), and a rest.
        var readings = grinding.filter { $0.t < topT + 0.4 }
        let start = readings.last.map { $0.t + 1.0 / 60 } ?? 0
        readings += cosineMoves([(-0.6, 1.1), (-0.6, 0.3), (0, 0.8), (0, 4)]).map { (start + $0.t, $0.a) }
        for seed: UInt64 in 1...5 {
            let out = detect(readings, seed: seed, noiseG: 0.005)
            let found = reps(out).map(\.measurement)
            #expect(found.count == 2, "seed \(seed): \(found.map(\.romMm)); \(rejections(out).map(\.detail))")
            if let grinder = found.first {
                #expect(abs(grinder.romMm - 600) < 60 && abs(grinder.concentricEndT - topT) <= 0.5, "seed \(seed): \(grinder)")
            }
            #expect(rejections(out).filter { $0.reason == "partial" }.isEmpty, "seed \(seed): \(rejections(out).map(\.detail))")
        }
    }

    @Test("the tracker takes the crawl for a rest: the rise after it is also given as the rest of the rise before, from that one's bottom")
    func trackerGivesTheContinuation() {
        let (readings, _) = grinder(crawlMps: 0.05, crawlS: 0.5)
        var tracker = IMUTracker(settings: DetectorSettings())
        var found: [IMURise] = []
        for (t, a) in readings { found += tracker.feed(t: t, accG: (0, 0, 1 + a / standardGravity), gyroDps: nil, angleDeg: (0, 0)) }
        let rises = found.filter { $0.candidate.riseM > 0.1 }
        #expect(rises.count == 2, "\(found.map(\.candidate))")
        if rises.count == 2 {
            #expect(rises[0].endsAtRest)
            let whole = rises[1].continued?.candidate
            #expect(whole?.valleyT == rises[0].candidate.valleyT)
            #expect(whole.map { abs($0.riseM - 0.6) < 0.05 } == true, "\(String(describing: whole))")
        }
    }

    @Test("a bar that stays 1.5 s where it stopped before going on up was at rest: two rises, the first no rep")
    func restIsNoCrawl() {
        let (readings, _) = grinder(crawlMps: 0, crawlS: 1.5)
        let out = detect(readings, seed: 1, noiseG: 0.005)
        #expect(reps(out).allSatisfy { $0.measurement.romMm < 500 }, "\(out)")
        #expect(!rejections(out).isEmpty, "\(out)")
    }
}
