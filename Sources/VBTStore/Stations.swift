import Foundation
import GRDB
import VBTQuery
import VBTWire

// The station registry (proto/query.md, "Stations"): the stations an operator
// registered (`station.add`) and every station seen on the bus, with who is at
// each now.

/// Where the recorder last heard each station: a live bridge's heartbeat
/// (`heartbeat.bridge-<station>`), its `status`, its readings. Kept in memory as
/// messages arrive (a dictionary update each) and written to the registry every
/// few seconds, so `station.list` is current to the message and the database is
/// not written per message.
public final class StationSightings {
    /// Per station: first and last heard, and whether that changed since the last `persist`.
    /// The flag lives in the entry (not a set beside it), so a message costs one hash of its
    /// station, not three (a get, a set and an insert were a third of the hashing of a
    /// recorder's message).
    private var seen: [String: (first: Double, last: Double, dirty: Bool)] = [:]

    public init() {}

    /// Notes `message`'s station as heard at `now` (the recorder's wall clock: a station
    /// computer's clock may be off).
    public func note(_ message: BusMessage, now: Double) {
        let envelope = message.envelope
        let station: String
        switch envelope.type {
        case SampleMessage.type, StatusMessage.type: station = envelope.station
        case HeartbeatMessage.type:
            guard let of = HeartbeatMessage.bridgeStation(heartbeatName: envelope.station) else { return }
            station = of
        default: return
        }
        if let known = seen.index(forKey: station) {
            seen.values[known].last = max(seen.values[known].last, now)
            seen.values[known].dirty = true
        } else {
            seen[station] = (now, now, true)
        }
    }

    /// When `station` was last heard since this recorder started, if it was.
    public func lastSeen(_ station: String) -> Double? { seen[station]?.last }

    /// Every station heard since this recorder started.
    public var all: [String: (first: Double, last: Double)] { seen.mapValues { ($0.first, $0.last) } }

    /// Writes what was heard since the last call to the registry.
    public func persist(to store: TrainingStore) throws(StoreError) {
        let batch = seen.filter(\.value.dirty).map { ($0.key, (first: $0.value.first, last: $0.value.last)) }
        guard !batch.isEmpty else { return }
        try store.write { db in
            for (name, times) in batch {
                try db.execute(
                    sql: """
                        INSERT INTO stations (name, first_seen_ts, last_seen_ts) VALUES (?, ?, ?)
                        ON CONFLICT(name) DO UPDATE SET first_seen_ts = coalesce(first_seen_ts, excluded.first_seen_ts),
                            last_seen_ts = max(coalesce(last_seen_ts, 0), excluded.last_seen_ts)
                        """, arguments: [name, times.first, times.last])
            }
        }
        for (name, _) in batch { seen[name]?.dirty = false }
    }

    /// Forgets `station` (removed from the registry, or renamed).
    public func forget(_ station: String) {
        seen[station] = nil
    }
}

extension TrainingStore {
    /// The tables whose rows name a station (what `station.rename` moves). Raw readings are
    /// not moved: they are kept only for the retention period, and are not indexed by station.
    static let stationTables = [
        "assignments", "sessions", "sets", "reps", "rejected", "calibrations", "posture_changes", "profiles", "alerts",
    ]

    /// Every station registered or seen, by name, each with who is at it now; `sightings`
    /// brings what was heard since the registry was last written.
    public func stations(now: Double, sightings: StationSightings? = nil) throws(StoreError) -> [StationRecord] {
        let live = sightings?.all ?? [:]
        return try read { db in
            var records: [String: StationRecord] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM stations") {
                let name: String = row["name"]
                records[name] = StationRecord(
                    name: name, label: row["label"], addedTs: row["added_ts"], firstSeenTs: row["first_seen_ts"], lastSeenTs: row["last_seen_ts"])
            }
            for (name, times) in live {
                var record = records[name] ?? StationRecord(name: name)
                record.firstSeenTs = min(record.firstSeenTs ?? times.first, times.first)
                record.lastSeenTs = max(record.lastSeenTs ?? times.last, times.last)
                records[name] = record
            }
            for name in records.keys {
                var record = records[name]!
                if let last = record.lastSeenTs {
                    record.silentForS = max(0, now - last)
                    record.live = now - last <= StationRecord.liveWithinS
                }
                if let row = try Row.fetchOne(
                    db, sql: "SELECT athlete, exercise, load_kg, ts FROM assignments WHERE station = ? ORDER BY ts DESC, id DESC LIMIT 1",
                    arguments: [name])
                {
                    (record.athlete, record.exercise, record.loadKg, record.assignedTs) = (row["athlete"], row["exercise"], row["load_kg"], row["ts"])
                }
                records[name] = record
            }
            return records.values.sorted { $0.name.localizedStandardCompare($1.name) == .orderedAscending }
        }
    }

    /// One station of the registry, or an error naming what to do.
    public func station(_ name: String, now: Double, sightings: StationSightings? = nil) throws(StoreError) -> StationRecord {
        guard let record = try stations(now: now, sightings: sightings).first(where: { $0.name == name }) else {
            throw StoreError(.invalid, "no station '\(name)': vbt station list shows the stations; vbt station add \(name) registers one")
        }
        return record
    }

    /// Registers a station (or gives a seen one its label).
    public func addStation(_ args: StationAddArgs, now: Double, sightings: StationSightings? = nil) throws(StoreError) -> StationChange {
        try Self.checkStationName(args.name)
        let label = try Self.checkLabel(args.label)
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO stations (name, label, added_ts) VALUES (?, ?, ?)
                    ON CONFLICT(name) DO UPDATE SET label = coalesce(excluded.label, label), added_ts = coalesce(added_ts, excluded.added_ts)
                    """, arguments: [args.name, label, now])
        }
        return StationChange(station: try station(args.name, now: now, sightings: sightings))
    }

    /// Renames a station everywhere it is stored (merging into `to` when that exists too):
    /// refused while its bridge still publishes under the old name.
    public func renameStation(_ args: StationRenameArgs, now: Double, sightings: StationSightings? = nil) throws(StoreError) -> StationChange {
        try Self.checkStationName(args.to)
        guard args.name != args.to else { throw StoreError(.invalid, "\(args.name) is already called \(args.to)") }
        let old = try station(args.name, now: now, sightings: sightings)
        guard !old.live else {
            throw StoreError(
                .invalid,
                "\(args.name) is live: its sensor-bridge still publishes under that name; restart the bridge with --station \(args.to) first")
        }
        let moved = try write { db -> Int in
            var moved = 0
            for table in Self.stationTables {
                try db.execute(sql: "UPDATE \(table) SET station = ? WHERE station = ?", arguments: [args.to, args.name])
                moved += db.changesCount
            }
            let row = try Row.fetchOne(db, sql: "SELECT * FROM stations WHERE name = ?", arguments: [args.name])
            try db.execute(sql: "DELETE FROM stations WHERE name = ?", arguments: [args.name])
            try db.execute(
                sql: """
                    INSERT INTO stations (name, label, added_ts, first_seen_ts, last_seen_ts) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(name) DO UPDATE SET label = coalesce(label, excluded.label), added_ts = coalesce(added_ts, excluded.added_ts),
                        first_seen_ts = min(coalesce(first_seen_ts, excluded.first_seen_ts), coalesce(excluded.first_seen_ts, first_seen_ts)),
                        last_seen_ts = max(coalesce(last_seen_ts, 0), coalesce(excluded.last_seen_ts, 0))
                    """,
                arguments: [
                    args.to, row?["label"] as String?, (row?["added_ts"] as Double?) ?? now, old.firstSeenTs, old.lastSeenTs,
                ])
            return moved
        }
        sightings?.forget(args.name)
        return StationChange(station: try station(args.to, now: now, sightings: sightings), movedRows: moved)
    }

    /// Takes a station off the registry (its history stays): refused while it is live or
    /// someone is assigned to it. Seen on the bus again, it comes back as seen.
    public func removeStation(_ name: String, now: Double, sightings: StationSightings? = nil) throws(StoreError) -> StationChange {
        let record = try station(name, now: now, sightings: sightings)
        guard !record.live else {
            throw StoreError(.invalid, "\(name) is live: its sensor-bridge still publishes; stop it first (it would come back as seen)")
        }
        if let athlete = record.athlete {
            throw StoreError(.invalid, "\(athlete) is assigned to \(name): vbt station unassign \(name) first")
        }
        try write { db in try db.execute(sql: "DELETE FROM stations WHERE name = ?", arguments: [name]) }
        sightings?.forget(name)
        return StationChange(station: record)
    }

    /// Forgets stations only ever seen (never registered) that have been silent for
    /// `silentForS` (a load test's thousand stations do not stay on the list for ever).
    @discardableResult
    public func forgetSilentSeenStations(silentForS: Double = 7 * 86_400, now: Double) throws(StoreError) -> Int {
        try write { db in
            try db.execute(sql: "DELETE FROM stations WHERE added_ts IS NULL AND last_seen_ts < ?", arguments: [now - silentForS])
            return db.changesCount
        }
    }

    static func checkStationName(_ name: String) throws(StoreError) {
        guard isStationName(name) else {
            throw StoreError(.invalid, "'\(name)' cannot be a station's name: 1 to 64 letters, digits, '.', '_' or '-', e.g. rack-01")
        }
    }

    static func checkLabel(_ label: String?) throws(StoreError) -> String? {
        guard let label else { return nil }
        let trimmed = label.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...100).contains(trimmed.count), !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw StoreError(.invalid, "a station's label is 1 to 100 printable characters")
        }
        return trimmed
    }
}
