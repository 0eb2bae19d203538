import CZeroMQ
import Synchronization
import VBTWire

// The ZeroMQ layer over the C API.
//
// Threading model (the one place it is written down):
// - `ZMQContext` is thread-safe (libzmq guarantees it) and `Sendable`.
// - `ZMQSocket` is NOT thread-safe and deliberately not `Sendable`: a socket is
//   created, used and closed by one thread, and the compiler refuses to let it
//   cross into another concurrency domain. Long-lived sockets live on a
//   dedicated `Thread` (see `SocketThread`); async code reaches them through a
//   lock-protected queue (outbound) or an `AsyncStream` (inbound), never by
//   touching the socket.
// - Shutdown: `ZMQContext.shutdown()` makes every blocking call on every socket
//   of that context return `ETERM`, which the layer reports as
//   `ZMQError.terminated` and the owning thread treats as "stop now". Every
//   socket gets a bounded linger, so closing and terminating never hang.
// - `EINTR` is retried in exactly one place, `retryingInterrupts`.

/// An error from libzmq, carrying errno and the operation that failed.
public struct ZMQError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The errno value libzmq reported.
    public let code: Int32
    /// The libzmq call that failed, e.g. `zmq_bind(tcp://127.0.0.1:7701)`.
    public let operation: String

    /// The error `code` (an errno value) from `operation`.
    public init(code: Int32, operation: String) { (self.code, self.operation) = (code, operation) }

    /// The context was shut down: the owner should close the socket and stop.
    public var isTerminated: Bool { code == ETERM }
    /// A non-blocking call had nothing to do, or a timeout expired.
    public var isAgain: Bool { code == EAGAIN }

    public var description: String {
        let text = String(cString: zmq_strerror(code))
        return "\(operation): \(text) (errno \(code))"
    }

    static func last(_ operation: @autoclosure () -> String) -> ZMQError {
        ZMQError(code: czmq_errno(), operation: operation())
    }
}

/// Runs a libzmq call, retrying while it fails with `EINTR` (a signal arrived).
@inline(__always)
package func retryingInterrupts(_ call: () -> Int32) -> (result: Int32, errno: Int32) {
    while true {
        let result = call()
        if result >= 0 { return (result, 0) }
        let code = czmq_errno()
        if code != EINTR { return (result, code) }
    }
}

/// A libzmq context: owns the I/O threads; thread-safe.
public final class ZMQContext: @unchecked Sendable {
    package let handle: UnsafeMutableRawPointer
    private let terminated = Mutex<Bool>(false)

    /// Creates a context with `ioThreads` background I/O threads (libzmq's default is 1).
    public init(ioThreads: Int32 = 1) {
        guard let handle = zmq_ctx_new() else {
            fatalError("zmq_ctx_new failed: out of memory or file descriptors")
        }
        zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads)
        self.handle = handle
    }

    /// Makes every blocking call on this context's sockets fail with `ETERM`.
    /// Safe to call from any thread, more than once.
    public func shutdown() {
        _ = zmq_ctx_shutdown(handle)
    }

    /// Waits until every socket's queued messages are delivered or its linger
    /// expires, then frees the context. Call it once all sockets are closed,
    /// before the process exits: that is what flushes a publisher's last messages.
    /// Later calls do nothing.
    public func terminate() {
        let first = terminated.withLock { done in
            defer { done = true }
            return !done
        }
        if first { _ = retryingInterrupts { zmq_ctx_term(handle) } }
    }

    deinit {
        // Every socket retains its context, so by now all sockets are closed and
        // zmq_ctx_term only waits for bounded lingers.
        terminate()
    }

    /// The libzmq version linked at run time, e.g. "4.3.4".
    public static var version: String {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }
}

/// The socket types the product uses.
public enum ZMQSocketType: Sendable {
    case pub, sub, xpub, xsub, pair, push, pull, router, dealer, rep

    var raw: Int32 {
        switch self {
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .xpub: ZMQ_XPUB
        case .xsub: ZMQ_XSUB
        case .pair: ZMQ_PAIR
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .router: ZMQ_ROUTER
        case .dealer: ZMQ_DEALER
        case .rep: ZMQ_REP
        }
    }
}

/// One libzmq socket, owned by one thread. Not `Sendable` on purpose.
public final class ZMQSocket {
    package let handle: UnsafeMutableRawPointer
    private let context: ZMQContext  // keeps the context alive while the socket is open
    private var closed = false
    /// Whether `receive` reads each message's ZAP User-Id (a CURVE server's sockets).
    public var readsUserId = false

    /// Milliseconds a closing socket may keep trying to deliver queued messages.
    public static let defaultLingerMs: Int32 = 2_000

    /// Creates a socket of `type` in `context` with a bounded linger.
    public init(_ context: ZMQContext, _ type: ZMQSocketType, lingerMs: Int32 = ZMQSocket.defaultLingerMs) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.raw) else {
            throw ZMQError.last("zmq_socket")
        }
        self.handle = handle
        self.context = context
        try setOption(ZMQ_LINGER, lingerMs)
    }

    deinit { close() }

    /// Closes the socket; later calls do nothing.
    public func close() {
        guard !closed else { return }
        closed = true
        zmq_close(handle)
    }

    // MARK: Options

    /// Sets an integer socket option.
    public func setOption(_ option: Int32, _ value: Int32) throws(ZMQError) {
        var value = value
        let rc = zmq_setsockopt(handle, option, &value, MemoryLayout<Int32>.size)
        if rc != 0 { throw ZMQError.last("zmq_setsockopt(\(option))") }
    }

    /// Sets a binary socket option (subscriptions, identities).
    public func setOption(_ option: Int32, bytes: [UInt8]) throws(ZMQError) {
        let rc = bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        if rc != 0 { throw ZMQError.last("zmq_setsockopt(\(option))") }
    }

    /// Reads an integer socket option.
    public func intOption(_ option: Int32) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        let rc = zmq_getsockopt(handle, option, &value, &size)
        if rc != 0 { throw ZMQError.last("zmq_getsockopt(\(option))") }
        return value
    }

    /// Refuses inbound frames over `bytes` (`ZMQ_MAXMSGSIZE`, checked per frame
    /// as it is read): libzmq drops the peer that sent one, before any of it
    /// is queued or forwarded.
    public func setMaxFrameBytes(_ bytes: Int) throws(ZMQError) {
        var value = Int64(bytes)
        let rc = zmq_setsockopt(handle, ZMQ_MAXMSGSIZE, &value, MemoryLayout<Int64>.size)
        if rc != 0 { throw ZMQError.last("zmq_setsockopt(ZMQ_MAXMSGSIZE)") }
    }

    /// Sets both high-water marks (messages queued per peer; 0 means unbounded).
    public func setHighWaterMark(_ messages: Int32) throws(ZMQError) {
        try setOption(ZMQ_SNDHWM, messages)
        try setOption(ZMQ_RCVHWM, messages)
    }

    /// Subscribes a SUB socket to every topic starting with `prefix`.
    public func subscribe(_ prefix: String) throws(ZMQError) {
        try setOption(ZMQ_SUBSCRIBE, bytes: Array(prefix.utf8))
    }

    /// Sets how long a blocking receive waits before failing with `EAGAIN` (-1 forever).
    public func setReceiveTimeout(ms: Int32) throws(ZMQError) {
        try setOption(ZMQ_RCVTIMEO, ms)
    }

    /// Reports this socket's connections as events on a PAIR socket bound at
    /// `endpoint` (`zmq_socket_monitor`): connections accepted (the event's value
    /// is the descriptor), handshakes that succeeded, those that failed (no key,
    /// a wrong mechanism, a key ZAP refused) and disconnections (the descriptor).
    public func monitorConnections(on endpoint: String) throws(ZMQError) {
        let events =
            ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
        if zmq_socket_monitor(handle, endpoint, Int32(events)) != 0 { throw ZMQError.last("zmq_socket_monitor(\(endpoint))") }
    }

    /// ZMTP heartbeats (`ZMQ_HEARTBEAT_IVL`, `_TIMEOUT`, `_TTL`): a peer silent
    /// for `timeoutMs` (a Wi-Fi link gone, a station computer unplugged) is
    /// disconnected, and a connecting side connects again, in seconds rather
    /// than after TCP's retransmission timeout (about 15 minutes on Linux).
    /// A connect attempt is given up after `timeoutMs` too (`ZMQ_CONNECT_TIMEOUT`)
    /// and tried again, so a link that comes back is used within seconds, not
    /// after the kernel's SYN retries back off (up to about 2 minutes).
    ///
    ///
    /// `pings` false for a socket that receives the data (a subscriber, the bus's
    /// side that publishers connect to): the kernel's TCP keepalive ends a link
    /// gone silent instead, in about `timeoutMs` (probes after `timeoutMs` less 3 s
    /// without a packet, 3 of them a second apart). libzmq 4.3.4 aborts a process
    /// whose pinging connection breaks while its input is stopped (a queue the
    /// application has not read down): its next ping asserts `!_io_error`
    /// (stream_engine_base.cpp, `out_event`), which is a consumer falling behind
    /// as the bus drops it (`LivenessTests`). The peer's pings cannot stand in:
    /// their time-to-live runs only until the next message received.
    /// Keepalive probes only an idle connection: while this side has data the
    /// peer has not acknowledged (a heartbeat's pong sent as the link went),
    /// the kernel retransmits for minutes instead. `ZMQ_TCP_MAXRT`
    /// (`TCP_USER_TIMEOUT`) ends such a link after `timeoutMs` too.
    public func setLiveness(intervalMs: Int32, timeoutMs: Int32, pings: Bool) throws(ZMQError) {
        if pings {
            try setOption(ZMQ_HEARTBEAT_IVL, intervalMs)
            try setOption(ZMQ_HEARTBEAT_TIMEOUT, timeoutMs)
            try setOption(ZMQ_HEARTBEAT_TTL, timeoutMs)
        } else {
            try setOption(ZMQ_TCP_KEEPALIVE, 1)
            try setOption(ZMQ_TCP_KEEPALIVE_IDLE, max(1, timeoutMs / 1_000 - 3))
            try setOption(ZMQ_TCP_KEEPALIVE_INTVL, 1)
            try setOption(ZMQ_TCP_KEEPALIVE_CNT, 3)
            try setOption(ZMQ_TCP_MAXRT, timeoutMs)
        }
        try setOption(ZMQ_CONNECT_TIMEOUT, timeoutMs)
    }

    /// Whether a message can be received now (`ZMQ_EVENTS` has `ZMQ_POLLIN`).
    public func hasInput() throws(ZMQError) -> Bool {
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        guard zmq_getsockopt(handle, ZMQ_EVENTS, &events, &size) == 0 else { throw ZMQError.last("zmq_getsockopt(ZMQ_EVENTS)") }
        return events & Int32(ZMQ_POLLIN) != 0
    }

    // MARK: Endpoints

    /// Binds to `endpoint`, e.g. `tcp://127.0.0.1:7701`.
    public func bind(_ endpoint: String) throws(ZMQError) {
        if zmq_bind(handle, endpoint) != 0 { throw ZMQError.last("zmq_bind(\(endpoint))") }
    }

    /// Connects to `endpoint`; libzmq reconnects by itself whenever the peer goes away.
    public func connect(_ endpoint: String) throws(ZMQError) {
        if zmq_connect(handle, endpoint) != 0 { throw ZMQError.last("zmq_connect(\(endpoint))") }
    }

    /// The endpoint actually bound (resolves `tcp://127.0.0.1:*` to a port).
    public func lastEndpoint() throws(ZMQError) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        if zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) != 0 {
            throw ZMQError.last("zmq_getsockopt(ZMQ_LAST_ENDPOINT)")
        }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: Sending

    /// Sends one frame; `more` marks that another frame of the same message follows.
    /// Returns false when `dontWait` is set and the message could not be queued (`EAGAIN`).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        let (rc, code) = retryingInterrupts { zmq_send(handle, bytes.baseAddress, bytes.count, flags) }
        if rc >= 0 { return true }
        if code == EAGAIN && dontWait { return false }
        throw ZMQError(code: code, operation: "zmq_send")
    }

    /// Sends one frame, copied into one of the process's send buffers (`SendBuffers`) when
    /// one is free and it fits, else as `send` does: for a publisher's frames.
    @discardableResult
    public func sendBuffered(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        let outcome = bytes.withUnsafeBytes { SendBuffers.shared.send($0, socket: handle, flags: flags) }
        guard let (rc, code) = outcome else { return try send(bytes, more: more, dontWait: dontWait) }
        if rc >= 0 { return true }
        if code == EAGAIN && dontWait { return false }
        throw ZMQError(code: code, operation: "zmq_msg_send")
    }

    /// Sends one frame from a byte array.
    @discardableResult
    public func send(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ZMQError) -> Bool in try send(buffer, more: more, dontWait: dontWait) }
        }
        return try result.get()
    }

    /// Sends a whole multipart message; all frames arrive or none does.
    public func send(frames: [[UInt8]]) throws(ZMQError) {
        for (index, frame) in frames.enumerated() {
            try send(frame, more: index < frames.count - 1)
        }
    }

    // MARK: Receiving

    /// Receives one whole multipart message through `zmq_msg_t`, so no frame is
    /// ever truncated. Returns nil on `EAGAIN` (non-blocking call or timeout).
    /// At most `maxFrames` frames are kept; the rest are drained and counted in
    /// `ReceivedMessage.frameCount`, so a malformed sender cannot grow memory.
    public func receive(dontWait: Bool = false, maxFrames: Int = 8) throws(ZMQError) -> ReceivedMessage? {
        var message = ReceivedMessage()
        // A bus message is two frames, a query's three or four: room for them at once (an empty
        // array's first append makes room for one, so a second frame allocated again).
        message.frames.reserveCapacity(min(maxFrames, 4))
        var msg = zmq_msg_t()
        zmq_msg_init(&msg)
        defer { zmq_msg_close(&msg) }
        var first = true
        while true {
            // Only the first frame may be non-blocking: once it is here the rest are too.
            let flags = (first && dontWait) ? ZMQ_DONTWAIT : 0
            let (rc, code) = retryingInterrupts { zmq_msg_recv(&msg, handle, flags) }
            if rc < 0 {
                if code == EAGAIN && first { return nil }
                throw ZMQError(code: code, operation: "zmq_msg_recv")
            }
            // Not on a ROUTER's first frame: libzmq makes that one (the peer's routing id) itself.
            if readsUserId, message.userId == nil, let user = ZMQSocket.userId(of: &msg) { message.userId = String(cString: user) }
            first = false
            message.frameCount += 1
            message.byteCount += Int(rc)
            if message.frames.count < maxFrames {
                let size = zmq_msg_size(&msg)
                let data = zmq_msg_data(&msg)
                message.frames.append(
                    size == 0 ? [] : Array(UnsafeRawBufferPointer(start: data, count: size)))
            }
            if zmq_msg_more(&msg) == 0 { return message }
        }
    }
}

/// A multipart message as received.
public struct ReceivedMessage: Sendable {
    /// The frames kept (at most the receiver's `maxFrames`).
    public var frames: [[UInt8]] = []
    /// How many frames the message really had.
    public var frameCount = 0
    /// Total payload bytes over all frames.
    public var byteCount = 0
    /// The sender's ZAP User-Id (its public key) on a socket that `readsUserId`.
    public var userId: String?

    /// An empty message, filled by `ZMQSocket.receive`.
    public init() {}
}

/// Waits on several sockets at once (`zmq_poll`).
public struct ZMQPoller {
    private var items: [zmq_pollitem_t] = []

    /// Creates an empty poller.
    public init() {}

    /// Adds `socket` for readability; returns its index for `isReadable`.
    @discardableResult
    public mutating func addReadable(_ socket: ZMQSocket) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0))
        return items.count - 1
    }

    /// Waits up to `timeoutMs` (-1 forever) for any socket to become readable.
    /// Returns the number of ready sockets; a signal restarts the wait.
    public mutating func poll(timeoutMs: Int) throws(ZMQError) -> Int {
        let count = items.count
        let (rc, code) = items.withUnsafeMutableBufferPointer { buffer in
            retryingInterrupts { zmq_poll(buffer.baseAddress, Int32(count), timeoutMs) }
        }
        if rc < 0 { throw ZMQError(code: code, operation: "zmq_poll") }
        return Int(rc)
    }

    /// Whether the socket at `index` was readable after the last `poll`.
    public func isReadable(_ index: Int) -> Bool {
        items[index].revents & Int16(ZMQ_POLLIN) != 0
    }
}

extension ZMQSocket {
    /// The raw libzmq handle, for the benchmark's raw-libzmq baseline only.
    public var handleForBenchmark: UnsafeMutableRawPointer { handle }
}

/// Decodes and checks one received message against the envelope rules (a sample's readings as
/// `samples` says, one of a sensor not among `using` read only as far as its envelope).
public func decodeMessage(
    _ received: ReceivedMessage, samples: SampleReadings = .checked, using: Set<String>? = nil, names: RecurringNames? = nil
) throws(MalformedMessage) -> BusMessage {
    guard received.frameCount == 2, received.frames.count == 2 else {
        throw MalformedMessage(.frameCount, "expected 2 frames (topic, JSON), got \(received.frameCount)")
    }
    return try decodeMessage(topic: received.frames[0], body: received.frames[1], samples: samples, using: using, names: names)
}
