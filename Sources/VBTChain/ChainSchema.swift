import Foundation

// The chain store's schema, as numbered migrations (the recorder's SQLite schema has the same
// rule): a migration, once released, never changes; a new need is a new migration. The table
// chain_schema holds one row per migration applied, so its highest version is the store's.

/// The chain store's migrations, oldest first, and the checks an uplink makes before it writes.
public enum ChainSchema {
    /// One migration: its number (1, 2, ...), its name, its SQL.
    public struct Migration: Sendable {
        public let version: Int
        public let name: String
        public let sql: String
    }

    /// Every migration this build knows, in order; the last is the version it writes.
    public static let migrations: [Migration] = [
        Migration(version: 1, name: "c1-core", sql: c1Core),
        Migration(version: 2, name: "c2-profiles-posture-alerts-plans", sql: c2ProfilesPostureAlertsPlans),
        Migration(version: 3, name: "c3-chain-athletes", sql: c3ChainAthletes),
        Migration(version: 4, name: "c4-erasures", sql: c4Erasures),
    ]

    /// The version this build writes.
    public static var current: Int { migrations.last?.version ?? 0 }

    /// A gym's role name: a prefix no ordinary role has, so a policy can tell gyms by their role.
    public static func role(ofGym gym: String) -> String { "vbt_gym_" + gym }

    /// A gym name: a lower-case letter, then up to 39 lower-case letters, digits or underscores
    /// (it becomes part of a role name and of a certificate's common name).
    public static func isValidGym(_ gym: String) -> Bool {
        gym.range(of: "^[a-z][a-z0-9_]{0,39}$", options: .regularExpression) != nil
    }

    /// Applies every migration the store lacks, each in its own transaction, under an advisory
    /// lock so two `vbt chain init` at once do not race. Returns the versions applied.
    /// Refuses a store newer than this build.
    @discardableResult
    public static func migrate(_ db: PostgresConnection) throws -> [Int] {
        try db.execute("SELECT pg_advisory_lock(727001)")
        defer { _ = try? db.execute("SELECT pg_advisory_unlock(727001)") }
        try db.execute(
            "CREATE TABLE IF NOT EXISTS chain_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ts TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        let have = try version(db)
        guard have <= current else { throw newer(have) }
        var applied: [Int] = []
        for migration in migrations where migration.version > have {
            try db.transaction {
                try db.execute(migration.sql)
                try db.execute("INSERT INTO chain_schema (version, name) VALUES ($1, $2)", [String(migration.version), migration.name])
            }
            applied.append(migration.version)
        }
        // Gyms added before a migration get its new tables too (their roles must still exist).
        if !applied.isEmpty, have > 0 {
            for row in try db.execute("SELECT gym FROM gyms ORDER BY gym").rows {
                if let gym = row[0] { try grant(db, gym: gym) }
            }
        }
        return applied
    }

    /// Lets a gym's role (which must exist) connect, read the schema and gyms, read, insert
    /// and update every replicated table and its cursors (never delete), where row-level
    /// security confines it to its own rows, and apply its erasures (chain_erase, which checks
    /// the gym). Run again after a migration adds tables.
    public static func grant(_ db: PostgresConnection, gym: String) throws {
        guard isValidGym(gym) else { throw PostgresError("not a gym name: \(gym)") }
        // The name is checked above (letters, digits, _), so it is safe inside the quotes.
        let role = role(ofGym: gym)
        let tables = (["cursors"] + ChainTable.all.map(\.name)).joined(separator: ", ")
        try db.execute(
            """
            DO $$ BEGIN
                EXECUTE format('GRANT CONNECT ON DATABASE %I TO "\(role)"', current_database());
            END $$;
            GRANT USAGE ON SCHEMA public TO "\(role)";
            GRANT SELECT ON chain_schema, gyms TO "\(role)";
            GRANT SELECT, INSERT, UPDATE ON \(tables) TO "\(role)";
            GRANT EXECUTE ON FUNCTION chain_erase(TEXT, TEXT, DOUBLE PRECISION, TEXT) TO "\(role)";
            """)
    }

    /// The store's version: 0 when no migration ran.
    public static func version(_ db: PostgresConnection) throws -> Int {
        let rows = try db.execute("SELECT coalesce(max(version), 0) FROM chain_schema").rows
        return Int(rows.first?.first.flatMap { $0 } ?? "0") ?? 0
    }

    /// What an uplink checks first: the store is at exactly the version this build writes. A newer
    /// store may have columns or rules this build does not fill, so it stops rather than guess.
    public static func check(_ db: PostgresConnection) throws {
        let have: Int
        do { have = try version(db) } catch let error as PostgresError where error.sqlState == "42P01" {
            throw PostgresError("the chain store has no schema: run `vbt chain init` as the chain's admin", permanent: true)
        }
        guard have <= current else { throw newer(have) }
        guard have == current else {
            throw PostgresError(
                "the chain store is at schema version \(have), this uplink writes \(current): run `vbt chain init` as the chain's admin",
                permanent: true)
        }
    }

    /// A gym's uplink connects as its gym's role: another role's rows are not its to write (row-level
    /// security would refuse every batch), so it stops at once saying which role it got.
    public static func checkRole(_ db: PostgresConnection, gym: String) throws {
        let user = try db.execute("SELECT current_user").rows.first?.first ?? nil
        guard user == role(ofGym: gym) else {
            throw PostgresError(
                "connected as role \(user ?? "?"), not \(role(ofGym: gym)): give --chain-user and the certificate of gym \(gym)",
                permanent: true)
        }
    }

    static func newer(_ have: Int) -> PostgresError {
        PostgresError(
            "the chain store is at schema version \(have), newer than this build knows (\(current)): upgrade vbt before it writes there",
            permanent: true)
    }

    /// Gyms, each gym's cursors, and the first replicated tables. Every replicated row carries its
    /// gym and the gym's own key, and row-level security lets a gym's role (vbt_gym_<gym>) see and
    /// write only rows of its gym; the admin owns the tables, so the policies do not bind it.
    static let c1Core = """
        CREATE TABLE gyms (
            gym TEXT PRIMARY KEY CHECK (gym ~ '^[a-z][a-z0-9_]{0,39}$'),
            added_ts TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE cursors (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            tbl TEXT NOT NULL,
            last_rowid BIGINT NOT NULL,
            updated_ts TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (gym, tbl)
        );
        CREATE TABLE athletes (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            id TEXT NOT NULL,
            name TEXT NOT NULL,
            sex TEXT,
            birth_year INTEGER,
            height_cm DOUBLE PRECISION,
            goal_weight_kg DOUBLE PRECISION,
            created_ts DOUBLE PRECISION NOT NULL,
            archived_ts DOUBLE PRECISION,
            PRIMARY KEY (gym, id)
        );
        CREATE TABLE sessions (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            id BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            started_ts DOUBLE PRECISION NOT NULL,
            ended_ts DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (gym, id)
        );
        CREATE INDEX sessions_by_athlete ON sessions (gym, athlete, started_ts);
        CREATE TABLE sets (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            id TEXT NOT NULL,
            session BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            exercise TEXT,
            load_kg DOUBLE PRECISION,
            started_ts DOUBLE PRECISION NOT NULL,
            ended_ts DOUBLE PRECISION,
            reps INTEGER NOT NULL,
            reason TEXT,
            best_mean_velocity_mps DOUBLE PRECISION,
            velocity_loss_pct DOUBLE PRECISION,
            rpe DOUBLE PRECISION,
            note TEXT,
            PRIMARY KEY (gym, id)
        );
        CREATE INDEX sets_by_athlete ON sets (gym, athlete, started_ts);
        CREATE TABLE reps (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            id TEXT NOT NULL,
            set_id TEXT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            exercise TEXT,
            load_kg DOUBLE PRECISION,
            idx INTEGER NOT NULL,
            mean_velocity_mps DOUBLE PRECISION NOT NULL,
            peak_velocity_mps DOUBLE PRECISION NOT NULL,
            mean_propulsive_velocity_mps DOUBLE PRECISION NOT NULL,
            rom_mm DOUBLE PRECISION NOT NULL,
            concentric_s DOUBLE PRECISION NOT NULL,
            time_to_peak_s DOUBLE PRECISION NOT NULL,
            velocity_loss_pct DOUBLE PRECISION NOT NULL,
            mean_power_w DOUBLE PRECISION,
            zone TEXT,
            sensor TEXT,
            t_end DOUBLE PRECISION NOT NULL,
            detector TEXT NOT NULL,
            src TEXT NOT NULL,
            seq BIGINT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            late_s DOUBLE PRECISION,
            PRIMARY KEY (gym, id)
        );
        CREATE INDEX reps_by_set ON reps (gym, set_id, idx);
        CREATE TABLE rejected (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            src TEXT NOT NULL,
            seq BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            reason TEXT NOT NULL,
            detail TEXT NOT NULL,
            rom_mm DOUBLE PRECISION NOT NULL,
            concentric_s DOUBLE PRECISION NOT NULL,
            mean_velocity_mps DOUBLE PRECISION NOT NULL,
            t_end DOUBLE PRECISION NOT NULL,
            detector TEXT NOT NULL,
            PRIMARY KEY (gym, src, seq)
        );
        DO $$
        DECLARE t TEXT;
        BEGIN
            FOREACH t IN ARRAY ARRAY['gyms', 'cursors', 'athletes', 'sessions', 'sets', 'reps', 'rejected'] LOOP
                EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
                EXECUTE format('CREATE POLICY own_gym ON %I USING (current_user = ''vbt_gym_'' || gym) '
                    || 'WITH CHECK (current_user = ''vbt_gym_'' || gym)', t);
            END LOOP;
        END $$;
        """

    /// Load-velocity profiles, posture changes, alerts and plans, under the same row-level security.
    static let c2ProfilesPostureAlertsPlans = """
        CREATE TABLE profiles (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            src TEXT NOT NULL,
            seq BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            exercise TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            intercept_mps DOUBLE PRECISION NOT NULL,
            slope_mps_per_kg DOUBLE PRECISION NOT NULL,
            r2 DOUBLE PRECISION NOT NULL,
            mvt_mps DOUBLE PRECISION NOT NULL,
            e1rm_kg DOUBLE PRECISION,
            PRIMARY KEY (gym, src, seq)
        );
        CREATE TABLE posture_changes (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            src TEXT NOT NULL,
            seq BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            t DOUBLE PRECISION NOT NULL,
            correct INTEGER NOT NULL,
            bad_for_s DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (gym, src, seq)
        );
        CREATE TABLE alerts (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            src TEXT NOT NULL,
            seq BIGINT NOT NULL,
            station TEXT NOT NULL,
            athlete TEXT,
            ts DOUBLE PRECISION NOT NULL,
            json TEXT NOT NULL,
            PRIMARY KEY (gym, src, seq)
        );
        CREATE TABLE plans (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            id TEXT NOT NULL,
            athlete TEXT,
            created_ts DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (gym, id)
        );
        CREATE TABLE plan_items (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            plan TEXT NOT NULL,
            position INTEGER NOT NULL,
            exercise TEXT NOT NULL,
            sets INTEGER NOT NULL,
            reps INTEGER NOT NULL,
            rest_s DOUBLE PRECISION NOT NULL,
            load_kg DOUBLE PRECISION,
            load_pct_e1rm DOUBLE PRECISION,
            loads_kg TEXT,
            load_unit TEXT,
            target_mean_velocity_mps DOUBLE PRECISION,
            PRIMARY KEY (gym, plan, position)
        );
        DO $$
        DECLARE t TEXT;
        BEGIN
            FOREACH t IN ARRAY ARRAY['profiles', 'posture_changes', 'alerts', 'plans', 'plan_items'] LOOP
                EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
                EXECUTE format('CREATE POLICY own_gym ON %I USING (current_user = ''vbt_gym_'' || gym) '
                    || 'WITH CHECK (current_user = ''vbt_gym_'' || gym)', t);
            END LOOP;
        END $$;
        """
}
