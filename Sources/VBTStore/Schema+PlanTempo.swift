import GRDB

extension Schema {
    /// A plan item's prescribed tempo ("3-1-X-0", `Tempo.text`; docs/detection.md, "Phases and
    /// tempo"), carried to the detector with the item's assignment. Items stored before it have none.
    static func v13PlanTempo(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE plan_items ADD COLUMN tempo TEXT CHECK (tempo IS NULL OR length(tempo) BETWEEN 7 AND 40)")
    }
}
