// The store section of `make bench` (vbt-bench --only store):
// - raw readings persisted per second through the recorder's real path
//   (bus bytes -> decodeMessage -> Ingestor.enqueue -> Ingestor.flush every
//   5,000 messages into a TrainingStore on a fresh temp file; the recorder
//   writes a row per station's sensor a transaction, its readings within a
//   second: Ingestor.SampleRows), beside a raw SQLite C-API baseline inserting
//   a row per sample message (station, sensor, t, count, the readings' JSON
//   array pre-built; schema v8-sample-batches) into the same table of an
//   identically opened file, one transaction per 5,000 messages;
// - latency of the common queries through QueryService.handle(Data) (what the
//   ROUTER endpoint runs: request JSON in, reply JSON out) on a database holding
//   a year of a 40-athlete gym.

import Foundation
import GRDB
import GRDBSQLite
import Logging
import VBTBus
import VBTQuery
import VBTStore
import VBTWire

struct StoreBenchOptions {
    var runs = 5
    /// Raw readings per run and sensor: 12,500 messages, flushed as 5,000 + 5,000 + 2,500.
    var readings = 200_000
    /// Which streams: "imu" (bar IMU, 100 Hz, the largest rows) and/or "distance" (laser, 50 Hz).
    var sensors = ["imu"]
    /// Readings per `sample` message (the bridge's batches).
    var readingsPerMessage = 16
    /// Messages per flush (RecorderSettings.flushAtMessages).
    var batchMessages = 5_000
    /// Timed calls per query.
    var queryRuns = 50
}

// MARK: Helpers (self-contained: main.swift's globals are main-actor isolated)

private func storeMedian(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Nearest-rank percentile.
private func storePercentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(sorted.count - 1, max(0, rank - 1))]
}

private func storeRate(_ perSecond: Double) -> String {
    perSecond >= 1e6 ? String(format: "%.2f M/s", perSecond / 1e6) : String(format: "%.0f k/s", perSecond / 1e3)
}

private func pad(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(1, width - text.count))
}

/// xorshift64*: deterministic data, independent of the rest of the bench.
private struct BenchRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    mutating func uniform(_ low: Double, _ high: Double) -> Double { low + (high - low) * unit() }
    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
    /// A WitMotion-style raw Int16 scaled to `fullScale` (what the bridge's decoder produces).
    mutating func witmotion(_ value: Double, fullScale: Double) -> Double {
        let raw = max(-32_768, min(32_767, (value / fullScale * 32_768).rounded()))
        return raw / 32_768 * fullScale
    }
}

private func benchLogger() -> Logger {
    var logger = Logger(label: "vbt-bench.store")
    logger.logLevel = .critical
    return logger
}

private func freshStore(_ folder: URL, _ name: String) throws -> TrainingStore {
    var settings = StoreSettings()
    settings.path = folder.appendingPathComponent(name).path
    settings.sampleRetentionDays = 7
    settings.busyTimeoutS = 5
    return try TrainingStore(settings: settings)
}

// MARK: Raw samples

/// `sample` messages as the bridge sends them, encoded to bus bytes and decoded
/// back by the bus's own decoder (what the recorder's subscriber hands the ingestor).
private func sampleMessages(imu: Bool, readings total: Int, perMessage: Int) throws -> [BusMessage] {
    var stamper = EnvelopeStamper(program: "sensor-bridge", instance: "sensor-bridge-bench0001")
    var random = BenchRandom(seed: imu ? 7 : 11)
    let stations = (1...8).map { String(format: "rack-%02d", $0) }
    let rateHz = imu ? 100.0 : 50.0
    let start = wallClockSeconds() - 3_600
    var messages: [BusMessage] = []
    messages.reserveCapacity(total / perMessage + 1)
    var produced = 0
    var batch = 0
    while produced < total {
        let station = stations[batch % stations.count]
        let count = min(perMessage, total - produced)
        let t0 = start + Double(batch / stations.count * perMessage) / rateHz
        let payload: SampleMessage
        if imu {
            payload = SampleMessage(
                .imu(
                    (0..<count).map { i in
                        let t = t0 + Double(i) / rateHz
                        let phase = sin(t * 1.3)
                        return SampleMessage.IMUReading(
                            t: t,
                            accG: Vector3(
                                random.witmotion(0.02 * phase + random.uniform(-0.01, 0.01), fullScale: 16),
                                random.witmotion(random.uniform(-0.02, 0.02), fullScale: 16),
                                random.witmotion(1 + 0.4 * phase + random.uniform(-0.02, 0.02), fullScale: 16)),
                            gyroDps: Vector3(
                                random.witmotion(random.uniform(-5, 5), fullScale: 2_000),
                                random.witmotion(random.uniform(-5, 5), fullScale: 2_000),
                                random.witmotion(random.uniform(-2, 2), fullScale: 2_000)),
                            angleDeg: Vector3(
                                random.witmotion(random.uniform(-3, 3), fullScale: 180),
                                random.witmotion(random.uniform(-3, 3), fullScale: 180),
                                random.witmotion(random.uniform(-90, 90), fullScale: 180)))
                    }), device: "F4:3C:9A:12:7E:01")
        } else {
            payload = SampleMessage(
                .distance(
                    (0..<count).map { i in
                        let t = t0 + Double(i) / rateHz
                        let mm = (900 + 300 * sin(t * 1.3) + random.uniform(-3, 3)).rounded()
                        return SampleMessage.DistanceReading(t: t, distanceMm: mm, state: cos(t * 1.3) > 0 ? .concentric : .eccentric)
                    }), device: "/dev/ttyACM0")
        }
        let frames = try stamper.encode(payload, station: station, athlete: "athlete-\(batch % 40 + 1)", ts: t0 + Double(count) / rateHz)
        messages.append(try decodeMessage(topic: frames.topic, body: frames.body))
        produced += count
        batch += 1
    }
    return messages
}

/// The row the ingestor writes for a message, pre-built for the raw baseline:
/// (station, sensor, latest t, readings, JSON text of the readings array) as UTF-8.
private struct RawRow {
    var station: [UInt8]
    var sensor: [UInt8]
    var t: Double
    var n: Int
    var data: [UInt8]
}

private func rawRows(_ messages: [BusMessage]) -> [RawRow] {
    messages.compactMap { message in
        guard case .string(let sensor)? = message.fields["sensor"], case .object(let whole) = try? JSONParser.parse(message.body),
            case .array(let readings)? = whole["samples"]
        else { return nil }
        let times = readings.compactMap { reading -> Double? in
            guard case .object(let object) = reading, case .number(let t)? = object["t"] else { return nil }
            return t
        }
        var writer = JSONWriter(capacity: 160 * readings.count)  // built before timing: the baseline only inserts
        writer.value(.array(readings))
        return RawRow(station: Array(message.envelope.station.utf8), sensor: Array(sensor.utf8), t: times.max() ?? 0, n: times.count, data: writer.bytes)
    }
}

/// The readings a store holds (every row's count; the view `samples` would show each).
private func sampleReadingCount(_ store: TrainingStore) throws -> Int {
    try store.read { db in try Int.fetchOne(db, sql: "SELECT coalesce(sum(n), 0) FROM sample_batches") ?? 0 }
}

/// vbt: enqueue 5,000 messages, time flush(); readings per second of flush time.
private func vbtSampleRate(_ messages: [BusMessage], expectedRows: Int, batch: Int, folder: URL, name: String) throws -> Double {
    let store = try freshStore(folder, name)
    let ingestor = Ingestor(store: store, logger: benchLogger())
    var elapsed = 0.0
    var index = 0
    while index < messages.count {
        let end = min(messages.count, index + batch)
        for message in messages[index..<end] { ingestor.enqueue(message) }
        let start = monotonicSeconds()
        try ingestor.flush()
        elapsed += monotonicSeconds() - start
        index = end
    }
    let rows = ingestor.counters.sampleRows
    let inFile = try sampleReadingCount(store)
    precondition(
        rows == expectedRows && inFile == expectedRows && ingestor.counters.duplicates == 0,
        "vbt stored \(rows) (\(inFile) in the file) of \(expectedRows) readings")
    return Double(rows) / elapsed
}

/// Raw SQLite C API on an identically opened and migrated file: one prepared
/// INSERT, BEGIN IMMEDIATE ... COMMIT per 5,000 messages' rows; readings per second.
private func rawSampleRate(_ rows: [RawRow], expectedRows: Int, batch: Int, folder: URL, name: String) throws -> Double {
    let store = try freshStore(folder, name)
    var elapsed = 0.0
    try store.db.writeWithoutTransaction { db in
        guard let connection = db.sqliteConnection else { fatalError("no SQLite connection") }
        func check(_ code: Int32, _ what: String) {
            if code != SQLITE_OK && code != SQLITE_DONE { fatalError("raw sqlite \(what): \(String(cString: sqlite3_errmsg(connection)))") }
        }
        var statement: OpaquePointer?
        check(
            sqlite3_prepare_v2(connection, "INSERT INTO sample_batches (id, station, sensor, t, n, data) VALUES (?, ?, ?, ?, ?, ?)", -1, &statement, nil),
            "prepare")
        defer { sqlite3_finalize(statement) }
        var index = 0
        var readingsEnd: Int64 = 0
        while index < rows.count {
            let end = min(rows.count, index + batch)
            let start = monotonicSeconds()
            check(sqlite3_exec(connection, "BEGIN IMMEDIATE", nil, nil, nil), "begin")
            for row in rows[index..<end] {
                readingsEnd += Int64(row.n)
                sqlite3_bind_int64(statement, 1, readingsEnd)
                // SQLITE_STATIC (nil): the bytes outlive the step.
                _ = row.station.withUnsafeBufferPointer {
                    sqlite3_bind_text(statement, 2, $0.baseAddress.map(UnsafeRawPointer.init)?.assumingMemoryBound(to: CChar.self), Int32($0.count), nil)
                }
                _ = row.sensor.withUnsafeBufferPointer {
                    sqlite3_bind_text(statement, 3, $0.baseAddress.map(UnsafeRawPointer.init)?.assumingMemoryBound(to: CChar.self), Int32($0.count), nil)
                }
                sqlite3_bind_double(statement, 4, row.t)
                sqlite3_bind_int64(statement, 5, Int64(row.n))
                _ = row.data.withUnsafeBufferPointer {
                    sqlite3_bind_text(statement, 6, $0.baseAddress.map(UnsafeRawPointer.init)?.assumingMemoryBound(to: CChar.self), Int32($0.count), nil)
                }
                check(sqlite3_step(statement), "step")
                sqlite3_reset(statement)
            }
            check(sqlite3_exec(connection, "COMMIT", nil, nil, nil), "commit")
            elapsed += monotonicSeconds() - start
            index = end
        }
    }
    let inFile = try sampleReadingCount(store)
    precondition(inFile == expectedRows, "raw stored \(inFile) of \(expectedRows) readings")
    return Double(expectedRows) / elapsed
}

// MARK: Query history

private struct HistoryCounts {
    var athletes = 0, sessions = 0, sets = 0, reps = 0, profiles = 0, weighIns = 0
}

/// A year of a 40-athlete gym: 125 sessions per athlete (2-3 a week) of 4 sets
/// of 5 reps on 8 racks, a profile refit after every set, weekly weigh-ins.
/// Written directly with SQL in one transaction, ending now (so stats.week has a week of data).
private func fillHistory(_ store: TrainingStore, now: Double) throws -> HistoryCounts {
    let exercises = ["squat", "bench", "deadlift", "overhead-press", "front-squat", "hip-thrust", "bent-over-row"]
    let mvt = ["squat": 0.30, "bench": 0.17, "deadlift": 0.15, "overhead-press": 0.19, "front-squat": 0.33, "hip-thrust": 0.25, "bent-over-row": 0.40]
    let rom = ["squat": 600.0, "bench": 450, "deadlift": 550, "overhead-press": 500, "front-squat": 580, "hip-thrust": 300, "bent-over-row": 400]
    var random = BenchRandom(seed: 2024)
    var counts = HistoryCounts()
    try store.write { db in
        let athlete = try db.makeStatement(
            sql: "INSERT INTO athletes (id, name, sex, birth_year, height_cm, goal_weight_kg, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?)")
        let weighIn = try db.makeStatement(sql: "INSERT INTO weigh_ins (athlete, ts, weight_kg) VALUES (?, ?, ?)")
        let session = try db.makeStatement(sql: "INSERT INTO sessions (station, athlete, started_ts, ended_ts) VALUES (?, ?, ?, ?)")
        let set = try db.makeStatement(
            sql: """
                INSERT INTO sets (id, session, station, athlete, exercise, load_kg, started_ts, ended_ts, reps, reason, best_mean_velocity_mps, velocity_loss_pct)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let rep = try db.makeStatement(
            sql: """
                INSERT INTO reps (id, set_id, station, athlete, exercise, load_kg, idx, mean_velocity_mps, peak_velocity_mps,
                    mean_propulsive_velocity_mps, rom_mm, concentric_s, time_to_peak_s, velocity_loss_pct, mean_power_w, zone,
                    sensor, t_end, detector, src, seq, ts)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let profile = try db.makeStatement(
            sql: """
                INSERT INTO profiles (src, seq, station, athlete, exercise, ts, intercept_mps, slope_mps_per_kg, r2, mvt_mps, e1rm_kg)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let yearStart = now - 365 * 86_400
        var repSeq: [String: Int64] = [:], profileSeq: [String: Int64] = [:]
        for a in 1...40 {
            let id = String(format: "athlete-%02d", a)
            let bodyWeight = random.uniform(55, 110)
            try athlete.execute(arguments: [
                id, "Athlete \(a)", ["f", "m", "x"][a % 3], 1970 + a, random.uniform(155, 200), bodyWeight - 3, yearStart - 86_400,
            ])
            counts.athletes += 1
            for week in 0..<52 {
                try weighIn.execute(arguments: [id, yearStart + Double(week) * 7 * 86_400 + 8 * 3_600, bodyWeight + random.uniform(-1.5, 1.5)])
                counts.weighIns += 1
            }
            // Each athlete's four lifts and starting 1RMs.
            let lifts = (0..<4).map { exercises[(a + $0 * 2) % exercises.count] }
            let oneRM = lifts.map { bodyWeight * ($0 == "deadlift" ? 1.8 : $0 == "squat" || $0 == "hip-thrust" ? 1.5 : 1.0) * random.uniform(0.8, 1.2) }
            for s in 0..<125 {
                let station = String(format: "rack-%02d", random.int(1...8))
                // Spread over the year, the last one within the last day.
                let started = yearStart + (Double(s) + 1) * (365.0 / 125.0) * 86_400 - random.uniform(0.2, 0.9) * 86_400
                try session.execute(arguments: [station, id, started, started + 3_600])
                let sessionId = db.lastInsertedRowID
                counts.sessions += 1
                let progress = 1 + 0.1 * Double(s) / 125
                for k in 0..<4 {
                    let exercise = lifts[(s + k) % 4]
                    let load = (oneRM[(s + k) % 4] * progress * random.uniform(0.6, 0.85) / 2.5).rounded() * 2.5
                    let setStart = started + Double(k) * 600
                    let setId = "\(station)-\(Int64(setStart * 1e6))"
                    let best = max(mvt[exercise]! + 0.05, 1.1 - 0.9 * load / (oneRM[(s + k) % 4] * progress) + random.uniform(-0.05, 0.05))
                    var velocities: [Double] = []
                    for r in 1...5 { velocities.append(best * (1 - 0.04 * Double(r - 1)) + random.uniform(-0.02, 0.02)) }
                    let loss = (1 - velocities.last! / velocities.max()!) * 100
                    try set.execute(arguments: [setId, sessionId, station, id, exercise, load, setStart, setStart + 40, 5, "idle", velocities.max()!, loss])
                    counts.sets += 1
                    let detector = "rep-detector-bench0001"
                    let src = "\(detector)/rep.\(station)"
                    for (r, velocity) in velocities.enumerated() {
                        let tEnd = setStart + 3 + Double(r) * 4
                        repSeq[src, default: 0] += 1
                        try rep.execute(arguments: [
                            "\(station)-\(Int64(tEnd * 1e6))", setId, station, id, exercise, load, r + 1, velocity, velocity * 1.8,
                            velocity * 1.05, rom[exercise]! + random.uniform(-20, 20), rom[exercise]! / 1000 / velocity, 0.4 / velocity,
                            (1 - velocity / velocities[0...r].max()!) * 100, load * 9.81 * velocity, velocity > 0.75 ? "speed-strength" : "strength",
                            "imu", tEnd, detector, src, repSeq[src]!, tEnd + 0.01,
                        ])
                        counts.reps += 1
                    }
                    let profileSrc = "\(detector)/profile.\(station)"
                    profileSeq[profileSrc, default: 0] += 1
                    let slope = -random.uniform(0.004, 0.012)
                    let intercept = best - slope * load
                    try profile.execute(arguments: [
                        profileSrc, profileSeq[profileSrc]!, station, id, exercise, setStart + 45, intercept, slope,
                        random.uniform(0.85, 0.99), mvt[exercise]!, (mvt[exercise]! - intercept) / slope,
                    ])
                    counts.profiles += 1
                }
            }
        }
    }
    return counts
}

private struct QueryCase {
    var label: String
    var request: Data
}

private func request(_ query: String, _ args: String) -> Data {
    Data("{\"id\":\"bench\",\"query\":\"\(query)\",\"args\":\(args)}".utf8)
}

// MARK: Report

func storeReport(_ options: StoreBenchOptions) throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-bench-store-\(getpid())")
    try? FileManager.default.removeItem(at: folder)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let started = monotonicSeconds()

    print("")
    print("store: SQLite \(String(cString: sqlite3_libversion())) via GRDB, WAL, synchronous=NORMAL, fresh temp file per run (\(folder.path))")
    print("  raw readings persisted, \(options.readings) readings/run in \(options.readingsPerMessage)-reading sample messages,")
    print(
        "  one transaction per \(options.batchMessages) messages (\(options.batchMessages * options.readingsPerMessage) readings): vbt a row per station's sensor within a second, raw a row per message; \(options.runs) runs, medians, flush/commit time only"
    )
    print("                                      vbt (Ingestor.flush)   raw SQLite C API   vbt / raw   aim")
    var rates: [String: Double] = [:]
    for imu in options.sensors.map({ $0 == "imu" }) {
        let messages = try sampleMessages(imu: imu, readings: options.readings, perMessage: options.readingsPerMessage)
        let rows = rawRows(messages)
        let expected = rows.reduce(0) { $0 + $1.n }
        precondition(expected == options.readings)
        var vbt: [Double] = [], raw: [Double] = []
        for run in 0..<options.runs {
            // Alternate the order so neither side always runs on a warmer page cache.
            if run % 2 == 0 {
                vbt.append(try vbtSampleRate(messages, expectedRows: expected, batch: options.batchMessages, folder: folder, name: "vbt-\(imu)-\(run).sqlite"))
                raw.append(try rawSampleRate(rows, expectedRows: expected, batch: options.batchMessages, folder: folder, name: "raw-\(imu)-\(run).sqlite"))
            } else {
                raw.append(try rawSampleRate(rows, expectedRows: expected, batch: options.batchMessages, folder: folder, name: "raw-\(imu)-\(run).sqlite"))
                vbt.append(try vbtSampleRate(messages, expectedRows: expected, batch: options.batchMessages, folder: folder, name: "vbt-\(imu)-\(run).sqlite"))
            }
            for side in ["vbt", "raw"] {
                for suffix in ["", "-wal", "-shm"] {
                    try? FileManager.default.removeItem(at: folder.appendingPathComponent("\(side)-\(imu)-\(run).sqlite\(suffix)"))
                }
            }
        }
        let bytes = rows.reduce(0) { $0 + $1.data.count } / max(1, expected)
        let label = imu ? "  bar IMU readings (~\(bytes) B JSON each)" : "  laser readings (~\(bytes) B JSON each)"
        rates[imu ? "imu" : "distance"] = storeMedian(vbt)
        print(
            pad(label, 38) + pad(storeRate(storeMedian(vbt)), 23) + pad(storeRate(storeMedian(raw)), 19)
                + pad(String(format: "%.2f", storeMedian(vbt) / storeMedian(raw)), 12) + ">= 100 k/s " + (storeMedian(vbt) >= 100_000 ? "(met)" : "(NOT met)"))
        print("      runs vbt: \(vbt.map(storeRate).joined(separator: ", "));  raw: \(raw.map(storeRate).joined(separator: ", "))")
    }

    // Queries.
    let store = try freshStore(folder, "history.sqlite")
    let now = wallClockSeconds()
    let fillStart = monotonicSeconds()
    let counts = try fillHistory(store, now: now)
    let fillS = monotonicSeconds() - fillStart
    let service = QueryService(store: store)
    let one = "athlete-07"
    let cases = [
        QueryCase(label: "athlete.list (40 athletes + totals)", request: request("athlete.list", "{}")),
        QueryCase(label: "history (one athlete, limit 20)", request: request("history", "{\"athlete\":\"\(one)\",\"limit\":20}")),
        QueryCase(label: "progress (one athlete)", request: request("progress", "{\"athlete\":\"\(one)\"}")),
        QueryCase(label: "stats.week (one athlete)", request: request("stats.week", "{\"athlete\":\"\(one)\",\"now\":\(now)}")),
        QueryCase(label: "stats.week (whole gym)", request: request("stats.week", "{\"now\":\(now)}")),
        QueryCase(label: "export.page (reps, 5000 rows)", request: request("export.page", "{\"table\":\"reps\",\"limit\":5000}")),
    ]
    print("")
    print("  queries through QueryService.handle (request JSON -> reply JSON), \(options.queryRuns) calls each after 3 warm-ups;")
    print(
        "  history of \(counts.athletes) athletes over a year: \(counts.sessions) sessions, \(counts.sets) sets, \(counts.reps) reps,"
            + " \(counts.profiles) profiles, \(counts.weighIns) weigh-ins (filled in " + String(format: "%.1f s)", fillS))
    print("                                      median      p99         reply")
    for query in cases {
        // Check once that the reply is a success with the expected shape.
        let reply = service.handle(query.request)
        guard let object = try JSONSerialization.jsonObject(with: reply) as? [String: Any], (object["ok"] as? NSNumber)?.boolValue == true else {
            fatalError("\(query.label): \(String(decoding: reply, as: UTF8.self).prefix(300))")
        }
        if let result = object["result"] as? [Any] { precondition(!result.isEmpty, "\(query.label): empty result") }
        if let page = object["result"] as? [String: Any], let pageRows = page["rows"] as? [Any] { precondition(pageRows.count == 5_000) }
        if let week = object["result"] as? [String: Any], let totals = week["totals"] as? [String: Any] {
            precondition(((totals["reps"] as? NSNumber)?.intValue ?? 0) > 0, "\(query.label): empty week")
        }
        for _ in 0..<2 { _ = service.handle(query.request) }
        var times: [Double] = []
        var replyBytes = 0
        for _ in 0..<options.queryRuns {
            let start = monotonicSeconds()
            replyBytes = service.handle(query.request).count
            times.append((monotonicSeconds() - start) * 1e3)
        }
        print(
            pad("  " + query.label, 38) + pad(String(format: "%.2f ms", storeMedian(times)), 12)
                + pad(String(format: "%.2f ms", storePercentile(times, 99)), 12)
                + (replyBytes >= 10_240 ? "\(replyBytes / 1024) KB" : "\(replyBytes) B"))
    }
    print(String(format: "  (p99 is nearest-rank over %d calls; store section took %.0f s)", options.queryRuns, monotonicSeconds() - started))
}
