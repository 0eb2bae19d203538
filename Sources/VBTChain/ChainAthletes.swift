import Foundation

// One athlete across the chain's gyms: HQ gives her a chain id (the code she carries from gym to
// gym) and links each gym's local athlete to it. Only the chain's admin writes or reads these
// tables: gyms' roles get no rights on them, and row-level security (no policy on chain_athletes,
// the gyms' own-gym policy on chain_links) would still confine a gym if rights were ever granted.

extension ChainSchema {
    /// Chain athletes and the links from (gym, the gym's athlete id) to them.
    static let c3ChainAthletes = """
        CREATE TABLE chain_athletes (
            chain_id TEXT PRIMARY KEY CHECK (chain_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
            name TEXT NOT NULL,
            created_ts TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE chain_links (
            gym TEXT NOT NULL REFERENCES gyms(gym),
            athlete TEXT NOT NULL,
            chain_id TEXT NOT NULL REFERENCES chain_athletes(chain_id),
            linked_ts TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (gym, athlete)
        );
        CREATE INDEX chain_links_by_chain_id ON chain_links (chain_id);
        ALTER TABLE chain_athletes ENABLE ROW LEVEL SECURITY;
        ALTER TABLE chain_links ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own_gym ON chain_links USING (current_user = 'vbt_gym_' || gym)
            WITH CHECK (current_user = 'vbt_gym_' || gym);
        """
}

/// A chain id: a letter or digit, then up to 63 letters, digits, `_`, `.` or `-`.
public func isValidChainId(_ id: String) -> Bool {
    id.range(of: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", options: .regularExpression) != nil
}

/// Writing and reading chain athletes, as the chain's admin.
public enum ChainAthletes {
    /// Links a gym's athlete to `chainId`, making the chain athlete (named `name`, or the gym's
    /// name for her) when new. Refuses a gym or athlete the chain store does not know, and an
    /// athlete linked to another chain id (unlink her first). Returns true when the link is new.
    @discardableResult
    public static func link(_ db: PostgresConnection, chainId: String, gym: String, athlete: String, name: String?) throws -> Bool {
        try db.transaction {
            let local = try db.execute("SELECT name FROM athletes WHERE gym = $1 AND id = $2", [gym, athlete]).rows
            guard let found = local.first else {
                throw PostgresError("gym \(gym) has sent no athlete \(athlete) to the chain store (vbt chain gyms lists what each sent)")
            }
            try db.execute(
                "INSERT INTO chain_athletes (chain_id, name) VALUES ($1, $2) ON CONFLICT (chain_id) DO NOTHING",
                [chainId, name ?? found[0] ?? athlete])
            if let name { try db.execute("UPDATE chain_athletes SET name = $2 WHERE chain_id = $1", [chainId, name]) }
            let existing =
                try db.execute(
                    "SELECT chain_id FROM chain_links WHERE gym = $1 AND athlete = $2 FOR UPDATE", [gym, athlete]
                ).rows.first?.first ?? nil
            if let existing {
                guard existing == chainId else {
                    throw PostgresError("\(gym)'s athlete \(athlete) is linked to \(existing): unlink her from it first")
                }
                return false
            }
            try db.execute("INSERT INTO chain_links (gym, athlete, chain_id) VALUES ($1, $2, $3)", [gym, athlete, chainId])
            return true
        }
    }

    /// Removes the link of a gym's athlete to `chainId`; the chain athlete stays. Throws when there is none.
    public static func unlink(_ db: PostgresConnection, chainId: String, gym: String, athlete: String) throws {
        let changed = try db.execute(
            "DELETE FROM chain_links WHERE gym = $1 AND athlete = $2 AND chain_id = $3", [gym, athlete, chainId]
        ).changed
        guard changed == 1 else { throw PostgresError("\(gym)'s athlete \(athlete) is not linked to \(chainId)") }
    }

    /// A chain athlete's page: her links, and from every gym she is linked at her sessions, sets
    /// (each with its fastest rep) and, per exercise and load, her best rep. Newest first. Nil
    /// when no chain athlete has this id. One statement, so the page is one snapshot.
    public static func page(_ db: PostgresConnection, chainId: String) throws -> ChainAthletePage? {
        let rows = try db.execute(
            """
            WITH links AS (
                SELECT l.gym, l.athlete, a.name FROM chain_links l
                LEFT JOIN athletes a ON a.gym = l.gym AND a.id = l.athlete
                WHERE l.chain_id = $1
            ), her_reps AS (
                SELECT r.* FROM reps r JOIN links l ON r.gym = l.gym AND r.athlete = l.athlete
            )
            SELECT json_build_object(
                'chain_id', c.chain_id,
                'name', c.name,
                'links', (SELECT coalesce(json_agg(json_build_object('gym', gym, 'athlete', athlete, 'name', name)
                    ORDER BY gym, athlete), '[]') FROM links),
                'sessions', (SELECT coalesce(json_agg(json_build_object('gym', s.gym, 'id', s.id, 'station', s.station,
                        'athlete', s.athlete, 'started_ts', s.started_ts, 'ended_ts', s.ended_ts,
                        'sets', (SELECT count(*) FROM sets t WHERE t.gym = s.gym AND t.session = s.id AND t.athlete = s.athlete))
                    ORDER BY s.started_ts DESC, s.gym, s.id), '[]')
                    FROM sessions s JOIN links l ON s.gym = l.gym AND s.athlete = l.athlete),
                'sets', (SELECT coalesce(json_agg(json_build_object('gym', t.gym, 'id', t.id, 'session', t.session,
                        'athlete', t.athlete, 'exercise', t.exercise, 'load_kg', t.load_kg, 'started_ts', t.started_ts,
                        'reps', t.reps, 'best_mean_velocity_mps', t.best_mean_velocity_mps,
                        'velocity_loss_pct', t.velocity_loss_pct,
                        'best_rep', (SELECT json_build_object('idx', r.idx, 'mean_velocity_mps', r.mean_velocity_mps,
                                'peak_velocity_mps', r.peak_velocity_mps)
                            FROM her_reps r WHERE r.gym = t.gym AND r.set_id = t.id
                            ORDER BY r.mean_velocity_mps DESC, r.idx LIMIT 1))
                    ORDER BY t.started_ts DESC, t.gym, t.id), '[]')
                    FROM sets t JOIN links l ON t.gym = l.gym AND t.athlete = l.athlete),
                'bests', (SELECT coalesce(json_agg(json_build_object('exercise', b.exercise, 'load_kg', b.load_kg,
                        'mean_velocity_mps', b.mean_velocity_mps, 'gym', b.gym, 'set_id', b.set_id, 'ts', b.ts)
                    ORDER BY b.exercise, b.load_kg), '[]')
                    FROM (SELECT DISTINCT ON (exercise, load_kg) exercise, load_kg, mean_velocity_mps, gym, set_id, ts
                        FROM her_reps WHERE exercise IS NOT NULL AND load_kg IS NOT NULL
                        ORDER BY exercise, load_kg, mean_velocity_mps DESC, ts DESC) b)
            )
            FROM chain_athletes c WHERE c.chain_id = $1
            """, [chainId]
        ).rows
        guard let text = rows.first?.first ?? nil else { return nil }
        return try JSONDecoder().decode(ChainAthletePage.self, from: Data(text.utf8))
    }
}

/// What HQ sees of one athlete across the chain (JSON keys as in the chain store's columns).
public struct ChainAthletePage: Codable, Sendable {
    public struct Link: Codable, Sendable {
        public let gym: String
        public let athlete: String
        /// Her name at that gym (nil when the gym has not sent the athlete).
        public let name: String?
    }

    public struct Session: Codable, Sendable {
        public let gym: String
        public let id: Int64
        public let station: String
        public let athlete: String
        public let startedTs: Double
        public let endedTs: Double
        public let sets: Int

        enum CodingKeys: String, CodingKey {
            case gym, id, station, athlete, startedTs = "started_ts", endedTs = "ended_ts", sets
        }
    }

    public struct Rep: Codable, Sendable {
        public let idx: Int
        public let meanVelocityMps: Double
        public let peakVelocityMps: Double

        enum CodingKeys: String, CodingKey {
            case idx, meanVelocityMps = "mean_velocity_mps", peakVelocityMps = "peak_velocity_mps"
        }
    }

    public struct TrainingSet: Codable, Sendable {
        public let gym: String
        public let id: String
        public let session: Int64
        public let athlete: String
        public let exercise: String?
        public let loadKg: Double?
        public let startedTs: Double
        public let reps: Int
        public let bestMeanVelocityMps: Double?
        public let velocityLossPct: Double?
        /// Her fastest rep in the set by mean velocity (nil when no rep reached the chain store).
        public let bestRep: Rep?

        enum CodingKeys: String, CodingKey {
            case gym, id, session, athlete, exercise, loadKg = "load_kg", startedTs = "started_ts", reps
            case bestMeanVelocityMps = "best_mean_velocity_mps", velocityLossPct = "velocity_loss_pct", bestRep = "best_rep"
        }
    }

    /// Her fastest rep at one exercise and load, wherever she did it.
    public struct Best: Codable, Sendable {
        public let exercise: String
        public let loadKg: Double
        public let meanVelocityMps: Double
        public let gym: String
        public let setId: String
        public let ts: Double

        enum CodingKeys: String, CodingKey {
            case exercise, loadKg = "load_kg", meanVelocityMps = "mean_velocity_mps", gym, setId = "set_id", ts
        }
    }

    public let chainId: String
    public let name: String
    public let links: [Link]
    public let sessions: [Session]
    public let sets: [TrainingSet]
    public let bests: [Best]

    enum CodingKeys: String, CodingKey {
        case chainId = "chain_id", name, links, sessions, sets, bests
    }
}
