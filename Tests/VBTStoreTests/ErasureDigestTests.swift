import GRDB
import Testing
import VBTQuery

@testable import VBTStore

// An erasure's digest of the old id: SHA-256 as FIPS 180-4 defines it (its published examples),
// and what eraseAthlete stores, so the chain store (PostgreSQL's sha256) can find her rows.

@Suite("erasure digest")
struct ErasureDigestTests {
    @Test("SHA-256 gives the standard's examples, across block boundaries")
    func vectors() {
        #expect(SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            SHA256.hex([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("an erasure records the digest of the pseudonym and the old id, and never the id")
    func erasureStoresTheDigest() throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        _ = try store.addAthlete(AthleteInput(id: "ana", name: "Ana Rossi"))
        let result = try store.eraseAthlete("ana", confirm: "ana", now: 7_000)
        let row = try #require(try store.read { db in try Row.fetchOne(db, sql: "SELECT * FROM erasures") })
        let digest: String = row["athlete_sha256"]
        #expect(digest == Schema.erasureDigest(pseudonym: result.pseudonym, athlete: "ana") && digest.count == 64)
        #expect(digest != Schema.erasureDigest(pseudonym: result.pseudonym, athlete: "ann"))
        #expect(row["ts"] == 7_000.0 && !"\(row)".contains("\"ana\""))
    }
}
