import Foundation
import Testing
import VBTBus
import VBTSensors
import VBTWire

@testable import VBTDetection

/// Whether `value` is present and within `tolerance` of `expected`.
func near(_ value: Double?, _ expected: Double, _ tolerance: Double) -> Bool {
    value.map { abs($0 - expected) < tolerance } ?? false
}

@Suite("vbt eval: matching")
struct MatchingTests {
    func pairs(_ detected: [Double], _ labels: [Double], _ toleranceS: Double = 0.5) -> [[Int]] {
        RepMatching.match(detected: detected, labels: labels, toleranceS: toleranceS).map { [$0.detected, $0.label] }
    }

    @Test("the closest pair is chosen first, not the first rep in time")
    func greedyByTime() {
        // Rep 0 is 0.45 s from the label, rep 1 only 0.05 s: rep 1 takes it.
        #expect(pairs([1.0, 1.5], [1.45]) == [[1, 0]])
        // Labels given out of order are matched by time, and indices refer to the input order.
        #expect(pairs([10.0, 20.0, 30.0], [30.1, 9.8, 20.3]) == [[0, 1], [1, 2], [2, 0]])
    }

    @Test("greedy, not the largest matching: a pair taken first can leave another rep unmatched")
    func greedyNotMaximum() {
        // |1.0 - 1.4| = 0.4, |1.5 - 1.4| = 0.1, |1.5 - 1.9| = 0.4, |1.0 - 1.9| = 0.9 > 0.5.
        // Greedy takes (1.5, 1.4) first; 1.0 has no free label left within 0.5 s.
        #expect(pairs([1.0, 1.5], [1.4, 1.9]) == [[1, 0]])
    }

    @Test("the tolerance is inclusive: exactly at it matches, beyond it does not")
    func toleranceEdge() {
        #expect(pairs([100.0], [100.5], 0.5) == [[0, 0]])
        #expect(pairs([100.5], [100.0], 0.5) == [[0, 0]])
        #expect(pairs([100.0], [100.75], 0.5).isEmpty)
        #expect(pairs([100.0], [100.5], 0.25).isEmpty)
        #expect(pairs([100.0], [100.0], 0) == [[0, 0]])
    }

    @Test("one-to-one: two reps near one label give one pair, two labels near one rep give one pair")
    func oneToOne() {
        #expect(pairs([5.0, 5.2], [5.1 + 0.01]) == [[1, 0]])
        #expect(pairs([5.0], [4.9, 5.05]) == [[0, 1]])
        #expect(pairs([], [1, 2]).isEmpty)
        #expect(pairs([1, 2], []).isEmpty)
    }
}

@Suite("vbt eval: statistics")
struct StatisticsTests {
    @Test("precision, recall and F1 from counts; undefined without reps or labels")
    func counts() throws {
        let c = DetectionCounts(truePositives: 8, falsePositives: 2, falseNegatives: 1)
        #expect(c.precision == 0.8)
        #expect(near(c.recall, 8.0 / 9.0, 1e-15))
        // 2 P R / (P + R) = 2 x 0.8 x 0.8889 / 1.6889 = 16 / 19.
        #expect(near(c.f1, 16.0 / 19.0, 1e-15))
        let none = DetectionCounts(truePositives: 0, falsePositives: 0, falseNegatives: 3)
        #expect(none.precision == nil && none.recall == 0 && none.f1 == 0)
        #expect(DetectionCounts(truePositives: 0, falsePositives: 0, falseNegatives: 0).f1 == nil)
    }

    @Test("Bland-Altman figures against hand-computed numbers")
    func agreement() throws {
        // d = 0.1, -0.1, 0.2, 0: bias 0.05; MAE 0.1; deviations 0.05, -0.15, 0.15, -0.05,
        // squares sum 0.05, / (n - 1) = 0.0166..., SD 0.1290994; LoA 0.05 -+ 0.2530349.
        let a = Agreement(differences: [0.1, -0.1, 0.2, 0.0])
        #expect(a.n == 4)
        #expect(near(a.biasMps, 0.05, 1e-12))
        #expect(near(a.meanAbsoluteErrorMps, 0.1, 1e-12))
        #expect(near(a.sdMps, 0.1290994449, 1e-9))
        #expect(near(a.lowerLimitMps, -0.2030349120, 1e-9))
        #expect(near(a.upperLimitMps, 0.3030349120, 1e-9))
        let one = Agreement(differences: [-0.03])
        #expect(one.biasMps == -0.03 && one.meanAbsoluteErrorMps == 0.03 && one.sdMps == nil && one.upperLimitMps == nil)
        #expect(Agreement(differences: []).biasMps == nil)
    }

    @Test("an evaluation per station and overall, skipping empty reference velocities")
    func evaluation() throws {
        var run = OfflineRun()
        run.stations = ["a", "b"]
        run.reps = [
            EvaluatedRep(station: "a", tTop: 10.0, meanVelocityMps: 0.50, peakVelocityMps: 0.90),
            EvaluatedRep(station: "a", tTop: 20.0, meanVelocityMps: 0.40, peakVelocityMps: 0.70),
            EvaluatedRep(station: "a", tTop: 30.0, meanVelocityMps: 0.30, peakVelocityMps: 0.60),  // no label: FP
            EvaluatedRep(station: "b", tTop: 10.0, meanVelocityMps: 0.80, peakVelocityMps: 1.20),
        ]
        let labels = [
            ReferenceLabel(station: "a", tTop: 10.25, meanVelocityMps: 0.45, peakVelocityMps: nil, line: 2),
            ReferenceLabel(station: "a", tTop: 19.75, meanVelocityMps: 0.50, peakVelocityMps: 0.75, line: 3),
            ReferenceLabel(station: "a", tTop: 40.0, meanVelocityMps: 0.30, peakVelocityMps: 0.50, line: 4),  // FN
            ReferenceLabel(station: "b", tTop: 10.0, meanVelocityMps: 0.75, peakVelocityMps: 1.25, line: 5),
            ReferenceLabel(station: "c", tTop: 10.0, meanVelocityMps: nil, peakVelocityMps: nil, line: 6),  // FN at a silent station
        ]
        let e = Evaluation(run: run, labels: labels, toleranceS: 0.5)
        #expect(e.stations.map(\.station) == ["a", "b", "c"])
        let a = e.stations[0]
        #expect(a.counts == DetectionCounts(truePositives: 2, falsePositives: 1, falseNegatives: 1))
        // Mean velocity differences at a: 0.05, -0.10; peak: only the second label has one, -0.05.
        #expect(a.meanVelocity?.n == 2 && near(a.meanVelocity?.biasMps, -0.025, 1e-12))
        #expect(a.peakVelocity?.n == 1 && near(a.peakVelocity?.biasMps, -0.05, 1e-12))
        #expect(e.stations[2].counts == DetectionCounts(truePositives: 0, falsePositives: 0, falseNegatives: 1))
        #expect(e.overall.counts == DetectionCounts(truePositives: 3, falsePositives: 1, falseNegatives: 2))
        // Overall pools the pairs: mean differences 0.05, -0.10, 0.05.
        #expect(e.overall.meanVelocity?.n == 3 && near(e.overall.meanVelocity?.biasMps, 0.0, 1e-12))
        #expect(e.reps.map { $0.label?.line } == [2, 3, nil, 5])
        #expect(e.unmatchedLabels.map(\.line) == [4, 6])
        #expect(e.meanVelocityPoints.count == 3)
        let json = e.json(recording: "r.jsonl")
        guard case .object(let object) = try JSONParser.parse(Array(json.utf8)), case .array(let reps)? = object["reps"] else {
            Issue.record("not a JSON object with reps: \(json)")
            return
        }
        #expect(reps.count == 4)
        #expect(e.table(recording: "r.jsonl").contains("F1"))
        let svg = e.blandAltmanSVG(title: "t")
        #expect(svg.contains("id=\"bias\"") && svg.contains("id=\"loa-upper\"") && svg.components(separatedBy: "<circle").count == 4)
    }
}

@Suite("vbt eval: labels")
struct LabelsTests {
    let header = ReferenceLabels.header

    @Test("a good file: empty velocities are nil, CRLF and blank lines are fine, line numbers kept")
    func good() throws {
        let labels = try ReferenceLabels.parse("\(header)\r\nrack-01,1763812345.25,0.61,\r\n\r\nrack-02,1763812346,,1.2e0\r\n")
        #expect(
            labels == [
                ReferenceLabel(station: "rack-01", tTop: 1_763_812_345.25, meanVelocityMps: 0.61, peakVelocityMps: nil, line: 2),
                ReferenceLabel(station: "rack-02", tTop: 1_763_812_346, meanVelocityMps: nil, peakVelocityMps: 1.2, line: 4),
            ])
        #expect(try ReferenceLabels.parse("\(header)\n").isEmpty)
    }

    func failure(_ text: String) -> LabelsError? {
        do { _ = try ReferenceLabels.parse(text, source: "l.csv"); return nil } catch { return error }
    }

    @Test("errors name the line and what is wrong, on one line")
    func errors() {
        let cases: [(text: String, line: Int, says: String)] = [
            ("", 1, "header"),
            ("station,t,mean,peak\nrack-01,1,0.5,0.6\n", 1, "header"),
            ("\(header)\nrack-01,1,0.5\n", 2, "4 comma-separated fields"),
            ("\(header)\nrack-01,1,0.5,0.6,7\n", 2, "found 5"),
            ("\(header)\nrack-01,1,0.5,0.6\nrack-01,abc,0.5,0.6\n", 3, "t_top `abc`"),
            ("\(header)\nrack-01,inf,0.5,0.6\n", 2, "t_top"),
            ("\(header)\nrack-01,1,fast,0.6\n", 2, "mean_velocity_mps `fast`"),
            ("\(header)\nrack-01,1,0.5,-0.6\n", 2, "peak_velocity_mps"),
            ("\(header)\n,1,0.5,0.6\n", 2, "station"),
            ("\(header)\nrack 01,1,0.5,0.6\n", 2, "station"),
        ]
        for c in cases {
            let error = failure(c.text)
            #expect(error?.line == c.line, "\(c.text)")
            #expect(error?.message.contains("l.csv line \(c.line):") == true, "\(String(describing: error))")
            #expect(error?.message.contains(c.says) == true, "\(String(describing: error))")
            #expect(error?.message.contains("\n") == false)
        }
    }
}

@Suite("vbt eval: the offline runner")
struct OfflineRunnerTests {
    /// A recording of the simulator's laser readings, as the bridge would send them (10 a message),
    /// after an `athlete.assign` that lets every scripted rep count, plus two lines to skip.
    func writeRecording(_ config: SimulationConfig, origin: Double, to path: String) throws -> SimulatedSensors {
        var sensors = SimulatedSensors(config)
        let writer = try RecordingWriter(path: path)
        var stamper = EnvelopeStamper(program: "sensor-bridge")
        func append(_ frames: (topic: [UInt8], body: [UInt8]), at t: Double) throws {
            try writer.append(try decodeMessage(topic: frames.topic, body: frames.body), receivedAt: t)
        }
        let assign = CommandMessage(
            id: "c1", command: "athlete.assign", target: "rep-detector",
            args: JSONObject([
                ("athlete", .string("ana")), ("exercise", .string(config.exercise.name)), ("load_kg", .number(config.loadKg)),
                ("vl_threshold_pct", .number(100)),
            ]))
        try append(try stamper.encode(assign, station: config.station, ts: origin), at: origin)
        // A command for someone else changes nothing.
        let other = CommandMessage(
            id: "c2", command: "athlete.assign", target: "notifier",
            args: JSONObject([("exercise", .string("bench")), ("vl_threshold_pct", .number(5))]))
        try append(try stamper.encode(other, station: config.station, ts: origin), at: origin)
        let step = 1 / config.distanceRateHz
        var batch: [SampleMessage.DistanceReading] = []
        var k = 0.0
        while k * step <= sensors.timeline.duration {
            var reading = sensors.distance(at: k * step, wallOrigin: origin)
            reading.accG = nil
            batch.append(reading)
            if batch.count == 10 {
                let ts = reading.t + 0.002
                try append(try stamper.encode(SampleMessage(.distance(batch), device: "sim"), station: config.station, ts: ts), at: ts)
                batch = []
            }
            k += 1
        }
        writer.close()
        // A line that is not JSON and a sample without readings: reported, skipped.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("{not json\n".utf8))
        handle.write(
            Data(
                #"{"t":1,"topic":"sample.rack-01","msg":{"v":1,"type":"sample","station":"rack-01","src":"x/sample.rack-01","seq":1,"ts":1763812345,"sensor":"distance"}}"#
                    .utf8 + [0x0A]))
        handle.closeFile()
        return sensors
    }

    @Test("the simulator's session gives the simulator's reps, tops near the truth; bad lines are reported")
    func simulatedSession() throws {
        var config = SimulationConfig()
        config.seed = 41
        config.sets = 2
        config.repsPerSet = 5
        config.restS = 15
        config.loadKg = 90
        let origin = 1_763_812_345.0
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-eval-\(UInt32.random(in: 0 ... .max)).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sensors = try writeRecording(config, origin: origin, to: path)
        let recording = try RecordingReader.read(path: path)
        let run = OfflineRunner.run(lines: recording.lines, unreadable: recording.unreadable)
        let truth = sensors.timeline.reps
        #expect(truth.count == 10)
        #expect(run.reps.count == truth.count)
        #expect(run.stations == [config.station])
        #expect(run.unreadable.count == 2)
        #expect(run.unreadable.allSatisfy { $0.number > 2 })
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").count
        #expect(run.unreadable.map(\.number) == [lines - 1, lines])
        for (rep, real) in zip(run.reps, truth) {
            #expect(abs(rep.tTop - (origin + real.concentricEndS)) < 0.25, "rep \(rep.index) of \(rep.setId)")
            // The reading it was counted on comes after its top, within the few tenths of a second that confirm it.
            #expect(rep.tInput.map { $0 > rep.tTop && $0 < rep.tTop + 3 } == true, "rep \(rep.index): top \(rep.tTop), input \(String(describing: rep.tInput))")
            #expect(abs(rep.meanVelocityMps - real.meanVelocityMps) < 0.1 * real.meanVelocityMps)
        }
        // Labels made from the truth: every rep matches.
        let labels = truth.map { ReferenceLabel(station: config.station, tTop: origin + $0.concentricEndS, meanVelocityMps: $0.meanVelocityMps) }
        let evaluation = Evaluation(run: run, labels: labels)
        #expect(evaluation.overall.counts == DetectionCounts(truePositives: 10, falsePositives: 0, falseNegatives: 0))
    }
}

@Suite("Ground truth as reference labels (sensor-bridge --truth)")
struct TruthLabelsTests {
    @Test("the simulator's truth, written by TruthWriter, reads back as labels: every rep, its top and velocities to the printed precision")
    func roundTrip() throws {
        var config = SimulationConfig()
        config.exercise = .press
        config.loadKg = 40
        config.oneRepMaxKg = 60
        config.seed = 77
        let sensors = SimulatedSensors(config)
        let origin = 1_763_812_345.0
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-truth-\(UInt32.random(in: 0 ... .max)).csv").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let writer = try TruthWriter(path: path)
            try writer.append(station: "rack-07", reps: sensors.timeline.reps, origin: origin)
        }
        let labels = try ReferenceLabels.parse(String(contentsOfFile: path, encoding: .utf8), source: path)
        #expect(labels.count == sensors.timeline.reps.count && labels.count == 18)
        for (label, rep) in zip(labels, sensors.timeline.reps) {
            #expect(label.station == "rack-07")
            #expect(abs(label.tTop - (origin + rep.concentricEndS)) <= 0.5e-6 + 1e-9)
            #expect(abs((label.meanVelocityMps ?? 0) - rep.meanVelocityMps) <= 0.5e-4 + 1e-12)
            #expect(abs((label.peakVelocityMps ?? 0) - rep.peakVelocityMps) <= 0.5e-4 + 1e-12)
        }
    }
}

@Suite("vbt eval: order-only labels")
struct OrderLabelsTests {
    func pairs(_ detectedSets: [Int], _ labels: [(Int, Int)]) -> [[Int]] {
        OrderMatching.match(detectedSets: detectedSets, labels: labels.map { (set: $0.0, rep: $0.1) }).map { [$0.label, $0.set, $0.rep] }
    }

    @Test("set numbers count by rank, rep numbers by value; what one side lacks stays unmatched")
    func matching() {
        // Labels number their sets 4 and 9: the detector's first and second sets.
        #expect(pairs([2, 1], [(9, 1), (4, 2), (4, 1)]) == [[0, 1, 0], [1, 0, 1], [2, 0, 0]])
        // A label rep past the detector's last rep of the set: unmatched (a false negative).
        #expect(pairs([2], [(1, 1), (1, 2), (1, 3)]) == [[0, 0, 0], [1, 0, 1]])
        // A rep the labels skip (1, 3): the detector's 2nd rep stays unmatched (a false positive), its 3rd is rep 3.
        #expect(pairs([3], [(1, 1), (1, 3)]) == [[0, 0, 0], [1, 0, 2]])
        // More label sets than detected sets: the last set's labels are unmatched; no detected sets, none match.
        #expect(pairs([1], [(1, 1), (2, 1)]) == [[0, 0, 0]])
        #expect(pairs([], [(1, 1)]).isEmpty)
        #expect(pairs([3, 3], []).isEmpty)
    }

    func run(_ reps: [(station: String, set: String, t: Double, exercise: String)]) -> OfflineRun {
        var run = OfflineRun()
        run.stations = Array(Set(reps.map(\.station))).sorted()
        run.reps = reps.map { r in
            EvaluatedRep(station: r.station, setId: r.set, tTop: r.t, meanVelocityMps: 0.5, peakVelocityMps: 0.8, exercise: r.exercise)
        }
        return run
    }

    @Test("an evaluation: extra and missing reps, a set only the labels have, exercises of the false negatives")
    func evaluation() throws {
        var offline = run([
            ("a", "a-1", 10, "squat"), ("a", "a-1", 13, "squat"), ("a", "a-1", 16, "squat"),
            ("a", "a-2", 40, "bench"), ("a", "a-2", 43, "bench"),
        ])
        offline.exerciseSpans["a"] = [ExerciseSpan(sinceT: 0, exercise: "squat"), ExerciseSpan(sinceT: 30, exercise: "bench")]
        offline.rejections = [EvaluatedRejection(station: "a", t: 44, reason: "partial", detail: "ROM 150 mm below 400 mm", exercise: "bench")]
        offline.rejectedByStation = ["a": 1]
        let labels = [
            OrderLabel(station: "a", set: 1, rep: 1, meanVelocityMps: 0.45, peakVelocityMps: 0.9, line: 2),
            OrderLabel(station: "a", set: 1, rep: 2, meanVelocityMps: 0.55, line: 3),
            // Set 1's third rep is not in the labels: the detector's third rep is a false positive.
            OrderLabel(station: "a", set: 2, rep: 1, meanVelocityMps: 0.50, line: 4),
            OrderLabel(station: "a", set: 2, rep: 2, meanVelocityMps: 0.50, line: 5),
            OrderLabel(station: "a", set: 2, rep: 3, meanVelocityMps: 0.50, line: 6),  // the detector's set 2 has 2 reps: FN (bench)
            OrderLabel(station: "a", set: 3, rep: 1, line: 7),  // a set the detector did not count: FN (bench, at the end)
            OrderLabel(station: "z", set: 1, rep: 1, line: 8),  // a silent station: FN under the default exercise
        ]
        let e = Evaluation(run: offline, file: .order(labels))
        #expect(e.kind == .order && e.labelled)
        #expect(e.reps.map { $0.reference?.line } == [2, 3, nil, 4, 5])
        #expect(e.reps.allSatisfy { $0.label == nil })
        #expect(e.unmatched.map(\.reference.line) == [6, 7, 8])
        #expect(e.unmatched.map(\.exercise) == ["bench", "bench", ExerciseProfile.defaultExercise])
        #expect(e.stations.map(\.station) == ["a", "z"])
        #expect(e.stations[0].counts == DetectionCounts(truePositives: 4, falsePositives: 1, falseNegatives: 2))
        #expect(e.exercises.map(\.exercise) == ["bench", "generic", "squat"])
        #expect(e.exercises[0].counts == DetectionCounts(truePositives: 2, falsePositives: 0, falseNegatives: 2))
        #expect(e.exercises[0].rejectedAttempts == 1 && e.exercises[2].rejectedAttempts == 0)
        #expect(e.exercises[2].counts == DetectionCounts(truePositives: 2, falsePositives: 1, falseNegatives: 0))
        #expect(e.overall.counts == DetectionCounts(truePositives: 4, falsePositives: 1, falseNegatives: 3))
        // Mean velocity differences: 0.05, -0.05, 0, 0 (bias 0, SD 0.0408248); peak: -0.1 only.
        #expect(e.overall.meanVelocity?.n == 4 && near(e.overall.meanVelocity?.biasMps, 0, 1e-12))
        #expect(near(e.overall.meanVelocity?.smallestDetectableChangeMps, 1.96 * 0.040824829046386, 1e-12))
        #expect(e.overall.peakVelocity?.n == 1 && e.overall.peakVelocity?.smallestDetectableChangeMps == nil)
        #expect(e.sets.map(\.labelSet) == [1, 2, 3, 1])
        #expect(e.sets.map(\.setId) == ["a-1", "a-2", nil, nil])
        #expect(e.sets.map(\.detectedReps) == [3, 2, 0, 0] && e.sets.map(\.labels) == [2, 3, 1, 1])
        let json = e.json(recording: "r.jsonl")
        guard case .object(let object) = try JSONParser.parse(Array(json.utf8)), case .array(let rejected)? = object["rejected"],
            case .array(let exercises)? = object["exercises"]
        else {
            Issue.record("not a JSON object with rejected and exercises: \(json)")
            return
        }
        #expect(rejected.count == 1 && exercises.count == 3)
        #expect(object["tolerance_s"] == .null && object["matching"] == .string("order"))
        let table = e.table(recording: "r.jsonl")
        #expect(table.contains("a set 2 rep 3 (line 6)") && table.contains("partial") && table.contains("SDC"))
    }

    @Test("more detected sets than label sets: the detector's later sets are false positives")
    func moreDetectedSets() {
        let offline = run([("a", "a-1", 10, "squat"), ("a", "a-2", 40, "squat"), ("a", "a-3", 70, "squat")])
        let e = Evaluation(run: offline, file: .order([OrderLabel(station: "a", set: 5, rep: 1, meanVelocityMps: 0.5, line: 2)]))
        #expect(e.reps.map { $0.reference?.line } == [2, nil, nil])
        #expect(e.overall.counts == DetectionCounts(truePositives: 1, falsePositives: 2, falseNegatives: 0))
        #expect(e.sets.map(\.labelSet) == [5, nil, nil])
    }

    @Test("time labels' false negatives count under the exercise assigned at their time")
    func timeLabelExercise() {
        var offline = run([("a", "a-1", 10, "squat")])
        offline.exerciseSpans["a"] = [ExerciseSpan(sinceT: 20, exercise: "bench")]
        let e = Evaluation(
            run: offline,
            labels: [
                ReferenceLabel(station: "a", tTop: 5, line: 2), ReferenceLabel(station: "a", tTop: 10, line: 3),
                ReferenceLabel(station: "a", tTop: 25, line: 4),
            ])
        #expect(e.kind == .time)
        #expect(e.unmatched.map(\.exercise) == [ExerciseProfile.defaultExercise, "bench"])
        #expect(e.unmatchedLabels.map(\.line) == [2, 4])
    }

    let header = ReferenceLabels.orderHeader

    @Test("a good file: either header is recognised, empty velocities are nil, line numbers kept")
    func good() throws {
        let file = try ReferenceLabels.parseFile("\u{FEFF}\(header)\r\nrack-01,2,1,0.61,\r\n\r\nrack-01,1,01,,1.2\r\n")
        #expect(
            file
                == .order([
                    OrderLabel(station: "rack-01", set: 2, rep: 1, meanVelocityMps: 0.61, line: 2),
                    OrderLabel(station: "rack-01", set: 1, rep: 1, peakVelocityMps: 1.2, line: 4),
                ]))
        #expect(
            try ReferenceLabels.parseFile("\(ReferenceLabels.header)\nrack-01,5,0.5,0.6\n")
                == .time([ReferenceLabel(station: "rack-01", tTop: 5, meanVelocityMps: 0.5, peakVelocityMps: 0.6, line: 2)]))
        // The same set and rep at two stations is two reps.
        #expect(try ReferenceLabels.parseOrder("\(header)\na,1,1,,\nb,1,1,,\n").count == 2)
    }

    @Test("errors name the file, the line and what is wrong, on one line")
    func errors() {
        let cases: [(text: String, line: Int, says: String)] = [
            ("", 1, "empty file"),
            ("station,set,rep,mean_velocity_mps\na,1,1,0.5\n", 1, "the header must be exactly"),
            ("station,set,rep,mean,peak\n", 1, ReferenceLabels.orderHeader),
            ("\(header)\na,1,1,0.5\n", 2, "expected 5 comma-separated fields"),
            ("\(header)\na,0,1,0.5,0.6\n", 2, "set `0` is not a positive integer"),
            ("\(header)\na,-1,1,0.5,0.6\n", 2, "set `-1`"),
            ("\(header)\na,one,1,0.5,0.6\n", 2, "set `one`"),
            ("\(header)\na,,1,0.5,0.6\n", 2, "set ``"),
            ("\(header)\na,1,1.0,0.5,0.6\n", 2, "rep `1.0` is not a positive integer"),
            ("\(header)\na,1,0,0.5,0.6\n", 2, "rep `0`"),
            ("\(header)\na,1,99999999999999999999,0.5,0.6\n", 2, "rep `99999999999999999999`"),
            ("\(header)\na,1,1,0.5,0.6\na,1,2,0.5,0.6\n\na,1,1,0.4,0.6\n", 5, "a set 1 rep 1 is also on line 2"),
            ("\(header)\na,1,1,fast,0.6\n", 2, "mean_velocity_mps `fast`"),
            ("\(header)\na,1,1,0.5,-1\n", 2, "peak_velocity_mps"),
            ("\(header)\nrack 01,1,1,0.5,0.6\n", 2, "station"),
        ]
        for c in cases {
            let error: LabelsError?
            do { _ = try ReferenceLabels.parseFile(c.text, source: "o.csv"); error = nil } catch let refused { error = refused }
            #expect(error?.line == c.line, "\(c.text)")
            #expect(error?.message.hasPrefix("o.csv line \(c.line): ") == true, "\(String(describing: error))")
            #expect(error?.message.contains(c.says) == true, "\(String(describing: error))")
            #expect(error?.message.contains("\n") == false)
        }
    }
}
