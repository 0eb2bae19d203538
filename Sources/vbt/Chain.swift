import ArgumentParser
import Foundation
import VBTBus
import VBTChain

/// `vbt chain`: the chain of gyms' PostgreSQL store, its keys and its gyms' roles.
struct ChainCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chain",
        abstract: "The chain's PostgreSQL store: its certificates, its schema, its gyms (deploy/README.md, \"A chain of gyms\").",
        subcommands: [CA.self, Init.self, AddGym.self, Gyms.self, Link.self, Unlink.self, Athlete.self, Leaderboard.self])

    struct CA: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ca",
            abstract: "Make the chain's certificate authority and the PostgreSQL server's certificate.",
            discussion: """
                Writes ca.key and ca.crt (the chain's CA: keep ca.key off the gyms' computers) and server.key and \
                server.crt, whose name is --server-name (the host name gyms connect to: with sslmode verify-full \
                libpq checks it). Point PostgreSQL's ssl_cert_file, ssl_key_file and ssl_ca_file at them. Uses \
                the openssl command-line tool.
                """)

        @Option(help: "The folder to write into (made if missing; existing keys are never overwritten).")
        var out: String

        @Option(help: "The chain store's host name or IP address, as gyms will connect to it.")
        var serverName: String

        @Option(help: "How many days the certificates are valid.")
        var days: Int = 825

        func run() async throws {
            let folder = try Certificates.prepare(out, files: ["ca.key", "ca.crt", "server.key", "server.crt"])
            try Certificates.makeCA(folder: folder, days: days * 4)
            try Certificates.sign(
                folder: folder, name: "server", commonName: serverName, days: days,
                extensions: "subjectAltName=\(Certificates.altName(serverName))\nextendedKeyUsage=serverAuth\n")
            print("wrote \(folder)/ca.crt, ca.key, server.crt, server.key")
        }
    }

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create or upgrade the chain store's schema (as the chain's admin, who owns the tables).",
            discussion: "Applies the numbered migrations the store lacks, each in its own transaction; refuses a store newer than this build.")

        @OptionGroup var chain: ChainOptions

        func run() async throws {
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                let applied = try ChainSchema.migrate(db)
                print(
                    applied.isEmpty
                        ? "chain schema already at version \(ChainSchema.current)"
                        : "chain schema at version \(ChainSchema.current) (applied \(applied.map(String.init).joined(separator: ", ")))")
            } catch let error as PostgresError {
                reportProblem("vbt chain init: \(error)")
                throw ExitCode.failure
            }
        }
    }

    struct AddGym: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-gym",
            abstract: "Add a gym: its PostgreSQL role (its own rows only) and its client key and certificate.",
            discussion: """
                Creates the role vbt_gym_<NAME> (login by certificate only, as pg_hba.conf's hostssl ... cert \
                lines require), grants it reading and writing the replicated tables, where row-level security \
                confines it to rows of its gym, and writes <NAME>.key and <NAME>.crt (common name \
                vbt_gym_<NAME>, signed by the CA in --ca) with a copy of ca.crt into --out, for the gym's uplink.
                """)

        @Argument(help: "The gym's name: a lower-case letter, then up to 39 lower-case letters, digits or _.")
        var name: String

        @Option(help: "The folder with the chain's ca.key and ca.crt (`vbt chain ca` makes them).")
        var ca: String

        @Option(help: "The folder to write the gym's key, certificate and ca.crt into.")
        var out: String

        @Option(help: "How many days the gym's certificate is valid.")
        var days: Int = 825

        @OptionGroup var chain: ChainOptions

        func validate() throws {
            guard ChainSchema.isValidGym(name) else {
                throw ValidationError("the gym's name must be a lower-case letter then up to 39 lower-case letters, digits or _")
            }
        }

        func run() async throws {
            let role = ChainSchema.role(ofGym: name)
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                // The name is checked in validate() (letters, digits, _), so it is safe inside the quotes.
                try db.transaction {
                    try db.execute(
                        """
                        DO $$ BEGIN
                            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(role)') THEN CREATE ROLE "\(role)" LOGIN; END IF;
                        END $$;
                        INSERT INTO gyms (gym) VALUES ('\(name)') ON CONFLICT DO NOTHING;
                        """)
                    try ChainSchema.grant(db, gym: name)
                }
            } catch let error as PostgresError {
                reportProblem("vbt chain add-gym: \(error)")
                throw ExitCode.failure
            }
            let caFolder = URL(fileURLWithPath: ca).standardizedFileURL.path
            let folder = try Certificates.prepare(out, files: ["\(name).key", "\(name).crt"])
            try Certificates.sign(
                folder: folder, name: name, commonName: role, days: days, ca: caFolder, extensions: "extendedKeyUsage=clientAuth\n")
            let copy = folder + "/ca.crt"
            if caFolder != folder {
                try? FileManager.default.removeItem(atPath: copy)
                try FileManager.default.copyItem(atPath: caFolder + "/ca.crt", toPath: copy)
            }
            print("role \(role) ready; wrote \(folder)/\(name).key, \(name).crt, ca.crt")
            print(
                "run: vbt-uplink --gym \(name) --chain-host HOST --chain-dbname DB --chain-user \(role) "
                    + "--chain-sslrootcert ca.crt --chain-sslcert \(name).crt --chain-sslkey \(name).key")
        }
    }
}

extension ChainCommand {
    struct Gyms: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gyms",
            abstract: "List the chain's gyms: when each last sent a batch, and its rows per table in the chain store.",
            discussion: "As the chain's admin (a gym's role sees only its own gym). A gym that never sent shows '-'.")

        @OptionGroup var chain: ChainOptions

        func run() async throws {
            let tables = ChainTable.all.map(\.name)
            let counts = tables.map { "(SELECT count(*) FROM \($0) t WHERE t.gym = g.gym)" }.joined(separator: ", ")
            let rows: [[String?]]
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                rows = try db.execute(
                    """
                    SELECT g.gym, (SELECT to_char(max(c.updated_ts) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                        FROM cursors c WHERE c.gym = g.gym), \(counts)
                    FROM gyms g ORDER BY g.gym
                    """
                ).rows
            } catch let error as PostgresError {
                reportProblem("vbt chain gyms: \(error)")
                throw ExitCode.failure
            }
            let header = ["gym", "last_sent"] + tables
            let cells = [header] + rows.map { $0.map { $0 ?? "-" } }
            let widths = header.indices.map { column in cells.map { $0[column].count }.max() ?? 0 }
            for line in cells {
                print(line.indices.map { line[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  "))
            }
        }
    }
}

extension ChainCommand {
    struct Leaderboard: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "leaderboard",
            abstract: "Per exercise, each athlete's best rep across the chain's gyms, best first.",
            discussion: """
                As the chain's admin. A best rep is the heaviest load lifted, then the fastest mean velocity at \
                it. Athletes linked to one chain id are one entrant (their best at any gym, under HQ's name); \
                others are their gym's. Reps without an exercise or load, and erased athletes' pseudonyms, \
                are left out. Times are UTC.
                """)

        @Option(help: "Only this exercise (e.g. squat).")
        var exercise: String?

        @Option(help: "Entrants per exercise, 1 to 1000.")
        var limit: Int = 10

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        @OptionGroup var chain: ChainOptions

        func validate() throws {
            guard (1...1_000).contains(limit) else { throw ValidationError("--limit must be 1 to 1000") }
        }

        func run() async throws {
            let entries: [ChainLeaderboard.Entry]
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                entries = try ChainLeaderboard.compute(db, exercise: exercise, limit: limit)
            } catch let error as PostgresError {
                reportProblem("vbt chain leaderboard: \(error)")
                throw ExitCode.failure
            } catch {
                reportProblem("vbt chain leaderboard: unreadable answer from the chain store: \(error)")
                throw ExitCode.failure
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(entries), as: UTF8.self))
                return
            }
            guard !entries.isEmpty else {
                print(exercise.map { "no reps of \($0) in the chain store" } ?? "no reps in the chain store")
                return
            }
            Athlete.table(
                [["exercise", "rank", "chain_id", "name", "gym", "athlete", "load_kg", "mean_mps", "lifted"]]
                    + entries.map {
                        [
                            $0.exercise, String($0.rank), $0.chainId ?? "-", $0.name, $0.gym, $0.athlete,
                            Athlete.number($0.loadKg, "%.1f"), Athlete.number($0.meanVelocityMps, "%.2f"), Athlete.time($0.ts),
                        ]
                    })
        }
    }
}

extension ChainCommand {
    /// What `link` and `unlink` name: a chain id, a gym and the gym's athlete id.
    struct LinkArguments: ParsableArguments {
        @Argument(help: "The chain id: the code the athlete carries from gym to gym (a letter or digit, then up to 63 letters, digits, _ . -).")
        var chainId: String

        @Option(help: "The gym the athlete trains at.")
        var gym: String

        @Option(help: "The athlete's id at that gym.")
        var athlete: String

        func validate() throws {
            guard isValidChainId(chainId) else { throw ValidationError("the chain id must be a letter or digit then up to 63 letters, digits, _ . or -") }
            guard ChainSchema.isValidGym(gym) else { throw ValidationError("not a gym name: \(gym)") }
        }
    }

    struct Link: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "link",
            abstract: "Link a gym's athlete to a chain-wide athlete (made when new), as the chain's admin.",
            discussion: """
                The gym's athlete must be in the chain store (its uplink sends athletes every cycle). An athlete \
                linked to another chain id is refused: unlink her first. Linking again is a no-op.
                """)

        @OptionGroup var link: LinkArguments

        @Option(help: "The chain athlete's display name (default: her name at this gym, when the chain athlete is new).")
        var name: String?

        @OptionGroup var chain: ChainOptions

        func run() async throws {
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                let made = try ChainAthletes.link(db, chainId: link.chainId, gym: link.gym, athlete: link.athlete, name: name)
                print("\(link.gym)'s athlete \(link.athlete) \(made ? "linked" : "already linked") to \(link.chainId)")
            } catch let error as PostgresError {
                reportProblem("vbt chain link: \(error)")
                throw ExitCode.failure
            }
        }
    }

    struct Unlink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unlink",
            abstract: "Remove the link of a gym's athlete to a chain-wide athlete, as the chain's admin.",
            discussion: "The chain athlete and her other links stay; the gym's rows are untouched.")

        @OptionGroup var link: LinkArguments

        @OptionGroup var chain: ChainOptions

        func run() async throws {
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                try ChainAthletes.unlink(db, chainId: link.chainId, gym: link.gym, athlete: link.athlete)
                print("\(link.gym)'s athlete \(link.athlete) unlinked from \(link.chainId)")
            } catch let error as PostgresError {
                reportProblem("vbt chain unlink: \(error)")
                throw ExitCode.failure
            }
        }
    }

    struct Athlete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "athlete",
            abstract: "A chain athlete's page: her sessions, sets and best reps at every gym she is linked at.",
            discussion: """
                As the chain's admin. Sessions and sets newest first, each with its gym; then per exercise her \
                best mean velocity at each load, across gyms. Times are UTC.
                """)

        @Argument(help: "The chain id.")
        var chainId: String

        @Flag(help: "Print JSON instead of tables.")
        var json = false

        @OptionGroup var chain: ChainOptions

        func run() async throws {
            let page: ChainAthletePage?
            do {
                let db = try PostgresConnection(chain.endpoint(applicationName: "vbt-chain"))
                try ChainSchema.check(db)
                page = try ChainAthletes.page(db, chainId: chainId)
            } catch let error as PostgresError {
                reportProblem("vbt chain athlete: \(error)")
                throw ExitCode.failure
            } catch {
                reportProblem("vbt chain athlete: unreadable page from the chain store: \(error)")
                throw ExitCode.failure
            }
            guard let page else {
                reportProblem("vbt chain athlete: no chain athlete \(chainId) (vbt chain link makes one)")
                throw ExitCode.failure
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(page), as: UTF8.self))
                return
            }
            Self.printText(page)
        }

        static func printText(_ page: ChainAthletePage) {
            let links = page.links.map { "\($0.gym):\($0.athlete)" }.joined(separator: ", ")
            print("\(page.chainId)  \(page.name)  linked at \(links.isEmpty ? "no gym" : links)")
            print("\nsessions (\(page.sessions.count))")
            table(
                [["started", "gym", "session", "station", "athlete", "minutes", "sets"]]
                    + page.sessions.map {
                        [
                            time($0.startedTs), $0.gym, String($0.id), $0.station, $0.athlete,
                            String(format: "%.1f", ($0.endedTs - $0.startedTs) / 60), String($0.sets),
                        ]
                    })
            print("\nsets (\(page.sets.count))")
            table(
                [["started", "gym", "set", "exercise", "load_kg", "reps", "best_rep", "best_mps", "vl_pct"]]
                    + page.sets.map {
                        [
                            time($0.startedTs), $0.gym, $0.id, $0.exercise ?? "-", number($0.loadKg, "%.1f"), String($0.reps),
                            $0.bestRep.map { String($0.idx) } ?? "-", number($0.bestRep?.meanVelocityMps ?? $0.bestMeanVelocityMps, "%.3f"),
                            number($0.velocityLossPct, "%.1f"),
                        ]
                    })
            print("\nbest mean velocity per exercise and load (\(page.bests.count))")
            table(
                [["exercise", "load_kg", "best_mps", "gym", "set", "when"]]
                    + page.bests.map {
                        [$0.exercise, number($0.loadKg, "%.1f"), number($0.meanVelocityMps, "%.3f"), $0.gym, $0.setId, time($0.ts)]
                    })
        }

        static func number(_ value: Double?, _ format: String) -> String {
            value.map { String(format: format, $0) } ?? "-"
        }

        static func time(_ ts: Double) -> String {
            let formatter = ISO8601DateFormatter()
            formatter.timeZone = TimeZone(identifier: "UTC")
            return formatter.string(from: Date(timeIntervalSince1970: ts))
        }

        /// Columns padded to their widest cell, two spaces apart; no spaces at a line's end.
        static func table(_ cells: [[String]]) {
            let widths = cells[0].indices.map { column in cells.map { $0[column].count }.max() ?? 0 }
            for line in cells {
                let padded = line.indices.map { line[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                var text = padded.joined(separator: "  ")
                while text.hasSuffix(" ") { text.removeLast() }
                print(text)
            }
        }
    }
}

/// Keys and certificates through the openssl command-line tool (P-256 keys, owner-only files).
enum Certificates {
    /// The absolute folder, made if missing; refuses when any of `files` is already there.
    static func prepare(_ path: String, files: [String]) throws -> String {
        let folder = URL(fileURLWithPath: path).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for file in files where FileManager.default.fileExists(atPath: folder + "/" + file) {
            reportProblem("vbt chain: \(folder)/\(file) exists; remove it first or write into another --out")
            throw ExitCode.failure
        }
        return folder
    }

    /// A subjectAltName entry: IP for an address, DNS for a name.
    static func altName(_ host: String) -> String {
        host.range(of: "^[0-9.]+$|:", options: .regularExpression) != nil ? "IP:\(host)" : "DNS:\(host)"
    }

    static func makeCA(folder: String, days: Int) throws {
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder + "/ca.key",
            "-out", folder + "/ca.crt", "-days", String(days), "-subj", "/CN=vbt chain CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try restrict(folder + "/ca.key")
    }

    /// A key and a certificate for `commonName` signed by the CA in `ca` (default: `folder`).
    static func sign(folder: String, name: String, commonName: String, days: Int, ca: String? = nil, extensions: String) throws {
        let ca = ca ?? folder
        let request = folder + "/\(name).csr", extfile = folder + "/\(name).ext"
        defer {
            try? FileManager.default.removeItem(atPath: request)
            try? FileManager.default.removeItem(atPath: extfile)
        }
        try openssl([
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", folder + "/\(name).key",
            "-out", request, "-subj", "/CN=\(commonName)",
        ])
        try restrict(folder + "/\(name).key")
        try extensions.write(toFile: extfile, atomically: true, encoding: .utf8)
        var serial = "0x"
        for _ in 0..<16 { serial += String(format: "%02x", UInt8.random(in: 0...255)) }
        try openssl([
            "x509", "-req", "-in", request, "-CA", ca + "/ca.crt", "-CAkey", ca + "/ca.key", "-set_serial", serial,
            "-days", String(days), "-out", folder + "/\(name).crt", "-extfile", extfile,
        ])
    }

    static func restrict(_ path: String) throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }

    static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        do { try process.run() } catch {
            reportProblem("vbt chain: cannot run openssl (\(error)); install it (Debian: openssl)")
            throw ExitCode.failure
        }
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: said, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            reportProblem("vbt chain: openssl \(arguments.first ?? "") failed: \(message)")
            throw ExitCode.failure
        }
    }
}
