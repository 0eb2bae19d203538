import Foundation
import HummingbirdBcrypt
import Synchronization

/// A paired screen without a password: a rack display (one station's screen) or an athlete's
/// phone (that athlete's own pages, as the athlete's account sees them). Only bcrypt hashes are
/// kept: of the pairing code (to pair once, and to remove by code) and of the screen's session
/// secret (set at pairing; the cookie holds `id.secret`).
public struct ConsoleDisplay: Sendable, Equatable {
    /// What a paired screen is for, and so all it may reach.
    public enum Scope: Sendable, Equatable {
        /// A rack display: this station's page.
        case station(String)
        /// An athlete's phone: this athlete's own pages.
        case athlete(String)
    }

    /// Random, 8 hex digits: names the display in `list` and in its session cookie.
    public var id: String
    public var scope: Scope
    public var codeHash: String
    /// The session secret's hash once the display has paired; nil before.
    public var secretHash: String?
    /// Unix seconds.
    public var addedAt: Double
    public var pairedAt: Double?

    public var isPaired: Bool { secretHash != nil }

    /// A rack display's station; nil for a phone.
    public var station: String? {
        if case .station(let station) = scope { station } else { nil }
    }

    /// A phone's athlete; nil for a rack display.
    public var athlete: String? {
        if case .athlete(let athlete) = scope { athlete } else { nil }
    }

    /// What it is for, as `vbt console display list` says it: the station, or `phone of ATHLETE`.
    public var purpose: String {
        switch scope {
        case .station(let station): station
        case .athlete(let athlete): "phone of " + athlete
        }
    }
}

/// The displays file: `<users>.displays` beside the accounts file, a line
/// `display:id:station:code-hash:secret-hash-or--:added:paired-or--` per rack display and
/// `phone:id:athlete:...` (the same fields) per athlete's phone, mode 0600,
/// replaced by rename under an advisory lock (`vbt console display` and the console's pairing
/// both write it). The running console reads it again when it changes, so a removed display
/// is refused at once.
public enum DisplaysFile {
    /// A pairing code: 8 symbols of Crockford's base 32 (no I, L, O, U), 40 bits from the
    /// system's CSPRNG, written XXXX-XXXX. Online guessing is bounded by the console's limit
    /// on failed pairings; a code pairs once, within `codeLifetimeS`.
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    /// Seconds a code can be used after `display add`.
    public static let codeLifetimeS = 24 * 3_600.0

    /// The displays file that goes with an accounts file.
    public static func path(forUsers users: String) -> String { users + ".displays" }

    /// A new pairing code, XXXX-XXXX.
    public static func newCode() -> String {
        var generator = SystemRandomNumberGenerator()
        let symbols = (0..<8).map { _ in alphabet[Int(generator.next(upperBound: UInt32(alphabet.count)))] }
        return String(symbols[0..<4]) + "-" + String(symbols[4..<8])
    }

    /// A code as typed (any case, spaces or dashes, O for 0, I or L for 1) in its canonical
    /// XXXX-XXXX form; nil when it cannot be one.
    public static func normalize(code: String) -> String? {
        var symbols: [Character] = []
        for character in code.uppercased() where character != "-" && character != " " {
            let mapped: Character = character == "O" ? "0" : (character == "I" || character == "L") ? "1" : character
            guard alphabet.contains(mapped), symbols.count < 8 else { return nil }
            symbols.append(mapped)
        }
        guard symbols.count == 8 else { return nil }
        return String(symbols[0..<4]) + "-" + String(symbols[4..<8])
    }

    /// A display's session secret: 256 bits from the system's CSPRNG, in hex.
    public static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    public static func parse(_ text: String) throws(AccountError) -> [ConsoleDisplay] {
        var displays: [ConsoleDisplay] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let parts = trimmed.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 7, parts[0] == "display" || parts[0] == "phone", !parts[2].isEmpty, parts[3].hasPrefix("$2"),
                parts[4] == "-" || parts[4].hasPrefix("$2"), let added = Double(parts[5]), parts[6] == "-" || Double(parts[6]) != nil
            else {
                throw AccountError(
                    "line \(number + 1) is not display:id:station:code-hash:secret-hash:added:paired or phone:id:athlete:code-hash:secret-hash:added:paired")
            }
            displays.append(
                ConsoleDisplay(
                    id: parts[1], scope: parts[0] == "phone" ? .athlete(parts[2]) : .station(parts[2]), codeHash: parts[3],
                    secretHash: parts[4] == "-" ? nil : parts[4], addedAt: added, pairedAt: Double(parts[6])))
        }
        return displays
    }

    public static func load(path: String) throws(AccountError) -> [ConsoleDisplay] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw AccountError("cannot read the displays file \(path): \(error.localizedDescription)")
        }
        do { return try parse(text) } catch { throw AccountError("\(path): \(error.description)") }
    }

    /// Adds a display for `station`; returns it and its pairing code (shown once, kept hashed).
    public static func add(path: String, station: String, now: Double = Date().timeIntervalSince1970) throws(AccountError) -> (ConsoleDisplay, String) {
        try add(path: path, scope: .station(station), now: now)
    }

    /// Adds an athlete's phone; returns it and its pairing code (shown once, kept hashed). The
    /// athlete's id is checked as an athlete account's is.
    public static func add(path: String, athlete: String, now: Double = Date().timeIntervalSince1970) throws(AccountError) -> (ConsoleDisplay, String) {
        try AccountsFile.validate(athlete: athlete)
        return try add(path: path, scope: .athlete(athlete), now: now)
    }

    static func add(path: String, scope: ConsoleDisplay.Scope, now: Double) throws(AccountError) -> (ConsoleDisplay, String) {
        let code = newCode()
        var generator = SystemRandomNumberGenerator()
        let id = String(format: "%08x", generator.next() as UInt32)
        let display = ConsoleDisplay(
            id: id, scope: scope, codeHash: Bcrypt.hash(code, cost: AccountsFile.cost), secretHash: nil, addedAt: now, pairedAt: nil)
        try update(path: path) { $0.append(display) }
        return (display, code)
    }

    /// Removes the displays that `what` names: a pairing code, a station, or a display's id.
    /// Returns those removed (none when nothing matched).
    public static func remove(path: String, _ what: String) throws(AccountError) -> [ConsoleDisplay] {
        let code = normalize(code: what)
        return try remove(path: path) { display in
            display.station == what || display.id == what || code.map { Bcrypt.verify($0, hash: display.codeHash) } == true
        }
    }

    /// Removes every phone of `athlete`; returns those removed.
    public static func remove(path: String, athlete: String) throws(AccountError) -> [ConsoleDisplay] {
        try remove(path: path) { $0.athlete == athlete }
    }

    /// Removes the display `id` alone (no bcrypt: a phone logging itself out); returns it, if it was there.
    public static func remove(path: String, id: String) throws(AccountError) -> ConsoleDisplay? {
        try remove(path: path) { $0.id == id }.first
    }

    static func remove(path: String, where matches: (ConsoleDisplay) -> Bool) throws(AccountError) -> [ConsoleDisplay] {
        var removed: [ConsoleDisplay] = []
        try update(path: path) { displays in
            removed = displays.filter(matches)
            displays.removeAll { display in removed.contains { $0.id == display.id } }
        }
        return removed
    }

    /// Loads, changes and writes the file under an exclusive lock on `<path>.lock`, so the
    /// console's pairing and `vbt console display` never lose each other's change.
    public static func update(path: String, _ change: (inout [ConsoleDisplay]) throws(AccountError) -> Void) throws(AccountError) {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let lock = open(path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw AccountError("cannot open \(path).lock: \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw AccountError("cannot lock \(path).lock: \(String(cString: strerror(errno)))") }
        }
        var displays = try load(path: path)
        try change(&displays)
        try write(displays, path: path)
    }

    static func write(_ displays: [ConsoleDisplay], path: String) throws(AccountError) {
        var text = """
            # vbt coach-console rack displays and athletes' phones (vbt console display add|remove|list):
            # display:id:station:code-hash:secret-hash:added:paired or phone:id:athlete:code-hash:secret-hash:added:paired

            """
        for display in displays {
            let paired = display.pairedAt.map { String(Int($0)) } ?? "-"
            let (kind, what) =
                switch display.scope {
                case .station(let station): ("display", station)
                case .athlete(let athlete): ("phone", athlete)
                }
            text += "\(kind):\(display.id):\(what):\(display.codeHash):\(display.secretHash ?? "-"):\(Int(display.addedAt)):\(paired)\n"
        }
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw AccountError("cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else { throw AccountError("cannot replace \(path): \(String(cString: strerror(errno)))") }
    }
}

/// The displays and phones a running console pairs and checks: the file, read again when it
/// changes. A display's session is checked against the file at every request (a removed
/// display is refused at once); the bcrypt check of its secret is done once per console run and
/// remembered in memory, as the console keeps its login sessions.
public final class DisplayBook: Sendable {
    public let path: String
    /// Failed pairings the whole console allows within `failureWindowS`; then pairing waits.
    public let maxFailures = 10
    public let failureWindowS = 60.0

    private struct State {
        var displays: [ConsoleDisplay] = []
        var stamp = FileStamp()
        /// Session secrets already checked, by display id (with the hash they matched).
        var verified: [String: (secret: String, hash: String)] = [:]
        /// The token a phone's pages carry in what they post (its log-out form), by display id:
        /// random, made at its first use in this console run, as a login session's is.
        var pageTokens: [String: String] = [:]
        var failures: [Double] = []
    }
    private let state = Mutex(State())

    public init(path: String) throws(AccountError) {
        self.path = path
        let displays = try DisplaysFile.load(path: path)
        let stamp = FileStamp(path)
        state.withLock {
            $0.displays = displays
            $0.stamp = stamp
        }
    }

    /// Every display now.
    public var displays: [ConsoleDisplay] {
        reloadIfChanged()
        return state.withLock { $0.displays }
    }

    /// The paired display a session cookie (`id.secret`) belongs to, or nil. Blocking (bcrypt,
    /// the first time a secret is seen): call it off the event loop, or `cached` first.
    public func display(token: String) -> ConsoleDisplay? {
        if let display = cached(token: token) { return display }
        guard let (id, secret) = Self.split(token) else { return nil }
        guard let display = displays.first(where: { $0.id == id }), let hash = display.secretHash, Bcrypt.verify(secret, hash: hash) else {
            return nil
        }
        state.withLock { $0.verified[id] = (secret, hash) }
        return display
    }

    /// The paired display of a token whose secret was already checked; nil otherwise (also when
    /// the display was removed since).
    public func cached(token: String) -> ConsoleDisplay? {
        guard let (id, secret) = Self.split(token) else { return nil }
        reloadIfChanged()
        return state.withLock { state in
            guard let display = state.displays.first(where: { $0.id == id }), let hash = display.secretHash,
                let known = state.verified[id], known.hash == hash, known.secret == secret
            else { return nil }
            return display
        }
    }

    /// Whether the display `id` is still in the file (paired).
    public func isPaired(id: String) -> Bool {
        reloadIfChanged()
        return state.withLock { $0.displays.contains { $0.id == id && $0.isPaired } }
    }

    /// Pairs the display whose unused, unexpired code this is: records its session secret's
    /// hash and returns the display and its cookie value `id.secret`. Nil for a wrong, used or
    /// expired code, or while too many pairings have failed (`isThrottled`). Blocking (bcrypt).
    public func pair(code typed: String, now: Double = Date().timeIntervalSince1970, monotonic: Double) -> (ConsoleDisplay, String)? {
        guard !isThrottled(now: monotonic) else { return nil }
        let code = DisplaysFile.normalize(code: typed)
        let secret = DisplaysFile.newSecret()
        var paired: ConsoleDisplay?
        if let code {
            try? DisplaysFile.update(path: path) { displays throws(AccountError) in
                guard
                    let index = displays.firstIndex(where: {
                        !$0.isPaired && now - $0.addedAt < DisplaysFile.codeLifetimeS && Bcrypt.verify(code, hash: $0.codeHash)
                    })
                else { return }
                displays[index].secretHash = Bcrypt.hash(secret, cost: AccountsFile.cost)
                displays[index].pairedAt = now
                paired = displays[index]
            }
        }
        guard let paired, let hash = paired.secretHash else {
            state.withLock { $0.failures.append(monotonic) }
            return nil
        }
        reloadIfChanged()
        state.withLock { $0.verified[paired.id] = (secret, hash) }
        return (paired, paired.id + "." + secret)
    }

    /// The token the pages of display `id` carry in their forms this console run (checked
    /// against what they post, as a login session's token is).
    public func pageToken(id: String) -> String {
        state.withLock { state in
            if let token = state.pageTokens[id] { return token }
            let token = DisplaysFile.newSecret()
            state.pageTokens[id] = token
            return token
        }
    }

    /// Whether pairing is paused because of recent failures.
    public func isThrottled(now: Double) -> Bool {
        state.withLock { state in
            state.failures.removeAll { now - $0 >= failureWindowS }
            return state.failures.count >= maxFailures
        }
    }

    private static func split(_ token: String) -> (String, String)? {
        let parts = token.split(separator: ".", maxSplits: 1).map(String.init)
        guard parts.count == 2, parts[0].count == 8, parts[1].count == 64 else { return nil }
        return (parts[0], parts[1])
    }

    private func reloadIfChanged() {
        let stamp = FileStamp(path)
        guard state.withLock({ $0.stamp != stamp }) else { return }
        // The file is replaced by rename: a read sees the old or the new whole. A missing file is no displays.
        guard let displays = try? DisplaysFile.load(path: path) else { return }
        state.withLock {
            $0.displays = displays
            $0.stamp = stamp
            let current = Set(displays.compactMap { $0.secretHash })
            $0.verified = $0.verified.filter { current.contains($0.value.hash) }
            let ids = Set(displays.map(\.id))
            $0.pageTokens = $0.pageTokens.filter { ids.contains($0.key) }
        }
    }
}

/// What tells a replaced file from the one read before: its inode, size and change time.
struct FileStamp: Equatable {
    var inode: UInt64 = 0
    var size: Int64 = -1
    var changedNs: Int64 = 0

    init() {}

    init(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        changedNs = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
    }
}
