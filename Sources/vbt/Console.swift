import ArgumentParser
import Foundation
import VBTBus
import VBTConsole
import VBTWire

// `vbt console`: the coach console's accounts (proto/console.md).

struct ConsoleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "The coach console's accounts, rack displays and athletes' phones.",
        subcommands: [User.self, Display.self])

    struct User: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add, remove and list the console's accounts.",
            discussion: """
                A coach account sends commands from the console's pages; a viewer account only looks; an athlete \
                account (--athlete ID) sees only that athlete's own page.
                The running console reads the file again when it changes: no restart needed.
                """,
            subcommands: [Add.self, Remove.self, List.self])
    }

    struct Display: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pair, remove and list rack displays and athletes' phones, with no password.",
            discussion: """
                `add STATION` prints a one-time pairing code and the URL to open on the rack's tablet or TV; \
                the display then sees that station's page and nothing else, until `remove`. `add --athlete ID` \
                does the same for an athlete's phone, which then sees what an athlete account of ID sees: \
                that athlete's own pages and nothing else. Both are kept beside the accounts file \
                (FILE.displays), hashed; the running console reads it again when it changes.
                """,
            subcommands: [DisplayAdd.self, DisplayRemove.self, DisplayList.self])
    }

    struct DisplayAdd: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add a display for a station, or an athlete's phone: prints its pairing code (valid once, for 24 hours) and URL.")

        @Argument(help: "The station it shows, e.g. rack-01 (or --athlete).")
        var station: String?

        @Option(help: "Instead of a station: the athlete whose phone it is (vbt athlete add); it sees that athlete's own pages only.")
        var athlete: String?

        @OptionGroup var file: UsersFile

        func validate() throws {
            guard (station == nil) != (athlete == nil) else { throw ValidationError("name a STATION or --athlete ID, one of them") }
            if let station, !isStationName(station) { throw ValidationError("a station's name is a-z, A-Z, 0-9, '.', '_', '-', e.g. rack-01") }
            if let athlete {
                do { try AccountsFile.validate(athlete: athlete) } catch { throw ValidationError(error.description) }
            }
        }

        func run() throws {
            let path = DisplaysFile.path(forUsers: file.path)
            let display: ConsoleDisplay, code: String
            do {
                (display, code) = try athlete.map { try DisplaysFile.add(path: path, athlete: $0) } ?? DisplaysFile.add(path: path, station: station!)
            } catch let error as AccountError {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            print("code: \(code)")
            print("url: /pair?code=\(code)")
            let screen = display.athlete.map { "\($0)'s phone" } ?? "\(display.purpose)'s display"
            FileHandle.standardError.write(
                Data(
                    "open the url on \(screen), after the console's address (e.g. http://127.0.0.1:8080/pair?code=\(code)); displays in \(path)\n"
                        .utf8))
        }
    }

    struct DisplayRemove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract:
                "Remove a display or phone, by its code, its station (every display of it), its id, or --athlete (every phone of that athlete): it is logged out within 2 s."
        )

        @Argument(help: "The display's pairing code, station or id (vbt console display list).")
        var display: String?

        @Option(help: "Instead: remove every phone of this athlete.")
        var athlete: String?

        @OptionGroup var file: UsersFile

        func validate() throws {
            guard (display == nil) != (athlete == nil) else { throw ValidationError("name a CODE|STATION|ID or --athlete ID, one of them") }
        }

        func run() throws {
            let path = DisplaysFile.path(forUsers: file.path)
            let removed: [ConsoleDisplay]
            do {
                removed = try athlete.map { try DisplaysFile.remove(path: path, athlete: $0) } ?? DisplaysFile.remove(path: path, display!)
            } catch let error as AccountError {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            guard !removed.isEmpty else {
                let what = athlete.map { "phone of \($0)" } ?? "display \(display!)"
                reportProblem("vbt console: no \(what) in \(path) (vbt console display list)")
                throw ExitCode.failure
            }
            for display in removed {
                print(display.station.map { "removed display \(display.id) of \($0)" } ?? "removed \(display.purpose) (\(display.id))")
            }
        }
    }

    struct DisplayList: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List the displays and phones: id, what it is for (a station, or phone of ATHLETE), whether paired, when added (never their codes).")

        @OptionGroup var file: UsersFile

        func run() throws {
            let path = DisplaysFile.path(forUsers: file.path)
            let displays: [ConsoleDisplay]
            do { displays = try DisplaysFile.load(path: path) } catch {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            if displays.isEmpty { print("no displays in \(path) (vbt console display add STATION, or --athlete ID)") }
            let stamp = ISO8601DateFormatter()
            for display in displays {
                let state =
                    display.pairedAt.map { "paired " + stamp.string(from: Date(timeIntervalSince1970: $0)) }
                    ?? (Date().timeIntervalSince1970 - display.addedAt < DisplaysFile.codeLifetimeS ? "waiting for its code" : "code expired")
                print("\(display.id)\t\(display.purpose)\t\(state)\tadded \(stamp.string(from: Date(timeIntervalSince1970: display.addedAt)))")
            }
        }
    }

    struct UsersFile: ParsableArguments {
        @Option(help: "The accounts file (overrides VBT_CONSOLE_USERS; default data/console-users).")
        var users: String?

        var path: String { users ?? environment("VBT_CONSOLE_USERS") ?? "data/console-users" }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an account, or set an existing one's role and password; the password is read from standard input.",
            discussion: "e.g. printf '%s\\n' 'a long passphrase' | vbt console user add ana --role coach")

        @Argument(help: "The account's name (a-z, 0-9, '.', '_', '-').")
        var name: String

        @Option(help: "coach (commands), viewer (read-only) or athlete (their own page only).")
        var role: String

        @Option(help: "With --role athlete: the athlete's id (vbt athlete add).")
        var athlete: String?

        @OptionGroup var file: UsersFile

        func validate() throws {
            guard let parsed = ConsoleRole(rawValue: role) else { throw ValidationError("--role must be coach, viewer or athlete") }
            guard (parsed == .athlete) == (athlete != nil) else {
                throw ValidationError("--athlete ID goes with --role athlete, and --role athlete needs it")
            }
            do { try AccountsFile.validate(name: name) } catch { throw ValidationError(error.description) }
        }

        func run() throws {
            if isatty(STDIN_FILENO) == 1 {
                FileHandle.standardError.write(Data("Password for \(name) (at least \(AccountsFile.minPasswordLength) characters): ".utf8))
            }
            let password = readPassword()
            do {
                try AccountsFile.add(path: file.path, name: name, role: ConsoleRole(rawValue: role)!, password: password, athlete: athlete)
            } catch {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            print("\(name) (\(role)) can log in to the coach console; accounts in \(file.path)")
        }

        /// One line from standard input, without its line ending; echo off when it is a terminal.
        private func readPassword() -> String {
            var saved = termios()
            let terminal = isatty(STDIN_FILENO) == 1 && tcgetattr(STDIN_FILENO, &saved) == 0
            if terminal {
                var quiet = saved
                quiet.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
            }
            defer {
                if terminal {
                    tcsetattr(STDIN_FILENO, TCSANOW, &saved)
                    FileHandle.standardError.write(Data("\n".utf8))
                }
            }
            var line = readLine(strippingNewline: true) ?? ""
            if line.hasSuffix("\r") { line.removeLast() }
            return line
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an account; its open sessions end at their next request.")

        @Argument(help: "The account's name.")
        var name: String

        @OptionGroup var file: UsersFile

        func run() throws {
            do {
                guard try AccountsFile.remove(path: file.path, name: name) else {
                    reportProblem("vbt console: no account \(name) in \(file.path) (vbt console user list)")
                    throw ExitCode.failure
                }
            } catch let error as AccountError {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            print("removed \(name)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the accounts and their roles (never their passwords).")

        @OptionGroup var file: UsersFile

        func run() throws {
            let accounts: [String: ConsoleAccount]
            do { accounts = try AccountsFile.load(path: file.path) } catch {
                reportProblem("vbt console: \(error.description)")
                throw ExitCode.failure
            }
            if accounts.isEmpty { print("no accounts in \(file.path) (vbt console user add NAME --role coach)") }
            for name in accounts.keys.sorted() {
                let account = accounts[name]!
                print("\(name)\t\(account.role.rawValue)" + (account.athlete.map { "\t" + $0 } ?? ""))
            }
        }
    }
}
