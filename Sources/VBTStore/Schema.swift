import GRDB
import VBTQuery

// The database schema, as numbered migrations. A migration, once released,
// never changes: a new need is a new migration, so every database ever
// written (by any earlier version of the recorder) migrates forward.

/// The schema's migrations, oldest first.
public enum Schema {
    /// The migration identifiers in order; the last is the current version.
    public static let versions = [
        "v1-core", "v2-posture-profiles-alerts", "v3-raw-samples", "v4-recovery", "v5-athlete-care", "v6-stations", "v7-coach-data",
        "v8-sample-batches", "v9-late-reps", "v10-rep-phases", "v11-readiness", "v12-load-advice",
        "v13-plan-tempo", "v14-assignment-args", "v15-erasure-digest", "v16-peak-power",
    ]

    /// The migrator that brings any earlier database to the current version.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(versions[0], migrate: v1Core)
        migrator.registerMigration(versions[1], migrate: v2PostureProfilesAlerts)
        migrator.registerMigration(versions[2], migrate: v3RawSamples)
        migrator.registerMigration(versions[3], migrate: v4Recovery)
        migrator.registerMigration(versions[4], migrate: v5AthleteCare)
        migrator.registerMigration(versions[5], migrate: v6Stations)
        migrator.registerMigration(versions[6], migrate: v7CoachData)
        migrator.registerMigration(versions[7], migrate: v8SampleBatches)
        migrator.registerMigration(versions[8], migrate: v9LateReps)
        migrator.registerMigration("v10-rep-phases", migrate: v10RepPhases)
        migrator.registerMigration("v11-readiness", migrate: v11Readiness)
        migrator.registerMigration("v12-load-advice", migrate: v12LoadAdvice)
        migrator.registerMigration("v13-plan-tempo", migrate: v13PlanTempo)
        migrator.registerMigration("v14-assignment-args", migrate: v14AssignmentArgs)
        migrator.registerMigration("v15-erasure-digest", migrate: v15ErasureDigest)
        migrator.registerMigration("v16-peak-power", migrate: v16PeakPower)
        return migrator
    }

    /// Athletes, catalogue, plans, assignments, sessions, sets, reps, rejections, stream progress.
    static func v1Core(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE athletes (
                    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
                    name TEXT NOT NULL,
                    sex TEXT CHECK (sex IN ('f', 'm', 'x')),
                    birth_year INTEGER CHECK (birth_year BETWEEN 1900 AND 2100),
                    height_cm REAL CHECK (height_cm BETWEEN 50 AND 260),
                    goal_weight_kg REAL CHECK (goal_weight_kg BETWEEN 20 AND 400),
                    created_ts REAL NOT NULL
                );
                CREATE TABLE weigh_ins (
                    athlete TEXT NOT NULL REFERENCES athletes(id) ON DELETE CASCADE,
                    ts REAL NOT NULL,
                    weight_kg REAL NOT NULL CHECK (weight_kg BETWEEN 20 AND 400),
                    PRIMARY KEY (athlete, ts)
                );
                CREATE TABLE exercises (
                    id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    description TEXT NOT NULL,
                    expected_rom_mm REAL NOT NULL CHECK (expected_rom_mm > 0),
                    mvt_mps REAL NOT NULL CHECK (mvt_mps > 0),
                    default_rest_s REAL NOT NULL CHECK (default_rest_s >= 0)
                );
                CREATE TABLE plans (
                    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
                    athlete TEXT REFERENCES athletes(id) ON DELETE SET NULL,
                    created_ts REAL NOT NULL
                );
                CREATE TABLE plan_items (
                    plan TEXT NOT NULL REFERENCES plans(id) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    exercise TEXT NOT NULL REFERENCES exercises(id),
                    sets INTEGER NOT NULL CHECK (sets BETWEEN 1 AND 20),
                    reps INTEGER NOT NULL CHECK (reps BETWEEN 1 AND 100),
                    rest_s REAL NOT NULL CHECK (rest_s BETWEEN 0 AND 1800),
                    load_kg REAL CHECK (load_kg BETWEEN 0 AND 600),
                    PRIMARY KEY (plan, position)
                );
                CREATE TABLE assignments (
                    id INTEGER PRIMARY KEY,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    exercise TEXT,
                    load_kg REAL,
                    plan TEXT,
                    ts REAL NOT NULL,
                    cmd_id TEXT
                );
                CREATE INDEX assignments_by_station ON assignments(station, ts);
                CREATE TABLE sessions (
                    id INTEGER PRIMARY KEY,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    started_ts REAL NOT NULL,
                    ended_ts REAL NOT NULL
                );
                CREATE INDEX sessions_by_station ON sessions(station, athlete, ended_ts);
                CREATE INDEX sessions_by_athlete ON sessions(athlete, started_ts);
                CREATE TABLE sets (
                    id TEXT PRIMARY KEY NOT NULL,
                    session INTEGER NOT NULL REFERENCES sessions(id),
                    station TEXT NOT NULL,
                    athlete TEXT,
                    exercise TEXT,
                    load_kg REAL,
                    started_ts REAL NOT NULL,
                    ended_ts REAL,
                    reps INTEGER NOT NULL DEFAULT 0,
                    reason TEXT,
                    best_mean_velocity_mps REAL,
                    velocity_loss_pct REAL
                );
                CREATE INDEX sets_by_athlete ON sets(athlete, started_ts);
                CREATE INDEX sets_by_time ON sets(started_ts);
                CREATE TABLE reps (
                    id TEXT PRIMARY KEY NOT NULL,
                    set_id TEXT NOT NULL REFERENCES sets(id),
                    station TEXT NOT NULL,
                    athlete TEXT,
                    exercise TEXT,
                    load_kg REAL,
                    idx INTEGER NOT NULL CHECK (idx >= 1),
                    mean_velocity_mps REAL NOT NULL,
                    peak_velocity_mps REAL NOT NULL,
                    mean_propulsive_velocity_mps REAL NOT NULL,
                    rom_mm REAL NOT NULL,
                    concentric_s REAL NOT NULL,
                    time_to_peak_s REAL NOT NULL,
                    velocity_loss_pct REAL NOT NULL,
                    mean_power_w REAL,
                    zone TEXT,
                    sensor TEXT,
                    t_end REAL NOT NULL,
                    detector TEXT NOT NULL,
                    src TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    ts REAL NOT NULL
                );
                CREATE INDEX reps_by_set ON reps(set_id, idx);
                CREATE INDEX reps_by_athlete ON reps(athlete, exercise, t_end);
                CREATE TABLE rejected (
                    src TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    reason TEXT NOT NULL,
                    detail TEXT NOT NULL,
                    rom_mm REAL NOT NULL,
                    concentric_s REAL NOT NULL,
                    mean_velocity_mps REAL NOT NULL,
                    t_end REAL NOT NULL,
                    detector TEXT NOT NULL,
                    PRIMARY KEY (src, seq)
                );
                CREATE TABLE sources (
                    src TEXT PRIMARY KEY NOT NULL,
                    topic TEXT NOT NULL,
                    last_seq INTEGER NOT NULL,
                    stored INTEGER NOT NULL,
                    gaps INTEGER NOT NULL,
                    missing INTEGER NOT NULL,
                    last_ts REAL NOT NULL
                );
                """)
        for exercise in ExerciseRecord.catalogue {
            try db.execute(
                sql: "INSERT INTO exercises (id, name, description, expected_rom_mm, mvt_mps, default_rest_s) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [exercise.id, exercise.name, exercise.description, exercise.expectedRomMm, exercise.mvtMps, exercise.defaultRestS])
        }
    }

    /// Calibrations, detector patterns, posture changes, load-velocity profiles, alerts.
    static func v2PostureProfilesAlerts(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE calibrations (
                    athlete TEXT NOT NULL,
                    ts REAL NOT NULL,
                    station TEXT NOT NULL,
                    json TEXT NOT NULL,
                    PRIMARY KEY (athlete, ts)
                );
                CREATE TABLE patterns (
                    exercise TEXT NOT NULL,
                    name TEXT NOT NULL,
                    ts REAL NOT NULL,
                    json TEXT NOT NULL,
                    PRIMARY KEY (exercise, name)
                );
                CREATE TABLE posture_changes (
                    src TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    t REAL NOT NULL,
                    correct INTEGER NOT NULL,
                    bad_for_s REAL NOT NULL,
                    PRIMARY KEY (src, seq)
                );
                CREATE TABLE profiles (
                    src TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    exercise TEXT NOT NULL,
                    ts REAL NOT NULL,
                    intercept_mps REAL NOT NULL,
                    slope_mps_per_kg REAL NOT NULL,
                    r2 REAL NOT NULL,
                    mvt_mps REAL NOT NULL,
                    e1rm_kg REAL,
                    PRIMARY KEY (src, seq)
                );
                CREATE INDEX profiles_by_athlete ON profiles(athlete, exercise, ts);
                CREATE TABLE alerts (
                    src TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    station TEXT NOT NULL,
                    athlete TEXT,
                    ts REAL NOT NULL,
                    json TEXT NOT NULL,
                    PRIMARY KEY (src, seq)
                );
                """)
    }

    /// Raw readings, one row each, kept for the retention period.
    static func v3RawSamples(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE samples (
                    id INTEGER PRIMARY KEY,
                    station TEXT NOT NULL,
                    sensor TEXT NOT NULL,
                    t REAL NOT NULL,
                    data TEXT NOT NULL
                );
                CREATE INDEX samples_by_time ON samples(t);
                """)
    }

    /// What a stream lacks and where to ask for it: the holes below each
    /// stream's last stored `seq` (filled from the producers' journals, or
    /// counted lost), the producer that answers for the stream (its
    /// heartbeat's station), and how many of its messages were lost for good.
    static func v4Recovery(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE sources ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE sources ADD COLUMN producer TEXT;
                CREATE TABLE source_holes (
                    src TEXT NOT NULL,
                    from_seq INTEGER NOT NULL,
                    to_seq INTEGER NOT NULL,
                    PRIMARY KEY (src, from_seq)
                );
                """)
    }

    /// Archived athletes (hidden from lists, their history kept), and a record of erasures:
    /// the pseudonym an erased athlete's training history carries and when, nothing else.
    static func v5AthleteCare(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE athletes ADD COLUMN archived_ts REAL;
                CREATE TABLE erasures (
                    pseudonym TEXT PRIMARY KEY NOT NULL,
                    ts REAL NOT NULL
                );
                """)
    }

    /// The station registry: registered stations and those seen on the bus (the stations of
    /// an existing history are seen ones, at the times of their sessions).
    static func v6Stations(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE stations (
                    name TEXT PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
                    label TEXT CHECK (label IS NULL OR length(label) BETWEEN 1 AND 100),
                    added_ts REAL,
                    first_seen_ts REAL,
                    last_seen_ts REAL
                );
                INSERT INTO stations (name, first_seen_ts, last_seen_ts)
                    SELECT station, min(started_ts), max(ended_ts) FROM sessions GROUP BY station;
                """)
    }

    /// A coach's data: a set's RPE and note, and plan items with a load as a percentage of the
    /// athlete's e1RM, one load per set, the unit the coach wrote loads in, and a mean-velocity
    /// target. All nullable: plans and sets stored before read as they were.
    static func v7CoachData(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE sets ADD COLUMN rpe REAL CHECK (rpe BETWEEN 1 AND 10);
                ALTER TABLE sets ADD COLUMN note TEXT CHECK (length(note) <= 500);
                ALTER TABLE plan_items ADD COLUMN load_pct_e1rm REAL CHECK (load_pct_e1rm > 0 AND load_pct_e1rm <= 120);
                ALTER TABLE plan_items ADD COLUMN loads_kg TEXT;
                ALTER TABLE plan_items ADD COLUMN load_unit TEXT CHECK (load_unit IN ('kg', 'lb'));
                ALTER TABLE plan_items ADD COLUMN target_mean_velocity_mps REAL CHECK (target_mean_velocity_mps > 0 AND target_mean_velocity_mps <= 3);
                """)
    }

    /// Raw readings stored as the bridge sent them: a row holds a sample message's
    /// `samples` array byte for byte, or the readings of several consecutive messages of one
    /// station's sensor, each verbatim (`Ingestor.SampleRows`), not one row per reading
    /// (at 1,000 stations, 150 k readings/s, a row and an index entry each would be most of the
    /// recorder's SQLite time). Rows are numbered by readings: a row's `id` is the number of
    /// its last reading since the table began, `n` how many it holds, so the readings of
    /// all rows are numbered `id - n + 1 ... id` without gaps, and counting them needs no
    /// scan. `t` is the row's latest reading's time (retention deletes by it).
    ///
    /// The view `samples` shows them one reading a row, with the columns the table of
    /// `v3-raw-samples` had (`id` the reading's number, `station`, `sensor`, `t`, `data`
    /// the reading's JSON), so a script or query written against it still reads the same.
    static func v8SampleBatches(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE sample_batches (
                    id INTEGER PRIMARY KEY,
                    station TEXT NOT NULL,
                    sensor TEXT NOT NULL,
                    t REAL NOT NULL,
                    n INTEGER NOT NULL CHECK (n >= 1),
                    data TEXT NOT NULL
                );
                INSERT INTO sample_batches (id, station, sensor, t, n, data)
                    SELECT id, station, sensor, t, 1, '[' || data || ']' FROM samples;
                DROP TABLE samples;
                CREATE INDEX sample_batches_by_time ON sample_batches(t);
                CREATE VIEW samples (id, station, sensor, t, data) AS
                    SELECT b.id - b.n + 1 + r.key, b.station, b.sensor, json_extract(r.value, '$.t'), r.value
                    FROM sample_batches AS b, json_each(b.data) AS r;
                """)
    }

    /// How late each rep was published (the rep's `late_s`: seconds from its completing reading to
    /// its publication, over 1 s), NULL for a live rep and for every rep stored before: a
    /// session's history can tell the reps a coach saw live from those that came after an outage.
    static func v9LateReps(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE reps ADD COLUMN late_s REAL CHECK (late_s IS NULL OR late_s >= 0)")
    }
}
