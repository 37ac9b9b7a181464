// mcpqueue task console: plain JavaScript, no build step, no dependencies.
// The API lives under ./api/. With authentication on, every call carries the
// admin's bearer token, kept in sessionStorage; the event stream is read with
// fetch for the same reason (EventSource cannot send headers).
"use strict";

// The statuses the console shows: a task's status, except that a completed
// task whose result is a tool error (isError: true) shows as tool_error.
const STATUSES = ["working", "input_required", "completed", "tool_error", "failed", "cancelled"];
const SVG = "http://www.w3.org/2000/svg";
const TOKEN_KEY = "mcpq-console-token";
const $ = (sel) => document.querySelector(sel);

const state = {
  rows: new Map(),   // id → row, the tasks the table shows
  counts: {},        // tool → status → n
  matched: 0,        // tasks matching the filters (the table shows the newest)
  selected: "",
  streamAbort: null,
  reloadTimer: 0,
  queueTimer: 0,
};

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function headers() {
  const h = {};
  if (token()) h.Authorization = "Bearer " + token();
  return h;
}

// el builds an element; children are nodes or strings (set as text, never HTML).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c ?? ""));
  return e;
}

function shownStatus(r) { return r.toolError ? "tool_error" : r.status; }
function label(status) { return status === "tool_error" ? "tool error" : status; }
function badge(status) { return el("span", { class: "badge s-" + status }, label(status)); }
// waiting says how long a parked task has waited for its client's answers.
function waiting(r) { return r.parkedSince ? "waiting for input " + dur(Date.now() - Date.parse(r.parkedSince)) : ""; }
function isActive(status) { return status === "working" || status === "input_required"; }
function clock(iso) { return iso ? new Date(iso).toISOString().slice(11, 23) : "—"; }
function dur(ms) { return ms == null ? "—" : (ms / 1000).toFixed(3) + " s"; }

class AuthError extends Error {}

async function api(path, opts = {}) {
  const resp = await fetch("api/" + path, { ...opts, headers: { ...headers(), ...(opts.headers || {}) } });
  let body = {};
  try { body = await resp.json(); } catch (_) { /* not JSON */ }
  if (resp.status === 401 || resp.status === 403) {
    showLogin(body.error || resp.statusText);
    throw new AuthError(body.error);
  }
  if (!resp.ok && resp.status !== 409) throw new Error(body.error || resp.statusText);
  return body;
}

function showLogin(why) {
  $("#login").hidden = false;
  $("#login-why").textContent = why || "";
  setConn(false, "signed out");
}

function setConn(live, text) {
  const c = $("#conn");
  c.className = "conn " + (live ? "live" : "off");
  c.textContent = text;
}

// --- the list and the counts ---

async function reload() {
  const q = new URLSearchParams();
  if ($("#f-tool").value) q.set("tool", $("#f-tool").value);
  if ($("#f-status").value) q.set("status", $("#f-status").value);
  const [ans] = await Promise.all([api("tasks?" + q), loadQueue(), loadSchedules().catch(() => {})]);
  state.rows = new Map(ans.tasks.map((r) => [r.id, r]));
  state.counts = ans.counts;
  $("#truncated").hidden = !ans.truncated;
  state.matched = ans.matched;
  renderCounts();
  renderTable();
}

// scheduleReload re-reads the list soon, at most once per burst of changes,
// so the counts over every record (not just the shown rows) stay right.
function scheduleReload() {
  if (state.reloadTimer) return;
  state.reloadTimer = setTimeout(() => {
    state.reloadTimer = 0;
    reload().catch(() => {});
  }, 2000);
}

function renderCounts() {
  const tbody = $("#counts tbody");
  tbody.replaceChildren();
  const tools = Object.keys(state.counts).sort();
  for (const tool of tools) {
    const c = state.counts[tool];
    let total = 0;
    const tr = el("tr", { "data-tool": tool }, el("td", {}, tool));
    for (const s of STATUSES) {
      const n = c[s] || 0;
      total += n;
      tr.append(el("td", { class: "n", "data-status": s }, n ? badge(s) : ""));
      if (n) tr.lastChild.firstChild.textContent = String(n);
    }
    tr.append(el("td", { class: "n" }, total));
    tbody.append(tr);
  }
  const sel = $("#f-tool");
  const cur = sel.value;
  sel.replaceChildren(el("option", { value: "" }, "all"), ...tools.map((t) => el("option", { value: t }, t)));
  sel.value = tools.includes(cur) ? cur : "";
}

function matches(r) {
  const tool = $("#f-tool").value, status = $("#f-status").value;
  return (!tool || r.tool === tool) && (!status || shownStatus(r) === status);
}

function rowElement(r) {
  const tr = el("tr", { "data-id": r.id, "data-status": shownStatus(r), "data-attempt": r.attempt },
    el("td", {}, clock(r.createdAt)),
    el("td", {}, r.tool),
    el("td", {}, el("code", {}, r.id.slice(0, 10) + "…")),
    el("td", { class: "status" }, badge(shownStatus(r)), r.dead ? el("span", { class: "dead", title: "failed after its last attempt: replay it from its detail" }, " dead") : ""),
    el("td", {}, r.attempt),
    el("td", {}, r.worker || waiting(r)),
    el("td", { class: "msg", title: r.statusMessage || "" }, el("span", {}, r.statusMessage || "")),
    el("td", { class: "act" }, isActive(r.status) ? el("button", { class: "cancel", type: "button", "data-id": r.id }, "cancel") : ""));
  if (r.id === state.selected) tr.classList.add("sel");
  return tr;
}

function renderTable() {
  const rows = [...state.rows.values()].filter(matches)
    .sort((a, b) => (b.createdAt > a.createdAt ? 1 : b.createdAt < a.createdAt ? -1 : a.id < b.id ? -1 : 1));
  $("#tasks tbody").replaceChildren(...rows.map(rowElement));
  $("#matched").textContent = state.matched + " matching";
}

// apply takes one change from the feed.
function apply(r) {
  const old = state.rows.get(r.id);
  if (old && old.revision >= r.revision) return;
  const c = (state.counts[r.tool] ||= {});
  if (old) c[shownStatus(old)] = Math.max(0, (c[shownStatus(old)] || 1) - 1);
  if (old || r.attempt === 0) c[shownStatus(r)] = (c[shownStatus(r)] || 0) + 1;
  if (matches(r) && !(old && matches(old))) state.matched++;
  else if (old && matches(old) && !matches(r)) state.matched--;
  state.rows.set(r.id, r);
  const tr = document.querySelector(`#tasks tbody tr[data-id="${CSS.escape(r.id)}"]`);
  if (tr && matches(r) && old && matches(old)) tr.replaceWith(rowElement(r));
  else renderTable();
  renderCounts();
  if (r.id === state.selected) showDetail(r.id).catch(() => {});
  scheduleReload();
}

// --- the queue view ---

async function loadQueue() {
  const q = await api("queue");
  renderQueue(q);
  return q;
}

// refreshQueue re-reads the queue view now and then, so its per-minute
// series move on even when no task changes.
function refreshQueue() {
  clearInterval(state.queueTimer);
  state.queueTimer = setInterval(() => { loadQueue().catch(() => {}); loadSchedules().catch(() => {}); }, 15000);
}

function renderQueue(q) {
  document.body.classList.toggle("global", q.global);
  $("#queue-when").textContent = `(now; the charts: tasks ended in each of the last ${q.minutes} minutes)`;
  const why = [];
  if (!q.global) why.push("Broker depth counts every tenant's jobs: it is shown to global operators only.");
  if (q.depthError) why.push("Broker depth: " + q.depthError);
  if (q.truncated) why.push("Only part of the store was read: numbers are partial.");
  $("#queue-why").textContent = why.join(" ");
  const n = (v, cls) => el("td", { class: "n " + cls }, String(v));
  $("#queue tbody").replaceChildren(...q.tools.map((t) => {
    const live = el("span", { class: "live-dot" + (t.live ? " on" : ""), title: t.live ? "a worker's heartbeat says it serves the tool now" : "no worker's heartbeat says it serves the tool now" });
    const workers = t.workers.length ? t.workers.join(", ") : (t.live ? "live, none seen busy" : "none");
    const failed = t.failed.reduce((a, b) => a + b, 0);
    return el("tr", { "data-tool": t.tool },
      el("td", {}, t.tool, t.rateLimit ? el("span", { class: "rate-limit", title: "the tool's rate limit, across every worker" }, ` ≤ ${t.rateLimit.n} per ${t.rateLimit.perMs / 1000} s`) : ""),
      n(t.queued, "queued"), n(t.running, "running"), n(t.waitingForInput, "waiting"), n(t.parked, "parked"),
      el("td", { class: "workers", "data-n": t.workers.length }, live, workers),
      el("td", { class: "n global depth" }, t.depth ? `${t.depth.pending} / ${t.depth.inFlight}` : "—"),
      el("td", { class: "spark" }, sparkline(t.ended, t.ended, "ended"), el("span", { class: "rate" }, t.rate.toFixed(1) + "/min")),
      el("td", { class: "spark" }, sparkline(t.failed, t.ended, "failed"),
        el("span", { class: "rate failure-rate" }, t.rate ? Math.round(100 * t.failureRate) + "% (" + failed + ")" : "—")));
  }));
}

// --- the schedules view (recurring schedules) ---

async function loadSchedules() {
  const { schedules } = await api("schedules");
  $("#schedules-box").hidden = schedules.length === 0;
  $("#schedules tbody").replaceChildren(...schedules.map((s) => el("tr", { "data-schedule": s.name },
    el("td", {}, s.name), el("td", {}, s.tool), el("td", {}, s.cron), el("td", {}, s.owner || "—"),
    el("td", {}, s.next ? new Date(s.next).toISOString().slice(0, 19) + "Z" : s.error))));
}

// sparkline draws values (one a minute, oldest first) as bars against the
// largest of scale, in an inline SVG: no library, nothing fetched.
function sparkline(values, scale, cls) {
  const w = 8, h = 24, top = Math.max(1, ...scale);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", String(values.length * w));
  svg.setAttribute("height", String(h));
  svg.setAttribute("data-series", cls);
  svg.setAttribute("data-values", values.join(","));
  values.forEach((v, i) => {
    const title = document.createElementNS(SVG, "title");
    title.textContent = `${values.length - 1 - i} min ago: ${v}`;
    const bh = v ? Math.max(2, Math.round((h - 2) * v / top)) : 0;
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("class", cls);
    rect.setAttribute("x", String(i * w + 1));
    rect.setAttribute("width", String(w - 2));
    rect.setAttribute("y", String(h - bh));
    rect.setAttribute("height", String(bh));
    rect.append(title);
    svg.append(rect);
  });
  return svg;
}

// --- the detail pane ---

async function showDetail(id) {
  state.selected = id;
  for (const tr of document.querySelectorAll("#tasks tbody tr")) tr.classList.toggle("sel", tr.dataset.id === id);
  const d = await api("tasks/" + encodeURIComponent(id));
  if (state.selected !== id) return;
  const t = d.task, tm = d.timings;
  const dl = el("dl", {},
    el("dt", {}, "status"), el("dd", {}, badge(d.status)),
    el("dt", {}, "tool"), el("dd", {}, (t.kind ? t.kind + "/" : "") + t.tool),
    el("dt", {}, "owner"), el("dd", {}, t.owner || "—"),
    el("dt", {}, "message"), el("dd", {}, t.statusMessage || "—"),
    el("dt", {}, "attempts"), el("dd", {}, String(t.attempt || 0)),
    el("dt", {}, "lease"), el("dd", {}, t.lease ? `${t.lease.worker} until ${clock(t.lease.expires)}` : "—"),
    el("dt", {}, "parked"), el("dd", {}, t.parked ? `since ${clock(t.parked.since)} (${waiting({ parkedSince: t.parked.since })}), fails at ${clock(t.parked.until)}` : "—"),
    el("dt", {}, "created"), el("dd", {}, clock(tm.createdAt)),
    el("dt", {}, "picked up"), el("dd", {}, tm.pickedUpAt ? `${clock(tm.pickedUpAt)} (queued ${dur(tm.queuedMs)})` : t.attempt ? "not seen" : "—"),
    el("dt", {}, "finished"), el("dd", {}, tm.finishedAt ? `${clock(tm.finishedAt)} (ran ${dur(tm.runningMs)})` : "—"),
    el("dt", {}, "total"), el("dd", {}, dur(tm.totalMs)),
    el("dt", {}, "revision"), el("dd", {}, String(d.revision)));
  const pane = $("#detail");
  pane.dataset.id = t.id;
  pane.dataset.status = d.status;
  pane.replaceChildren(el("h3", {}, t.id), dl,
    isActive(t.status) ? el("button", { class: "cancel", type: "button", "data-id": t.id }, "cancel task") : replayButton(t),
    el("h2", {}, "timeline"), timelineList(d.timeline),
    el("h2", {}, "record"), el("pre", {}, JSON.stringify(t, null, 2)));
}

// timelineList shows a task's life: created, each take (attempt, worker),
// input rounds, the end. Steps the console did not see on the change feed
// (it notes them only while it is open) are read off the record.
function timelineList(events) {
  return el("ol", { id: "timeline" }, ...events.map((e) => {
    let text;
    switch (e.what) {
      case "created": text = "created"; break;
      case "taken": text = `attempt ${e.attempt} picked up${e.worker ? " by " + e.worker : ""}`; break;
      case "requeued": text = "requeued"; break;
      case "input": text = "asked for input"; break;
      case "parked": text = "parked: its run gave its worker slot back"; break;
      case "answered": text = "input answered"; break;
      case "resumed": text = "resumed: queued again with its answers"; break;
      case "unseen": text = "not seen"; break;
      case "ended": text = label(e.status); break;
      default: text = e.what;
    }
    if (e.detail) text += " — " + e.detail;
    const cls = e.what + (e.what === "ended" ? " ended-" + e.status : "") + (e.seen ? " seen" : "");
    return el("li", { class: cls, "data-what": e.what, title: e.seen ? "seen on the change feed" : "from the record" },
      el("span", { class: "at" }, clock(e.at)), text);
  }));
}

// replayButton runs an ended task's call again as a new task of its owner
// (dead letters and replay); a task replayed already names its replay.
function replayButton(t) {
  const by = (t.meta || {})["io.mcpqueue/replayed-by"];
  if (by) return el("p", { class: "replayed" }, "replayed as ", el("code", {}, by));
  return el("button", { class: "replay", type: "button", "data-id": t.id }, "replay as a new task");
}

async function replayTask(id, button) {
  button.disabled = true;
  button.textContent = "replaying…";
  try {
    const ans = await api("tasks/" + encodeURIComponent(id) + "/replay", { method: "POST" });
    if (ans.task) { apply(ans.task); showDetail(ans.task.id).catch(() => {}); }
  } catch (e) {
    if (!(e instanceof AuthError)) alert("replay failed: " + e.message);
    button.disabled = false;
    button.textContent = "replay as a new task";
  }
}

async function cancelTask(id, button) {
  button.disabled = true;
  button.textContent = "cancelling…";
  try {
    const ans = await api("tasks/" + encodeURIComponent(id) + "/cancel", { method: "POST" });
    if (ans.task) apply(ans.task);
  } catch (e) {
    if (!(e instanceof AuthError)) alert("cancel failed: " + e.message);
    button.disabled = false;
    button.textContent = "cancel";
  }
}

// --- the live stream ---

async function stream() {
  if (state.streamAbort) state.streamAbort.abort();
  const ctl = new AbortController();
  state.streamAbort = ctl;
  for (;;) {
    try {
      const resp = await fetch("api/events", { headers: headers(), signal: ctl.signal });
      if (resp.status === 401 || resp.status === 403) {
        const body = await resp.json().catch(() => ({}));
        showLogin(body.error || resp.statusText);
        return;
      }
      if (!resp.ok) throw new Error(resp.statusText);
      await readEvents(resp.body.getReader());
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    setConn(false, "reconnecting…");
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function readEvents(reader) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (event === "ready") {
        // Live from here on: read the list now, so nothing falls in between.
        setConn(true, "live");
        await reload();
        refreshQueue();
      } else if (event === "resync") {
        await reload();
      } else if (event === "task") {
        apply(JSON.parse(data));
      }
    }
  }
}

// --- wiring ---

function start() {
  $("#login").hidden = true;
  $("#signout").hidden = !token();
  stream();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    $("#token").value = "";
    start();
  });
  $("#signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    if (state.streamAbort) state.streamAbort.abort();
    clearInterval(state.queueTimer);
    showLogin("");
  });
  $("#tasks tbody").addEventListener("click", (ev) => {
    const b = ev.target.closest("button.cancel");
    if (b) { ev.stopPropagation(); cancelTask(b.dataset.id, b); return; }
    const tr = ev.target.closest("tr[data-id]");
    if (tr) showDetail(tr.dataset.id).catch(() => {});
  });
  $("#detail").addEventListener("click", (ev) => {
    const b = ev.target.closest("button.cancel");
    if (b) cancelTask(b.dataset.id, b);
    const rb = ev.target.closest("button.replay");
    if (rb) replayTask(rb.dataset.id, rb);
  });
  for (const f of ["#f-tool", "#f-status"]) $(f).addEventListener("change", () => reload().catch(() => {}));
  start();
});
