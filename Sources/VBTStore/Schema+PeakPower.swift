import GRDB

extension Schema {
    /// Each rep's peak power (`peak_power_w`, proto/rep.schema.json): NULL without a load and on
    /// every rep stored before. Stored as sent, unchecked, like the mean power beside it.
    static func v16PeakPower(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE reps ADD COLUMN peak_power_w REAL")
    }
}
