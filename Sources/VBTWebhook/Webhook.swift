import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import VBTBus
import VBTNotify
import VBTWire

/// Where and how the webhook posts alerts. Every field has its default here.
public struct WebhookSettings: Sendable, Equatable {
    /// `http://` or `https://` address that receives each alert as a JSON POST.
    public var url: String
    /// One attempt's whole time limit: connect, send, answer (seconds).
    public var timeoutS = 2.0
    /// Attempts after the first one fails (timeout, refused, 5xx, 408, 429).
    public var retries = 3
    /// Wait before the first retry; doubles each time, at most `maxBackoffS` (seconds).
    public var backoffS = 0.5
    public var maxBackoffS = 10.0
    /// Alerts waiting to be posted; beyond this new alerts are dropped and counted.
    public var queueCapacity = 256
    /// Alerts below this severity are not posted.
    public var minSeverity = AlertMessage.Severity.info

    /// Creates settings for `url`.
    public init(url: String) { self.url = url }
}

/// Posts alerts to a webhook from its own task, so the bus never waits for HTTP:
/// `deliver` only puts the alert in a bounded queue (a full queue drops and counts);
/// the task posts one alert at a time with a timeout and retries with backoff.
public final class WebhookSink: AlertSink {
    private struct Item: Sendable {
        var body: [UInt8]
        var alertId: String
    }

    private let settings: WebhookSettings
    private let logger: Logger
    private let stream: AsyncStream<Item>
    private let continuation: AsyncStream<Item>.Continuation
    private let state = Mutex(SinkCounters())
    private let stopping = Atomic<Bool>(false)

    /// Creates the sink; `run()` does the posting.
    public init(settings: WebhookSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
        (stream, continuation) = AsyncStream.makeStream(of: Item.self, bufferingPolicy: .bufferingOldest(max(1, settings.queueCapacity)))
    }

    public var counters: SinkCounters { state.withLock { $0 } }

    private static let severityRank: [AlertMessage.Severity: Int] = [.info: 0, .warning: 1, .critical: 2]

    public func deliver(_ alert: AlertMessage, ts: Double) {
        guard Self.severityRank[alert.severity]! >= Self.severityRank[settings.minSeverity]! else { return }
        switch continuation.yield(Item(body: alert.webhookBody(ts: ts), alertId: alert.alertId)) {
        case .enqueued:
            state.withLock { $0.queued += 1 }
        case .dropped:
            let dropped = state.withLock { counters -> Int in
                counters.dropped += 1
                return counters.dropped
            }
            if dropped <= 5 || dropped % 100 == 0 {
                logger.warning(
                    "webhook queue full; alert dropped (the webhook is slow or down)",
                    metadata: [
                        "alert_id": "\(alert.alertId)", "dropped": "\(dropped)", "capacity": "\(settings.queueCapacity)",
                    ])
            }
        case .terminated:
            break
        @unknown default:
            break
        }
    }

    /// Stops taking alerts; `run()` posts what is queued without further retries and returns.
    public func finish() {
        stopping.store(true, ordering: .releasing)
        continuation.finish()
    }

    /// Posts queued alerts until `finish()`.
    public func run() async {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .milliseconds(Int64(settings.timeoutS * 1000)), read: .milliseconds(Int64(settings.timeoutS * 1000)))
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        logger.info("webhook sink running", metadata: ["url": "\(settings.url)", "timeout_s": "\(settings.timeoutS)", "retries": "\(settings.retries)"])
        var abandoned = 0
        for await item in stream {
            // Shutting down: what is still queued is counted, not posted (a dead webhook must not hold the exit).
            guard !stopping.load(ordering: .acquiring) else {
                abandoned += 1
                continue
            }
            await post(item, client: client)
        }
        if abandoned > 0 {
            state.withLock { $0.failed += abandoned }
            logger.warning("webhook alerts not posted at shutdown", metadata: ["count": "\(abandoned)"])
        }
        do { try await client.shutdown() } catch {
            logger.debug("webhook client shutdown", metadata: ["error": "\(error)"])
        }
        let counters = self.counters
        logger.info(
            "webhook sink stopped",
            metadata: [
                "delivered": "\(counters.delivered)", "failed": "\(counters.failed)", "dropped": "\(counters.dropped)", "retries": "\(counters.retries)",
            ])
    }

    private enum Outcome { case delivered, retry(String), refused(String) }

    private func post(_ item: Item, client: HTTPClient) async {
        var backoff = settings.backoffS
        var attempt = 0
        while true {
            let outcome = await attemptPost(item, client: client)
            switch outcome {
            case .delivered:
                state.withLock { $0.delivered += 1 }
                logger.debug("webhook delivered", metadata: ["alert_id": "\(item.alertId)", "attempt": "\(attempt + 1)"])
                return
            case .refused(let why):
                state.withLock { $0.failed += 1 }
                logger.error(
                    "webhook refused the alert; check the webhook's address and what it accepts", metadata: ["alert_id": "\(item.alertId)", "reason": "\(why)"])
                return
            case .retry(let why):
                guard attempt < settings.retries, !stopping.load(ordering: .acquiring) else {
                    state.withLock { $0.failed += 1 }
                    logger.error(
                        "webhook delivery failed; check that the webhook at the address is up",
                        metadata: [
                            "alert_id": "\(item.alertId)", "attempts": "\(attempt + 1)", "reason": "\(why)", "url": "\(settings.url)",
                        ])
                    return
                }
                attempt += 1
                state.withLock { $0.retries += 1 }
                logger.debug("webhook attempt failed; retrying", metadata: ["alert_id": "\(item.alertId)", "reason": "\(why)", "backoff_s": "\(backoff)"])
                try? await Task.sleep(for: .milliseconds(Int64(backoff * 1000)))  // cut short when the task is cancelled at exit
                backoff = min(settings.maxBackoffS, backoff * 2)
            }
        }
    }

    private func attemptPost(_ item: Item, client: HTTPClient) async -> Outcome {
        var request = HTTPClientRequest(url: settings.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "vbt-notifier")
        request.body = .bytes(ByteBuffer(bytes: item.body))
        do {
            let response = try await client.execute(request, timeout: .milliseconds(Int64(settings.timeoutS * 1000)))
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let code = Int(response.status.code)
            switch code {
            case 200..<300: return .delivered
            case 408, 429, 500...: return .retry("HTTP \(code)")
            default: return .refused("HTTP \(code)")
            }
        } catch {
            return .retry("\(error)")
        }
    }
}

/// The sink as a `Service` of the notifier's service group. Listed before the
/// bus loop, it is shut down after it (a group stops its services in reverse
/// order), so the loop's last alerts are queued before the sink finishes; an
/// attempt still in flight then gets `graceS` before it is cancelled.
public struct WebhookService: Service {
    private let sink: WebhookSink
    private let graceS: Double

    /// Runs `sink`; at shutdown, waits at most `graceS` for the post in flight.
    public init(sink: WebhookSink, graceS: Double) { (self.sink, self.graceS) = (sink, graceS) }

    public func run() async throws {
        let sink = self.sink, grace = graceS
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await sink.run() }
            group.addTask {
                do { try await gracefulShutdown() } catch { return }  // cancelled: the group ends anyway
                sink.finish()
                try? await Task.sleep(for: .seconds(grace))
            }
            // Whichever ends first: the sink (drained) or the grace (an attempt hangs); the other is cancelled.
            await group.next()
            group.cancelAll()
        }
    }
}
