import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Prometheus
import ServiceLifecycle
import Synchronization
import VBTBus
import VBTConsole
import VBTQuery
import VBTWire

/// A logged-in browser: who, in what role, and the token its requests that change anything carry.
struct ConsoleSession: Codable, Sendable {
    var user: String
    var role: ConsoleRole
    var csrf: String
    /// An athlete account's athlete: the one page it may see.
    var athlete: String? = nil
}

/// Every request's context: Hummingbird's core, the session (HummingbirdAuth) and the
/// WebSocket upgrade's handler (HummingbirdWebSocket).
struct ConsoleContext: RequestContext, WebSocketRequestContext, SessionRequestContext {
    typealias Session = ConsoleSession
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<ConsoleContext>
    let sessions: SessionContext<ConsoleSession>
    /// The rack display or athlete's phone this request comes from (its `vbt_display` cookie),
    /// once `RequireLogin` has checked it against the displays file: a display reaches its own
    /// station's page only, a phone what its athlete's account would.
    var display: ConsoleDisplay?
    /// A phone's stand-in for a login session (its athlete's role and pages), set by
    /// `RequireLogin`; nothing of it is stored, the displays file holds the phone.
    var phone: ConsoleSession?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        sessions = .init()
    }

    /// The session, once `RequireLogin` has checked it: a login's, or a paired phone's.
    var session: ConsoleSession? { sessions.session ?? phone }
}

/// The console's HTTP side: pages, the WebSocket push, login and logout, commands.
struct ConsoleServer {
    let live: LiveBoard
    let history: HistoryPages
    let registry: PrometheusCollectorRegistry
    let accounts: AccountBook
    let displays: DisplayBook
    let outbox: CommandOutbox
    let host: String
    let port: Int
    let sessionS: Double
    let secureCookie: Bool
    let logger: Logger
    /// The least time between two updates to one browser (at most 50 a second), on top of
    /// waiting until it has drawn the last.
    static let minUpdateIntervalMs = 20
    /// How often a display's open WebSocket checks that the display is still paired.
    static let displayCheckMs = 250
    /// The display cookie's name; its value is `id.secret` (Displays.swift).
    static let displayCookie = "vbt_display"

    /// The display cookie emptied: what a removed display or a phone logging out is sent.
    static func clearedDisplayCookie(secure: Bool) -> Cookie {
        Cookie(name: displayCookie, value: "", maxAge: 0, path: "/", secure: secure, httpOnly: true, sameSite: .strict)
    }

    /// The services to run beside the bus loop: the session store's tidying and the HTTP server.
    var services: [any Service] {
        let storage = MemoryPersistDriver()
        let cookie = SessionCookieParameters(name: "vbt_session", path: "/", secure: secureCookie, sameSite: .strict)
        let sessions = SessionMiddleware<ConsoleContext>(
            storage: storage,
            configuration: .init(sessionCookieParameters: cookie, keyPrefix: "console.", defaultSessionExpiration: .seconds(Int64(sessionS))))
        let displayChecks = LoginChecks()
        let router = Router(context: ConsoleContext.self)
        router.add(middleware: SecurityHeaders())
        router.add(middleware: sessions)
        router.add(middleware: RequireLogin(accounts: accounts, displays: displays, displayChecks: displayChecks, secureCookie: secureCookie, logger: logger))
        addPages(router)
        addDisplays(router)
        let webSocketRouter = Router(context: ConsoleContext.self)
        webSocketRouter.add(middleware: sessions)
        webSocketRouter.add(
            middleware: RequireLogin(
                accounts: accounts, displays: displays, displayChecks: displayChecks, secureCookie: secureCookie, logger: logger, webSocket: true))
        addPush(webSocketRouter)
        let app = Application(
            router: router,
            server: .http1WebSocketUpgrade(
                webSocketRouter: webSocketRouter,
                configuration: .init(ws: .init(maxFrameSize: 1 << 16, autoPing: .enabled(timePeriod: .seconds(10))))),
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { [logger, host, port] _ in
                logger.info("console listening", metadata: ["address": "http://\(host):\(port)/"])
            },
            logger: logger)
        return [storage, app]
    }

    /// Sets up one connection's pipeline (HTTP/1 with the WebSocket upgrade) on an in-memory
    /// channel, once, before any thread serves. The first real connection then finds every
    /// generic type it needs already made: Swift 6's runtime on Linux has crashed, now and then,
    /// making them for the first time on an event loop while other threads ran ("Bad pointer
    /// dereference" in swift_conformsToProtocol, the same as swiftlang/swift-build#528), and
    /// the console went with it.
    static func warmUp(logger: Logger) {
        let channel = EmbeddedChannel()
        let rehearsal = HTTP1WebSocketUpgradeChannel(
            responder: { _, _, _ in },
            configuration: .init(http1: .init(), ws: .init(maxFrameSize: 1 << 16, autoPing: .disabled)),
            shouldUpgrade: { _, _, _ in .dontUpgrade })
        do {
            _ = try rehearsal.setup(channel: channel, logger: logger).wait()
            _ = try channel.finish(acceptAlreadyClosed: true)
        } catch {
            logger.debug("the pipeline's rehearsal failed; the first connection sets it up instead", metadata: ["error": "\(error)"])
        }
    }

    private func addPages(_ router: Router<ConsoleContext>) {
        let accounts = self.accounts, outbox = self.outbox, live = self.live, logger = self.logger, sessionS = self.sessionS
        let displays = self.displays, secureCookie = self.secureCookie
        let history = self.history
        let checking = LoginChecks()
        router.get("/login") { request, context -> Response in
            if context.session != nil { return .redirect(to: "/", type: .normal) }
            let failed = request.uri.queryParameters["failed"] != nil
            return html(Pages.login(message: failed ? "Wrong name or password, or too many tries: wait a minute." : nil))
        }
        router.post("/login") { request, context -> Response in
            guard sameOrigin(request, required: false) else { return problem(.forbidden, "cross-site login refused") }
            let body = try await request.body.collect(upTo: 8_192)
            let form = FormFields(String(buffer: body))
            let name = form["username"] ?? "", password = form["password"] ?? ""
            let now = monotonicSeconds()
            // bcrypt takes tens of milliseconds: off the event loop, and only a few at once, so a
            // flood of logins (with names that are not locked) cannot take every core.
            guard checking.begin() else { return problem(.serviceUnavailable, "too many logins at once; try again in a moment") }
            let account = await Task.detached { accounts.check(name: name, password: password, now: now) }.value
            checking.end()
            guard let account else {
                logger.notice("login refused", metadata: ["user": "\(name.prefix(32))", "locked": "\(accounts.isLocked(name: name, now: now))"])
                return .redirect(to: "/login?failed=1", type: .normal)
            }
            context.sessions.createSession(
                ConsoleSession(user: account.name, role: account.role, csrf: randomToken(), athlete: account.athlete), expiresIn: .seconds(Int64(sessionS)))
            logger.info("logged in", metadata: ["user": "\(account.name)", "role": "\(account.role.rawValue)"])
            return .redirect(to: "/", type: .normal)
        }
        router.post("/logout") { request, context -> Response in
            guard let session = context.session else { return .redirect(to: "/login", type: .normal) }
            let body = try await request.body.collect(upTo: 8_192)
            guard sameOrigin(request, required: true), FormFields(String(buffer: body))["csrf"] == session.csrf else {
                return problem(.forbidden, "logout refused: the page's token is missing or stale; reload the page")
            }
            // A phone logging out is unpaired: it has no password to come back with, so its
            // pairing would only linger in the file. It needs a new code.
            if let phone = context.display, context.sessions.session == nil {
                let path = displays.path
                let removed = await Task.detached { try? DisplaysFile.remove(path: path, id: phone.id) }.value
                logger.info("phone logged out", metadata: ["display": "\(phone.id)", "removed": "\(removed != nil)"])
                var response = Response.redirect(to: "/pair", type: .normal)
                response.setCookie(ConsoleServer.clearedDisplayCookie(secure: secureCookie))
                return response
            }
            context.sessions.clearSession()
            return .redirect(to: "/login", type: .normal)
        }
        router.get("/") { _, context -> Response in
            guard let session = context.session else { return .redirect(to: "/login", type: .normal) }
            if session.role == .athlete, let athlete = session.athlete { return .redirect(to: RequireLogin.athletePath(athlete), type: .normal) }
            return html(Pages.board(user: session.user, role: session.role, csrf: session.csrf))
        }
        router.get("/station/{name}") { _, context -> Response in
            guard let session = context.session else { return .redirect(to: "/login", type: .normal) }
            let name = context.parameters.get("name") ?? ""
            guard isStationName(name) else { return problem(.notFound, "no such station") }
            return html(Pages.station(name, user: session.user, role: session.role, csrf: session.csrf))
        }
        router.get("/athletes") { _, context -> Response in
            try await historyPage(context, title: "athletes") { try await history.athletes() }
        }
        router.get("/athlete/{id}") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            // Her own page (RequireLogin lets an athlete reach no other) opens with her station, live.
            return try await historyPage(context, title: id, now: context.session?.role == .athlete) { try await history.athlete(id) }
        }
        router.get("/leaders") { request, context -> Response in
            let period = request.uri.queryParameters["period"].map(String.init) == "week" ? "week" : "today"
            return try await historyPage(context, title: "leaderboards") { try await history.leaders(period: period) }
        }
        router.get("/assets/console.js") { _, _ in asset(Assets.consoleJS, type: "text/javascript; charset=utf-8") }
        router.get("/assets/console.css") { _, _ in asset(Assets.consoleCSS, type: "text/css; charset=utf-8") }
        let registry = self.registry
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        router.get("/api/board") { _, _ -> Response in
            let update = live.update(since: 0)
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: live.json(update))))
        }
        router.get("/api/plans") { _, _ -> Response in
            do {
                let plans = try await history.queries.ask(.planList, NoArgs())
                var writer = JSONWriter()
                writer.value(
                    .array(
                        plans.compactMap { plan in
                            plan.id.map { id in
                                .object(
                                    JSONObject([
                                        ("id", .string(id)), ("athlete", plan.athlete.map { .string($0) } ?? .null),
                                        ("exercises", .number(Double(plan.items.count))),
                                    ]))
                            }
                        }))
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
            } catch let error as QueryError {
                return problem(.serviceUnavailable, error.message)
            }
        }
        router.post("/api/plan") { request, context -> Response in
            let session: ConsoleSession
            switch coachSession(request, context) {
            case .success(let coach): session = coach
            case .failure(let refusal): return refusal.response
            }
            let body = try await request.body.collect(upTo: 4_096)
            guard case .object(let fields)? = try? JSONParser.parse(Array(buffer: body)), let station = try? fields.string("station"),
                isStationName(station), let id = try? fields.string("plan")
            else { return problem(.badRequest, #"the body must be {"station": "rack-01", "plan": "PLAN-ID", "athlete": "optional"}"#) }
            do {
                let stored = try await history.queries.ask(.planShow, IdArgs(id: id))
                let catalogue = try await history.queries.ask(.exerciseList, NoArgs())
                guard let athlete = (try? fields.optionalString("athlete")).flatMap({ $0 }).flatMap({ $0.isEmpty ? nil : $0 }) ?? stored.athlete else {
                    return problem(.badRequest, "plan \(id) has no athlete: name one")
                }
                // Loads as % of e1RM become kg from the athlete's latest e1RM, as vbt plan assign does.
                var e1rm: [String: Double] = [:]
                if stored.items.contains(where: { $0.loadPctE1rm != nil }) {
                    e1rm = Plan.latestE1RM(try await history.queries.ask(.progress, ProgressArgs(athlete: athlete)))
                }
                let plan: Plan
                do { plan = try stored.resolvingLoads(athlete: athlete, e1rmKg: e1rm) } catch {
                    return problem(.badRequest, (error as? StoreError)?.message ?? "\(error)")
                }
                let commands = plan.startCommands(athlete: athlete, catalogue: catalogue).map {
                    ConsoleCommandRequest(
                        id: "console-" + String(UInt64.random(in: .min ... .max), radix: 16), station: station, command: $0.command, target: "*",
                        args: $0.args, athlete: athlete, user: session.user)
                }
                let board = live.snapshot
                if let refusal = commands.lazy.compactMap({ board.refusal(for: $0) }).first { return problem(.conflict, refusal) }
                guard !commands.isEmpty, commands.allSatisfy({ outbox.submit($0) }) else {
                    return problem(.serviceUnavailable, "the plan could not be sent: it is empty, or too many commands are waiting")
                }
                return Response(
                    status: .accepted, headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: #"{"id":"\#(commands[0].id)","state":"sent"}"#)))
            } catch let error as QueryError {
                return problem(error.kind == "invalid" ? .badRequest : .serviceUnavailable, error.message)
            }
        }
        router.post("/api/command") { request, context -> Response in
            let session: ConsoleSession
            switch coachSession(request, context) {
            case .success(let coach): session = coach
            case .failure(let refusal): return refusal.response
            }
            let body = try await request.body.collect(upTo: 16_384)
            let command: ConsoleCommandRequest
            do { command = try ConsoleCommandRequest.parse(body: Array(buffer: body), user: session.user) } catch let error as PayloadError {
                return problem(.badRequest, error.description)
            }
            if let refusal = live.snapshot.refusal(for: command) { return problem(.conflict, refusal) }
            guard outbox.submit(command) else { return problem(.serviceUnavailable, "too many commands waiting for the bus; try again") }
            return Response(
                status: .accepted, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"id":"\#(command.id)","state":"sent"}"#)))
        }
    }

    /// Rack displays: pairing with a code, and the rack page (a display's own station; any
    /// station for a logged-in coach or viewer).
    private func addDisplays(_ router: Router<ConsoleContext>) {
        let displays = self.displays, logger = self.logger, secureCookie = self.secureCookie
        let checking = LoginChecks()
        router.get("/pair") { request, context -> Response in
            guard let code = request.uri.queryParameters["code"].map(String.init), !code.isEmpty else { return html(Pages.pair(message: nil)) }
            let now = monotonicSeconds()
            guard !displays.isThrottled(now: now) else {
                var response = html(Pages.pair(message: "Too many wrong codes: wait a minute and try again."))
                response.status = .tooManyRequests
                return response
            }
            // bcrypt, off the event loop and a few at once, as logins are.
            guard checking.begin() else { return problem(.serviceUnavailable, "too many pairings at once; try again in a moment") }
            let paired = await Task.detached { displays.pair(code: code, monotonic: now) }.value
            checking.end()
            guard let (display, token) = paired else {
                logger.notice("pairing refused", metadata: ["throttled": "\(displays.isThrottled(now: now))"])
                var response = html(Pages.pair(message: "That code is wrong, used or expired: ask a coach for a new one."))
                response.status = .forbidden
                return response
            }
            logger.info("display paired", metadata: ["display": "\(display.id)", "for": "\(display.purpose)"])
            // A rack display to its station's page, a phone to its athlete's.
            let landing: String =
                switch display.scope {
                case .station(let station): "/rack/" + station
                case .athlete(let athlete): RequireLogin.athletePath(athlete)
                }
            var response = Response.redirect(to: landing, type: .normal)
            // Until it is removed: a rack's screen (or a phone) is not logged in again every
            // morning. At most 400 days, the longest browsers keep a cookie.
            response.setCookie(
                Cookie(
                    name: ConsoleServer.displayCookie, value: token, maxAge: 400 * 86_400, path: "/", secure: secureCookie, httpOnly: true,
                    sameSite: .strict))
            return response
        }
        router.get("/rack/{name}") { _, context -> Response in
            let name = context.parameters.get("name") ?? ""
            guard isStationName(name) else { return problem(.notFound, "no such station") }
            if let session = context.session { return html(Pages.rack(name, user: session.user)) }
            guard let display = context.display, display.station == name else { return problem(.forbidden, "a rack display shows its own station only") }
            return html(Pages.rack(name, user: nil))
        }
    }

    private func addPush(_ router: Router<ConsoleContext>) {
        let live = self.live, accounts = self.accounts, displays = self.displays
        router.ws(
            "/ws",
            shouldUpgrade: { request, context in
                // An athlete's session or phone gets her own stations only (below), never the gym's.
                guard context.session.map({ $0.role != .athlete || $0.athlete != nil }) ?? (context.display != nil), sameOrigin(request, required: true)
                else { return .dontUpgrade }
                return .upgrade([:])
            },
            onUpgrade: { inbound, outbound, context in
                let session = context.requestContext.session
                let user = session?.user ?? ""
                // An athlete (her account or her phone) is sent the stations where she is now, nothing else.
                let athlete = session?.role == .athlete ? session?.athlete : nil
                // A rack display is sent its own station only, and is closed within a quarter of a second of
                // its removal from the displays file; so is a phone.
                let display = context.requestContext.sessions.session == nil ? context.requestContext.display : nil
                let station = display?.station ?? ""
                let watchdog = display.map { display in
                    Task {
                        while !Task.isCancelled, displays.isPaired(id: display.id) {
                            try await Task.sleep(for: .milliseconds(ConsoleServer.displayCheckMs))
                        }
                        guard !Task.isCancelled else { return }
                        try await outbound.close(.policyViolation, reason: "this display was removed")
                    }
                }
                // The browser says which version it has drawn; the next update waits for that.
                let drawn = DrawnVersion()
                let (wake, waker) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                let pusher = Task {
                    let forward = Task {
                        for await _ in live.changes() { waker.yield() }
                    }
                    defer { forward.cancel() }
                    var sent: UInt64 = 0
                    var awaiting = false
                    var lastBus: LiveBoard.BusLink?
                    var shown: [String]?  // the stations the athlete's browser holds
                    for await _ in wake {
                        if awaiting && drawn.value.load(ordering: .relaxed) < sent { continue }
                        awaiting = false
                        if let display {
                            guard displays.isPaired(id: display.id) else { break }
                        } else {
                            // The account was removed, or now sees another athlete's page or the gym.
                            guard let account = accounts.account(named: user), account.role == .athlete ? account.athlete == athlete : athlete == nil
                            else { break }
                        }
                        let update =
                            if let athlete { live.update(since: sent, athlete: athlete, shown: shown) } else if display != nil {
                                live.update(since: sent, station: station)
                            } else { live.update(since: sent) }
                        if update.full { shown = update.stations.map(\.station) }
                        if update.isEmpty(sameBus: update.bus == lastBus) { continue }
                        try await outbound.write(.text(String(decoding: live.json(update), as: UTF8.self)))
                        (sent, lastBus, awaiting) = (update.version, update.bus, true)
                        try await Task.sleep(for: .milliseconds(ConsoleServer.minUpdateIntervalMs))
                    }
                }
                defer {
                    waker.finish()
                    pusher.cancel()
                    watchdog?.cancel()
                }
                for try await message in inbound.messages(maxSize: 1_024) {
                    guard case .text(let text) = message, let version = drawnVersion(text) else { continue }
                    drawn.value.store(version, ordering: .relaxed)
                    waker.yield()
                }
            })
    }
}

/// Why a request that changes something was refused, as the answer to send.
struct Refusal: Error {
    let response: Response
}

/// The session of a coach whose page sent this request (its CSRF token, a same-origin
/// `Origin`); otherwise the answer that says why not: 401, or 403 for a viewer or a forged request.
func coachSession(_ request: Request, _ context: ConsoleContext) -> Result<ConsoleSession, Refusal> {
    guard let session = context.session else { return .failure(Refusal(response: problem(.unauthorized, "log in first"))) }
    guard session.role == .coach else { return .failure(Refusal(response: problem(.forbidden, "a viewer account cannot send commands; ask a coach"))) }
    guard sameOrigin(request, required: true), request.headers[.csrfToken] == session.csrf else {
        return .failure(Refusal(response: problem(.forbidden, "refused: the page's token is missing or stale; reload the page")))
    }
    return .success(session)
}

/// A history page, or why the recorder could not give it: 404 for what it does not know
/// (an unknown athlete), 503 when it does not answer (the live board still works).
/// `now`: the page opens with the athlete's station live (her own page), which works without the recorder.
func historyPage(_ context: ConsoleContext, title: String, now: Bool = false, _ body: () async throws -> String) async throws -> Response {
    guard let session = context.session else { return .redirect(to: "/login", type: .normal) }
    do {
        return html(Pages.history(title: title, user: session.user, role: session.role, csrf: session.csrf, main: try await body(), now: now))
    } catch let error as QueryError {
        var response = html(
            Pages.history(title: title, user: session.user, role: session.role, csrf: session.csrf, main: Pages.unavailable(error.message), now: now))
        response.status = error.kind == "invalid" ? .notFound : .serviceUnavailable
        return response
    }
}

/// Asks for a login on every page but /login and the style sheet; an account removed from the
/// file ends its sessions at their next request, and a changed role applies at once.
struct RequireLogin: RouterMiddleware {
    typealias Context = ConsoleContext
    let accounts: AccountBook
    let displays: DisplayBook
    /// bcrypt checks of display secrets under way (the first request of each display after a start).
    let displayChecks: LoginChecks
    let secureCookie: Bool
    let logger: Logger
    /// The WebSocket's router: an athlete may open `/ws` there (her own stations, narrowed by the
    /// server); a plain GET of `/ws` on the pages' router is refused her as any other page is.
    var webSocket = false

    func handle(_ request: Request, context: ConsoleContext, next: (Request, ConsoleContext) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path == "/login" || path == "/assets/console.css" || path == "/pair" { return try await next(request, context) }
        // A rack display (and no one logged in on that browser): its own station's page, its
        // WebSocket and the page's assets; an athlete's phone: what its athlete's account
        // reaches. Everything else is refused, whatever the page asks.
        if context.session == nil, let token = request.cookies[ConsoleServer.displayCookie]?.value {
            let displays = self.displays
            var display = displays.cached(token: token)
            if display == nil {
                guard displayChecks.begin() else { return problem(.serviceUnavailable, "too many displays at once; try again in a moment") }
                display = await Task.detached { displays.display(token: token) }.value
                displayChecks.end()
            }
            guard let display else {
                logger.notice("display refused", metadata: ["path": "\(path.prefix(64))"])
                // A page (a rack's, or a phone's: its athlete's or `/`) says so and offers the code's form.
                var response =
                    request.method == .get && (path.hasPrefix("/rack/") || path.hasPrefix("/athlete/") || path == "/")
                    ? html(Pages.pair(message: "This display or phone was removed, or its pairing ended: ask a coach for a new code."))
                    : problem(.unauthorized, "this display is not paired: ask a coach for a new code (vbt console display add)")
                response.status = .unauthorized
                response.setCookie(ConsoleServer.clearedDisplayCookie(secure: secureCookie))
                return response
            }
            var context = context
            context.display = display
            if let athlete = display.athlete {
                // A phone is its athlete's account without a password: the same pages, the same refusals.
                guard Self.athleteMayReach(path, athlete: athlete) || (webSocket && path == "/ws") else {
                    logger.notice("phone kept to its athlete", metadata: ["display": "\(display.id)", "path": "\(path.prefix(64))"])
                    return problem(.forbidden, "an athlete's phone sees its own page only: \(Self.athletePath(athlete))")
                }
                context.phone = ConsoleSession(user: athlete + "'s phone", role: .athlete, csrf: displays.pageToken(id: display.id), athlete: athlete)
                return try await next(request, context)
            }
            guard let station = display.station, Self.displayMayReach(path, station: station) else {
                logger.notice(
                    "display kept to its station", metadata: ["display": "\(display.id)", "station": "\(display.purpose)", "path": "\(path.prefix(64))"])
                return problem(.forbidden, "a rack display shows its own station only: /rack/\(display.purpose)")
            }
            return try await next(request, context)
        }
        if var session = context.session {
            guard let account = accounts.account(named: session.user) else {
                context.sessions.clearSession()
                return refuse(request)
            }
            if account.role != session.role || account.athlete != session.athlete {
                session.role = account.role
                session.athlete = account.athlete
                _ = context.sessions.updateSession(session)
            }
            // An athlete account: its own athlete's page (and `/`, which leads there), logging out.
            if session.role == .athlete {
                guard let athlete = session.athlete, Self.athleteMayReach(path, athlete: athlete) || (webSocket && path == "/ws") else {
                    return problem(.forbidden, "an athlete account sees its own page only: \(session.athlete.map(Self.athletePath) ?? "")")
                }
            }
            return try await next(request, context)
        }
        // A Prometheus server scrapes with HTTP Basic (a coach or viewer account; its scrape config's basic_auth).
        if path == "/metrics" {
            if let (name, password) = basicCredentials(request) {
                let now = monotonicSeconds()
                let accounts = self.accounts
                // A coach's or viewer's account: an athlete's sees its own page only.
                if let account = await Task.detached(operation: { accounts.check(name: name, password: password, now: now) }).value,
                    account.role != .athlete
                {
                    return try await next(request, context)
                }
                logger.notice("metrics scrape refused", metadata: ["user": "\(name.prefix(32))"])
            }
            var response = problem(.unauthorized, "log in first: HTTP Basic with a console account")
            response.headers[.wwwAuthenticate] = #"Basic realm="vbt", charset="UTF-8""#
            return response
        }
        return refuse(request)
    }

    /// An athlete's page, as a request's path spells it.
    static func athletePath(_ athlete: String) -> String {
        "/athlete/" + (athlete.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? athlete)
    }

    /// What an athlete's account or phone may reach: the athlete's own page and its script (the
    /// live station on it), `/` (which leads there) and logging out; on the WebSocket's router,
    /// `/ws` as well.
    static func athleteMayReach(_ path: String, athlete: String) -> Bool {
        path == athletePath(athlete) || path == "/" || path == "/logout" || path == "/assets/console.js"
    }

    /// What a display bound to `station` may reach: its page, the WebSocket, the page's assets.
    static func displayMayReach(_ path: String, station: String) -> Bool {
        path == "/rack/" + station || path == "/ws" || path == "/assets/console.js"
    }

    private func refuse(_ request: Request) -> Response {
        // A page goes to the login form; anything else (the API, the WebSocket, scripts) is told it needs one.
        request.method == .get && !request.uri.path.hasPrefix("/api/") && request.uri.path != "/ws" && !request.uri.path.hasPrefix("/assets/")
            ? .redirect(to: request.uri.path.hasPrefix("/rack/") ? "/pair" : "/login", type: .normal) : problem(.unauthorized, "log in first at /login")
    }
}

/// The name and password of an `Authorization: Basic` header.
func basicCredentials(_ request: Request) -> (String, String)? {
    guard let header = request.headers[.authorization], header.lowercased().hasPrefix("basic "),
        let data = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
        let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
    else { return nil }
    return (String(text[..<colon]), String(text[text.index(after: colon)...]))
}

/// Headers on every response: no framing (clickjacking), no sniffing, nothing loaded from
/// anywhere but the console itself, no referrer leaving it.
struct SecurityHeaders: RouterMiddleware {
    typealias Context = ConsoleContext

    func handle(_ request: Request, context: ConsoleContext, next: (Request, ConsoleContext) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        response.headers[.xFrameOptions] = "DENY"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.referrerPolicy] = "same-origin"  // no-referrer would make browsers send Origin: null
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }
}

extension HTTPField.Name {
    static let csrfToken = Self("X-CSRF-Token")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
    static let contentSecurityPolicy = Self("Content-Security-Policy")!
    static let origin = Self("Origin")!
    static let host = Self("Host")!
}

/// Whether the request comes from the console's own pages: its Origin (which browsers send
/// with every POST and WebSocket handshake) names the host it was sent to. Without an Origin
/// it passes only when not `required` (a login from a script).
func sameOrigin(_ request: Request, required: Bool) -> Bool {
    guard let origin = request.headers[.origin] else { return !required }
    // HTTP/1.1 carries the authority in the Host header.
    guard let authority = request.head.authority ?? request.headers[.host], let schemeEnd = origin.range(of: "://") else { return false }
    return origin[schemeEnd.upperBound...] == authority
}

/// Password checks under way; at most `limit` at once.
final class LoginChecks: Sendable {
    let limit = 4
    private let running = Atomic<Int>(0)

    /// Takes a place; false when all are taken.
    func begin() -> Bool {
        if running.add(1, ordering: .acquiringAndReleasing).newValue <= limit { return true }
        running.subtract(1, ordering: .acquiringAndReleasing)
        return false
    }

    func end() { running.subtract(1, ordering: .acquiringAndReleasing) }
}

/// The version a browser has drawn, shared by its connection's reader and pusher.
final class DrawnVersion: Sendable {
    let value = Atomic<UInt64>(0)
}

/// The version a browser says it has drawn: {"drawn":N}.
func drawnVersion(_ text: String) -> UInt64? {
    guard case .object(let object)? = try? JSONParser.parse(Array(text.utf8)), case .number(let version)? = object["drawn"],
        version >= 0, version < 1e18
    else { return nil }
    return UInt64(version)
}

/// The fields of an application/x-www-form-urlencoded body.
struct FormFields {
    private var fields: [String: String] = [:]

    init(_ body: String) {
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            guard let key = parts.first, !key.isEmpty, fields[key] == nil else { continue }
            fields[key] = parts.count > 1 ? parts[1] : ""
        }
    }

    subscript(_ key: String) -> String? { fields[key] }
}

func randomToken() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined()
}

func html(_ page: String) -> Response {
    Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: page)))
}

func asset(_ text: String, type: String) -> Response {
    Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(string: text)))
}

/// An error as JSON: {"error": what happened and what to do}.
func problem(_ status: HTTPResponse.Status, _ message: String) -> Response {
    var writer = JSONWriter()
    writer.value(.object(JSONObject([("error", .string(message))])))
    return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: writer.bytes)))
}
