// The acp-conductor trace viewer: draws a trace (one event per message, in
// the Rust conductor's .jsons shape) as a sequence diagram, one lifeline per
// component and one arrow per message. Only the rows in view are in the
// page, so a trace of 100,000 events scrolls as easily as one of ten.
"use strict";
(function () {
  const ROW = 24, LANE = 180, GUTTER = 84, OVERSCAN = 20;
  const $ = (id) => document.getElementById(id);
  const scroller = $("scroller"), canvas = $("canvas"), rows = $("rows"), heads = $("heads");
  const lifelines = $("lifelines"), status = $("status"), sessionSel = $("session"), methodIn = $("method");
  const connSel = $("connection");

  const events = [];       // every event, in order, as entry makes it
  const lanes = [];        // component names, in the order they are drawn
  const laneOf = new Map();
  const sessions = new Set(), methods = new Set(), connections = new Set();
  let shown = [];          // indices into events that pass the filters
  let selected = -1;
  let hiddenNote = ""; // says why a selection the filters hide was dropped
  let filter = { connection: "", session: "", method: "" };

  function lane(name) {
    if (!laneOf.has(name)) {
      laneOf.set(name, lanes.length);
      lanes.push(name);
      lanesChanged = true;
    }
    return laneOf.get(name);
  }
  let lanesChanged = true;

  // A trace holds whatever agents, proxies and editors sent, and may have
  // been edited by hand: any member of an event may be missing or of any
  // type. json writes a value as JSON.stringify does (indented by step
  // spaces a level, or compact), but without recursion: the relay passes
  // on values nested up to 10,000 deep, and JSON.stringify overflows the
  // stack at a few thousand. Indentation stops growing past 32 levels.
  function json(v, step) {
    const out = [], stack = [];
    const nl = (depth) => (step ? "\n" + " ".repeat(Math.min(depth, 32) * step) : "");
    const open = (v, depth) => {
      if (v === null || typeof v !== "object") {
        out.push(JSON.stringify(v) ?? "null");
        return;
      }
      const array = Array.isArray(v), keys = array ? null : Object.keys(v);
      const n = array ? v.length : keys.length;
      if (n === 0) { out.push(array ? "[]" : "{}"); return; }
      out.push(array ? "[" : "{");
      stack.push({ v, keys, n, i: 0, depth });
    };
    open(v, 0);
    while (stack.length) {
      const f = stack[stack.length - 1];
      if (f.i === f.n) {
        stack.pop();
        out.push(nl(f.depth) + (f.keys ? "}" : "]"));
        continue;
      }
      out.push((f.i > 0 ? "," : "") + nl(f.depth + 1));
      const k = f.keys ? f.keys[f.i] : f.i;
      f.i++;
      if (f.keys) out.push(JSON.stringify(k) + (step ? ": " : ":"));
      open(f.v[k], f.depth + 1);
    }
    return out.join("");
  }

  // text is a member as the page shows it: a string as it is, nothing as
  // "", anything else as its JSON (String() would throw on an object whose
  // toString is no function).
  const text = (v) => (typeof v === "string" ? v : v === undefined || v === null ? "" : json(v, 0));
  const KINDS = new Set(["request", "response", "notification"]);

  // entry is what the viewer keeps of an event: its members as text, the
  // kind it draws it as, and the event itself, for the detail.
  // A "trace" event is no message but a line about the trace: in the Rust
  // conductor's format a component's log line, in ours a gap, where the
  // recorder left messages out (fields.dropped). It is drawn across the
  // lanes, whatever the filters: a gap may have held any session's.
  function entry(ev) {
    if (ev.type === "trace") {
      const f = ev.fields && typeof ev.fields === "object" ? ev.fields : {};
      const lost = typeof f.dropped === "number" ? f.dropped : 0;
      return {
        ev, type: "trace", kind: lost ? "gap" : "log", lost, from: text(ev.component), to: "",
        method: text(ev.message), protocol: "", session: "", connection: text(ev.connection), id: "",
        ts: typeof ev.ts === "number" ? ev.ts.toFixed(3) + "s" : "", isError: false,
      };
    }
    return {
      ev, type: text(ev.type), kind: KINDS.has(ev.type) ? ev.type : "other",
      from: text(ev.from) || "?", to: text(ev.to) || "?", method: text(ev.method),
      protocol: text(ev.protocol), session: text(ev.session), connection: text(ev.connection),
      id: ev.id === undefined || ev.id === null ? "" : json(ev.id, 0),
      ts: typeof ev.ts === "number" ? ev.ts.toFixed(3) + "s" : "",
      isError: ev.type === "response" && !!ev.is_error,
    };
  }

  // add takes one event into the model and reports whether it is shown.
  function add(ev) {
    if (!ev || typeof ev !== "object") return false;
    const i = events.length, e = entry(ev);
    events.push(e);
    if (e.type === "trace") {
      lost += e.lost;
      return keep(i, true);
    }
    lane(e.from); lane(e.to);
    if (e.connection) addConnection(e.connection);
    if (e.session && !sessions.has(e.session)) {
      sessions.add(e.session);
      const o = document.createElement("option");
      o.value = o.textContent = e.session;
      sessionSel.appendChild(o);
    }
    if (e.method && !methods.has(e.method)) {
      methods.add(e.method);
      const o = document.createElement("option");
      o.value = e.method;
      $("methods").appendChild(o);
    }
    return keep(i, matches(e));
  }

  function keep(i, shows) {
    if (shows) shown.push(i);
    return shows;
  }
  let lost = 0; // messages the gaps in the trace held

  // A trace that serve wrote holds the chains of many connections, each
  // event marked with its own; the connection filter appears once one is seen.
  function addConnection(c) {
    if (connections.has(c)) return;
    connections.add(c);
    const o = document.createElement("option");
    o.value = o.textContent = c;
    connSel.appendChild(o);
    $("connection-filter").hidden = false;
  }

  function matches(e) {
    if (e.type === "trace") return true;
    if (filter.connection && e.connection !== filter.connection) return false;
    if (filter.session && e.session !== filter.session) return false;
    if (filter.method && !e.method.includes(filter.method)) return false;
    return true;
  }

  function refilter() {
    shown = [];
    for (let i = 0; i < events.length; i++) if (matches(events[i])) shown.push(i);
    hiddenNote = "";
    delete status.dataset.unselected;
    if (selected >= 0 && !matches(events[selected])) unselect(selected);
    writeHash();
    layout();
  }

  // unselect drops the selection of event i, which the filters hide: a
  // detail of an event the diagram does not show would pass it off as
  // one that matches them. The status says so, and the URL drops it.
  function unselect(i) {
    selected = -1;
    $("detail").hidden = true;
    hiddenNote = "; event " + i + " is hidden by the filter, so nothing is selected";
    status.dataset.unselected = i;
  }

  const x = (l) => GUTTER + l * LANE + LANE / 2;

  // layout sizes the canvas and draws the lanes; render draws the rows.
  function layout() {
    if (lanesChanged) {
      lanesChanged = false;
      heads.textContent = "";
      lifelines.textContent = "";
      lanes.forEach((name, l) => {
        const h = document.createElement("div");
        h.className = "lane-head";
        h.style.left = (x(l) - (LANE - 16) / 2) + "px";
        h.textContent = name;
        h.title = name;
        heads.appendChild(h);
        const v = document.createElement("div");
        v.className = "lifeline";
        v.style.left = x(l) + "px";
        lifelines.appendChild(v);
      });
    }
    canvas.style.width = (GUTTER + lanes.length * LANE) + "px";
    canvas.style.height = Math.max(shown.length * ROW, 1) + "px";
    status.textContent = shown.length + " of " + events.length + " events, " + lanes.length + " components" +
      (lost ? ", " + lost + " messages lost in gaps" : "") + hiddenNote;
    status.dataset.shown = shown.length;
    status.dataset.total = events.length;
    status.dataset.lanes = lanes.length;
    status.dataset.lost = lost;
    render();
  }

  function render() {
    heads.scrollLeft = scroller.scrollLeft;
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(shown.length, Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
    const frag = document.createDocumentFragment();
    for (let r = first; r < last; r++) frag.appendChild(row(r, shown[r]));
    rows.textContent = "";
    rows.appendChild(frag);
  }

  function row(r, i) {
    const e = events[i];
    if (e.type === "trace") return note(r, i, e);
    const from = laneOf.get(e.from), to = laneOf.get(e.to);
    const d = document.createElement("div");
    d.className = "arrow " + e.kind + (e.isError ? " error" : "") + (e.protocol === "mcp" ? " mcp" : "") +
      (from === to ? " self" : "") + (i === selected ? " selected" : "");
    d.style.top = (r * ROW) + "px";
    d.dataset.index = i;
    const ts = document.createElement("span");
    ts.className = "ts";
    ts.textContent = e.ts;
    d.appendChild(ts);
    const a = x(from), b = from === to ? x(from) + 40 : x(to);
    const left = Math.min(a, b), width = Math.abs(b - a);
    const shaft = document.createElement("span");
    shaft.className = "shaft";
    shaft.style.left = left + "px";
    shaft.style.width = width + "px";
    d.appendChild(shaft);
    const head = document.createElement("span");
    const right = b >= a && from !== to;
    head.className = "head " + (right ? "right" : "left");
    head.style.left = (right ? b - 8 : (from === to ? a : b)) + "px";
    d.appendChild(head);
    const label = document.createElement("span");
    label.className = "label";
    label.style.left = (left + 4) + "px";
    label.style.width = Math.max(width - 8, LANE) + "px";
    let t = e.method;
    if (e.protocol === "mcp") t = "mcp " + t;
    if (e.id) t += "  #" + e.id;
    if (e.kind === "response") t = (e.isError ? "✗ " : "✓ ") + t;
    label.textContent = t;
    d.appendChild(label);
    d.title = e.type + " " + e.from + " → " + e.to;
    return d;
  }

  // note draws a line about the trace (a gap, a log line) across the lanes.
  function note(r, i, e) {
    const d = document.createElement("div");
    d.className = "arrow " + e.kind + (i === selected ? " selected" : "");
    d.style.top = (r * ROW) + "px";
    d.dataset.index = i;
    const ts = document.createElement("span");
    ts.className = "ts";
    ts.textContent = e.ts;
    d.appendChild(ts);
    const label = document.createElement("span");
    label.className = "label";
    label.style.left = GUTTER + "px";
    label.style.width = Math.max(lanes.length, 1) * LANE + "px";
    label.textContent = (e.kind === "gap" ? "⚠ " : "") + (e.from ? e.from + ": " : "") + e.method;
    d.appendChild(label);
    d.title = e.kind === "gap" ? e.lost + " messages are missing here" : "log line";
    return d;
  }

  function select(i) {
    selected = i;
    if (hiddenNote) { // a choice made since: the note is stale
      hiddenNote = "";
      delete status.dataset.unselected;
      layout();
    }
    const e = events[i];
    const panel = $("detail");
    if (!e) { panel.hidden = true; writeHash(); render(); return; }
    panel.hidden = false;
    $("detail-title").textContent = e.type === "trace" ? "trace: " + e.method :
      e.type + ": " + e.method + " (" + e.from + " → " + e.to + ")";
    $("detail-body").textContent = json(e.ev, 2);
    writeHash();
    render();
  }

  // The filters and the selection live in the URL's fragment, so that a
  // view can be bookmarked or shared: #connection=C&session=S&method=M&select=N.
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    filter = { connection: p.get("connection") || "", session: p.get("session") || "", method: p.get("method") || "" };
    return p.has("select") ? Number(p.get("select")) : -1;
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (filter.connection) p.set("connection", filter.connection);
    if (filter.session) p.set("session", filter.session);
    if (filter.method) p.set("method", filter.method);
    if (selected >= 0) p.set("select", selected);
    const h = p.toString();
    if (h !== location.hash.replace(/^#/, "")) history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; layout(); }, 0);
  }

  scroller.addEventListener("scroll", () => requestAnimationFrame(render));
  window.addEventListener("resize", () => requestAnimationFrame(render));
  rows.addEventListener("click", (e) => {
    const d = e.target.closest(".arrow");
    if (d) select(Number(d.dataset.index));
  });
  $("detail-close").addEventListener("click", () => select(-1));
  sessionSel.addEventListener("change", () => { filter.session = sessionSel.value; refilter(); });
  connSel.addEventListener("change", () => { filter.connection = connSel.value; refilter(); });
  methodIn.addEventListener("input", () => { filter.method = methodIn.value.trim(); refilter(); });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") select(-1);
  });

  const sel = readHash();
  const data = JSON.parse($("trace-data").textContent);
  for (const ev of data) add(ev);
  // A session named in the URL but not yet seen still gets its option.
  if (filter.session && !sessions.has(filter.session)) {
    const o = document.createElement("option");
    o.value = o.textContent = filter.session;
    sessionSel.appendChild(o);
  }
  sessionSel.value = filter.session;
  if (filter.connection) addConnection(filter.connection);
  connSel.value = filter.connection;
  methodIn.value = filter.method;
  layout();
  if (sel >= 0 && sel < events.length) {
    const r = shown.indexOf(sel);
    if (r >= 0) {
      scroller.scrollTop = Math.max(0, r * ROW - scroller.clientHeight / 2);
      select(sel);
    } else {
      unselect(sel);
      writeHash();
      layout();
    }
  }

  if (TRACE_LIVE) {
    const es = new EventSource(TRACE_LIVE);
    es.onmessage = (m) => {
      const follow = scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - ROW;
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      add(ev);
      schedule();
      if (follow) setTimeout(() => { scroller.scrollTop = scroller.scrollHeight; }, 0);
    };
    es.onerror = () => { status.dataset.live = "reconnecting"; };
    es.onopen = () => { status.dataset.live = "live"; };
  }
})();
