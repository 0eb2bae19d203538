// The console's script and style sheet, compiled into the program so an installed console
// (deploy/: binaries only) serves them without a resource folder, a CDN or a build step.
// Written by hand: the page is this project's own, and small enough to need no framework.
// The data-station and data-field names are a contract (proto/console.md).

enum Assets {
    static let script = #"""
        "use strict";
        // vbt coach console: draws the stations from the WebSocket's updates (proto/console.md).
        // Text only ever goes in through textContent: nothing from the bus becomes markup.
        (() => {
          const csrf = document.querySelector('meta[name="csrf"]').content;
          const role = document.querySelector('meta[name="role"]').content;
          const only = document.body.dataset.stationView || null;
          const states = new Map(), receivedAt = new Map(), cards = new Map();
          let socket = null, retry = 500, bus = null, gymAlerts = [];
          const grid = () => document.getElementById('stations');

          function make(tag, cls, text) {
            const e = document.createElement(tag);
            if (cls) e.className = cls;
            if (text != null) e.textContent = text;
            return e;
          }
          function slot(name, cls) { const e = make('span', cls || ''); e.dataset.field = name; return e; }
          function put(card, name, text) {
            const f = card.querySelector('[data-field="' + name + '"]');
            if (f && f.textContent !== text) f.textContent = text;
          }
          const fixed = (v, d) => v == null ? '' : Number(v).toFixed(d);
          const kg = v => v == null ? '' : (Number.isInteger(v) ? String(v) : v.toFixed(1)) + ' kg';

          function card(name) {
            let c = cards.get(name);
            if (c) return c;
            c = make('article', 'station');
            c.dataset.station = name;
            const head = make('header', 'card-head');
            const a = make('a', 'name', name);
            a.href = '/station/' + encodeURIComponent(name);
            head.append(a, slot('link', 'link-state'));
            const who = make('div', 'who');
            who.append(slot('athlete', 'athlete'));
            const what = make('div', 'what');
            what.append(slot('exercise'), ' ', slot('load', 'load'));
            const big = make('div', 'big');
            big.append(slot('last-mv', 'mv'), make('span', 'unit', 'm/s'));
            const counts = make('div', 'counts');
            counts.append('Set ', slot('set'), slot('sets', 'of'), ' · Rep ', slot('rep-count', 'reps'), slot('planned-reps', 'of'));
            const loss = make('div', 'loss');
            loss.append('VL ', slot('velocity-loss'), '% of ', slot('vl-threshold'), '%');
            const bars = make('div', 'mini-bars');
            bars.dataset.field = 'bars';
            const posture = make('div', 'posture');
            posture.append('Posture ', slot('posture'));
            const rest = make('div', 'rest');
            rest.append('Rest ', slot('rest', 'rest-s'), make('span', 'unit', 's'), ' ', slot('rest-state', 'muted'));
            const sensors = make('div', 'sensors');
            sensors.dataset.field = 'sensors';
            const alerts = make('ul', 'alerts');
            alerts.dataset.field = 'alerts';
            c.append(head, who, what, big, counts, loss, bars, posture, rest, sensors, alerts);
            cards.set(name, c);
            const g = grid();
            const waiting = g.querySelector('.waiting');
            if (waiting) waiting.remove();
            g.append(c);
            return c;
          }

          function restLeft(s) {
            const r = s.rest;
            if (!r) return null;
            if (r.state === 'running') {
              const elapsed = (performance.now() - (receivedAt.get(s.station) || performance.now())) / 1000;
              return Math.max(0, Math.ceil(r.remaining_s - elapsed));
            }
            if (r.state === 'paused') return Math.ceil(r.remaining_s);
            return null;
          }

          function draw(s) {
            const c = card(s.station);
            const last = s.reps.length ? s.reps[s.reps.length - 1] : null;
            put(c, 'athlete', s.athlete || '');
            put(c, 'exercise', s.exercise || '');
            put(c, 'load', kg(s.load_kg));
            put(c, 'last-mv', last ? fixed(last.mean_velocity_mps, 2) : '');
            put(c, 'set', s.set != null ? String(s.set) : '');
            put(c, 'sets', s.sets != null ? '/' + s.sets : '');
            put(c, 'rep-count', String(s.reps.length));
            put(c, 'planned-reps', s.planned_reps != null ? '/' + s.planned_reps : '');
            put(c, 'velocity-loss', fixed(s.velocity_loss_pct, 0));
            put(c, 'vl-threshold', fixed(s.vl_threshold_pct, 0));
            put(c, 'posture', s.posture ? (s.posture.correct ? 'ok' : 'bad ' + s.posture.bad_for_s + ' s') : '');
            put(c, 'link', s.silent ? 'silent' : 'live');
            c.classList.toggle('silent', s.silent);
            c.classList.toggle('bad-posture', !!(s.posture && s.posture.sustained_bad));
            const over = last != null && s.velocity_loss_pct != null && s.velocity_loss_pct >= s.vl_threshold_pct;
            c.classList.toggle('over-threshold', over);
            c.dataset.zone = last && last.zone ? last.zone : '';
            c.classList.toggle('in-set', s.in_set);
            const bars = c.querySelector('[data-field="bars"]');
            bars.replaceChildren(...s.reps.map(r => {
              const b = make('span', 'bar');
              b.style.height = Math.min(100, Math.round(r.mean_velocity_mps / 1.5 * 100)) + '%';
              b.dataset.zone = r.zone || '';
              b.title = 'rep ' + r.index + ': ' + fixed(r.mean_velocity_mps, 2) + ' m/s';
              if (r.velocity_loss_pct >= s.vl_threshold_pct) b.classList.add('over');
              return b;
            }));
            const sensors = c.querySelector('[data-field="sensors"]');
            sensors.replaceChildren(...Object.keys(s.sensors).sort().map(k => {
              const v = s.sensors[k];
              const e = make('span', 'sensor ' + (s.silent ? 'silent' : v.state),
                k + ' ' + (s.silent ? 'silent' : (v.state === 'streaming' && v.rate_hz != null ? Math.round(v.rate_hz) + ' Hz' : v.state)));
              return e;
            }));
            const alerts = c.querySelector('[data-field="alerts"]');
            alerts.replaceChildren(...Object.values(s.alerts).map(a => make('li', 'alert ' + a.severity, a.message)));
            drawRest(s, c);
            if (only === s.station) drawDetail(s);
          }

          function drawRest(s, c) {
            const left = restLeft(s);
            put(c, 'rest', left == null ? '' : String(left));
            put(c, 'rest-state', s.rest && s.rest.state === 'paused' ? 'paused' : '');
            c.classList.toggle('resting', left != null);
          }

          function drawDetail(s) {
            const svg = document.getElementById('bars');
            const ns = 'http://www.w3.org/2000/svg';
            const top = Math.max(1.2, ...s.reps.map(r => r.mean_velocity_mps));
            const width = 600, height = 240, pad = 24;
            const step = (width - 2 * pad) / Math.max(8, s.reps.length);
            const y = v => height - pad - (v / top) * (height - 2 * pad);
            const shapes = s.reps.map((r, i) => {
              const rect = document.createElementNS(ns, 'rect');
              rect.setAttribute('x', pad + i * step + step * 0.15);
              rect.setAttribute('width', step * 0.7);
              rect.setAttribute('y', y(r.mean_velocity_mps));
              rect.setAttribute('height', Math.max(0, height - pad - y(r.mean_velocity_mps)));
              rect.setAttribute('class', 'bar zone-' + (r.zone || 'none') + (r.velocity_loss_pct >= s.vl_threshold_pct ? ' over' : ''));
              const label = document.createElementNS(ns, 'text');
              label.setAttribute('x', pad + i * step + step / 2);
              label.setAttribute('y', y(r.mean_velocity_mps) - 6);
              label.setAttribute('text-anchor', 'middle');
              label.textContent = fixed(r.mean_velocity_mps, 2);
              return [rect, label];
            }).flat();
            const best = s.reps.length ? Math.max(...s.reps.map(r => r.mean_velocity_mps)) : null;
            if (best != null) {
              const limit = best * (1 - s.vl_threshold_pct / 100);
              const line = document.createElementNS(ns, 'line');
              line.setAttribute('x1', pad); line.setAttribute('x2', width - pad);
              line.setAttribute('y1', y(limit)); line.setAttribute('y2', y(limit));
              line.setAttribute('class', 'threshold');
              const text = document.createElementNS(ns, 'text');
              text.setAttribute('x', width - pad); text.setAttribute('y', y(limit) - 4);
              text.setAttribute('text-anchor', 'end'); text.setAttribute('class', 'threshold-label');
              text.textContent = 'stop at ' + fixed(limit, 2) + ' m/s (−' + fixed(s.vl_threshold_pct, 0) + ' %)';
              shapes.push(line, text);
            }
            svg.replaceChildren(...shapes);
            const summary = document.getElementById('summary');
            const l = s.last_set;
            summary.textContent = !s.in_set && l
              ? 'Set ended: ' + l.reps + ' reps, best ' + fixed(l.best_mean_velocity_mps, 2) + ' m/s, last ' + fixed(l.last_mean_velocity_mps, 2) +
                ' m/s, velocity loss ' + fixed(l.velocity_loss_pct, 0) + ' %' + (l.reason ? ' (' + l.reason + ')' : '')
              : (s.in_set ? 'Set in progress' : '');
            document.getElementById('rejected').replaceChildren(...s.rejected.slice().reverse().map(r =>
              make('li', '', r.reason + ': ' + r.detail + ' (' + fixed(r.mean_velocity_mps, 2) + ' m/s)')));
            checkCommands(s);
          }

          function order() {
            const key = (document.getElementById('sort') || {}).value || 'station';
            const text = ((document.getElementById('filter') || {}).value || '').toLowerCase();
            const list = [...states.values()];
            const last = s => s.reps.length ? s.reps[s.reps.length - 1].mean_velocity_mps : -1;
            const sorters = {
              station: (a, b) => a.station.localeCompare(b.station),
              athlete: (a, b) => (a.athlete || '~').localeCompare(b.athlete || '~') || a.station.localeCompare(b.station),
              velocity: (a, b) => last(b) - last(a),
              loss: (a, b) => (b.velocity_loss_pct || 0) - (a.velocity_loss_pct || 0),
              alerts: (a, b) => (Object.keys(b.alerts).length + (b.silent ? 1 : 0)) - (Object.keys(a.alerts).length + (a.silent ? 1 : 0)) || a.station.localeCompare(b.station),
            };
            list.sort(sorters[key] || sorters.station);
            const g = grid();
            let shown = 0;
            list.forEach((s, i) => {
              const c = cards.get(s.station);
              const visible = !text || s.station.toLowerCase().includes(text) || (s.athlete || '').toLowerCase().includes(text);
              c.hidden = !visible;
              if (visible) shown++;
              if (g.children[i] !== c) g.insertBefore(c, g.children[i] || null);
            });
            const count = document.getElementById('count');
            if (count) count.textContent = shown + ' of ' + list.length + ' stations';
          }

          function drawLink(text, bad) {
            const link = document.getElementById('link');
            if (!link) return;
            link.textContent = text;
            link.classList.toggle('bad', bad);
          }

          function drawGym() {
            const box = document.getElementById('gym-alerts');
            if (box) box.replaceChildren(...gymAlerts.map(a => make('div', 'alert ' + a.severity, a.message)));
            if (bus) drawLink(bus.connected ? 'live' : 'bus unreachable: waiting for it', !bus.connected);
          }

          function apply(update) {
            if (update.full) { states.clear(); }
            const now = performance.now();
            for (const s of update.stations) {
              if (only && s.station !== only) continue;
              states.set(s.station, s);
              receivedAt.set(s.station, now);
              draw(s);
            }
            if (update.full) {
              for (const [name, c] of cards) if (!states.has(name)) { c.remove(); cards.delete(name); }
            }
            if (update.gym_alerts) gymAlerts = update.gym_alerts;
            bus = update.bus;
            drawGym();
            if (!only) order();
            requestAnimationFrame(() => {
              if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ drawn: update.version }));
            });
          }

          function connect() {
            const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
            socket = new WebSocket(scheme + location.host + '/ws');
            socket.onopen = () => { retry = 500; };
            socket.onmessage = e => { const u = JSON.parse(e.data); if (u.type === 'board') apply(u); };
            socket.onclose = () => {
              drawLink('console unreachable: reconnecting', true);
              setTimeout(() => {
                // A session that ended (logged out elsewhere, account removed) goes back to the login page.
                fetch('/api/board', { credentials: 'same-origin' }).then(r => {
                  if (r.status === 401) location.href = '/login'; else connect();
                }, connect);
              }, retry);
              retry = Math.min(retry * 2, 5000);
            };
          }

          // Commands (coach accounts, station page): sent, then answered by the programs that act on
          // them (proto/ack.schema.json): done, or refused with the reason.
          const pending = [];
          function command(name, args, path, body) {
            const entry = make('li', 'pending', name + ': sending…');
            const log = document.getElementById('command-log');
            log.prepend(entry);
            fetch(path || '/api/command', {
              method: 'POST', credentials: 'same-origin',
              headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
              body: JSON.stringify(body || { station: only, command: name, args: args }),
            }).then(r => r.json().then(body => {
              if (!r.ok) { entry.className = 'failed'; entry.textContent = name + ': refused: ' + body.error; return; }
              entry.textContent = name + ': sent, waiting for an answer…';
              entry.dataset.commandId = body.id;
              pending.push({ entry, name, id: body.id, at: performance.now(), answers: [] });
              const s = states.get(only);
              if (s) checkCommands(s);
            }), () => { entry.className = 'failed'; entry.textContent = name + ': not sent: the console is unreachable'; });
          }
          function checkCommands(s) {
            for (const p of pending) {
              for (const a of s.acks || []) {
                if (a.cmd_id !== p.id || p.answers.some(x => x.program === a.program)) continue;
                p.answers.push(a);
              }
              if (!p.answers.length) continue;
              const refused = p.answers.filter(a => a.state === 'refused');
              p.entry.className = refused.length ? 'failed' : 'done';
              p.entry.textContent = p.name + ': ' + (refused.length
                ? 'refused by ' + refused.map(a => a.program + ': ' + a.reason).join('; ')
                : 'done (' + p.answers.map(a => a.program + (a.reason ? ': ' + a.reason : '')).join('; ') + ')');
            }
          }
          setInterval(() => {
            for (let i = pending.length - 1; i >= 0; i--) {
              const p = pending[i], age = performance.now() - p.at;
              if (!p.answers.length && age > 5000) {
                p.entry.className = 'failed';
                p.entry.textContent = p.name + ': sent, but no program answered in 5 s: is the program that acts on it running?';
                pending.splice(i, 1);
              } else if (age > 30000) {
                pending.splice(i, 1);  // answers that come later than this are not waited for
              }
            }
          }, 1000);

          function wireCommands() {
            if (!only || role !== 'coach') return;
            document.querySelectorAll('button[data-command]').forEach(button => button.addEventListener('click', () => {
              const name = button.dataset.command;
              const args = name === 'rest.extend' ? { seconds: Number(button.dataset.seconds) } : {};
              command(name, args);
            }));
            const plans = document.getElementById('plan');
            fetch('/api/plans', { credentials: 'same-origin' }).then(r => r.ok ? r.json() : []).then(list => {
              const select = plans.querySelector('select');
              for (const p of list) {
                const option = make('option', '', p.id + (p.athlete ? ' (' + p.athlete + ')' : ''));
                option.value = p.id;
                select.append(option);
              }
            });
            plans.addEventListener('submit', e => {
              e.preventDefault();
              const data = new FormData(plans), id = String(data.get('plan') || '');
              if (!id) return;
              const body = { station: only, plan: id };
              if (data.get('athlete')) body.athlete = String(data.get('athlete'));
              command('plan.assign ' + id, null, '/api/plan', body);
            });
            const form = document.getElementById('assign');
            form.addEventListener('submit', e => {
              e.preventDefault();
              const data = new FormData(form), args = {};
              if (data.get('athlete')) args.athlete = String(data.get('athlete'));
              if (data.get('exercise')) args.exercise = String(data.get('exercise'));
              if (data.get('load_kg')) args.load_kg = Number(data.get('load_kg'));
              command('athlete.assign', args);
            });
          }

          // The rest countdown runs between the notifier's once-a-second timer messages.
          setInterval(() => { for (const s of states.values()) { const c = cards.get(s.station); if (c) drawRest(s, c); } }, 250);
          document.addEventListener('DOMContentLoaded', () => {
            const f = document.getElementById('filter'), o = document.getElementById('sort');
            if (f) f.addEventListener('input', order);
            if (o) o.addEventListener('change', order);
            wireCommands();
            connect();
          });
        })();
        """#

    static let style = #"""
        :root { --bg: #0f1216; --card: #1a1f26; --text: #eef2f6; --muted: #8b96a3; --bad: #ff4d4f; --warn: #ffb020; --ok: #3ecf8e;
          --max-strength: #7c5cff; --strength: #2f8cff; --strength-speed: #1fc8d2; --speed: #3ecf8e; --max-speed: #ffd23f; }
        * { box-sizing: border-box; }
        body { margin: 0; font-family: system-ui, sans-serif; background: var(--bg); color: var(--text); }
        a { color: inherit; }
        main { padding: 12px; }
        .muted { color: var(--muted); }
        .top { display: flex; gap: 16px; align-items: center; padding: 8px 12px; background: #151a20; position: sticky; top: 0; z-index: 1; }
        .top .brand { font-weight: 800; font-size: 20px; text-decoration: none; }
        .top .who { margin-left: auto; color: var(--muted); }
        .top form { margin: 0; }
        .link { padding: 2px 8px; border-radius: 10px; background: #20402f; }
        .link.bad { background: var(--bad); color: #000; font-weight: 700; }
        button { font: inherit; padding: 8px 14px; border-radius: 8px; border: 1px solid #3a4552; background: #26303b; color: var(--text); cursor: pointer; }
        input, select { font: inherit; padding: 8px; border-radius: 8px; border: 1px solid #3a4552; background: #0f1419; color: var(--text); }
        .login { max-width: 340px; margin: 12vh auto; display: flex; flex-direction: column; gap: 12px; background: var(--card); padding: 24px; border-radius: 12px; }
        .login label { display: flex; flex-direction: column; gap: 4px; }
        .notice { color: var(--bad); }
        .tools { display: flex; gap: 12px; align-items: center; margin-bottom: 12px; flex-wrap: wrap; }
        .grid { display: grid; gap: 10px; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); }
        .station { background: var(--card); border-radius: 12px; padding: 10px 12px; border: 3px solid transparent; }
        .station[hidden] { display: none; }
        .station.over-threshold { border-color: var(--bad); }
        .station.silent { opacity: 0.55; border-color: var(--warn); }
        .card-head { display: flex; justify-content: space-between; font-size: 14px; color: var(--muted); }
        .card-head .name { font-weight: 700; text-decoration: none; color: var(--text); }
        .link-state { font-size: 12px; }
        .silent .link-state { color: var(--warn); font-weight: 700; }
        .who { font-size: 22px; font-weight: 700; }
        .what { color: var(--muted); }
        .big { font-size: 64px; font-weight: 800; line-height: 1.05; font-variant-numeric: tabular-nums; }
        .big .unit, .rest .unit { font-size: 16px; color: var(--muted); margin-left: 4px; font-weight: 400; }
        .station[data-zone="max-strength"] .mv { color: var(--max-strength); }
        .station[data-zone="strength"] .mv { color: var(--strength); }
        .station[data-zone="strength-speed"] .mv { color: var(--strength-speed); }
        .station[data-zone="speed"] .mv { color: var(--speed); }
        .station[data-zone="max-speed"] .mv { color: var(--max-speed); }
        .station.over-threshold .mv { color: var(--bad); }
        .counts, .loss, .posture, .rest { font-size: 17px; font-variant-numeric: tabular-nums; }
        .of { color: var(--muted); }
        .mini-bars { display: flex; align-items: flex-end; gap: 3px; height: 40px; margin: 6px 0; }
        .mini-bars .bar { flex: 0 0 12px; background: var(--strength); border-radius: 2px 2px 0 0; }
        .bar[data-zone="max-strength"] { background: var(--max-strength); } .bar[data-zone="strength-speed"] { background: var(--strength-speed); }
        .bar[data-zone="speed"] { background: var(--speed); } .bar[data-zone="max-speed"] { background: var(--max-speed); }
        .mini-bars .bar.over { background: var(--bad); }
        .bad-posture .posture { color: var(--bad); font-weight: 700; }
        .resting .rest-s { color: var(--ok); font-weight: 800; font-size: 26px; }
        .sensors { display: flex; gap: 6px; flex-wrap: wrap; font-size: 12px; color: var(--muted); margin-top: 4px; }
        .sensor.silent, .sensor.disconnected, .sensor.error { color: var(--warn); font-weight: 700; }
        .alerts { list-style: none; padding: 0; margin: 6px 0 0; font-size: 14px; }
        .alert.warning { color: var(--warn); } .alert.critical { color: var(--bad); font-weight: 700; }
        .gym-alerts .alert { padding: 6px 10px; margin-bottom: 8px; border-radius: 8px; background: #3a1f1f; }
        .single .station { max-width: 520px; }
        .station-layout { display: grid; gap: 16px; grid-template-columns: minmax(280px, 420px) 1fr; align-items: start; }
        @media (max-width: 900px) { .station-layout { grid-template-columns: 1fr; } }
        .set-view h2, .commands h2 { margin: 8px 0; font-size: 20px; }
        [data-field="rest"]:empty::before, [data-field="last-mv"]:empty::before, [data-field="posture"]:empty::before { content: "–"; }
        [data-field="rest"]:empty + .unit { display: none; }
        .bars-chart { width: 100%; max-width: 720px; background: var(--card); border-radius: 12px; }
        .bars-chart rect { fill: var(--strength); } .bars-chart rect.zone-max-strength { fill: var(--max-strength); }
        .bars-chart rect.zone-strength-speed { fill: var(--strength-speed); } .bars-chart rect.zone-speed { fill: var(--speed); }
        .bars-chart rect.zone-max-speed { fill: var(--max-speed); } .bars-chart rect.over { fill: var(--bad); }
        .bars-chart text { fill: var(--text); font-size: 13px; }
        .bars-chart .threshold { stroke: var(--bad); stroke-width: 2; stroke-dasharray: 6 4; }
        .bars-chart .threshold-label { fill: var(--bad); }
        .summary { font-size: 20px; margin: 10px 0; }
        .commands { margin-top: 16px; }
        .command, .command-buttons { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 8px; }
        .command-log { font-size: 15px; }
        .command-log .done { color: var(--ok); } .command-log .failed { color: var(--bad); }
        .top nav { display: flex; gap: 12px; } .top nav a { text-decoration: none; color: var(--muted); } .top nav a:hover { color: var(--text); }
        .history main { max-width: 1100px; }
        .facts { font-size: 18px; }
        table.data { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
        table.data th, table.data td { padding: 6px 10px; border-bottom: 1px solid #2a323c; text-align: left; }
        table.data td.num { text-align: right; }
        table.data caption { text-align: left; font-weight: 700; padding: 4px 0; }
        .chart svg { max-width: 100%; height: auto; border-radius: 12px; }
        .two { display: flex; gap: 24px; flex-wrap: wrap; align-items: flex-start; }
        .tabs a { margin-right: 12px; padding: 4px 10px; border-radius: 8px; } .tabs a.on { background: #26303b; }
        """#
}
