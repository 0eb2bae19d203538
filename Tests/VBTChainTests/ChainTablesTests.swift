import Testing

@testable import VBTChain

// What the uplink sends, without a server: the statements' shape (a redelivered row is a no-op),
// the tables' order and keys against the migrations, and the refusals made before connecting.

@Suite("chain tables and endpoint")
struct ChainTablesTests {
    @Test("rows that never change are inserted or left alone")
    func insertOnly() throws {
        let reps = try #require(ChainTable.all.first { $0.name == "reps" })
        let sql = reps.upsert(rows: 2)
        #expect(sql.hasSuffix("ON CONFLICT (gym, id) DO NOTHING"))
        // $1 is the gym, then each row's columns in order.
        let width = reps.columns.count
        #expect(sql.contains("($1, $2, ") && sql.contains("$\(1 + 2 * width))"))
        #expect(!sql.contains("$\(2 + 2 * width)"))
    }

    @Test("rows that change are updated only when their values differ")
    func upsertWhenDifferent() throws {
        let sets = try #require(ChainTable.all.first { $0.name == "sets" })
        let sql = sets.upsert(rows: 1)
        #expect(sql.contains("ON CONFLICT (gym, id) DO UPDATE SET session = EXCLUDED.session"))
        #expect(sql.contains("IS DISTINCT FROM (EXCLUDED.session"))
        #expect(!sql.contains("id = EXCLUDED.id"))
    }

    @Test("every table is in a migration, keyed by gym and the gym's key, and sent before what refers to it")
    func tablesMatchTheMigrations() {
        let sql = ChainSchema.migrations.map(\.sql).joined(separator: "\n")
        for table in ChainTable.all {
            #expect(sql.contains("CREATE TABLE \(table.name) ("), "\(table.name)")
            #expect(sql.contains("PRIMARY KEY (gym, \(table.key.joined(separator: ", ")))"), "\(table.name)")
            for column in table.columns { #expect(sql.contains("    \(column) "), "\(table.name).\(column)") }
        }
        let names = ChainTable.all.map(\.name)
        #expect(names.firstIndex(of: "athletes")! < names.firstIndex(of: "sets")!)
        #expect(names.firstIndex(of: "sets")! < names.firstIndex(of: "reps")!)
        #expect(names.firstIndex(of: "plans")! < names.firstIndex(of: "plan_items")!)
        #expect(ChainSchema.migrations.map(\.version) == Array(1...ChainSchema.current))
    }

    @Test("erasures go first, each through chain_erase with the gym and its columns, granted to every gym")
    func erasuresFirst() throws {
        let erasures = try #require(ChainTable.all.first)
        #expect(erasures.name == "erasures" && erasures.columns == ["pseudonym", "ts", "athlete_sha256"])
        #expect(erasures.apply == "SELECT chain_erase($1, $2, $3, $4)")
        #expect(ChainTable.all.dropFirst().allSatisfy { $0.apply == nil })
        let sql = ChainSchema.migrations.map(\.sql).joined(separator: "\n")
        #expect(sql.contains("CREATE FUNCTION chain_erase(p_gym TEXT, p_pseudonym TEXT, p_ts DOUBLE PRECISION, p_sha256 TEXT)"))
        #expect(sql.contains("SECURITY DEFINER") && sql.contains("REVOKE ALL ON FUNCTION chain_erase"))
    }

    @Test("gym names that could not be a role or a common name are refused")
    func gymNames() {
        #expect(ChainSchema.isValidGym("north_side2"))
        for bad in ["", "North", "2gyms", "a-b", "a b", "x'; DROP TABLE reps; --", String(repeating: "a", count: 41)] {
            #expect(!ChainSchema.isValidGym(bad), "\(bad)")
        }
        #expect(ChainSchema.role(ofGym: "north") == "vbt_gym_north")
    }

    @Test("a URL asking for any sslmode but verify-full is refused; sslmode=verify-full is always last")
    func sslMode() throws {
        for mode in ["disable", "allow", "prefer", "require", "verify-ca"] {
            #expect(throws: PostgresError.self) { try ChainEndpoint.refuseWeakSSL(in: "postgresql://hq/vbt?sslmode=\(mode)") }
        }
        try ChainEndpoint.refuseWeakSSL(in: "postgresql://hq/vbt?sslmode=verify-full")
        try ChainEndpoint.refuseWeakSSL(in: "postgresql://hq/vbt")
        var endpoint = ChainEndpoint()
        endpoint.url = "postgresql://hq/vbt"
        endpoint.host = "hq.example.org"
        let parameters = try endpoint.parameters()
        #expect(parameters.last?.0 == "sslmode" && parameters.last?.1 == "verify-full")
        #expect(parameters.filter { $0.0 == "sslmode" }.count == 1)
    }

    @Test("a dead link is bounded: keepalives and tcp_user_timeout within deadLinkS, after the URL's; 0 leaves them out")
    func deadLink() throws {
        var endpoint = ChainEndpoint()
        endpoint.url = "postgresql://hq/vbt?keepalives_idle=7200&tcp_user_timeout=0"
        endpoint.deadLinkS = 15
        let parameters = try endpoint.parameters()
        func last(_ key: String) -> Int? { parameters.last { $0.0 == key }.flatMap { Int($0.1) } }
        #expect(last("tcp_user_timeout") == 15_000)
        #expect(last("keepalives") == 1)
        let probing = try #require(last("keepalives_idle")) + 4 * (try #require(last("keepalives_interval")))
        #expect(probing <= 15 && probing >= 10)
        #expect(parameters.last?.0 == "sslmode")
        endpoint.deadLinkS = 0
        #expect(try endpoint.parameters().filter { $0.0.hasPrefix("keepalives") || $0.0 == "tcp_user_timeout" }.isEmpty)
    }
}
