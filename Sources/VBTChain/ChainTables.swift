/// A table the uplink copies from a gym's SQLite store to the chain store. The columns have the
/// same names on both sides; the chain's table adds `gym` before them and keys rows by
/// (gym, the gym's own key).
public struct ChainTable: Sendable {
    /// How rows already sent are sent again so the chain follows the gym's later changes.
    public enum Refresh: Sendable {
        /// Rows never change once written (reps, rejected attempts): sent once, a repeat is a no-op.
        case never
        /// Every row, every cycle (athletes: few rows, edited at any time).
        case all
        /// Rows for which this SQLite condition holds of the cutoff `?` (now minus the refresh window).
        case since(String)
    }

    public let name: String
    public let columns: [String]
    /// The gym's own key, without `gym`.
    public let key: [String]
    /// The column (or SQLite expression) that dates a row, for the uplink's lag.
    public let timeColumn: String
    public let refresh: Refresh
    /// When set, each row is not written but passed to this statement ($1 the gym, then the
    /// row's columns), which must itself make a repeat a no-op (erasures: chain_erase).
    public let apply: String?

    init(name: String, columns: [String], key: [String], timeColumn: String, refresh: Refresh, apply: String? = nil) {
        self.name = name
        self.columns = columns
        self.key = key
        self.timeColumn = timeColumn
        self.refresh = refresh
        self.apply = apply
    }

    /// The tables in the order the uplink sends them: what a row refers to goes before it.
    /// Erasures go first: a row that still carries an erased athlete's id in the gym's store was
    /// written after her erasure (which rewrote every earlier one), so it is sent after the
    /// erasure is applied and keeps the id (an id given again to a new athlete stays hers).
    public static let all: [ChainTable] = [
        ChainTable(
            name: "erasures", columns: ["pseudonym", "ts", "athlete_sha256"], key: ["pseudonym"], timeColumn: "ts", refresh: .never,
            apply: "SELECT chain_erase($1, $2, $3, $4)"),
        ChainTable(
            name: "athletes", columns: ["id", "name", "sex", "birth_year", "height_cm", "goal_weight_kg", "created_ts", "archived_ts"],
            key: ["id"], timeColumn: "created_ts", refresh: .all),
        ChainTable(
            name: "sessions", columns: ["id", "station", "athlete", "started_ts", "ended_ts"], key: ["id"], timeColumn: "started_ts",
            refresh: .since("ended_ts >= ?")),
        ChainTable(
            name: "sets",
            columns: [
                "id", "session", "station", "athlete", "exercise", "load_kg", "started_ts", "ended_ts", "reps", "reason",
                "best_mean_velocity_mps", "velocity_loss_pct", "rpe", "note",
            ],
            key: ["id"], timeColumn: "started_ts", refresh: .since("started_ts >= ?")),
        ChainTable(
            name: "reps",
            columns: [
                "id", "set_id", "station", "athlete", "exercise", "load_kg", "idx", "mean_velocity_mps", "peak_velocity_mps",
                "mean_propulsive_velocity_mps", "rom_mm", "concentric_s", "time_to_peak_s", "velocity_loss_pct", "mean_power_w", "zone",
                "sensor", "t_end", "detector", "src", "seq", "ts", "late_s",
            ],
            key: ["id"], timeColumn: "ts", refresh: .never),
        ChainTable(
            name: "rejected",
            columns: [
                "src", "seq", "station", "athlete", "reason", "detail", "rom_mm", "concentric_s", "mean_velocity_mps", "t_end", "detector",
            ],
            key: ["src", "seq"], timeColumn: "t_end", refresh: .never),
        ChainTable(
            name: "profiles",
            columns: [
                "src", "seq", "station", "athlete", "exercise", "ts", "intercept_mps", "slope_mps_per_kg", "r2", "mvt_mps", "e1rm_kg",
            ],
            key: ["src", "seq"], timeColumn: "ts", refresh: .never),
        ChainTable(
            name: "posture_changes", columns: ["src", "seq", "station", "athlete", "t", "correct", "bad_for_s"], key: ["src", "seq"],
            timeColumn: "t", refresh: .never),
        ChainTable(
            name: "alerts", columns: ["src", "seq", "station", "athlete", "ts", "json"], key: ["src", "seq"], timeColumn: "ts",
            refresh: .never),
        ChainTable(name: "plans", columns: ["id", "athlete", "created_ts"], key: ["id"], timeColumn: "created_ts", refresh: .all),
        ChainTable(
            name: "plan_items",
            columns: [
                "plan", "position", "exercise", "sets", "reps", "rest_s", "load_kg", "load_pct_e1rm", "loads_kg", "load_unit",
                "target_mean_velocity_mps",
            ],
            key: ["plan", "position"], timeColumn: "(SELECT created_ts FROM plans WHERE plans.id = plan_items.plan)", refresh: .all),
    ]

    /// The statement that writes `count` rows of this table for `gym` ($1), the rows' values
    /// after it. A row already there is left alone when unchanged: a batch delivered twice
    /// writes nothing the second time. Tables whose rows change take the gym's values.
    func upsert(rows count: Int) -> String {
        let width = columns.count
        let tuples = (0..<count).map { row in
            "($1, " + (0..<width).map { "$\(2 + row * width + $0)" }.joined(separator: ", ") + ")"
        }
        let conflict = " ON CONFLICT (gym, " + key.joined(separator: ", ") + ") "
        let head = "INSERT INTO \(name) AS t (gym, " + columns.joined(separator: ", ") + ") VALUES " + tuples.joined(separator: ", ")
        guard case .never = refresh else {
            let changing = columns.filter { !key.contains($0) }
            return head + conflict + "DO UPDATE SET " + changing.map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
                + " WHERE (" + changing.map { "t.\($0)" }.joined(separator: ", ") + ") IS DISTINCT FROM ("
                + changing.map { "EXCLUDED.\($0)" }.joined(separator: ", ") + ")"
        }
        return head + conflict + "DO NOTHING"
    }
}
