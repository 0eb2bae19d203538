import ArgumentParser
import Foundation
import Logging
import VBTBus
import VBTCommandLine
import VBTConsole
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

/// `vbt watch`: every station live in the terminal, the first coach console.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show every station live: athlete, exercise, last rep, velocity loss, posture, rest timer, sensors, alerts.",
        discussion: """
            Plain ANSI escape codes on the terminal's alternate screen, redrawn every --refresh seconds.
            q, Ctrl-C or SIGTERM quits and restores the terminal.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: "Seconds between redraws.")
    var refresh: Double = 0.5

    func validate() throws {
        guard refresh >= 0.05, refresh <= 10 else { throw ValidationError("--refresh must be between 0.05 and 10 seconds") }
    }

    func run() async throws {
        var logger = bootstrapLogging(label: "vbt.watch")
        logger.logLevel = .error  // the screen is the output; log lines would tear it
        let config = bus.config, refresh = self.refresh, quietLogger = logger
        try await runLoop("vbt.watch", logger: logger) { context in
            let terminal = TerminalScreen()
            defer { terminal.restore() }
            let subscriber = try Subscriber(
                context: context, config: config,
                prefixes: MessageTypes.prefixes(
                    RepMessage.self, SetMessage.self, PostureMessage.self, TimerMessage.self, WorkoutMessage.self, StatusMessage.self, AlertMessage.self,
                    CommandMessage.self), logger: quietLogger)
            // The console's own board: the terminal and the browser draw the same model.
            var board = ConsoleBoard()
            var nextDraw = 0.0
            // The bus's heartbeat comes every second: three without one and the screen says so.
            var heardBus = (count: 0, at: monotonicSeconds())
            while true {
                if let message = try subscriber.next(timeoutMs: 20) { board.apply(message, now: monotonicSeconds()) }
                if terminal.quitPressed() { return }
                let now = monotonicSeconds()
                if subscriber.stats.busHeartbeats != heardBus.count { heardBus = (subscriber.stats.busHeartbeats, now) }
                guard now >= nextDraw else { continue }
                nextDraw = now + refresh
                let size = terminal.size()
                var lines = board.textScreen(now: now, width: size.columns, height: size.lines - 1, clock: clockText())
                if now - heardBus.at > busTimeoutS {
                    let banner = "BUS NOT REACHABLE at \(config.subEndpoint): nothing below is live (is vbt-bus running?)"
                    lines.insert(String(banner.prefix(size.columns)), at: 0)
                }
                terminal.draw(lines)
            }
        }
    }
}

private func clockText() -> String {
    var now = time(nil)
    var parts = tm()
    localtime_r(&now, &parts)
    return String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
}

/// The terminal while watching: alternate screen, hidden cursor, keys without Enter
/// (Ctrl-C still signals), all restored on the way out.
private final class TerminalScreen {
    private var saved = termios()
    private let interactive: Bool
    private var restored = false

    init() {
        interactive = isatty(STDIN_FILENO) == 1
        if interactive {
            tcgetattr(STDIN_FILENO, &saved)
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 0
                cc[Int(VTIME)] = 0
            }
            tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        }
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    deinit { restore() }

    /// Puts the terminal back as it was.
    func restore() {
        guard !restored else { return }
        restored = true
        write("\u{1B}[?25h\u{1B}[?1049l")
        if interactive { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
    }

    /// Whether q (or Q) was typed since the last look.
    func quitPressed() -> Bool {
        guard interactive else { return false }
        var pollfd = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&pollfd, 1, 0) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(STDIN_FILENO, &buffer, buffer.count)
        return count > 0 && buffer[..<count].contains { $0 == UInt8(ascii: "q") || $0 == UInt8(ascii: "Q") }
    }

    /// Columns and lines, 80 x 24 when unknown.
    func size() -> (columns: Int, lines: Int) {
        var window = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 {
            return (Int(window.ws_col), Int(window.ws_row))
        }
        return (80, 24)
    }

    /// Redraws the whole screen in one write.
    func draw(_ lines: [String]) {
        write("\u{1B}[H" + lines.joined(separator: "\u{1B}[K\n") + "\u{1B}[K\u{1B}[J")
    }

    private func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeMutableBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
        bytes.removeAll()
    }
}
