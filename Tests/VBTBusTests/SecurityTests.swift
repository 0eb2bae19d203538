import Foundation
import Logging
import Testing
import VBTTesting

@testable import VBTBus
@testable import VBTWire

/// The pure parts of proto/security.md: certificate files, roles and what each
/// may publish, the ZAP handler's answers, and where plaintext is allowed. The
/// sockets themselves are tested with real processes (tests/python/test_security.py,
/// test_multihost.py).
@Suite("security")
struct SecurityTests {
    @Test("a certificate written and read back keeps its keys and metadata; a secret file is mode 0600; a mismatched pair is refused")
    func certificateFiles() throws {
        let dir = try TemporaryDirectory()
        let base = dir.url.appendingPathComponent("rack-01").path
        let made = try Certificate.generate(metadata: ["name": "rack-01", "role": "bridge", "station": "rack-01"])
        try made.write(base: base, comment: "test")
        let secret = try Certificate.load(path: base + ".key_secret")
        let publicOnly = try Certificate.load(path: base + ".key")
        #expect(secret == made)
        #expect(publicOnly == made.publicOnly && publicOnly.secretKey == nil)
        let mode = try FileManager.default.attributesOfItem(atPath: base + ".key_secret")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try secret.role(name: "rack-01") == .bridge(station: "rack-01"))

        // Another pair's public key with this secret key: refused, naming what to do.
        let other = try Certificate.generate(metadata: [:])
        let forged = Certificate(publicKey: other.publicKey, secretKey: made.secretKey, metadata: made.metadata)
        try Data(forged.text(secret: true, comment: "forged").utf8).write(to: URL(fileURLWithPath: base + "-forged.key_secret"))
        #expect(throws: SecurityError.self) { try Certificate.load(path: base + "-forged.key_secret") }
        try Data("metadata\ncurve\n    public-key = \"short\"\n".utf8).write(to: URL(fileURLWithPath: base + "-bad.key"))
        #expect(throws: SecurityError.self) { try Certificate.load(path: base + "-bad.key") }
    }

    @Test("roles from metadata: a bridge names its station, a service a known program; anything else is refused")
    func roles() throws {
        #expect(try PeerRole(metadata: ["role": "service"], name: "notifier") == .service(program: "notifier"))
        #expect(try PeerRole(metadata: ["role": "service", "program": "rep-detector"], name: "det-2") == .service(program: "rep-detector"))
        #expect(try PeerRole(metadata: ["role": "viewer"], name: "tv") == .viewer)
        #expect(throws: SecurityError.self) { try PeerRole(metadata: ["role": "bridge"], name: "rack-01") }
        #expect(throws: SecurityError.self) { try PeerRole(metadata: ["role": "service"], name: "mallory") }
        #expect(throws: SecurityError.self) { try PeerRole(metadata: ["role": "admin"], name: "x") }
        #expect(throws: SecurityError.self) { try PeerRole(metadata: [:], name: "x") }
    }

    @Test("what each role may publish: its own topics only, never heartbeat.bus")
    func rights() {
        let bridge = PeerRole.bridge(station: "rack-01").rights
        #expect(bridge.allows("sample.rack-01") && bridge.allows("status.rack-01") && bridge.allows("heartbeat.bridge-rack-01"))
        for topic in ["sample.rack-02", "sample.rack-011", "sample.rack-0", "cmd.rack-01", "rep.rack-01", "heartbeat.bus", "heartbeat.bridge-rack-02"] {
            #expect(!bridge.allows(topic), "\(topic)")
        }
        let detector = PeerRole.service(program: "rep-detector").rights
        #expect(detector.allows("rep.rack-07") && detector.allows("handoff.rack-01") && detector.allows("heartbeat.rep-detector"))
        #expect(!detector.allows("cmd.rack-01") && !detector.allows("heartbeat.notifier") && !detector.allows("rep.") && !detector.allows("sample.rack-01"))
        let notifier = PeerRole.service(program: "notifier").rights
        #expect(notifier.allows("cmd.rack-01") && notifier.allows("alert.rack-01") && !notifier.allows("rep.rack-01"))
        let replayer = PeerRole.service(program: "sensor-bridge").rights
        #expect(replayer.allows("sample.rack-900") && replayer.allows("heartbeat.bridge-replay") && !replayer.allows("cmd.rack-01"))
        #expect(PeerRole.coach.rights.allows("cmd.rack-01") && !PeerRole.coach.rights.allows("sample.rack-01"))
        for role in [PeerRole.viewer, .coach, .bridge(station: "bus"), .service(program: "session-recorder")] {
            #expect(!role.rights.allows("heartbeat.bus"), "\(role)")
        }
        #expect(!PeerRole.viewer.rights.allows("cmd.rack-01"))
    }

    @Test("the ZAP handler lets in an authorized CURVE key only, in the vbt domain, and names it by its public key")
    func zapAnswers() throws {
        let dir = try TemporaryDirectory()
        let folder = dir.url.appendingPathComponent("authorized").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let coach = try Certificate.generate(metadata: ["name": "coach", "role": "coach"])
        try coach.publicOnly.write(base: folder + "/coach", comment: "test")
        let handler = try ZAPHandler(
            context: ZMQContext(), authorized: AuthorizedKeys(folder: folder), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        func request(domain: String = "vbt", mechanism: String = "CURVE", key: String) -> ReceivedMessage {
            let decoded = z85Decode(key) ?? []
            var message = ReceivedMessage()
            message.frames = ["1.0", "7", domain, "10.0.0.9", "", mechanism].map { Array($0.utf8) } + [decoded]
            message.frameCount = message.frames.count
            return message
        }
        let accepted = handler.answer(request(key: coach.publicKey))
        #expect(accepted.refusal == nil)
        #expect(accepted.reply.map { String(decoding: $0, as: UTF8.self) } == ["1.0", "7", "200", "OK", coach.publicKey, ""])
        let stranger = try Certificate.generate(metadata: [:])
        #expect(handler.answer(request(key: stranger.publicKey)).reply[2] == Array("400".utf8))
        #expect(handler.answer(request(domain: "other", key: coach.publicKey)).reply[2] == Array("400".utf8))
        #expect(handler.answer(request(mechanism: "NULL", key: coach.publicKey)).reply[2] == Array("400".utf8))
        var short = ReceivedMessage()
        short.frames = [Array("1.0".utf8)]
        short.frameCount = 1
        #expect(handler.answer(short).reply[2] == Array("500".utf8))

        // Revoked: removed from the folder, gone at the next reading.
        try FileManager.default.removeItem(atPath: folder + "/coach.key")
        _ = handler.authorized.reloadIfChanged()
        #expect(handler.authorized.peer(publicKey: coach.publicKey) == nil)
        #expect(handler.answer(request(key: coach.publicKey)).reply[2] == Array("400".utf8))
    }

    @Test("a replay endpoint off its computer (ZAP domain vbt-replay) admits service keys only; a bridge, a coach, a viewer are refused")
    func zapReplayDomain() throws {
        let dir = try TemporaryDirectory()
        let folder = dir.url.appendingPathComponent("authorized").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var keys: [String: Certificate] = [:]
        for (name, metadata) in [
            ("session-recorder", ["role": "service"]), ("rack-01", ["role": "bridge", "station": "rack-01"]), ("coach", ["role": "coach"]),
            ("tv", ["role": "viewer"]),
        ] {
            keys[name] = try Certificate.generate(metadata: metadata.merging(["name": name]) { first, _ in first })
            try keys[name]?.publicOnly.write(base: folder + "/" + name, comment: "test")
        }
        let handler = try ZAPHandler(
            context: ZMQContext(), authorized: AuthorizedKeys(folder: folder), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        func code(_ name: String, domain: String) throws -> String {
            var message = ReceivedMessage()
            message.frames = ["1.0", "1", domain, "10.0.0.9", "", "CURVE"].map { Array($0.utf8) } + [z85Decode(try #require(keys[name]).publicKey) ?? []]
            message.frameCount = message.frames.count
            return String(decoding: handler.answer(message).reply[2], as: UTF8.self)
        }
        #expect(try code("session-recorder", domain: BusSecurity.replayDomain) == "200")
        for name in ["rack-01", "coach", "tv"] {
            #expect(try code(name, domain: BusSecurity.replayDomain) == "400", "\(name)")
            #expect(try code(name, domain: BusSecurity.domain) == "200", "\(name) on the bus's own domain")
        }
    }

    @Test("a replay endpoint off this computer needs this program's key and the authorized keys to bind, and the producer's offered key to connect")
    func replayEndpointsOffThisComputer() throws {
        let certificate = try Certificate.generate(metadata: ["name": "rack-01", "role": "bridge", "station": "rack-01"])
        var config = freeBusConfig()
        var security = BusSecurity()
        security.certificate = certificate
        security.serverKey = certificate.publicKey
        config.security = security
        let transport = ZMQTransport(context: ZMQContext(), config: config)
        #expect(throws: ZMQError.self, "no VBT_AUTHORIZED: it could not tell services from others") {
            try transport.serverLink(endpoint: "tcp://203.0.113.9:9000")
        }
        #expect(throws: ZMQError.self, "no offered key") { try transport.clientLink(endpoint: "tcp://203.0.113.9:9000", serverKey: nil) }
        _ = try transport.clientLink(endpoint: "tcp://203.0.113.9:9000", serverKey: certificate.publicKey)
        #expect(transport.replayServerKey(endpoint: "tcp://203.0.113.9:9000") == certificate.publicKey)
        #expect(transport.replayServerKey(endpoint: "ipc:///tmp/x/replay.sock") == nil, "a local endpoint is offered without a key")
    }

    @Test("without keys every socket refuses an endpoint off this computer, whatever the options said")
    func plaintextSockets() throws {
        var config = BusConfig()
        config.subEndpoint = "tcp://10.0.0.2:7702"
        config.queryEndpoint = "tcp://10.0.0.2:7703"
        let transport = ZMQTransport(context: ZMQContext(), config: config)
        #expect(throws: ZMQError.self) { try transport.subscriberLink(prefixes: [""]) }
        #expect(throws: ZMQError.self) { try transport.queryClientLink() }
        #expect(throws: ZMQError.self) { try transport.queryServerLink() }
        // A heartbeat offering a replay endpoint elsewhere (forged, or a station's own ipc://) is never connected to.
        #expect(throws: ZMQError.self) { try transport.clientLink(endpoint: "tcp://203.0.113.9:9000") }
        #expect(throws: ZMQError.self) { try transport.serverLink(endpoint: "tcp://*:9000") }
        _ = try transport.clientLink(endpoint: "tcp://127.0.0.1:9")
    }

    @Test("plaintext only on this computer")
    func loopback() {
        for endpoint in ["tcp://127.0.0.1:7701", "tcp://127.1.2.3:1", "tcp://localhost:7702", "tcp://[::1]:7701", "ipc:///tmp/x", "inproc://a"] {
            #expect(isLoopback(endpoint), "\(endpoint)")
        }
        for endpoint in ["tcp://*:7701", "tcp://0.0.0.0:7701", "tcp://10.0.0.2:7701", "tcp://eth0:7701", "tcp://127.0.0.1;10.0.0.2:7701", "udp://127.0.0.1:1"] {
            #expect(!isLoopback(endpoint), "\(endpoint)")
        }
    }
}
