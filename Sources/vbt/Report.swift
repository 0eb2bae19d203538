import ArgumentParser
import Foundation
import VBTBus
import VBTQuery

// `vbt report`: the session report a coach sends. The recorder's `report` query gives the day
// (SessionReport in VBTQuery); this prints it as text, writes it as one HTML page, or prints
// that page to PDF with headless Chromium.

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An athlete's session report for one day: sets, reps, velocity loss, e1RM trend; as text, HTML or PDF.",
        discussion: """
            Per session that day: each set's load, reps, best and mean velocity, velocity loss (last rep against the
            fastest), how it ended, RPE, tempo compliance; the attempts the detector refused; each exercise's e1RM that
            day with its trend over --weeks. Readiness and tempo read "not measured" until they are recorded.
            --html writes one self-contained page (inline CSS and SVG, no script) that prints on A4; --pdf prints that
            page with headless Chromium, found as --chromium, else VBT_CHROMIUM, else chromium, chromium-browser or
            google-chrome on PATH.
            """)
    @Argument(help: "Athlete id.") var athlete: String
    @Option(help: "The day, YYYY-MM-DD in this computer's time zone (default: the day of the athlete's latest set).") var date: String?
    @Option(help: "Weeks of e1RM trend up to the day (1-104).") var weeks = 8
    @Option(help: "Write the report as an HTML page to this file.") var html: String?
    @Option(help: "Write the report as a PDF to this file (needs Chromium).") var pdf: String?
    @Option(help: "The Chromium program for --pdf (overrides VBT_CHROMIUM).") var chromium: String?
    @OptionGroup var recorder: RecorderOptions

    func validate() throws {
        if let date, SessionReport.dayNumber(date) == nil { throw ValidationError("--date must be YYYY-MM-DD, not \(date)") }
        guard (1...104).contains(weeks) else { throw ValidationError("--weeks must be 1 to 104") }
    }

    func run() throws {
        let args = ReportArgs(athlete: athlete, date: date, utcOffsetS: localUTCOffset, weeks: weeks)
        let report = try recorder.withClient { try $0.ask(.report, args) }
        var written: [String] = []
        if let html {
            try write(report.html, to: html)
            written.append("html: \(html)")
        }
        if let pdf {
            try printPDF(report, to: pdf)
            written.append("pdf: \(pdf)")
        }
        recorder.output(report) { report.text + written.map { $0 + "\n" }.joined() }
    }

    func write(_ text: String, to path: String) throws {
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            reportProblem("vbt: cannot write \(path): \(error.localizedDescription)")
            throw ExitCode.failure
        }
    }

    /// Prints the page to `path` with headless Chromium, from a private temporary folder (the
    /// page and a throwaway browser profile) removed afterwards.
    func printPDF(_ report: SessionReport, to path: String) throws {
        guard let browser = Self.findChromium(chromium) else {
            reportProblem(
                "vbt: --pdf needs Chromium and none was found (give --chromium PATH or VBT_CHROMIUM, or install chromium); "
                    + "--html FILE writes the page, which any browser prints")
            throw ExitCode.failure
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-report-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let page = folder.appendingPathComponent("report.html")
        let target = URL(fileURLWithPath: path).standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(report.html.utf8).write(to: page)
            try? FileManager.default.removeItem(at: target)
        } catch {
            reportProblem("vbt: cannot prepare the page for Chromium: \(error.localizedDescription)")
            throw ExitCode.failure
        }
        var arguments = [
            "--headless", "--disable-gpu", "--no-first-run", "--user-data-dir=\(folder.appendingPathComponent("profile").path)",
            "--print-to-pdf=\(target.path)", "--no-pdf-header-footer", page.absoluteString,
        ]
        // Chromium refuses to run as root with its sandbox; the page is our own, with no script.
        if geteuid() == 0 { arguments.insert("--no-sandbox", at: 0) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: browser)
        process.arguments = arguments
        // Its messages go to a file, not a pipe: a helper process it leaves behind cannot hold us up.
        let log = folder.appendingPathComponent("chromium.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try? FileHandle(forWritingTo: log)
        do { try process.run() } catch {
            reportProblem("vbt: cannot start \(browser): \(error.localizedDescription); --html FILE writes the page without it")
            throw ExitCode.failure
        }
        // A browser that hangs (a locked profile, a missing display library) is stopped, not waited on forever.
        let deadline = Date().addingTimeInterval(Self.chromiumTimeoutS)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            reportProblem("vbt: \(browser) did not print \(path) within \(Int(Self.chromiumTimeoutS)) s; --html FILE writes the page without it")
            throw ExitCode.failure
        }
        let said = (try? Data(contentsOf: log)) ?? Data()
        let head = (try? FileHandle(forReadingFrom: target))?.readData(ofLength: 5)
        guard process.terminationStatus == 0, head == Data("%PDF-".utf8) else {
            let detail = String(decoding: said, as: UTF8.self).split(separator: "\n").suffix(3).joined(separator: " | ")
            reportProblem("vbt: \(browser) did not print \(path) (exit \(process.terminationStatus)): \(detail)")
            throw ExitCode.failure
        }
    }

    /// How long Chromium may take to print the page.
    static let chromiumTimeoutS = 120.0

    /// `given`, else VBT_CHROMIUM, else the first of chromium, chromium-browser, google-chrome on PATH.
    static func findChromium(_ given: String?) -> String? {
        if let named = given ?? ProcessInfo.processInfo.environment["VBT_CHROMIUM"], !named.isEmpty {
            return named.contains("/") ? (FileManager.default.isExecutableFile(atPath: named) ? named : nil) : onPath(named)
        }
        return ["chromium", "chromium-browser", "google-chrome"].lazy.compactMap(onPath).first
    }

    static func onPath(_ name: String) -> String? {
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        return folders.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
