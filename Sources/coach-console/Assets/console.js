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
