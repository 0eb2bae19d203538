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
          // The athlete's own page (/athlete/ID) shows the rack's view of the station she is at now:
          // the server sends her nothing but her stations, and a full update whenever they change.
          const athleteNow = document.body.classList.contains('athlete-now');
          let only = document.body.dataset.stationView || null;
          // The rack page (/rack/NAME): one station for the athlete under the bar, with sound.
          const rackView = document.body.classList.contains('rack') || athleteNow;
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
            if (rackView) {
              c = document.querySelector('[data-station]');
              if (athleteNow) { c.dataset.station = name; put(c, 'station', name); }
              cards.set(name, c);
              return c;
            }
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
            const ready = make('div', 'readiness');
            ready.append(slot('readiness'));
            const big = make('div', 'big');
            big.append(slot('last-mv', 'mv'), make('span', 'unit', 'm/s'), slot('last-tempo', 'tempo'));
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
            c.append(head, who, what, ready, big, counts, loss, bars, posture, rest, sensors, alerts);
            // The notifier's load advice for the next set, with Accept for a coach (docs/detection.md "Load advice").
            const advice = make('div', 'advice');
            advice.append(slot('advice'));
            if (role === 'coach') {
              const accept = make('button', 'accept-advice', 'Accept');
              accept.dataset.field = 'accept-advice';
              accept.hidden = true;
              accept.addEventListener('click', () => acceptAdvice(name, advice));
              advice.append(' ', accept);
            }
            what.after(advice);
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

          // How a late rep is named: " (late by N s)", "" for a live one.
          const lateWords = r => r.late_s != null ? ' (late by ' + Math.round(r.late_s) + ' s)' : '';

          // The last rep against its prescribed tempo: each phase's measured seconds (X where any will
          // do, – where unknown), the phases that missed marked, then a tick or a cross.
          function putTempo(c, r) {
            const f = c.querySelector('[data-field="last-tempo"]');
            if (!f) return;
            if (!r || !r.tempo) { f.replaceChildren(); f.title = ''; return; }
            const prescribed = r.tempo.split('-');
            const measured = [r.eccentric_s, r.pause_bottom_s, r.concentric_s, r.pause_top_s];
            const missed = r.tempo_missed || [];
            const parts = [];
            ['eccentric', 'pause_bottom', 'concentric', 'pause_top'].forEach((phase, i) => {
              if (i > 0) parts.push('-');
              const any = (prescribed[i] || '').toUpperCase() === 'X';
              parts.push(make('span', missed.includes(phase) ? 'missed' : '', any ? 'X' : measured[i] == null ? '–' : fixed(measured[i], 1)));
            });
            parts.push(make('span', 'verdict', r.tempo_met === true ? ' ✓' : r.tempo_met === false ? ' ✗' : ''));
            f.replaceChildren(...parts);
            f.title = 'tempo ' + r.tempo + (missed.length ? ': missed ' + missed.join(', ').replace(/_/g, ' ') : '');
          }

          // The next set's load advice: the load (or that there is none), one set fewer, applied; the
          // reason in the title. Accept shows while there is something to apply.
          function putAdvice(c, s) {
            const a = s.advice;
            let text = '';
            if (a) {
              text = 'Next set ' + a.for_set + ': ' + (a.load_kg != null ? kg(a.load_kg) : 'no load advice');
              if (a.fewer_sets) text += ', one set fewer';
              if (a.applied) text += ' (applied)';
            }
            put(c, 'advice', text);
            const f = c.querySelector('[data-field="advice"]');
            if (f) f.title = a ? a.reason + (a.fewer_sets_reason ? '; ' + a.fewer_sets_reason : '') : '';
            const b = c.querySelector('[data-field="accept-advice"]');
            if (b) b.hidden = !a || a.applied || (a.load_kg == null && !a.fewer_sets);
          }
          function acceptAdvice(station, box) {
            fetch('/api/command', {
              method: 'POST', credentials: 'same-origin',
              headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
              body: JSON.stringify({ station: station, command: 'advice.accept', args: {} }),
            }).then(r => r.json().then(body => { if (!r.ok) box.title = 'advice.accept refused: ' + body.error; }),
              () => { box.title = 'advice.accept not sent: the console is unreachable'; });
          }

          function draw(s) {
            const c = card(s.station);
            const last = s.reps.length ? s.reps[s.reps.length - 1] : null;
            put(c, 'athlete', s.athlete || '');
            put(c, 'exercise', s.exercise || '');
            put(c, 'load', kg(s.load_kg));
            putAdvice(c, s);
            // The athlete's own readiness today (the recorder's, docs/detection.md "Readiness"), not a previous athlete's.
            put(c, 'readiness', s.readiness && s.readiness.athlete === s.athlete ? 'Readiness ' + s.readiness.text : '');
            put(c, 'last-mv', last ? fixed(last.mean_velocity_mps, 2) : '');
            putTempo(c, last);
            put(c, 'last-late', last && last.late_s != null ? 'late by ' + Math.round(last.late_s) + ' s: came after the station\'s link was back' : '');
            put(c, 'set', s.set != null ? String(s.set) : '');
            put(c, 'sets', s.sets != null ? '/' + s.sets : '');
            put(c, 'rep-count', String(s.reps.length));
            put(c, 'planned-reps', s.planned_reps != null ? '/' + s.planned_reps : '');
            put(c, 'velocity-loss', fixed(s.velocity_loss_pct, 0));
            put(c, 'vl-threshold', fixed(s.vl_threshold_pct, 0));
            put(c, 'posture', s.posture ? (s.posture.correct ? 'ok' : 'bad ' + s.posture.bad_for_s + ' s') : '');
            // Reconnecting: cut off without saying it stops, until its readings flow again (its late reps
            // come meanwhile); silent: its bridge stopped, or nothing says it will be back.
            put(c, 'link', s.reconnecting ? 'reconnecting' : s.silent ? 'silent' : 'live');
            c.classList.toggle('silent', s.silent && !s.reconnecting);
            c.classList.toggle('reconnecting', !!s.reconnecting);
            c.classList.toggle('bad-posture', !!(s.posture && s.posture.sustained_bad));
            const over = last != null && s.velocity_loss_pct != null && s.velocity_loss_pct >= s.vl_threshold_pct;
            c.classList.toggle('over-threshold', over);
            c.dataset.zone = last && last.zone ? last.zone : '';
            c.classList.toggle('in-set', s.in_set);
            const bars = c.querySelector('[data-field="bars"]');
            if (bars) bars.replaceChildren(...s.reps.map(r => {
              const b = make('span', 'bar');
              b.style.height = Math.min(100, Math.round(r.mean_velocity_mps / 1.5 * 100)) + '%';
              b.dataset.zone = r.zone || '';
              b.title = 'rep ' + r.index + ': ' + fixed(r.mean_velocity_mps, 2) + ' m/s' + lateWords(r);
              if (r.velocity_loss_pct >= s.vl_threshold_pct) b.classList.add('over');
              if (r.late_s != null) b.classList.add('late');
              return b;
            }));
            const sensors = c.querySelector('[data-field="sensors"]');
            if (sensors) sensors.replaceChildren(...Object.keys(s.sensors).sort().map(k => {
              const v = s.sensors[k];
              const link = s.reconnecting ? 'reconnecting' : 'silent';
              const e = make('span', 'sensor ' + (s.silent ? link : v.state),
                k + ' ' + (s.silent ? link : (v.state === 'streaming' && v.rate_hz != null ? Math.round(v.rate_hz) + ' Hz' : v.state)));
              return e;
            }));
            const alerts = c.querySelector('[data-field="alerts"]');
            if (alerts) alerts.replaceChildren(...Object.values(s.alerts).map(a => make('li', 'alert ' + a.severity, a.message)));
            drawRest(s, c);
            if (rackView) drawRack(s, c);
            else if (only === s.station) drawDetail(s);
          }

          function drawRest(s, c) {
            const left = restLeft(s);
            put(c, 'rest', left == null ? '' : String(left));
            put(c, 'rest-state', s.rest && s.rest.state === 'paused' ? 'paused' : '');
            c.classList.toggle('resting', left != null);
          }

          // The set's reps as bars, coloured by zone, with the velocity-loss threshold as a line. The
          // line's label sits in a gutter right of the bars, so it never covers a bar or its value.
          function drawBars(svg, s, width, height, fit) {
            const ns = 'http://www.w3.org/2000/svg';
            // The station page keeps one scale (1.2 m/s or more); the rack's fits the set and its band.
            const fastest = Math.max(0, ...s.reps.map(r => r.mean_velocity_mps));
            const top = fit ? Math.max(0.4, fastest * 1.25, s.target && s.target.high_mps ? s.target.high_mps * 1.1 : 0)
              : Math.max(1.2, fastest) * 1.08;
            const pad = 24, gutter = Math.round(width * 0.2), right = width - gutter;
            const step = (right - pad) / Math.max(8, s.reps.length);
            const y = v => height - pad - (v / top) * (height - 2 * pad);
            const shapes = [];
            if (s.target) {
              // The target band behind the bars.
              const band = document.createElementNS(ns, 'rect');
              const high = s.target.high_mps == null ? top : Math.min(top, s.target.high_mps);
              band.setAttribute('x', pad); band.setAttribute('width', right - pad);
              band.setAttribute('y', y(high)); band.setAttribute('height', Math.max(0, y(s.target.low_mps) - y(high)));
              band.setAttribute('class', 'target-band');
              shapes.push(band);
            }
            s.reps.forEach((r, i) => {
              const rect = document.createElementNS(ns, 'rect');
              rect.setAttribute('x', pad + i * step + step * 0.15);
              rect.setAttribute('width', step * 0.7);
              rect.setAttribute('y', y(r.mean_velocity_mps));
              rect.setAttribute('height', Math.max(0, height - pad - y(r.mean_velocity_mps)));
              rect.setAttribute('class', 'bar zone-' + (r.zone || 'none') + (r.velocity_loss_pct >= s.vl_threshold_pct ? ' over' : '') + (r.late_s != null ? ' late' : ''));
              const label = document.createElementNS(ns, 'text');
              label.setAttribute('x', pad + i * step + step / 2);
              label.setAttribute('y', y(r.mean_velocity_mps) - 6);
              label.setAttribute('text-anchor', 'middle');
              label.setAttribute('class', 'bar-value');
              label.textContent = fixed(r.mean_velocity_mps, 2) + (r.late_s != null ? ' (late)' : '');
              shapes.push(rect, label);
            });
            const best = s.reps.length ? Math.max(...s.reps.map(r => r.mean_velocity_mps)) : null;
            if (best != null) {
              const limit = best * (1 - s.vl_threshold_pct / 100);
              const line = document.createElementNS(ns, 'line');
              line.setAttribute('x1', pad); line.setAttribute('x2', right);
              line.setAttribute('y1', y(limit)); line.setAttribute('y2', y(limit));
              line.setAttribute('class', 'threshold');
              const text = document.createElementNS(ns, 'text');
              text.setAttribute('x', right + 8); text.setAttribute('y', y(limit));
              text.setAttribute('class', 'threshold-label');
              text.dataset.field = 'vl-line';
              const first = document.createElementNS(ns, 'tspan');
              first.textContent = 'stop ' + fixed(limit, 2);
              const second = document.createElementNS(ns, 'tspan');
              second.setAttribute('x', right + 8); second.setAttribute('dy', '1.2em');
              second.textContent = 'm/s (−' + fixed(s.vl_threshold_pct, 0) + ' %)';
              text.append(first, second);
              shapes.push(line, text);
            }
            svg.replaceChildren(...shapes);
          }

          function summaryText(s) {
            const l = s.last_set;
            return !s.in_set && l
              ? 'Set ended: ' + l.reps + ' reps, best ' + fixed(l.best_mean_velocity_mps, 2) + ' m/s, last ' + fixed(l.last_mean_velocity_mps, 2) +
                ' m/s, velocity loss ' + fixed(l.velocity_loss_pct, 0) + ' %' + (l.reason ? ' (' + l.reason + ')' : '')
              : (s.in_set ? 'Set in progress' : '');
          }

          function drawDetail(s) {
            drawBars(document.getElementById('bars'), s, 600, 240);
            document.getElementById('summary').textContent = summaryText(s);
            document.getElementById('rejected').replaceChildren(...s.rejected.slice().reverse().map(r =>
              make('li', '', r.reason + ': ' + r.detail + ' (' + fixed(r.mean_velocity_mps, 2) + ' m/s)')));
            checkCommands(s);
          }

          // The rack page: the last rep against the target band, the set so far, and a cue per event.
          // `cued` holds what has had its cue; what the first update shows is history and has none.
          const cued = new Set();
          let rackDrawn = false, restState = null;
          function drawRack(s, c) {
            const last = s.reps.length ? s.reps[s.reps.length - 1] : null;
            const band = last && last.band ? last.band : '';
            put(c, 'band', band);
            c.dataset.band = band;
            const t = s.target;
            put(c, 'target', t ? (t.source === 'plan' ? 'target ' + fixed(t.target_mps, 2) + ' m/s'
              : (t.zone || '') + ' ' + fixed(t.low_mps, 2) + (t.high_mps != null ? '–' + fixed(t.high_mps, 2) : '+') + ' m/s') : '');
            const stopped = !s.in_set && s.last_set && s.last_set.reason === 'velocity-loss' && s.last_set.set_id === s.set_id;
            put(c, 'vl-stop', stopped ? 'stop: velocity loss reached' : '');
            c.classList.toggle('vl-stopped', !!stopped);
            put(c, 'set-summary', summaryText(s));
            put(c, 'posture-warning', s.posture && s.posture.sustained_bad ? 'Posture! Straighten up' : '');
            drawBars(c.querySelector('[data-field="rack-bars"]'), s, 800, 320, true);
            const rest = s.rest ? s.rest.state : null;
            if (!rackDrawn) {
              s.reps.forEach(r => cued.add(s.set_id + '/' + r.index));
              if (stopped) cued.add('stop/' + s.last_set.set_id);
            } else {
              for (const r of s.reps) {
                const key = s.set_id + '/' + r.index;
                if (cued.has(key)) continue;
                cued.add(key);
                // A late rep is history by the time it comes: drawn (marked), not cued as just done.
                if (r.late_s == null) cue('rep', { mv: r.mean_velocity_mps, band: r.band || null, index: r.index, set_id: s.set_id });
              }
              if (stopped && !cued.has('stop/' + s.last_set.set_id)) {
                cued.add('stop/' + s.last_set.set_id);
                cue('vl-stop', { velocity_loss_pct: s.last_set.velocity_loss_pct, set_id: s.last_set.set_id });
              }
              if (rest === 'over' && restState !== 'over' && restState != null) cue('rest-over', {});
            }
            restState = rest;
          }

          // Always through window.vbtCue, looked up at each call, so a test (or a gym's own
          // script) can wrap it.
          function cue(kind, detail) {
            try { window.vbtCue(kind, detail); } catch (e) { console.error('vbtCue', e); }
          }

          // Sound made in the browser (Web Audio, no file to fetch): in the band one clear tone,
          // above it two rising beeps, below it one low long tone; a falling triplet when velocity
          // loss ends the set, a rising chime when the rest is over; the velocity spoken where the
          // browser can speak. Mute, volume and speech are kept in this browser.
          const sound = (() => {
            // An athlete's page keeps its own settings, muted until she turns the sound on (a phone in a pocket).
            const key = athleteNow ? 'vbt-athlete-sound' : 'vbt-rack-sound';
            const saved = JSON.parse(localStorage.getItem(key) || '{}');
            const settings = { muted: saved.muted == null ? athleteNow : !!saved.muted, volume: saved.volume == null ? 0.8 : saved.volume,
              speak: !!saved.speak };
            let audio = null;
            const save = () => localStorage.setItem(key, JSON.stringify(settings));
            function context() {
              const AudioContext = window.AudioContext || window.webkitAudioContext;
              if (!AudioContext) return null;
              if (!audio) audio = new AudioContext();
              if (audio.state === 'suspended') audio.resume();
              return audio;
            }
            function tones(list, wave) {
              const a = context();
              if (!a || settings.muted || settings.volume <= 0) return;
              let at = a.currentTime + 0.01;
              for (const [hz, seconds, gap] of list) {
                const osc = a.createOscillator(), gain = a.createGain();
                osc.type = wave || 'sine';
                osc.frequency.value = hz;
                gain.gain.setValueAtTime(0.0001, at);
                gain.gain.exponentialRampToValueAtTime(Math.max(0.0002, settings.volume), at + 0.01);
                gain.gain.exponentialRampToValueAtTime(0.0001, at + seconds);
                osc.connect(gain).connect(a.destination);
                osc.start(at);
                osc.stop(at + seconds + 0.02);
                at += seconds + (gap || 0.04);
              }
            }
            const words = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'];
            function say(mv) {
              if (!settings.speak || settings.muted || !window.speechSynthesis || mv == null) return;
              const text = Number(mv).toFixed(2).split('').map(d => d === '.' ? 'point' : words[Number(d)]).join(' ');
              const u = new SpeechSynthesisUtterance(text);
              u.volume = settings.volume;
              u.rate = 1.1;
              speechSynthesis.cancel();
              speechSynthesis.speak(u);
            }
            function play(kind, detail) {
              if (kind === 'rep') {
                const band = detail && detail.band;
                if (band === 'in') tones([[880, 0.18]]);
                else if (band === 'above') tones([[988, 0.09], [1319, 0.12]], 'triangle');
                else if (band === 'below') tones([[330, 0.38]], 'sawtooth');
                else tones([[660, 0.12]]);
                say(detail && detail.mv);
              } else if (kind === 'vl-stop') {
                tones([[784, 0.16], [587, 0.16], [392, 0.4]], 'square');
              } else if (kind === 'rest-over') {
                tones([[523, 0.14], [659, 0.14], [784, 0.3]], 'triangle');
              }
            }
            return { settings, save, play, context, canSpeak: !!window.speechSynthesis };
          })();
          window.vbtCue = (kind, detail) => sound.play(kind, detail);

          function wireSound() {
            const mute = document.getElementById('mute'), volume = document.getElementById('volume'), speak = document.getElementById('speak');
            if (!mute) return;
            const show = () => {
              mute.textContent = sound.settings.muted ? 'Sound off' : 'Sound on';
              mute.setAttribute('aria-pressed', String(sound.settings.muted));
              volume.value = String(Math.round(sound.settings.volume * 100));
              speak.checked = sound.settings.speak;
            };
            mute.addEventListener('click', () => { sound.settings.muted = !sound.settings.muted; sound.save(); sound.context(); show(); });
            volume.addEventListener('input', () => { sound.settings.volume = Number(volume.value) / 100; sound.save(); });
            speak.addEventListener('change', () => { sound.settings.speak = speak.checked; sound.save(); });
            speak.disabled = !sound.canSpeak;
            // Browsers start sound only after a touch or a key: the first one anywhere unlocks it.
            const unlock = () => { sound.context(); document.removeEventListener('pointerdown', unlock); document.removeEventListener('keydown', unlock); };
            document.addEventListener('pointerdown', unlock);
            document.addEventListener('keydown', unlock);
            show();
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

          // Which station the athlete's page shows: the one she is at (the first, were she at two),
          // or none. A new one is drawn as the rack's first update is: what it holds has no cue.
          function follow(update) {
            const names = update.stations.map(s => s.station);
            if (only == null || !names.includes(only)) {
              only = names.length ? names[0] : null;
              cards.clear();
              rackDrawn = false;
            }
            const notHere = document.querySelector('[data-field="not-here"]'), live = document.querySelector('.now-live');
            if (notHere) notHere.hidden = only != null;
            if (live) live.hidden = only == null;
          }

          function apply(update) {
            if (update.full) { states.clear(); }
            if (athleteNow && update.full) follow(update);
            const now = performance.now();
            for (const s of update.stations) {
              if (only && s.station !== only) continue;
              states.set(s.station, s);
              receivedAt.set(s.station, now);
              draw(s);
            }
            // A restarted console's first update may not know the station yet: the rack page's
            // one card is part of the page and stays, to be filled when the station is heard.
            if (update.full && !rackView) {
              for (const [name, c] of cards) if (!states.has(name)) { c.remove(); cards.delete(name); }
            }
            if (update.gym_alerts) gymAlerts = update.gym_alerts;
            bus = update.bus;
            drawGym();
            if (!only && !rackView) order();
            if (!athleteNow || only != null) rackDrawn = true;
            requestAnimationFrame(() => {
              if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ drawn: update.version }));
            });
          }

          function unpaired() {
            document.body.classList.add('unpaired');
            const note = document.getElementById('unpaired');
            if (note) note.hidden = false;
            drawLink('this display was removed: ask a coach for a new code', true);
          }

          function connect() {
            const scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
            socket = new WebSocket(scheme + location.host + '/ws');
            socket.onopen = () => { retry = 500; };
            socket.onmessage = e => { const u = JSON.parse(e.data); if (u.type === 'board') apply(u); };
            socket.onclose = e => {
              drawLink('console unreachable: reconnecting', true);
              // A phone closed by its removal (policy violation) says so and asks nothing more: the page
              // it is refused next (the pairing form) is the one she opens herself.
              if (athleteNow && e.code === 1008) { unpaired(); return; }
              if (rackView) {
                // A display that was removed is refused its own page at once: it says so and stops.
                // Otherwise (the console restarting) it tries again, less and less often.
                const wait = retry;
                retry = Math.min(retry * 2, 5000);
                fetch(location.pathname, { credentials: 'same-origin' }).then(r => {
                  // An athlete's page whose session ended (or phone was unpaired) shows where to log in or pair again.
                  if (athleteNow && (r.redirected || r.status === 401 || r.status === 403)) location.reload();
                  else if (r.status === 401 || r.status === 403) unpaired(); else setTimeout(connect, r.ok ? 0 : wait);
                }, () => setTimeout(connect, wait));
                return;
              }
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
            wireSound();
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
        .station.reconnecting { border-color: var(--warn); border-style: dashed; }
        .reconnecting .link-state { color: var(--warn); font-weight: 700; }
        .bar.late { opacity: 0.6; outline: 1px dashed var(--warn); }
        .late-tag { color: var(--warn); font-weight: 700; }
        .tempo { margin-left: 0.5em; font-size: 0.5em; } .tempo .missed { color: var(--bad); font-weight: 700; text-decoration: underline; }
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
        .bars-chart .threshold-label { font-size: 15px; font-weight: 700; }
        .bars-chart .target-band { fill: var(--ok); opacity: 0.14; }
        .legend { display: flex; flex-wrap: wrap; gap: 6px 16px; list-style: none; padding: 0; margin: 0 0 12px; font-size: 14px; color: var(--muted); }
        .legend li { display: flex; align-items: center; gap: 6px; }
        .legend .swatch { width: 14px; height: 14px; border-radius: 3px; background: var(--strength); }
        .legend [data-zone="max-strength"] .swatch { background: var(--max-strength); } .legend [data-zone="strength-speed"] .swatch { background: var(--strength-speed); }
        .legend [data-zone="speed"] .swatch { background: var(--speed); } .legend [data-zone="max-speed"] .swatch { background: var(--max-speed); }
        .legend .over .swatch { background: var(--bad); }
        /* The rack display: one station, read from 4 m on a TV or a tablet, landscape or portrait.
           The last rep's velocity is 30 % of the screen's height (half its width in portrait), in a narrow face. */
        body.rack { height: 100vh; overflow: hidden; }
        .rack main { padding: 1.5vh 2vw; height: 100vh; display: flex; flex-direction: column; gap: 1vh; }
        .rack-station { flex: 1; min-height: 0; display: grid; gap: 1vh 3vw; grid-template-columns: 3fr 2fr; grid-template-rows: auto 1fr;
          grid-template-areas: "head head" "now set"; overflow: hidden; border: 6px solid transparent; border-radius: 18px; padding: 1vh 1.5vw; background: var(--card); }
        @media (orientation: portrait) { .rack-station { grid-template-columns: 1fr; grid-template-rows: auto auto 1fr; grid-template-areas: "head" "now" "set"; } }
        .rack-head { grid-area: head; display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: baseline; font-size: max(20px, 3.2vh); }
        .rack-head .rack-name { font-weight: 800; } .rack-head .athlete { font-weight: 700; } .rack-head .what { color: var(--muted); }
        .rack-head .link { margin-left: auto; font-size: max(14px, 1.8vh); }
        .rack-now { grid-area: now; display: flex; flex-direction: column; justify-content: center; min-width: 0; }
        .rack-mv { font-weight: 800; line-height: 1; font-variant-numeric: tabular-nums; white-space: nowrap; }
        .rack-mv .mv { font-size: min(30vh, 50vw); line-height: 1; display: inline-block; letter-spacing: -0.02em;
          font-family: "Liberation Sans Narrow", "Arial Narrow", "Roboto Condensed", "DejaVu Sans Condensed", system-ui, sans-serif; font-stretch: condensed; }
        .rack-mv .unit { font-size: max(20px, 4vh); color: var(--muted); margin-left: 0.3em; }
        .rack-station[data-zone="max-strength"] .mv { color: var(--max-strength); } .rack-station[data-zone="strength"] .mv { color: var(--strength); }
        .rack-station[data-zone="strength-speed"] .mv { color: var(--strength-speed); } .rack-station[data-zone="speed"] .mv { color: var(--speed); }
        .rack-station[data-zone="max-speed"] .mv { color: var(--max-speed); }
        .rack-band { font-size: max(22px, 4.5vh); font-weight: 700; }
        .rack-band .band { padding: 0.05em 0.4em; border-radius: 0.3em; }
        .rack-band .band:empty { display: none; }
        .rack-station[data-band="in"] .band { background: var(--ok); color: #000; } .rack-station[data-band="in"] .band::before { content: "● "; }
        .rack-station[data-band="above"] .band { background: var(--strength); color: #fff; } .rack-station[data-band="above"] .band::before { content: "▲ "; }
        .rack-station[data-band="below"] .band { background: var(--warn); color: #000; } .rack-station[data-band="below"] .band::before { content: "▼ "; }
        .rack-station[data-band="in"] { border-color: var(--ok); } .rack-station[data-band="below"] { border-color: var(--warn); }
        .rack-band .target { color: var(--muted); font-weight: 400; }
        .rack-rep { font-size: max(24px, 6vh); font-weight: 700; font-variant-numeric: tabular-nums; }
        .rack-stop, .rack-posture { font-size: max(24px, 5vh); font-weight: 800; border-radius: 12px; }
        .rack-stop:not(:empty) { background: var(--bad); color: #000; padding: 0.15em 0.5em; }
        .rack-posture:not(:empty) { background: var(--warn); color: #000; padding: 0.15em 0.5em; margin-top: 0.5vh; }
        .rack-station.vl-stopped { border-color: var(--bad); }
        .rack-set { grid-area: set; display: flex; flex-direction: column; gap: 1vh; min-height: 0; font-size: max(18px, 3vh); font-variant-numeric: tabular-nums; }
        .rack-set .rack-bars { max-width: none; flex: 1 1 auto; min-height: 0; }
        .rack-set .bars-chart text { font-size: 22px; } .rack-set .bars-chart .threshold-label { font-size: 20px; }
        .rack-set .loss, .rack-set .rest, .rack-set .posture, .rack-head .counts { font-size: inherit; }
        .rack-set .rest .rest-s { font-size: max(28px, 7vh); font-weight: 800; }
        .rack-set .summary { font-size: max(18px, 2.8vh); margin: 0; }
        .rack-sound { display: flex; gap: 2vw; align-items: center; font-size: max(14px, 1.8vh); color: var(--muted); }
        .rack-sound input[type="range"] { width: 12em; }
        .rack-set .rest .unit { font-size: 0.6em; }
        @media (orientation: portrait) {
          .rack-mv .mv { font-size: min(27vh, 50vw); }
          .rack-band .target { font-size: 0.6em; white-space: nowrap; }
          .rack-set { display: grid; grid-template-columns: 1fr 1fr; align-content: start; align-items: baseline; }
          .rack-set .rack-bars { grid-column: 1 / -1; height: 15vh; min-height: 0; }
          .rack-stop, .rack-posture { font-size: 3.6vh; }
          .rack-set { font-size: 2.6vh; }
          .rack-set .summary { font-size: 2.3vh; }
          .rack-set .loss { white-space: nowrap; }
          .rack-set .summary { grid-column: 1 / -1; }
          .rack-set .posture { display: none; }
        }
        /* The athlete's own page: the rack's view of her station at the top, sized for a phone. */
        .athlete-now .now { margin-bottom: 16px; }
        .athlete-now .rack-station { min-height: 0; }
        .athlete-now .rack-mv .mv { font-size: min(18vh, 30vw); }
        .athlete-now .rack-set .rack-bars { height: 160px; flex: none; }
        .athlete-now .rack-sound { margin-top: 8px; flex-wrap: wrap; }
        .unpaired .rack-station { opacity: 0.25; }
        .unpaired-note { font-size: 4vh; }
        """#
}
