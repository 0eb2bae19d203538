import GRDB

extension Schema {
    /// Readiness per session and exercise (docs/detection.md, "Readiness"), as the recorder
    /// computed it when one of the session's first loaded sets ended. A verdict of
    /// `too-little-history` has no score: no number stands in for a missing history.
    static func v11Readiness(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE readiness (
                    session INTEGER NOT NULL REFERENCES sessions(id),
                    exercise TEXT NOT NULL,
                    athlete TEXT NOT NULL,
                    ts REAL NOT NULL,
                    verdict TEXT NOT NULL CHECK (verdict IN ('better-than-usual', 'as-usual', 'below-usual', 'too-little-history')),
                    score_pct REAL,
                    typical_error_pct REAL,
                    swc_pct REAL,
                    standard_error_pct REAL,
                    within_noise INTEGER NOT NULL DEFAULT 0,
                    sets INTEGER NOT NULL,
                    past_sessions INTEGER NOT NULL,
                    intercept_mps REAL,
                    slope_mps_per_kg REAL,
                    CHECK ((verdict = 'too-little-history') = (score_pct IS NULL)),
                    PRIMARY KEY (session, exercise)
                );
                CREATE INDEX readiness_by_athlete ON readiness(athlete, ts);
                """)
    }
}
