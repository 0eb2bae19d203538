import Foundation
import Testing
import VBTWire

@testable import VBTDetection
@testable import VBTSensors

// A laser rep's phases are found while the bar rises (`PhasesAhead`), not on the reading that
// completes the rep. These tests hold that search to what measuring them as the rep completes
// gives, and the rule that says when the descent found ahead is the one the rep would choose.

@Suite("Phases found while the bar rises")
struct PhasesAheadTests {
    /// A descent from 1.0 m at `startT` to 0.5 m at `endT`, chosen from `dropM`, searched from `fromT`.
    private func descent(endT: Double = 12, fromT: Double = 13, dropM: Double = 0.5, skippedDropM: Double = 0) -> Descent {
        Descent(
            startT: 10, startM: 1.0, endT: endT, endM: 0.5, searchedFromT: fromT, boundedEndM: 0.501, dropM: dropM, skippedDropM: skippedDropM)
    }

    @Test("a descent is the rep's when a search asking half its ROM would choose it; else the rep measures its own")
    func chosen() throws {
        let phases = try #require(descent().phases(concentricStartT: 13, minimumDropM: 0.25, previousTopT: 9.5))
        #expect(phases == RepPhases(eccentricStartT: 10, eccentricEndT: 12, eccentricMeanMps: 0.25, pauseBottomS: 1, pauseTopS: 0.5))
        // A rise so long that this drop is under half of it: the search would go on back.
        #expect(descent(dropM: 0.3).phases(concentricStartT: 13, minimumDropM: 0.35, previousTopT: nil) == nil)
        // A later run passed over for the search's smaller ask would be the rep's own.
        #expect(descent(skippedDropM: 0.2).phases(concentricStartT: 13, minimumDropM: 0.15, previousTopT: nil) == nil)
        #expect(descent(skippedDropM: 0.2).phases(concentricStartT: 13, minimumDropM: 0.25, previousTopT: nil) != nil)
    }

    @Test("a touch-and-go descent fitted to end past the concentric start ends there, with no pause")
    func touchAndGo() throws {
        // Searched from the same start: the height read there.
        let same = try #require(descent(endT: 13.02, fromT: 13).phases(concentricStartT: 13, minimumDropM: 0.25, previousTopT: nil))
        #expect(same.eccentricEndT == 13 && same.pauseBottomS == 0 && same.pauseTopS == nil)
        #expect(abs(same.eccentricMeanMps - 0.499 / 3) < 1e-12)
        // Searched from a turn 10 ms later: the fitted end's height, the bottom the bar has barely left.
        let other = try #require(descent(endT: 13.02, fromT: 13.01).phases(concentricStartT: 13, minimumDropM: 0.25, previousTopT: nil))
        #expect(other.eccentricEndT == 13 && abs(other.eccentricMeanMps - 0.5 / 3) < 1e-12)
    }

    @Test("over a laser session, every rep's descent is found as it rises, and agrees with measuring it as it completes")
    func agreesWithCompletion() throws {
        // Paused 3-1-X reps, and the default athlete's, touch-and-go at the bottom.
        let cases: [(SimExercise, UInt64, Bool)] = [
            (.squat, 5, true), (.bench, 6, true), (.deadliftFromFloor, 7, true), (.squat, 8, false), (.bench, 9, false),
        ]
        for (exercise, seed, paused) in cases {
            var config = SimulationConfig()
            config.exercise = exercise
            config.loadKg = 100
            config.oneRepMaxKg = 160
            config.seed = seed
            config.sets = 2
            config.repsPerSet = 5
            config.restS = 15
            config.laserAccelerometer = false
            config.distanceRateHz = 50
            config.imuRateHz = 0
            config.modes.tempo = paused ? SimulationModes.Tempo() : nil
            var sensors = SimulatedSensors(config)
            var tracker = DistanceTracker(settings: DetectorSettings())
            var previousTopT: Double?
            var compared = 0
            for reading in sensors.distanceStream(wallOrigin: 1_763_812_345) {
                for (candidate, trace, endpoints) in tracker.feed(t: reading.t, distanceMm: reading.distanceMm, accG: nil, previousTopT: previousTopT) {
                    guard candidate.riseM > 0.25,
                        let rep = measureConcentric(trace, valleyT: candidate.valleyT, peakT: candidate.peakT, loadKg: 100, endpoints: endpoints)
                    else { continue }
                    defer { previousTopT = rep.concentricEndT }
                    let romM = rep.romMm / 1000
                    let ahead = try #require(
                        tracker.phasesAhead(concentricStartT: rep.concentricStartT, romM: romM, previousTopT: previousTopT),
                        "\(exercise.name): the rise at \(rep.concentricStartT) had no descent searched for as it rose")
                    let from = phasesSpanStart(concentricStartT: rep.concentricStartT, previousTopT: previousTopT)
                    let atCompletion = measurePhases(
                        tracker.heights(from: from, to: rep.concentricStartT + 0.3), concentricStartT: rep.concentricStartT, romM: romM,
                        previousTopT: previousTopT)
                    #expect((ahead == nil) == (atCompletion == nil), "\(exercise.name) at \(rep.concentricStartT)")
                    if let ahead, let atCompletion {
                        compared += 1
                        #expect(abs(ahead.eccentricStartT - atCompletion.eccentricStartT) <= 0.02, "\(exercise.name): \(ahead) \(atCompletion)")
                        #expect(abs(ahead.eccentricEndT - atCompletion.eccentricEndT) <= 0.02, "\(exercise.name): \(ahead) \(atCompletion)")
                        #expect(abs(ahead.eccentricMeanMps - atCompletion.eccentricMeanMps) <= 0.01, "\(exercise.name): \(ahead) \(atCompletion)")
                    }
                }
            }
            #expect(compared >= 8, "\(exercise.name): \(compared) reps compared")
        }
    }
}
