import Foundation
import Testing

@testable import VBTChain

// Chain athletes without a server: which chain ids are taken, that HQ's link tables are never
// replicated (so no gym is granted them), and that a page decodes from the keys the SQL writes.

@Suite("chain athletes")
struct ChainAthletesTests {
    @Test("chain ids are a letter or digit then letters, digits, _ . -, at most 64")
    func chainIds() {
        for good in ["ANA-1", "7", "ana.p_2", String(repeating: "a", count: 64)] { #expect(isValidChainId(good), "\(good)") }
        for bad in ["", "-ana", "ana p", "ana'", "añá", String(repeating: "a", count: 65)] { #expect(!isValidChainId(bad), "\(bad)") }
    }

    @Test("the link tables are HQ's: in migration 3, not among the tables gyms send and are granted")
    func linkTablesAreNotReplicated() throws {
        let c3 = try #require(ChainSchema.migrations.first { $0.version == 3 })
        #expect(c3.name == "c3-chain-athletes")
        #expect(c3.sql.contains("CREATE TABLE chain_athletes") && c3.sql.contains("CREATE TABLE chain_links"))
        #expect(c3.sql.contains("ALTER TABLE chain_links ENABLE ROW LEVEL SECURITY"))
        #expect(!ChainTable.all.contains { $0.name.hasPrefix("chain_") })
    }

    @Test("a page decodes from the chain store's JSON, absent best rep and all")
    func pageDecodes() throws {
        let json = """
            {"chain_id": "ANA-1", "name": "Ana", "links": [{"gym": "north", "athlete": "ana", "name": null}],
             "sessions": [{"gym": "north", "id": 3, "station": "r1", "athlete": "ana", "started_ts": 10.5, "ended_ts": 70, "sets": 1}],
             "sets": [{"gym": "north", "id": "s1", "session": 3, "athlete": "ana", "exercise": null, "load_kg": null,
                       "started_ts": 11, "reps": 0, "best_mean_velocity_mps": null, "velocity_loss_pct": null, "best_rep": null}],
             "bests": []}
            """
        let page = try JSONDecoder().decode(ChainAthletePage.self, from: Data(json.utf8))
        #expect(page.chainId == "ANA-1" && page.links.first?.name == nil && page.sessions.first?.sets == 1)
        #expect(page.sets.first?.bestRep == nil && page.bests.isEmpty)
    }
}
