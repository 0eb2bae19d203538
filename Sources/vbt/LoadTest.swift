import ArgumentParser
import Foundation
import Histogram
import Logging
import VBTBus
import VBTCommandLine
import VBTDetection
import VBTQuery
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// `vbt loadtest`: a recording replayed at N stations against the running installation,
// and what happened (README, "vbt loadtest"). The replay is a real sensor-bridge
// process (`--replay --stations --loop`), so the installation sees what it would see
// from station computers; this command only listens.

struct LoadTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Replay a recording at N stations against the running installation and report what it did with them.",
        discussion: """
            Starts `sensor-bridge --replay FILE --stations COPIES --stagger S --loop` (COPIES: N over the \
            recording's stations, rounded up) beside this command, listens for --duration seconds, stops it, waits \
            --grace seconds for the last reps, then reports: readings per second, reps received against the reps \
            the recording holds (found by the detector offline, pro rata of the time each copy replayed; both counts \
            take the reps whose completing reading came at least half a second before the replay stopped), \
            completing reading -> rep latency at a subscriber (p50, p99, max; measured on --probes stations, whose \
            readings it also subscribes to; a rep the subscriber missed is fetched from the journal of the rep-detector \
            that published it, counted, not timed), what each consumer received, lost and missed (their heartbeats; \
            rep-detectors splitting the gym each under its name, rep-detector-K), \
            each vbt process's CPU and memory (at the end, and the most it has held since it started; a rep-detector \
            run with --shard K/N as rep-detector-K) on this computer, and this computer's own stalls beside them: a thread \
            that wakes every millisecond (under SCHED_FIFO where this user may) counts how often it woke over 2 ms \
            late, and the latency is also given for the reps no such stall touched (a virtual machine's host that \
            takes its cores away shows there, not in vbt).

            The copies start spread over --stagger seconds, as a gym's stations never lift in lockstep; \
            --stagger 0 starts them all at once, the worst case: every copy completes a rep on the same reading.

            The listener and the replaying bridge run under SCHED_RR at --realtime-priority, as the rep path's \
            systemd units run the bus, the rep-detector and the stations' bridges (deploy/README.md, "Priorities"): \
            the latency is the rep path's, not this command's own wait for a core. Where this user may not (root, \
            or an RLIMIT_RTPRIO), they run as other programs do; the report's `scheduling` says which.

            A consumer's `still missing` is what it lacked and had neither fetched again nor given up when the run \
            ended. The replay keeps no journal unless --journal, and its heartbeat says so: what a consumer that fell \
            behind missed is then lost at once, counted, and the report says so. With --journal the replay journals \
            as station bridges do and is waited for (--settle) while a consumer still fetches.

            Each run ends with whether it held: nothing lost or still missing, the reps expected, p99 within \
            --p99-goal-ms and every vbt daemon's peak memory within --rss-goal-mb (by default 5 ms and 100 MB, \
            the goals a gym of 1,000 stations must meet); if not, what kept it from holding (`verdict` in --json). \
            --ramp runs doubling station counts up to N and reports the largest that held. --json for scripts; --svg FILE charts latency and throughput over \
            time. In a secured installation the bridge needs a key a replay may use (a service key with program \
            sensor-bridge): VBT_REPLAY_CERT, else VBT_CERT.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: "The recording to replay (vbt record; plain or .gz).")
    var recording: String

    @Option(help: "Stations to replay it at (the most, with --ramp).")
    var stations: Int

    @Option(help: "Seconds to listen at each station count.")
    var duration: Double = 30

    @Option(help: "Seconds over which the copies' starts are spread (copy k of COPIES starts (k-1)/COPIES of it late); 0: all at once.")
    var stagger: Double = 2

    @Flag(help: "Try 1/8, 1/4, 1/2 and all of --stations in turn; report the largest that held.")
    var ramp = false

    @Option(help: "Stations whose readings are also subscribed to, to time completing reading -> rep.")
    var probes: Int = 30

    @Option(help: "Seconds to wait after the replay stops for the last reps.")
    var grace: Double = 3

    @Option(
        help: """
            Journal the replay into this folder, as station bridges journal (sensor-bridge --journal): a consumer \
            that falls behind (a stall, the bus's memory budget) then fetches what it missed, as in a gym. At the end \
            the replay stops publishing and keeps answering while a consumer still misses something, up to --settle \
            seconds. The journal's writes are load on this computer that station computers carry in a gym.
            """)
    var journal: String?

    @Option(help: "With --journal: the most seconds to wait after --grace for consumers to fetch what they still miss.")
    var settle: Double = 60

    @Option(help: "The latency a run must keep to hold, ms at p99 (the goal for a gym of 1,000 stations is 5 ms).")
    var p99GoalMs: Double = 5

    @Option(help: "The memory every vbt daemon on this computer must stay within to hold: the most it held, MB (the replay not counted).")
    var rssGoalMb: Double = 100

    @Option(help: "SCHED_RR priority of the listener and the replaying bridge (the rep path's units'); 0: the normal scheduler.")
    var realtimePriority: Int32 = RealtimeScheduling.repPathPriority

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(help: "Write latency and throughput over time as an SVG chart.")
    var svg: String?

    @Option(
        help: """
            Write every timed rep as a line of CSV: when it came (Unix s), the station count, station, sensor, rep id, \
            completing reading -> rep ms, the part of it until the detector published the rep, and how many of the \
            sensor's messages had come after the completing one.
            """)
    var timings: String?

    func validate() throws {
        guard (1...5_000).contains(stations) else { throw ValidationError("--stations must be 1 to 5000") }
        guard duration >= 2, duration <= 86_400 else { throw ValidationError("--duration must be 2 s to a day") }
        guard stagger.isFinite, stagger >= 0, stagger < duration else { throw ValidationError("--stagger must be 0 or more, and less than --duration") }
        guard (1...100).contains(probes), grace >= 0, grace <= 120, p99GoalMs > 0, rssGoalMb > 0, settle >= 0, settle <= 600 else {
            throw ValidationError("--probes must be 1 to 100, --grace 0 to 120 s, --settle 0 to 600 s, --p99-goal-ms and --rss-goal-mb more than 0")
        }
        guard (0...StallProbe.priority - 1).contains(realtimePriority) else {
            throw ValidationError("--realtime-priority must be 0 (the normal scheduler) to \(StallProbe.priority - 1)")
        }
        guard FileManager.default.isReadableFile(atPath: recording) else {
            throw ValidationError("cannot read \(recording): give a recording made with vbt record --out FILE")
        }
    }

    func run() async throws {
        let logger = bootstrapLogging(label: "vbt.loadtest")
        let plan: RecordingPlan
        do { plan = try RecordingPlan(path: recording) } catch {
            reportProblem("vbt: \(error)")
            throw ExitCode.failure
        }
        guard !plan.stations.isEmpty, plan.spanS > 0 else {
            reportProblem("vbt: \(recording) holds no sensor readings to replay; record some with vbt record --out FILE sample. status.")
            throw ExitCode.failure
        }
        // A replaying bridge publishes each recorded station at most 1,000 times.
        guard (Double(stations) / Double(plan.stations.count)).rounded(.up) <= 1_000 else {
            reportProblem(
                "vbt: \(stations) stations would need more than 1000 copies of each of the recording's \(plan.stations.count) stations; "
                    + "record more stations, or ask for at most \(plan.stations.count * 1_000)")
            throw ExitCode.failure
        }
        let counts = ramp ? Array(Set([stations / 8, stations / 4, stations / 2, stations].filter { $0 >= 1 })).sorted() : [stations]
        let config = bus.config
        let settings = LoadSettings(
            recording: recording, duration: duration, stagger: stagger, probes: probes, grace: grace, json: json, insecure: bus.insecure,
            keepTimings: timings != nil, realtimePriority: realtimePriority, journal: journal, settle: settle)
        let reports = LockedReports()
        let (p99Goal, rssGoal) = (p99GoalMs, rssGoalMb)
        try await runLoop("vbt.loadtest", logger: logger) { context in
            for count in counts {
                var report = try LoadRun(settings: settings, plan: plan, stations: count, config: config, logger: logger).run(context: context)
                report.verdict = LoadReport.Verdict(report, p99GoalMs: p99Goal, rssGoalMb: rssGoal)
                reports.append(report)
                if !settings.json { FileHandle.standardError.write(Data((report.summaryLine + "\n").utf8)) }
            }
        }
        let results = reports.all
        let held = results.filter { $0.verdict?.held == true }.map(\.stations).max()
        if let svg { try? Self.chart(results).write(toFile: svg, atomically: true, encoding: .utf8) }
        if let timings {
            do { try Self.timingsCSV(results).write(to: URL(fileURLWithPath: timings), options: .atomic) } catch {
                reportProblem("vbt: cannot write \(timings): \(error)")
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let body: any Encodable = ramp ? RampReport(runs: results, largestHeld: held) : results[0]
            print(String(decoding: (try? encoder.encode(body)) ?? Data(), as: UTF8.self))
        } else {
            for result in results { print(result.table) }
            if ramp { print(held.map { "largest station count that held: \($0)" } ?? "no station count held (see above)") }
        }
    }

    /// Every timed rep of `runs`, a CSV row each after a header (RFC 4180, as `vbt export` writes it: a station
    /// name or rep id from the bus with a comma or a quote in it stays one field).
    static func timingsCSV(_ runs: [LoadReport]) -> Data {
        let columns = ["arrived_ts", "stations", "station", "sensor", "rep_id", "latency_ms", "detector_ms", "messages_after", "stalled_ms"]
        let rows: [[Cell]] = runs.flatMap { run in
            run.timed.map { rep in
                [
                    .real(rep.arrivedTs), .int(Int64(run.stations)), .text(rep.station), rep.sensor.map(Cell.text) ?? .null, .text(rep.repId),
                    .real(rep.latencyMs), .real(rep.detectorMs), .int(Int64(rep.messagesAfter)), .real(rep.stalledMs),
                ]
            }
        }
        return ExportFormat.csv(columns: columns, rows: rows)
    }

    /// p99 latency and reps per second, per 5-second window, of every run.
    static func chart(_ runs: [LoadReport]) -> String {
        let latency = runs.map { run in
            ChartPanel.Series(name: "\(run.stations) stations", points: run.windows.map { (x: $0.atS, y: $0.p99Ms) })
        }
        let throughput = runs.map { run in
            ChartPanel.Series(name: "\(run.stations) stations", points: run.windows.map { (x: $0.atS, y: $0.repsPerS) })
        }
        let seconds: @Sendable (Double) -> String = { String(format: "%.0f s", $0) }
        return SVGChart.render(
            title: "vbt loadtest",
            panels: [
                ChartPanel(title: "Completing reading -> rep, p99 per 5 s", yUnit: "ms", kind: .lines(latency, xLabel: seconds)),
                ChartPanel(title: "Reps received per second", yUnit: "reps/s", kind: .lines(throughput, xLabel: seconds)),
            ])
    }
}

/// What a recording holds for a replay: its stations, the span of its readings, the reps the
/// detector finds in it (offline, as `vbt eval` runs it), its readings.
struct RecordingPlan: Sendable {
    var stations: [String] = []
    var spanS = 0.0
    /// How long a pass of the looping replay lasts (`ReplayStagger.passSeconds`).
    var passS = 0.0
    var readingsPerPass = 0
    /// Seconds from the recording's first reading to each station's first reading.
    var firstReadingOffset: [String: Double] = [:]
    /// Seconds from the recording's first reading to the reading that completes each rep the detector
    /// finds offline (the reading on which it sends the rep, its `t_input`).
    var repOffsets: [String: [Double]] = [:]
    var repsPerPass: Int { repOffsets.values.reduce(0) { $0 + $1.count } }

    init(path: String) throws {
        let (lines, _) = try RecordingReader.read(path: path)
        var first = Double.infinity, last = -Double.infinity
        var stationFirst: [String: Double] = [:]
        for line in lines where line.message.envelope.type == SampleMessage.type {
            guard let sample = try? line.message.payload(as: SampleMessage.self) else { continue }
            let station = line.message.envelope.station
            let times = sample.readings.times
            readingsPerPass += times.count
            guard let low = times.min(), let high = times.max() else { continue }
            (first, last) = (min(first, low), max(last, high))
            stationFirst[station] = min(stationFirst[station] ?? low, low)
        }
        stations = stationFirst.keys.sorted()
        spanS = last > first ? last - first : 0
        firstReadingOffset = stationFirst.mapValues { $0 - first }
        // The replay's pass: its messages are the recording's samples and status (sensor-bridge --replay-types' default).
        // Its timeline starts at the first message it keeps (`Recording`), as here.
        let kept = lines.filter { [SampleMessage.type, StatusMessage.type].contains($0.message.envelope.type) }
        let lastReplayed = (kept.last?.t ?? 0) - (kept.map(\.t).min() ?? 0)
        passS = ReplayStagger.passSeconds(lastMessageT: lastReplayed, readingSpan: spanS, readings: readingsPerPass)
        // The replay sends readings and status only (sensor-bridge --replay-types' default): the
        // recording's commands (assignments) are left out here too, so both detectors see the same.
        let replayed = lines.filter { $0.message.envelope.type != CommandMessage.type }
        // A rep without a completing reading (a set closed by the clock) is sent half a second past its top at the earliest.
        for rep in OfflineRunner.run(lines: replayed).reps { repOffsets[rep.station, default: []].append((rep.tInput ?? rep.tTop + 0.5) - first) }
    }

    /// The reps the copies of the recording yield while their readings are replayed up to `replayedS`
    /// seconds after the first copy's first pass began, each copy starting its own `delays` late
    /// (passes follow each other every `passS`): those whose completing reading came by then. (Counting
    /// each rep by its top, less half a second, against every rep received, the two counts parted at
    /// the cut: 113-116 reps short of 20,369 at 1,000 stations over 150 s, 2 of 185 at 9.)
    func expectedReps(replayedS: Double, delays: [Double]) -> Int {
        guard spanS > 0, passS > 0 else { return 0 }
        var count = 0
        for delay in delays {
            let until = replayedS - delay
            guard until > 0 else { continue }
            for offsets in repOffsets.values {
                for offset in offsets where offset <= until { count += Int(((until - offset) / passS).rounded(.down)) + 1 }
            }
        }
        return count
    }
}

/// One run's report (the JSON of `vbt loadtest --json`).
struct LoadReport: Encodable, Sendable {
    struct Latency: Encodable, Sendable {
        var p50: Double
        var p99: Double
        var max: Double
        var count: Int
    }
    struct Consumer: Encodable, Sendable {
        var received: Int
        var gaps: Int
        var missing: Int
        var lost: Int
        /// Missed and still waited for when the run ended (its last heartbeat's `inputs.outstanding`, less
        /// what was outstanding before the run): not lost yet, not recovered either.
        var outstanding: Int

        /// What a consumer's heartbeats say happened between `first` and `last`.
        init(last: InputCounters, since first: InputCounters) {
            received = last.received - first.received
            gaps = last.gaps - first.gaps
            missing = last.missing - first.missing
            lost = max(0, (last.lost ?? 0) - (first.lost ?? 0))
            outstanding = max(0, (last.outstanding ?? 0) - (first.outstanding ?? 0))
        }
    }
    struct ProcessUse: Encodable, Sendable {
        var name: String
        var pid: Int32
        var cpuPct: Double
        /// Resident memory at the end of the run.
        var rssMb: Double
        /// The most it has held since it started (the kernel's high-water mark, `VmHWM` in proc(5)):
        /// a budget is about the peak, not the end.
        var rssMaxMb: Double
        enum CodingKeys: String, CodingKey {
            case name, pid
            case cpuPct = "cpu_pct"
            case rssMb = "rss_mb"
            case rssMaxMb = "rss_max_mb"
        }
    }
    /// A timed rep (the slowest are where to look when the p99 is high).
    struct SlowRep: Encodable, Sendable {
        var station: String
        var repId: String
        var sensor: String?
        var latencyMs: Double
        /// How many of the station's sample messages had arrived after the completing one when the rep came.
        var messagesAfter: Int
        /// When the rep came (wall clock, Unix s), and how much of its latency had passed when the detector
        /// published it (its envelope's `ts`, the same computer's clock): the rest is the way back through the bus.
        var arrivedTs: Double = 0
        var detectorMs: Double = 0
        /// How much of its latency this computer itself was stalled (`StallProbe`), ms.
        var stalledMs: Double = 0
        enum CodingKeys: String, CodingKey {
            case station, sensor
            case repId = "rep_id"
            case stalledMs = "stalled_ms"
            case latencyMs = "latency_ms"
            case messagesAfter = "messages_after"
        }
    }
    struct Window: Encodable, Sendable {
        var atS: Double
        var p99Ms: Double
        var repsPerS: Double
        enum CodingKeys: String, CodingKey {
            case atS = "at_s"
            case p99Ms = "p99_ms"
            case repsPerS = "reps_per_s"
        }
    }

    /// The policies the listener and the replay's threads ran under (`RealtimeScheduling.describe`):
    /// `rr:10` on the rep path's priority, `other` under the normal scheduler.
    struct Scheduling: Encodable {
        var listener: String
        var replay: String
    }

    var stations: Int
    var durationS: Double
    /// The seconds over which the copies' starts were spread (0: all at once).
    var staggerS: Double
    var readingsPerS: Double
    var repsExpected: Int
    var repsReceived: Int
    /// Of `reps_received`, those this command's subscriber missed and fetched again from the rep-detector's
    /// journal (not timed: they came late to this subscriber, not to the installation's consumers).
    var repsRecovered: Int
    /// Reps this subscriber missed and could not fetch again (of any station).
    var repsMissed: Int
    /// Reps received (or fetched again) whose completing reading came after the cut (`LoadRun.cutMarginS`
    /// before the replay stopped): in neither `reps_received` nor `reps_expected`.
    var repsAfterCut: Int
    var latencyMs: Latency
    /// The same, of the reps during which this computer itself did not stall (`StallProbe`): how much
    /// of the tail was vbt's when the machine's own stalls are set aside.
    var latencyMsOutsideStalls: Latency
    /// This computer's own stalls during the run: the baseline of `latency_ms`.
    var machineStalls: StallProbe.Summary
    /// How the listener and the replay were scheduled.
    var scheduling: Scheduling
    /// What each consumer lost for good during the run (its heartbeat's `inputs.lost`), by program.
    var lost: [String: Int]
    var consumers: [String: Consumer]
    /// This command's own subscriber: what it received, and any gaps or malformed messages in
    /// what it counted (a rep it missed would make the installation look short).
    var listener: InputCounters
    var processes: [ProcessUse]
    /// The database's growth (the recorder's `status` rows), when it answered.
    var storeGrowth: [String: Int]?
    var windows: [Window]
    /// The five slowest reps timed.
    var slowest: [SlowRep] = []
    /// Every rep timed, as it came (`--timings`; not in the JSON report).
    var timed: [SlowRep] = []
    /// Where the timed reps' latency went, stage by stage (`LoadStages`).
    var stages: Stages?
    /// Whether it held the goals (`--p99-goal-ms`, `--rss-goal-mb`), once judged.
    var verdict: Verdict?
    /// The replaying bridge's name among `processes`: the load, not a daemon of the installation.
    static let replayName = "sensor-bridge (replay)"

    enum CodingKeys: String, CodingKey {
        case stations, lost, consumers, listener, processes, windows, slowest
        case durationS = "duration_s"
        case staggerS = "stagger_s"
        case readingsPerS = "readings_per_s"
        case repsExpected = "reps_expected"
        case repsReceived = "reps_received"
        case repsRecovered = "reps_recovered"
        case repsMissed = "reps_missed"
        case repsAfterCut = "reps_after_cut"
        case latencyMs = "latency_ms"
        case latencyMsOutsideStalls = "latency_ms_outside_stalls"
        case machineStalls = "machine_stalls"
        case scheduling
        case storeGrowth = "store_growth"
        case stages, verdict
    }

    /// What the consumers missed and had neither fetched again nor given up when the run ended.
    var outstanding: Int { consumers.values.reduce(0) { $0 + $1.outstanding } }

    /// Whether a run held its goals, and if not, what kept it from holding.
    struct Verdict: Encodable, Sendable {
        var held: Bool
        /// What kept it from holding, in plain words; empty when it held.
        var shortOf: [String]
        var p99GoalMs: Double
        var rssGoalMb: Double
        enum CodingKeys: String, CodingKey {
            case held
            case shortOf = "short_of"
            case p99GoalMs = "p99_goal_ms"
            case rssGoalMb = "rss_goal_mb"
        }

        /// Held: nothing lost and nothing still missing, at least 98 % of the expected reps, p99 within
        /// `p99GoalMs`, and every vbt daemon's peak memory within `rssGoalMb` (the replay, the load
        /// itself, not counted).
        init(_ report: LoadReport, p99GoalMs: Double, rssGoalMb: Double) {
            var short: [String] = []
            let lostTotal = report.lost.values.reduce(0, +)
            if lostTotal > 0 {
                let by = report.lost.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                short.append("\(lostTotal) messages lost (\(by.joined(separator: ", ")))")
            }
            if report.outstanding > 0 { short.append("\(report.outstanding) messages still missing") }
            if Double(report.repsReceived) < 0.98 * Double(report.repsExpected) {
                short.append("reps \(report.repsReceived) of \(report.repsExpected), under 98 %")
            }
            if report.latencyMs.p99 > p99GoalMs {
                short.append(String(format: "p99 %.2f ms over the %g ms goal", report.latencyMs.p99, p99GoalMs))
            }
            for process in report.processes where process.name != LoadReport.replayName && process.rssMaxMb > rssGoalMb {
                short.append(process.name + String(format: " held up to %.0f MB, over the %g MB goal", process.rssMaxMb, rssGoalMb))
            }
            (held, shortOf, self.p99GoalMs, self.rssGoalMb) = (short.isEmpty, short, p99GoalMs, rssGoalMb)
        }

        var line: String {
            held
                ? String(
                    format: "held: nothing lost or still missing, the reps expected, p99 within %g ms, every daemon within %g MB", p99GoalMs,
                    rssGoalMb)
                : "did not hold: " + shortOf.joined(separator: "; ")
        }
    }

    var summaryLine: String {
        String(
            format: "loadtest: %d stations, %.0f readings/s, reps %d of %d, latency p50 %.1f ms p99 %.1f ms max %.1f ms, lost %d, still missing %d",
            stations, readingsPerS, repsReceived, repsExpected, latencyMs.p50, latencyMs.p99, latencyMs.max, lost.values.reduce(0, +), outstanding)
            + (repsRecovered > 0 || repsMissed > 0
                ? String(format: " (this command's subscriber fetched %d reps again from the rep-detector's journal, %d not)", repsRecovered, repsMissed) : "")
    }

    var table: String {
        var text = summaryLine + "\n"
        let probe = machineStalls.policy == "fifo" ? "SCHED_FIFO" : "at normal priority"
        text +=
            "this computer (a thread waking every ms, \(probe)): "
            + String(
                format: "late over 2 ms %d times, over 5 ms %d, worst %.1f ms; the %d reps it did not stall: p50 %.1f ms p99 %.1f ms max %.1f ms\n",
                machineStalls.over2Ms, machineStalls.over5Ms, machineStalls.worstMs, latencyMsOutsideStalls.count, latencyMsOutsideStalls.p50,
                latencyMsOutsideStalls.p99, latencyMsOutsideStalls.max)
        text += "scheduling: listener \(scheduling.listener), replay \(scheduling.replay)\n"
        if let stages { text += stages.table }
        text += "consumer            received     gaps  missing     lost  still missing\n"
        for name in consumers.keys.sorted() {
            let c = consumers[name]!
            text +=
                name.padding(toLength: 18, withPad: " ", startingAt: 0)
                + String(format: " %9d %8d %8d %8d %14d\n", c.received, c.gaps, c.missing, c.lost, c.outstanding)
        }
        text +=
            "vbt loadtest".padding(toLength: 18, withPad: " ", startingAt: 0)
            + String(format: " %9d %8d %8d (and %d malformed)\n", listener.received, listener.gaps, listener.missing, listener.malformed)
        text += "process             pid      CPU %   RSS MB  peak MB\n"
        for p in processes {
            text +=
                p.name.padding(toLength: 18, withPad: " ", startingAt: 0)
                + String(format: " %6d %9.1f %8.1f %8.1f\n", p.pid, p.cpuPct, p.rssMb, p.rssMaxMb)
        }
        if let growth = storeGrowth {
            text += "store: " + growth.keys.sorted().map { "\($0) +\(growth[$0]!)" }.joined(separator: ", ") + "\n"
        } else {
            text += "store: unknown (the session-recorder did not answer its status query, before the run within 2 s or after it within 15 s)\n"
        }
        if let verdict { text += verdict.line + "\n" }
        return text
    }
}

/// A ramp's runs, each with its `verdict` (which holds the goals), and the largest station count that held.
struct RampReport: Encodable {
    var runs: [LoadReport]
    var largestHeld: Int?
    enum CodingKeys: String, CodingKey {
        case runs
        case largestHeld = "largest_held"
    }
}

final class LockedReports: @unchecked Sendable {
    private let lock = NSLock()
    private var reports: [LoadReport] = []
    func append(_ report: LoadReport) { lock.withLock { reports.append(report) } }
    var all: [LoadReport] { lock.withLock { reports } }
}

/// What every run of one `vbt loadtest` shares.
struct LoadSettings: Sendable {
    var recording: String
    var duration: Double
    var stagger: Double
    var probes: Int
    var grace: Double
    var json: Bool
    var insecure: Bool
    /// Keep every timed rep (`--timings`).
    var keepTimings = false
    /// SCHED_RR priority of the listener and the replay while they run (0: the normal scheduler).
    var realtimePriority: Int32 = 0
    /// The folder the replay journals into (`--journal`), a subfolder a station count.
    var journal: String?
    /// With a journal: the most seconds to wait after the grace while a consumer still misses something.
    var settle: Double = 60
}

/// One run at one station count.
struct LoadRun {
    let settings: LoadSettings
    let plan: RecordingPlan
    let stations: Int
    let config: BusConfig
    let logger: Logger
    /// The reps counted (expected and received) are those completed this long before the replay stopped, s:
    /// a replayed message goes out when its recorded send time comes, a little after its readings' times.
    static let cutMarginS = 0.5
    /// How long after the grace the reps this subscriber missed are still waited for, s.
    static let missedRepsWaitS = 5.0
    static let programs = ["vbt-bus", "sensor-bridge", "rep-detector", "posture-evaluator", "session-recorder", "notifier", "coach-console"]

    func run(context: ZMQContext) throws -> LoadReport {
        let copies = max(1, Int((Double(stations) / Double(plan.stations.count)).rounded(.up)))
        let names = Set(plan.stations.flatMap { station in copies > 1 ? (1...copies).map { "\(station)-\($0)" } : [station] })
        let staggerS = copies > 1 ? settings.stagger : 0
        let spread = ReplayStagger(seconds: staggerS, copies: copies)
        // Probes taken from every recorded station in turn (their copies lift at different moments),
        // and spread over each station's copies (which start at different moments): name -> (recorded
        // station, copy from 0). Subscribing to sample.rack-1 brings rack-10 ... rack-199 too: copies
        // numbered with as many digits as the last one are taken where there are enough of them.
        let probeCount = min(settings.probes, names.count)
        var probes: [String: (recorded: String, copy: Int)] = [:]
        let probeNames = plan.stations.enumerated().flatMap { index, station -> [String] in
            let count = probeCount / plan.stations.count + (index < probeCount % plan.stations.count ? 1 : 0)
            guard copies > 1 else {
                if count > 0 { probes[station] = (station, 0) }
                return count > 0 ? [station] : []
            }
            var first = 1
            while first * 10 <= copies { first *= 10 }
            if copies - first + 1 < count { first = 1 }
            return (0..<count).map { j in
                let number = first + j * (copies - first + 1) / count
                probes["\(station)-\(number)"] = (station, number - 1)
                return "\(station)-\(number)"
            }
        }
        let subscriber = try Subscriber(
            context: context, config: config,
            prefixes: [RepMessage.topicPrefix, HeartbeatMessage.topicPrefix] + probeNames.map { SampleMessage.topic(station: $0) }, logger: logger)
        // A prefix brings other stations' samples too (sample.rack-1 brings rack-10...): only the probes' readings are read.
        subscriber.samples = .located
        // The reps this subscriber misses (the bus disconnects it, like any subscriber, when it falls behind) are fetched again.
        let missed = MissedRepsFetcher(transport: ZMQTransport(context: context, config: config), logger: logger)
        var nextFetch = 0.0
        // The completing reading of each rep received live, and of each fetched again: the report counts those
        // before the cut (`cutMarginS`).
        var receivedAt: [Double] = [], recoveredAt: [Double] = []
        // A message that does not decode is counted and logged as the subscriber counts what it refuses on receipt.
        func decoded<P: BusPayload>(_ message: BusMessage, as type: P.Type) -> P? {
            do { return try message.payload(as: type) } catch {
                subscriber.countMalformed(error, topic: message.topic)
                return nil
            }
        }
        let started = monotonicSeconds()
        while subscriber.stats.busHeartbeats == 0 {
            if busSilent(subscriber, since: started) { throw busUnreachable(config) }
            _ = try subscriber.next(timeoutMs: 100)
        }
        let store = storeRows(context, timeoutS: 2)
        // The listener (this thread, ZeroMQ's I/O thread) and the replay (which inherits it from this thread, and
        // is given it again once started) on the rep path's priority while the run lasts; refused, they stay as they were.
        let realtime = settings.realtimePriority
        if realtime > 0, RealtimeScheduling.apply(realtime) > 0 {
            logger.warning(
                "SCHED_RR refused (needs root or an RLIMIT_RTPRIO of \(realtime)): the listener and the replay run under the normal scheduler")
        }
        defer { if realtime > 0 { RealtimeScheduling.apply(0) } }
        var scheduling = LoadReport.Scheduling(listener: RealtimeScheduling.describe(0) ?? "other", replay: "unknown")
        let bridge = try startBridge(copies: copies, stagger: staggerS)
        if realtime > 0 { RealtimeScheduling.apply(realtime, to: bridge.processIdentifier) }
        defer {
            if bridge.isRunning {
                bridge.terminate()
                bridge.waitUntilExit()
            }
        }
        let machine = StallProbe()
        machine.start()
        defer { _ = machine.finish() }  // also when the run ends in an error
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)  // µs
        // Every timed rep's span (wall clock), to set aside those the computer itself stalled.
        var spans: [(from: Double, to: Double, micros: UInt64)] = []
        var window = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var stages = LoadStages()
        var windows: [LoadReport.Window] = []
        var slowest: [LoadReport.SlowRep] = []
        var timed: [LoadReport.SlowRep] = []
        var windowReps = 0
        var repsReceived = 0
        var probeReadings = 0
        // When the replay's first pass began, in sensor time (from a probe's first reading).
        var passStart = Double.infinity
        var firstProbeWall = 0.0
        // Per probe station: (last reading time, publish time) of its sample messages, oldest first.
        var published: [String: [(lastT: Double, ts: Double, sensor: JSONValue?)]] = [:]
        var firstInputs: [String: InputCounters] = [:], lastInputs: [String: InputCounters] = [:]
        let cpuBefore = Self.processes()
        let runStart = monotonicSeconds()
        var nextWindow = runStart + 5
        var stopAt = runStart + settings.duration
        var stopped = false
        var settleUntil = 0.0
        var stoppedWall = 0.0
        var replayUse: LoadReport.ProcessUse?
        while true {
            let now = monotonicSeconds()
            if !stopped && now >= stopAt {
                // The replay's own share of the computer, taken before it stops: it is the load, on the same cores.
                scheduling.replay = RealtimeScheduling.describe(process: bridge.processIdentifier) ?? "unknown"
                if let use = Self.processes()[bridge.processIdentifier] {
                    replayUse = .init(
                        name: LoadReport.replayName, pid: bridge.processIdentifier, cpuPct: 100 * use.cpuS / (now - runStart), rssMb: use.rssMb,
                        rssMaxMb: use.rssMaxMb)
                }
                try stopBridge(bridge)
                stopped = true
                stoppedWall = wallClockSeconds()
                stopAt = now + settings.grace
                settleUntil = stopAt + (settings.journal == nil ? 0 : settings.settle)
            } else if stopped && now >= stopAt {
                // A journalled replay answers on: waited for while a consumer still misses something; the reps this
                // subscriber missed, a few seconds more.
                let settling = now < settleUntil && consumerCounts(lastInputs, since: firstInputs).values.contains(where: { $0.outstanding > 0 })
                guard settling || (missed.tracker.missing > 0 && now < stopAt + Self.missedRepsWaitS) else { break }
            }
            if now >= nextFetch {
                nextFetch = now + 0.02
                for message in missed.poll(now: now) where names.contains(message.envelope.station) {
                    guard let rep = decoded(message, as: RepMessage.self) else { continue }
                    recoveredAt.append(rep.tInput ?? rep.tEnd)
                }
            }
            if now >= nextWindow {
                windows.append(
                    .init(
                        atS: now - runStart, p99Ms: window.totalCount > 0 ? Double(window.valueAtPercentile(99)) / 1000 : 0,
                        repsPerS: Double(windowReps) / 5))
                window.reset()
                windowReps = 0
                nextWindow += 5
                if !settings.json {
                    FileHandle.standardError.write(
                        Data(
                            String(
                                format: "  %3.0f s: %d reps, p99 %.1f ms so far\n", now - runStart, repsReceived,
                                histogram.totalCount > 0 ? Double(histogram.valueAtPercentile(99)) / 1000 : 0
                            ).utf8))
                }
            }
            guard let message = try subscriber.next(timeoutMs: 50) else { continue }
            let station = message.envelope.station
            switch message.envelope.type {
            case SampleMessage.type:
                // A prefix subscription to sample.rack-1 also brings rack-10, rack-11...: only the probes count.
                // Only the readings' times: a reading is not built (`BusMessage.readingTimes`).
                guard !stopped, let probe = probes[station],
                    let times = message.readingTimes() ?? decoded(message, as: SampleMessage.self)?.readings.times
                else { continue }
                guard let last = times.max(), let first = times.min() else { continue }
                probeReadings += times.count
                if passStart == .infinity {
                    // The first copy's first pass: this copy's readings are shifted by its group's delay.
                    passStart = first - (plan.firstReadingOffset[probe.recorded] ?? 0) - spread.groupDelay(spread.group(probe.copy))
                    firstProbeWall = wallClockSeconds()
                }
                // Changed in place: a copy taken out of the dictionary was copied whole at every append (a
                // probe's list holds up to 4,096 messages, and 100 probes send some 7,000 a second).
                published[station, default: []].append((last, message.envelope.ts, message.field("sensor")))
                if published[station]!.count > 4_096 { published[station]!.removeFirst(2_048) }
            case RepMessage.type:
                guard missed.heard(message), names.contains(station), let rep = decoded(message, as: RepMessage.self) else { continue }
                repsReceived += 1
                windowReps += 1
                // The completing reading (`t_input`, else `t_end`: proto/rep.schema.json): the sample message of the
                // rep's sensor that carried it (another sensor's message sent before it may hold readings as late).
                let completing = rep.tInput ?? rep.tEnd
                receivedAt.append(completing)
                let sensor = rep.sensor.map(JSONValue.string)
                if let list = published[station],
                    let index = list.firstIndex(where: { $0.lastT >= completing - 1e-6 && (sensor == nil || $0.sensor == sensor) })
                {
                    let arrived = wallClockSeconds()
                    let micros = UInt64(max(0, (arrived - list[index].ts) * 1e6))
                    _ = histogram.record(micros)
                    spans.append((list[index].ts, arrived, micros))
                    stages.record(
                        readingT: completing, samplePublished: list[index].ts, received: rep.receivedTs, repPublished: message.envelope.ts,
                        arrived: arrived)
                    _ = window.record(micros)
                    let timing = LoadReport.SlowRep(
                        station: station, repId: rep.repId, sensor: rep.sensor, latencyMs: Double(micros) / 1000, messagesAfter: list.count - index - 1,
                        arrivedTs: arrived, detectorMs: max(0, (message.envelope.ts - list[index].ts) * 1000))
                    if settings.keepTimings { timed.append(timing) }
                    slowest.append(timing)
                    slowest.sort { $0.latencyMs > $1.latencyMs }
                    if slowest.count > 5 { slowest.removeLast() }
                }
            case HeartbeatMessage.type:
                guard let heartbeat = decoded(message, as: HeartbeatMessage.self) else { continue }
                missed.note(heartbeat: heartbeat, envelope: message.envelope)
                guard let inputs = heartbeat.inputs, !station.hasPrefix("bridge-") else { continue }
                if firstInputs[station] == nil { firstInputs[station] = inputs }
                lastInputs[station] = inputs
            default:
                continue
            }
        }
        let elapsed = monotonicSeconds() - runStart
        let stalls = machine.finish()
        // What follows (the offline count of the expected reps) waits in line with the daemons catching up.
        if realtime > 0 { RealtimeScheduling.apply(0) }
        var outside = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        let stalledMs = spans.map { machine.stalledMs(from: $0.from, to: $0.to) }
        for (span, stalled) in zip(spans, stalledMs) where stalled == 0 { _ = outside.record(span.micros) }
        // `timed` (with --timings) holds the same reps as `spans`, in the same order.
        if timed.count == spans.count { for index in timed.indices { timed[index].stalledMs = stalledMs[index] } }
        for index in slowest.indices {
            slowest[index].stalledMs = machine.stalledMs(from: slowest[index].arrivedTs - slowest[index].latencyMs / 1000, to: slowest[index].arrivedTs)
        }
        let cpuAfter = Self.processes()
        var processes: [LoadReport.ProcessUse] = []
        for (pid, after) in cpuAfter.sorted(by: { ($0.value.name, $0.key) < ($1.value.name, $1.key) }) {
            guard let before = cpuBefore[pid] else { continue }
            processes.append(
                .init(
                    name: after.name, pid: pid, cpuPct: 100 * (after.cpuS - before.cpuS) / elapsed, rssMb: after.rssMb,
                    rssMaxMb: after.rssMaxMb))
        }
        if let replayUse { processes.append(replayUse) }
        let consumers = consumerCounts(lastInputs, since: firstInputs)
        // The reps the readings replayed hold, as the detector finds them offline, at every copy.
        // A replay shifts reading times to the wall clock at each pass's start: the replay ran until it was stopped,
        // each copy from its own delay on.
        let delays = (0..<copies).map(spread.delay)
        // Both counts stop at the same reading time, a little before the replay stopped: a rep counts, expected
        // and received, when its completing reading came before the cut (a replayed reading's time is its
        // publishing time, its group's delay aside: `ReplayStagger`).
        let cut = stoppedWall - Self.cutMarginS
        let readingDelays = (0..<copies).map { spread.groupDelay(spread.group($0)) }
        let expected = passStart.isFinite ? plan.expectedReps(replayedS: cut - passStart, delays: readingDelays) : 0
        let repsRecovered = recoveredAt.filter { $0 <= cut }.count
        let repsCounted = receivedAt.filter { $0 <= cut }.count + repsRecovered
        let repsAfterCut = receivedAt.count + recoveredAt.count - repsCounted
        // Readings a second: the probes' readings a station-second, times the station-seconds every copy replayed.
        let replayedS = stoppedWall - firstProbeWall
        let activeS = { (copy: Int) in max(0, replayedS - spread.delay(copy)) }
        let probeS = probes.values.reduce(0) { $0 + activeS($1.copy) }
        let allS = delays.indices.reduce(0) { $0 + activeS($1) } * Double(plan.stations.count)
        let readingsPerS = firstProbeWall > 0 && replayedS > 0 && probeS > 0 ? Double(probeReadings) / probeS * allS / replayedS : 0
        func latency(_ histogram: Histogram<UInt64>) -> LoadReport.Latency {
            let p = { (q: Double) in histogram.totalCount > 0 ? Double(histogram.valueAtPercentile(q)) / 1000 : 0 }
            return .init(p50: p(50), p99: p(99), max: Double(histogram.max) / 1000, count: Int(histogram.totalCount))
        }
        // A recorder that fell behind answers once it has written its backlog: it is given longer after the run.
        let growth = store.flatMap { before in
            storeRows(context, timeoutS: 15).map { after in after.mapValues { $0 }.merging(before) { $0 - $1 } }
        }
        return LoadReport(
            stations: names.count, durationS: elapsed, staggerS: staggerS, readingsPerS: readingsPerS,
            repsExpected: expected, repsReceived: repsCounted, repsRecovered: repsRecovered, repsMissed: missed.tracker.missing + missed.givenUp,
            repsAfterCut: repsAfterCut,
            latencyMs: latency(histogram), latencyMsOutsideStalls: latency(outside), machineStalls: stalls, scheduling: scheduling,
            lost: consumers.mapValues(\.lost), consumers: consumers, listener: subscriber.stats.totals, processes: processes, storeGrowth: growth,
            windows: windows,
            slowest: slowest, timed: timed, stages: stages.report)
    }

    /// The recorder's row counts, if it answers within `timeoutS`.
    private func storeRows(_ context: ZMQContext, timeoutS: Double) -> [String: Int]? {
        guard let client = try? QueryClient(context: context, config: config, timeoutS: timeoutS),
            let status = try? client.ask(.status, NoArgs())
        else { return nil }
        return status.rows
    }

    private func startBridge(copies: Int, stagger: Double) throws -> Process {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let process = Process()
        process.executableURL = here.appendingPathComponent("sensor-bridge")
        process.arguments =
            ["--replay", settings.recording, "--stations", "\(copies)", "--speed", "1", "--loop"]
            + (stagger > 0 ? ["--stagger", "\(stagger)"] : []) + (settings.insecure ? ["--insecure"] : [])
            + (settings.journal.map { ["--journal", "\($0)/\(stations)", "--linger", "\(settings.grace + settings.settle + 30)"] } ?? ["--no-journal"])
        var environment = ProcessInfo.processInfo.environment
        if let replayKey = environment["VBT_REPLAY_CERT"] { environment["VBT_CERT"] = replayKey }
        environment["VBT_PUB_ENDPOINT"] = config.pubEndpoint
        environment["VBT_SUB_ENDPOINT"] = config.subEndpoint
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        // Its log, to say why if it stops on its own (a key it may not use, a recording it cannot read).
        _ = FileManager.default.createFile(atPath: bridgeLog, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: bridgeLog) ?? FileHandle.nullDevice
        do { try process.run() } catch {
            reportProblem("vbt: cannot start \(process.executableURL!.path): \(error.localizedDescription); it is built beside vbt")
            throw ProgramExit()
        }
        return process
    }

    private var bridgeLog: String { NSTemporaryDirectory() + "vbt-loadtest-bridge-\(getpid()).log" }

    /// Stops the replay; one that stopped on its own before is an error, with the last of its log.
    private func stopBridge(_ process: Process) throws {
        defer { try? FileManager.default.removeItem(atPath: bridgeLog) }
        guard process.isRunning else {
            let log = (try? String(contentsOfFile: bridgeLog, encoding: .utf8)) ?? ""
            let last = log.split(separator: "\n").last.map(String.init) ?? "no log"
            reportProblem("vbt: the replaying sensor-bridge stopped by itself (exit \(process.terminationStatus)): \(last)")
            throw ProgramExit()
        }
        guard settings.journal != nil else {
            process.terminate()
            process.waitUntilExit()
            return
        }
        // Journalled: it stops publishing and answers replay requests until it is terminated after the run.
        kill(process.processIdentifier, SIGUSR1)
    }

    /// Each consumer's counts over the run, from its first and last heartbeats.
    private func consumerCounts(_ last: [String: InputCounters], since first: [String: InputCounters]) -> [String: LoadReport.Consumer] {
        last.reduce(into: [:]) { counts, entry in counts[entry.key] = .init(last: entry.value, since: first[entry.key] ?? InputCounters()) }
    }

    /// A process's name in the report: the program's, and a rep-detector's shard when several
    /// split the gym (`--shard 2/3`: `rep-detector-2`, as its heartbeat names it).
    static func shardName(program: String, arguments: ArraySlice<String>) -> String {
        guard program == "rep-detector" else { return program }
        var value: String?
        for (index, word) in zip(arguments.indices, arguments) {
            if word == "--shard", index + 1 < arguments.endIndex { value = arguments[index + 1] }
            if word.hasPrefix("--shard=") { value = String(word.dropFirst("--shard=".count)) }
        }
        let parts = value?.split(separator: "/") ?? []
        guard parts.count == 2, let shard = Int(parts[0]), let shards = Int(parts[1]), shards > 1 else { return program }
        return "rep-detector-\(shard)"
    }

    /// Every vbt program on this computer: its name (a rep-detector's with its shard), CPU seconds
    /// so far, memory now and the most it has held (proc(5)).
    static func processes() -> [Int32: (name: String, cpuS: Double, rssMb: Double, rssMaxMb: Double)] {
        var found: [Int32: (name: String, cpuS: Double, rssMb: Double, rssMaxMb: Double)] = [:]
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let argv = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard let argv0 = argv.first else { continue }
            let program = URL(fileURLWithPath: argv0).lastPathComponent
            let name = shardName(program: program, arguments: argv.dropFirst())
            guard programs.contains(program), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            let status = (try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8)) ?? ""
            // A line such as `VmRSS:     1234 kB`, in MB (0 when absent).
            func megabytes(_ key: String) -> Double {
                guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key) }),
                    let kb = Double(line.split(separator: " ").dropFirst().first ?? "")
                else { return 0 }
                return kb / 1024
            }
            found[pid] = (name, (user + system) / ticks, megabytes("VmRSS:"), megabytes("VmHWM:"))
        }
        return found
    }
}
