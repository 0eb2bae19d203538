import Foundation
import GRDB
import Logging
import Testing
import VBTBus
import VBTWire

@testable import VBTQuery
@testable import VBTStore

/// A fresh folder per test, removed afterwards.
final class TempFolder {
    let path: String
    init() {
        path = NSTemporaryDirectory() + "vbt-store-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

func makeStore(_ folder: TempFolder, name: String = "vbt.sqlite", _ configure: (inout StoreSettings) -> Void = { _ in }) throws -> TrainingStore {
    var settings = StoreSettings()
    settings.path = folder.file(name)
    configure(&settings)
    return try TrainingStore(settings: settings)
}

let quietLogger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

/// A fresh database in its own folder and an ingestor writing to it.
final class StoreFixture {
    let folder = TempFolder()
    let store: TrainingStore
    let ingestor: Ingestor
    init() throws {
        store = try makeStore(folder)
        ingestor = Ingestor(store: store, logger: quietLogger)
    }
}

extension Ingestor {
    /// Queues `messages` and writes them in one batch, as the recorder does.
    func ingest(_ messages: [BusMessage]) throws(StoreError) {
        for message in messages { enqueue(message) }
        try flush()
    }
}

/// Builds bus messages as a producer would (real envelope encoding, then the consumer's decoding).
struct Producer {
    var stamper: EnvelopeStamper
    init(_ program: String) { stamper = EnvelopeStamper(program: program) }

    mutating func message<P: BusPayload>(_ payload: P, station: String = "rack-01", athlete: String? = "ana", ts: Double) throws -> BusMessage {
        let frames = try stamper.encode(payload, station: station, athlete: athlete, ts: ts)
        return try decodeMessage(topic: frames.topic, body: frames.body)
    }
}

/// A set of `reps` reps at `load`, starting at `t0`: set start, reps, set end.
func setMessages(
    _ producer: inout Producer, station: String = "rack-01", athlete: String = "ana", exercise: String = "squat",
    load: Double, reps: Int, t0: Double, v0: Double = 0.8
) throws -> [BusMessage] {
    let setId = "\(station)-set-\(Int(t0 * 1e6))"
    var out = [try producer.message(SetMessage(setId: setId, event: .start, exercise: exercise, loadKg: load), station: station, athlete: athlete, ts: t0)]
    for index in 1...reps {
        let t = t0 + Double(index) * 3
        let v = v0 * (1 - 0.04 * Double(index - 1))
        out.append(
            try producer.message(
                RepMessage(
                    setId: setId, repId: "\(station)-\(Int(t * 1e6))", index: index, meanVelocityMps: v, peakVelocityMps: v * 1.5,
                    meanPropulsiveVelocityMps: v * 1.05, romMm: 600, concentricS: 0.6 / v, timeToPeakS: 0.3, velocityLossPct: 4 * Double(index - 1),
                    tEnd: t, detector: "rep-detector-00000001", concentricStartT: t - 0.6 / v, concentricEndT: t, exercise: exercise, loadKg: load,
                    zone: "strength-speed", meanPowerW: 500, sensor: "distance"), station: station, athlete: athlete, ts: t))
    }
    out.append(
        try producer.message(
            SetMessage(
                setId: setId, event: .end, reps: reps, reason: .idle, bestMeanVelocityMps: v0,
                velocityLossPct: 4 * Double(reps - 1), exercise: exercise, loadKg: load),
            station: station, athlete: athlete, ts: t0 + Double(reps) * 3 + 10))
    return out
}

/// Every row of every table, as text: two equal dumps mean an unchanged database.
func dump(_ store: TrainingStore) throws -> [String: [String]] {
    try store.read { db in
        var tables: [String: [String]] = [:]
        for table in try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'")
        {
            tables[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\($0)" }
        }
        return tables
    }
}

@Suite("Schema migrations")
struct MigrationTests {
    @Test("an empty database migrates to the current version, with the catalogue")
    func fromEmpty() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        #expect(try store.appliedMigrations() == Schema.versions)
        #expect(try store.exercises().map(\.id).contains("squat"))
        let mode = try store.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("a database of every earlier version keeps its rows and reaches the current version", arguments: Schema.versions.indices.dropLast())
    func fromEarlier(version: Int) throws {
        let folder = TempFolder()
        let path = folder.file("old.sqlite")
        // Write a database as the recorder of that version did: its migrations only, and rows in its tables.
        do {
            let queue = try DatabaseQueue(path: path)
            try Schema.migrator.migrate(queue, upTo: Schema.versions[version])
            try queue.write { db in
                try db.execute(sql: "INSERT INTO athletes (id, name, created_ts) VALUES ('ana', 'Ana', 1)")
                try db.execute(sql: "INSERT INTO weigh_ins (athlete, ts, weight_kg) VALUES ('ana', 1, 62)")
                try db.execute(sql: "INSERT INTO sessions (id, station, athlete, started_ts, ended_ts) VALUES (1, 'rack-01', 'ana', 1, 2)")
                try db.execute(
                    sql:
                        "INSERT INTO sets (id, session, station, athlete, exercise, load_kg, started_ts, reps) VALUES ('s1', 1, 'rack-01', 'ana', 'squat', 100, 1, 1)"
                )
                try db.execute(
                    sql: """
                        INSERT INTO reps (id, set_id, station, athlete, exercise, load_kg, idx, mean_velocity_mps, peak_velocity_mps,
                            mean_propulsive_velocity_mps, rom_mm, concentric_s, time_to_peak_s, velocity_loss_pct, t_end, detector, src, seq, ts)
                        VALUES ('r1', 's1', 'rack-01', 'ana', 'squat', 100, 1, 0.7, 1.1, 0.72, 600, 0.85, 0.4, 0, 2, 'd', 'x/rep.rack-01', 1, 2)
                        """)
                if version >= 7 {
                    // The same readings as one batch, as v8-sample-batches keeps them.
                    try db.execute(
                        sql: """
                            INSERT INTO sample_batches (id, station, sensor, t, n, data) VALUES
                                (42, 'rack-01', 'distance', 1.5, 2, '[{"t":1.5,"distance_mm":500},{"t":1.52,"distance_mm":501.5}]')
                            """)
                } else if version >= 2 {
                    // Raw readings one a row, as v3-raw-samples kept them (numbered from an id other than 1, as after pruning).
                    try db.execute(
                        sql: """
                            INSERT INTO samples (id, station, sensor, t, data) VALUES
                                (41, 'rack-01', 'distance', 1.5, '{"t":1.5,"distance_mm":500}'),
                                (42, 'rack-01', 'distance', 1.52, '{"t":1.52,"distance_mm":501.5}')
                            """)
                }
                if version >= 1 {
                    try db.execute(
                        sql:
                            "INSERT INTO profiles (src, seq, station, athlete, exercise, ts, intercept_mps, slope_mps_per_kg, r2, mvt_mps, e1rm_kg) VALUES ('p', 1, 'rack-01', 'ana', 'squat', 2, 1.5, -0.008, 0.99, 0.3, 150)"
                    )
                }
            }
        }
        var settings = StoreSettings()
        settings.path = path
        let store = try TrainingStore(settings: settings)
        #expect(try store.appliedMigrations() == Schema.versions)
        let ana = try store.athlete("ana")
        #expect(ana.weighIns.map(\.weightKg) == [62])
        #expect(ana.reps == 1 && ana.sets == 1 && ana.sessions == 1)
        let counts = try store.rowCounts()
        #expect(counts["reps"] == 1)
        #expect(counts["profiles"] == (version >= 1 ? 1 : 0))
        #expect(counts["samples"] == (version >= 2 ? 2 : 0), "the raw readings are kept, and counted without a scan")
        let readings = try store.read { db in try Row.fetchAll(db, sql: "SELECT id, station, sensor, t, data FROM samples ORDER BY id") }
        if version >= 2 {
            #expect(readings.map { $0["id"] as Int64 } == [41, 42])
            #expect(readings.map { $0["t"] as Double } == [1.5, 1.52])
            #expect(readings.map { $0["data"] as String } == [#"{"t":1.5,"distance_mm":500}"#, #"{"t":1.52,"distance_mm":501.5}"#])
        } else {
            #expect(readings.isEmpty)
        }
    }
}

@Suite("Ingest: idempotent, batched, refusing only what breaks the schema")
struct IngestTests {
    @Test("the same messages twice leave the database unchanged the second time")
    func idempotent() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 5, t0: 1_000)
        messages += try setMessages(&producer, load: 110, reps: 4, t0: 2_000)
        var bridge = Producer("sensor-bridge")
        let readings = (0..<32).map { SampleMessage.DistanceReading(t: 1_000 + Double($0) * 0.02, distanceMm: 500 + Double($0)) }
        messages.append(try bridge.message(SampleMessage(.distance(Array(readings[..<16]))), ts: 1_000))
        messages.append(try bridge.message(SampleMessage(.distance(Array(readings[16...]))), ts: 1_001))
        try ingestor.ingest(messages)
        let first = try dump(store)
        #expect(first["reps"]?.count == 9)
        #expect(first["sets"]?.count == 2)
        #expect(first["sample_batches"]?.count == 1, "a row per station's sensor a batch")
        #expect(try store.rowCounts()["samples"] == 32)
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(DISTINCT id) FROM samples") } == 32, "a number per reading")
        #expect(first["sessions"]?.count == 1, "two sets 1000 s apart are one session")

        // Again, in the same process (in-memory progress) ...
        try ingestor.ingest(messages)
        #expect(try dump(store) == first)
        #expect(ingestor.counters.duplicates == messages.count)

        // ... and after a restart (progress read back from the database).
        let restarted = Ingestor(store: try makeStore(fixture.folder), logger: quietLogger)
        try restarted.ingest(messages)
        #expect(try dump(store) == first)
        #expect(restarted.counters.duplicates == messages.count)
    }

    @Test("a rep published again by another detector (same rep_id, new src) is stored once")
    func sameRepId() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var old = Producer("rep-detector")
        var new = Producer("rep-detector")
        let messages = try setMessages(&old, load: 100, reps: 3, t0: 1_000)
        let again = try setMessages(&new, load: 100, reps: 3, t0: 1_000)
        try ingestor.ingest(messages + again)
        #expect(try store.rowCounts()["reps"] == 3)
        #expect(ingestor.counters.duplicates == 3)
    }

    @Test("a rep published late keeps how late (late_s); a live rep stores none")
    func lateRep() throws {
        let fixture = try StoreFixture()
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 2, t0: 1_000)
        // The second rep came from a journal fetch, 5 minutes after its reading.
        var late = try messages[2].payload(as: RepMessage.self)
        late.markLateness(publishedAt: late.tEnd + 300)
        messages[2] = try producer.message(late, ts: late.tEnd + 300)
        try fixture.ingestor.ingest(messages)
        let stored = try fixture.store.read { db in
            try Row.fetchAll(db, sql: "SELECT idx, late_s FROM reps ORDER BY idx").map { ($0["idx"] as Int, $0["late_s"] as Double?) }
        }
        #expect(stored.map(\.0) == [1, 2])
        #expect(stored.map(\.1) == [nil, 300])
    }

    @Test("gaps in a stream are counted in sources; stored progress survives")
    func gaps() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var producer = Producer("rep-detector")
        let messages = try setMessages(&producer, load: 100, reps: 6, t0: 1_000)
        for (index, message) in messages.enumerated() where index != 3 && index != 4 { ingestor.enqueue(message) }
        try ingestor.flush()
        let row = try store.read { db in try Row.fetchOne(db, sql: "SELECT * FROM sources WHERE topic = 'rep.rack-01'") }
        #expect(row?["gaps"] as Int? == 1)
        #expect(row?["missing"] as Int? == 2)
        #expect(row?["last_seq"] as Int? == 6)
    }

    @Test("a row the schema refuses costs only that row; the rest of the batch is stored")
    func constraint() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 3, t0: 1_000)
        // A rep with index 0 breaks CHECK (idx >= 1).
        var bad = try RepMessage(fields: messages[1].fields)
        bad.repId = "rack-01-bad"
        bad.index = 0
        messages.append(try producer.message(bad, ts: 1_004))
        try ingestor.ingest(messages)
        #expect(ingestor.counters.refused == 1)
        #expect(try store.rowCounts()["reps"] == 3)
        #expect(ingestor.pendingCount == 0)
    }

    @Test("a write that fails for a passing reason keeps the batch; nothing stored is lost; it is written when the cause goes")
    func lockedThenFree() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var producer = Producer("rep-detector")
        let first = try setMessages(&producer, load: 100, reps: 3, t0: 1_000)
        try ingestor.ingest(first)
        let before = try dump(store)

        // Another connection (another process, as far as SQLite knows) holds the write lock.
        let other = try DatabaseQueue(path: store.settings.path)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? other.write { db in
                try db.execute(sql: "INSERT INTO athletes (id, name, created_ts) VALUES ('lock', 'Lock', 1)")
                held.signal()
                release.wait()
                throw CancellationError()  // roll back: the other writer leaves nothing behind
            }
            done.signal()
        }
        held.wait()
        let second = try setMessages(&producer, load: 110, reps: 2, t0: 2_000)
        for message in second { ingestor.enqueue(message) }
        let failure = #expect(throws: StoreError.self) { try ingestor.flush() }
        #expect(failure?.kind == .locked && failure?.message.contains("locked") == true)
        #expect(ingestor.pendingCount == second.count)
        #expect(try dump(store) == before, "what was stored is untouched")

        release.signal()
        done.wait()
        try ingestor.flush()
        #expect(ingestor.pendingCount == 0)
        #expect(try store.rowCounts()["reps"] == 5)
    }

    @Test("streams silent for a week are forgotten; their rows stay, and a repeated rep is still stored once")
    func forgetStreams() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var old = Producer("rep-detector")
        let messages = try setMessages(&old, load: 100, reps: 3, t0: 1_000)
        try ingestor.ingest(messages)
        var recent = Producer("rep-detector")
        try ingestor.ingest(try setMessages(&recent, load: 100, reps: 2, t0: 1_000_000))
        #expect(try ingestor.forgetSilentStreams(silentForS: 7 * 86_400, now: 1_000_000 + 86_400) == 2, "the old detector's rep and set streams")
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sources") } == 2)
        try ingestor.ingest(messages)
        #expect(try store.rowCounts()["reps"] == 5)
        #expect(try store.rowCounts()["sets"] == 2)
    }

    @Test("raw samples are pruned after the retention period")
    func retention() throws {
        let folder = TempFolder()
        var settings = StoreSettings()
        settings.path = folder.file("vbt.sqlite")
        settings.sampleRetentionDays = 1
        let store = try TrainingStore(settings: settings)
        let ingestor = Ingestor(store: store, logger: quietLogger)
        var bridge = Producer("sensor-bridge")
        let now = 10_000_000.0
        ingestor.enqueue(try bridge.message(SampleMessage(.distance([.init(t: now - 2 * 86_400, distanceMm: 500)])), ts: now))
        ingestor.enqueue(try bridge.message(SampleMessage(.distance([.init(t: now - 3_600, distanceMm: 510)])), ts: now))
        try ingestor.flush()
        #expect(try ingestor.pruneSamples(now: now, chunk: 1) == 1)
        #expect(try store.rowCounts()["samples"] == 1)
    }
}

@Suite("Queries")
struct QueryTests {
    func ask(_ service: QueryService, _ json: String) throws -> [String: Any] {
        let reply = service.handle(Data(json.utf8))
        return try #require(JSONSerialization.jsonObject(with: reply) as? [String: Any])
    }

    @Test("bad requests get an error reply naming what to fix, never a crash")
    func badRequests() throws {
        let folder = TempFolder()
        let service = QueryService(store: try makeStore(folder))
        let cases: [(String, String, String)] = [
            ("not json", "bad-request", "one JSON object"),
            (#"{"id":"1"}"#, "bad-request", "query"),
            (#"{"id":"2","query":"nope"}"#, "invalid", "unknown query"),
            (#"{"id":"3","query":"athlete.show"}"#, "invalid", "missing args"),
            (#"{"id":"4","query":"athlete.show","args":{"id":5}}"#, "invalid", "wrong type"),
            (#"{"id":"5","query":"athlete.show","args":{"id":"zed"}}"#, "invalid", "no athlete 'zed'"),
            (#"{"id":"6","query":"export.page","args":{"table":"sqlite_master"}}"#, "invalid", "no table"),
            (#"{"id":"7","query":"athlete.add","args":{"id":"x","name":"X","height_cm":900}}"#, "invalid", "height"),
            (#"{"id":"8","query":"plan.create","args":{"id":"p","items":[{"exercise":"squat","sets":0,"reps":5,"rest_s":60}]}}"#, "invalid", "1 to 20"),
            (#"{"id":"10","query":"stats.week","args":{"now":1e300}}"#, "invalid", "now must be"),
            (#"{"id":"11","query":"history","args":{"athlete":"ana","limit":"5"}}"#, "invalid", "limit has the wrong type"),
            (#"{"id":"12","query":"stats.week","args":{"utc_offset_s":"x"}}"#, "invalid", "wrong type"),
        ]
        for (request, kind, words) in cases {
            let reply = try ask(service, request)
            #expect(reply["ok"] as? Bool == false, "\(request)")
            let error = reply["error"] as? [String: Any]
            #expect(error?["kind"] as? String == kind, "\(request): \(reply)")
            #expect((error?["message"] as? String)?.contains(words) == true, "\(request): \(reply)")
        }
        #expect(try ask(service, #"{"id":"9","query":"exercise.list"}"#)["id"] as? String == "9")
    }

    @Test("plan items parse with clear errors")
    func planItems() throws {
        let rest: (String) -> Double? = { $0 == "squat" ? 180 : nil }
        #expect(try PlanItem.parse("squat:3x5@100kg/120s", defaultRestS: rest) == PlanItem(exercise: "squat", sets: 3, reps: 5, restS: 120, loadKg: 100))
        #expect(try PlanItem.parse("squat:5x3", defaultRestS: rest) == PlanItem(exercise: "squat", sets: 5, reps: 3, restS: 180))
        for bad in ["squat", "squat:3", "squat:3x5@heavy", "squat:3x5/long", "lunge:3x5"] {
            #expect(throws: StoreError.self, "\(bad)") { try PlanItem.parse(bad, defaultRestS: rest) }
        }
    }

    @Test("athletes: add, weigh in, BMI; duplicates refused")
    func athletes() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana", sex: "f", birthYear: 1995, heightCm: 170, weightKg: 65), now: 100)
        let ana = try store.weighIn(athlete: "ana", weightKg: 63.58, ts: 200)
        #expect(ana.weighIns.map(\.weightKg) == [65, 63.58])
        #expect(abs((ana.bmi ?? 0) - 63.58 / (1.7 * 1.7)) < 1e-9)
        #expect(throws: StoreError.self) { try store.addAthlete(AthleteInput(id: "ana", name: "Other")) }
        #expect(throws: StoreError.self) { try store.weighIn(athlete: "nobody", weightKg: 70) }
    }

    @Test("week statistics per local day, totals and the most trained exercise")
    func week() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var producer = Producer("rep-detector")
        let day = 86_400.0
        let now = 20_000 * day + 12 * 3_600  // noon UTC
        var messages = try setMessages(&producer, load: 100, reps: 5, t0: now - 3_600)  // today: squat 5 x 100
        messages += try setMessages(&producer, exercise: "bench", load: 60, reps: 8, t0: now - 2 * day)  // 2 days ago: bench 8 x 60
        messages += try setMessages(&producer, exercise: "bench", load: 60, reps: 8, t0: now - 2 * day + 600)
        messages += try setMessages(&producer, load: 90, reps: 3, t0: now - 9 * day)  // outside the week
        try ingestor.ingest(messages)
        let stats = try store.weekStats(athlete: "ana", now: now, utcOffsetS: 0)
        #expect(stats.days.count == 7)
        #expect(stats.days.last?.day == TrainingStore.day(now, offset: 0))
        #expect(stats.days.last?.reps == 5 && stats.days.last?.sets == 1 && stats.days.last?.volumeKg == 500)
        #expect(stats.days[4].sets == 2 && stats.days[4].reps == 16 && stats.days[4].volumeKg == 960)
        #expect(stats.totals.sets == 3 && stats.totals.reps == 21 && stats.totals.volumeKg == 1_460)
        #expect(stats.mostTrainedExercise == "bench")
        // In a time zone 13 h ahead, today's noon-UTC set is already tomorrow there.
        let ahead = try store.weekStats(athlete: "ana", now: now, utcOffsetS: 13 * 3_600)
        #expect(ahead.days.last?.day == TrainingStore.day(now + 13 * 3_600, offset: 0))
        #expect(ahead.days.last?.reps == 5)
        #expect(TrainingStore.day(0, offset: 0) == "1970-01-01" && TrainingStore.day(1_795_400_000, offset: 0) == "2026-11-23")
        #expect(TrainingStore.day(1e300, offset: 0) == "-" && TrainingStore.day(-5, offset: 0) == "-", "times off the calendar never trap")
    }

    @Test("progress: best velocity per load, e1RM per day (from the day's reps, not the detector's profiles), body weight")
    func progress() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana", heightCm: 170, weightKg: 65), now: 10)
        let ingestor = Ingestor(store: store, logger: quietLogger)
        var producer = Producer("rep-detector")
        var messages = try setMessages(&producer, load: 100, reps: 3, t0: 1_000, v0: 0.8)
        messages += try setMessages(&producer, load: 100, reps: 3, t0: 1_100, v0: 0.85)
        messages += try setMessages(&producer, load: 120, reps: 3, t0: 1_200, v0: 0.6)
        let profile = { (e1rm: Double, ts: Double) in
            ProfileMessage(
                exercise: "squat", loadsKg: [100, 120], meanVelocitiesMps: [0.85, 0.6], interceptMps: 2, slopeMpsPerKg: -0.01, r2: 0.98, mvtMps: 0.3,
                e1rmKg: e1rm)
        }
        messages.append(try producer.message(profile(160, 1_300), ts: 1_300))
        messages.append(try producer.message(profile(165, 1_400), ts: 1_400))  // same day, later: the day's figure
        messages.append(try producer.message(profile(170, 1_400 + 86_400), ts: 1_400 + 86_400))
        try ingestor.ingest(messages)
        let report = try store.progress(athlete: "ana", exercise: nil, utcOffsetS: 0)
        let squat = try #require(report.exercises.first)
        #expect(squat.bestByLoad.map(\.loadKg) == [100, 120])
        #expect(squat.bestByLoad.map(\.bestMeanVelocityMps) == [0.85, 0.6])
        // The day's best reps, 100 kg at 0.85 and 120 kg at 0.6 m/s, meet the squat's 0.30 m/s at 144 kg;
        // the stored profiles (165, 170) are not what progress reports, and no reps on the next day.
        #expect(squat.e1rm.count == 1 && abs((squat.e1rm.first?.e1rmKg ?? 0) - 144) < 1e-9 && squat.e1rm.first?.loadsKg == [100, 120])
        #expect(report.bodyWeight.map(\.weightKg) == [65])
        let svg = SVGChart.progress(report, utcOffsetS: 0)
        #expect(svg.hasPrefix("<svg") && svg.contains("e1RM 144.0 kg") && svg.contains("squat"))
    }
}

@Suite("Export folder")
struct ExportTests {
    @Test("files go into the folder only: no path in a name, no symbolic link followed")
    func confined() throws {
        let folder = TempFolder()
        let outside = TempFolder()
        let export = try ExportFolder(folder.file("out"))
        try export.write("reps.csv", Data("a\r\n".utf8))
        #expect(FileManager.default.fileExists(atPath: folder.file("out/reps.csv")))
        for name in ["../escape.csv", "a/b.csv", "..", ".hidden", ""] {
            #expect(throws: StoreError.self, "\(name)") { try export.write(name, Data()) }
        }
        try FileManager.default.createSymbolicLink(atPath: folder.file("out/sets.csv"), withDestinationPath: outside.file("victim.csv"))
        #expect(throws: StoreError.self) { try export.write("sets.csv", Data("x".utf8)) }
        #expect(!FileManager.default.fileExists(atPath: outside.file("victim.csv")), "nothing written through the link")
        _ = FileManager.default.createFile(atPath: folder.file("afile"), contents: Data())
        #expect(throws: StoreError.self) { try ExportFolder(folder.file("afile")) }
    }

    @Test("CSV quoting (RFC 4180)")
    func csv() {
        let data = ExportFormat.csv(columns: ["a", "b", "c", "d"], rows: [[.text("x,y"), .text("say \"hi\""), .null, .real(0.5)]])
        #expect(String(decoding: data, as: UTF8.self) == "a,b,c,d\r\n\"x,y\",\"say \"\"hi\"\"\",,0.5\r\n")
    }

    @Test("CSV never holds a live formula; the BOM is asked for; time columns get their ISO 8601 twin")
    func spreadsheetSafe() {
        let names: [Cell] = [.text("=HYPERLINK(\"http://x\",\"y\")"), .text("+1"), .text("-2"), .text("@SUM(A1)"), .text("\tx"), .text("Zoë")]
        let text = String(decoding: ExportFormat.csv(columns: ["a", "b", "c", "d", "e", "f"], rows: [names]), as: UTF8.self)
        #expect(text == "a,b,c,d,e,f\r\n\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",'+1,'-2,'@SUM(A1),'\tx,Zoë\r\n")
        let marked = ExportFormat.csv(columns: ["a"], rows: [[.int(-3)]], bom: true)
        #expect(Array(marked.prefix(3)) == [0xEF, 0xBB, 0xBF] && String(decoding: marked.dropFirst(3), as: UTF8.self) == "a\r\n-3\r\n")
        let (columns, rows) = ExportFormat.withISOTimes(
            columns: ["id", "ts", "started_ts", "t_end", "load_kg"], rows: [[.int(1), .real(1_795_600_000.25), .null, .int(0), .real(100)]])
        #expect(columns == ["id", "ts", "ts_iso", "started_ts", "started_ts_iso", "t_end", "t_end_iso", "load_kg"])
        #expect(
            rows == [
                [.int(1), .real(1_795_600_000.25), .text("2026-11-25T09:46:40.250Z"), .null, .null, .int(0), .text("1970-01-01T00:00:00.000Z"), .real(100)]
            ])
    }
}

@Suite("Raw readings")
struct RawReadingTests {
    @Test("array elements are sliced out of the frame exactly, whatever their strings and nesting hold")
    func slices() throws {
        let text = #"{"v":1,"note":"samples: [1,2]","samples" : [ {"t":1.5,"acc_g":[0.1,-2e-3,1]} ,{"t":2,"s":"a,]}\"b"},{"t":3,"x":{"y":[[]]}} ],"after":[9]}"#
        let bytes = Array(text.utf8)
        let ranges = try #require(RawJSON.arrayElements(bytes, key: "samples"))
        let parts = ranges.map { String(decoding: bytes[$0], as: UTF8.self) }
        #expect(parts == [#"{"t":1.5,"acc_g":[0.1,-2e-3,1]}"#, #"{"t":2,"s":"a,]}\"b"}"#, #"{"t":3,"x":{"y":[[]]}}"#])
        #expect(RawJSON.arrayElements(Array(#"{"samples":{}}"#.utf8), key: "samples") == nil)
        #expect(RawJSON.arrayElements(Array(#"{"x":{"samples":[1]}}"#.utf8), key: "samples") == nil, "only the top level counts")
        #expect(RawJSON.arrayElements(Array(#"{"samples":[]}"#.utf8), key: "samples") == [])
        // A value that reads "samples" (a station of that name) is not the key.
        let named = Array(#"{"station":"samples","samples":[{"t":1}]}"#.utf8)
        #expect(RawJSON.arrayElements(named, key: "samples").map { $0.map { String(decoding: named[$0], as: UTF8.self) } } == [#"{"t":1}"#])
    }

    @Test("each stored reading is the JSON the bridge sent, byte for byte")
    func verbatim() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var bridge = Producer("sensor-bridge")
        let readings = (0..<16).map {
            SampleMessage.IMUReading(
                t: 1_000 + Double($0) / 100, accG: Vector3(0.01 * Double($0), -0.5, 1.0 / 3),
                gyroDps: Vector3(1, 2, 3), angleDeg: Vector3(-179.5, 0.25, 90))
        }
        let message = try bridge.message(SampleMessage(.imu(readings)), ts: 1_000)
        ingestor.enqueue(message)
        try ingestor.flush()
        let batch = try store.read { db in try String.fetchAll(db, sql: "SELECT data FROM sample_batches") }
        let deferred = try #require(message.deferred)
        #expect(batch == [String(decoding: message.body[deferred.range], as: UTF8.self)], "the array as the frame held it")
        let stored = try store.read { db in try Row.fetchAll(db, sql: "SELECT t, data FROM samples ORDER BY id") }
        guard case .object(let whole) = try JSONParser.parse(message.body), case .array(let sent)? = whole["samples"] else {
            Issue.record("no samples")
            return
        }
        #expect(stored.count == 16)
        for (row, value) in zip(stored, sent) {
            let text: String = row["data"]
            #expect(try JSONParser.parse(Array(text.utf8)) == value)
            #expect(String(decoding: message.body, as: UTF8.self).contains(text), "each reading as sent")
            guard case .object(let reading) = value else { Issue.record("a reading that is no object"); continue }
            #expect(reading["t"] == .number(row["t"]))
        }
    }

    @Test("a batch's readings are a row per station's sensor, each reading as sent, in the order received and numbered without gaps")
    func rowPerStationSensor() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        var rack = Producer("sensor-bridge")
        var bench = Producer("sensor-bridge")
        func distance(_ t: Double, _ mm: Double) -> SampleMessage.DistanceReading { .init(t: t, distanceMm: mm) }
        let messages = [
            try rack.message(SampleMessage(.distance([distance(10, 500), distance(10.02, 501)])), station: "rack-1", ts: 10.03),
            try bench.message(SampleMessage(.distance([distance(10.01, 300)])), station: "bench-1", ts: 10.03),
            try rack.message(
                SampleMessage(.imu([.init(t: 10.005, accG: Vector3(0, 0, 1), gyroDps: Vector3(1, 2, 3))])), station: "rack-1", ts: 10.04),
            try rack.message(SampleMessage(.distance([distance(10.04, 502)])), station: "rack-1", ts: 10.05),
            // Older than the row's latest reading (fetched again from a journal), then over a second past its first: rows of their own.
            try rack.message(SampleMessage(.distance([distance(9, 499)])), station: "rack-1", ts: 10.06),
            try rack.message(SampleMessage(.distance([distance(10.5, 503), distance(11.01, 504)])), station: "rack-1", ts: 11.02),
        ]
        for message in messages { ingestor.enqueue(message) }
        #expect(try ingestor.flush() == 6)
        let rows = try store.read { db in try Row.fetchAll(db, sql: "SELECT id, station, sensor, t, n, data FROM sample_batches ORDER BY id") }
        let text = { (message: BusMessage, index: Int) in String(decoding: message.body[message.deferred!.elements![index]], as: UTF8.self) }
        #expect(rows.map { $0["station"] as String } == ["rack-1", "bench-1", "rack-1", "rack-1", "rack-1"])
        #expect(rows.map { $0["sensor"] as String } == ["distance", "distance", "imu", "distance", "distance"])
        #expect(rows.map { $0["n"] as Int } == [3, 1, 1, 1, 2])
        #expect(rows.map { $0["id"] as Int64 } == [3, 4, 5, 6, 8], "the number of each row's last reading")
        #expect(rows.map { $0["t"] as Double } == [10.04, 10.01, 10.005, 9, 11.01], "each row's latest reading")
        #expect((rows[0]["data"] as String) == "[\(text(messages[0], 0)),\(text(messages[0], 1)),\(text(messages[3], 0))]")
        // A lone message's array is stored as the frame held it.
        #expect((rows[1]["data"] as String) == String(decoding: messages[1].body[messages[1].deferred!.range], as: UTF8.self))
        #expect(ingestor.counters.sampleRows == 8 && ingestor.counters.stored["sample"] == 6)
        let readings = try store.read { db in try Row.fetchAll(db, sql: "SELECT id, station, t FROM samples ORDER BY id") }
        #expect(readings.map { $0["id"] as Int } == Array(1...8))
        #expect(readings.map { $0["t"] as Double } == [10, 10.02, 10.04, 10.01, 10.005, 9, 10.5, 11.01])
    }

    @Test("a reading without a usable time is left out; the message's others are stored as an array of their own")
    func withoutTime() throws {
        let fixture = try StoreFixture()
        let (store, ingestor) = (fixture.store, fixture.ingestor)
        let body =
            #"{"v":1,"type":"sample","station":"rack-1","src":"b/sample.rack-1","seq":1,"ts":10,"sensor":"distance","samples":[{"t":1.5,"distance_mm":500},{"distance_mm":501},{"t":"soon","distance_mm":502},{"t":1.54,"distance_mm":503}]}"#
        let message = try decodeMessage(topic: Array("sample.rack-1".utf8), body: Array(body.utf8))
        ingestor.enqueue(message)
        try ingestor.flush()
        let rows = try store.read { db in try Row.fetchAll(db, sql: "SELECT id, t, n, data FROM sample_batches") }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        let data: String = row["data"], n: Int = row["n"], id: Int64 = row["id"], t: Double = row["t"]
        #expect(data == #"[{"t":1.5,"distance_mm":500},{"t":1.54,"distance_mm":503}]"#)
        #expect(n == 2)
        #expect(id == 2, "the number of its last reading")
        #expect(t == 1.54, "its latest reading's time")
        #expect(ingestor.counters.sampleRows == 2)
        #expect(try store.rowCounts()["samples"] == 2)
    }
}

@Suite("Holes: what a stream lacks")
struct HoleTests {
    /// Sample messages 1...n of one stream, as a producer sends them.
    static func stream(_ count: Int, program: String = "sensor-bridge") throws -> [BusMessage] {
        var producer = Producer(program)
        return try (1...count).map { index in
            let t = 1_763_812_345 + Double(index) * 0.02
            return try producer.message(SampleMessage(.distance([SampleMessage.DistanceReading(t: t, distanceMm: 500 + Double(index))])), ts: t)
        }
    }

    @Test("a skipped range becomes a hole; late or fetched messages fill it, once each; the holes survive a restart")
    func holesFill() throws {
        let fixture = try StoreFixture()
        let messages = try Self.stream(10)
        let src = messages[0].envelope.src
        try fixture.ingestor.ingest(Array(messages[0..<3]) + Array(messages[6..<10]))
        #expect(try fixture.ingestor.streamHoles()[src] == [4...6])
        #expect(fixture.ingestor.outstanding == 3)
        try fixture.ingestor.ingest([messages[4]])
        #expect(try fixture.ingestor.streamHoles()[src] == [4...4, 6...6])
        #expect(fixture.ingestor.outstanding == 2)
        try fixture.ingestor.ingest([messages[3], messages[5], messages[4]])
        #expect(try fixture.ingestor.streamHoles()[src] == nil)
        #expect(fixture.ingestor.outstanding == 0)
        #expect(fixture.ingestor.counters.recovered == 3 && fixture.ingestor.counters.duplicates == 1)
        // A stream first seen late lacks its beginning.
        let late = try Self.stream(5, program: "notifier")
        try fixture.ingestor.ingest([late[2], late[3]])
        #expect(try fixture.ingestor.streamHoles()[late[0].envelope.src] == [1...2])
        let again = Ingestor(store: fixture.store, logger: quietLogger)
        #expect(try again.streamHoles()[late[0].envelope.src] == [1...2], "kept in the database")
    }

    @Test("a tail the producer says it sent becomes a hole; what no journal holds is counted lost, exactly")
    func tailsAndLoss() throws {
        let fixture = try StoreFixture()
        let messages = try Self.stream(15)
        let src = messages[0].envelope.src
        try fixture.ingestor.ingest(Array(messages[0..<10]))
        try fixture.ingestor.addTail(src: src, topic: messages[0].topic, after: 10, through: 15, ts: 1_763_812_400)
        #expect(try fixture.ingestor.streamHoles()[src] == [11...15])
        #expect(try fixture.ingestor.storedLastSeq(src) == 15)
        try fixture.ingestor.ingest([messages[13], messages[14]])
        try fixture.ingestor.markLost(src: src, range: 11...13)
        #expect(try fixture.ingestor.streamHoles()[src] == nil)
        #expect(fixture.ingestor.counters.lost == 3 && fixture.ingestor.counters.recovered == 2)
        let lost = try fixture.store.read { db in try Int.fetchOne(db, sql: "SELECT lost FROM sources WHERE src = ?", arguments: [src]) }
        #expect(lost == 3)
    }

    @Test("a stream's many holes, filled in any order over many batches and partly lost, are written as they change and read back the same")
    func manyHolesChanged() throws {
        let fixture = try StoreFixture()
        // Ends on a message that arrives first (88): the rest all fall in holes.
        let messages = try Self.stream(88)
        let src = messages[0].envelope.src
        // Every third message arrives first: 29 holes of two seqs each.
        try fixture.ingestor.ingest(messages.filter { $0.envelope.seq % 3 == 1 })
        var missing = Set(messages.map(\.envelope.seq).filter { $0 % 3 != 1 })
        func expected() -> [ClosedRange<UInt64>]? {
            var list: [ClosedRange<UInt64>] = []
            for seq in missing.sorted() {
                if let last = list.last, last.upperBound + 1 == seq { list[list.count - 1] = last.lowerBound...seq } else { list.append(seq...seq) }
            }
            return list.isEmpty ? nil : list
        }
        #expect(try fixture.ingestor.streamHoles()[src]?.count == 29)
        // The rest in a scrambled order (a fixed generator), seven a batch, some twice; a stretch counted lost halfway.
        var order = messages.filter { $0.envelope.seq % 3 != 1 }
        var state: UInt64 = 17
        for index in order.indices.reversed() {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            order.swapAt(index, Int(state >> 33) % (index + 1))
        }
        var batch = 0
        while !order.isEmpty {
            let next = Array(order.prefix(7))
            order.removeFirst(next.count)
            try fixture.ingestor.ingest(next + next.prefix(1))
            for message in next { missing.remove(message.envelope.seq) }
            batch += 1
            if batch == 4 {
                try fixture.ingestor.markLost(src: src, range: 40...52)
                missing.subtract(40...52)
            }
            // As committed: another ingestor on the same file reads what this one holds.
            let held = try fixture.ingestor.streamHoles()[src]
            #expect(held == expected(), "batch \(batch)")
            #expect(try Ingestor(store: fixture.store, logger: quietLogger).streamHoles()[src] == held, "batch \(batch)")
        }
        #expect(try fixture.store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM source_holes") } == 0)
    }

    @Test("tails of many streams are recorded at once with their producers; one below a stream's progress adds no hole")
    func manyTails() throws {
        let fixture = try StoreFixture()
        let streams = try (0..<3).map { try Self.stream(6, program: "bridge-\($0)") }
        for messages in streams { try fixture.ingestor.ingest(Array(messages[0..<4])) }
        let tails = streams.enumerated().map { index, messages in
            // The last one's producer says no more than the recorder holds.
            Ingestor.Tail(
                src: messages[0].envelope.src, topic: messages[0].topic, after: 4, through: index == 2 ? 3 : 6 + UInt64(index), ts: 1_763_812_400,
                producer: "station-\(index)")
        }
        try fixture.ingestor.addTails(tails)
        let holes = try fixture.ingestor.streamHoles()
        #expect(holes[tails[0].src] == [5...6] && holes[tails[1].src] == [5...7] && holes[tails[2].src] == nil)
        #expect(try fixture.ingestor.storedLastSeq(tails[1].src) == 7 && fixture.ingestor.storedLastSeq(tails[2].src) == 4)
        #expect(try fixture.ingestor.producers() == ["\(tails[0].src)": "station-0", "\(tails[1].src)": "station-1", "\(tails[2].src)": "station-2"])
        // As committed: another ingestor on the same file reads the same holes.
        let again = Ingestor(store: fixture.store, logger: quietLogger)
        #expect(try again.streamHoles() == holes)
        let missing = try fixture.store.read { db in try Int.fetchOne(db, sql: "SELECT sum(missing) FROM sources") }
        #expect(missing == 5)
    }
}

@Suite("Charts")
struct ChartTests {
    /// The y-axis tick labels of a rendered panel, top to bottom order aside.
    static func yTicks(_ svg: String) -> [String] {
        svg.split(separator: "\n").filter { $0.contains("text-anchor=\"end\">") && $0.hasPrefix("<text x=\"64.0\"") }.map {
            String($0.split(separator: ">")[1].split(separator: "<")[0])
        }
    }

    @Test("counts get whole ticks, and no two ticks read the same (2.5 steps show their decimal)")
    func ticks() {
        let sets = ChartPanel(title: "sets", yUnit: "sets", kind: .bars(categories: ["Mon", "Tue", "Wed"], values: [3, 12, 7]))
        let setTicks = Self.yTicks(SVGChart.render(title: "t", panels: [sets]))
        #expect(!setTicks.isEmpty && setTicks.allSatisfy { Int($0) != nil }, "\(setTicks)")
        #expect(Set(setTicks).count == setTicks.count)
        let (_, _, step) = SVGChart.niceRange(0, 12.5)
        #expect(step == 2.5)
        #expect(SVGChart.label(7.5, step: 2.5) == "7.5" && SVGChart.label(5, step: 2.5) == "5" && SVGChart.label(0.25, step: 0.05) == "0.25")
        let volume = ChartPanel(title: "v", yUnit: "kg", kind: .bars(categories: ["a", "b"], values: [0.5, 12.4]))
        let volumeTicks = Self.yTicks(SVGChart.render(title: "t", panels: [volume]))
        #expect(Set(volumeTicks).count == volumeTicks.count, "\(volumeTicks)")
    }

    @Test("a line chart over two days names each date once, the first and last inside the plot")
    func dates() {
        let day = 86_400.0
        let series = ChartPanel.Series(name: "e1RM", points: [(x: 0, y: 150), (x: day, y: 155)])
        let panel = ChartPanel(title: "e1RM", yUnit: "kg", kind: .lines([series], xLabel: { "day \(Int($0 / day))" }))
        let svg = SVGChart.render(title: "t", panels: [panel])
        let labels = svg.split(separator: "\n").filter { $0.contains(">day ") && !$0.contains("<title>") }
        #expect(labels.count == 2, "\(labels)")
        #expect(labels.first?.contains("text-anchor=\"start\"") == true && labels.last?.contains("text-anchor=\"end\"") == true)
    }
}

@Suite("A coach's data: edit, archive, erase, reassign")
struct AthleteCareTests {
    @Test("edit changes the fields given and clears those named; archive hides from the list, not from history")
    func editAndArchive() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana", sex: "f", birthYear: 1990, heightCm: 168))
        let edited = try store.editAthlete(AthleteEditArgs(id: "ana", name: "Ana Rossi", goalWeightKg: 62, clear: ["birth_year"]))
        #expect(edited.name == "Ana Rossi" && edited.goalWeightKg == 62 && edited.birthYear == nil && edited.sex == "f" && edited.heightCm == 168)
        #expect(throws: StoreError.self) { try store.editAthlete(AthleteEditArgs(id: "ana", clear: ["name"])) }
        #expect(throws: StoreError.self) { try store.editAthlete(AthleteEditArgs(id: "nobody", name: "X")) }
        #expect(throws: StoreError.self) { try store.editAthlete(AthleteEditArgs(id: "ana")) }
        var producer = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&producer, load: 100, reps: 3, t0: 1_000))
        let archived = try store.archiveAthlete("ana", archived: true, now: 5_000)
        #expect(archived.archivedTs == 5_000)
        #expect(try store.athletes().isEmpty && store.athletes(includeArchived: true).map(\.id) == ["ana"])
        #expect(try store.history(athlete: "ana", station: nil, exercise: nil, limit: 10).count == 1, "history kept")
        #expect(try store.archiveAthlete("ana", archived: false).archivedTs == nil)
    }

    @Test("erase deletes the athlete's details and leaves their training under a pseudonym nobody can trace back")
    func erase() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana Rossi", sex: "f", birthYear: 1990, weightKg: 61))
        _ = try store.addAthlete(AthleteInput(id: "ben", name: "Ben"))
        var producer = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&producer, load: 100, reps: 3, t0: 1_000))
        try fixture.ingestor.ingest(try setMessages(&producer, athlete: "ben", load: 80, reps: 2, t0: 2_000))
        var notifier = Producer("notifier")
        try fixture.ingestor.ingest([
            try notifier.message(
                AlertMessage(
                    alertId: "rack-01/posture", kind: .posture, severity: .warning, state: .raised, message: "Ana Rossi at rack-01: bad posture for 6 s",
                    since: 1_001, station: "rack-01", athlete: "ana"), ts: 1_001)
        ])
        try store.write { db in
            try db.execute(sql: "INSERT INTO calibrations (athlete, ts, station, json) VALUES ('ana', 1, 'rack-01', '{}')")
        }
        #expect(throws: StoreError.self) { try store.eraseAthlete("ana", confirm: "an") }
        let result = try store.eraseAthlete("ana", confirm: "ana")
        #expect(result.pseudonym.hasPrefix("erased-") && result.rows["reps"] == 3 && result.rows["sets"] == 1 && result.rows["alerts"] == 1)
        #expect(result.rows["calibrations"] == 1 && result.rows["weigh_ins"] == 1 && result.rows["athletes"] == 1)
        // Nothing in the database names her any more; Ben's rows are untouched.
        for (table, rows) in try dump(store) where table != "erasures" {
            for row in rows {
                #expect(!row.contains("\"ana\"") && !row.contains("Ana Rossi") && !row.contains("1990"), "\(table): \(row)")
            }
        }
        #expect(try store.history(athlete: result.pseudonym, station: nil, exercise: nil, limit: 10).map(\.reps) == [3])
        #expect(try store.history(athlete: "ben", station: nil, exercise: nil, limit: 10).map(\.reps) == [2])
        #expect(try store.weekStats(athlete: nil, now: 2_100, utcOffsetS: 0).totals.reps == 5, "the gym's totals stay true")
        #expect(throws: StoreError.self) { try store.athlete("ana") }
    }

    @Test("a set lifted before the station was assigned goes to its athlete, with its reps")
    func reassign() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana"))
        var producer = Producer("rep-detector")
        let messages = try setMessages(&producer, athlete: "nobody", exercise: "generic", load: 60, reps: 2, t0: 1_000)
        try fixture.ingestor.ingest(messages)
        let setId = try #require(store.history(athlete: nil, station: nil, exercise: nil, limit: 1).first?.id)
        let moved = try store.reassignSet(ReassignArgs(set: setId, athlete: "ana", exercise: "squat", loadKg: 62.5))
        #expect(moved.athlete == "ana" && moved.exercise == "squat" && moved.loadKg == 62.5)
        let reps = try store.read { db in try Row.fetchAll(db, sql: "SELECT athlete, exercise, load_kg FROM reps WHERE set_id = ?", arguments: [setId]) }
        #expect(reps.count == 2 && reps.allSatisfy { $0["athlete"] == "ana" && $0["exercise"] == "squat" && $0["load_kg"] == 62.5 })
        #expect(throws: StoreError.self) { try store.reassignSet(ReassignArgs(set: setId, athlete: "zed")) }
        #expect(throws: StoreError.self) { try store.reassignSet(ReassignArgs(set: "no-such-set", athlete: "ana")) }
        #expect(throws: StoreError.self) { try store.reassignSet(ReassignArgs(set: setId)) }
    }
}

@Suite("Write-ahead log checkpoints off the recorder's loop")
struct CheckpointerTests {
    @Test("the recorder's writes leave the log to the checkpointer, which copies all of it into the database, the file then readable without the log")
    func passiveCheckpoint() throws {
        let folder = TempFolder()
        let store = try makeStore(folder) { $0.walPagesBeforeWriterCopies = 10_000 }
        let checkpointer = WALCheckpointer(path: store.settings.path, logger: quietLogger)
        // Nothing waiting yet but the migrations' pages.
        try checkpointer.checkpointOnce()
        // Half a page a row, whatever the page size (StoreSettings.pageSizeBytes).
        let filler = String(repeating: "x", count: store.settings.pageSizeBytes / 2)
        for batch in 0..<150 {
            try store.write { db in
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS filler (n INTEGER, text TEXT)")
                for n in 0..<20 { try db.execute(sql: "INSERT INTO filler VALUES (?, ?)", arguments: [batch * 20 + n, filler]) }
            }
        }
        // About 1,500 pages written, none copied by the writes themselves (SQLite's default would have, at 1,000).
        let result = try checkpointer.checkpointOnce()
        #expect(result.logFrames > 1_200)
        #expect(result.copied == result.logFrames)
        // What was copied is in the database file itself: a copy of it without its log holds every row.
        let copy = folder.file("copy.sqlite")
        try FileManager.default.copyItem(atPath: store.settings.path, toPath: copy)
        let rows = try DatabaseQueue(path: copy).read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM filler") }
        #expect(rows == 3_000)
    }

    @Test("a new file is made with the settings' page size; a file made with another keeps its own and is written as before")
    func pageSize() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        #expect(try store.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 16_384)
        // A database of an earlier release, made with SQLite's 4 KiB pages.
        let older = folder.file("older.sqlite")
        let made = try DatabaseQueue(path: older)
        try made.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA page_size = 4096; CREATE TABLE t (n INTEGER); DROP TABLE t") }
        try made.close()
        let reopened = try makeStore(folder, name: "older.sqlite")
        #expect(try reopened.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 4_096)
        #expect(try reopened.appliedMigrations() == Schema.versions)
    }

    @Test("no database file yet: nothing is created, and the checkpoint is empty")
    func noFile() throws {
        let folder = TempFolder()
        let checkpointer = WALCheckpointer(path: folder.file("vbt.sqlite"), logger: quietLogger)
        let result = try checkpointer.checkpointOnce()
        #expect(result.logFrames == 0 && result.copied == 0)
        #expect(!FileManager.default.fileExists(atPath: folder.file("vbt.sqlite")))
    }

    @Test("started and stopped: the thread ends when asked")
    func startStop() throws {
        let folder = TempFolder()
        let store = try makeStore(folder)
        let checkpointer = WALCheckpointer(path: store.settings.path, logger: quietLogger)
        checkpointer.start(intervalS: 0.001)
        checkpointer.stop()
        checkpointer.stop()  // twice is harmless
        #expect(try checkpointer.checkpointOnce().copied >= 0)
    }
}
