import CZeroMQ
import Foundation
import Logging
import Synchronization

// The ZAP handler (ZeroMQ RFC 27, https://rfc.zeromq.org/spec/27/): libzmq asks
// it, over `inproc://zeromq.zap.01` in the same context, whether each CURVE
// client may connect. It answers from `AuthorizedKeys` and names the peer by its
// public key (the ZAP User-Id), which libzmq then attaches to every message
// from that connection (`zmq_msg_gets(msg, "User-Id")`): the bus reads it to
// check each message against the peer's role, the recorder each query.
// Written here because libzmq has the protocol but no handler (czmq's zauth is
// not a dependency).

/// Answers ZAP requests on its own thread until the context shuts down. Start
/// it before any server socket of the context binds.
public final class ZAPHandler: Sendable {
    /// The certificates allowed in.
    public let authorized: AuthorizedKeys
    /// Whether the handler's socket is bound (set once, before `started` is signalled).
    private let outcome = Mutex<Result<Void, ZMQError>?>(nil)
    private let started = DispatchSemaphore(value: 0)

    /// The endpoint libzmq asks (RFC 27).
    static let endpoint = "inproc://zeromq.zap.01"

    /// Starts the handler on `context`; returns once it is bound (or throws why it is not).
    public init(context: ZMQContext, authorized: AuthorizedKeys, logger: Logger) throws(ZMQError) {
        self.authorized = authorized
        let thread = Thread { [self] in self.serve(context: context, logger: logger) }
        thread.name = "zap"
        thread.start()
        started.wait()
        try outcome.withLock { $0 ?? .success(()) }.get()
    }

    private func serve(context: ZMQContext, logger: Logger) {
        let socket: ZMQSocket
        do {
            socket = try ZMQSocket(context, .rep, lingerMs: 0)
            try socket.bind(Self.endpoint)
            try socket.setReceiveTimeout(ms: 500)
        } catch {
            outcome.withLock { $0 = .failure(error) }
            started.signal()
            return
        }
        for problem in authorized.problems { logger.warning("certificate not used", metadata: ["problem": "\(problem)"]) }
        outcome.withLock { $0 = .success(()) }
        started.signal()
        var logged = Set<String>()
        var checked = monotonicSeconds()
        while true {
            do {
                // A revoked key stops working within half a second, for the bus's checks too; the
                // folder is read at most that often, so a thousand stations reconnecting at once
                // do not each cost a scan of it.
                if monotonicSeconds() - checked >= 0.5 {
                    checked = monotonicSeconds()
                    for problem in authorized.reloadIfChanged() {
                        logger.warning("certificate not used", metadata: ["problem": "\(problem)"])
                    }
                }
                guard let request = try socket.receive(maxFrames: 8) else { continue }
                let (reply, refusal) = answer(request)
                try socket.send(frames: reply)
                if let refusal {
                    // Once per address and reason, so a client retrying every 100 ms does not flood the log.
                    if logged.count < 10_000, logged.insert(refusal.address + refusal.reason).inserted {
                        logger.warning(
                            "connection refused", metadata: ["peer.address": "\(refusal.address)", "reason": "\(refusal.reason)"])
                    }
                }
            } catch  where error.isTerminated {
                socket.close()
                return
            } catch {
                // Without a handler libzmq could let CURVE clients in unchecked: stop the program instead.
                reportProblem("the ZAP handler failed (\(error)); stopping so that nobody gets in unchecked")
                exit(70)
            }
        }
    }

    /// The reply frames to one request, and the refusal's reason when refused.
    func answer(_ request: ReceivedMessage) -> (reply: [[UInt8]], refusal: (address: String, reason: String)?) {
        let frames = request.frames
        let requestId = frames.count > 1 ? frames[1] : []
        func reply(_ code: String, _ text: String, user: String = "") -> [[UInt8]] {
            [Array("1.0".utf8), requestId, Array(code.utf8), Array(text.utf8), Array(user.utf8), []]
        }
        guard request.frameCount >= 6, frames.count >= 6, String(decoding: frames[0], as: UTF8.self) == "1.0" else {
            return (reply("500", "malformed ZAP request"), ("?", "malformed ZAP request"))
        }
        let domain = String(decoding: frames[2], as: UTF8.self)
        let address = String(decoding: frames[3], as: UTF8.self)
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        guard domain == BusSecurity.domain || domain == BusSecurity.replayDomain else {
            return (reply("400", "unknown domain"), (address, "domain \(domain) is not \(BusSecurity.domain)"))
        }
        guard mechanism == "CURVE", frames.count >= 7, let key = z85Encode(frames[6]) else {
            return (reply("400", "CURVE only"), (address, "mechanism \(mechanism): only CURVE is allowed"))
        }
        guard let peer = authorized.peer(publicKey: key) else {
            return (reply("400", "key not authorized"), (address, "key \(key.prefix(8))... is not in \(authorized.folder)"))
        }
        // A journal holds a station's readings, athletes named: only the services fetch from it.
        if domain == BusSecurity.replayDomain, !peer.role.mayFetchFromJournals {
            return (reply("400", "replay is for services"), (address, "\(peer.name) (\(peer.role)) may not fetch from a journal: services only"))
        }
        return (reply("200", "OK", user: key), nil)
    }
}

extension ZMQSocket {
    /// The ZAP User-Id of the connection `msg` came in on (the peer's public key), or nil without CURVE.
    package static func userId(of msg: inout zmq_msg_t) -> UnsafePointer<CChar>? {
        zmq_msg_gets(&msg, "User-Id")
    }
}
