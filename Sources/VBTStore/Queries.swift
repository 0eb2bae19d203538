import Foundation
import GRDB
import VBTQuery
import VBTWire

// What the store answers: athletes, catalogue, plans, history, progress,
// weekly statistics, exports. Every error a caller can fix is `.invalid` and
// says what to change.

extension TrainingStore {
    // MARK: Athletes

    /// Adds an athlete (and a first weigh-in when a weight is given).
    public func addAthlete(_ input: AthleteInput, now: Double = Date().timeIntervalSince1970) throws(StoreError) -> AthleteProfile {
        try Self.validateId(input.id, what: "athlete id")
        guard !input.name.trimmingCharacters(in: .whitespaces).isEmpty else { throw StoreError(.invalid, "the athlete's name is empty: give --name") }
        if let sex = input.sex, !["f", "m", "x"].contains(sex) { throw StoreError(.invalid, "sex must be f, m or x, not '\(sex)'") }
        if let year = input.birthYear, !(1900...2100).contains(year) { throw StoreError(.invalid, "birth year \(year) is not between 1900 and 2100") }
        if let height = input.heightCm, !(50...260).contains(height) { throw StoreError(.invalid, "height \(height) cm is not between 50 and 260") }
        if let goal = input.goalWeightKg, !(20...400).contains(goal) { throw StoreError(.invalid, "goal weight \(goal) kg is not between 20 and 400") }
        if let weight = input.weightKg { try Self.validateWeight(weight) }
        try write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [input.id]) == true {
                throw StoreError(.invalid, "athlete '\(input.id)' exists already: choose another id, or see vbt athlete show \(input.id)")
            }
            try db.execute(
                sql: "INSERT INTO athletes (id, name, sex, birth_year, height_cm, goal_weight_kg, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [input.id, input.name, input.sex, input.birthYear, input.heightCm, input.goalWeightKg, now])
            if let weight = input.weightKg {
                try db.execute(sql: "INSERT INTO weigh_ins (athlete, ts, weight_kg) VALUES (?, ?, ?)", arguments: [input.id, now, weight])
            }
        }
        return try athlete(input.id)
    }

    /// Records a body weight.
    public func weighIn(athlete id: String, weightKg: Double, ts: Double = Date().timeIntervalSince1970) throws(StoreError) -> AthleteProfile {
        try Self.validateWeight(weightKg)
        try write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [id]) == true else {
                throw StoreError(.invalid, "no athlete '\(id)': add them with vbt athlete add")
            }
            try db.execute(
                sql: "INSERT INTO weigh_ins (athlete, ts, weight_kg) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET weight_kg = excluded.weight_kg",
                arguments: [id, ts, weightKg])
        }
        return try athlete(id)
    }

    /// Every athlete, by id; archived ones only when asked for.
    public func athletes(includeArchived: Bool = false) throws(StoreError) -> [AthleteProfile] {
        try read { db in
            try Row.fetchAll(db, sql: Self.athleteSQL + (includeArchived ? "" : " WHERE a.archived_ts IS NULL") + " ORDER BY a.id")
                .map { Self.athlete($0, weighIns: []) }
        }
    }

    /// Changes an athlete's details: the fields given, and empties those named in `clear`.
    public func editAthlete(_ edit: AthleteEditArgs) throws(StoreError) -> AthleteProfile {
        if let name = edit.name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw StoreError(.invalid, "the name must not be empty") }
        if let sex = edit.sex, !["f", "m", "x"].contains(sex) { throw StoreError(.invalid, "sex must be f, m or x, not '\(sex)'") }
        if let year = edit.birthYear, !(1900...2100).contains(year) { throw StoreError(.invalid, "birth year \(year) is not between 1900 and 2100") }
        if let height = edit.heightCm, !(50...260).contains(height) { throw StoreError(.invalid, "height \(height) cm is not between 50 and 260") }
        if let goal = edit.goalWeightKg, !(20...400).contains(goal) { throw StoreError(.invalid, "goal weight \(goal) kg is not between 20 and 400") }
        let clearable = ["sex", "birth_year", "height_cm", "goal_weight_kg"]
        let clear = edit.clear ?? []
        if let unknown = clear.first(where: { !clearable.contains($0) }) {
            throw StoreError(.invalid, "\(unknown) cannot be cleared; clear takes \(clearable.joined(separator: ", "))")
        }
        var assignments: [(column: String, value: (any DatabaseValueConvertible)?)] = []
        if let name = edit.name { assignments.append(("name", name)) }
        if let sex = edit.sex { assignments.append(("sex", sex)) }
        if let year = edit.birthYear { assignments.append(("birth_year", year)) }
        if let height = edit.heightCm { assignments.append(("height_cm", height)) }
        if let goal = edit.goalWeightKg { assignments.append(("goal_weight_kg", goal)) }
        for column in clear where !assignments.contains(where: { $0.column == column }) { assignments.append((column, nil)) }
        guard !assignments.isEmpty else { throw StoreError(.invalid, "nothing to change: give a field to set or to clear") }
        try write { db in
            try Self.requireAthlete(edit.id, db)
            try db.execute(
                sql: "UPDATE athletes SET " + assignments.map { "\($0.column) = ?" }.joined(separator: ", ") + " WHERE id = ?",
                arguments: StatementArguments(assignments.map(\.value) + [edit.id]))
        }
        return try athlete(edit.id)
    }

    /// Archives an athlete (kept, with all their history, but left out of lists) or brings them back.
    public func archiveAthlete(_ id: String, archived: Bool, now: Double = Date().timeIntervalSince1970) throws(StoreError) -> AthleteProfile {
        try write { db in
            try Self.requireAthlete(id, db)
            try db.execute(sql: "UPDATE athletes SET archived_ts = ? WHERE id = ?", arguments: [archived ? now : nil, id])
        }
        return try athlete(id)
    }

    /// Erases an athlete's personal data (proto/query.md, `athlete.erase`): their details,
    /// weigh-ins and posture calibrations are deleted, their plans lose their owner, and every
    /// row of training history (sessions, sets, reps, rejections, posture changes, profiles,
    /// alerts, assignments) carries a random pseudonym instead of their id (alert texts too),
    /// so the gym's totals stay true without naming them. Cannot be undone.
    public func eraseAthlete(_ id: String, confirm: String, now: Double = Date().timeIntervalSince1970) throws(StoreError) -> EraseResult {
        guard confirm == id else { throw StoreError(.invalid, "to erase \(id), confirm with the same id (an erasure cannot be undone)") }
        let pseudonym = "erased-" + String(UInt64.random(in: .min ... .max), radix: 16)
        let rows = try write { db -> [String: Int] in
            try Self.requireAthlete(id, db)
            let name = try String.fetchOne(db, sql: "SELECT name FROM athletes WHERE id = ?", arguments: [id]) ?? id
            var rows: [String: Int] = [:]
            for table in ["sessions", "sets", "reps", "rejected", "posture_changes", "profiles", "assignments", "readiness"] {
                try db.execute(sql: "UPDATE \(table) SET athlete = ? WHERE athlete = ?", arguments: [pseudonym, id])
                rows[table] = db.changesCount
            }
            // An assignment's command arguments name them too.
            try db.execute(
                sql: "UPDATE assignments SET args = json_set(args, '$.athlete', ?) WHERE args IS NOT NULL AND json_extract(args, '$.athlete') = ?",
                arguments: [pseudonym, id])
            // An alert is stored as its message's JSON: its athlete and its words name them.
            var alerts = 0
            for row in try Row.fetchAll(db, sql: "SELECT src, seq, json FROM alerts WHERE athlete = ?", arguments: [id]) {
                let text: String = row["json"]
                guard var fields = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else { continue }
                fields["athlete"] = pseudonym
                if let message = fields["message"] as? String {
                    fields["message"] = message.replacingOccurrences(of: name, with: pseudonym).replacingOccurrences(of: id, with: pseudonym)
                }
                let rewritten = String(decoding: try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]), as: UTF8.self)
                try db.execute(
                    sql: "UPDATE alerts SET athlete = ?, json = ? WHERE src = ? AND seq = ?",
                    arguments: [pseudonym, rewritten, row["src"] as String, row["seq"] as Int64])
                alerts += 1
            }
            rows["alerts"] = alerts
            // A set's note is free text: it may name them too.
            try db.execute(
                sql: "UPDATE sets SET note = replace(replace(note, ?, ?), ?, ?) WHERE athlete = ? AND note IS NOT NULL",
                arguments: [name, pseudonym, id, pseudonym, pseudonym])
            try db.execute(sql: "DELETE FROM calibrations WHERE athlete = ?", arguments: [id])
            rows["calibrations"] = db.changesCount
            try db.execute(sql: "UPDATE plans SET athlete = NULL WHERE athlete = ?", arguments: [id])
            rows["plans"] = db.changesCount
            try db.execute(sql: "DELETE FROM weigh_ins WHERE athlete = ?", arguments: [id])
            rows["weigh_ins"] = db.changesCount
            try db.execute(sql: "DELETE FROM athletes WHERE id = ?", arguments: [id])
            rows["athletes"] = db.changesCount
            // The digest lets the chain store find her rows there too (Schema.v15ErasureDigest).
            try db.execute(
                sql: "INSERT INTO erasures (pseudonym, ts, athlete_sha256) VALUES (?, ?, ?)",
                arguments: [pseudonym, now, Schema.erasureDigest(pseudonym: pseudonym, athlete: id)])
            return rows
        }
        return EraseResult(pseudonym: pseudonym, rows: rows)
    }

    /// Attributes a set and its reps to another athlete, exercise or load (a set lifted before
    /// the station was assigned, or assigned to the wrong athlete).
    public func reassignSet(_ args: ReassignArgs) throws(StoreError) -> SetSummary {
        guard args.athlete != nil || args.exercise != nil || args.loadKg != nil else {
            throw StoreError(.invalid, "nothing to change: give the athlete, the exercise or the load")
        }
        if let load = args.loadKg, !(0...1_000).contains(load) { throw StoreError(.invalid, "load \(load) kg is not between 0 and 1000") }
        try write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM sets WHERE id = ?", arguments: [args.set]) == true else {
                throw StoreError(.invalid, "no set '\(args.set)': see vbt history")
            }
            if let athlete = args.athlete { try Self.requireAthlete(athlete, db) }
            if let exercise = args.exercise,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM exercises WHERE id = ?", arguments: [exercise]) != true
            {
                throw StoreError(.invalid, "no exercise '\(exercise)': see vbt exercise list")
            }
            for table in ["sets", "reps"] {
                let key = table == "sets" ? "id" : "set_id"
                if let athlete = args.athlete { try db.execute(sql: "UPDATE \(table) SET athlete = ? WHERE \(key) = ?", arguments: [athlete, args.set]) }
                if let exercise = args.exercise {
                    try db.execute(sql: "UPDATE \(table) SET exercise = ? WHERE \(key) = ?", arguments: [exercise, args.set])
                }
                if let load = args.loadKg { try db.execute(sql: "UPDATE \(table) SET load_kg = ? WHERE \(key) = ?", arguments: [load, args.set]) }
            }
        }
        guard let set = try history(athlete: nil, station: nil, exercise: nil, limit: 10_000).first(where: { $0.id == args.set }) else {
            throw StoreError(.other, "set \(args.set) vanished while being reassigned")
        }
        return set
    }

    /// Sets a stored set's RPE (1-10 in steps of 0.5) and note (at most 500 characters; an empty
    /// one is none); `clear` empties both first.
    public func annotateSet(_ args: AnnotateArgs) throws(StoreError) -> SetSummary {
        let clear = args.clear ?? false
        guard args.rpe != nil || args.note != nil || clear else { throw StoreError(.invalid, "nothing to change: give the RPE, a note, or clear") }
        if let rpe = args.rpe, !((1...10).contains(rpe) && (rpe * 2).rounded() == rpe * 2) {
            throw StoreError(.invalid, "RPE \(rpe) is not 1 to 10 in steps of 0.5 (e.g. 8 or 8.5)")
        }
        if let note = args.note, note.unicodeScalars.count > 500 {
            throw StoreError(.invalid, "the note has \(note.unicodeScalars.count) characters; at most 500")
        }
        try write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM sets WHERE id = ?", arguments: [args.set]) == true else {
                throw StoreError(.invalid, "no set '\(args.set)': see the set ids in vbt history --json")
            }
            if clear { try db.execute(sql: "UPDATE sets SET rpe = NULL, note = NULL WHERE id = ?", arguments: [args.set]) }
            if let rpe = args.rpe { try db.execute(sql: "UPDATE sets SET rpe = ? WHERE id = ?", arguments: [rpe, args.set]) }
            if let note = args.note { try db.execute(sql: "UPDATE sets SET note = ? WHERE id = ?", arguments: [note.isEmpty ? nil : note, args.set]) }
        }
        return try storedSet(args.set)
    }

    /// One stored set, as `history` has it.
    func storedSet(_ id: String) throws(StoreError) -> SetSummary {
        guard let set = try history(athlete: nil, station: nil, exercise: nil, limit: 10_000, id: id).first else {
            throw StoreError(.invalid, "no set '\(id)': see the set ids in vbt history --json")
        }
        return set
    }

    static func requireAthlete(_ id: String, _ db: Database) throws {
        guard try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [id]) == true else {
            throw StoreError(.invalid, "no athlete '\(id)': see vbt athlete list")
        }
    }

    /// One athlete with weigh-ins, BMI and training totals.
    public func athlete(_ id: String) throws(StoreError) -> AthleteProfile {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: Self.athleteSQL + " WHERE a.id = ?", arguments: [id]) else {
                throw StoreError(.invalid, "no athlete '\(id)': see vbt athlete list")
            }
            let weighIns = try Row.fetchAll(db, sql: "SELECT ts, weight_kg FROM weigh_ins WHERE athlete = ? ORDER BY ts", arguments: [id])
                .map { WeighIn(ts: $0["ts"], weightKg: $0["weight_kg"]) }
            return Self.athlete(row, weighIns: weighIns)
        }
    }

    /// Athletes with their latest weight and training totals, in one statement (the list is not N+1 queries).
    static let athleteSQL = """
        SELECT a.*,
               (SELECT weight_kg FROM weigh_ins w WHERE w.athlete = a.id ORDER BY ts DESC LIMIT 1) AS weight_kg,
               (SELECT count(*) FROM sessions WHERE athlete = a.id) AS sessions,
               (SELECT count(*) FROM sets WHERE athlete = a.id) AS sets,
               (SELECT count(*) FROM reps WHERE athlete = a.id) AS reps
        FROM athletes a
        """

    static func athlete(_ row: Row, weighIns: [WeighIn]) -> AthleteProfile {
        let height: Double? = row["height_cm"], weight: Double? = row["weight_kg"]
        return AthleteProfile(
            id: row["id"], name: row["name"], sex: row["sex"], birthYear: row["birth_year"], heightCm: height,
            goalWeightKg: row["goal_weight_kg"], weightKg: weight, bmi: AthleteProfile.bmi(weightKg: weight, heightCm: height),
            weighIns: weighIns, sessions: row["sessions"], sets: row["sets"], reps: row["reps"], archivedTs: row["archived_ts"])
    }

    static func validateId(_ id: String, what: String) throws(StoreError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_")
        guard (1...64).contains(id.count), id.lowercased() == id, id.allSatisfy({ allowed.contains($0) }) else {
            throw StoreError(.invalid, "\(what) '\(id)' must be 1-64 lower-case letters, digits, - or _ (e.g. ana-rossi)")
        }
    }

    static func validateWeight(_ kg: Double) throws(StoreError) {
        guard (20...400).contains(kg) else { throw StoreError(.invalid, "body weight \(kg) kg is not between 20 and 400") }
    }

    // MARK: Catalogue

    /// The exercise catalogue.
    public func exercises() throws(StoreError) -> [ExerciseRecord] {
        try read { db in try Row.fetchAll(db, sql: "SELECT * FROM exercises ORDER BY id").map(Self.exercise) }
    }

    /// One exercise.
    public func exercise(_ id: String) throws(StoreError) -> ExerciseRecord {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM exercises WHERE id = ?", arguments: [id]) else {
                throw StoreError(.invalid, "no exercise '\(id)': see vbt exercise list")
            }
            return Self.exercise(row)
        }
    }

    /// Adds an exercise to the catalogue: the id as an athlete's (lower-case letters, digits,
    /// - or _), ROM 50-1500 mm, MVT 0.05-1.5 m/s, rest 0-1800 s (default 120); an id in use is refused.
    public func addExercise(_ input: ExerciseInput) throws(StoreError) -> ExerciseRecord {
        try Self.validateId(input.id, what: "exercise id")
        let name = input.name.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { throw StoreError(.invalid, "the exercise's name is empty: give --name") }
        guard (50...1_500).contains(input.expectedRomMm) else {
            throw StoreError(.invalid, "ROM \(input.expectedRomMm) mm is not between 50 and 1500: give the bar's travel in a full rep, in mm")
        }
        guard (0.05...1.5).contains(input.mvtMps) else {
            throw StoreError(.invalid, "MVT \(input.mvtMps) m/s is not between 0.05 and 1.5: give the mean velocity of a 1RM rep")
        }
        let rest = input.defaultRestS ?? 120
        guard (0...1_800).contains(rest) else { throw StoreError(.invalid, "rest \(rest) s is not between 0 and 1800") }
        let description = input.description ?? ""
        guard description.unicodeScalars.count <= 500 else { throw StoreError(.invalid, "the description is longer than 500 characters") }
        try write { db in
            if let existing = try String.fetchOne(db, sql: "SELECT name FROM exercises WHERE id = ?", arguments: [input.id]) {
                throw StoreError(
                    .invalid, "exercise '\(input.id)' exists already (\(existing)): choose another id, or see vbt exercise show \(input.id)")
            }
            try db.execute(
                sql: "INSERT INTO exercises (id, name, description, expected_rom_mm, mvt_mps, default_rest_s) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [input.id, name, description, input.expectedRomMm, input.mvtMps, rest])
        }
        return try exercise(input.id)
    }

    static func exercise(_ row: Row) -> ExerciseRecord {
        ExerciseRecord(
            id: row["id"], name: row["name"], description: row["description"], expectedRomMm: row["expected_rom_mm"],
            mvtMps: row["mvt_mps"], defaultRestS: row["default_rest_s"])
    }

    // MARK: Plans

    /// Stores a plan after checking every item; errors name the item and what to change.
    /// An item without a rest gets its exercise's default rest.
    public func createPlan(_ given: Plan, now: Double = Date().timeIntervalSince1970) throws(StoreError) -> Plan {
        guard let id = given.id else { throw StoreError(.invalid, "a plan needs an id: lower-case letters, digits, - or _") }
        try Self.validateId(id, what: "plan id")
        var plan = given
        guard !plan.items.isEmpty else { throw StoreError(.invalid, "plan '\(id)' has no exercises: give at least one --item") }
        guard plan.items.count <= 30 else { throw StoreError(.invalid, "plan '\(id)' has \(plan.items.count) exercises; at most 30") }
        let catalogue = Dictionary(try exercises().map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for (index, item) in plan.items.enumerated() {
            let name = "item \(index + 1) (\(item.exercise))"
            guard let exercise = catalogue[item.exercise] else { throw StoreError(.invalid, "\(name): unknown exercise; see vbt exercise list") }
            guard (1...20).contains(item.sets) else { throw StoreError(.invalid, "\(name): \(item.sets) sets; give 1 to 20") }
            guard (1...100).contains(item.reps) else { throw StoreError(.invalid, "\(name): \(item.reps) reps; give 1 to 100") }
            let rest = item.restS ?? exercise.defaultRestS
            guard (0...1800).contains(rest) else { throw StoreError(.invalid, "\(name): rest \(rest) s; give 0 to 1800") }
            if let load = item.loadKg, !(0...600).contains(load) { throw StoreError(.invalid, "\(name): load \(load) kg; give 0 to 600") }
            if let loads = item.loadsKg {
                guard loads.count == item.sets else { throw StoreError(.invalid, "\(name): \(loads.count) loads for \(item.sets) sets; give one per set") }
                if let load = loads.first(where: { !(0...600).contains($0) }) { throw StoreError(.invalid, "\(name): load \(load) kg; give 0 to 600") }
                plan.items[index].loadKg = loads[0]
            }
            if let pct = item.loadPctE1rm {
                guard pct > 0, pct <= 120 else { throw StoreError(.invalid, "\(name): \(pct)% of e1RM; give more than 0 and at most 120") }
                guard item.loadKg == nil, item.loadsKg == nil else { throw StoreError(.invalid, "\(name): give the load in kg or as % of e1RM, not both") }
            }
            if let unit = item.loadUnit, !["kg", "lb"].contains(unit) { throw StoreError(.invalid, "\(name): load unit '\(unit)'; give kg or lb") }
            if plan.items[index].loadUnit == "kg" { plan.items[index].loadUnit = nil }
            if let target = item.targetMeanVelocityMps, !(target > 0 && target <= 3) {
                throw StoreError(.invalid, "\(name): velocity target \(target) m/s; give more than 0 and at most 3")
            }
            plan.items[index].restS = rest
        }
        try write { db in
            if let athlete = plan.athlete, try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [athlete]) != true {
                throw StoreError(.invalid, "plan '\(id)': no athlete '\(athlete)'; add them with vbt athlete add")
            }
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM plans WHERE id = ?", arguments: [id]) == true {
                throw StoreError(.invalid, "plan '\(id)' exists already: choose another id")
            }
            try db.execute(sql: "INSERT INTO plans (id, athlete, created_ts) VALUES (?, ?, ?)", arguments: [id, plan.athlete, now])
            for (position, item) in plan.items.enumerated() {
                try db.execute(
                    sql: """
                        INSERT INTO plan_items (plan, position, exercise, sets, reps, rest_s, load_kg, loads_kg, load_pct_e1rm, load_unit,
                            target_mean_velocity_mps, auto_advice, tempo)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        id, position + 1, item.exercise, item.sets, item.reps, item.restS, item.loadKg,
                        item.loadsKg.map { "[" + $0.map { "\($0)" }.joined(separator: ",") + "]" }, item.loadPctE1rm, item.loadUnit,
                        item.targetMeanVelocityMps, item.autoAdvice == true, item.tempo,
                    ])
            }
        }
        return try self.plan(id)
    }

    /// One plan.
    public func plan(_ id: String) throws(StoreError) -> Plan {
        try read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM plans WHERE id = ?", arguments: [id]) else {
                throw StoreError(.invalid, "no plan '\(id)': see vbt plan list")
            }
            let items = try Row.fetchAll(db, sql: "SELECT * FROM plan_items WHERE plan = ? ORDER BY position", arguments: [id]).map(Self.planItem)
            return Plan(id: row["id"], athlete: row["athlete"], items: items)
        }
    }

    /// Every plan.
    public func plans() throws(StoreError) -> [Plan] {
        try read { db in
            var items: [String: [PlanItem]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM plan_items ORDER BY plan, position") {
                items[row["plan"], default: []].append(Self.planItem(row))
            }
            return try Row.fetchAll(db, sql: "SELECT id, athlete FROM plans ORDER BY id").map {
                Plan(id: $0["id"], athlete: $0["athlete"], items: items[$0["id"]] ?? [])
            }
        }
    }

    /// A stored item; the columns of `v7-coach-data` are empty in plans stored before it.
    static func planItem(_ row: Row) -> PlanItem {
        let loads = (row["loads_kg"] as String?).flatMap { try? JSONDecoder().decode([Double].self, from: Data($0.utf8)) }
        var item = PlanItem(
            exercise: row["exercise"], sets: row["sets"], reps: row["reps"], restS: row["rest_s"], loadKg: row["load_kg"], loadsKg: loads,
            loadPctE1rm: row["load_pct_e1rm"], loadUnit: row["load_unit"], targetMeanVelocityMps: row["target_mean_velocity_mps"])
        if row["auto_advice"] as Bool? == true { item.autoAdvice = true }
        item.tempo = row["tempo"]
        return item
    }

    /// A station's latest assignment, if any.
    /// A station's latest assignment, or with `cmdId` the one that command made.
    public func assignment(station: String, cmdId: String? = nil) throws(StoreError) -> AssignmentRecord? {
        try read { db in
            let row =
                try cmdId.map {
                    try Row.fetchOne(
                        db, sql: "SELECT * FROM assignments WHERE station = ? AND cmd_id = ? ORDER BY ts DESC, id DESC LIMIT 1", arguments: [station, $0])
                }
                ?? Row.fetchOne(db, sql: "SELECT * FROM assignments WHERE station = ? ORDER BY ts DESC, id DESC LIMIT 1", arguments: [station])
            return row.map {
                AssignmentRecord(
                    station: $0["station"], athlete: $0["athlete"], exercise: $0["exercise"], loadKg: $0["load_kg"], plan: $0["plan"],
                    ts: $0["ts"], cmdId: $0["cmd_id"], command: $0["command"],
                    args: ($0["args"] as String?).flatMap { text in
                        if case .object(let object)? = try? JSONParser.parse(Array(text.utf8)) { object } else { nil }
                    })
            }
        }
    }

    // MARK: Calibrations and patterns (for the evaluator and the detectors)

    /// An athlete's latest posture calibration.
    public func calibration(athlete: String) throws(StoreError) -> StoredCalibration? {
        try read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM calibrations WHERE athlete = ? ORDER BY ts DESC LIMIT 1", arguments: [athlete]).map {
                StoredCalibration(athlete: $0["athlete"], ts: $0["ts"], station: $0["station"], json: $0["json"])
            }
        }
    }

    /// Stores (or replaces) a detector pattern.
    public func putPattern(_ pattern: StoredPattern) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: "INSERT INTO patterns (exercise, name, ts, json) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET ts = excluded.ts, json = excluded.json",
                arguments: [pattern.exercise, pattern.name, pattern.ts, pattern.json])
        }
    }

    /// The stored patterns, of one exercise or all.
    public func patterns(exercise: String?) throws(StoreError) -> [StoredPattern] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM patterns WHERE ?1 IS NULL OR exercise = ?1 ORDER BY exercise, name", arguments: [exercise]).map {
                StoredPattern(exercise: $0["exercise"], name: $0["name"], ts: $0["ts"], json: $0["json"])
            }
        }
    }

    // MARK: History, progress, statistics

    /// The latest sets, newest first, filtered by athlete, station and exercise.
    public func history(athlete: String?, station: String?, exercise: String?, limit: Int, id: String? = nil) throws(StoreError) -> [SetSummary] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM sets WHERE (?1 IS NULL OR athlete = ?1) AND (?2 IS NULL OR station = ?2) AND (?3 IS NULL OR exercise = ?3)
                      AND (?5 IS NULL OR id = ?5)
                    ORDER BY started_ts DESC LIMIT ?4
                    """, arguments: [athlete, station, exercise, max(1, min(limit, 10_000)), id]
            ).map {
                SetSummary(
                    id: $0["id"], session: $0["session"], station: $0["station"], athlete: $0["athlete"], exercise: $0["exercise"],
                    loadKg: $0["load_kg"], startedTs: $0["started_ts"], endedTs: $0["ended_ts"], reps: $0["reps"], reason: $0["reason"],
                    bestMeanVelocityMps: $0["best_mean_velocity_mps"], velocityLossPct: $0["velocity_loss_pct"], rpe: $0["rpe"], note: $0["note"])
            }
        }
    }

    /// Per exercise: best mean velocity per load ever, and e1RM per day from that day's reps
    /// (`E1RMEstimator.daily`); body weight over time.
    public func progress(athlete: String, exercise: String?, utcOffsetS: Int) throws(StoreError) -> ProgressReport {
        guard abs(utcOffsetS) <= 18 * 3_600 else { throw StoreError(.invalid, "utc_offset_s must be within +-18 h, not \(utcOffsetS)") }
        return try read { db in
            let exercises = try String.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT exercise FROM reps WHERE athlete = ?1 AND exercise IS NOT NULL AND (?2 IS NULL OR exercise = ?2) ORDER BY exercise
                    """, arguments: [athlete, exercise])
            var result: [ExerciseProgress] = []
            for name in exercises {
                let best = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT load_kg, max(mean_velocity_mps) AS best, count(*) AS reps FROM reps
                        WHERE athlete = ? AND exercise = ? AND load_kg IS NOT NULL GROUP BY load_kg ORDER BY load_kg
                        """, arguments: [athlete, name]
                ).map {
                    ExerciseProgress.BestAtLoad(loadKg: $0["load_kg"], bestMeanVelocityMps: $0["best"], reps: $0["reps"])
                }
                // e1RM per day from the stored reps (E1RMEstimator.daily), read at the exercise's MVT in
                // the catalogue (the generic lift's for an exercise without an entry).
                let mvt =
                    try Double.fetchOne(db, sql: "SELECT mvt_mps FROM exercises WHERE id = ?", arguments: [name])
                    ?? Double.fetchOne(db, sql: "SELECT mvt_mps FROM exercises WHERE id = 'generic'") ?? 0.30
                let reps = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT load_kg, mean_velocity_mps, ts FROM reps WHERE athlete = ? AND exercise = ? AND load_kg IS NOT NULL ORDER BY ts
                        """, arguments: [athlete, name]
                ).map { E1RMEstimator.Rep(loadKg: $0["load_kg"], meanVelocityMps: $0["mean_velocity_mps"], ts: $0["ts"]) }
                let e1rm = E1RMEstimator.daily(reps: reps, mvtMps: mvt, utcOffsetS: utcOffsetS)
                result.append(ExerciseProgress(exercise: name, bestByLoad: best, e1rm: e1rm))
            }
            let weights = try Row.fetchAll(db, sql: "SELECT ts, weight_kg FROM weigh_ins WHERE athlete = ? ORDER BY ts", arguments: [athlete])
                .map { WeighIn(ts: $0["ts"], weightKg: $0["weight_kg"]) }
            if exercises.isEmpty, weights.isEmpty,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM athletes WHERE id = ?", arguments: [athlete]) != true
            {
                throw StoreError(.invalid, "nothing recorded for athlete '\(athlete)': see vbt athlete list")
            }
            return ProgressReport(athlete: athlete, exercises: result, bodyWeight: weights)
        }
    }

    /// Per day for the 7 days ending today (in the asker's time zone): sets, reps, volume, time under tension.
    public func weekStats(athlete: String?, now: Double, utcOffsetS: Int) throws(StoreError) -> WeekStats {
        guard now > 0, now < 1e10 else { throw StoreError(.invalid, "now must be Unix seconds (0 to 1e10), not \(now)") }
        guard abs(utcOffsetS) <= 18 * 3_600 else { throw StoreError(.invalid, "utc_offset_s must be within +-18 h, not \(utcOffsetS)") }
        let offset = Double(utcOffsetS)
        let today = floor((now + offset) / 86_400)
        let start = (today - 6) * 86_400 - offset
        return try read { db in
            var days = (0..<7).map {
                DayStats(day: Self.day((today - 6 + Double($0)) * 86_400 - offset, offset: offset), sets: 0, reps: 0, volumeKg: 0, timeUnderTensionS: 0)
            }
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT CAST((started_ts + ?3) / 86400 AS INTEGER) AS day, count(*) AS sets FROM sets
                    WHERE started_ts >= ?1 AND (?2 IS NULL OR athlete = ?2) GROUP BY day
                    """, arguments: [start, athlete, offset])
            {
                let index = Int(row["day"] as Int64 - Int64(today)) + 6
                if days.indices.contains(index) { days[index].sets = row["sets"] }
            }
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT CAST((s.started_ts + ?3) / 86400 AS INTEGER) AS day, count(*) AS reps,
                           total(r.load_kg) AS volume, total(r.concentric_s) AS tut
                    FROM reps r JOIN sets s ON s.id = r.set_id
                    WHERE s.started_ts >= ?1 AND (?2 IS NULL OR s.athlete = ?2) GROUP BY day
                    """, arguments: [start, athlete, offset])
            {
                let index = Int(row["day"] as Int64 - Int64(today)) + 6
                guard days.indices.contains(index) else { continue }
                days[index].reps = row["reps"]
                days[index].volumeKg = row["volume"]
                days[index].timeUnderTensionS = row["tut"]
            }
            let most = try String.fetchOne(
                db,
                sql: """
                    SELECT s.exercise FROM sets s WHERE s.started_ts >= ?1 AND (?2 IS NULL OR s.athlete = ?2) AND s.exercise IS NOT NULL
                    GROUP BY s.exercise
                    ORDER BY count(*) DESC, (SELECT total(r.load_kg) FROM reps r JOIN sets t ON t.id = r.set_id
                                             WHERE t.exercise = s.exercise AND t.started_ts >= ?1 AND (?2 IS NULL OR t.athlete = ?2)) DESC, s.exercise
                    LIMIT 1
                    """, arguments: [start, athlete])
            let totals = DayStats(
                day: "total", sets: days.reduce(0) { $0 + $1.sets }, reps: days.reduce(0) { $0 + $1.reps },
                volumeKg: days.reduce(0) { $0 + $1.volumeKg }, timeUnderTensionS: days.reduce(0) { $0 + $1.timeUnderTensionS })
            return WeekStats(athlete: athlete, days: days, totals: totals, mostTrainedExercise: most)
        }
    }

    /// `YYYY-MM-DD` of a Unix time shifted by a UTC offset.
    static func day(_ ts: Double, offset: Double) -> String { DayStats.day(ts, offset: offset) }

    /// One athlete's stored readiness (docs/detection.md, "Readiness"), newest session first.
    public func readiness(athlete: String, exercise: String?, sinceTs: Double?, untilTs: Double?, limit: Int) throws(StoreError) -> [SessionReadiness] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT r.*, n.started_ts AS session_started_ts FROM readiness r JOIN sessions n ON n.id = r.session
                    WHERE r.athlete = ?1 AND (?2 IS NULL OR r.exercise = ?2) AND (?3 IS NULL OR n.started_ts >= ?3) AND (?4 IS NULL OR n.started_ts < ?4)
                    ORDER BY n.started_ts DESC, r.exercise LIMIT ?5
                    """, arguments: [athlete, exercise, sinceTs, untilTs, max(1, min(limit, 10_000))]
            ).map { row in
                let verdict = ReadinessVerdict(rawValue: row["verdict"]) ?? .tooLittleHistory
                let assessment = ReadinessAssessment(
                    verdict: verdict, scorePct: row["score_pct"], typicalErrorPct: row["typical_error_pct"], swcPct: row["swc_pct"],
                    standardErrorPct: row["standard_error_pct"], withinNoise: row["within_noise"], sets: row["sets"],
                    pastSessions: row["past_sessions"], interceptMps: row["intercept_mps"], slopeMpsPerKg: row["slope_mps_per_kg"])
                return SessionReadiness(
                    session: row["session"], exercise: row["exercise"], athlete: row["athlete"], sessionStartedTs: row["session_started_ts"],
                    ts: row["ts"], assessment: assessment)
            }
        }
    }

    // MARK: Export

    /// The tables an export may read, and whether they have an athlete column.
    public static let exportTables = TablePage.tables

    /// One page of a table in storage order, optionally one athlete's rows.
    public func page(table: String, athlete: String?, after: Int64?, limit: Int) throws(StoreError) -> TablePage {
        guard let hasAthlete = Self.exportTables[table] else {
            throw StoreError(.invalid, "no table '\(table)' to export; choose one of \(Self.exportTables.keys.sorted().joined(separator: ", "))")
        }
        let filter: String
        switch (athlete, table) {
        case (nil, _): filter = ""
        case (_, "athletes"): filter = "AND id = ?2"
        case (_, "plan_items"): filter = "AND plan IN (SELECT id FROM plans WHERE athlete = ?2)"
        case _ where hasAthlete: filter = "AND athlete = ?2"
        default: filter = ""
        }
        return try read { db in
            let columns = try db.columns(in: table).map(\.name)
            let list = columns.map { "\"\($0)\"" }.joined(separator: ", ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT rowid AS _rowid, \(list) FROM \(table) WHERE rowid > ?1 \(filter) ORDER BY rowid LIMIT ?3",
                arguments: [after ?? 0, athlete, max(1, min(limit, 10_000))])
            var cells: [[Cell]] = []
            cells.reserveCapacity(rows.count)
            for row in rows {
                // By position (column 0 is the rowid): a lookup by name per cell costs more than the read.
                cells.append(
                    (1...columns.count).map { index in
                        switch (row[index] as DatabaseValue).storage {
                        case .null: .null
                        case .int64(let value): .int(value)
                        case .double(let value): .real(value)
                        case .string(let value): .text(value)
                        case .blob(let data): .text(data.base64EncodedString())
                        }
                    })
            }
            let next: Int64? = rows.count < max(1, min(limit, 10_000)) ? nil : rows.last?["_rowid"]
            let names = Self.wireNames[table] ?? [:]
            return TablePage(table: table, columns: columns.map { names[$0] ?? $0 }, rows: cells, next: next)
        }
    }

    /// Exported columns named as on the bus (proto/rep.schema.json, set.schema.json), not
    /// as the tables name them: a spreadsheet's `rep_id` is the rep message's `rep_id`.
    static let wireNames: [String: [String: String]] = [
        "reps": ["id": "rep_id", "idx": "index"],
        "sets": ["id": "set_id"],
    ]

    /// Row counts of the main tables.
    public func rowCounts() throws(StoreError) -> [String: Int] {
        try read { db in try Self.rowCounts(db) }
    }

    static func rowCounts(_ db: Database) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in ["athletes", "sessions", "sets", "reps", "rejected", "profiles", "posture_changes", "alerts", "calibrations"] {
            counts[table] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0
        }
        // Raw readings may be hundreds of millions: counted by their numbers (a row's id is its
        // last reading's; rows are only ever deleted oldest first, so the numbers have no
        // holes), from the first row and the last, not by a scan (schema v8-sample-batches).
        counts["samples"] =
            try Int.fetchOne(
                db, sql: "SELECT coalesce(max(id) - (SELECT id - n FROM sample_batches ORDER BY id LIMIT 1), 0) FROM sample_batches") ?? 0
        return counts
    }

    /// The folder backups are written to: `backups/` beside the database.
    public var backupFolder: String {
        URL(fileURLWithPath: settings.path).deletingLastPathComponent().appendingPathComponent("backups").path
    }

    /// Copies the live database to `name` in the backup folder with SQLite's online backup
    /// (a consistent copy of everything stored so far; the recorder's writes wait meanwhile),
    /// checks the copy and counts its rows. A name is 1-64 of letters, digits, '.', '_', '-'
    /// (".sqlite" is added when it has no extension); an existing file is never replaced.
    public func backup(name: String) throws(StoreError) -> BackupResult {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard (1...64).contains(name.count), name.allSatisfy({ allowed.contains($0) }), !name.hasPrefix(".") else {
            throw StoreError(.invalid, "a backup's name is 1 to 64 of letters, digits, '.', '_' and '-' (e.g. gym-2026-11-26), not \(name.debugDescription)")
        }
        let file = name.contains(".") ? name : name + ".sqlite"
        let path = URL(fileURLWithPath: backupFolder).appendingPathComponent(file).path
        guard !FileManager.default.fileExists(atPath: path) else {
            throw StoreError(.invalid, "\(path) exists already: give another name (a backup is never replaced)")
        }
        do { try FileManager.default.createDirectory(atPath: backupFolder, withIntermediateDirectories: true) } catch {
            throw StoreError(.cannotOpen, "cannot create the backup folder \(backupFolder): \(error.localizedDescription)")
        }
        let ts = Date().timeIntervalSince1970
        do {
            let copy = try DatabaseQueue(path: path)
            try reopeningOnce { live in try live.backup(to: copy) }
            let (integrity, rows) = try copy.read { db -> (String, [String: Int]) in
                let integrity = try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "no answer"
                let copied = try TrainingStore.rowCounts(db)
                return (integrity, copied)
            }
            try copy.close()
            let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            guard integrity == "ok" else { throw StoreError(.corrupt, "the backup \(path) fails its integrity check: \(integrity)") }
            return BackupResult(path: path, bytes: bytes, integrity: integrity, rows: rows, ts: ts)
        } catch {
            throw StoreError.from(error, path: path)
        }
    }
}

// MARK: Session report

extension TrainingStore {
    /// One athlete's local day for `vbt report` (SessionReport): that day's sessions with their
    /// sets and reps, the attempts refused at the session's station while it ran (within a minute
    /// of its first and last set), and each exercise's e1RM that day with its daily estimates over
    /// the `weeks` before (`progress`, so the same numbers as every other page). Without a date,
    /// the day of the athlete's latest set.
    public func report(athlete: String, date: String?, utcOffsetS: Int, weeks: Int) throws(StoreError) -> SessionReport {
        guard abs(utcOffsetS) <= 18 * 3_600 else { throw StoreError(.invalid, "utc_offset_s must be within +-18 h, not \(utcOffsetS)") }
        guard (1...104).contains(weeks) else { throw StoreError(.invalid, "weeks must be 1 to 104, not \(weeks)") }
        let offset = Double(utcOffsetS)
        let found = try read { db -> (String?, String, [SessionReport.Session]) in
            let name = try String.fetchOne(db, sql: "SELECT name FROM athletes WHERE id = ?", arguments: [athlete])
            let day: String
            if let date {
                guard SessionReport.dayNumber(date) != nil else { throw StoreError(.invalid, "date must be YYYY-MM-DD, not \(date.debugDescription)") }
                day = date
            } else if let latest = try Double.fetchOne(db, sql: "SELECT max(started_ts) FROM sets WHERE athlete = ?", arguments: [athlete]) {
                day = DayStats.day(latest, offset: offset)
            } else {
                throw StoreError(.invalid, "no sets recorded for athlete '\(athlete)': see vbt athlete list and vbt history")
            }
            let start = Double(SessionReport.dayNumber(day) ?? 0) * 86_400 - offset
            // The phase and tempo columns come with the "v10-rep-phases" migration; before it, not measured.
            let columns = Set(try Row.fetchAll(db, sql: "PRAGMA table_info(reps)").map { $0["name"] as String })
            let phases = ["eccentric_s", "pause_bottom_s", "tempo", "tempo_met"].allSatisfy(columns.contains)
            let sets = try Row.fetchAll(
                db, sql: "SELECT * FROM sets WHERE athlete = ? AND started_ts >= ? AND started_ts < ? ORDER BY started_ts, id",
                arguments: [athlete, start, start + 86_400])
            var sessions: [SessionReport.Session] = []
            for row in sets {
                let id: String = row["id"]
                let reps = try Row.fetchAll(db, sql: "SELECT * FROM reps WHERE set_id = ? ORDER BY idx", arguments: [id]).map {
                    SessionReport.Rep(
                        index: $0["idx"], meanVelocityMps: $0["mean_velocity_mps"], peakVelocityMps: $0["peak_velocity_mps"], romMm: $0["rom_mm"],
                        concentricS: $0["concentric_s"], velocityLossPct: $0["velocity_loss_pct"], eccentricS: phases ? $0["eccentric_s"] : nil,
                        pauseBottomS: phases ? $0["pause_bottom_s"] : nil, tempo: phases ? $0["tempo"] : nil, tempoMet: phases ? $0["tempo_met"] : nil)
                }
                let set = SessionReport.Set(
                    id: id, exercise: row["exercise"], loadKg: row["load_kg"], startedTs: row["started_ts"], endedTs: row["ended_ts"], reason: row["reason"],
                    rpe: row["rpe"], note: row["note"], reps: reps)
                let session: Int64 = row["session"]
                if let index = sessions.firstIndex(where: { $0.id == session }) {
                    sessions[index].sets.append(set)
                } else {
                    let station: String = row["station"]
                    sessions.append(
                        SessionReport.Session(id: session, station: station, startedTs: set.startedTs, endedTs: set.startedTs, sets: [set], rejected: 0))
                }
            }
            // Readiness comes with the "v11-readiness" migration; before it, not measured.
            let readiness = try Bool.fetchOne(db, sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'readiness'") == true
            for index in sessions.indices {
                if readiness {
                    sessions[index].readiness = try Row.fetchAll(
                        db, sql: "SELECT * FROM readiness WHERE session = ? AND athlete = ? ORDER BY exercise", arguments: [sessions[index].id, athlete]
                    ).map {
                        let verdict = ReadinessVerdict(rawValue: $0["verdict"] as String) ?? .tooLittleHistory
                        return SessionReport.Readiness(
                            exercise: $0["exercise"],
                            assessment: ReadinessAssessment(
                                verdict: verdict, scorePct: $0["score_pct"], typicalErrorPct: $0["typical_error_pct"], swcPct: $0["swc_pct"],
                                standardErrorPct: $0["standard_error_pct"], withinNoise: $0["within_noise"], sets: $0["sets"],
                                pastSessions: $0["past_sessions"],
                                interceptMps: $0["intercept_mps"], slopeMpsPerKg: $0["slope_mps_per_kg"]))
                    }
                }
                // The span of the day's sets in it: a session that ran past midnight is reported by day.
                let sets = sessions[index].sets
                sessions[index].startedTs = sets.map(\.startedTs).min() ?? 0
                sessions[index].endedTs = sets.map { max($0.endedTs ?? $0.startedTs, $0.startedTs) }.max() ?? 0
                sessions[index].rejected =
                    try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM rejected WHERE athlete = ? AND station = ? AND t_end >= ? AND t_end <= ?",
                        arguments: [athlete, sessions[index].station, sessions[index].startedTs - 60, sessions[index].endedTs + 60]) ?? 0
            }
            return (name, day, sessions)
        }
        let (name, day, sessions) = found
        let trained = Set(sessions.flatMap(\.sets).compactMap(\.exercise))
        let progress = trained.isEmpty ? [] : try self.progress(athlete: athlete, exercise: nil, utcOffsetS: utcOffsetS).exercises
        let first = DayStats.day(Double((SessionReport.dayNumber(day) ?? 0) - weeks * 7 + 1) * 86_400, offset: 0)
        let exercises = progress.filter { trained.contains($0.exercise) }.map { e in
            SessionReport.Exercise(exercise: e.exercise, e1rm: e.e1rm.first { $0.day == day }, trend: e.e1rm.filter { $0.day >= first && $0.day <= day })
        }
        return SessionReport(athlete: athlete, name: name, date: day, utcOffsetS: utcOffsetS, weeks: weeks, sessions: sessions, exercises: exercises)
    }
}
