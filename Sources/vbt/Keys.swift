import ArgumentParser
import Foundation
import VBTBus

// `vbt keys`: the installation's CURVE certificates (proto/security.md).
// DIR holds the server's certificate, `clients/` every
// client's pair, `authorized/` the public certificates the bus and the
// recorder let in.

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make, list and revoke the installation's CURVE keys.",
        discussion: """
            vbt-bus and session-recorder run with VBT_SERVER_CERT=DIR/server.key_secret and
            VBT_AUTHORIZED=DIR/authorized; every other program with VBT_CERT=DIR/clients/NAME.key_secret
            and VBT_BUS_CERT=DIR/server.key. Copy a client's .key_secret only to the computer it is for.
            """,
        subcommands: [Init.self, Add.self, List.self, Revoke.self])

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make the installation's server certificate and an empty authorized/ folder.")

        @Argument(help: "The keys folder, e.g. /etc/vbt/keys.")
        var dir: String

        @Flag(help: "Replace an existing server certificate (every client then needs the new server.key).")
        var force = false

        func run() throws {
            let server = dir + "/server"
            if !force && FileManager.default.fileExists(atPath: server + ".key_secret") {
                throw failure("\(server).key_secret exists; keep it, or pass --force to make a new one")
            }
            try makeFolders()
            try write(Certificate.generate(metadata: ["name": "server", "role": "server"]), base: server)
            print("server certificate: \(server).key (public), \(server).key_secret (secret)")
            print("authorized: \(dir)/authorized/ (add clients with: vbt keys add \(dir) NAME --role ROLE)")
        }

        private func makeFolders() throws {
            for folder in [dir, dir + "/authorized", dir + "/clients"] {
                do {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    throw failure("cannot create \(folder): \(error.localizedDescription)")
                }
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a client's certificate and authorize it.",
            discussion: """
                Roles: bridge (one station's readings, status and heartbeat; needs --station), service
                (its program's own messages: NAME or --program is rep-detector, posture-evaluator, notifier,
                session-recorder, coach-console, or sensor-bridge for a replay), coach (station commands; reads and
                writes at the query endpoint), viewer (reads only).
                """)

        @Argument(help: "The keys folder (made by vbt keys init).")
        var dir: String

        @Argument(help: "The client's name: a station computer, a service, a coach's tablet.")
        var name: String

        @Option(help: "bridge, service, coach or viewer.")
        var role: String

        @Option(help: "A bridge's station.")
        var station: String?

        @Option(help: "A service's program (default: NAME).")
        var program: String?

        @Flag(help: "Replace an existing certificate of this name.")
        var force = false

        func validate() throws {
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }), !name.hasPrefix(".") else {
                throw ValidationError("NAME is letters, digits, '-', '_' and '.' (it names files)")
            }
            guard name != "server" else { throw ValidationError("the name server is the installation's own certificate") }
        }

        func run() throws {
            var metadata = ["name": name, "role": role]
            if let station { metadata["station"] = station }
            if let program { metadata["program"] = program }
            do { _ = try PeerRole(metadata: metadata, name: name) } catch { throw failure(error.description) }
            let base = dir + "/clients/" + name
            guard FileManager.default.fileExists(atPath: dir + "/authorized") else {
                throw failure("\(dir)/authorized does not exist: run vbt keys init \(dir) first")
            }
            if !force && FileManager.default.fileExists(atPath: base + ".key_secret") {
                throw failure("\(base).key_secret exists; revoke it first, or pass --force to replace it")
            }
            let certificate = try Certificate.generate(metadata: metadata)
            try write(certificate, base: base)
            try write(certificate.publicOnly, base: dir + "/authorized/" + name)
            print("\(name): \(base).key_secret (copy it to the computer it is for), authorized as \(try certificate.role(name: name))")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the authorized certificates and the revoked ones.")

        @Argument(help: "The keys folder.")
        var dir: String

        func run() throws {
            let authorized = try names(in: dir + "/authorized")
            let clients = try names(in: dir + "/clients")
            print(pad("NAME", 24) + pad("ROLE", 28) + "STATE      PUBLIC KEY")
            for name in Set(authorized + clients).sorted() {
                let path = authorized.contains(name) ? "\(dir)/authorized/\(name).key" : "\(dir)/clients/\(name).key"
                let state = authorized.contains(name) ? "authorized" : "revoked"
                do {
                    let certificate = try Certificate.load(path: path)
                    let role = (try? certificate.role(name: name).description) ?? "(no valid role)"
                    print(pad(name, 24) + pad(role, 28) + pad(state, 11) + certificate.publicKey)
                } catch {
                    print(pad(name, 24) + pad("(unreadable)", 28) + pad(state, 11) + error.description)
                }
            }
        }

        private func pad(_ text: String, _ width: Int) -> String {
            text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a client: remove it from authorized/.",
            discussion: """
                The bus and the recorder read authorized/ again within a second: the client's next
                connection is refused and its open connections get nothing more through.
                """)

        @Argument(help: "The keys folder.")
        var dir: String

        @Argument(help: "The client's name.")
        var name: String

        func run() throws {
            let path = dir + "/authorized/" + name + ".key"
            guard FileManager.default.fileExists(atPath: path) else {
                throw failure("\(name) is not authorized in \(dir) (see vbt keys list \(dir))")
            }
            do { try FileManager.default.removeItem(atPath: path) } catch {
                throw failure("cannot remove \(path): \(error.localizedDescription)")
            }
            print("\(name) revoked")
        }
    }
}

private func names(in folder: String) throws -> [String] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
        throw failure("cannot read \(folder): is it a keys folder (vbt keys init)?")
    }
    return entries.filter { $0.hasSuffix(".key") }.map { String($0.dropLast(4)) }
}

private func write(_ certificate: Certificate, base: String) throws {
    do { try certificate.write(base: base, comment: "vbt keys") } catch { throw failure(error.description) }
}

private func failure(_ message: String) -> any Error {
    reportProblem("vbt keys: \(message)")
    return ExitCode.failure
}
