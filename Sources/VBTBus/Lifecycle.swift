import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import VBTWire

/// Runs `body` on a new dedicated thread and waits for it without blocking
/// the cooperative pool. ZeroMQ sockets created inside `body` stay on that
/// thread for their whole life (the model in ZeroMQ.swift). The thread runs
/// at the program's niceness (`ThreadPriority`), not the pool's.
public func runOnDedicatedThread<T: Sendable>(
    name: String, _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            if !ThreadPriority.adopt() {
                Logger(label: name).warning(
                    "the loop runs at the pool's niceness, not the one the program was started with",
                    metadata: ["nice": "\(ThreadPriority.started)", "fix": "a raise needs LimitNICE= in the unit (deploy/README.md, Priorities)"])
            }
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
        thread.name = name
        thread.start()
    }
}

/// A `Service` whose work is a blocking socket loop on its own thread.
/// Graceful shutdown (SIGTERM, SIGINT) shuts the ZeroMQ context down, every
/// blocking call returns `ETERM`, the loop ends and the process exits 0.
public struct SocketLoopService: Service {
    private let name: String
    private let context: ZMQContext
    private let body: @Sendable (ZMQContext) throws -> Void
    private let onShutdown: (@Sendable () -> Void)?

    /// Creates the service; `body` runs on a dedicated thread named `name`.
    /// On graceful shutdown `onShutdown` runs if given (a loop that must flush
    /// before it stops sets its own flag); otherwise the context is shut down.
    public init(
        name: String, context: ZMQContext, onShutdown: (@Sendable () -> Void)? = nil,
        body: @escaping @Sendable (ZMQContext) throws -> Void
    ) {
        self.name = name
        self.context = context
        self.body = body
        self.onShutdown = onShutdown
    }

    public func run() async throws {
        let context = self.context
        let body = self.body
        let onShutdown = self.onShutdown
        try await withGracefulShutdownHandler {
            try await runOnDedicatedThread(name: name) {
                // The body's sockets are closed when it returns; terminating the
                // context here, before the process can exit, lets their lingers
                // deliver what is still queued.
                defer { context.terminate() }
                do {
                    try body(context)
                } catch let error as ZMQError where error.isTerminated {
                    return  // shutdown requested
                }
            }
        } onGracefulShutdown: {
            if let onShutdown { onShutdown() } else { context.shutdown() }
        }
    }
}

/// Runs services (socket loops, and any others: the notifier's webhook sink)
/// until one finishes or SIGTERM/SIGINT arrives; they are shut down in
/// reverse order, so a service listed first outlives the loops after it.
/// Throws the first error (e.g. an endpoint that cannot be bound).
public func runSocketLoops(_ services: [any Service], logger: Logger) async throws {
    let group = ServiceGroup(
        configuration: .init(
            services: services.map { .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    try await group.run()
}

/// Sets up swift-log for a program: stderr, level from `VBT_LOG_LEVEL` (else `defaultLevel`:
/// info for programs, notice for a one-shot command whose answer is its output), text or JSON
/// lines (`format`, default `VBT_LOG_FORMAT`, else text).
public func bootstrapLogging(label: String, format: LogFormat = .fromEnvironment, defaultLevel: Logger.Level = .info) -> Logger {
    let level = environment("VBT_LOG_LEVEL").flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? defaultLevel
    LoggingSystem.bootstrap { label in
        switch format {
        case .text:
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        case .json:
            var handler = JSONLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
    }
    return Logger(label: label)
}

/// A flag every thread can read; set once to ask everyone to stop.
public final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Creates an unset flag.
    public init() {}
    /// Asks everyone to stop.
    public func set() { flag.store(true, ordering: .releasing) }
    /// Whether stopping was asked for.
    public var isSet: Bool { flag.load(ordering: .acquiring) }

    /// Sleeps up to `seconds`, waking early (in steps of 50 ms) when the flag is set.
    /// Returns false when it was set.
    @discardableResult
    public func sleep(_ seconds: Double) -> Bool {
        let deadline = monotonicSeconds() + seconds
        while !isSet {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return true }
            usleep(UInt32(min(remaining, 0.05) * 1_000_000))
        }
        return false
    }
}
