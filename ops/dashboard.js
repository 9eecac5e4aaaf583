// The citizen ops dashboard (served at /ops/dashboard.js for /ops). No
// network beyond this server's /v1/ops API: charts are drawn here as SVG.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";

  // --- helpers ---
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
    return tr;
  }
  function td(text, cls) { return el("td", text, cls); }
  const fmt = (x) => (typeof x === "number" ? (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) < 0.0005 ? "0.000" : x.toFixed(3)) : (x === undefined || x === null ? "" : String(x)));
  const pct = (x) => (typeof x === "number" ? (100 * x).toFixed(1) + "%" : "—");
  const signed = (x) => (x > 0 ? "+" : x < 0 ? "−" : "") + Math.abs(x).toFixed(2);
  function when(t) {
    if (!t) return "";
    const d = new Date(t);
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })
      : d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  }
  function note(id, text, isErr) { const n = $(id); n.textContent = text || ""; n.className = "note" + (isErr ? " err" : ""); }
  function message(text, isErr) { const m = $("msg"); m.textContent = text || ""; m.className = isErr ? "err" : ""; }

  // --- the API key: asked once per tab, kept in sessionStorage ---
  const KEY = "citizen-ops-key", NOKEY = "\u0000none";
  let apiKey = sessionStorage.getItem(KEY); // null: not chosen yet
  let started = false;
  const dialog = $("key-dialog");
  document.body.dataset.keyPrompts = "0";
  function askKey(why) {
    $("key-error").textContent = why || "";
    if (dialog.open) return;
    document.body.dataset.keyPrompts = String(Number(document.body.dataset.keyPrompts) + 1);
    $("key").value = "";
    dialog.showModal();
    $("key").focus();
  }
  $("key-form").addEventListener("submit", (ev) => {
    const none = ev.submitter && ev.submitter.value === "none";
    const k = $("key").value.trim();
    if (!none && !k) { ev.preventDefault(); $("key-error").textContent = "Type a key, or choose No key for a server without authentication."; return; }
    apiKey = none ? NOKEY : k;
    sessionStorage.setItem(KEY, apiKey);
    showWho();
    start();
  });
  dialog.addEventListener("cancel", (ev) => { if (apiKey === null) ev.preventDefault(); });
  $("change-key").addEventListener("click", () => askKey(""));
  function showWho() { $("who").textContent = apiKey === null ? "" : apiKey === NOKEY ? "no key" : "key …" + apiKey.slice(-4); }
  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    if (apiKey && apiKey !== NOKEY) h["Authorization"] = "Bearer " + apiKey;
    return h;
  }
  class APIError extends Error { constructor(status, msg) { super(msg); this.status = status; } }
  // api fetches a JSON endpoint; a 401 asks for the key again.
  async function api(path, opts) {
    opts = opts || {};
    const r = await fetch(path, Object.assign({}, opts, { headers: authHeaders(opts.headers), cache: "no-store" }));
    let body = null;
    try { body = await r.json(); } catch (_) { /* not JSON */ }
    if (!r.ok) {
      const msg = (body && body.error && body.error.message) || r.statusText;
      if (r.status === 401) askKey("The server refused the key: " + msg);
      throw new APIError(r.status, msg);
    }
    return body;
  }
  // panelError shows why a panel is empty: muted when the key or the
  // process cannot serve it, red otherwise.
  function panelError(id, e) {
    if (e.status === 401) note(id, "waiting for a valid key");
    else if (e.status === 403) note(id, "needs an operator key");
    else if (e.status === 503 || e.status === 404) note(id, "not served by this process: " + e.message);
    else note(id, e.message, true);
  }

  // --- rollout state and versions ---
  let refreshing = false, again = false;
  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      const body = await api("/v1/ops/versions");
      renderRollout(body.rollout);
      renderVersions(body.versions || []);
      if (/^(state: |The rollout needs)/.test($("msg").textContent)) message("");
    } catch (e) {
      if (e.status === 403) message("The rollout needs an operator key."); else if (e.status !== 401) message("state: " + e.message, true);
      for (const id of ["pause", "resume", "promote", "abort"]) $(id).disabled = true;
    } finally {
      refreshing = false;
      if (again) { again = false; setTimeout(refresh, 0); }
    }
  }
  function evidenceRows(tbody, e) {
    const c = e.counts || {};
    const count = (arm) => String(c[arm] || 0) + (c[arm + ".step"] !== undefined ? " (step " + c[arm + ".step"] + ")" : "");
    if (c["candidate"] !== undefined) tbody.appendChild(row(["evaluations", td(count("candidate"), "num"), td(count("stable"), "num"), td("")]));
    const m = e.means || {}, iv = e.intervals || {};
    for (const n of Object.keys(m).filter((k) => k.endsWith(".candidate")).map((k) => k.slice(0, -10))) {
      const d = m[n + ".diff"];
      tbody.appendChild(row([n, td(fmt(m[n + ".candidate"]), "num"), td(fmt(m[n + ".stable"]), "num"),
        td(d === undefined ? "" : fmt(d) + " [" + fmt(iv[n + ".lo"]) + ", " + fmt(iv[n + ".hi"]) + "]", "num")]));
    }
  }
  function renderRollout(st) {
    const kv = $("rollout-kv");
    kv.replaceChildren();
    kv.appendChild(row(["stable", st.stable || "(none)"]));
    const a = st.active;
    if (a) {
      kv.appendChild(row(["candidate", a.candidate]));
      kv.appendChild(row(["step", (a.step + 1) + " of " + st.steps.length + " — " + (100 * a.weight).toFixed(0) + "% of traffic"]));
      kv.appendChild(row(["state", a.paused ? "paused" : "running"]));
      kv.appendChild(row(["rollout", a.rollout_id]));
    } else {
      kv.appendChild(row(["state", "no rollout running"]));
    }
    kv.appendChild(row(["waiting", (st.waiting || []).join(", ") || "—"]));
    $("pause").disabled = !a || a.paused;
    $("resume").disabled = !a || !a.paused;
    $("promote").disabled = !a;
    $("abort").disabled = !a;
    const ev = $("evidence");
    ev.replaceChildren();
    const e = a && a.evidence;
    $("test").textContent = e ? e.test || "" : "";
    if (e) evidenceRows(ev, e);
    const h = $("history");
    h.replaceChildren();
    for (const f of (st.history || []).slice(0, 10)) h.appendChild(row([f.candidate, f.outcome, f.actor, f.reason]));
  }
  function renderVersions(vs) {
    const t = $("versions");
    t.replaceChildren();
    for (const v of vs.slice().reverse()) {
      t.appendChild(row([v.version, v.parent, v.status, v.trained_at ? when(v.trained_at) : ""]));
    }
  }
  for (const b of document.querySelectorAll("button[data-action]")) {
    b.addEventListener("click", async () => {
      const action = b.dataset.action;
      if ((action === "promote" || action === "abort") && !window.confirm(action + " the running rollout?")) return;
      b.disabled = true;
      try {
        const body = await api("/v1/ops/rollout/" + action, {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ reason: $("reason").value }),
        });
        message(action + ": done (position " + body.event.position + ")");
        renderRollout(body.status);
      } catch (e) {
        message(action + ": " + e.message, true);
      }
      refresh();
    });
  }

  // --- colours: one per version, the same in every chart and table ---
  const palette = ["#2f5fd0", "#d9822b", "#1f8a4c", "#b03a8c", "#6b4fd0", "#0f8b8d", "#c0392b", "#7a6a1f"];
  const colours = new Map();
  function colour(version) {
    if (!colours.has(version)) colours.set(version, palette[colours.size % palette.length]);
    return colours.get(version);
  }

  // interval draws [lo, hi] with the mean on a [min, max] scale.
  function interval(mean, lo, hi, min, max, c) {
    const W = 150, x = (v) => 4 + (W - 8) * (Math.min(max, Math.max(min, v)) - min) / (max - min);
    const s = svg("svg", { width: W, height: 12, class: "ivl" });
    s.appendChild(svg("line", { x1: 4, x2: W - 4, y1: 6, y2: 6, stroke: "#e3e6eb" }));
    s.appendChild(svg("line", { x1: x(lo), x2: x(hi), y1: 6, y2: 6, stroke: c, "stroke-width": 3, "stroke-linecap": "round" }));
    s.appendChild(svg("circle", { cx: x(mean), cy: 6, r: 3, fill: "#fff", stroke: c, "stroke-width": 1.5 }));
    return s;
  }

  // --- scoreboard and charts: /v1/ops/scoreboard and /v1/ops/series ---
  async function loadScores() {
    let series = null;
    try {
      series = await api("/v1/ops/series");
      renderCharts(series);
      note("charts-note", series.series.length ? "" : "no evaluations yet");
    } catch (e) { panelError("charts-note", e); }
    const totals = new Map();
    for (const s of (series && series.series) || []) totals.set(s.task_type + "\u0000" + s.version, s.total);
    let rows = null;
    try {
      rows = (await api("/v1/ops/scoreboard")).rows || [];
      note("scoreboard-note", rows.length ? "" : "no evaluations yet");
    } catch (e) {
      if (e.status !== 403 || !series) { panelError("scoreboard-note", e); return; }
      // a tenant's key: its own evaluations from the series
      rows = series.series.map((s) => ({ task_type: s.task_type, version: s.version, count: s.total.n, mean_reward: s.total.reward, reward_ci95: s.total.reward_ci95 }));
      note("scoreboard-note", "this tenant's evaluations (an operator key adds feedback, fault and drop rates)");
    }
    const t = $("scoreboard");
    t.replaceChildren();
    for (const r of rows) {
      const tot = totals.get(r.task_type + "\u0000" + r.version);
      const c = colour(r.version);
      const tr = row([r.task_type || "(none)", r.version, td(r.count, "num"),
        td(fmt(r.mean_reward) + " [" + fmt(r.mean_reward - r.reward_ci95) + ", " + fmt(r.mean_reward + r.reward_ci95) + "]", "num"),
        (() => { const d = el("td"); d.appendChild(interval(r.mean_reward, r.mean_reward - r.reward_ci95, r.mean_reward + r.reward_ci95, -1, 1, c)); return d; })(),
        td(tot && tot.accuracy !== null ? pct(tot.accuracy) + " [" + pct(tot.accuracy_lo) + ", " + pct(tot.accuracy_hi) + "] of " + tot.judged : "—", "num"),
        (() => { const d = el("td"); if (tot && tot.accuracy !== null) d.appendChild(interval(tot.accuracy, tot.accuracy_lo, tot.accuracy_hi, 0, 1, c)); return d; })(),
        td(r.feedback_count ? signed(r.feedback_polarity) + " (" + r.feedback_count + ")" : r.feedback_count === 0 ? "—" : "", "num"),
        td(r.fault_rate !== undefined ? pct(r.fault_rate) : "", "num"), td(r.drop_rate !== undefined ? pct(r.drop_rate) : "", "num")]);
      tr.dataset.type = r.task_type;
      tr.dataset.version = r.version;
      t.appendChild(tr);
    }
  }

  // niceStep is the smallest of 1, 2, 2.5 or 5 times a power of ten that
  // cuts span into at most n parts.
  function niceStep(span, n) {
    const p = Math.pow(10, Math.floor(Math.log10(span / n)));
    for (const m of [1, 2, 2.5, 5, 10]) if (span / (m * p) <= n) return m * p;
    return 10 * p;
  }
  const minuteSteps = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080];

  // chart draws one line per series with its interval as a band. points:
  // {t: ms, y, lo, hi, tip}; domain [min, max] of y, ticks every ystep.
  function chart(title, list, domain, ystep, yfmt) {
    const W = 560, H = 200, m = { l: 46, r: 12, t: 18, b: 24 };
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img", "aria-label": title });
    s.dataset.title = title;
    let t0 = Infinity, t1 = -Infinity;
    for (const l of list) for (const p of l.points) { t0 = Math.min(t0, p.t); t1 = Math.max(t1, p.t); }
    if (!isFinite(t0)) { s.appendChild(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data")); return s; }
    if (t0 === t1) { t0 -= 30 * 60e3; t1 += 30 * 60e3; }
    const [y0, y1] = domain;
    const X = (t) => m.l + (W - m.l - m.r) * (t - t0) / (t1 - t0);
    const Y = (v) => m.t + (H - m.t - m.b) * (1 - (Math.min(y1, Math.max(y0, v)) - y0) / (y1 - y0));
    s.appendChild(svg("text", { x: m.l, y: 12, "font-weight": 600 }, title));
    for (let i = 0, v = y0; v <= y1 + 1e-9; i++, v = y0 + i * ystep) {
      const y = Y(v);
      s.appendChild(svg("line", { x1: m.l, x2: W - m.r, y1: y, y2: y, class: i ? "grid" : "axis" }));
      s.appendChild(svg("text", { x: m.l - 6, y: y + 4, "text-anchor": "end" }, yfmt(v)));
    }
    // time ticks on round local times, at most six
    const step = 60e3 * (minuteSteps.find((mn) => (t1 - t0) / (60e3 * mn) <= 6) || 10080);
    const off = -new Date(t0).getTimezoneOffset() * 60e3;
    const long = t1 - t0 > 36 * 3600e3;
    for (let t = Math.ceil((t0 + off) / step) * step - off; t <= t1; t += step) {
      const d = new Date(t);
      const label = long ? d.toLocaleDateString([], { month: "short", day: "numeric" }) : d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
      s.appendChild(svg("line", { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4, class: "axis" }));
      s.appendChild(svg("text", { x: Math.min(W - m.r - 14, Math.max(m.l + 14, X(t))), y: H - 6, "text-anchor": "middle" }, label));
    }
    for (const l of list) {
      const g = svg("g", { class: "series" });
      g.dataset.series = l.name;
      const pts = l.points;
      if (pts.length > 1) {
        const band = pts.map((p) => X(p.t) + "," + Y(p.hi)).concat(pts.slice().reverse().map((p) => X(p.t) + "," + Y(p.lo)));
        g.appendChild(svg("polygon", { points: band.join(" "), fill: l.colour, "fill-opacity": 0.12, stroke: "none" }));
        g.appendChild(svg("polyline", { points: pts.map((p) => X(p.t) + "," + Y(p.y)).join(" "), fill: "none", stroke: l.colour, "stroke-width": 2 }));
      }
      for (const p of pts) {
        const c = svg("circle", { cx: X(p.t), cy: Y(p.y), r: 3, fill: l.colour });
        c.dataset.y = String(p.y);
        c.appendChild(svg("title", {}, p.tip));
        g.appendChild(c);
      }
      s.appendChild(g);
    }
    return s;
  }
  function renderCharts(res) {
    const box = $("charts");
    box.replaceChildren();
    const mins = res.bucket_seconds / 60;
    $("charts-sub").textContent = "per task type and version; " + (mins >= 60 ? mins / 60 + " h" : mins + " min") + " buckets, shaded: 95% interval";
    const types = [...new Set(res.series.map((s) => s.task_type))];
    for (const type of types) {
      const ss = res.series.filter((s) => s.task_type === type);
      const head = el("div", null, "type");
      head.dataset.type = type;
      head.appendChild(el("h3", type || "(no type)"));
      const legend = el("div", null, "legend");
      for (const s of ss) {
        const item = el("span");
        const sw = el("i");
        sw.style.background = colour(s.version);
        item.append(sw, s.version + " (n=" + s.total.n + ")");
        legend.appendChild(item);
      }
      head.appendChild(legend);
      box.appendChild(head);
      const reward = ss.map((s) => ({ name: type + " " + s.version, colour: colour(s.version), points: s.points.map((p) => ({
        t: Date.parse(p.t), y: p.reward, lo: p.reward - p.reward_ci95, hi: p.reward + p.reward_ci95,
        tip: s.version + " " + when(p.t) + ": reward " + fmt(p.reward) + " ± " + fmt(p.reward_ci95) + " (n=" + p.n + ")" })) }));
      let lo = Infinity, hi = -Infinity;
      for (const l of reward) for (const p of l.points) { lo = Math.min(lo, p.lo); hi = Math.max(hi, p.hi); }
      if (!isFinite(lo)) { lo = 0; hi = 1; }
      const ystep = niceStep(Math.max(hi - lo, 0.2), 5);
      const dom = [Math.max(-1, Math.floor(lo / ystep) * ystep), Math.min(1, Math.ceil(hi / ystep) * ystep)];
      const acc = ss.map((s) => ({ name: type + " " + s.version, colour: colour(s.version), points: s.points.filter((p) => p.accuracy !== null).map((p) => ({
        t: Date.parse(p.t), y: p.accuracy, lo: p.accuracy_lo, hi: p.accuracy_hi,
        tip: s.version + " " + when(p.t) + ": accuracy " + pct(p.accuracy) + " (" + p.correct + " of " + p.judged + ")" })) }));
      const rc = chart("mean reward", reward, dom, ystep, (v) => v.toFixed(ystep < 0.1 ? 2 : 1));
      rc.dataset.type = type; rc.dataset.metric = "reward";
      const ac = chart("accuracy", acc, [0, 1], 0.25, (v) => (100 * v).toFixed(0) + "%");
      ac.dataset.type = type; ac.dataset.metric = "accuracy";
      box.append(rc, ac);
    }
  }

  // --- the event panels: /v1/ops/recent, then the live stream ---
  const shownIn = { timeline: new Set(), feedback: new Set(), anomalies: new Set() };
  const panelOf = (type) => (type.startsWith("rollout.") ? "timeline" : type === "feedback.interpreted" ? "feedback" : type === "anomaly.detected" ? "anomalies" : "");
  const render = { timeline: timelineItem, feedback: feedbackItem, anomalies: anomalyItem };
  function addToPanel(ev, atTop) {
    const p = panelOf(ev.type);
    if (!p || shownIn[p].has(ev.position)) return;
    shownIn[p].add(ev.position);
    const list = $(p), li = render[p](ev);
    li.dataset.type = ev.type;
    li.dataset.position = ev.position;
    // newest first, whatever the arrival order
    let before = null;
    for (const x of list.children) { if (Number(x.dataset.position) < ev.position) { before = x; break; } }
    if (!atTop && !before) list.appendChild(li); else list.insertBefore(li, before);
    while (list.childElementCount > 200) list.removeChild(list.lastChild);
    note(p + "-note", "");
  }
  function line(...parts) {
    const d = el("div", null, "line");
    for (const p of parts) if (p !== null && p !== undefined && p !== "") d.append(p instanceof Node ? p : document.createTextNode(p));
    return d;
  }
  function timelineItem(ev) {
    const d = ev.data || {}, li = el("li");
    const name = ev.type.slice(8).replace("_", " ");
    li.appendChild(line(el("span", when(ev.time), "when"), el("span", name, "badge " + ev.type.replace(".", "-")),
      el("strong", d.candidate), el("span", "vs " + d.stable), el("span", "· step " + (d.step + 1) + " · " + (100 * d.weight).toFixed(0) + "% of traffic"),
      d.actor ? el("span", "by " + d.actor, "muted") : ""));
    if (d.reason) li.appendChild(el("div", d.reason, "evidence reason"));
    const e = d.evidence;
    if (e) {
      const box = el("div", null, "evidence");
      if (e.test) box.appendChild(el("div", e.test, "detail"));
      const t = el("table"), tb = el("tbody");
      evidenceRows(tb, e);
      if (tb.childElementCount) {
        const hd = el("thead");
        hd.appendChild(row([el("th", "metric"), el("th", "candidate", "num"), el("th", "stable", "num"), el("th", "difference [interval]", "num")]));
        t.append(hd, tb);
        box.appendChild(t);
      }
      if (e.detail) box.appendChild(el("div", e.detail, "detail"));
      li.appendChild(box);
    }
    return li;
  }
  function meter(x) { const m = el("span", null, "meter"), b = el("span"); b.style.width = (100 * Math.max(0, Math.min(1, x))) + "%"; m.appendChild(b); return m; }
  function feedbackItem(ev) {
    const d = ev.data || {}, li = el("li");
    li.appendChild(line(el("span", when(ev.time), "when"), el("strong", signed(d.polarity), "polarity " + (d.polarity > 0 ? "pos" : d.polarity < 0 ? "neg" : "muted")),
      el("span", "confidence", "muted"), meter(d.confidence), el("span", fmt(d.confidence), "confidence"),
      ...(d.aspects || []).map((a) => el("span", a, "chip")), d.uncertain ? el("span", "uncertain", "badge rollout-paused") : ""));
    li.appendChild(el("div", [ev.tenant, d.interaction_id, "strength " + fmt(d.strength), d.interpreter_version].filter(Boolean).join(" · "), "evidence detail"));
    if (d.correction) li.appendChild(el("div", "correction: " + d.correction, "evidence"));
    if (d.hint) li.appendChild(el("div", "hint: " + d.hint, "evidence"));
    if (d.agreement) {
      const a = d.agreement;
      li.appendChild(el("div", "agreement " + pct(a.share) + " of " + a.votes + " votes with " + a.reference, "evidence detail"));
    }
    return li;
  }
  function anomalyItem(ev) {
    const d = ev.data || {}, li = el("li");
    li.appendChild(line(el("span", when(ev.time), "when"), el("span", d.kind, "badge rollout-rolled_back"), el("strong", d.version),
      d.task_type ? el("span", d.task_type, "chip") : "", "value " + fmt(d.value) + " vs baseline " + fmt(d.baseline),
      el("span", "over " + d.window + " evaluations", "muted")));
    const e = d.evidence || {};
    const parts = [];
    if (e.stable !== undefined) parts.push(e.compared_with_stable ? "compared with stable " + e.stable : "against its own history");
    if (e.last_interaction) parts.push("last interaction " + e.last_interaction);
    if (parts.length) li.appendChild(el("div", parts.join(" · "), "evidence detail"));
    return li;
  }
  async function loadRecent() {
    for (const [type, p] of [["rollout", "timeline"], ["feedback.interpreted", "feedback"], ["anomaly.detected", "anomalies"]]) {
      try {
        const body = await api("/v1/ops/recent?limit=50&type=" + type);
        for (const ev of body.data) addToPanel(ev, false);
        if (!$(p).childElementCount) note(p + "-note", "nothing recorded yet");
      } catch (e) { panelError(p + "-note", e); }
    }
  }

  // --- failure modes: /v1/ops/failure-modes ---
  async function loadFailures() {
    try {
      const modes = (await api("/v1/ops/failure-modes")).data || [];
      const t = $("failures");
      t.replaceChildren();
      for (const f of modes) {
        const ex = (f.representatives || [])[0];
        const aspects = Object.entries(f.aspects || {}).sort((a, b) => b[1] - a[1]).slice(0, 3).map(([k, v]) => k + " " + v).join(", ");
        const exCell = el("td");
        if (ex) { exCell.appendChild(el("div", "“" + ex.prompt + "”")); exCell.appendChild(el("div", "→ " + ex.answer, "muted")); }
        if ((f.corrections || []).length) exCell.appendChild(el("div", "corrected to: " + f.corrections.join("; "), "muted"));
        const tr = row([f.type || "(none)", td(f.size, "num"), td((f.trend === "rising" ? "↑ " : f.trend === "falling" ? "↓ " : "→ ") + f.trend, "nowrap"),
          td(fmt(f.mean_reward), "num"), td(aspects, "nowrap"), exCell]);
        tr.dataset.type = f.type;
        t.appendChild(tr);
      }
      note("failures-note", modes.length ? "" : "no failure modes");
    } catch (e) { panelError("failures-note", e); }
  }

  // --- lessons: /v1/ops/lessons, approve and retire ---
  async function loadLessons() {
    try {
      const st = $("lesson-state").value;
      const ls = (await api("/v1/ops/lessons" + (st ? "?state=" + st : ""))).data || [];
      ls.sort((a, b) => (b.position || 0) - (a.position || 0));
      const t = $("lessons");
      t.replaceChildren();
      for (const l of ls) t.appendChild(lessonRow(l));
      note("lessons-note", ls.length ? "" : "no lessons");
    } catch (e) { panelError("lessons-note", e); }
  }
  function lessonRow(l) {
    const sc = l.scope || {};
    const scope = [sc.tenant, sc.task_type, sc.user ? "user " + sc.user : ""].filter(Boolean).join(" · ");
    const stateCell = el("td");
    stateCell.appendChild(el("span", l.state, "badge " + l.state));
    const actions = el("td");
    const approve = el("button", "Approve", "small primary");
    approve.dataset.lessonAction = "approve";
    approve.disabled = l.state !== "proposed";
    const retire = el("button", "Retire", "small danger");
    retire.dataset.lessonAction = "retire";
    retire.disabled = l.state === "retired" || l.state === "superseded";
    approve.addEventListener("click", () => lessonAction(l, "approve", approve));
    // retiring cannot be undone: a second click within 5 s confirms it
    retire.addEventListener("click", () => {
      if (retire.dataset.armed !== "1") {
        retire.dataset.armed = "1";
        retire.textContent = "Confirm retire";
        setTimeout(() => { retire.dataset.armed = ""; retire.textContent = "Retire"; }, 5000);
        return;
      }
      lessonAction(l, "retire", retire);
    });
    actions.append(approve, " ", retire);
    const tr = row([l.statement, l.kind, scope, stateCell, td(l.users || 0, "num"), el("td", l.rule || l.reason || "", "muted"), when(l.updated_at), actions]);
    tr.dataset.lesson = l.lesson_id;
    tr.dataset.state = l.state;
    return tr;
  }
  async function lessonAction(l, action, button) {
    button.disabled = true;
    try {
      await api("/v1/ops/lessons/" + encodeURIComponent(l.lesson_id) + "/" + action, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ reason: $("lesson-reason").value }),
      });
      note("lessons-note", action + "d: " + l.statement);
    } catch (e) {
      note("lessons-note", action + ": " + e.message, e.status !== 401);
    }
    // the lessons view follows the store: give it a moment
    setTimeout(loadLessons, 300);
  }
  $("lesson-state").addEventListener("change", loadLessons);

  // --- live stream: SSE over fetch (EventSource cannot send headers) ---
  let lastId = "", controller = null, shown = 0;
  function streamURL() {
    const q = new URLSearchParams();
    for (const [id, name] of [["f-type", "type"], ["f-version", "version"], ["f-tenant", "tenant"]]) {
      if ($(id).value.trim()) q.set(name, $(id).value.trim());
    }
    if (!lastId) q.set("backlog", "2000");
    return "/v1/ops/stream?" + q.toString();
  }
  function summary(ev) {
    const d = ev.data || {};
    switch (ev.type) {
      case "interaction.evaluated":
        return (d.model_version || "") + " " + (d.task_type || "") + " reward=" + fmt(d.reward) + " len=" + d.answer_length + " tools=" + d.tool_calls + (d.outcome ? " outcome=" + d.outcome : "") +
          (d.checks || []).filter(c => c.score < 1).map(c => " check failed: " + c.name).join("");
      case "feedback.interpreted":
        return "polarity=" + fmt(d.polarity) + " " + (d.aspects || []).join(",") + (d.hint ? " hint: " + d.hint : "");
      case "anomaly.detected":
        return d.version + " " + d.kind + " " + (d.task_type || "") + " value=" + fmt(d.value) + " baseline=" + fmt(d.baseline);
      case "weights.trained":
        return d.version + " ← " + d.parent + (d.accepted ? " accepted" : " rejected" + (d.reason ? ": " + d.reason : ""));
      default:
        if (ev.type.startsWith("rollout.")) {
          return d.candidate + " vs " + d.stable + " step " + d.step + " weight " + fmt(d.weight) + " by " + (d.actor || "") + (d.reason ? ": " + d.reason : "");
        }
        return JSON.stringify(d).slice(0, 200);
    }
  }
  let scoresTimer = null;
  function show(ev) {
    const list = $("events");
    const li = el("li", null, "event");
    li.dataset.type = ev.type;
    li.appendChild(el("span", ev.position, "pos"));
    const fam = ev.type.split(".")[0];
    li.appendChild(el("span", ev.type, "t-" + fam));
    li.appendChild(el("span", summary(ev)));
    list.insertBefore(li, list.firstChild);
    while (list.childElementCount > 300) list.removeChild(list.lastChild);
    shown++;
    $("count").textContent = shown + " events";
    addToPanel(ev, true);
    if (fam === "rollout" || fam === "weights") refresh();
    if (fam === "interaction" && !scoresTimer) scoresTimer = setTimeout(() => { scoresTimer = null; loadScores(); }, 2000);
  }
  function status(live, text) { const c = $("conn"); c.className = live ? "live" : "down"; c.textContent = text; }
  async function connect() {
    if (controller) controller.abort();
    const mine = new AbortController();
    controller = mine;
    const h = authHeaders({ Accept: "text/event-stream" });
    if (lastId) h["Last-Event-ID"] = lastId;
    try {
      const r = await fetch(streamURL(), { headers: h, signal: mine.signal, cache: "no-store" });
      if (!r.ok) {
        let m = r.statusText;
        try { const b = await r.json(); m = (b.error && b.error.message) || m; } catch (_) { /* not JSON */ }
        if (r.status === 401) { askKey("The server refused the key: " + m); status(false, "waiting for a key"); return; }
        throw new Error(r.status + " " + m);
      }
      status(true, "live");
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let id = "", data = "";
          for (const ln of block.split("\n")) {
            if (ln.startsWith("id:")) id = ln.slice(3).trim();
            else if (ln.startsWith("data:")) data += ln.slice(5).trim();
          }
          if (id) lastId = id;
          if (data) { try { show(JSON.parse(data)); } catch (e) { console.error(e); } }
        }
      }
      throw new Error("stream ended");
    } catch (e) {
      if (mine.signal.aborted) return;
      status(false, "reconnecting: " + e.message);
      setTimeout(() => { if (controller === mine) connect(); }, 2000);
    }
  }
  $("f-apply").addEventListener("click", () => { lastId = ""; $("events").replaceChildren(); shown = 0; connect(); });

  // start loads every panel; called again after a new key.
  function start() {
    lastId = "";
    $("events").replaceChildren();
    shown = 0;
    for (const p in shownIn) { shownIn[p].clear(); $(p).replaceChildren(); }
    refresh();
    loadScores();
    loadRecent();
    loadFailures();
    loadLessons();
    connect();
    if (!started) {
      started = true;
      setInterval(() => { loadScores(); loadFailures(); loadLessons(); }, 30000);
    }
  }
  showWho();
  if (apiKey === null) askKey(""); else start();
})();
