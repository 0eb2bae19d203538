import Foundation
import Logging
import Synchronization
import VBTBus
import VBTWire

#if canImport(Glibc)
import Glibc
#endif

// Helpers for tests that run the real programs: find the built binaries,
// pick free loopback ports, start processes with captured output, and wait
// on conditions with a deadline instead of sleeping.

/// Where the built programs are: `VBT_BIN_DIR`, else `<package>/.build/debug`.
public func binDirectory() -> URL {
    if let dir = environment("VBT_BIN_DIR") { return URL(fileURLWithPath: dir) }
    let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return packageRoot.appendingPathComponent(".build/debug")
}

/// The package's root folder (for proto/ and fixtures).
public func packageRoot() -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// A TCP port on 127.0.0.1 that is free now and that no outgoing connection
/// will take before a program binds it.
///
/// The port comes from below the kernel's ephemeral range
/// (`ip_local_port_range`): `connect()` takes its source ports from that
/// range, so a port handed out of it can be taken by any reconnecting socket in
/// the moment between this check and the program's `bind`. Below it only
/// listeners bind, and each test process walks its own sequence (started from
/// its pid) so two runs do not hand out the same port; a port in use is skipped.
public func freeLoopbackPort() -> Int {
    // A kernel whose ephemeral range leaves no room (`1024 65535`): the kernel's choice, as before.
    guard let range = listenerPortRange else {
        guard let port = bindLoopback(0) else { preconditionFailure("could not bind a loopback port") }
        return port
    }
    return portSequence.withLock { next in
        for _ in 0..<range.count {
            let port = range.lowerBound + next % range.count
            next += 1
            if bindLoopback(port) != nil { return port }
        }
        preconditionFailure("no free loopback port in \(range)")
    }
}

/// Ports outside the ephemeral range: 10000 up to its start (or above its end); nil when
/// neither leaves 4,096.
private let listenerPortRange: Range<Int>? = {
    let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    let (low, high) = bounds.count == 2 ? (bounds[0], bounds[1]) : (32768, 60999)
    if low - 10000 >= 4096 { return 10000..<low }
    if 65535 - high >= 4096 { return (high + 1)..<65536 }
    return nil
}()

/// Where this process starts in the range: its pid scattered by Knuth's multiplicative hash, so
/// processes with neighbouring pids (a test and the script it starts) start far apart.
private let portSequence = Mutex<Int>(Int((UInt64(getpid()) &* 2_654_435_761) % 1_000_003))

/// Binds a socket to 127.0.0.1:`port` (0: a port the kernel picks from its ephemeral range)
/// and closes it again: the port it had, nil when it was taken.
private func bindLoopback(_ port: Int) -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    precondition(fd >= 0, "socket() failed")
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}

/// A fresh pair of bus endpoints on free loopback ports.
public func freeBusConfig() -> BusConfig {
    var config = BusConfig()
    config.pubEndpoint = "tcp://127.0.0.1:\(freeLoopbackPort())"
    config.subEndpoint = "tcp://127.0.0.1:\(freeLoopbackPort())"
    // Its own query endpoint too: a test's programs never ask another test's recorder.
    config.queryEndpoint = "tcp://127.0.0.1:\(freeLoopbackPort())"
    return config
}

extension BusConfig {
    /// The environment that points programs at this bus.
    public var environmentVariables: [String: String] {
        ["VBT_PUB_ENDPOINT": pubEndpoint, "VBT_SUB_ENDPOINT": subEndpoint, "VBT_QUERY_ENDPOINT": queryEndpoint]
    }
}

/// Polls `condition` every `intervalS` until it holds or `timeoutS` passes.
/// Returns whether it held.
@discardableResult
public func waitUntil(timeoutS: Double, intervalS: Double = 0.02, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = monotonicSeconds() + timeoutS
    while true {
        if try condition() { return true }
        if monotonicSeconds() >= deadline { return false }
        usleep(UInt32(intervalS * 1_000_000))
    }
}

/// A program started by a test, with stdout and stderr captured to files.
/// Killed when released, so a failing test leaves nothing running.
public final class ManagedProcess: @unchecked Sendable {
    /// The program's name, for messages.
    public let name: String
    private let process = Process()
    /// Where stdout goes.
    public let stdoutURL: URL
    /// Where stderr goes.
    public let stderrURL: URL

    /// Starts `program` (a name in `binDirectory()`) with arguments and extra environment.
    public init(_ program: String, _ arguments: [String], environment extra: [String: String] = [:], workDirectory: URL) throws {
        name = program
        stdoutURL = workDirectory.appendingPathComponent("\(program)-\(UUID().uuidString.prefix(8)).out")
        stderrURL = workDirectory.appendingPathComponent("\(program)-\(UUID().uuidString.prefix(8)).err")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.executableURL = binDirectory().appendingPathComponent(program)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        // Process tests run plaintext on loopback, said explicitly (proto/security.md);
        // a test of the keys passes them and VBT_INSECURE="" in `extra`.
        env["VBT_INSECURE"] = env["VBT_INSECURE"] ?? "1"
        for (key, value) in extra { env[key] = value }
        process.environment = env
        process.currentDirectoryURL = workDirectory
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The process id.
    public var pid: Int32 { process.processIdentifier }
    /// Whether it is still running.
    public var isRunning: Bool { process.isRunning }

    /// What it wrote to stderr so far.
    public var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }
    /// What it wrote to stdout so far.
    public var stdoutText: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }

    /// Waits until stderr contains `text`; false on timeout or exit.
    public func waitForStderr(_ text: String, timeoutS: Double) -> Bool {
        waitUntil(timeoutS: timeoutS) { stderrText.contains(text) || !process.isRunning } && stderrText.contains(text)
    }

    /// Sends a signal.
    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to end; returns its exit status, or nil on timeout.
    public func waitForExit(timeoutS: Double) -> Int32? {
        guard waitUntil(timeoutS: timeoutS, { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// SIGTERM, then waits; returns the exit status or nil if it did not stop in time.
    public func terminate(timeoutS: Double = 10) -> Int32? {
        signal(SIGTERM)
        return waitForExit(timeoutS: timeoutS)
    }
}

/// A temporary folder for one test, removed when released.
public final class TemporaryDirectory: @unchecked Sendable {
    /// Its location.
    public let url: URL

    /// Creates an empty folder under the system's temporary directory.
    public init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("vbt-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// A path inside the folder.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Reads a stats file written by `vbt record --stats`, or nil while it does not exist yet.
public func readStats(_ path: String) -> SubscriberStats? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return try? JSONDecoder().decode(SubscriberStats.self, from: data)
}

/// One line of a recording, decoded.
public struct RecordedLine: Sendable {
    /// Seconds since the first line.
    public var t: Double
    /// The topic.
    public var topic: String
    /// The message's JSON object.
    public var msg: JSONObject
}

/// Reads a recording (proto/README.md, "Recordings") line by line.
public func readRecording(_ path: String) throws -> [RecordedLine] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    var lines: [RecordedLine] = []
    for line in data.split(separator: 0x0A) where !line.isEmpty {
        guard case .object(let object) = try JSONParser.parse(Array(line)),
            case .number(let t)? = object["t"], case .string(let topic)? = object["topic"],
            case .object(let msg)? = object["msg"]
        else { throw RecordingError("not a recording line: \(String(decoding: line.prefix(120), as: UTF8.self))") }
        lines.append(RecordedLine(t: t, topic: topic, msg: msg))
    }
    return lines
}

/// A pseudo-terminal pair: the test writes device bytes to `master`, the
/// program under test opens `slavePath` as if it were a USB serial sensor.
public final class PseudoTerminal: @unchecked Sendable {
    /// The controlling side, kept by the test.
    public private(set) var master: Int32
    /// The device path for the program under test (e.g. /dev/pts/7).
    public let slavePath: String
    // Held open so the pair stays usable before the program opens it.
    private var slave: Int32

    /// Opens a new pair.
    public init() throws {
        // posix_openpt/grantpt/unlockpt by hand (Swift's Glibc module leaves
        // them out): open the multiplexer, unlock, ask for the pts number.
        // TIOCSPTLCK and TIOCGPTN are ioctl numbers built by macros Swift cannot import.
        let TIOCSPTLCK: UInt = 0x4004_5431, TIOCGPTN: UInt = 0x8004_5430
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, TIOCSPTLCK, &unlock) == 0, ioctl(master, TIOCGPTN, &number) == 0 else {
            throw RecordingError("cannot open a pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        slavePath = "/dev/pts/\(number)"
        slave = open(slavePath, O_RDWR | O_NOCTTY)
        var settings = termios()
        tcgetattr(slave, &settings)
        cfmakeraw(&settings)
        tcsetattr(slave, TCSANOW, &settings)
    }

    deinit { closeAll() }

    /// Writes device bytes.
    public func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(master, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Closes both sides: the program sees the device go away.
    public func closeAll() {
        if slave >= 0 { close(slave); slave = -1 }
        if master >= 0 { close(master); master = -1 }
    }
}

/// A subscriber on `config`'s bus, returned once the bus has its subscription
/// (its first `heartbeat.bus` arrived); nil if that did not happen in `timeoutS`.
public func connectedSubscriber(
    context: ZMQContext, config: BusConfig, prefixes: [String], route: String? = nil, timeoutS: Double = 20
) throws -> Subscriber? {
    var logger = Logger(label: "test.subscriber")
    logger.logLevel = .error
    let subscriber = try Subscriber(
        transport: ZMQTransport(context: context, config: config), prefixes: prefixes, route: route, logger: logger)
    let connected = try waitUntil(timeoutS: timeoutS, intervalS: 0) {
        _ = try subscriber.next(timeoutMs: 50)
        return subscriber.stats.busHeartbeats > 0
    }
    return connected ? subscriber : nil
}

/// A bus of its own for one process test: a folder, free endpoints (the
/// query endpoint too) and a running `vbt-bus`, stopped when released.
public final class TestBus: @unchecked Sendable {
    public let dir: TemporaryDirectory
    public let config: BusConfig
    public let context = ZMQContext()
    public let process: ManagedProcess
    /// The environment that points programs at this bus.
    public var environment: [String: String] { config.environmentVariables }

    /// Starts the bus.
    public init() throws {
        dir = try TemporaryDirectory()
        config = freeBusConfig()
        process = try ManagedProcess("vbt-bus", ["--heartbeat-interval", "0.1"], environment: config.environmentVariables, workDirectory: dir.url)
    }

    /// Starts `program` on this bus, in its folder.
    public func start(_ program: String, _ arguments: [String]) throws -> ManagedProcess {
        try ManagedProcess(program, arguments, environment: environment, workDirectory: dir.url)
    }

    deinit { _ = process.terminate() }
}
