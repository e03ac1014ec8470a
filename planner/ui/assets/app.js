// Schedulearn dashboard: plain JavaScript, no dependencies. It reads the
// planner's API and follows its event stream (GET /v1/events) to stay live.
"use strict";

const TOKEN_KEY = "schedulearn-token";
// TOKEN_HINT says where a token comes from, for a reader who has none.
const TOKEN_HINT = "enter it at the top right. The read token is read_token in the planner's config (or SCHEDULEARN_READ_TOKEN where it runs); " +
  "token, the write token, reads too. schedulearn lab prints both on its Tokens line; ask whoever runs the planner for one.";
const state = { lastEventId: "", refreshTimer: null, lastRefreshMs: 0, route: "", policies: [] };

// ---------------------------------------------------------------- helpers
function $(sel) { return document.querySelector(sel); }
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
function headers(extra) {
  const h = Object.assign({ "Accept": "application/json" }, extra || {});
  if (token()) h["X-Schedulearn-Token"] = token();
  return h;
}
// request calls the API: the answer's body (JSON) and headers.
async function request(path, opts) {
  opts = opts || {};
  const resp = await fetch(path, { method: opts.method || "GET", headers: headers(opts.body ? { "Content-Type": "application/json" } : {}),
    body: opts.body ? JSON.stringify(opts.body) : undefined, cache: "no-store" });
  const text = await resp.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!resp.ok) {
    const err = new Error((body && body.error) || resp.statusText || ("HTTP " + resp.status));
    err.status = resp.status;
    throw err;
  }
  return { body: body, headers: resp.headers };
}
async function api(path, opts) { return (await request(path, opts)).body; }
// apiPage reads one page of a list route (GET /v1/jobs, /v1/queue,
// /v1/nodes): its items, how many there are in all, the next page's
// token ("" on the last), and, where the planner's store did not answer,
// as of when its records are ("" when it answered).
async function apiPage(path) {
  const r = await request(path);
  const items = r.body || [];
  const total = parseInt(r.headers.get("X-Schedulearn-Total"), 10);
  return { items: items, total: isNaN(total) ? items.length : total, next: r.headers.get("X-Schedulearn-Next-Token") || "",
    stale: r.headers.get("X-Schedulearn-Stale-As-Of") || "" };
}
// oldestStale is the oldest stale of pages ("" when none is).
function oldestStale(pages) {
  return pages.map(p => p.stale).filter(Boolean).sort((a, b) => Date.parse(a) - Date.parse(b))[0] || "";
}
// staleNote says the jobs the overview shows are the records the planner
// read last (its store did not answer the pages), and as of when; "" when
// it answered.
function staleNote(pages) {
  const asOf = oldestStale(pages);
  return asOf ? `The planner's store does not answer: these jobs are as of ${fmtTime(asOf)}; a job submitted or changed since may be missing or shown as it was.` : "";
}
// apiAll reads every page of a list route, the largest pages the API
// serves: every item, and the oldest page's stale ("" when none was).
async function apiAll(path) {
  const sep = path.includes("?") ? "&" : "?";
  let items = [], next = "";
  const pages = [];
  do {
    const p = await apiPage(path + sep + "per_page=5000" + (next ? "&next_token=" + encodeURIComponent(next) : ""));
    items = items.concat(p.items);
    pages.push(p);
    if (p.next === next) break;
    next = p.next;
  } while (next);
  return { items: items, stale: oldestStale(pages) };
}
function showError(msg) { const e = $("#error"); e.textContent = msg || ""; e.hidden = !msg; }
function fmtTime(t) { if (!t || t.startsWith("0001")) return ""; return new Date(t).toLocaleString(); }
function fmtDur(sec) {
  sec = Math.max(0, Math.round(sec));
  if (sec < 60) return sec + "s";
  if (sec < 3600) return Math.floor(sec / 60) + "m " + (sec % 60) + "s";
  return Math.floor(sec / 3600) + "h " + Math.floor((sec % 3600) / 60) + "m";
}
function asked(j) { return j.auto ? "auto" + (j.max_gpus ? " ≤" + j.max_gpus : "") : (j.min_gpus === j.max_gpus ? String(j.min_gpus) : j.min_gpus + "–" + j.max_gpus); }
// jobName is a job's name: its stub's, else its ID without the
// planner's "-<8 hex>" suffix.
function jobName(id, stub) { return (stub && stub.name) || id.replace(/-[0-9a-f]{8}$/, ""); }
// mapKeys gives each job on the GPU map (ids, sorted) a colour and a
// label that tell it apart from the others there: hues a golden angle
// apart in that order (no two alike, however many), and the first
// letters of its name, numbered where two names start alike.
function mapKeys(ids, stubs) {
  const keys = new Map(), seen = new Map();
  ids.forEach((id, i) => {
    const short = jobName(id, stubs.get(id)).slice(0, 3);
    seen.set(short, (seen.get(short) || 0) + 1);
    keys.set(id, { color: `hsl(${Math.round(i * 137.508) % 360}, 62%, 40%)`, label: short, n: seen.get(short) });
  });
  for (const k of keys.values()) if (seen.get(k.label) > 1) k.label = k.label.slice(0, 2) + k.n;
  return keys;
}
function jobLink(id) { return el("a", { href: "#/jobs/" + encodeURIComponent(id), "data-job": id }, id); }
function fill(tbody, rows) { tbody.replaceChildren(...rows); }

// ---------------------------------------------------------------- charts
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
// chart draws series of [x, y] points (x: ms since epoch), step or line,
// with horizontal and vertical marker lines, into container.
function chart(container, opts) {
  const W = Math.max(300, container.clientWidth || 600), H = 220, L = 44, R = 10, T = 10, B = 24;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const xs = [], ys = [];
  for (const se of opts.series) for (const [x, y] of se.points) { xs.push(x); ys.push(y); }
  for (const v of opts.vlines || []) xs.push(v.x);
  for (const h of opts.hlines || []) ys.push(h.y);
  if (xs.length === 0) { container.replaceChildren(el("p", { class: "muted" }, opts.empty || "No data yet.")); return; }
  let x0 = Math.min(...xs, opts.xMin ?? Infinity), x1 = Math.max(...xs, opts.xMax ?? -Infinity);
  if (x1 === x0) x1 = x0 + 1000;
  let y0 = opts.yMin !== undefined ? opts.yMin : Math.min(...ys), y1 = Math.max(...ys, opts.yMax || -Infinity);
  if (y1 === y0) y1 = y0 + 1;
  const px = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const py = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  s.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }), svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [y0, (y0 + y1) / 2, y1]) {
    const t = svg("text", { x: 2, y: py(v) + 3 }); t.textContent = +v.toFixed(3); s.append(t);
  }
  for (const v of [x0, x1]) {
    const t = svg("text", { x: v === x0 ? L : W - R - 50, y: H - 6 }); t.textContent = new Date(v).toLocaleTimeString(); s.append(t);
  }
  for (const h of opts.hlines || []) {
    s.append(svg("line", { class: h.cls, x1: L, x2: W - R, y1: py(h.y), y2: py(h.y), "data-value": h.y }));
    const t = svg("text", { x: W - R - 60, y: py(h.y) - 3 }); t.textContent = h.label; s.append(t);
  }
  for (const n of opts.notes || []) {
    const t = svg("text", { x: W - R - 160, y: T + 10, class: n.cls }); t.textContent = n.text; s.append(t);
  }
  for (const v of opts.vlines || []) {
    s.append(svg("line", { class: v.cls, y1: T, y2: H - B, x1: px(v.x), x2: px(v.x) }));
    const t = svg("text", { x: px(v.x) - 40, y: T + 10 }); t.textContent = v.label; s.append(t);
  }
  for (const se of opts.series) {
    if (se.points.length === 0) continue;
    let d = "";
    se.points.forEach(([x, y], i) => {
      if (i === 0) d += `M${px(x)},${py(y)}`;
      else if (se.step) d += `H${px(x)}V${py(y)}`;
      else d += `L${px(x)},${py(y)}`;
    });
    if (se.extendTo !== undefined) d += `H${px(se.extendTo)}`;
    s.append(svg("path", { class: se.cls, d: d, "data-points": se.points.length }));
  }
  s.setAttribute("data-x0", x0);
  s.setAttribute("data-x1", x1);
  container.replaceChildren(s);
}

// ---------------------------------------------------------------- overview
async function renderOverview() {
  const win = $("#queues-window").value;
  // The first 200 waiting jobs and the 200 newest jobs, a page each (a
  // long queue is for the CLI's job list); every node and every running
  // job (those holding GPUs), for the map.
  const [queue, allNodes, allRunning, jobs, util, queues] = await Promise.all([apiPage("/v1/queue?per_page=" + SHOWN), apiAll("/v1/nodes"),
    apiAll("/v1/jobs?state=running"), apiPage("/v1/jobs?reverse=true&per_page=" + SHOWN), api("/v1/utilization?window=1h"),
    api("/v1/queues?window=" + encodeURIComponent(win))]);
  const nodes = allNodes.items, running = allRunning.items;
  renderQueues(queues, win);
  const stale = staleNote([queue, jobs, allRunning]), st = $("#stale");
  st.textContent = stale;
  st.hidden = !stale;
  $("#queue-count").textContent = shownOf(queue, "first");
  fill($("#queue tbody"), queue.items.map(q => el("tr", { "data-job": q.job.id },
    el("td", {}, q.position), el("td", {}, jobLink(q.job.id)), el("td", {}, [q.job.user, q.job.queue].filter(Boolean).join(" / ")),
    el("td", { "data-field": "place" }, place(q.job.wait)),
    el("td", {}, asked(q.job)), el("td", {}, fmtDur(q.waiting_seconds)), el("td", { class: "reason" }, q.reason))));
  // GPU map: each job's cells in its own colour and label, its name,
  // user and GPUs in the tooltip, and a legend of the jobs on the map.
  const map = $("#gpu-map");
  const stubs = new Map(running.map(j => [j.id, j]));
  const held = [...new Set(nodes.flatMap(n => Object.keys(n.jobs || {})))].sort();
  const keys = mapKeys(held, stubs);
  map.replaceChildren(...nodes.map(n => {
    const cells = [];
    for (const id of Object.keys(n.jobs || {}).sort()) {
      const st = stubs.get(id), k = keys.get(id);
      const title = `${jobName(id, st)} (${id})` + (st && st.user ? ", user " + st.user : "") + `: ${n.jobs[id]} of its ${st ? st.gpus : "?"} GPUs on ${n.name}`;
      for (let i = 0; i < n.jobs[id]; i++) {
        const a = el("a", { class: "gpu held", href: "#/jobs/" + encodeURIComponent(id), "data-job": id, "data-label": k.label, title: title }, k.label);
        a.style.background = k.color;
        cells.push(a);
      }
    }
    for (let i = 0; i < n.gpus_free; i++) cells.push(el("span", { class: "gpu free", title: "idle" }));
    for (let i = 0; i < n.gpus_total - n.gpus_free - n.gpus_used; i++) cells.push(el("span", { class: "gpu unavailable", title: "unavailable" }));
    return el("div", { class: "node", "data-node": n.id },
      el("span", { class: "name", title: n.id }, n.name + (n.pool ? " · " + n.pool : "")),
      el("span", { class: "muted small" }, (n.gpu_model || "") + (n.status !== "ready" ? " · " + n.status : "")),
      el("div", { class: "gpus" }, ...cells));
  }));
  if (nodes.length === 0) map.replaceChildren(el("p", { class: "muted" }, "No GPU nodes."));
  $("#gpu-summary").textContent = gpuSummary(nodes);
  fill($("#gpu-legend"), held.map(id => {
    const sw = el("span", { class: "legend job" }, keys.get(id).label);
    sw.style.background = keys.get(id).color;
    return el("span", { class: "legend-job", "data-job": id }, sw, " ", el("a", { href: "#/jobs/" + encodeURIComponent(id) }, jobName(id, stubs.get(id))),
      el("span", { class: "muted" }, " " + id));
  }));
  // Jobs.
  $("#jobs-count").textContent = shownOf(jobs, "newest");
  fill($("#jobs tbody"), jobs.items.map(j => el("tr", { "data-job": j.id },
    el("td", {}, jobLink(j.id)), el("td", {}, j.queue || "default"), el("td", {}, j.priority), el("td", { class: "state " + j.state }, j.state, healthMark(j)),
    el("td", {}, j.gpus), el("td", {}, asked(j)), el("td", { "data-field": "preemptions", class: j.preemptions ? "preempted" : "" }, j.preemptions || 0),
    el("td", {}, fmtTime(j.submitted)))));
  // Utilisation.
  const now = Date.now();
  let pts = util.points.map(p => [Date.parse(p.time), p.allocated]);
  const avg = average(pts, now);
  // A young cluster: start the axis shortly before its first change, not
  // an hour back.
  if (pts.length > 1 && pts[0][1] === 0) {
    const first = pts[1][0], from = first - Math.max(60000, (now - first) / 10);
    if (from > pts[0][0]) pts = [[from, 0], ...pts.slice(1)];
  }
  chart($("#util-chart"), { series: [{ points: pts, step: true, cls: "series", extendTo: now }], hlines: [{ y: util.total_gpus, cls: "total", label: "total " + util.total_gpus }], yMin: 0, xMax: now });
  $("#util-summary").textContent = util.total_gpus ? `(last hour: ${(100 * avg / util.total_gpus).toFixed(0)}% on average)` : "";
}
// gpuSummary is the GPU map's line: GPUs held, in all and idle, and the
// same for each GPU model where the nodes have several.
function gpuSummary(nodes) {
  const sum = new Map(), all = { total: 0, used: 0, free: 0 };
  for (const n of nodes) {
    const parts = [all];
    if (n.gpu_model) {
      if (!sum.has(n.gpu_model)) sum.set(n.gpu_model, { total: 0, used: 0, free: 0 });
      parts.push(sum.get(n.gpu_model));
    }
    for (const s of parts) { s.total += n.gpus_total; s.used += n.gpus_used; s.free += n.gpus_free; }
  }
  const line = s => `${s.used} of ${s.total} held, ${s.free} idle`;
  if (sum.size < 2) return line(all);
  return [line(all), ...[...sum.keys()].sort().map(m => `${m}: ${line(sum.get(m))}`)].join(" · ");
}
// SHOWN is how many jobs a table of the overview shows.
const SHOWN = 200;
// shownOf counts a page's items for a heading: "(12)", or "(the first
// 200 of 9000)" where the page holds only some; "(empty)" for none.
function shownOf(page, which) {
  if (page.total === 0) return "(empty)";
  if (page.items.length < page.total) return `(the ${which} ${page.items.length} of ${page.total})`;
  return `(${page.total})`;
}
// renderQueues fills the queues' table: per queue its quota (per GPU model
// where quotas are), what its jobs hold now and borrow, its waiting jobs,
// its weight, and the GPU-hours its jobs held over the window win.
function renderQueues(queues, win) {
  const hours = { "1h": "last hour", "24h": "last 24 h", "168h": "last 7 days" }[win] || win;
  $("#queues-hours").textContent = "GPU-hours (" + hours + ")";
  const perModel = (gpus, f) => gpus.length === 1 && !gpus[0].model ? f(gpus[0]) : gpus.map(g => (g.model || "all") + ": " + f(g)).join(", ");
  const lim = v => v === null || v === undefined ? "-" : String(v);
  const depth = q => { let d = 0; for (let p = q.parent; p; p = (queues.find(x => x.name === p) || {}).parent) d++; return d; };
  let used = 0, borrowed = 0, waiting = 0;
  fill($("#queues tbody"), queues.map(q => {
    if (!q.parent) { for (const g of q.gpus) { used += g.used; borrowed += g.borrowed; } waiting += q.waiting; }
    const cell = (field, v) => el("td", { "data-field": field }, v);
    const name = el("td", { "data-field": "name", title: q.children ? "holds " + q.children.join(", ") : "" }, q.name);
    name.style.paddingLeft = (0.5 + 1.2 * depth(q)) + "em";
    return el("tr", { "data-queue": q.name, class: q.children ? "parent" : "" }, name,
      cell("weight", q.weight), cell("nominal", perModel(q.gpus, g => lim(g.nominal))), cell("borrowing-limit", perModel(q.gpus, g => lim(g.borrowing_limit))),
      cell("used", perModel(q.gpus, g => g.used)), cell("borrowed", perModel(q.gpus, g => g.borrowed)),
      cell("running", q.running), cell("waiting", q.waiting), cell("gpu-hours", q.window ? q.window.gpu_hours.toFixed(1) : ""));
  }));
  $("#queues-summary").textContent = queues.length ? `(${queues.length}: ${used} GPUs in use, ${borrowed} borrowed, ${waiting} jobs waiting)` : "";
}
// place is a waiting job's place in its queue, "2nd of 5 in vision".
function place(w) {
  if (!w || !w.position) return "";
  const n = w.position, s = n % 100 >= 11 && n % 100 <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" })[n % 10] || "th";
  return `${n}${s} of ${w.of} in ${w.queue}`;
}
function average(pts, end) {
  if (pts.length === 0) return 0;
  let area = 0;
  for (let i = 0; i < pts.length; i++) area += pts[i][1] * ((i + 1 < pts.length ? pts[i + 1][0] : end) - pts[i][0]);
  return area / Math.max(1, end - pts[0][0]);
}
async function renderStatus() {
  // The status is open; the rest needs a token.
  const st = await api("/v1/status");
  $("#status").textContent = `policy ${st.policy.name} · ${st.is_leader ? "leader" : "standby (leader " + (st.leader || "unknown") + ")"} · v${st.version}`;
  // The policies change only when plugins come or go: read once, and again
  // when the active one is not among those read.
  if (!state.policies.some(p => p.name === st.policy.name)) state.policies = await api("/v1/policies");
  const policies = state.policies;
  const sel = $("#policy-select");
  const names = policies.map(p => p.name).join(",");
  if (sel.dataset.names !== names) {
    sel.replaceChildren(...policies.map(p => el("option", { value: p.name, title: p.description || "" }, p.name)));
    sel.dataset.names = names;
  }
  if (document.activeElement !== sel) sel.value = st.policy.name;
}

// ---------------------------------------------------------------- job page
// healthMark marks a running job the planner's health watch judged
// degraded or stalled (its reason in the title); "" for others.
function healthMark(j) {
  const h = j.health;
  if (j.state !== "running" || !h) return "";
  return el("span", { class: "health " + h.state, "data-field": "health", title: h.reason }, " · " + h.state);
}

// modelFacts are a job's GPU model facts (issue 29): the model it runs
// on and its model history, each run with when, and its measured speed on
// one GPU of the model; none for a job without model history (its nodes
// name no model).
function modelFacts(j) {
  const runs = j.models || [];
  if (!runs.length) return [];
  const rates = (j.outlook && j.outlook.rates) || {};
  const hist = runs.map(r => {
    const until = r.until && !r.until.startsWith("0001") ? fmtTime(r.until) : "now";
    const rate = rates[r.model];
    return `${r.model} ${fmtTime(r.since)}–${until}` + (rate ? ` (${Number(rate.per_gpu.toPrecision(4))} samples/s a GPU)` : "");
  });
  const dropped = (j.dropped && j.dropped.models) ? `${j.dropped.models} older not kept; ` : "";
  const facts = [["GPU model", j.gpu_model || "—"], ["GPU models", dropped + hist.join(" → ")]];
  const m = j.state === "queued" ? j.moving : null; // a moving job is queued until it starts
  if (m) facts.push(["Moving", `from ${m.from} to ${m.to} since ${fmtTime(m.since)}` + (m.reason ? ": " + m.reason : "") +
    (m.stopped ? ` (no longer held on ${m.to}; it starts where the policy places it)` : " (stopped with a checkpoint; waiting for its run to end)")]);
  return facts;
}

async function renderJob(id) {
  const j = await api("/v1/jobs/" + encodeURIComponent(id));
  $("#job-title").textContent = j.id;
  const t = j.spec.Target;
  const deadline = t ? (t.Deadline && !t.Deadline.startsWith("0001") ? Date.parse(t.Deadline) : (t.Within ? Date.parse(j.submitted) + t.Within / 1e6 : null)) : null;
  const out = j.outlook && j.outlook.target;
  const facts = [["Name", j.spec.Name], ["User", j.spec.User || "—"], ["Command", [j.spec.Command, ...(j.spec.Args || [])].join(" ")],
    ["State", j.state], ["GPUs", String(Object.values(j.allocation || {}).reduce((a, b) => a + b, 0))],
    ["Asked", j.spec.GPUs.Auto ? "auto" : j.spec.GPUs.Min + "–" + j.spec.GPUs.Max], ["Submitted", fmtTime(j.submitted)]];
  facts.push(["Queue", j.spec.Queue || "default"], ["Priority", String(j.spec.Priority)]);
  if (j.waiting) facts.push(["Waiting", j.waiting]);
  if (j.state === "running") facts.push(["Health", j.health ? `${j.health.state} since ${fmtTime(j.health.since)}: ${j.health.reason}` : "ok"]);
  if (j.retries) facts.push(["Retries", `${j.retries}: requeued when the cluster ended or stalled its run`]);
  const pre = j.preemptions || [];
  if (pre.length) {
    const last = pre[pre.length - 1];
    facts.push(["Preemptions", `${pre.length}; last ${fmtTime(last.time)}: job ${last.job} of queue ${last.queue} took its GPUs` +
      (last.resumed && !last.resumed.startsWith("0001") ? `, resumed from step ${last.resumed_step}` : ", requeued")]);
  }
  facts.push(...modelFacts(j));
  if (j.started) facts.push(["Started", fmtTime(j.started)]);
  if (j.finished) facts.push(["Finished", fmtTime(j.finished)]);
  if (t) facts.push(["Target", `${t.Metric} ${t.Lower ? "≤" : "≥"} ${t.Goal}` + (t.Tier1 != null ? ` (tier 1: ${t.Tier1})` : "") + (deadline ? " by " + new Date(deadline).toLocaleString() : "")]);
  if (out) {
    // The time left is the ETA's, counted to now (the reason holds none):
    // one estimate, as job status shows it.
    let est = out.status;
    if (out.status === "estimated" && out.eta && !out.eta.startsWith("0001")) {
      const s = (Date.parse(out.eta) - Date.now()) / 1000;
      est = `${t.Metric} ${t.Goal} ` + (s >= 0 ? "in about " + fmtDur(s) : "about " + fmtDur(-s) + " overdue") + " (ETA " + fmtTime(out.eta) + ")";
    }
    facts.push(["Estimate", est + (out.reason ? " — " + out.reason : "")]);
  }
  if (j.progress) facts.push(["Progress", `step ${j.progress.step}, ${j.progress.reports} reports`]);
  $("#job-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k.toLowerCase() }, v)]));

  const now = j.finished && !j.finished.startsWith("0001") ? Date.parse(j.finished) : Date.now();
  // A record keeps its last GPU changes (dropped.history counts the older
  // ones): the chart then starts at the oldest kept, not at submission.
  const dropped = j.dropped || {};
  const gp = [...(dropped.history ? [] : [[Date.parse(j.submitted), 0]]), ...(j.history || []).map(h => [Date.parse(h.time), h.gpus])];
  const metric = t ? t.Metric : (j.progress && j.progress.metric ? j.progress.metric.name : "");
  $("#job-metric-title").textContent = metric ? "Metric: " + metric : "Metric";
  const mp = ((j.progress && j.progress.history) || []).filter(r => r.metric && r.metric.name === metric).map(r => [Date.parse(r.time), r.metric.value]);
  const hl = [];
  if (t && t.Tier1 != null) hl.push({ y: t.Tier1, cls: "tier1", label: "tier 1 " + t.Tier1 });
  if (t) hl.push({ y: t.Goal, cls: "goal", label: "goal " + t.Goal });
  // Both charts share one time range, from the first GPU change or report
  // to now (the end), so that a point in one lines up with the other. The
  // deadline is drawn where it fits that scale; a far one is named at the
  // right edge instead of squeezing the curves.
  const x0 = Math.min(...gp.map(p => p[0]), ...mp.map(p => p[0]), now);
  const x1 = Math.max(now, ...mp.map(p => p[0]));
  const near = deadline && mp.length && deadline >= x0 && deadline - x0 <= 3 * Math.max(x1 - x0, 60000);
  const xMax = near ? Math.max(x1, deadline) : x1;
  chart($("#job-gpus-chart"), { series: [{ points: gp, step: true, cls: "series", extendTo: now }], yMin: 0, xMin: x0, xMax: xMax });
  chart($("#job-metric-chart"), { series: [{ points: mp, cls: "series metric" }], hlines: mp.length ? hl : [],
    vlines: near ? [{ x: deadline, cls: "deadline", label: "deadline" }] : [], xMin: x0, xMax: xMax,
    notes: deadline && mp.length && !near ? [{ cls: "deadline-note", text: "deadline " + new Date(deadline).toLocaleString() + " →" }] : [],
    empty: metric ? "No " + metric + " reported yet." : "The job reports no metric." });

  const evRows = (j.events || []).slice().reverse().map(e => el("tr", {}, el("td", {}, fmtTime(e.time)), el("td", {}, e.type), el("td", {}, e.message)));
  if (dropped.events) evRows.push(el("tr", {}, el("td", { colspan: "3" }, `${dropped.events} older events not kept (the planner keeps the last ${(j.events || []).length})`)));
  fill($("#job-events tbody"), evRows);
  fill($("#job-deliveries tbody"), (j.deliveries || []).map(d => el("tr", {}, el("td", {}, d.tier), el("td", {}, d.metric + " " + d.value), el("td", {}, d.step),
    el("td", {}, d.state), el("td", {}, d.location || d.error || ""))));
}

// ---------------------------------------------------------------- routing, refresh
async function refresh() {
  const start = performance.now();
  try {
    await renderStatus();
    const m = location.hash.match(/^#\/jobs\/(.+)$/);
    $("#overview").hidden = !!m;
    $("#job-page").hidden = !m;
    if (m) await renderJob(decodeURIComponent(m[1])); else await renderOverview();
    showError("");
  } catch (e) {
    showError(e.status === 403 ? (token() ? "The planner refused the read with this token: " : "The planner needs a token to show its jobs: ") + TOKEN_HINT : "Failed to load: " + e.message);
  } finally {
    state.lastRefreshMs = performance.now() - start;
  }
}
// refreshDelay is how long a refresh waits after an event: 250 ms, or
// REFRESH_SHARE times as long as the last refresh took where that is
// longer, so that while events keep coming an open page keeps the planner
// busy for about 1/REFRESH_SHARE of the refresh's time or less, however
// many jobs it holds: a refresh's six reads run at once, on two cores at
// most 2/40, 5% of a core (at 21,000 jobs and two events a second, a
// refresh 250 ms after each cost the planner 11% of a core).
const REFRESH_SHARE = 40;
function refreshDelay() { return Math.max(250, REFRESH_SHARE * (state.lastRefreshMs || 0)); }
function scheduleRefresh() {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => { state.refreshTimer = null; refresh(); }, refreshDelay());
}

// The event stream, read with fetch so that the token goes in a header
// (EventSource cannot send one). It reconnects from the last event ID,
// after the planner's Retry-After where it refused the stream; while it is
// offline the page says why (the planner's own words where it refused).
async function follow() {
  for (;;) {
    let why = "the event stream ended; reconnecting", wait = 2000;
    try {
      const h = headers({ "Accept": "text/event-stream" });
      if (state.lastEventId) h["Last-Event-ID"] = state.lastEventId;
      const resp = await fetch("/v1/events", { headers: h, cache: "no-store" });
      if (resp.ok) {
        setLive(true);
        await readStream(resp.body.getReader());
      } else {
        why = await refusal(resp);
        const after = parseInt(resp.headers.get("Retry-After") || "", 10);
        if (after > 0) wait = Math.min(after, 300) * 1000;
      }
    } catch (e) {
      why = "the planner does not answer (" + ((e && e.message) || e) + ")";
    }
    setLive(false, why + "; trying again in " + Math.round(wait / 1000) + " s");
    await new Promise(r => setTimeout(r, wait));
  }
}
// readStream reads server-sent events until the stream ends.
async function readStream(reader) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i); buf = buf.slice(i + 2);
      let type = "message", data = "", id = null;
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (id !== null) state.lastEventId = id;
      if (data) onEvent(type, data);
    }
  }
}
// refusal is what a refused stream's answer says: the planner's error,
// with a hint for a missing token.
async function refusal(resp) {
  let msg = "";
  try { const body = await resp.json(); msg = (body && body.error) || ""; } catch (e) { msg = ""; }
  if (resp.status === 403) return "the planner refused the stream: " + (msg || "permission denied") + " (enter its token at the top right)";
  return "the planner refused the stream (HTTP " + resp.status + "): " + (msg || resp.statusText || "no reason given");
}
function onEvent(type, data) {
  window.dispatchEvent(new CustomEvent("schedulearn-event", { detail: { type, data } }));
  scheduleRefresh();
}
function setLive(on, why) {
  const p = $("#live");
  p.textContent = on ? "live" : "offline";
  p.className = "pill " + (on ? "on" : "off");
  p.title = on ? "event stream" : "offline: " + why;
  const r = $("#live-reason");
  r.textContent = on ? "" : why;
  r.hidden = on;
}

// ---------------------------------------------------------------- forms
function setupForms() {
  $("#token").value = token();
  $("#queues-window").addEventListener("change", refresh);
  $("#token-form").addEventListener("submit", ev => {
    ev.preventDefault();
    const v = $("#token").value.trim();
    if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
    refresh();
  });
  $("#policy-form").addEventListener("submit", async ev => {
    ev.preventDefault();
    const res = $("#policy-result");
    const name = $("#policy-select").value;
    try {
      const st = await api("/v1/policy", { method: "PUT", body: { name: name } });
      res.className = "small ok";
      res.textContent = "Policy " + st.name + " is active.";
      refresh();
    } catch (e) {
      res.className = "small bad";
      res.textContent = "Refused: " + e.message + (e.status === 403 && !token() ? " (enter the planner's token at the top right)" : "");
    }
  });
}

window.addEventListener("hashchange", refresh);
document.addEventListener("DOMContentLoaded", () => {
  setupForms();
  refresh();
  follow();
  setInterval(refresh, 30000); // a slow safety net besides the stream
});
