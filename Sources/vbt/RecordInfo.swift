import ArgumentParser
import Foundation
import VBTBus
import VBTWire

/// `vbt record info FILE`: what a recording holds, before it is replayed or evaluated.
struct RecordInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "What a recording holds: its stations, message types and rates, duration, readings, unreadable lines.")

    @Argument(help: "The recording (JSON Lines, or gzip of them).")
    var file: String

    @Flag(help: "Print JSON (for scripts) instead of a table.")
    var json = false

    struct Summary: Encodable {
        var file: String
        var bytes: Int
        var compressed: Bool
        var lines: Int
        var unreadable: Int
        var firstUnreadable: String?
        var durationS: Double
        var firstTs: Double?
        var lastTs: Double?
        var stations: [String]
        /// Messages by type, and per second over the duration.
        var types: [String: Int]
        var ratesPerS: [String: Double]
        /// Sensor readings by kind (imu, distance, posture), inside the `sample` messages.
        var readings: [String: Int]

        enum CodingKeys: String, CodingKey {
            case file, bytes, compressed, lines, unreadable, stations, types, readings
            case firstUnreadable = "first_unreadable"
            case durationS = "duration_s"
            case firstTs = "first_ts"
            case lastTs = "last_ts"
            case ratesPerS = "rates_per_s"
        }
    }

    func run() throws {
        var summary = Summary(
            file: file, bytes: 0, compressed: false, lines: 0, unreadable: 0, durationS: 0, stations: [], types: [:], ratesPerS: [:], readings: [:])
        var stations = Set<String>()
        do {
            try RecordingReader.forEachLine(path: file) { line in
                switch line {
                case .success(let line):
                    summary.lines += 1
                    summary.durationS = max(summary.durationS, line.t)
                    let envelope = line.message.envelope
                    stations.insert(envelope.station)
                    summary.types[envelope.type, default: 0] += 1
                    summary.firstTs = min(summary.firstTs ?? envelope.ts, envelope.ts)
                    summary.lastTs = max(summary.lastTs ?? envelope.ts, envelope.ts)
                    if envelope.type == SampleMessage.type, let sample = try? line.message.payload(as: SampleMessage.self) {
                        summary.readings[sample.readings.sensor, default: 0] += sample.readings.count
                    }
                case .failure(let bad):
                    summary.unreadable += 1
                    if summary.firstUnreadable == nil { summary.firstUnreadable = bad.description }
                }
            }
        } catch {
            reportProblem("vbt: \(error.description)")
            throw ExitCode.failure
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: file)
        summary.bytes = (attributes?[.size] as? NSNumber)?.intValue ?? 0
        summary.compressed =
            FileHandle(forReadingAtPath: file).map { handle in
                defer { try? handle.close() }
                return (try? handle.read(upToCount: 2)) == Data([0x1F, 0x8B])
            } ?? false
        summary.stations = stations.sorted()
        if summary.durationS > 0 {
            summary.ratesPerS = summary.types.mapValues { (Double($0) / summary.durationS * 10).rounded() / 10 }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: (try? encoder.encode(summary)) ?? Data(), as: UTF8.self))
            return
        }
        var text = "\(file): \(summary.bytes) bytes\(summary.compressed ? " (gzip)" : ""), \(summary.lines) messages over "
        text += String(format: "%.1f s", summary.durationS)
        if let first = summary.firstTs, let last = summary.lastTs {
            let format = ISO8601DateFormatter()
            text += ", \(format.string(from: Date(timeIntervalSince1970: first))) to \(format.string(from: Date(timeIntervalSince1970: last)))"
        }
        text += "\nstations: \(summary.stations.joined(separator: ", "))\n"
        for type in summary.types.keys.sorted() {
            text += "  \(type): \(summary.types[type]!) (\(String(format: "%.1f", summary.ratesPerS[type] ?? 0))/s)\n"
        }
        if !summary.readings.isEmpty {
            text += "readings: " + summary.readings.keys.sorted().map { "\($0) \(summary.readings[$0]!)" }.joined(separator: ", ") + "\n"
        }
        if summary.unreadable > 0 { text += "unreadable lines: \(summary.unreadable) (first: \(summary.firstUnreadable ?? ""))\n" }
        print(text, terminator: "")
    }
}
