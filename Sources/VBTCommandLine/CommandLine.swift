import ArgumentParser
import Logging
import ServiceLifecycle
import VBTBus
import VBTWire

/// The bus endpoint options every program takes (proto/README.md, "Wire format").
public struct BusOptions: ParsableArguments {
    @Option(help: "Endpoint publishers connect to, or the bus binds (overrides VBT_PUB_ENDPOINT).")
    public var pubEndpoint: String?

    @Option(help: "Endpoint subscribers connect to, or the bus binds (overrides VBT_SUB_ENDPOINT).")
    public var subEndpoint: String?

    public init() {}

    /// Defaults, overridden by the environment, overridden by these options.
    public var config: BusConfig {
        var config = BusConfig.fromEnvironment()
        if let pubEndpoint { config.pubEndpoint = pubEndpoint }
        if let subEndpoint { config.subEndpoint = subEndpoint }
        return config
    }
}

/// Runs a program's socket loop until it ends or SIGTERM/SIGINT; a bus error
/// becomes one line saying what to check, and exit 1.
public func runProgram(
    _ program: String, logger: Logger, hint: String = "check VBT_PUB_ENDPOINT/VBT_SUB_ENDPOINT and that vbt-bus is running",
    onShutdown: (@Sendable () -> Void)? = nil, before services: [any Service] = [], _ body: @escaping @Sendable (ZMQContext) throws -> Void
) async throws {
    do {
        let loop = SocketLoopService(name: program, context: ZMQContext(), onShutdown: onShutdown, body: body)
        try await runSocketLoops(services + [loop], logger: logger)
    } catch let error as ZMQError {
        reportProblem("\(program): \(error); \(hint)")
        throw ExitCode.failure
    }
}
