import Foundation
import Testing
import VBTBus
import VBTWire

@testable import VBTDetection
@testable import VBTSensors

/// A bar path of straight lines between waypoints, sampled at `rateHz` from `start` itself: what
/// the seeds' own unit scenarios feed (constant velocity, no easing at the turning points).
func linearPath(
    _ waypoints: [(mm: Double, seconds: Double)], start: Double = 1_763_812_345, rateHz: Double = 50, noiseMm: Double = 0, seed: UInt64 = 1
) -> [(t: Double, mm: Double)] {
    var random = SeededGenerator(seed: seed ^ 0x5eed)
    let first = waypoints[0].mm + (noiseMm > 0 ? random.normal(sd: noiseMm) : 0)
    return [(start, first)] + distancePath(waypoints, start: start, rateHz: rateHz, noiseMm: noiseMm, seed: seed, eased: false)
}

/// Feeds `readings` and then ends the recording (`finish`), as `vbt eval` does at a recording's end.
func runToEnd(_ readings: [(t: Double, mm: Double)], assignment: Assignment = Assignment()) -> [DetectorOutput] {
    var detector = StationDetector(station: "rack-01")
    detector.assignment = assignment
    var out = readings.flatMap { detector.feedDistance(t: $0.t, distanceMm: $0.mm) }
    out += detector.finish(at: (readings.last?.t ?? 0) + 0.02)
    return out
}

@Suite("The seeds' unit scenarios, as the seeds feed them")
struct SeedUnitScenarioTests {
    // The seeds' helpers: a descent of 21 readings, a rise of 16, at 50 Hz, straight lines.
    @Test("one rep 523 -> 135 -> 520 mm and 0.5 s at the top: 1 rep, ROM over 300 mm; with 1 mm of noise too")
    func oneRep() {
        for noise in [0.0, 1.0] {
            let out = runToEnd(linearPath([(523, 0), (135, 0.4), (520, 0.3), (520, 0.5)], noiseMm: noise))
            #expect(reps(out).count == 1, "noise \(noise): \(rejections(out).map(\.detail))")
            #expect((reps(out).first?.measurement.romMm ?? 0) > 300)
            #expect(rejections(out).isEmpty)
        }
    }

    @Test("two touch-and-go reps, the recording ending at the second's top: 2 reps")
    func touchAndGo() {
        let out = runToEnd(linearPath([(523, 0), (135, 0.4), (518, 0.3), (140, 0.4), (520, 0.3)]))
        #expect(reps(out).count == 2, "\(rejections(out).map(\.detail))")
    }

    @Test("a partial rep 523 -> 350 -> 520: no rep, one rejection saying partial")
    func partial() {
        let out = runToEnd(linearPath([(523, 0), (350, 0.4), (520, 0.3), (520, 0.5)]))
        #expect(reps(out).isEmpty)
        #expect(rejections(out).map(\.reason) == ["partial"])
    }
}

@Suite("Real lifts: what recordings of real lifts show")
struct RealLiftTests {
    /// A squat set from the top: each rep lowered by `roms[i]` and lifted back, a pause at each end.
    func set(_ roms: [Double], top: Double = 900, downS: Double = 1.0, upS: Double = 0.8) -> [(mm: Double, seconds: Double)] {
        var path: [(mm: Double, seconds: Double)] = [(top, 0), (top, 1.0)]
        for rom in roms { path += [(top - rom, downS), (top - rom, 0.3), (top, upS), (top, 1.0)] }
        return path
    }

    @Test("an arched bench of 210-300 mm is measured from its first rep, never locked out")
    func shortBench() {
        var assignment = Assignment()
        assignment.exercise = "bench"
        for rom in [210.0, 250, 300] {
            let out = runToEnd(distancePath(set(Array(repeating: rom, count: 5), top: 700), noiseMm: 1.5, seed: UInt64(rom)), assignment: assignment)
            #expect(reps(out).count == 5, "ROM \(rom): \(rejections(out).map(\.detail))")
        }
    }

    @Test("a squat of 200 mm, a third of the catalogue's ROM, lowered into each time, is learned from its second attempt")
    func shortOfThePrior() {
        var assignment = Assignment()
        assignment.exercise = "squat"
        let out = runToEnd(distancePath(set(Array(repeating: 200, count: 6)), noiseMm: 1.5, seed: 11), assignment: assignment)
        #expect(reps(out).count == 5, "\(rejections(out).map(\.detail))")
        #expect(rejections(out).map(\.reason) == ["partial"], "the first, with its reason")
        // One attempt alone is still partial: the prior is a band until attempts agree on another.
        let once = runToEnd(distancePath(set([200]), noiseMm: 1.5, seed: 11), assignment: assignment)
        #expect(reps(once).isEmpty && rejections(once).map(\.reason) == ["partial"])
        // From the pins, the first lift has nothing lowered into it: not a rep's shape, so the third
        // agreeing attempt, not the second, teaches the ROM.
        var pins: [(mm: Double, seconds: Double)] = [(700, 0), (700, 1.0)]
        for _ in 0..<5 { pins += [(900, 0.8), (900, 1.0), (700, 1.0), (700, 1.0)] }
        let fromPins = runToEnd(distancePath(pins, noiseMm: 1.5, seed: 12), assignment: assignment)
        #expect(reps(fromPins).count == 3, "\(rejections(fromPins).map(\.detail))")
        #expect(rejections(fromPins).map(\.reason) == ["partial", "partial"])
    }

    @Test("a short-ROM set's last rep ends at its own top: the re-rack's lift after a pause there is no part of it")
    func shortRepThenRerack() {
        var assignment = Assignment()
        assignment.exercise = "bench"
        // An arched bench of 250 mm at a 20 Hz lidar; at the last top a breath of 0.4-0.6 s, then
        // the re-rack: 75 mm up and 35 onto the hooks.
        for (seed, pauseS) in [(UInt64(1), 0.4), (2, 0.5), (3, 0.6), (4, 0.45)] {
            let path = set(Array(repeating: 250, count: 5), top: 700, upS: 0.5).dropLast() + [(700, pauseS), (775, 0.7), (740, 0.4), (740, 3)]
            let out = runToEnd(distancePath(Array(path), rateHz: 20, noiseMm: 4, seed: seed), assignment: assignment)
            let roms = reps(out).map(\.measurement.romMm)
            #expect(roms.count == 5 && roms.allSatisfy { abs($0 - 250) < 25 }, "seed \(seed): \(roms); \(rejections(out).map(\.detail))")
        }
    }

    @Test("depth that shrinks over a set (0.60 -> 0.40 m, 0.54 -> 0.27 m) counts every rep")
    func shrinkingDepth() {
        var assignment = Assignment()
        assignment.exercise = "squat"
        for (first, last) in [(600.0, 400.0), (540.0, 270.0)] {
            let roms = (0..<8).map { first + (last - first) * Double($0) / 7 }
            let out = runToEnd(distancePath(set(roms), noiseMm: 1.5, seed: 3), assignment: assignment)
            #expect(reps(out).count == 8, "\(first) -> \(last): \(rejections(out).map(\.detail))")
        }
    }

    @Test("a grinder whose velocity dips towards zero mid-rise is one rep, measured bottom to top")
    func grinder() {
        var assignment = Assignment()
        assignment.exercise = "squat"
        // 720 mm: 300 mm fast, a sticking point creeping 20 mm over 0.5 s, then the rest slowly.
        let path: [(mm: Double, seconds: Double)] = [(900, 0), (900, 1), (180, 1.4), (180, 0.3), (480, 0.6), (500, 0.5), (900, 1.1), (900, 1.0)]
        let out = runToEnd(distancePath(path, noiseMm: 1.5, seed: 5), assignment: assignment)
        #expect(reps(out).count == 1, "\(rejections(out).map(\.detail))")
        let rep = reps(out).first?.measurement
        #expect(abs((rep?.romMm ?? 0) - 720) < 15)
        // Truth: 720 mm in 2.2 s.
        #expect(abs((rep?.meanVelocityMps ?? 0) - 720 / 2200) < 0.02)
    }

    @Test("a fast rep that overshoots its top ends at its highest point")
    func overshoot() {
        var assignment = Assignment()
        assignment.exercise = "squat"
        // 620 mm in 0.6 s to the overshoot, then 20 mm back down to settle.
        let path: [(mm: Double, seconds: Double)] = [(900, 0), (900, 1), (300, 1.0), (300, 0.4), (920, 0.6), (900, 0.3), (900, 1.2)]
        let out = runToEnd(distancePath(path, noiseMm: 1, seed: 9), assignment: assignment)
        let rep = reps(out).first?.measurement
        #expect(reps(out).count == 1)
        #expect(abs((rep?.meanVelocityMps ?? 0) - 620 / 600) < 0.03, "\(String(describing: rep))")
    }

    @Test("every rise of a few centimetres or more is a rep or a rejection with its reason: un-racking and re-racking included")
    func nothingSilent() {
        var assignment = Assignment()
        assignment.exercise = "squat"
        // From the hooks: lift off (60 mm), walk out down to the top, 3 reps, re-rack (80 mm up).
        let path: [(mm: Double, seconds: Double)] = [
            (880, 0), (880, 1), (940, 0.5), (860, 0.8), (860, 1), (260, 1.1), (260, 0.3), (860, 0.8), (860, 1),
            (260, 1.1), (260, 0.3), (860, 0.8), (860, 1), (260, 1.1), (260, 0.3), (860, 0.8), (860, 1), (940, 0.7), (880, 0.4), (880, 2),
        ]
        let out = runToEnd(distancePath(path, noiseMm: 1, seed: 11), assignment: assignment)
        #expect(reps(out).count == 3)
        // The lift-off and the re-rack: each a rejection, not silence.
        #expect(rejections(out).map(\.reason) == ["not-a-rep", "not-a-rep"], "\(rejections(out).map(\.detail))")
    }
}
