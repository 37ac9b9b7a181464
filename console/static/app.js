// mcpqueue task console: plain JavaScript, no build step, no dependencies.
// The API lives under ./api/. With authentication on, every call carries the
// admin's bearer token, kept in sessionStorage; the event stream is read with
// fetch for the same reason (EventSource cannot send headers).
"use strict";

const STATUSES = ["working", "input_required", "completed", "failed", "cancelled"];
const TOKEN_KEY = "mcpq-console-token";
const $ = (sel) => document.querySelector(sel);

const state = {
  rows: new Map(),   // id → row, the tasks the table shows
  counts: {},        // tool → status → n
  matched: 0,        // tasks matching the filters (the table shows the newest)
  selected: "",
  streamAbort: null,
  reloadTimer: 0,
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

function badge(status) { return el("span", { class: "badge s-" + status }, status); }
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
  const ans = await api("tasks?" + q);
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
  return (!tool || r.tool === tool) && (!status || r.status === status);
}

function rowElement(r) {
  const tr = el("tr", { "data-id": r.id, "data-status": r.status, "data-attempt": r.attempt },
    el("td", {}, clock(r.createdAt)),
    el("td", {}, r.tool),
    el("td", {}, el("code", {}, r.id.slice(0, 10) + "…")),
    el("td", { class: "status" }, badge(r.status)),
    el("td", {}, r.attempt),
    el("td", {}, r.worker || waiting(r)),
    el("td", { class: "msg", title: r.statusMessage || "" }, r.statusMessage || ""),
    el("td", {}, isActive(r.status) ? el("button", { class: "cancel", type: "button", "data-id": r.id }, "cancel") : ""));
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
  if (old) c[old.status] = Math.max(0, (c[old.status] || 1) - 1);
  if (old || r.attempt === 0) c[r.status] = (c[r.status] || 0) + 1;
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

// --- the detail pane ---

async function showDetail(id) {
  state.selected = id;
  for (const tr of document.querySelectorAll("#tasks tbody tr")) tr.classList.toggle("sel", tr.dataset.id === id);
  const d = await api("tasks/" + encodeURIComponent(id));
  if (state.selected !== id) return;
  const t = d.task, tm = d.timings;
  const dl = el("dl", {},
    el("dt", {}, "status"), el("dd", {}, badge(t.status)),
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
  const runs = el("ul", { id: "attempts" }, ...d.attempts.map((a) =>
    el("li", {}, `attempt ${a.n} picked up ${clock(a.at)}${a.worker ? " by " + a.worker : ""}`)));
  const pane = $("#detail");
  pane.dataset.id = t.id;
  pane.dataset.status = t.status;
  pane.replaceChildren(el("h3", {}, t.id), dl,
    isActive(t.status) ? el("button", { class: "cancel", type: "button", "data-id": t.id }, "cancel task") : "",
    el("h2", {}, "attempts seen"), ...attemptsSeen(t, d.attempts, runs),
    el("h2", {}, "record"), el("pre", {}, JSON.stringify(t, null, 2)));
}

// attemptsSeen explains a history with gaps: the console notes pick-ups
// only while it is in use, so attempts made before it was opened are unknown.
function attemptsSeen(t, attempts, runs) {
  if (!attempts.length) {
    return [el("p", { class: "why" }, t.attempt ? "none seen: the console notes pick-ups only while it is open" : "none yet")];
  }
  if (attempts[0].n > 1) {
    return [runs, el("p", { class: "why" }, `attempts before ${attempts[0].n} ran while the console was not open`)];
  }
  return [runs];
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
  });
  for (const f of ["#f-tool", "#f-status"]) $(f).addEventListener("change", () => reload().catch(() => {}));
  start();
});
