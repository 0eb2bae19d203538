import Dispatch
import Foundation
import Logging
import Synchronization
import VBTBus
import VBTQuery

/// Asks the session-recorder for the pages' history, on its own thread (a ZeroMQ socket
/// stays on the thread that made it; a slow recorder never holds the bus loop or the web
/// server). Requests wait in a bounded queue; answers are kept for a few seconds, so a
/// page reloaded by several tablets asks once.
final class QueryWorker: Sendable {
    /// Requests waiting at most; more are refused at once (a recorder that does not answer
    /// must not pile up every page's requests).
    static let capacity = 64
    /// How long an answer is reused.
    static let cacheS = 10.0

    private struct Job: Sendable {
        let key: String
        let run: @Sendable (QueryClient) -> Void
        let fail: @Sendable (any Error) -> Void
    }
    private struct State {
        var jobs: [Job] = []
        var cache: [String: (at: Double, data: Data)] = [:]
        var stopped = false
    }
    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    private let timeoutS: Double

    init(timeoutS: Double = 5) { self.timeoutS = timeoutS }

    /// The recorder's answer to `query`, decoded; a cached one when recent. Throws the
    /// recorder's refusal, a timeout naming the endpoint, or `busy`.
    func ask<A, R>(_ query: Query<A, R>, _ args: A) async throws -> R {
        let key = query.name.rawValue + ":" + String(decoding: (try? JSONEncoder().encode(args)) ?? Data(), as: UTF8.self)
        let now = monotonicSeconds()
        if let cached = state.withLock({ $0.cache[key] }), now - cached.at < Self.cacheS {
            return try QueryClient.decode(cached.data, of: query)
        }
        let data: Data = try await withCheckedThrowingContinuation { continuation in
            let job = Job(
                key: key,
                run: { client in
                    do { continuation.resume(returning: try client.askRaw(query, args)) } catch { continuation.resume(throwing: error) }
                },
                fail: { continuation.resume(throwing: $0) })
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped, state.jobs.count < Self.capacity else { return false }
                state.jobs.append(job)
                return true
            }
            if accepted {
                signal.signal()
            } else {
                job.fail(QueryError(kind: "busy", message: "too many history requests waiting for the session-recorder; try again"))
            }
        }
        let decoded = try QueryClient.decode(data, of: query)
        state.withLock { state in
            state.cache[key] = (monotonicSeconds(), data)
            if state.cache.count > 512 { state.cache = state.cache.filter { monotonicSeconds() - $0.value.at < Self.cacheS } }
        }
        return decoded
    }

    /// The worker's loop (a `SocketLoopService` body): one request at a time until `stop`.
    func run(context: ZMQContext, config: BusConfig, stop: StopFlag, logger: Logger) throws {
        let client = try QueryClient(context: context, config: config, timeoutS: timeoutS)
        defer {
            let left = state.withLock { state -> [Job] in
                state.stopped = true
                defer { state.jobs.removeAll() }
                return state.jobs
            }
            for job in left { job.fail(QueryError(kind: "other", message: "the console is stopping")) }
        }
        while !stop.isSet {
            guard signal.wait(timeout: .now() + .milliseconds(200)) == .success else { continue }
            let job = state.withLock { $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }
            guard let job else { continue }
            job.run(client)
        }
    }
}
