import CZeroMQ
import Foundation
import Synchronization
import VBTWire

// The bus's security (proto/security.md):
// CURVE keys in ZeroMQ's certificate files, the roles they carry, and what each
// role may publish. Written here because libzmq gives the mechanism (CURVE,
// ZAP) but no certificate files or policy: czmq's zcert/zauth do that in C and
// are not a dependency of this package; the format is the one czmq and pyzmq
// read (a `metadata` and a `curve` section of `key = "value"` lines).

/// Why a key or certificate cannot be used, with what to do.
public struct SecurityError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What a certificate's holder is (its `role` metadata), and so what it may do.
public enum PeerRole: Sendable, Hashable, CustomStringConvertible {
    /// A station's sensor bridge: that station's readings, status and heartbeat.
    case bridge(station: String)
    /// A vbt service (`program` is one of `PeerRole.services`): its own message types.
    case service(program: String)
    /// A coach: commands to stations, reads and writes at the query endpoint.
    case coach
    /// Reads the bus and the query endpoint; publishes nothing.
    case viewer

    /// The role names of the `role` metadata.
    public static let names = ["bridge", "service", "coach", "viewer"]

    /// What each service program publishes: the types at every station, and its heartbeat's station.
    /// A replaying `sensor-bridge` (a load generator) publishes readings for any station.
    public static let services: [String: (types: [String], heartbeats: [String])] = [
        "rep-detector": (
            [
                RepMessage.type, SetMessage.type, RejectedMessage.type, ProfileMessage.type, TakeoverMessage.type, HandoffMessage.type,
                AckMessage.type,
            ],
            ["rep-detector"]
        ),
        "posture-evaluator": ([PostureMessage.type, CalibrationMessage.type, AckMessage.type], ["posture-evaluator"]),
        "notifier": ([TimerMessage.type, AlertMessage.type, WorkoutMessage.type, CommandMessage.type, AckMessage.type], ["notifier"]),
        "session-recorder": ([], ["session-recorder"]),
        "sensor-bridge": ([SampleMessage.type, StatusMessage.type], ["bridge-replay"]),
        // The coach console sends the commands its coaches give on its pages.
        "coach-console": ([CommandMessage.type], ["coach-console"]),
    ]

    /// Reads a role from certificate metadata; nil with the reason when it is missing or wrong.
    public init(metadata: [String: String], name: String) throws(SecurityError) {
        switch metadata["role"] {
        case "bridge"?:
            guard let station = metadata["station"], !station.isEmpty else {
                throw SecurityError("certificate \(name): a bridge's certificate names its station (station = \"rack-01\")")
            }
            self = .bridge(station: station)
        case "service"?:
            let program = metadata["program"] ?? name
            guard PeerRole.services[program] != nil else {
                throw SecurityError(
                    "certificate \(name): a service's program must be one of \(PeerRole.services.keys.sorted().joined(separator: ", ")), not \(program)")
            }
            self = .service(program: program)
        case "coach"?: self = .coach
        case "viewer"?: self = .viewer
        case let other?: throw SecurityError("certificate \(name): role \(other) is not one of \(PeerRole.names.joined(separator: ", "))")
        case nil: throw SecurityError("certificate \(name): no role in its metadata")
        }
    }

    /// The metadata that says this role.
    public var metadata: [String: String] {
        switch self {
        case .bridge(let station): ["role": "bridge", "station": station]
        case .service(let program): ["role": "service", "program": program]
        case .coach: ["role": "coach"]
        case .viewer: ["role": "viewer"]
        }
    }

    public var description: String {
        switch self {
        case .bridge(let station): "bridge of \(station)"
        case .service(let program): "service \(program)"
        case .coach: "coach"
        case .viewer: "viewer"
        }
    }

    /// May this role read the query endpoint? Every role but a bridge.
    public var mayQuery: Bool {
        if case .bridge = self { return false }
        return true
    }

    /// May this role ask a producer's replay endpoint across the network? Services only.
    public var mayFetchFromJournals: Bool {
        if case .service = self { return true }
        return false
    }

    /// May this role change what the query endpoint stores? Coaches and services.
    public var mayWriteQueries: Bool {
        switch self {
        case .coach, .service: true
        case .bridge, .viewer: false
        }
    }

    /// The topics this role may publish, checked per message by the bus.
    public var rights: PublishRights {
        switch self {
        case .bridge(let station):
            return PublishRights(
                exact: [
                    SampleMessage.topic(station: station), StatusMessage.topic(station: station),
                    HeartbeatMessage.topic(station: "bridge-" + station),
                ], prefixes: [])
        case .service(let program):
            let entry = PeerRole.services[program] ?? ([], [])
            var prefixes = entry.types.map { $0 + "." }
            // A replaying bridge journals under `bridge-replay`; the stations it replays are its own.
            if program == "sensor-bridge" { prefixes.append(HeartbeatMessage.topic(station: "bridge-")) }
            // Detectors splitting a gym (`--shard K/N`) beat as `rep-detector-K`, each its own program on the bus.
            if program == "rep-detector" { prefixes.append(HeartbeatMessage.topic(station: "rep-detector-")) }
            return PublishRights(exact: entry.heartbeats.map { HeartbeatMessage.topic(station: $0) }, prefixes: prefixes)
        case .coach:
            return PublishRights(exact: [], prefixes: [CommandMessage.topicPrefix])
        case .viewer:
            return PublishRights(exact: [], prefixes: [])
        }
    }
}

/// The topics one peer may publish: exact topics and topic prefixes, as bytes,
/// so the bus checks a message's topic frame without building a string.
public struct PublishRights: Sendable, Equatable {
    public let exact: [[UInt8]]
    public let prefixes: [[UInt8]]

    init(exact: [String], prefixes: [String]) {
        self.exact = exact.map { Array($0.utf8) }
        self.prefixes = prefixes.map { Array($0.utf8) }
    }

    /// Whether `topic` is one of these. `heartbeat.bus` never is: only the bus publishes it, on its own side.
    public func allows(_ topic: UnsafeRawBufferPointer) -> Bool {
        for candidate in exact where candidate.count == topic.count {
            if candidate.withUnsafeBytes({ memcmp($0.baseAddress!, topic.baseAddress!, topic.count) == 0 }) { return true }
        }
        for prefix in prefixes where prefix.count < topic.count {
            if prefix.withUnsafeBytes({ memcmp($0.baseAddress!, topic.baseAddress!, prefix.count) == 0 }) { return true }
        }
        return false
    }

    /// Whether `topic` is one of these.
    public func allows(_ topic: String) -> Bool {
        var bytes = Array(topic.utf8)
        return bytes.withUnsafeMutableBytes { allows(UnsafeRawBufferPointer($0)) }
    }
}

/// A CURVE certificate: a public key, maybe its secret key, and metadata, in
/// ZeroMQ's certificate file format.
public struct Certificate: Sendable, Equatable {
    /// The public key, Z85 (40 characters).
    public var publicKey: String
    /// The secret key, Z85, in a secret certificate only.
    public var secretKey: String?
    /// The metadata section: `name`, `role`, `station`, `program`.
    public var metadata: [String: String]

    /// Creates a certificate from its parts.
    public init(publicKey: String, secretKey: String? = nil, metadata: [String: String] = [:]) {
        (self.publicKey, self.secretKey, self.metadata) = (publicKey, secretKey, metadata)
    }

    /// A new key pair (`zmq_curve_keypair`) with `metadata`.
    public static func generate(metadata: [String: String]) throws(SecurityError) -> Certificate {
        var publicKey = [CChar](repeating: 0, count: 41), secretKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicKey, &secretKey) == 0 else {
            throw SecurityError("cannot make a CURVE key pair: this libzmq has no CURVE (build it with libsodium)")
        }
        return Certificate(publicKey: z85String(publicKey), secretKey: z85String(secretKey), metadata: metadata)
    }

    /// The certificate's name: its `name` metadata, else `fallback`.
    public func name(or fallback: String) -> String { metadata["name"] ?? fallback }

    /// The holder's role, from the metadata.
    public func role(name: String) throws(SecurityError) -> PeerRole { try PeerRole(metadata: metadata, name: name) }

    /// The public part only.
    public var publicOnly: Certificate { Certificate(publicKey: publicKey, metadata: metadata) }

    /// Reads a certificate file (`NAME.key` or `NAME.key_secret`).
    public static func load(path: String) throws(SecurityError) -> Certificate {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SecurityError("cannot read the certificate \(path): make it with `vbt keys`, or fix the path")
        }
        var section = "", metadata: [String: String] = [:], publicKey: String?, secretKey: String?
        for raw in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let line = String(raw)
            if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) { continue }
            if let first = line.first, !first.isWhitespace {
                section = line.trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t\"'"))
            switch (section, key) {
            case ("metadata", _): metadata[key] = value
            case ("curve", "public-key"): publicKey = value
            case ("curve", "secret-key"): secretKey = value
            default: break
            }
        }
        guard let publicKey, isZ85Key(publicKey) else {
            throw SecurityError("\(path) has no valid public-key (40 Z85 characters): not a ZeroMQ certificate")
        }
        if let secretKey {
            guard isZ85Key(secretKey) else { throw SecurityError("\(path): its secret-key is not 40 Z85 characters") }
            var derived = [CChar](repeating: 0, count: 41)
            guard zmq_curve_public(&derived, secretKey) == 0, z85String(derived) == publicKey else {
                throw SecurityError("\(path): its public-key is not the secret key's; make the certificate again with `vbt keys`")
            }
        }
        return Certificate(publicKey: publicKey, secretKey: secretKey, metadata: metadata)
    }

    /// The certificate file's text; the secret key only when `secret`.
    public func text(secret: Bool, comment: String) -> String {
        var lines = ["#   ZeroMQ CURVE \(secret ? "secret" : "public") certificate (\(comment))"]
        if secret { lines.append("#   Secret: keep it on the computer it is for, readable by its owner only.") }
        lines.append("metadata")
        for key in metadata.keys.sorted() { lines.append("    \(key) = \"\(metadata[key] ?? "")\"") }
        lines.append("curve")
        lines.append("    public-key = \"\(publicKey)\"")
        if secret, let secretKey { lines.append("    secret-key = \"\(secretKey)\"") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Writes `base.key` (public) and, with a secret key, `base.key_secret` (mode 0600).
    public func write(base: String, comment: String) throws(SecurityError) {
        do {
            try Data(text(secret: false, comment: comment).utf8).write(to: URL(fileURLWithPath: base + ".key"))
            if secretKey != nil {
                let path = base + ".key_secret"
                // Created 0600 before the key is in it, so it is never readable by others.
                guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                    throw SecurityError("cannot create \(path)")
                }
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
                try Data(text(secret: true, comment: comment).utf8).write(to: URL(fileURLWithPath: path))
            }
        } catch let error as SecurityError {
            throw error
        } catch {
            throw SecurityError("cannot write \(base).key: \(error.localizedDescription)")
        }
    }
}

private func z85String(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Whether `text` is a Z85-encoded 32-byte key.
public func isZ85Key(_ text: String) -> Bool { z85Decode(text) != nil }

/// The 32 bytes of a Z85-encoded key.
func z85Decode(_ text: String) -> [UInt8]? {
    guard text.utf8.count == 40 else { return nil }
    var decoded = [UInt8](repeating: 0, count: 32)
    return zmq_z85_decode(&decoded, text) == nil ? nil : decoded
}

/// The Z85 text of a 32-byte key, as a ZAP request carries it.
func z85Encode(_ key: [UInt8]) -> String? {
    guard key.count == 32 else { return nil }
    var text = [CChar](repeating: 0, count: 41)
    guard zmq_z85_encode(&text, key, 32) != nil else { return nil }
    return z85String(text)
}

/// One peer allowed in: its certificate's name and role.
public struct AuthorizedPeer: Sendable, Equatable {
    public let name: String
    public let role: PeerRole
    /// What it may publish, precomputed.
    public let rights: PublishRights
}

/// The certificates in an `authorized/` folder, read again whenever the
/// folder changes (a key added or revoked), shared by the ZAP handler (who
/// gets in) and the bus (what each message may be). Thread-safe.
public final class AuthorizedKeys: Sendable {
    /// The folder of public certificates, `VBT_AUTHORIZED`.
    public let folder: String
    private struct Snapshot {
        var stamp: [String: Double] = [:]
        var peers: [String: AuthorizedPeer] = [:]
        var generation = 0
        var problems: [String] = []
    }
    private let state = Mutex(Snapshot())

    /// Reads `folder`; fails when it cannot be read (a folder with no keys is fine: nobody gets in).
    public init(folder: String) throws(SecurityError) {
        self.folder = folder
        guard FileManager.default.fileExists(atPath: folder) else {
            throw SecurityError("the authorized folder \(folder) does not exist: make it with `vbt keys init`, or set VBT_AUTHORIZED")
        }
        _ = reloadIfChanged()
    }

    /// How many times the set has been read; a cache of lookups is stale when it moves.
    public var generation: Int { state.withLock { $0.generation } }

    /// The peer holding `publicKey` (Z85), if it is authorized now.
    public func peer(publicKey: String) -> AuthorizedPeer? { state.withLock { $0.peers[publicKey] } }

    /// The certificates of the last reading that could not be used, with why.
    public var problems: [String] { state.withLock { $0.problems } }

    /// Every authorized peer, by public key.
    public var peers: [String: AuthorizedPeer] { state.withLock { $0.peers } }

    /// Reads the folder again when any certificate in it was added, removed or
    /// changed; returns the certificates that could not be used (to log).
    public func reloadIfChanged() -> [String] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".key") }
        var stamp: [String: Double] = [:]
        for name in names {
            let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            stamp[name] = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        }
        if state.withLock({ $0.stamp == stamp && $0.generation > 0 }) { return [] }
        var peers: [String: AuthorizedPeer] = [:], problems: [String] = []
        for name in names.sorted() {
            let fallback = String(name.dropLast(4))
            do {
                let certificate = try Certificate.load(path: folder + "/" + name)
                let peerName = certificate.name(or: fallback)
                let role = try certificate.role(name: peerName)
                peers[certificate.publicKey] = AuthorizedPeer(name: peerName, role: role, rights: role.rights)
            } catch {
                problems.append(error.description)
            }
        }
        state.withLock { snapshot in
            snapshot = Snapshot(stamp: stamp, peers: peers, generation: snapshot.generation + 1, problems: problems)
        }
        return problems
    }
}

/// The keys a program runs with, from the environment (proto/security.md).
/// Absent (nil in `BusConfig.security`) means plaintext, allowed on loopback only.
public struct BusSecurity: Sendable, Equatable {
    /// This program's own secret certificate (`VBT_CERT`): how it connects.
    public var certificate: Certificate?
    /// The server's public key (`VBT_BUS_CERT`): whom it connects to.
    public var serverKey: String?
    /// The server's secret certificate (`VBT_SERVER_CERT`): vbt-bus and the recorder bind with it.
    public var serverCertificate: Certificate?
    /// The folder of public certificates allowed in (`VBT_AUTHORIZED`).
    public var authorizedFolder: String?

    /// Nothing set.
    public init() {}

    /// The ZAP domain every vbt server socket enforces.
    public static let domain = "vbt"
    /// The ZAP domain of a producer's replay endpoint off its computer: service keys only.
    public static let replayDomain = "vbt-replay"

    /// Reads `VBT_CERT`, `VBT_BUS_CERT`, `VBT_SERVER_CERT`, `VBT_AUTHORIZED`;
    /// nil when none is set.
    public static func fromEnvironment() throws(SecurityError) -> BusSecurity? {
        var security = BusSecurity()
        if let path = environment("VBT_CERT") {
            let certificate = try Certificate.load(path: path)
            guard certificate.secretKey != nil else {
                throw SecurityError("VBT_CERT=\(path) has no secret key: give the .key_secret file")
            }
            security.certificate = certificate
        }
        if let path = environment("VBT_BUS_CERT") { security.serverKey = try Certificate.load(path: path).publicKey }
        if let path = environment("VBT_SERVER_CERT") {
            let certificate = try Certificate.load(path: path)
            guard certificate.secretKey != nil else {
                throw SecurityError("VBT_SERVER_CERT=\(path) has no secret key: give server.key_secret")
            }
            security.serverCertificate = certificate
        }
        security.authorizedFolder = environment("VBT_AUTHORIZED")
        if security == BusSecurity() { return nil }
        if security.certificate != nil && security.serverKey == nil {
            throw SecurityError("VBT_CERT is set but VBT_BUS_CERT is not: set it to the installation's server.key")
        }
        if security.serverKey != nil && security.certificate == nil && security.serverCertificate == nil {
            throw SecurityError("VBT_BUS_CERT is set but VBT_CERT is not: set it to this program's .key_secret (`vbt keys add`)")
        }
        if security.serverCertificate != nil && security.authorizedFolder == nil {
            throw SecurityError("VBT_SERVER_CERT is set but VBT_AUTHORIZED is not: set it to the keys' authorized/ folder")
        }
        return security
    }

    /// The client's keys, or why a connection cannot be secured.
    func clientKeys() throws(ZMQError) -> (certificate: Certificate, serverKey: String) {
        guard let certificate, let serverKey else {
            throw ZMQError(code: EINVAL, operation: "CURVE: set VBT_CERT and VBT_BUS_CERT to connect to a secured bus")
        }
        return (certificate, serverKey)
    }
}

extension ZMQSocket {
    /// Makes this socket a CURVE client of the server holding `serverKey`.
    public func secureAsClient(_ certificate: Certificate, serverKey: String) throws(ZMQError) {
        guard let secret = certificate.secretKey else { throw ZMQError(code: EINVAL, operation: "CURVE: a client needs its secret key") }
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: Array(serverKey.utf8))
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: Array(certificate.publicKey.utf8))
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(secret.utf8))
    }

    /// Makes this socket a CURVE server with `certificate`, each connection
    /// asked of the context's ZAP handler in the `vbt` domain (no handler, no connection).
    public func secureAsServer(_ certificate: Certificate, domain: String = BusSecurity.domain) throws(ZMQError) {
        guard let secret = certificate.secretKey else { throw ZMQError(code: EINVAL, operation: "CURVE: a server needs its secret key") }
        try setOption(ZMQ_CURVE_SERVER, 1)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(secret.utf8))
        try setOption(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8))
        // Refuse, rather than let in, when no ZAP handler answers. A libzmq built
        // without draft options refuses the option; the handler then never
        // stops without stopping the program (`ZAPHandler`), so it always answers.
        do { try setOption(ZMQ_ZAP_ENFORCE_DOMAIN, 1) } catch  where error.code == EINVAL {}
    }
}

/// Whether every endpoint stays on this computer (`tcp://127.x`, `tcp://localhost`,
/// `tcp://[::1]`, `ipc://`, `inproc://`): the only place plaintext is allowed.
public func isLoopback(_ endpoint: String) -> Bool {
    if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
    guard endpoint.hasPrefix("tcp://") else { return false }
    var host = endpoint.dropFirst(6)
    if let semicolon = host.firstIndex(of: ";") { host = host[host.index(after: semicolon)...] }  // source;peer: the peer counts
    if host.hasPrefix("[::1]:") { return true }
    guard let colon = host.lastIndex(of: ":") else { return false }
    let name = host[..<colon]
    return name == "localhost" || name.hasPrefix("127.")
}

/// The error for plaintext on an endpoint off this computer.
package func plaintextRefused(_ endpoint: String) -> ZMQError {
    ZMQError(
        code: EINVAL,
        operation:
            "\(endpoint) is not on this computer: without keys (--insecure) only loopback and ipc:// endpoints are allowed; give keys (proto/security.md)")
}
