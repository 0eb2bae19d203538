import Foundation
import GRDB
import Testing
import VBTWire

@testable import VBTQuery
@testable import VBTStore

// A coach's data: exercises of their own, RPE and notes on sets, and plans with
// %e1RM, per-set loads, pounds and velocity targets.

@Suite("A coach's data")
struct CoachDataTests {
    @Test("an exercise added to the catalogue is listed, shown and planned; bad ids, ranges and an id in use are refused")
    func addExercise() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        let added = try store.addExercise(
            ExerciseInput(id: "zercher-squat", name: "Zercher squat", description: "Bar in the elbows' crook.", expectedRomMm: 550, mvtMps: 0.32))
        #expect(
            added
                == ExerciseRecord(
                    id: "zercher-squat", name: "Zercher squat", description: "Bar in the elbows' crook.", expectedRomMm: 550, mvtMps: 0.32, defaultRestS: 120))
        #expect(try store.exercises().contains(added) && store.exercise("zercher-squat") == added)
        let plan = try store.createPlan(Plan(id: "z", items: [PlanItem(exercise: "zercher-squat", sets: 3, reps: 5, loadKg: 80)]))
        #expect(plan.items[0].restS == 120, "the new exercise's rest fills the plan's")
        let cases: [(ExerciseInput, String)] = [
            (ExerciseInput(id: "zercher-squat", name: "Again", expectedRomMm: 550, mvtMps: 0.3), "exists already (Zercher squat): choose another id"),
            (ExerciseInput(id: "squat", name: "Mine", expectedRomMm: 550, mvtMps: 0.3), "exists already (Back squat)"),
            (ExerciseInput(id: "Bad Id", name: "X", expectedRomMm: 550, mvtMps: 0.3), "must be 1-64 lower-case letters"),
            (ExerciseInput(id: String(repeating: "a", count: 65), name: "X", expectedRomMm: 550, mvtMps: 0.3), "must be 1-64"),
            (ExerciseInput(id: "x", name: " ", expectedRomMm: 550, mvtMps: 0.3), "name is empty"),
            (ExerciseInput(id: "x", name: "X", expectedRomMm: 49, mvtMps: 0.3), "not between 50 and 1500"),
            (ExerciseInput(id: "x", name: "X", expectedRomMm: 1_501, mvtMps: 0.3), "not between 50 and 1500"),
            (ExerciseInput(id: "x", name: "X", expectedRomMm: 500, mvtMps: 0.04), "not between 0.05 and 1.5"),
            (ExerciseInput(id: "x", name: "X", expectedRomMm: 500, mvtMps: 1.51), "not between 0.05 and 1.5"),
            (ExerciseInput(id: "x", name: "X", expectedRomMm: 500, mvtMps: 0.3, defaultRestS: 1_801), "not between 0 and 1800"),
        ]
        for (input, words) in cases {
            do {
                _ = try store.addExercise(input)
                Issue.record("\(input.id) was added")
            } catch {
                #expect(error.kind == .invalid && error.message.contains(words), "\(input.id): \(error.message)")
            }
        }
        #expect(try store.exercise("squat").name == "Back squat", "the refused duplicate changed nothing")
        #expect(try store.addExercise(ExerciseInput(id: "x_1", name: "Edge", expectedRomMm: 50, mvtMps: 1.5, defaultRestS: 0)).defaultRestS == 0)
    }

    @Test("exercise.add and set.annotate are writes: a viewer's key may not use them")
    func writes() {
        #expect(QueryService.writes.contains(.exerciseAdd) && QueryService.writes.contains(.setAnnotate))
    }

    @Test("a set's RPE and note: stored, shown in history, exported (formula-safe in CSV), cleared; bad values and unknown sets refused")
    func annotate() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        var producer = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&producer, load: 100, reps: 3, t0: 1_000))
        let setId = try #require(store.history(athlete: nil, station: nil, exercise: nil, limit: 1).first?.id)
        let note = "=HYPERLINK(\"x\"), grindy\nlast rep"
        let noted = try store.annotateSet(AnnotateArgs(set: setId, rpe: 8.5, note: note))
        #expect(noted.rpe == 8.5 && noted.note == note && noted.reps == 3)
        #expect(try store.history(athlete: "ana", station: nil, exercise: nil, limit: 5).first?.rpe == 8.5)
        // Only the RPE changes; the note stays.
        #expect(try store.annotateSet(AnnotateArgs(set: setId, rpe: 9)).note == note)

        let page = try store.page(table: "sets", athlete: nil, after: nil, limit: 10)
        let row = try #require(page.rows.first)
        let rpe = try #require(page.columns.firstIndex(of: "rpe")), noteColumn = try #require(page.columns.firstIndex(of: "note"))
        #expect(row[rpe] == .real(9) && row[noteColumn] == .text(note))
        let csv = String(decoding: ExportFormat.csv(columns: page.columns, rows: page.rows, bom: false), as: UTF8.self)
        #expect(csv.contains("\"'=HYPERLINK(\"\"x\"\"), grindy\nlast rep\""), "a note starting like a formula is quoted and kept text: \(csv)")

        for (args, words) in [
            (AnnotateArgs(set: setId, rpe: 8.3), "steps of 0.5"), (AnnotateArgs(set: setId, rpe: 0.5), "1 to 10"),
            (AnnotateArgs(set: setId, rpe: 10.5), "1 to 10"),
            (AnnotateArgs(set: setId, note: String(repeating: "n", count: 501)), "at most 500"), (AnnotateArgs(set: setId), "nothing to change"),
            (AnnotateArgs(set: "no-such-set", rpe: 7), "no set 'no-such-set'"),
        ] {
            do {
                _ = try store.annotateSet(args)
                Issue.record("\(args) was accepted")
            } catch {
                #expect(error.kind == .invalid && error.message.contains(words), "\(args): \(error.message)")
            }
        }
        #expect(try store.annotateSet(AnnotateArgs(set: setId, note: String(repeating: "é", count: 500))).note?.count == 500)
        let cleared = try store.annotateSet(AnnotateArgs(set: setId, clear: true))
        #expect(cleared.rpe == nil && cleared.note == nil)
        // The recorder's ingest of the same set again leaves the annotation alone.
        _ = try store.annotateSet(AnnotateArgs(set: setId, rpe: 7, note: "ok"))
        var again = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&again, load: 100, reps: 3, t0: 1_000))
        #expect(try store.storedSet(setId).rpe == 7)
    }

    @Test("an erased athlete's notes name the pseudonym, not them")
    func eraseNotes() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana Rossi"))
        var producer = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&producer, load: 100, reps: 2, t0: 1_000))
        let setId = try #require(store.history(athlete: "ana", station: nil, exercise: nil, limit: 1).first?.id)
        _ = try store.annotateSet(AnnotateArgs(set: setId, note: "Ana Rossi felt strong; ana to deload"))
        let erased = try store.eraseAthlete("ana", confirm: "ana")
        #expect(try store.storedSet(setId).note == "\(erased.pseudonym) felt strong; \(erased.pseudonym) to deload")
    }

    @Test("plan items: %e1RM, per-set loads, pounds, velocity targets, and errors naming the form")
    func parse() throws {
        let rest: (String) -> Double? = { ["squat", "bench"].contains($0) ? 180 : nil }
        #expect(try PlanItem.parse("squat:3x5@80%", defaultRestS: rest) == PlanItem(exercise: "squat", sets: 3, reps: 5, restS: 180, loadPctE1rm: 80))
        #expect(try PlanItem.parse("squat:3x5@80%", unit: "lb", defaultRestS: rest).loadUnit == "lb")
        let perSet = PlanItem(exercise: "bench", sets: 3, reps: 5, restS: 180, loadKg: 60, loadsKg: [60, 62.5, 65])
        #expect(try PlanItem.parse("bench:3x5@60kg,62.5kg,65kg", defaultRestS: rest) == perSet)
        #expect(try PlanItem.parse("bench:3x5@60,62.5,65kg", defaultRestS: rest) == perSet)
        #expect(try PlanItem.parse("bench:3x5@60,62.5,65", defaultRestS: rest) == perSet)
        let pounds = try PlanItem.parse("squat:3x5@225lb/120s", defaultRestS: rest)
        #expect(pounds == PlanItem(exercise: "squat", sets: 3, reps: 5, restS: 120, loadKg: 225 * 0.45359237, loadUnit: "lb"))
        #expect(pounds.loadWords == "225 lb")
        #expect(try PlanItem.parse("squat:2x5@135,185", unit: "lb", defaultRestS: rest).loadWords == "135, 185 lb")
        #expect(try PlanItem.parse("squat:3x5@100kg~0.75mps/120s", defaultRestS: rest).targetMeanVelocityMps == 0.75)
        #expect(
            try PlanItem.parse("squat:3x5@0.75mps", defaultRestS: rest)
                == PlanItem(exercise: "squat", sets: 3, reps: 5, restS: 180, targetMeanVelocityMps: 0.75))
        #expect(try PlanItem.parse("squat:3x5~0.5", defaultRestS: rest).targetMeanVelocityMps == 0.5)
        for (bad, words) in [
            ("bench:3x5@60,65kg", "2 loads for 3 sets"), ("bench:3x5@60kg,135lb,70kg", "both kg and lb"), ("squat:3x5@0%", "percentage of e1RM"),
            ("squat:3x5@130%", "percentage of e1RM"), ("squat:3x5@lots%", "percentage"), ("squat:3x5~fast", "mean velocity like 0.75mps"),
            ("squat:3x5@0.7mps~0.7mps", "two velocity targets"), ("bench:3x5@60,,65kg", "is not a number of kg"),
        ] {
            do {
                _ = try PlanItem.parse(bad, defaultRestS: rest)
                Issue.record("\(bad) parsed")
            } catch {
                #expect(error.message.contains(words), "\(bad): \(error.message)")
            }
        }
    }

    @Test("the new item fields are stored and read back; a plan stored before v7-coach-data still loads")
    func storedPlans() throws {
        let folder = TempFolder()
        let path = folder.file("v5.sqlite")
        do {
            let queue = try DatabaseQueue(path: path)
            try Schema.migrator.migrate(queue, upTo: "v5-athlete-care")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO plans (id, athlete, created_ts) VALUES ('old', NULL, 1)")
                try db.execute(sql: "INSERT INTO plan_items (plan, position, exercise, sets, reps, rest_s, load_kg) VALUES ('old', 1, 'squat', 3, 5, 180, 100)")
                try db.execute(
                    sql: "INSERT INTO sessions (id, station, athlete, started_ts, ended_ts) VALUES (1, 'rack-01', 'ana', 1, 2)")
                try db.execute(sql: "INSERT INTO sets (id, session, station, athlete, started_ts) VALUES ('s1', 1, 'rack-01', 'ana', 1)")
            }
        }
        var settings = StoreSettings()
        settings.path = path
        let store = try TrainingStore(settings: settings)
        #expect(try store.appliedMigrations().last == Schema.versions.last)
        #expect(try store.plan("old").items == [PlanItem(exercise: "squat", sets: 3, reps: 5, restS: 180, loadKg: 100)])
        #expect(try store.storedSet("s1").rpe == nil)

        let items = [
            PlanItem(exercise: "squat", sets: 3, reps: 5, loadPctE1rm: 80, targetMeanVelocityMps: 0.7),
            PlanItem(exercise: "bench", sets: 3, reps: 5, loadsKg: [60, 62.5, 65]),
            PlanItem(exercise: "deadlift", sets: 1, reps: 3, loadKg: 225 * PlanItem.kgPerLb, loadUnit: "lb"),
        ]
        let plan = try store.createPlan(Plan(id: "new", items: items))
        #expect(plan.items[1].loadKg == 60, "the first of the per-set loads is the item's load, for earlier readers")
        #expect(try store.plan("new") == plan && store.plans().first { $0.id == "new" } == plan)
        #expect(plan.items[0].loadPctE1rm == 80 && plan.items[0].targetMeanVelocityMps == 0.7 && plan.items[1].loadsKg == [60, 62.5, 65])
        #expect(plan.items[2].loadWords == "225 lb")
        // Through plan.assign's arguments (the notifier's copy) the same plan comes back.
        #expect(try Plan(assignArgs: plan.assignArgs(athlete: "ana")).items == plan.items)
        for bad in [
            PlanItem(exercise: "bench", sets: 3, reps: 5, loadsKg: [60, 65]), PlanItem(exercise: "bench", sets: 2, reps: 5, loadsKg: [60, 700]),
            PlanItem(exercise: "squat", sets: 3, reps: 5, loadKg: 100, loadPctE1rm: 80), PlanItem(exercise: "squat", sets: 3, reps: 5, loadPctE1rm: 150),
            PlanItem(exercise: "squat", sets: 3, reps: 5, targetMeanVelocityMps: 5), PlanItem(exercise: "squat", sets: 3, reps: 5, loadUnit: "stone"),
        ] {
            #expect(throws: StoreError.self, "\(bad)") { try store.createPlan(Plan(id: "bad", items: [bad])) }
        }
    }

    @Test("%e1RM resolves from the athlete's latest day's e1RM, rounded to 2.5 kg or 5 lb; without an e1RM the plan refuses to start")
    func resolve() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana"))
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 3, t0: 1_000, v0: 0.8)
        messages += try setMessages(&producer, load: 120, reps: 3, t0: 1_200, v0: 0.6)
        // The next day's sets (e1RM 100 + 20 x 0.5 / 0.2421 = 141.3 kg against the first day's 150) are current.
        messages += try setMessages(&producer, load: 100, reps: 3, t0: 1_000 + 86_400, v0: 0.8)
        messages += try setMessages(&producer, load: 120, reps: 3, t0: 1_200 + 86_400, v0: 0.5579)
        try fixture.ingestor.ingest(messages)
        let e1rm = Plan.latestE1RM(try store.progress(athlete: "ana", exercise: nil, utcOffsetS: 0))
        #expect(e1rm.keys.sorted() == ["squat"] && abs((e1rm["squat"] ?? 0) - 141.3) < 0.01, "\(e1rm)")

        let plan = Plan(
            id: "p", athlete: "ana",
            items: [
                PlanItem(exercise: "squat", sets: 3, reps: 5, loadPctE1rm: 80),  // 113.04 kg: 112.5
                PlanItem(exercise: "squat", sets: 1, reps: 3, loadPctE1rm: 86.5),  // 122.22 kg: 122.5
                PlanItem(exercise: "squat", sets: 1, reps: 3, loadPctE1rm: 80, loadUnit: "lb"),  // 249.2 lb: 250 lb
                PlanItem(exercise: "bench", sets: 3, reps: 5, loadKg: 60),
            ])
        let resolved = try plan.resolvingLoads(athlete: "ana", e1rmKg: e1rm)
        #expect(resolved.items.map(\.loadKg) == [112.5, 122.5, resolved.items[2].loadKg, 60])
        #expect(abs((resolved.items[2].loadKg ?? 0) - 250 * PlanItem.kgPerLb) < 1e-9)
        #expect(resolved.items[2].loadWords == "80% e1RM = 250 lb")
        let half = try Plan(id: "h", items: [PlanItem(exercise: "squat", sets: 1, reps: 1, loadPctE1rm: 50)]).resolvingLoads(
            athlete: "ana", e1rmKg: ["squat": 82.5])
        #expect(half.items[0].loadKg == 42.5, "41.25 kg rounds half up")
        let commands = resolved.startCommands(athlete: "ana", catalogue: ExerciseRecord.catalogue)
        #expect(try commands[1].args.number("load_kg") == 112.5)

        do {
            _ = try Plan(id: "b", items: [PlanItem(exercise: "bench", sets: 3, reps: 5, loadPctE1rm: 75)]).resolvingLoads(athlete: "ana", e1rmKg: e1rm)
            Issue.record("a plan without an e1RM resolved")
        } catch {
            #expect(error.message.hasPrefix("no e1RM for ana's bench yet: record sets at 2+ loads, or give the load in kg"), "\(error.message)")
        }
    }
}
