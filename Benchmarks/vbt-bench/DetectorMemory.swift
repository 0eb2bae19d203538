import Foundation
import VBTDetection
import VBTSensors
import VBTWire

// The rep-detector's memory per station (every daemon must stay within 100 MB
// at 1,000 stations). Measured in a child process of its own (vbt-bench run
// again with `--detector-memory-child`), so that what earlier sections freed
// and the allocator kept does not hide what the stations take.

/// `make run`'s squat rack as the detector sees it: the laser at 50 Hz with
/// its unit's accelerometer and the bar IMU at 100 Hz, a session of 2 sets of
/// 5 with 20 s rests, interleaved in time.
private func rackReadings() -> [(
    t: Double, imu: Bool, distanceMm: Double, acc: (Double, Double, Double)?, gyro: (Double, Double, Double)?, angles: (Double, Double)?
)] {
    var config = SimulationConfig()
    config.sets = 2
    config.repsPerSet = 5
    config.restS = 20
    var sensors = SimulatedSensors(config)
    let origin = 1_763_812_345.0
    var readings: [(t: Double, imu: Bool, distanceMm: Double, acc: (Double, Double, Double)?, gyro: (Double, Double, Double)?, angles: (Double, Double)?)] = []
    var t = 0.0
    while t <= sensors.timeline.duration {
        let d = sensors.distance(at: t, wallOrigin: origin)
        readings.append((d.t, false, d.distanceMm, d.accG.map { ($0.x, $0.y, $0.z) }, nil, nil))
        for half in [0.0, 0.01] {
            let i = sensors.imu(at: t + half, wallOrigin: origin)
            readings.append((i.t, true, 0, (i.accG.x, i.accG.y, i.accG.z), (i.gyroDps.x, i.gyroDps.y, i.gyroDps.z), i.angleDeg.map { ($0.x, $0.y) }))
        }
        t += 0.02
    }
    return readings
}

private func residentBytes() -> Int {
    let fields = ((try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "").split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

/// The child's work: `stations` detectors fed the rack's session; with
/// `snapshots`, a copy of every station's state is held for 3 s of every 6
/// (as the checkpoint writer holds one while it writes). Prints the resident
/// growth at its largest, in bytes a station. With `reps`, then the first station's reps and
/// rejections, a JSON object a line (sorted keys): a change to how the state is kept can be
/// checked to leave them as they were. With `loops` above 1 (`--loops L`), the session is fed L
/// times over, one after the other, and the growth after each is written to standard error:
/// state that grows with a station's history, not its window, shows there.
func detectorMemoryChild(stations: Int, snapshots: Bool, reps printReps: Bool = false, loops: Int = 1) {
    let session = rackReadings()
    let span = (session.last?.t ?? 0) - (session.first?.t ?? 0) + 5
    let readings = (0..<loops).flatMap { loop in
        session.map { r in (t: r.t + Double(loop) * span, imu: r.imu, distanceMm: r.distanceMm, acc: r.acc, gyro: r.gyro, angles: r.angles) }
    }
    let loopEvery = session.count
    let before = residentBytes()
    var detectors = (0..<stations).map { StationDetector(station: "rack-\($0)") }
    var snapshot: [StationDetector]?
    var largest = 0
    var reps = 0
    var firstStation: [DetectorOutput] = []
    var lastSnapshotT = -Double.infinity
    for (index, r) in readings.enumerated() {
        if snapshots, r.t - lastSnapshotT >= 6 {
            snapshot = detectors
            lastSnapshotT = r.t
        }
        if r.t - lastSnapshotT >= 3 { snapshot = nil }
        for s in 0..<stations {
            let outputs =
                r.imu
                ? detectors[s].feedIMU(t: r.t, accG: r.acc!, gyroDps: r.gyro, angleDeg: r.angles)
                : detectors[s].feedDistance(t: r.t, distanceMm: r.distanceMm, accG: r.acc)
            if s == 0 {
                reps += outputs.filter { if case .rep = $0 { true } else { false } }.count
                if printReps { firstStation += outputs }
            }
        }
        if index % 250 == 0 { largest = max(largest, residentBytes() - before) }
        if loops > 1, (index + 1) % loopEvery == 0 {
            FileHandle.standardError.write(Data("loop \((index + 1) / loopEvery): \((residentBytes() - before) / stations) bytes a station\n".utf8))
        }
    }
    largest = max(largest, residentBytes() - before)
    print("\(largest / stations) \(reps) \(snapshot?.count ?? 0)")
    guard printReps else { return }
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    for output in firstStation {
        switch output {
        case .rep(let rep): print(String(decoding: (try? encoder.encode(rep)) ?? Data(), as: UTF8.self))
        case .rejected(let rejected): print(String(decoding: (try? encoder.encode(rejected)) ?? Data(), as: UTF8.self))
        default: break
        }
    }
}

/// Runs the child twice (without and with snapshots) and prints bytes a station.
func detectorMemoryReport(stations: Int = 500) {
    print("")
    print("rep-detector state per station, \(stations) stations of make run's rack (laser 50 Hz with its accelerometer, bar IMU 100 Hz;")
    print("  2 x 5 squats, 20 s rests): resident growth at its largest, in a process of its own")
    for snapshots in [false, true] {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = ["--detector-memory-child", String(stations)] + (snapshots ? ["--snapshots"] : [])
        let pipe = Pipe()
        child.standardOutput = pipe
        do { try child.run() } catch {
            print("  could not run the measuring child: \(error)")
            return
        }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        let fields = output.split(separator: " ")
        guard child.terminationStatus == 0, fields.count >= 2, let bytes = Int(fields[0]), let reps = Int(fields[1]) else {
            print("  the measuring child failed (status \(child.terminationStatus)): \(output)")
            return
        }
        let label = (snapshots ? "with a snapshot held 3 s of every 6 (the checkpoint writer's)" : "alone")
            .padding(toLength: 62, withPad: " ", startingAt: 0)
        print(
            String(
                format: "  %@  %.0f KB a station (%.0f MB at 1,000 stations); %d reps a station", label, Double(bytes) / 1024, Double(bytes) * 1000 / 1e6, reps)
        )
    }
}
