import GRDB

extension Schema {
    /// A plan item's load advice applied without asking (`!auto` in `vbt plan create`; docs/detection.md,
    /// "Load advice"). Items stored before it ask the coach, as they always did.
    static func v12LoadAdvice(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE plan_items ADD COLUMN auto_advice INTEGER NOT NULL DEFAULT 0 CHECK (auto_advice IN (0, 1))")
    }
}
