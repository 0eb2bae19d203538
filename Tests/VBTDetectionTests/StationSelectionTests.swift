import Testing

@testable import VBTBus
@testable import VBTDetection
@testable import VBTDetectorRole
@testable import VBTWire

/// `--stations GLOB --shard K/N`: which stations one detector serves.
@Suite("station selection")
struct StationSelectionTests {
    /// Names as a gym of 1,002 stations has them (the load test's copies).
    static let gym = (1...334).flatMap { n in ["rack-\(n)", "bench-\(n)", "platform-\(n)"] }

    @Test("the hash is FNV-1a 64 of the UTF-8 name: the published vectors, and the same in every process")
    func hashIsWrittenDown() {
        // Test vectors of the FNV reference (the empty string is the offset basis).
        #expect(StationSelection.fnv1a64("") == 0xcbf2_9ce4_8422_2325)
        #expect(StationSelection.fnv1a64("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(StationSelection.fnv1a64("foobar") == 0x8594_4171_f739_67e8)
        // A process-seeded hash would change these from run to run; these are fixed by the algorithm.
        #expect(StationSelection.shard(of: "rack-01", shards: 2) == 1)
        #expect(StationSelection.shard(of: "rack-02", shards: 2) == 2)
        #expect(StationSelection.shard(of: "bench-01", shards: 2) == 2)
    }

    @Test("N shards are disjoint and cover the gym, each with its fair part", arguments: [2, 3, 4])
    func disjointAndCovering(shards: Int) throws {
        let selections = try (1...shards).map { try StationSelection(glob: "*", shard: $0, of: shards) }
        for station in Self.gym {
            #expect(selections.filter { $0.serves(station) }.count == 1, "\(station) served once")
        }
        let counts = selections.map { selection in Self.gym.filter(selection.serves).count }
        let fair = Double(Self.gym.count) / Double(shards)
        // Binomial spread at n = 1,002 is some 16 stations: 15 % off the fair part would be ~4 sigma.
        #expect(counts.allSatisfy { abs(Double($0) - fair) < 0.15 * fair }, "\(counts)")
    }

    @Test("the glob and the shard must both hold")
    func globAndShard() throws {
        let racks1 = try StationSelection(glob: "rack-*", shard: 1, of: 2)
        let racks2 = try StationSelection(glob: "rack-*", shard: 2, of: 2)
        #expect(racks1.serves("rack-01") && !racks2.serves("rack-01"))
        #expect(!racks1.serves("bench-02") && !racks2.serves("bench-02"))
        let racks = Self.gym.filter { $0.hasPrefix("rack-") }
        #expect(racks.filter(racks1.serves).count + racks.filter(racks2.serves).count == racks.count)
        #expect(StationSelection().servesAll && StationSelection().serves("anything"))
        #expect(try !StationSelection(glob: "*", shard: 1, of: 2).servesAll)
        #expect(try StationSelection(glob: "*", shard: 1, of: 1).serves("bench-01"))
    }

    @Test("K/N is read, and bad input refused saying what to write", arguments: ["0/2", "3/2", "x", "1/0", "1", "1/2/3", "-1/2", "", "a/b", "1/65"])
    func refused(text: String) {
        #expect(throws: StationSelectionError.self) { try StationSelection(glob: "*", shard: text) }
        do {
            _ = try StationSelection(glob: "*", shard: text)
        } catch {
            #expect(error.description.contains("--shard") && error.description.contains("1/2"), "\(error)")
        }
    }

    @Test("K/N read")
    func read() throws {
        let selection = try StationSelection(glob: "rack-*", shard: "2/3")
        #expect(selection.shard == 2 && selection.shards == 3 && selection.glob == "rack-*")
        #expect(selection.shardText == "2/3" && selection.programName == "rep-detector-2")
        let whole = try StationSelection(glob: "*", shard: "1/1")
        #expect(whole.shardText == nil && whole.programName == "rep-detector" && whole == StationSelection())
        #expect(throws: StationSelectionError.self) { try StationSelection(glob: "", shard: "1/1") }
    }

    @Test("a takeover concerns the detector with the same glob and shard; one without a shard, the unsplit gym")
    func takeoverMatch() throws {
        let shard1 = try StationSelection(glob: "*", shard: 1, of: 2)
        let request = TakeoverMessage(instance: "rep-detector-new", stations: "*", shard: "1/2", firstSeq: [:])
        #expect(shard1.isAsked(by: request))
        #expect(try !StationSelection(glob: "*", shard: 2, of: 2).isAsked(by: request))
        #expect(try !StationSelection(glob: "rack-*", shard: 1, of: 2).isAsked(by: request))
        #expect(!StationSelection().isAsked(by: request))
        // A message from before the field: no shard, the whole gym.
        let text = #"{"instance":"i","stations":"*","first_seq":{"a/sample.x":3}}"#
        guard case .object(let fields) = try JSONParser.parse(Array(text.utf8)) else {
            Issue.record("not an object")
            return
        }
        let old = try TakeoverMessage(fields: fields)
        #expect(old.shard == nil && old.firstSeq == ["a/sample.x": 3])
        #expect(StationSelection().isAsked(by: old) && !shard1.isAsked(by: old))
    }

    @Test("a detector's key may beat as each shard (rep-detector-K), and no other program")
    func shardHeartbeatRights() throws {
        let detector = PeerRole.service(program: "rep-detector").rights
        for k in 1...3 {
            let name = try StationSelection(glob: "*", shard: k, of: 3).programName
            #expect(detector.allows(HeartbeatMessage.topic(station: name)), "\(name)")
        }
        #expect(detector.allows("heartbeat.rep-detector") && !detector.allows("heartbeat.notifier"))
        #expect(!PeerRole.service(program: "notifier").rights.allows("heartbeat.rep-detector-1"))
    }
}
