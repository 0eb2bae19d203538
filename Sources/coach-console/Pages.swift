import VBTConsole
import VBTDetection

/// The console's pages: small HTML shells; the script (Assets/console.js) draws the stations from
/// the WebSocket's updates. Nothing is loaded from elsewhere (the Content-Security-Policy
/// allows only the console itself), so the pages work on a gym network without the internet.
enum Pages {
    static func login(message: String?) -> String {
        let notice = message.map { #"<p class="notice" role="alert">\#(escape($0))</p>"# } ?? ""
        return page(
            title: "vbt: log in", body: "login",
            main: """
                <form class="login" method="post" action="/login">
                  <h1>vbt coach console</h1>
                  \(notice)
                  <label>Name <input name="username" autocomplete="username" required autofocus></label>
                  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
                  <button type="submit">Log in</button>
                </form>
                """)
    }

    static func board(user: String, role: ConsoleRole, csrf: String) -> String {
        page(
            title: "vbt: the gym", body: "board", user: user, role: role, csrf: csrf,
            main: """
                <div class="tools">
                  <input id="filter" type="search" placeholder="Filter: station or athlete" aria-label="Filter stations">
                  <label>Sort <select id="sort">
                    <option value="station">station</option><option value="athlete">athlete</option>
                    <option value="velocity">last velocity</option><option value="loss">velocity loss</option>
                    <option value="alerts">alerts first</option>
                  </select></label>
                  <span id="count" class="muted"></span>
                </div>
                \(zoneLegend())
                <div id="gym-alerts" class="gym-alerts"></div>
                <div id="stations" class="grid"><p class="muted waiting">Waiting for the first station…</p></div>
                """)
    }

    static func station(_ name: String, user: String, role: ConsoleRole, csrf: String) -> String {
        let commands =
            role == .coach
            ? """
            <section class="commands" aria-label="Commands">
              <h2>Commands</h2>
              <form id="assign" class="command">
                <input name="athlete" placeholder="athlete" aria-label="athlete">
                <input name="exercise" placeholder="exercise" aria-label="exercise">
                <input name="load_kg" type="number" step="0.5" min="0" max="1000" placeholder="kg" aria-label="load in kg">
                <button type="submit">Assign</button>
              </form>
              <form id="plan" class="command">
                <select name="plan" aria-label="plan"><option value="">plan…</option></select>
                <input name="athlete" placeholder="athlete (the plan's)" aria-label="athlete for the plan">
                <button type="submit">Start plan</button>
              </form>
              <div class="command-buttons">
                <button data-command="set.end">End set</button>
                <button data-command="rest.pause">Pause rest</button>
                <button data-command="rest.resume">Resume rest</button>
                <button data-command="rest.skip">Skip rest</button>
                <button data-command="rest.extend" data-seconds="30">Rest +30 s</button>
                <button data-command="posture.calibrate">Calibrate posture</button>
                <button data-command="athlete.unassign">Unassign athlete</button>
              </div>
              <ol id="command-log" class="command-log"></ol>
            </section>
            """ : #"<p class="muted">Viewer account: commands need a coach's account.</p>"#
        return page(
            title: "vbt: \(name)", body: "station", station: name, user: user, role: role, csrf: csrf,
            main: """
                <p><a href="/">← every station</a></p>
                <div class="station-layout">
                <div>
                <div id="stations" class="single"></div>
                \(commands)
                </div>
                <section class="set-view">
                  <h2>This set</h2>
                  \(zoneLegend())
                  <svg id="bars" class="bars-chart" viewBox="0 0 600 240" role="img" aria-label="mean velocity of each rep"></svg>
                  <div id="summary" class="summary" data-field="set-summary"></div>
                  <h2>Rejected attempts</h2>
                  <ul id="rejected" class="rejected" data-field="rejected"></ul>
                </section>
                </div>
                """)
    }

    /// `live`: whether the page draws from the WebSocket (loads the script); by default the
    /// logged-in pages and the rack's do, an athlete's do not (her own page says when it does).
    static func page(
        title: String, body: String, station: String? = nil, user: String? = nil, role: ConsoleRole? = nil, csrf: String? = nil,
        live: Bool? = nil, main: String
    ) -> String {
        let header =
            user.map { user in
                """
                <header class="top">
                  <a class="brand" href="/">vbt</a>
                  \(role == .athlete ? "" : #"<nav><a href="/">Board</a> <a href="/athletes">Athletes</a> <a href="/leaders">Leaderboards</a></nav>"#)
                  \(body.hasPrefix("history") ? "" : #"<span id="link" class="link" data-field="bus">connecting…</span>"#)
                  <span class="who">\(escape(user)) (\(role?.rawValue ?? ""))</span>
                  <form method="post" action="/logout"><input type="hidden" name="csrf" value="\(escape(csrf ?? ""))"><button>Log out</button></form>
                </header>
                """
            } ?? ""
        let scripted = live ?? !((user == nil && body != "rack") || role == .athlete)
        let script = scripted ? #"<script src="/assets/console.js" defer></script>"# : ""
        let stationAttribute = station.map { #" data-station-view="\#(escape($0))""# } ?? ""
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="csrf" content="\(escape(csrf ?? ""))">
            <meta name="role" content="\(role?.rawValue ?? "")">
            <title>\(escape(title))</title>
            <link rel="stylesheet" href="/assets/console.css">
            \(script)
            </head>
            <body class="\(body)"\(stationAttribute)>
            \(header)
            <main>
            \(main)
            </main>
            </body>
            </html>
            """
    }

    /// What each zone's colour means, with its range (the detector's zones).
    static func zoneLegend() -> String {
        let zones = VelocityZone.defaults
        let items = zones.enumerated().map { index, zone in
            let range =
                index + 1 < zones.count
                ? (index == 0 ? "< \(format(zones[index + 1].fromMps))" : "\(format(zone.fromMps))–\(format(zones[index + 1].fromMps))")
                : "≥ \(format(zone.fromMps))"
            return #"<li data-zone="\#(escape(zone.name))"><span class="swatch"></span>\#(escape(zone.name)) \#(range) m/s</li>"#
        }
        return
            #"<ul class="legend" aria-label="Velocity zones (colour of the last rep and of the bars)">\#(items.joined())<li class="over"><span class="swatch"></span>velocity loss reached</li></ul>"#
    }

    private static func format(_ mps: Double) -> String {
        let hundredths = Int((mps * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }

    /// The rack display: one station for the athlete under the bar, readable from 4 m, with
    /// sound and no commands. `user` names the coach who looks at it, nil for a paired display.
    static func rack(_ name: String, user: String?) -> String {
        let station = escape(name)
        return page(
            title: "vbt: \(name)", body: "rack", station: name, role: user == nil ? nil : .viewer,
            main: """
                \(rackView(station: name))
                <p id="unpaired" class="notice unpaired-note" role="alert" hidden>This display was removed. Ask a coach for a new code: vbt console display add \(station)</p>
                """)
    }

    /// One station as the rack page draws it (the script fills it from the updates), and the
    /// sound's controls. `name` nil: the athlete's page, where the script names the station she
    /// is at.
    static func rackView(station name: String?) -> String {
        let station = name.map(escape) ?? ""
        let named = name == nil ? #" data-field="station""# : ""
        return """
            <article class="rack-station" data-station="\(station)">
              <header class="rack-head">
                <span class="rack-name"\(named)>\(station)</span>
                <span data-field="athlete" class="athlete"></span>
                <span class="what"><span data-field="exercise"></span> <span data-field="load" class="load"></span></span>
                <span data-field="readiness" class="readiness"></span>
                <span class="counts">Set <span data-field="set"></span><span data-field="sets" class="of"></span></span>
                <span data-field="link" class="link-state"></span>
                <span id="link" class="link" data-field="bus">connecting…</span>
              </header>
              <section class="rack-now" aria-label="Last rep">
                <div class="rack-mv"><span data-field="last-mv" class="mv"></span><span class="unit">m/s</span></div>
                <div data-field="last-late" class="late-tag"></div>
                <div data-field="last-tempo" class="tempo"></div>
                <div class="rack-band"><span data-field="band" class="band"></span> <span data-field="target" class="target"></span></div>
                <div class="rack-rep">Rep <span data-field="rep-count"></span><span data-field="planned-reps" class="of"></span></div>
                <div class="rack-stop" data-field="vl-stop" role="alert"></div>
                <div class="rack-posture" data-field="posture-warning" role="alert"></div>
              </section>
              <section class="rack-set" aria-label="This set">
                <svg data-field="rack-bars" class="bars-chart rack-bars" viewBox="0 0 800 320" role="img" aria-label="mean velocity of each rep"></svg>
                <div class="loss">Velocity loss <span data-field="velocity-loss"></span> % of <span data-field="vl-threshold"></span> %</div>
                <div class="rest">Rest <span data-field="rest" class="rest-s"></span><span class="unit">s</span> <span data-field="rest-state" class="muted"></span></div>
                <div class="summary" data-field="set-summary"></div>
                <div class="posture">Posture <span data-field="posture"></span></div>
              </section>
            </article>
            <footer class="rack-sound">
              <button id="mute" type="button">Sound on</button>
              <label>Volume <input id="volume" type="range" min="0" max="100" step="5"></label>
              <label><input id="speak" type="checkbox"> Speak the velocity</label>
            </footer>
            """
    }

    /// Where a rack display or an athlete's phone types its pairing code (the URL
    /// `vbt console display add` prints carries it).
    static func pair(message: String?) -> String {
        let notice = message.map { #"<p class="notice" role="alert">\#(escape($0))</p>"# } ?? ""
        return page(
            title: "vbt: pair this screen", body: "login",
            main: """
                <form class="login" method="get" action="/pair">
                  <h1>Pair this screen</h1>
                  \(notice)
                  <p class="muted">A coach runs <code>vbt console display add STATION</code> for a rack's display, \
                or <code>vbt console display add --athlete ID</code> for an athlete's phone, and reads you the code.</p>
                  <label>Code <input name="code" placeholder="XXXX-XXXX" autocomplete="off" required autofocus></label>
                  <button type="submit">Pair</button>
                </form>
                """)
    }

    /// A page of the recorder's history (no live updates: its link shows the page's own state).
    /// `now`: the athlete's own page, which opens with the station she is at now, live (its sound
    /// off until she turns it on: a phone in a pocket), or says she is at none.
    static func history(title: String, user: String, role: ConsoleRole, csrf: String, main: String, now: Bool = false) -> String {
        guard now else { return page(title: "vbt: " + title, body: "history", user: user, role: role, csrf: csrf, main: main) }
        return page(
            title: "vbt: " + title, body: "history athlete-now", user: user, role: role, csrf: csrf, live: true,
            main: """
                <section class="now" aria-label="Now">
                  <h2>Now</h2>
                  <p data-field="not-here" class="muted">not at a station now</p>
                  <div class="now-live" hidden>
                  \(rackView(station: nil))
                  </div>
                  <p id="unpaired" class="notice" role="alert" hidden>This phone was unpaired: ask a coach for a new code, then reload.</p>
                </section>
                \(main)
                """)
    }

    /// What a history page says when the recorder cannot answer; the live board still works.
    static func unavailable(_ reason: String) -> String {
        """
        <h1>History unavailable</h1>
        <p class="notice" role="alert" data-field="history-error">\(escape(reason))</p>
        <p>The live board keeps working: <a href="/">every station</a>. Reload this page once the session-recorder is back.</p>
        """
    }

    /// Text made safe inside HTML elements and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
