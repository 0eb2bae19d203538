import Foundation
import Testing
import VBTWire

@testable import VBTSensors

/// Each simulator mode's ground truth against the reference definition: the concentric phase runs
/// from the bar's velocity leaving zero at the bottom to its return to zero at the top, ROM is the
/// height gained, mean velocity ROM / duration.
@Suite("Simulator modes")
struct SimulatorModeTests {
    static func config(
        _ exercise: SimExercise = .squat, seed: UInt64 = 11, sets: Int = 2, reps: Int = 5, _ change: (inout SimulationConfig) -> Void
    )
        -> SimulationConfig
    {
        var config = SimulationConfig()
        config.exercise = exercise
        config.seed = seed
        config.sets = sets
        config.repsPerSet = reps
        config.restS = 5
        change(&config)
        return config
    }

    /// The concentric phase found in the timeline itself, 0.5 ms steps out from the rep's middle
    /// to where velocity is no longer above zero.
    static func scanned(_ timeline: BarTimeline, _ rep: SimulatedRep) -> (start: Double, end: Double, peak: Double) {
        let step = 0.0005
        let middle = (rep.concentricStartS + rep.concentricEndS) / 2
        var start = middle, end = middle, peak = 0.0
        while timeline.state(at: start - step).velocityMps > 1e-9 { start -= step }
        while timeline.state(at: end + step).velocityMps > 1e-9 {
            end += step
            peak = max(peak, timeline.state(at: end).velocityMps)
        }
        var t = start
        while t < middle {
            peak = max(peak, timeline.state(at: t).velocityMps)
            t += step / 4
        }
        return (start, end, peak)
    }

    /// Every rep's truth is what the timeline's exact positions give, and the phase found by
    /// scanning the velocity is the truth's.
    static func expectTruthFollowsDefinition(_ config: SimulationConfig, sourceLocation: SourceLocation = #_sourceLocation) {
        let timeline = BarTimeline(config)
        #expect(timeline.reps.count == config.sets * config.repsPerSet, sourceLocation: sourceLocation)
        for rep in timeline.reps {
            let (start, end, peak) = scanned(timeline, rep)
            #expect(abs(start - rep.concentricStartS) <= 0.0011, "start of \(rep)", sourceLocation: sourceLocation)
            #expect(abs(end - rep.concentricEndS) <= 0.0011, "end of \(rep)", sourceLocation: sourceLocation)
            let rom = timeline.state(at: rep.concentricEndS).positionMm - timeline.state(at: rep.concentricStartS).positionMm
            #expect(abs(rom - rep.romMm) < 1e-6, "ROM of \(rep)", sourceLocation: sourceLocation)
            let mean = rep.romMm / 1000 / (rep.concentricEndS - rep.concentricStartS)
            #expect(abs(mean - rep.meanVelocityMps) < 1e-9, sourceLocation: sourceLocation)
            #expect(abs(peak - rep.peakVelocityMps) <= 0.001 * rep.peakVelocityMps, "peak of \(rep)", sourceLocation: sourceLocation)
            // At rest or lowering on either side of the phase.
            #expect(timeline.state(at: rep.concentricStartS - 0.001).velocityMps <= 1e-9, sourceLocation: sourceLocation)
            #expect(timeline.state(at: rep.concentricEndS + 0.001).velocityMps <= 1e-9, sourceLocation: sourceLocation)
        }
    }

    @Test("no mode: the truth is the default's, and follows the definition")
    func defaults() {
        #expect(!SimulationModes().any)
        for exercise in [SimExercise.squat, .bench, .deadliftFromFloor, .press] {
            Self.expectTruthFollowsDefinition(Self.config(exercise) { _ in })
        }
    }

    @Test("every mode, on a lift from the top and from the bottom, follows the definition", arguments: SimulationMode.allCases)
    func everyMode(mode: SimulationMode) {
        for exercise in [SimExercise.squat, .bench, .deadliftFromFloor] {
            for load in [60.0, 130.0] {
                Self.expectTruthFollowsDefinition(
                    Self.config(exercise) {
                        $0.loadKg = load
                        mode.apply(to: &$0)
                    })
            }
        }
    }

    @Test("all the rep modes at once")
    func allAtOnce() {
        for load in [40.0, 100.0, 135.0] {
            Self.expectTruthFollowsDefinition(
                Self.config(.bench, reps: 6) {
                    $0.loadKg = load
                    for mode in [SimulationMode.shortROM, .shrinkingDepth, .sticking, .paused, .creep, .overshoot] { mode.apply(to: &$0) }
                })
        }
    }

    @Test("short ROM: a bench of 250 mm whose lockout is the catalogue's")
    func shortROM() {
        let config = Self.config(.bench) { $0.modes.romMm = 250 }
        let timeline = BarTimeline(config)
        #expect(timeline.reps.allSatisfy { abs($0.romMm - 250) < 250 * 0.04 })
        #expect(config.effectiveExercise.bottomDistanceMm + 250 == SimExercise.bench.bottomDistanceMm + SimExercise.bench.romMm)
    }

    @Test("shrinking depth: 600 -> 400 mm and 540 -> 270 mm over each set")
    func shrinkingDepth() {
        for (first, last) in [(600.0, 400.0), (540.0, 270.0)] {
            let timeline = BarTimeline(Self.config(reps: 6) { $0.modes.shrinkingDepth = .init(firstMm: first, lastMm: last) })
            for set in 1...2 {
                let roms = timeline.reps.filter { $0.set == set }.map(\.romMm)
                #expect(abs(roms.first! - first) < first * 0.04 && abs(roms.last! - last) < last * 0.04, "\(roms)")
                #expect(zip(roms, roms.dropFirst()).allSatisfy { $1 < $0 }, "shrinks rep by rep: \(roms)")
            }
        }
    }

    @Test("sticking point: one rep whose velocity dips to 0.02-0.1 m/s for 0.2-0.6 s without reversing; 0.3-0.4 m/s over 0.7 m")
    func sticking() {
        var squat = SimExercise.squat
        squat.romMm = 700
        // 125 of 140 kg: a first rep of about 0.44 m/s without the stall.
        let config = Self.config(squat, reps: 2) {
            $0.loadKg = 125
            $0.modes.stickingPoint = .init()
        }
        let timeline = BarTimeline(config)
        #expect(timeline.reps.count == 4)
        for rep in timeline.reps {
            #expect((0.3...0.4).contains(rep.meanVelocityMps), "\(rep)")
            #expect(abs(rep.romMm - 700) < 700 * 0.04)
            // Inside the rise: a stretch of slow crawling between two faster parts.
            var slowS = 0.0, lowest = Double.infinity
            var t = rep.concentricStartS + 0.1
            while t < rep.concentricEndS - 0.1 {
                let v = timeline.state(at: t).velocityMps
                lowest = min(lowest, v)
                if v <= 0.1 { slowS += 0.001 }
                t += 0.001
            }
            #expect(lowest >= 0.02 - 1e-9 && lowest <= 0.1, "lowest \(lowest)")
            #expect(slowS >= 0.2 && slowS <= 0.9, "slow for \(slowS) s")
        }
        let last = Self.config(squat, reps: 3) {
            $0.loadKg = 125
            $0.modes.stickingPoint = .init()
            $0.modes.stickingPoint?.lastRepOnly = true
        }
        let lastOnly = BarTimeline(last)
        // Only the last rep of a set crawls.
        for rep in lastOnly.reps {
            var lowest = Double.infinity
            var t = rep.concentricStartS + 0.2
            while t < rep.concentricEndS - 0.2 {
                lowest = min(lowest, lastOnly.state(at: t).velocityMps)
                t += 0.001
            }
            #expect((lowest <= 0.1) == (rep.index == 3), "rep \(rep.index): lowest \(lowest)")
        }
    }

    @Test("3-1-X tempo: a 3 s descent, a 1-3 s pause, then the rise")
    func tempo() {
        for exercise in [SimExercise.squat, .deadliftFromFloor] {
            let timeline = BarTimeline(Self.config(exercise) { $0.modes.tempo = .init() })
            #expect(timeline.reps.allSatisfy { !$0.touchAndGo })
            for rep in timeline.reps where exercise.startsAtBottom ? rep.index > 1 : true {
                // Still for at least a second before the rise, and lowering for 3 s before that.
                var still = rep.concentricStartS
                while timeline.state(at: still - 0.001).velocityMps == 0 { still -= 0.001 }
                let pause = rep.concentricStartS - still
                #expect(pause >= 1 - 0.002 && pause <= 3 + 0.002, "pause \(pause)")
                #expect(timeline.state(at: still - 1.5).velocityMps < -0.1, "lowering mid-descent")
                #expect(timeline.state(at: still - 2.9).velocityMps < 0, "lowering 3 s")
            }
        }
    }

    @Test("lockout creep: the concentric ends where the drive brings the bar to rest; 4-8 mm of creep at a few mm/s follow it")
    func creep() {
        let timeline = BarTimeline(Self.config { $0.modes.lockoutCreep = .init() })
        for rep in timeline.reps {
            // The drive ends at rest and the bar stands at least 0.05 s before the creep.
            #expect(timeline.state(at: rep.concentricEndS - 0.01).velocityMps > 0)
            #expect(timeline.state(at: rep.concentricEndS + 0.049).velocityMps == 0)
            // Then, within 0.8 s (0.15 s standing, 0.65 s creeping at most), the lockout: a few mm,
            // never faster than 0.04 m/s, never down.
            let top = timeline.state(at: rep.concentricEndS).positionMm
            var (t, highest, fastest, slowest) = (rep.concentricEndS, top, 0.0, 0.0)
            while t <= rep.concentricEndS + 0.8 {
                let state = timeline.state(at: t)
                (highest, fastest, slowest) = (max(highest, state.positionMm), max(fastest, state.velocityMps), min(slowest, state.velocityMps))
                t += 0.001
            }
            #expect(highest - top >= 4 - 0.01 && highest - top <= 8 + 0.01, "crept \(highest - top) mm")
            #expect(fastest > 0.005 && fastest < 0.04, "creeping at up to \(fastest) m/s")
            #expect(slowest == 0)
        }
    }

    @Test("overshoot: a fast rep's top is its highest point, 10-25 mm above where it settles")
    func overshoot() {
        let timeline = BarTimeline(
            Self.config(.bench) {
                $0.loadKg = 50; $0.modes.overshoot = .init()
            })
        for rep in timeline.reps {
            #expect(rep.meanVelocityMps >= 0.6)
            let top = timeline.state(at: rep.concentricEndS).positionMm
            var t = rep.concentricEndS, highest = top
            while t < rep.concentricEndS + 0.5 {
                highest = max(highest, timeline.state(at: t).positionMm)
                t += 0.001
            }
            #expect(highest <= top + 1e-9)
            let settled = timeline.state(at: rep.concentricEndS + 0.47).positionMm
            #expect((10 - 1e-9...25 + 1e-9).contains(top - settled), "overshoot \(top - settled)")
        }
        // Slow reps do not overshoot.
        let heavy = BarTimeline(
            Self.config(.bench) {
                $0.loadKg = 135; $0.modes.overshoot = .init()
            })
        for rep in heavy.reps { #expect(heavy.state(at: rep.concentricEndS + 0.3).positionMm == heavy.state(at: rep.concentricEndS).positionMm) }
    }

    @Test("video track: 30 frames a second, 2-4 mm of noise, no accelerometer, and tracking jumps")
    func videoTrack() {
        let config = Self.config(sets: 3, reps: 6) { SimulationMode.video.apply(to: &$0) }
        var sensors = SimulatedSensors(config)
        let readings = sensors.distanceStream(wallOrigin: 0)
        #expect(config.distanceReadingRateHz == 30)
        #expect(abs(Double(readings.count) - sensors.timeline.duration * 30) <= 2)
        #expect(readings.allSatisfy { $0.accG == nil && $0.state == nil })
        let intervals = zip(readings, readings.dropFirst()).map { $1.t - $0.t }
        #expect(intervals.allSatisfy { abs($0 - 1.0 / 30) < 1e-5 })
        let errors = readings.map { $0.distanceMm - config.exercise.bottomDistanceMm - sensors.timeline.state(at: $0.t).positionMm }
        let small = errors.filter { abs($0) < 14 }
        let sd = (small.map { $0 * $0 }.reduce(0, +) / Double(small.count)).squareRoot()
        #expect(sd >= 1.9 && sd <= 4.1, "noise \(sd) mm")
        #expect(errors.contains { abs($0) >= 15 }, "some jumps")
        #expect(Double(small.count) / Double(errors.count) > 0.95, "jumps are occasional")
    }

    @Test("BLE bursts: about 99 Hz, in bursts of 4 (some 8 or 12) at 31 ms connection events, spread by the sensor's period")
    func bleBursts() {
        let config = Self.config(sets: 1, reps: 4) { $0.modes.imuBursts = .init() }
        var sensors = SimulatedSensors(config)
        let origin = 1_800_000_000.0
        let bursts = sensors.imuBursts(wallOrigin: origin)
        let sizes = bursts.map(\.readings.count)
        #expect(Set(sizes).isSubset(of: [4, 8, 12, 16]))
        #expect(Double(sizes.filter { $0 == 4 }.count) / Double(sizes.count) > 0.75)
        #expect(sizes.contains(8))
        let readings = bursts.flatMap(\.readings)
        let sampled = bursts.flatMap(\.sampledS)
        let rate = Double(readings.count - 1) / (sampled.last! - sampled.first!)
        #expect(abs(rate - 99) < 0.01, "rate \(rate)")
        for (a, b) in zip(bursts, bursts.dropFirst()) {
            let events = (b.arrivalS - a.arrivalS) / 0.031
            #expect(abs(events - events.rounded()) < 0.1 && events.rounded() >= 1, "bursts come at connection events")
        }
        // Stamps: strictly increasing, never after the arrival, spread by about a period.
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0.t < $1.t })
        #expect(bursts.allSatisfy { burst in burst.readings.allSatisfy { $0.t <= origin + burst.arrivalS + 1e-6 } })
        let inBurst = bursts.flatMap { burst in zip(burst.readings, burst.readings.dropFirst()).map { $1.t - $0.t } }
        #expect(inBurst.allSatisfy { $0 > 0.008 && $0 < 0.0115 }, "\(inBurst.min()!)-\(inBurst.max()!)")
        // Against when the sensor took them: within a few ms after the first second.
        let offsets = zip(readings, sampled).filter { $1 > 1 }.map { $0.t - origin - $1 }
        #expect(offsets.allSatisfy { $0 > -0.005 && $0 < 0.008 }, "\(offsets.min()!)...\(offsets.max()!)")
        // The stream is the bursts' readings in order.
        var again = SimulatedSensors(config)
        #expect(again.imuStream(wallOrigin: origin).map(\.t) == readings.map(\.t))

        var naive = config
        naive.modes.imuBursts?.stampedAtArrival = true
        var naiveSensors = SimulatedSensors(naive)
        let naiveBursts = naiveSensors.imuBursts(wallOrigin: origin)
        let gaps = naiveBursts.flatMap { burst in zip(burst.readings, burst.readings.dropFirst()).map { $1.t - $0.t } }
        #expect(gaps.allSatisfy { $0 < 2e-6 }, "a naive bridge's bursts: 1 us apart")
    }

    @Test("a 10 Hz IMU: ten readings a second, each the mean acceleration over its period")
    func imu10Hz() {
        let config = Self.config(sets: 1, reps: 3) { SimulationMode.imu10Hz.apply(to: &$0) }
        #expect(config.imuRateHz == 10 && config.modes.imuMeanOverPeriod)
        var sensors = SimulatedSensors(config)
        let readings = sensors.imuStream(wallOrigin: 0)
        #expect(zip(readings, readings.dropFirst()).allSatisfy { abs($1.t - $0.t - 0.1) < 1e-6 })
        // The mean over 0.1 s is gentler than the instant's at its extremes.
        let timeline = sensors.timeline
        let instant = readings.map { abs(timeline.state(at: $0.t).accelerationMps2) }.max()!
        let mean = readings.map { abs(sensors.meanIMUAcceleration(at: $0.t)) }.max()!
        #expect(mean < instant)
    }

    @Test("modes by name, as sensor-bridge --mode takes them")
    func names() {
        #expect(SimulationMode(rawValue: "short-rom") == .shortROM)
        var config = SimulationConfig()
        SimulationMode.shrinkingDepth.apply(to: &config)
        #expect(config.modes.shrinkingDepth == .init(firstMm: 600, lastMm: 400))
        SimulationMode.shortROM.apply(to: &config)
        #expect(config.modes.romMm == 250)
        #expect(Set(SimulationMode.allCases.map(\.rawValue)).count == SimulationMode.allCases.count)
    }
}
