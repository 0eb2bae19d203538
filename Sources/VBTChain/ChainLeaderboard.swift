import Foundation

/// The chain's leaderboard: per exercise, each athlete's best rep across every gym, best first.
/// An athlete linked to a chain id is one entrant however many gyms she trains at (her best over
/// all of them); an athlete not linked is an entrant of her gym alone. A rep counts when it has an
/// exercise and a load and its athlete is known to the chain store (an athlete row or a link):
/// an erased athlete's pseudonym names nobody and is left out.
public enum ChainLeaderboard {
    /// One entrant's best rep at one exercise.
    public struct Entry: Codable, Sendable, Equatable {
        public let exercise: String
        /// 1 for the best at this exercise.
        public let rank: Int
        /// The chain id of a linked athlete, nil for one known at her gym only.
        public let chainId: String?
        /// HQ's name for a linked athlete, else her gym's.
        public let name: String
        /// Where the best rep was lifted, and by which of the gym's athletes.
        public let gym: String
        public let athlete: String
        public let loadKg: Double
        public let meanVelocityMps: Double
        public let setId: String
        public let ts: Double

        enum CodingKeys: String, CodingKey {
            case exercise, rank, chainId = "chain_id", name, gym, athlete, loadKg = "load_kg", meanVelocityMps = "mean_velocity_mps"
            case setId = "set_id", ts
        }
    }

    /// The best rep is the heaviest load lifted, and of those the fastest by mean velocity (then the
    /// earliest): what a lifter would call her best, comparable across athletes at one exercise.
    /// `limit` entrants per exercise; `exercise` nil for every exercise. One statement: one snapshot.
    public static func compute(_ db: PostgresConnection, exercise: String?, limit: Int) throws -> [Entry] {
        let rows = try db.execute(
            """
            WITH counted AS (
                SELECT r.exercise, r.gym, r.athlete, r.load_kg, r.mean_velocity_mps, r.set_id, r.ts, l.chain_id,
                    coalesce(l.chain_id, '') || chr(31) || CASE WHEN l.chain_id IS NULL THEN r.gym || chr(31) || r.athlete ELSE '' END AS entrant,
                    coalesce(c.name, a.name, r.athlete) AS name
                FROM reps r
                LEFT JOIN chain_links l ON l.gym = r.gym AND l.athlete = r.athlete
                LEFT JOIN chain_athletes c ON c.chain_id = l.chain_id
                LEFT JOIN athletes a ON a.gym = r.gym AND a.id = r.athlete
                WHERE r.athlete IS NOT NULL AND r.exercise IS NOT NULL AND r.load_kg IS NOT NULL
                    AND (l.chain_id IS NOT NULL OR a.id IS NOT NULL)
                    AND ($1::text IS NULL OR r.exercise = $1::text)
            ), best AS (
                SELECT DISTINCT ON (exercise, entrant) * FROM counted
                ORDER BY exercise, entrant, load_kg DESC, mean_velocity_mps DESC, ts, gym, set_id
            ), ranked AS (
                SELECT *, row_number() OVER (PARTITION BY exercise ORDER BY load_kg DESC, mean_velocity_mps DESC, ts, entrant) AS rank
                FROM best
            )
            SELECT coalesce(json_agg(json_build_object('exercise', exercise, 'rank', rank, 'chain_id', chain_id, 'name', name,
                    'gym', gym, 'athlete', athlete, 'load_kg', load_kg, 'mean_velocity_mps', mean_velocity_mps,
                    'set_id', set_id, 'ts', ts) ORDER BY exercise, rank), '[]')
            FROM ranked WHERE rank <= $2::int
            """, [exercise, String(limit)]
        ).rows
        let text = rows.first?.first.flatMap { $0 } ?? "[]"
        return try JSONDecoder().decode([Entry].self, from: Data(text.utf8))
    }
}
