// manetkit lab map: the page. Plain JavaScript and SVG, no external asset.
// The server pushes frames over a WebSocket (/ws): {type: "frame", full, now, t,
// positions, and the sections that changed: lab, nodes, links, cs, routing, flows,
// fidelity, events}; {type: "gone", reason}; {type: "detail", ...} answers a click.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const EVENT_COLOURS = {
  "route-up": "#2b8a3e", "route-down": "#d62828", "predicted-failure": "#e67700",
  "path-switch": "#7b2cbf", "erdn": "#b5179e", "ersn": "#4361ee",
  "elfn-freeze": "#0b7285", "elfn-resume": "#66a80f",
};
const FLOW_COLOURS = ["#e8590c", "#1c7ed6", "#9c36b5", "#2f9e44", "#c2255c", "#0ca678", "#f08c00", "#5f3dc4"];
const TIMELINE_S = 60;

const state = {
  lab: null, nodes: {}, positions: {}, links: [], cs: [], routing: [], flows: [],
  fidelity: null, events: [], now: 0, t: null, gone: null,
};
const view = {
  paused: false, selected: null, shown: {}, frameMs: 100, lastFrameAt: 0, clockOffset: 0,
  bounds: null, scale: 1, detailTimer: null,
};
let ws = null;

const $ = (id) => document.getElementById(id);
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function html(tag, text, parent, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  if (parent) parent.appendChild(e);
  return e;
}
const nodeNum = (n) => parseInt(n.slice(1), 10);
const pairKey = (a, b) => (nodeNum(a) < nodeNum(b) ? a + "|" + b : b + "|" + a);

// --- link quality: the colour scale ------------------------------------------------------

// A delivery ratio when the medium reports one, else the SNR, else the received power
// above the reception threshold; 0 (red) .. 1 (green).
function linkQuality(lk) {
  const clamp = (v) => Math.max(0, Math.min(1, v));
  if (typeof lk.pdr === "number") return { q: clamp(lk.pdr), by: "pdr" };
  if (typeof lk.snr_db === "number") return { q: clamp(lk.snr_db / 30), by: "snr" };
  const thr = (state.lab && state.lab.ranges && state.lab.ranges.rx_threshold_dbm) || -64.4;
  if (typeof lk.rssi_dbm === "number") return { q: clamp((lk.rssi_dbm - thr) / 20), by: "rssi" };
  return { q: 1, by: "none" };
}
const qualityColour = (q) => `hsl(${Math.round(120 * q)}, 75%, ${42 - 6 * q}%)`;

// --- merging frames ----------------------------------------------------------------------

function merge(msg) {
  if (msg.full) { state.events = []; }
  for (const k of ["lab", "nodes", "links", "cs", "routing", "flows", "fidelity"]) {
    if (k in msg) state[k] = msg[k];
  }
  if (msg.gone) setGone(msg.gone);
  if (msg.events) {
    state.events = state.events.concat(msg.events).slice(-200);
    for (const ev of msg.events) if (!msg.full && relevant(ev)) effect(ev);
  }
  if (typeof msg.now === "number") { state.now = msg.now; view.clockOffset = performance.now() / 1000 - msg.now; }
  state.t = msg.t;
  if (msg.positions) acceptPositions(msg.positions);
  if ("lab" in msg) setupLab();
  else if ("links" in msg) drawLegend();
}

function acceptPositions(pos) {
  const now = performance.now();
  if (view.lastFrameAt) {
    const dt = now - view.lastFrameAt;
    if (dt > 10 && dt < 2000) view.frameMs = 0.8 * view.frameMs + 0.2 * dt;
  }
  view.lastFrameAt = now;
  for (const n in pos) {
    const [x, y] = pos[n];
    const cur = state.positions[n];
    if (!cur) { state.positions[n] = { fx: x, fy: y, tx: x, ty: y, start: now }; continue; }
    const shown = displayed(n, now);
    cur.fx = shown[0]; cur.fy = shown[1]; cur.tx = x; cur.ty = y; cur.start = now;
  }
  growBounds();
}

// Where node n is drawn at time now: moving from its previous drawn place to the last
// position read, over one frame period, so the motion is smooth between reads.
function displayed(n, now) {
  const p = state.positions[n];
  if (!p) return null;
  const a = Math.max(0, Math.min(1, (now - p.start) / Math.max(view.frameMs, 16)));
  return [p.fx + (p.tx - p.fx) * a, p.fy + (p.ty - p.fy) * a];
}

// --- the map's frame of reference ---------------------------------------------------------

function growBounds() {
  const area = state.lab && state.lab.area;
  let x0 = 0, y0 = 0, x1 = area ? area[0] : 0, y1 = area ? area[1] : 0;
  for (const n in state.positions) {
    const p = state.positions[n];
    x0 = Math.min(x0, p.tx); y0 = Math.min(y0, p.ty); x1 = Math.max(x1, p.tx); y1 = Math.max(y1, p.ty);
  }
  const b = view.bounds;
  if (b && x0 >= b.x0 && y0 >= b.y0 && x1 <= b.x1 && y1 <= b.y1) return;
  const nb = b ? { x0: Math.min(b.x0, x0), y0: Math.min(b.y0, y0), x1: Math.max(b.x1, x1), y1: Math.max(b.y1, y1) }
               : { x0, y0, x1, y1 };
  if (nb.x1 - nb.x0 < 300) nb.x1 = nb.x0 + 300;
  if (nb.y1 - nb.y0 < 300) { const mid = (nb.y0 + nb.y1) / 2; nb.y0 = mid - 150; nb.y1 = mid + 150; }
  view.bounds = nb;
  const w = nb.x1 - nb.x0, h = nb.y1 - nb.y0, m = Math.max(w, h) * 0.06;
  view.scale = Math.max(w, h) / 110;
  $("map").setAttribute("viewBox", `${nb.x0 - m} ${nb.y0 - m} ${w + 2 * m} ${h + 2 * m}`);
  drawGrid();
  for (const g of document.querySelectorAll("#nodes g.node")) sizeNode(g);
}

function drawGrid() {
  const g = $("grid");
  g.textContent = "";
  const b = view.bounds;
  const span = Math.max(b.x1 - b.x0, b.y1 - b.y0);
  const step = span > 2000 ? 500 : span > 800 ? 200 : 100;
  for (let x = Math.ceil(b.x0 / step) * step; x <= b.x1; x += step) {
    el("line", { class: "gridline", x1: x, y1: b.y0, x2: x, y2: b.y1 }, g);
    el("text", { class: "gridlabel", x: x + 2, y: b.y1 - 4, "font-size": view.scale * 0.9 }, g).textContent = x + " m";
  }
  for (let y = Math.ceil(b.y0 / step) * step; y <= b.y1; y += step) {
    el("line", { class: "gridline", x1: b.x0, y1: y, x2: b.x1, y2: y }, g);
  }
}

// --- nodes ---------------------------------------------------------------------------------

function setupLab() {
  const lab = state.lab;
  if (!lab) return;
  document.title = `lab ${lab.name}: manetkit map`;
  $("labinfo").textContent = `lab ${lab.name}${lab.kind === "docker" ? " (docker)" : ""} · ${lab.nodes.length} nodes · stack ${lab.stack} · proxy ${lab.proxy}`;
  const g = $("nodes");
  for (const n of lab.nodes) {
    if (g.querySelector(`g.node[data-node="${n}"]`)) continue;
    const ng = el("g", { class: "node", "data-node": n }, g);
    el("circle", { r: 1 }, ng);
    el("text", { "text-anchor": "middle" }, ng).textContent = n;
    ng.addEventListener("click", (e) => { e.stopPropagation(); select(n); });
    sizeNode(ng);
  }
  drawLegend();
  if (!view.filterSet) {  // a big lab: the flows' events only, to begin with
    view.filterSet = true;
    $("flow-events").checked = lab.nodes.length > 10;
  }
}

function sizeNode(g) {
  const r = view.scale;
  g.querySelector("circle").setAttribute("r", r);
  const t = g.querySelector("text");
  t.setAttribute("y", -r * 1.4);
  t.setAttribute("font-size", r * 1.7);
}

// --- drawing, once per animation frame ------------------------------------------------------

function lineBetween(line, a, b) {
  line.setAttribute("x1", a[0]); line.setAttribute("y1", a[1]);
  line.setAttribute("x2", b[0]); line.setAttribute("y2", b[1]);
}

// Keep one SVG element per key in layer g, made by make(key, item); drop the others.
function sync(g, items, keyOf, make) {
  const have = new Map();
  for (const c of g.children) have.set(c.dataset.key, c);
  const out = [];
  for (const it of items) {
    const k = keyOf(it);
    let e = have.get(k);
    if (e) have.delete(k); else { e = make(k, it); e.dataset.key = k; g.appendChild(e); }
    out.push([e, it]);
  }
  for (const e of have.values()) e.remove();
  return out;
}

// At most RENDER_FPS drawings a second: positions arrive at ~10 Hz and are interpolated,
// so more would only cost the browser CPU (on the lab's own machine, often).
const RENDER_FPS = 30;
let lastRender = 0;
function render() {
  requestAnimationFrame(render);
  if (view.paused) return;
  const now = performance.now();
  if (now - lastRender < 1000 / RENDER_FPS - 2) return;
  lastRender = now;
  const pos = {};
  for (const n in state.positions) pos[n] = displayed(n, now);

  for (const g of $("nodes").children) {
    const n = g.dataset.node, p = pos[n];
    if (!p) continue;
    g.setAttribute("transform", `translate(${p[0]},${p[1]})`);
    const info = state.nodes[n] || {};
    g.classList.toggle("down", info.ok === false);
    g.classList.toggle("selected", view.selected === n);
  }

  const show = (id) => $(id).checked;
  const links = show("show-links") ? state.links : [];
  for (const [line, lk] of sync($("links"), links, (lk) => pairKey(lk.a, lk.b), () => el("line", { class: "link" }))) {
    if (!pos[lk.a] || !pos[lk.b]) continue;
    lineBetween(line, pos[lk.a], pos[lk.b]);
    const q = linkQuality(lk);
    line.setAttribute("stroke", qualityColour(q.q));
    line.dataset.a = lk.a; line.dataset.b = lk.b;
  }
  const cs = show("show-cs") ? state.cs : [];
  for (const [line, p] of sync($("cs"), cs, (p) => pairKey(p[0], p[1]), () => el("line", { class: "cs" }))) {
    if (pos[p[0]] && pos[p[1]]) lineBetween(line, pos[p[0]], pos[p[1]]);
  }
  const rt = show("show-routing") ? state.routing : [];
  for (const [line, r] of sync($("routing"), rt, (r) => pairKey(r.a, r.b), () => el("line", { class: "rt" }))) {
    if (!pos[r.a] || !pos[r.b]) continue;
    lineBetween(line, pos[r.a], pos[r.b]);
    line.classList.toggle("grayzone", r.medium === false);
    line.classList.toggle("oneway", !r.both);
    line.dataset.a = r.a; line.dataset.b = r.b;
  }
  drawFlows(show("show-flows") ? state.flows : [], pos);
  drawRanges(pos);
  drawEffects(now, pos);
}

function drawFlows(flows, pos) {
  const items = [];
  flows.forEach((f, i) => {
    const colour = FLOW_COLOURS[i % FLOW_COLOURS.length];
    items.push({ f, path: f.path, colour, key: f.id, backup: false });
    (f.backups || []).forEach((b, j) => items.push({ f, path: b, colour, key: `${f.id}#b${j}`, backup: true }));
  });
  const made = sync($("flows"), items, (it) => it.key, () => {
    const g = el("g", { class: "flow" });
    el("polyline", {}, g);
    return g;
  });
  made.forEach(([g, it], i) => {
    const pts = it.path.filter((n) => pos[n]).map((n) => pos[n].join(",")).join(" ");
    // flows that share hops stay apart: each is shifted a little from the last
    const d = (i % 6) * view.scale * 0.35;
    g.setAttribute("transform", `translate(${d},${d})`);
    const pl = g.firstChild;
    pl.setAttribute("points", pts);
    pl.setAttribute("stroke", it.colour);
    g.classList.toggle("backup", it.backup);
    g.classList.toggle("broken", !it.f.complete);
    g.dataset.src = it.f.src; g.dataset.dst = it.f.dst;
    g.dataset.path = it.path.join(" ");
    g.dataset.role = it.backup ? "backup" : "primary";
  });
}

function drawRanges(pos) {
  const g = $("ranges");
  const r = state.lab && state.lab.ranges;
  const n = view.selected;
  const want = $("show-ranges").checked && r && n && pos[n];
  const items = want ? [["rx", r.rx_m], ["cs", r.cs_m]] : [];
  for (const [c, it] of sync(g, items, (it) => it[0], (k) => el("circle", { class: "range " + k }))) {
    c.setAttribute("cx", pos[n][0]); c.setAttribute("cy", pos[n][1]); c.setAttribute("r", it[1]);
  }
}

// --- events: on the map, the timeline and the list ------------------------------------------------

const effects = [];
function effect(ev) {
  effects.push({ ev, at: performance.now() });
  if (effects.length > 100) effects.shift();
}

function drawEffects(now, pos) {
  while (effects.length && now - effects[0].at > 2500) effects.shift();
  const items = effects.map((e, i) => ({ e, key: `${e.at}-${i}` }));
  const made = sync($("fx"), items, (it) => it.key, (k, it) => {
    const link = it.e.ev.link || (it.e.ev.kind === "predicted-failure" && it.e.ev.neighbour ? [it.e.ev.node, it.e.ev.neighbour] : null);
    return link ? el("line", { class: "fx-link" }) : el("circle", { class: "fx-ring" });
  });
  for (const [e, it] of made) {
    const ev = it.e.ev, age = (now - it.e.at) / 2500;
    const colour = EVENT_COLOURS[ev.kind] || "#333";
    e.setAttribute("stroke", colour);
    e.setAttribute("opacity", String(1 - age));
    if (e.tagName === "line") {
      const link = ev.link || [ev.node, ev.neighbour];
      if (pos[link[0]] && pos[link[1]]) lineBetween(e, pos[link[0]], pos[link[1]]);
    } else if (pos[ev.node]) {
      e.setAttribute("cx", pos[ev.node][0]); e.setAttribute("cy", pos[ev.node][1]);
      e.setAttribute("r", view.scale * (1.2 + 2.5 * age));
    }
  }
}

function serverNow() { return performance.now() / 1000 - view.clockOffset; }

// With "only the events of the flows shown": events about a flow's destination at a node
// of its path, on a link of its path, or of its proxy session (a 30-node DSR lab reports
// many route-downs of cached routes that no flow uses).
function relevant(ev) {
  if (!$("flow-events").checked) return true;
  for (const f of state.flows) {
    const on = new Set(f.path.concat(...(f.backups || [])));
    if (ev.dst && (ev.dst === f.dst || ev.dst === f.src) && on.has(ev.node)) return true;
    if (ev.link && on.has(ev.link[0]) && on.has(ev.link[1])) return true;
    if (ev.neighbour && on.has(ev.node) && on.has(ev.neighbour)) return true;
    if (ev.kind.startsWith("elfn") && (ev.node === f.src || ev.node === f.dst)) return true;
  }
  return false;
}

function drawTimeline() {
  const svg = $("timeline");
  svg.textContent = "";
  const now = serverNow();
  const events = state.events.filter(relevant);
  for (let s = 0; s <= TIMELINE_S; s += 10) {
    const x = 600 * (1 - s / TIMELINE_S);
    el("line", { x1: x, y1: 0, x2: x, y2: 40, stroke: "#dde1e6", "stroke-width": 0.5 }, svg);
  }
  const kinds = Object.keys(EVENT_COLOURS);
  for (const ev of events) {
    const age = now - ev.at;
    if (age > TIMELINE_S || age < -1) continue;
    const x = 600 * (1 - age / TIMELINE_S);
    const row = kinds.indexOf(ev.kind);
    const y = 3 + (row < 0 ? 0 : row) * 4.5;
    const tick = el("rect", { x: x - 1, y, width: 2.5, height: 4, fill: EVENT_COLOURS[ev.kind] || "#333" }, svg);
    el("title", {}, tick).textContent = ev.text;
  }
  const list = $("events");
  list.textContent = "";
  for (const ev of events.slice(-14).reverse()) {
    const li = html("li", null, list);
    html("span", `${Math.max(0, now - ev.at).toFixed(1)} s`, li, "age");
    const sw = html("span", null, li, "swatch");
    sw.style.background = EVENT_COLOURS[ev.kind] || "#333";
    html("span", ev.text, li);
  }
}

// --- side panel: flows, fidelity, node detail ---------------------------------------------------------

function fmtRate(bps) {
  if (bps === null || bps === undefined) return "-";
  return bps >= 1e6 ? (bps / 1e6).toFixed(2) + " Mbit/s" : Math.round(bps / 1e3) + " kbit/s";
}

function drawFlowTable() {
  const tb = $("flowtable").querySelector("tbody");
  tb.textContent = "";
  state.flows.forEach((f, i) => {
    const tr = html("tr", null, tb);
    const td = html("td", null, tr);
    const sw = html("span", null, td, "swatch");
    sw.style.background = FLOW_COLOURS[i % FLOW_COLOURS.length];
    html("span", `${f.src} ${f.reverse ? "⇄" : "→"} ${f.dst}`, td);
    const path = f.complete ? f.path.join(" ") : f.path.join(" ") + " … (no route)";
    const backups = (f.backups || []).map((b) => "backup: " + b.join(" ")).join("\n");
    const pc = html("td", path + (backups ? "\n" + backups : ""), tr);
    pc.style.whiteSpace = "pre-line";
    pc.title = `${f.how}; seen as: ${(f.seen || []).join(", ")}${f.state ? "; proxy " + f.state : ""}`;
    // goodput: what the proxies handed to the apps; else the IP bytes the destination's
    // daemon delivered; else what the source sent.
    const rate = f.goodput_bps !== null && f.goodput_bps !== undefined ? fmtRate(f.goodput_bps)
      : typeof f.delivered_bps === "number" ? fmtRate(f.delivered_bps) + " (IP)"
      : typeof f.sent_bps === "number" ? "sent " + fmtRate(f.sent_bps) : "-";
    const back = f.reverse;
    const brate = !back ? "" : typeof back.goodput_bps === "number" ? fmtRate(back.goodput_bps)
      : typeof back.delivered_bps === "number" ? fmtRate(back.delivered_bps) + " (IP)" : "";
    html("td", brate ? `${rate}\n← ${brate}` : rate, tr, "num").style.whiteSpace = "pre-line";
  });
  $("flowhint").hidden = state.flows.length > 0;
}

function drawFidelity() {
  const f = state.fidelity, e = $("fidelity");
  if (!f) { e.textContent = "fidelity: -"; e.className = ""; return; }
  const ms = (v) => (v === null || v === undefined ? "-" : v < 1 ? v.toFixed(2) : v.toFixed(1));
  e.textContent = `lag p50 ${ms(f.lag_p50_ms)} · p99 ${ms(f.lag_p99_ms)} · max ${ms(f.lag_max_ms)} ms · drops ${f.unmodelled_drops} unmodelled, ${f.modelled_drops} modelled`;
  e.className = f.valid ? "ok" : "bad";
  e.title = f.valid ? `the medium kept real time over the last ${f.window_s} s` : (f.reasons || []).join("; ");
}

function drawLegend() {
  const lg = $("legend");
  const by = state.links.length ? linkQuality(state.links[0]).by : "rssi";
  const what = { pdr: "delivery ratio 0 → 1", snr: "SNR 0 → 30 dB", rssi: "signal: reception threshold → +20 dB", none: "" }[by];
  lg.innerHTML = "";
  const row = (inner) => { const d = html("div", null, lg); d.innerHTML = inner; };
  row(`<span class="grad"></span> medium link, ${what}`);
  row(`<span class="sw" style="border-top:1px dashed #b9c0c8"></span> carrier sense only (no reception)`);
  row(`<span class="sw" style="border-top:2px dashed #1f3f8a"></span> routing neighbours (the stack's own view)`);
  row(`<span class="sw" style="border-top:3px dashed #c0189c"></span> gray zone: the routing believes it, the medium carries nothing`);
  row(`<span class="sw" style="border-top:6px solid #e8590c;opacity:.6"></span> a flow's path (dashed thin: SMR backup)`);
}

function select(n) {
  view.selected = n;
  $("detail-title").textContent = `Node ${n}`;
  requestDetail();
  clearInterval(view.detailTimer);
  view.detailTimer = setInterval(requestDetail, 1000);
}
function requestDetail() {
  if (view.selected && ws && ws.readyState === 1 && !view.paused) ws.send(JSON.stringify({ cmd: "detail", node: view.selected }));
}

function table(parent, title, rows, cols) {
  if (!rows || !rows.length) return;
  html("h3", title, parent);
  const t = html("table", null, parent);
  const hr = html("tr", null, html("thead", null, t));
  for (const c of cols) html("th", c, hr);
  const tb = html("tbody", null, t);
  for (const r of rows) {
    const tr = html("tr", null, tb);
    for (const c of cols) {
      let v = r[c];
      if (Array.isArray(v)) v = v.join(" ");
      else if (v && typeof v === "object") v = JSON.stringify(v);
      else if (typeof v === "number" && !Number.isInteger(v)) v = v.toFixed(2);
      html("td", v === undefined || v === null ? "-" : String(v), tr, typeof r[c] === "number" ? "num" : null);
    }
  }
}

function showDetail(d) {
  if (d.node !== view.selected) return;
  const box = $("detail");
  const open = new Set([...box.querySelectorAll("details[open]")].map((x) => x.dataset.k));
  box.textContent = "";
  const info = state.nodes[d.node] || {};
  const pos = d.position ? `(${d.position[0].toFixed(0)}, ${d.position[1].toFixed(0)}) m` : "";
  html("p", `${info.address || ""} ${pos} · ${info.protocol || "no routing"}${d.daemon_error ? " · " + d.daemon_error : ""}`, box);
  const form = html("p", null, box);
  const sel = html("select", null, form);
  for (const n of (state.lab ? state.lab.nodes : [])) if (n !== d.node) html("option", n, sel).value = n;
  const btn = html("button", "watch path", form);
  btn.onclick = () => ws.send(JSON.stringify({ cmd: "watch", src: d.node, dst: sel.value }));
  table(box, "medium links", d.medium_links, ["node", "rssi_dbm", "snr_db", "pdr"].filter((c) => c === "node" || c === "rssi_dbm" || (d.medium_links || []).some((l) => c in l)));
  table(box, "routing neighbours", d.neighbours, ["node", "up", "signal_dbm", "cost"]);
  const eng = (d.daemon && d.daemon.engine) || {};
  table(box, "source routes (DSR route cache)", eng.paths, ["dst", "hops", "path", "age_s", "idle_s"]);
  table(box, "paths (SMR)", eng.multipath, ["dst", "role", "hops", "path", "age_s"]);
  table(box, "routes (AODV)", eng.routes, ["dst", "next_hop", "hops", "state", "lifetime_s", "precursors"]);
  table(box, "route discoveries", eng.discoveries, ["target", "attempts", "retries", "since_s", "next_in_s"]);
  table(box, "kernel routes", d.kernel_routes, ["dst", "via", "table", "protocol", "type"]);
  table(box, "babeld neighbours", d.peer_neighbours, ["node", "address", "reach", "rxcost", "txcost", "cost"]);
  if (d.proxy) table(box, `proxy (${d.proxy.mode}) sessions`, d.proxy.sessions, ["role", "peer", "dst", "state", "bytes_from_app", "bytes_to_app", "resumes"]);
  if (eng.counters) {
    const det = html("details", null, box);
    det.dataset.k = "counters";
    if (open.has("counters")) det.open = true;
    html("summary", "counters", det);
    table(det, "", Object.entries(eng.counters).map(([k, v]) => ({ counter: k, value: v })), ["counter", "value"]);
  }
}

// --- lab gone, connection ------------------------------------------------------------------------

function setGone(reason) {
  state.gone = reason;
  document.body.classList.add("gone");
  const b = $("banner");
  b.hidden = false;
  b.className = "gone";
  b.textContent = `The lab ${state.lab ? state.lab.name : ""} is gone: ${reason}. The map shows its last state.`;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  ws = new WebSocket(`${proto}//${location.host}/ws`);
  $("conn").textContent = "connecting…";
  ws.onopen = () => { $("conn").textContent = "live"; if (!state.gone) $("banner").hidden = true; };
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "frame") {
      window.mapFrames = (window.mapFrames || 0) + 1; // for tests and measurements
      merge(msg);
      if (!view.paused) refreshPanels();
    } else if (msg.type === "gone") {
      setGone(msg.reason);
    } else if (msg.type === "detail") {
      showDetail(msg);
    } else if (msg.type === "error") {
      console.warn(msg.error);
    }
  };
  ws.onclose = () => {
    $("conn").textContent = "disconnected";
    if (!state.gone) {
      const b = $("banner");
      b.hidden = false;
      b.className = "info";
      b.textContent = "The map's server does not answer (stopped?): retrying every 2 s.";
    }
    setTimeout(connect, 2000);
  };
}

let lastPanels = 0;
function refreshPanels() {
  const now = performance.now();
  if (now - lastPanels < 250) return; // tables at 4 Hz are plenty
  lastPanels = now;
  drawFlowTable();
  drawFidelity();
  drawTimeline();
  if (state.t !== null && state.t !== undefined) $("clock").textContent = `t = ${state.t.toFixed(1)} s`;
}

function togglePause() {
  view.paused = !view.paused;
  const b = $("pause");
  b.textContent = view.paused ? "Resume" : "Pause";
  b.classList.toggle("paused", view.paused);
  if (!view.paused) refreshPanels();
}

$("pause").addEventListener("click", togglePause);
document.addEventListener("keydown", (e) => { if (e.code === "Space" && e.target.tagName !== "INPUT") { e.preventDefault(); togglePause(); } });
$("map").addEventListener("click", () => { view.selected = null; clearInterval(view.detailTimer); });
connect();
requestAnimationFrame(render);
