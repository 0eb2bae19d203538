import GRDB

extension Schema {
    /// The phases that led into each rep and its prescribed tempo (docs/detection.md, "Phases and
    /// tempo"), as the rep message carries them: NULL where the detector saw no descent, on a set's
    /// first rep for the pause at the top, without a tempo, and on every rep stored before.
    /// `tempo_met` is 1 or 0; `tempo_missed` names the phases that missed, comma-separated. The
    /// durations are stored as sent, unchecked: a rep is never refused for its phases.
    static func v10RepPhases(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE reps ADD COLUMN eccentric_s REAL;
                ALTER TABLE reps ADD COLUMN eccentric_mean_mps REAL;
                ALTER TABLE reps ADD COLUMN pause_bottom_s REAL;
                ALTER TABLE reps ADD COLUMN pause_top_s REAL;
                ALTER TABLE reps ADD COLUMN tempo TEXT;
                ALTER TABLE reps ADD COLUMN tempo_met INTEGER CHECK (tempo_met IS NULL OR tempo_met IN (0, 1));
                ALTER TABLE reps ADD COLUMN tempo_missed TEXT;
                """)
    }
}
