import Foundation
import GRDB
import Testing
import VBTBus
import VBTWire

@testable import VBTQuery
@testable import VBTStore

@Suite("The station registry")
struct StationRegistryTests {
    let now = 1_763_812_345.0

    func heartbeat(of station: String, _ producer: inout Producer) throws -> BusMessage {
        try producer.message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 5, intervalS: 1), station: "bridge-\(station)", athlete: nil, ts: now)
    }

    func command(_ name: String, station: String, args: JSONObject = JSONObject(), id: String, ts: Double) throws -> BusMessage {
        var producer = Producer("vbt")
        return try producer.message(CommandMessage(id: id, command: name, target: "*", args: args), station: station, athlete: nil, ts: ts)
    }

    @Test("a live bridge's heartbeat, status or readings make a station seen; live within 10 s, then silent; written to the registry")
    func sightings() throws {
        let fixture = try StoreFixture()
        let sightings = StationSightings()
        var bridge = Producer("sensor-bridge")
        sightings.note(try heartbeat(of: "rack-01", &bridge), now: now)
        sightings.note(
            try bridge.message(SampleMessage(.distance([.init(t: now, distanceMm: 500)])), station: "rack-02", athlete: nil, ts: now), now: now + 1)
        // A replay's heartbeat and a program's name no station; a rep is not the bridge speaking.
        var replay = Producer("sensor-bridge")
        sightings.note(
            try replay.message(HeartbeatMessage(role: "sensor-bridge", uptimeS: 1, intervalS: 1), station: "bridge-replay", athlete: nil, ts: now),
            now: now)
        var detector = Producer("rep-detector")
        sightings.note(try setMessages(&detector, station: "rack-09", load: 100, reps: 1, t0: now)[0], now: now)

        let live = try fixture.store.stations(now: now + 5, sightings: sightings)
        #expect(live.map(\.name) == ["rack-01", "rack-02"])
        #expect(live.allSatisfy { $0.live })
        #expect(live[0].silentForS == 5 && live[0].addedTs == nil)

        let later = try fixture.store.stations(now: now + 11, sightings: sightings)
        #expect(later.map(\.live) == [false, true])
        #expect(later[0].silenceReason?.contains("rack-01 has been silent for 11 s") == true)

        // Nothing written yet; then persisted, a recorder without these sightings knows them.
        #expect(try fixture.store.stations(now: now).isEmpty)
        try sightings.persist(to: fixture.store)
        let stored = try fixture.store.stations(now: now + 12)
        #expect(stored.map(\.name) == ["rack-01", "rack-02"] && stored.map(\.lastSeenTs) == [now, now + 1])
    }

    @Test("registered stations: never heard until they speak; a label; a name that cannot be a topic is refused")
    func add() throws {
        let fixture = try StoreFixture()
        let added = try fixture.store.addStation(StationAddArgs(name: "platform-1", label: "  Olympic platform "), now: now)
        #expect(added.station?.label == "Olympic platform" && added.station?.addedTs == now && added.station?.live == false)
        #expect(added.station?.silenceReason?.contains("never been heard") == true)
        for bad in ["rack 01", "", "rack/1", String(repeating: "x", count: 65)] {
            #expect(throws: StoreError.self) { try fixture.store.addStation(StationAddArgs(name: bad), now: now) }
        }
        #expect(throws: StoreError.self) { try fixture.store.addStation(StationAddArgs(name: "rack-02", label: "bad\u{7}"), now: now) }
        #expect(throws: StoreError.self) { try fixture.store.station("rack-99", now: now) }
    }

    @Test("who is at a station follows athlete.assign and athlete.unassign; removal is refused while someone is there or it is live")
    func assignAndRemove() throws {
        let fixture = try StoreFixture()
        _ = try fixture.store.addStation(StationAddArgs(name: "rack-01"), now: now)
        try fixture.ingestor.ingest([
            try command(
                CommandName.athleteAssign, station: "rack-01", args: AthleteAssign(athlete: "ana", exercise: "squat", loadKg: 100).args, id: "a", ts: now)
        ])
        var record = try fixture.store.station("rack-01", now: now)
        #expect(record.athlete == "ana" && record.exercise == "squat" && record.loadKg == 100 && record.assignedTs == now)
        #expect(throws: StoreError.self) { try fixture.store.removeStation("rack-01", now: now) }

        try fixture.ingestor.ingest([try command(CommandName.athleteUnassign, station: "rack-01", id: "u", ts: now + 1)])
        record = try fixture.store.station("rack-01", now: now + 1)
        #expect(record.athlete == nil && record.exercise == nil && record.assignedTs == now + 1)
        #expect(try fixture.store.assignment(station: "rack-01", cmdId: "u")?.athlete == nil)

        let sightings = StationSightings()
        var bridge = Producer("sensor-bridge")
        sightings.note(try heartbeat(of: "rack-01", &bridge), now: now + 2)
        #expect(throws: StoreError.self) { try fixture.store.removeStation("rack-01", now: now + 3, sightings: sightings) }
        _ = try fixture.store.removeStation("rack-01", now: now + 20, sightings: sightings)
        #expect(try fixture.store.stations(now: now + 20, sightings: sightings).isEmpty)
        #expect(try fixture.store.assignment(station: "rack-01") != nil, "its history stays")
    }

    @Test("a rename moves the station's history (merging into an existing name); refused while it is live")
    func rename() throws {
        let fixture = try StoreFixture()
        var detector = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&detector, station: "rack-1", load: 100, reps: 3, t0: now))
        try fixture.ingestor.ingest(try setMessages(&detector, station: "rack-01", load: 110, reps: 2, t0: now + 100))
        let sightings = StationSightings()
        var bridge = Producer("sensor-bridge")
        sightings.note(try heartbeat(of: "rack-1", &bridge), now: now + 200)
        try sightings.persist(to: fixture.store)
        _ = try fixture.store.addStation(StationAddArgs(name: "rack-01", label: "Rack 1"), now: now)

        #expect(throws: StoreError.self) {
            try fixture.store.renameStation(StationRenameArgs(name: "rack-1", to: "rack-01"), now: now + 205, sightings: sightings)
        }
        let change = try fixture.store.renameStation(StationRenameArgs(name: "rack-1", to: "rack-01"), now: now + 300, sightings: sightings)
        #expect(change.movedRows ?? 0 >= 1 + 1 + 3, "the session, the set and its three reps")
        #expect(change.station?.label == "Rack 1" && change.station?.lastSeenTs == now + 200)
        let names = try fixture.store.stations(now: now + 300, sightings: sightings).map(\.name)
        #expect(names == ["rack-01"])
        let sets = try fixture.store.history(athlete: nil, station: "rack-01", exercise: nil, limit: 10)
        #expect(sets.count == 2)
        #expect(try fixture.store.history(athlete: nil, station: "rack-1", exercise: nil, limit: 10).isEmpty)
        #expect(throws: StoreError.self) { try fixture.store.renameStation(StationRenameArgs(name: "rack-01", to: "rack 2"), now: now + 300) }
    }

    @Test("an existing database's stations come into the registry with the migration, as seen")
    func migrationSeeds() throws {
        let fixture = try StoreFixture()
        var detector = Producer("rep-detector")
        try fixture.ingestor.ingest(try setMessages(&detector, station: "bench-2", load: 60, reps: 2, t0: now))
        // As before the migration: no registry; then the migration makes it from the sessions.
        try fixture.store.write { db in
            try db.execute(sql: "DROP TABLE stations")
            try Schema.v6Stations(db)
        }
        let stations = try fixture.store.stations(now: now + 1_000)
        #expect(stations.map(\.name) == ["bench-2"])
        #expect(stations[0].addedTs == nil && stations[0].firstSeenTs == now && stations[0].live == false)
    }
}
