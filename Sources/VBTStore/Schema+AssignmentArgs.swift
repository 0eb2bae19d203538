import GRDB

extension Schema {
    /// The whole command that made each assignment: its name (`athlete.assign`, `athlete.unassign`,
    /// `plan.assign`, `set.load`) and its arguments as JSON, so a detector that was down when it
    /// was published applies it exactly as the command would have (docs/programs/rep-detector.md).
    /// Rows stored before have neither.
    static func v14AssignmentArgs(_ db: Database) throws {
        try db.execute(
            sql: """
                ALTER TABLE assignments ADD COLUMN command TEXT;
                ALTER TABLE assignments ADD COLUMN args TEXT CHECK (args IS NULL OR json_valid(args));
                """)
    }
}
