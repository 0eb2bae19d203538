import Foundation
import HummingbirdBcrypt
import Synchronization

/// What a console account may do: a coach sends commands, a viewer only looks, an athlete
/// sees their own page and nothing else.
public enum ConsoleRole: String, Sendable, Codable, CaseIterable {
    case coach, viewer, athlete
}

public struct AccountError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One account: its name, role and bcrypt hash (never the password); an athlete account's
/// athlete id.
public struct ConsoleAccount: Sendable, Equatable {
    public var name: String
    public var role: ConsoleRole
    public var hash: String
    public var athlete: String?

    public init(name: String, role: ConsoleRole, hash: String, athlete: String? = nil) {
        (self.name, self.role, self.hash, self.athlete) = (name, role, hash, athlete)
    }
}

/// The console's accounts file: a line `name:role:bcrypt-hash` per account (an athlete's
/// `name:athlete:bcrypt-hash:athlete-id`), `#` comments,
/// written with mode 0600 by `vbt console user add` and read again by the running console
/// whenever it changes (an account added or removed takes effect without a restart).
public enum AccountsFile {
    /// The bcrypt cost: 2^10 rounds, about 50-100 ms a check on this project's 2-core
    /// machines; a guess at a leaked file's passwords costs an attacker the same.
    public static let cost: UInt8 = 10
    public static let minPasswordLength = 8

    /// Checks an account name: 1 to 32 of a-z, 0-9, '.', '_' and '-'.
    public static func validate(name: String) throws(AccountError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789._-")
        guard (1...32).contains(name.count), name.allSatisfy({ allowed.contains($0) }) else {
            throw AccountError("an account name is 1 to 32 of a-z, 0-9, '.', '_' and '-' (e.g. coach-ana), not \(name.debugDescription)")
        }
    }

    /// Checks an athlete's id as an athlete account or phone names it: 1 to 64 characters,
    /// no ':' (the files' separator), no line break, no space at either end (lines are trimmed).
    public static func validate(athlete: String) throws(AccountError) {
        guard (1...64).contains(athlete.count), !athlete.contains(where: { $0 == ":" || $0.isNewline }),
            athlete.trimmingCharacters(in: .whitespaces) == athlete
        else {
            throw AccountError("an athlete's id is 1 to 64 characters without ':' (as vbt athlete add made it), not \(athlete.debugDescription)")
        }
    }

    public static func parse(_ text: String) throws(AccountError) -> [String: ConsoleAccount] {
        var accounts: [String: ConsoleAccount] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            // A bcrypt hash holds no ':'; an athlete's id follows it.
            let parts = trimmed.split(separator: ":", maxSplits: 3).map(String.init)
            guard parts.count >= 3, let role = ConsoleRole(rawValue: parts[1]), parts[2].hasPrefix("$2"),
                (role == .athlete) == (parts.count == 4), parts.count == 3 || !parts[3].isEmpty
            else {
                throw AccountError("line \(number + 1) is not name:role:bcrypt-hash (coach or viewer) or name:athlete:bcrypt-hash:athlete-id")
            }
            try validate(name: parts[0])
            accounts[parts[0]] = ConsoleAccount(name: parts[0], role: role, hash: parts[2], athlete: parts.count == 4 ? parts[3] : nil)
        }
        return accounts
    }

    public static func load(path: String) throws(AccountError) -> [String: ConsoleAccount] {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw AccountError("cannot read the accounts file \(path): \(error.localizedDescription)")
        }
        do { return try parse(text) } catch { throw AccountError("\(path): \(error.description)") }
    }

    /// Adds (or replaces) an account, hashing its password; rewrites the file atomically. An
    /// athlete account names its athlete.
    public static func add(path: String, name: String, role: ConsoleRole, password: String, athlete: String? = nil) throws(AccountError) {
        try validate(name: name)
        guard password.count >= minPasswordLength else { throw AccountError("the password must have at least \(minPasswordLength) characters") }
        guard (role == .athlete) == (athlete != nil) else { throw AccountError("an athlete account, and only one, names its athlete (--athlete ID)") }
        if let athlete { try validate(athlete: athlete) }
        var accounts = try load(path: path)
        accounts[name] = ConsoleAccount(name: name, role: role, hash: Bcrypt.hash(password, cost: cost), athlete: athlete)
        try write(accounts, path: path)
    }

    /// Removes an account; false when there was none of that name.
    public static func remove(path: String, name: String) throws(AccountError) -> Bool {
        var accounts = try load(path: path)
        guard accounts.removeValue(forKey: name) != nil else { return false }
        try write(accounts, path: path)
        return true
    }

    static func write(_ accounts: [String: ConsoleAccount], path: String) throws(AccountError) {
        var text = "# vbt coach-console accounts (vbt console user add|remove|list): name:role:bcrypt-hash[:athlete-id]\n"
        for name in accounts.keys.sorted() {
            let account = accounts[name]!
            text += "\(account.name):\(account.role.rawValue):\(account.hash)\(account.athlete.map { ":" + $0 } ?? "")\n"
        }
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let temporary = path + ".tmp-\(getpid())"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw AccountError("cannot write \(temporary)")
            }
            guard rename(temporary, path) == 0 else { throw AccountError("cannot replace \(path): \(String(cString: strerror(errno)))") }
        } catch let error as AccountError {
            throw error
        } catch {
            throw AccountError("cannot write the accounts file \(path): \(error.localizedDescription)")
        }
    }
}

/// The accounts a running console checks logins against: the file, read again when it
/// changes, and a lockout after repeated failures so passwords cannot be guessed online.
public final class AccountBook: Sendable {
    public let path: String
    /// Failed logins for one name within `lockoutWindowS` before it is locked for the rest of the window.
    public let maxFailures = 5
    public let lockoutWindowS = 60.0

    private struct State {
        var accounts: [String: ConsoleAccount] = [:]
        var modified: Date?
        var size: Int?
        var failures: [String: [Double]] = [:]
    }
    private let state = Mutex(State())
    /// A hash of nothing anyone knows: a login with an unknown name is checked against it,
    /// so it costs as long as a wrong password and names cannot be told apart by timing.
    private let decoy = Bcrypt.hash(UUID().uuidString, cost: AccountsFile.cost)

    /// Reads the file; throws when it exists and cannot be read or parsed.
    public init(path: String) throws(AccountError) {
        self.path = path
        let accounts = try AccountsFile.load(path: path)
        let (modified, size) = Self.stamp(path)
        state.withLock { $0 = State(accounts: accounts, modified: modified, size: size) }
    }

    /// How many accounts there are.
    public var count: Int {
        reloadIfChanged()
        return state.withLock { $0.accounts.count }
    }

    /// The account whose password this is; nil for a wrong name or password, or a locked name.
    /// `now` is monotonic seconds (injected, for the lockout).
    public func check(name: String, password: String, now: Double) -> ConsoleAccount? {
        reloadIfChanged()
        let (account, locked) = state.withLock { state -> (ConsoleAccount?, Bool) in
            let recent = (state.failures[name] ?? []).filter { now - $0 < lockoutWindowS }
            state.failures[name] = recent.isEmpty ? nil : recent
            return (state.accounts[name], recent.count >= maxFailures)
        }
        let hash = account?.hash ?? decoy
        let good = Bcrypt.verify(password, hash: hash) && account != nil && !locked
        if !good { state.withLock { $0.failures[name, default: []].append(now) } }
        return good ? account : nil
    }

    /// Whether `name` is locked out at `now`.
    public func isLocked(name: String, now: Double) -> Bool {
        state.withLock { ($0.failures[name] ?? []).filter { now - $0 < lockoutWindowS }.count >= maxFailures }
    }

    /// The account now (a removed account's sessions end at their next request).
    public func account(named name: String) -> ConsoleAccount? {
        reloadIfChanged()
        return state.withLock { $0.accounts[name] }
    }

    private func reloadIfChanged() {
        let (modified, size) = Self.stamp(path)
        guard state.withLock({ $0.modified != modified || $0.size != size }) else { return }
        // A file being rewritten is replaced by rename, so a read sees the old or the new whole.
        guard let accounts = try? AccountsFile.load(path: path) else { return }
        state.withLock {
            $0.accounts = accounts
            $0.modified = modified
            $0.size = size
        }
    }

    private static func stamp(_ path: String) -> (Date?, Int?) {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        return (attributes?[.modificationDate] as? Date, (attributes?[.size] as? NSNumber)?.intValue)
    }
}
