// Drives an mcpqueue endpoint on the 2025-11-25 wire with the official
// @modelcontextprotocol/sdk@1.32.2 Client (StreamableHTTPClientTransport) and
// its experimental tasks API (client.experimental.tasks).
//
//   node clients/sdk-v1-tasks.mjs URL SCENARIO [ARGS...]
//
// Scenarios:
//   stream-result URL TOOL ARGS_JSON EXPECT
//       callToolStream(..., {task:{ttl:60000}}) consumed to its final result,
//       whose first text block must contain EXPECT; then tasks/get says
//       completed and tasks/result returns the result with related-task _meta.
//   stream-failure URL TOOL ARGS_JSON
//       a tool that ends with a tool error: the stream must report the task
//       failed (no result); tasks/get says failed; tasks/result returns the
//       CallToolResult with isError:true.
//   elicit URL [FILENAME]
//       confirm_delete {filename} as a task; the task's elicitation/create
//       reaches setRequestHandler(ElicitRequestSchema) exactly once (on the
//       tasks/result stream, id mcpq-input:<task>:<key>, related-task _meta);
//       it answers accept {confirm:true}; the result contains "Deleted".
//   elicit URL TOOL ARGS_JSON ANSWER_JSON EXPECT
//       the same with any tool: its elicitation is answered with ANSWER_JSON
//       and the result must contain EXPECT.
//   list URL [TOOL [ARGS_JSON]]
//       creates 2 tasks (default wait {"ms":300}) in this session; tasks/list
//       (all pages) shows both; a second client (another session) does not
//       see them in its tasks/list and gets -32602 from tasks/get on them.
//   cancel URL [TOOL [ARGS_JSON]]
//       starts wait {"ms":60000} as a task, waits until its handler runs
//       (statusMessage contains the 3rd argument or MCPQ_CANCEL_WHEN,
//       default "waiting"),
//       tasks/cancel → the returned Task is cancelled; tasks/get confirms;
//       a second tasks/cancel is -32602.
//
// Run it from integration/node (ESM resolves the packages from there). On
// success the last stdout line is {"ok":true,...}; on failure it prints
// {"ok":false,"reason":...}, the wire log on stderr, and exits 1.
// MCPQ_TIMEOUT_MS bounds the whole run (default 90000); MCPQ_WIRE=1 prints
// the wire log on stderr on success too.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

const PROTOCOL_VERSION = "2025-11-25";
const RELATED_TASK = "io.modelcontextprotocol/related-task";
const INPUT_ID_PREFIX = "mcpq-input:";
const TTL = 60000;
const clientInfo = { name: "mcpqueue-it-sdk-v1", version: "0.0.1" };
// The client side of the 2025-11-25 tasks capability
// (https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks),
// plus elicitation
// (required before setRequestHandler(ElicitRequestSchema)).
const clientCapabilities = {
  elicitation: {},
  tasks: {
    list: {},
    cancel: {},
    requests: { sampling: { createMessage: {} }, elicitation: { create: {} } },
  },
};

const [urlArg, scenario, ...rest] = process.argv.slice(2);
const SCENARIOS = ["stream-result", "stream-failure", "elicit", "list", "cancel"];
if (!urlArg || !SCENARIOS.includes(scenario)) {
  console.error(`usage: node sdk-v1-tasks.mjs URL {${SCENARIOS.join("|")}} [ARGS...]`);
  process.exit(2);
}
const url = new URL(urlArg);
const timeoutMs = Number(process.env.MCPQ_TIMEOUT_MS ?? 90000);
const started = Date.now();

// ---- failure handling --------------------------------------------------------
class CheckError extends Error {}
function check(cond, reason) {
  if (!cond) throw new CheckError(reason);
}
const wire = []; // every HTTP exchange of every client, for checks and failure reports
const clientErrors = []; // client/transport onerror reports
function fail(reason) {
  console.log(JSON.stringify({ ok: false, scenario, reason }));
  console.error(`FAIL (${scenario}): ${reason}`);
  console.error("wire log:");
  for (const w of wire) console.error("  " + JSON.stringify(w));
  if (clientErrors.length) console.error("client errors:\n  " + clientErrors.join("\n  "));
  process.exit(1);
}
const overall = setTimeout(() => fail(`scenario did not finish within ${timeoutMs} ms`), timeoutMs);
process.on("unhandledRejection", (e) => fail(`unhandled rejection: ${e?.stack ?? e}`));

// ---- wire recording: a fetch wrapper handed to the transport ----------------
const pendingReads = new Set(); // HTTP exchanges and response streams still in flight
function summarize(msg) {
  const m = { id: msg.id };
  if (msg.method !== undefined) m.method = msg.method;
  if ("result" in msg) {
    m.result = true;
    const rel = msg.result?._meta?.[RELATED_TASK];
    if (rel) m.relatedTask = rel.taskId;
    if (msg.result?.task?.taskId) m.taskId = msg.result.task.taskId;
    if (typeof msg.result?.status === "string") m.status = msg.result.status;
  }
  if ("error" in msg) m.error = msg.error;
  if (msg.method !== undefined) {
    const rel = msg.params?._meta?.[RELATED_TASK];
    if (rel) m.relatedTask = rel.taskId;
  }
  if (msg.method === "notifications/tasks/status") m.task = msg.params;
  return m;
}

function recordingFetch(label) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers ?? {});
    const entry = { client: label, http: init.method ?? "GET" };
    if (typeof init.body === "string") {
      try {
        const m = JSON.parse(init.body);
        entry.kind = m.method === undefined ? "response" : m.id === undefined ? "notification" : "request";
        if (m.method !== undefined) entry.method = m.method;
        if (m.id !== undefined) entry.id = m.id;
        if (m.params?.taskId !== undefined) entry.taskId = m.params.taskId;
        if (m.params?.task !== undefined) entry.task = m.params.task;
        if (entry.kind === "response") entry.answer = "error" in m ? { error: m.error } : { action: m.result?.action };
      } catch { entry.kind = "unparsable"; }
    }
    entry.session = headers.get("mcp-session-id") ?? undefined;
    entry.version = headers.get("mcp-protocol-version") ?? undefined;
    wire.push(entry);
    let res;
    const exchange = fetch(input, init);
    const tracked = exchange.catch(() => {});
    pendingReads.add(tracked);
    tracked.finally(() => pendingReads.delete(tracked));
    try {
      res = await exchange;
    } catch (e) {
      entry.transportError = String(e?.message ?? e);
      throw e;
    }
    entry.status = res.status;
    entry.contentType = res.headers.get("content-type") ?? "";
    const sid = res.headers.get("mcp-session-id");
    if (sid) entry.newSession = sid;
    if (!res.body) return res;
    if (entry.contentType.includes("text/event-stream")) {
      const [mine, theirs] = res.body.tee();
      entry.messages = [];
      const p = (async () => {
        const reader = mine.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
            const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
            if (!data) continue;
            try { entry.messages.push(summarize(JSON.parse(data))); } catch { entry.messages.push({ unparsable: data.slice(0, 200) }); }
          }
        }
        entry.streamEnded = true;
      })().catch((e) => { entry.streamError = String(e?.message ?? e); });
      pendingReads.add(p);
      p.finally(() => pendingReads.delete(p));
      return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    const text = await res.text();
    if (entry.contentType.includes("application/json") && text) {
      try { entry.messages = [summarize(JSON.parse(text))]; } catch { entry.body = text.slice(0, 300); }
    } else if (text) {
      entry.body = text.slice(0, 300);
    }
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// Errors a scenario expects: JSON-RPC error answers to (label, method) with a code.
const expectedErrors = [];
function expectError(label, method, code) { expectedErrors.push({ label, method, code }); }

async function settleReads() {
  await Promise.race([Promise.allSettled([...pendingReads]), new Promise((r) => setTimeout(r, 2000))]);
}

// Every exchange must be clean: requests answered 200 with their own id,
// notifications and responses 202, the session and version headers on
// everything after initialize, and only the errors the scenario expects.
function checkWire() {
  const sessions = {};
  for (const w of wire) {
    const where = `${w.client} ${w.http} ${w.method ?? w.kind}${w.id !== undefined ? ` id=${JSON.stringify(w.id)}` : ""}`;
    check(!w.transportError, `${where}: transport error ${w.transportError}`);
    if (w.http === "GET") {
      check(w.status === 405 || w.status === 200, `${where}: HTTP ${w.status}`);
      continue;
    }
    if (w.http !== "POST") continue;
    if (w.method === "initialize") {
      check(w.status === 200, `${where}: HTTP ${w.status} ${w.body ?? ""}`);
      check(w.session === undefined, `${where}: initialize sent a session id`);
      check(typeof w.newSession === "string" && /^[\x21-\x7e]+$/.test(w.newSession), `${where}: no valid Mcp-Session-Id in the answer (${w.newSession})`);
      sessions[w.client] = w.newSession;
    } else {
      check(sessions[w.client] && w.session === sessions[w.client], `${where}: Mcp-Session-Id ${w.session}, want ${sessions[w.client]}`);
      check(w.version === PROTOCOL_VERSION, `${where}: MCP-Protocol-Version ${w.version}, want ${PROTOCOL_VERSION}`);
      check(!w.newSession || w.newSession === sessions[w.client], `${where}: the server changed the session id to ${w.newSession}`);
    }
    if (w.kind === "notification" || w.kind === "response") {
      check(w.status === 202, `${where}: HTTP ${w.status} (want 202) ${w.body ?? ""}`);
      continue;
    }
    check(w.status === 200, `${where}: HTTP ${w.status} ${w.body ?? ""}`);
    const own = (w.messages ?? []).filter((m) => m.method === undefined && m.id === w.id);
    check(own.length === 1, `${where}: ${own.length} JSON-RPC answers with our id (messages ${JSON.stringify(w.messages)})`);
    const stray = (w.messages ?? []).filter((m) => m.method === undefined && m.id !== w.id);
    check(stray.length === 0, `${where}: answers with foreign ids ${JSON.stringify(stray)}`);
    if (own[0].error) {
      const ok = expectedErrors.some((e) => e.label === w.client && e.method === w.method && e.code === own[0].error.code);
      check(ok, `${where}: unexpected JSON-RPC error ${JSON.stringify(own[0].error)}`);
    }
    // server-to-client requests (input requests of a task)
    for (const m of (w.messages ?? []).filter((m) => m.method !== undefined && m.id !== undefined)) {
      check(typeof m.id === "string" && m.id.startsWith(INPUT_ID_PREFIX), `${where}: server request id ${JSON.stringify(m.id)} lacks ${INPUT_ID_PREFIX}`);
      if (w.method === "tasks/result") {
        check(m.relatedTask === w.taskId, `${where}: server request ${m.method} related-task ${m.relatedTask}, want ${w.taskId}`);
        check(m.id.startsWith(`${INPUT_ID_PREFIX}${w.taskId}:`), `${where}: server request id ${m.id} does not name task ${w.taskId}`);
      }
    }
    // notifications/tasks/status: a full Task of the stream's task, without related-task (§2.5, §2.6)
    for (const m of (w.messages ?? []).filter((m) => m.method === "notifications/tasks/status")) {
      checkTask(m.task, `${where}: notifications/tasks/status`);
      check(m.task.taskId === w.taskId, `${where}: notifications/tasks/status for ${m.task.taskId}, want ${w.taskId}`);
      check(m.relatedTask === undefined, `${where}: notifications/tasks/status carries related-task _meta`);
    }
    if (w.method === "tasks/result" && own[0].result) {
      check(own[0].relatedTask === w.taskId, `${where}: tasks/result without related-task _meta for ${w.taskId} (got ${own[0].relatedTask})`);
    }
  }
  check(clientErrors.length === 0, `client reported errors: ${clientErrors.join("; ")}`);
}
const sent = (label, method, taskId) =>
  wire.filter((w) => w.client === label && w.method === method && w.kind === "request" && (taskId === undefined || w.taskId === taskId));

// ---- clients -------------------------------------------------------------------
const clients = [];
async function connect(label) {
  const client = new Client(clientInfo, { capabilities: clientCapabilities });
  client.onerror = (e) => clientErrors.push(`${label}: ${e?.message ?? e}`);
  const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch(label) });
  await client.connect(transport); // initialize + notifications/initialized (+ GET stream, 405 ok)
  clients.push(client);
  check(transport.protocolVersion === PROTOCOL_VERSION, `${label}: negotiated protocol ${transport.protocolVersion}, want ${PROTOCOL_VERSION}`);
  check(typeof transport.sessionId === "string" && transport.sessionId.length > 0, `${label}: no session id`);
  const tasks = client.getServerCapabilities()?.tasks;
  check(tasks?.list && tasks?.cancel && tasks?.requests?.tools?.call,
    `${label}: server capabilities.tasks ${JSON.stringify(tasks)}, want list, cancel and requests.tools.call`);
  return { client, transport, label };
}

async function listTools(c) {
  const { tools } = await c.client.listTools(); // caches execution.taskSupport
  check(Array.isArray(tools), `tools/list returned no tools array`);
  return tools;
}

async function taskTool(c, name) {
  const tools = await listTools(c);
  const decl = tools.find((t) => t.name === name);
  check(decl, `tool ${name} not in tools/list (got ${tools.map((t) => t.name).join(", ") || "none"})`);
  const support = decl.execution?.taskSupport;
  check(support === "optional" || support === "required", `tool ${name} execution.taskSupport is ${JSON.stringify(support)}, want optional or required`);
  return decl;
}

const STATUSES = ["working", "input_required", "completed", "failed", "cancelled"];
// A 2025-11-25 Task, strictly (the SDK's own schema is looser about extra keys).
function checkTask(t, where) {
  check(t && typeof t === "object", `${where}: no task`);
  check(typeof t.taskId === "string" && t.taskId.length > 0, `${where}: taskId ${JSON.stringify(t.taskId)}`);
  check(STATUSES.includes(t.status), `${where}: status ${JSON.stringify(t.status)}`);
  check("ttl" in t && (t.ttl === null || (Number.isInteger(t.ttl) && t.ttl > 0)), `${where}: ttl ${JSON.stringify(t.ttl)}`);
  for (const k of ["createdAt", "lastUpdatedAt"]) check(typeof t[k] === "string" && !Number.isNaN(Date.parse(t[k])), `${where}: ${k} ${JSON.stringify(t[k])}`);
  if (t.pollInterval !== undefined) check(Number.isInteger(t.pollInterval) && t.pollInterval > 0, `${where}: pollInterval ${t.pollInterval}`);
  if (t.statusMessage !== undefined) check(typeof t.statusMessage === "string", `${where}: statusMessage ${JSON.stringify(t.statusMessage)}`);
  check(!("resultType" in t), `${where}: a 2026-07-28 resultType leaked into a 2025-11-25 task: ${JSON.stringify(t)}`);
  check(!("ttlMs" in t) && !("pollIntervalMs" in t), `${where}: 2026-07-28 field names in a 2025-11-25 task: ${JSON.stringify(t)}`);
}

function textOf(result) {
  check(Array.isArray(result?.content) && result.content.length > 0, `result has no content: ${JSON.stringify(result)}`);
  const block = result.content[0];
  check(block.type === "text" && typeof block.text === "string", `first content block is not text: ${JSON.stringify(block)}`);
  return block.text;
}

// Consumes callToolStream to its end and returns what it yielded.
async function stream(c, name, args) {
  const out = { taskId: undefined, created: undefined, statuses: [], result: undefined, error: undefined, order: [] };
  const messages = c.client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
    task: { ttl: TTL },
    timeout: timeoutMs, // tasks/result blocks until terminal
  });
  for await (const msg of messages) {
    out.order.push(msg.type);
    if (msg.type === "taskCreated") {
      check(out.created === undefined, "two taskCreated messages");
      checkTask(msg.task, "CreateTaskResult.task");
      out.created = msg.task;
      out.taskId = msg.task.taskId;
    } else if (msg.type === "taskStatus") {
      checkTask(msg.task, "tasks/get");
      check(msg.task.taskId === out.taskId, `tasks/get answered for ${msg.task.taskId}, want ${out.taskId}`);
      out.statuses.push(msg.task.status);
    } else if (msg.type === "result") {
      check(out.result === undefined && out.error === undefined, "a second final message");
      out.result = msg.result;
    } else if (msg.type === "error") {
      check(out.result === undefined && out.error === undefined, "a second final message");
      out.error = msg.error;
    } else {
      throw new CheckError(`unknown stream message type ${msg.type}`);
    }
  }
  check(out.order[0] === "taskCreated", `the stream did not start with taskCreated: ${out.order.join(",")} ${out.error ? `(${out.error.code} ${out.error.message})` : ""}`);
  check(out.created.status === "working", `created task status ${out.created.status}, want working`);
  check(out.created.ttl === TTL, `created task ttl ${out.created.ttl}, want the requested ${TTL}`);
  const tc = sent(c.label, "tools/call").at(-1);
  check(tc?.task?.ttl === TTL, `tools/call was not sent with params.task.ttl=${TTL}: ${JSON.stringify(tc)}`);
  return out;
}

// ---- scenarios -----------------------------------------------------------------
async function streamResult() {
  const [tool, argsJSON, expect] = rest;
  check(tool && argsJSON && expect, "stream-result needs TOOL ARGS_JSON EXPECT");
  const c = await connect("A");
  const decl = await taskTool(c, tool);
  const s = await stream(c, tool, JSON.parse(argsJSON));
  check(s.error === undefined, `task ${s.taskId}: the stream reported an error: ${s.error?.code} ${s.error?.message}`);
  check(s.result, `task ${s.taskId}: the stream ended without a result (${s.order.join(",")})`);
  check(s.result.isError !== true, `task ${s.taskId}: result isError: ${JSON.stringify(s.result)}`);
  check(s.statuses.at(-1) === "completed", `last polled status ${s.statuses.at(-1)}, want completed (saw ${s.statuses.join(",")})`);
  const text = textOf(s.result);
  check(text.includes(expect), `result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);
  if (decl.outputSchema) check(s.result.structuredContent && typeof s.result.structuredContent === "object", "tool declares outputSchema but result has no structuredContent");
  check(s.result._meta?.[RELATED_TASK]?.taskId === s.taskId, `tasks/result _meta lacks related-task ${s.taskId}: ${JSON.stringify(s.result._meta)}`);

  // The terminal state and the result are durable.
  const t = await c.client.experimental.tasks.getTask(s.taskId);
  checkTask(t, "getTask");
  check(t.taskId === s.taskId && t.status === "completed", `getTask after the stream: ${JSON.stringify(t)}`);
  const again = await c.client.experimental.tasks.getTaskResult(s.taskId, CallToolResultSchema);
  check(textOf(again) === text, `getTaskResult text ${JSON.stringify(textOf(again))} != streamed ${JSON.stringify(text)}`);
  check(again._meta?.[RELATED_TASK]?.taskId === s.taskId, `getTaskResult without related-task _meta: ${JSON.stringify(again._meta)}`);
  check(sent("A", "tasks/get", s.taskId).length >= 2, "the client never polled tasks/get");
  check(sent("A", "tasks/result", s.taskId).length === 2, `tasks/result sent ${sent("A", "tasks/result", s.taskId).length} times, want 2`);
  return { tool, taskId: s.taskId, status: t.status, statuses: s.statuses, text, ttl: s.created.ttl, pollInterval: s.created.pollInterval };
}

async function streamFailure() {
  const [tool, argsJSON] = rest;
  check(tool && argsJSON, "stream-failure needs TOOL ARGS_JSON");
  const c = await connect("A");
  await taskTool(c, tool);
  const s = await stream(c, tool, JSON.parse(argsJSON));
  check(s.result === undefined, `task ${s.taskId}: the stream yielded a result for a failing tool: ${JSON.stringify(s.result)}`);
  check(s.error instanceof McpError, `task ${s.taskId}: the stream ended without an error (${s.order.join(",")})`);
  check(s.error.message.includes(`Task ${s.taskId} failed`), `stream error ${s.error.code} ${JSON.stringify(s.error.message)}, want "Task ${s.taskId} failed"`);
  check(s.statuses.at(-1) === "failed", `last polled status ${s.statuses.at(-1)}, want failed (saw ${s.statuses.join(",")})`);
  check(!s.statuses.includes("completed"), `a tool error showed as completed on the 2025-11-25 wire: ${s.statuses.join(",")}`);
  check(sent("A", "tasks/result").length === 0, "the SDK called tasks/result for a failed task");

  const t = await c.client.experimental.tasks.getTask(s.taskId);
  checkTask(t, "getTask");
  check(t.status === "failed", `getTask after the failure: ${JSON.stringify(t)}`);
  check(typeof t.statusMessage === "string" && t.statusMessage.length > 0, `failed task without a statusMessage: ${JSON.stringify(t)}`);
  // tasks/result returns what tools/call would have: the CallToolResult with isError.
  const r = await c.client.experimental.tasks.getTaskResult(s.taskId, CallToolResultSchema);
  check(r.isError === true, `tasks/result of the failed task: ${JSON.stringify(r)}, want isError:true`);
  check(r._meta?.[RELATED_TASK]?.taskId === s.taskId, `tasks/result without related-task _meta: ${JSON.stringify(r._meta)}`);
  // A failed task is terminal: it cannot be cancelled.
  expectError("A", "tasks/cancel", -32602);
  let code;
  try { await c.client.experimental.tasks.cancelTask(s.taskId); } catch (e) { code = e?.code; }
  check(code === -32602, `tasks/cancel of a failed task: code ${code}, want -32602`);
  return { tool, taskId: s.taskId, status: t.status, statuses: s.statuses, statusMessage: t.statusMessage, text: textOf(r), streamError: s.error.message };
}

async function elicit() {
  // elicit [FILENAME] (confirm_delete) or elicit TOOL ARGS_JSON ANSWER_JSON EXPECT.
  const generic = rest.length >= 4;
  const filename = generic ? "" : rest[0] ?? "report.pdf";
  const tool = generic ? rest[0] : "confirm_delete";
  const args = generic ? JSON.parse(rest[1]) : { filename };
  const answer = generic ? JSON.parse(rest[2]) : { action: "accept", content: { confirm: true } };
  const expect = generic ? rest[3] : "Deleted";
  const c = await connect("A");
  const calls = [];
  let handlerFailure;
  c.client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
    calls.push({ id: extra.requestId, related: req.params._meta?.[RELATED_TASK]?.taskId, message: req.params.message });
    if (generic) return answer;
    try {
      check(typeof req.params.message === "string" && req.params.message.includes(filename), `elicitation message ${JSON.stringify(req.params.message)} does not name ${filename}`);
      const confirm = req.params.requestedSchema?.properties?.confirm;
      check(confirm?.type === "boolean", `requestedSchema has no boolean confirm: ${JSON.stringify(req.params.requestedSchema)}`);
    } catch (e) {
      handlerFailure ??= e.message;
      throw e;
    }
    return answer;
  });
  await taskTool(c, tool);
  const s = await stream(c, tool, args);
  if (handlerFailure) throw new CheckError(`elicitation handler: ${handlerFailure}`);
  check(s.error === undefined, `task ${s.taskId}: the stream reported an error: ${s.error?.code} ${s.error?.message}`);
  check(s.result, `task ${s.taskId}: no result (${s.order.join(",")})`);
  check(s.result.isError !== true, `result isError: ${JSON.stringify(s.result)}`);
  const text = textOf(s.result);
  check(text.includes(expect), `result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);
  check(calls.length === 1, `the elicitation handler ran ${calls.length} times, want 1: ${JSON.stringify(calls)}`);
  const call = calls[0];
  check(call.related === s.taskId, `elicitation related-task ${call.related}, want ${s.taskId}`);
  check(typeof call.id === "string" && call.id.startsWith(`${INPUT_ID_PREFIX}${s.taskId}:`), `elicitation request id ${JSON.stringify(call.id)}, want ${INPUT_ID_PREFIX}${s.taskId}:<key>`);
  check(s.statuses.includes("input_required"), `the client never saw input_required (saw ${s.statuses.join(",")})`);
  // The elicitation came on the tasks/result stream, and the answer was
  // accepted (202). The task may finish before the 202 reaches us: wait for it.
  await settleReads();
  const results = sent("A", "tasks/result", s.taskId);
  check(results.some((w) => (w.messages ?? []).some((m) => m.method === "elicitation/create")), "the elicitation did not arrive on a tasks/result stream");
  const answers = wire.filter((w) => w.client === "A" && w.kind === "response");
  check(answers.length === 1 && answers[0].id === call.id && answers[0].answer?.action === "accept" && answers[0].status === 202,
    `answers POSTed: ${JSON.stringify(answers)}`);
  const t = await c.client.experimental.tasks.getTask(s.taskId);
  checkTask(t, "getTask");
  check(t.status === "completed", `getTask after the stream: ${JSON.stringify(t)}`);
  return { tool, taskId: s.taskId, status: t.status, statuses: s.statuses, text, inputRequests: calls.length, inputId: call.id };
}

async function create(c, name, args) {
  const created = await c.client.request(
    { method: "tools/call", params: { name, arguments: args, task: { ttl: TTL } } },
    CreateTaskResultSchema,
  );
  checkTask(created.task, "CreateTaskResult.task");
  check(created.task.status === "working", `created task status ${created.task.status}, want working`);
  return created.task;
}

async function listAll(c) {
  const tasks = [];
  const cursors = new Set();
  let cursor;
  for (let page = 0; page < 100; page++) {
    const res = await c.client.experimental.tasks.listTasks(cursor);
    check(Array.isArray(res.tasks), `${c.label}: tasks/list without a tasks array: ${JSON.stringify(res)}`);
    for (const t of res.tasks) checkTask(t, `${c.label} tasks/list`);
    tasks.push(...res.tasks);
    if (res.nextCursor === undefined) return tasks;
    check(typeof res.nextCursor === "string" && !cursors.has(res.nextCursor), `${c.label}: bad or repeated nextCursor ${JSON.stringify(res.nextCursor)}`);
    cursors.add(res.nextCursor);
    cursor = res.nextCursor;
  }
  throw new CheckError(`${c.label}: tasks/list did not end after 100 pages`);
}

async function list() {
  const tool = rest[0] ?? "wait";
  const args = JSON.parse(rest[1] ?? '{"ms":300}');
  const a = await connect("A");
  await taskTool(a, tool);
  const t1 = await create(a, tool, args);
  const t2 = await create(a, tool, args);
  check(t1.taskId !== t2.taskId, `two tasks with one id ${t1.taskId}`);
  const ids = [t1.taskId, t2.taskId];

  const listedA = await listAll(a);
  const idsA = listedA.map((t) => t.taskId);
  for (const id of ids) check(idsA.includes(id), `session A's tasks/list lacks ${id}: ${JSON.stringify(idsA)}`);
  check(new Set(idsA).size === idsA.length, `session A's tasks/list repeats tasks: ${JSON.stringify(idsA)}`);
  for (const t of listedA.filter((t) => ids.includes(t.taskId))) {
    const g = await a.client.experimental.tasks.getTask(t.taskId);
    check(g.taskId === t.taskId && g.createdAt === t.createdAt, `tasks/get ${t.taskId} disagrees with tasks/list: ${JSON.stringify(g)} vs ${JSON.stringify(t)}`);
  }

  const b = await connect("B");
  check(b.transport.sessionId !== a.transport.sessionId, "the second client got the first one's session");
  const listedB = await listAll(b);
  const idsB = listedB.map((t) => t.taskId);
  for (const id of ids) check(!idsB.includes(id), `session B's tasks/list shows session A's task ${id}`);
  // Tasks are bound to their session: B cannot read A's tasks either.
  expectError("B", "tasks/get", -32602);
  for (const id of ids) {
    let code;
    try { await b.client.experimental.tasks.getTask(id); } catch (e) { code = e?.code; }
    check(code === -32602, `session B tasks/get of A's task ${id}: code ${code}, want -32602`);
  }
  return { tool, taskIds: ids, listedA: idsA, listedB: idsB, sessionA: a.transport.sessionId, sessionB: b.transport.sessionId };
}

async function cancel() {
  const tool = rest[0] ?? "wait";
  const args = JSON.parse(rest[1] ?? '{"ms":60000}');
  const when = rest[2] ?? process.env.MCPQ_CANCEL_WHEN ?? "waiting";
  const c = await connect("A");
  await taskTool(c, tool);
  const t0 = Date.now();
  const created = await create(c, tool, args);
  const id = created.taskId;
  // Wait until the handler runs (its progress message shows in statusMessage).
  let seen;
  for (;;) {
    seen = await c.client.experimental.tasks.getTask(id);
    checkTask(seen, "getTask");
    check(seen.status === "working", `task ${id} is ${seen.status} before the cancel: ${JSON.stringify(seen)}`);
    if ((seen.statusMessage ?? "").includes(when)) break;
    check(Date.now() - t0 < 30000, `the handler of ${id} did not start within 30 s (statusMessage ${JSON.stringify(seen.statusMessage)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const cancelled = await c.client.experimental.tasks.cancelTask(id);
  checkTask(cancelled, "cancelTask");
  check(cancelled.taskId === id && cancelled.status === "cancelled", `tasks/cancel returned ${JSON.stringify(cancelled)}, want the task cancelled`);
  const after = await c.client.experimental.tasks.getTask(id);
  checkTask(after, "getTask");
  check(after.status === "cancelled", `getTask after cancel: ${JSON.stringify(after)}`);
  expectError("A", "tasks/cancel", -32602);
  let code, message;
  try { await c.client.experimental.tasks.cancelTask(id); } catch (e) { code = e?.code; message = e?.message; }
  check(code === -32602, `a second tasks/cancel: code ${code}, want -32602`);
  // Still cancelled a moment later (the handler's end must not overwrite it).
  await new Promise((r) => setTimeout(r, 500));
  const later = await c.client.experimental.tasks.getTask(id);
  check(later.status === "cancelled", `getTask 500 ms after cancel: ${JSON.stringify(later)}`);
  return { tool, taskId: id, status: after.status, elapsedMs: Date.now() - t0, statusMessage: seen.statusMessage, secondCancel: message };
}

try {
  const run = { "stream-result": streamResult, "stream-failure": streamFailure, elicit, list, cancel }[scenario];
  const summary = await run();
  // Every response stream must end once its answer is sent: wait for them
  // (bounded), then close (which aborts any stream still open → onerror).
  await settleReads();
  for (const c of clients) await c.close();
  checkWire();
  clearTimeout(overall);
  if (process.env.MCPQ_WIRE) for (const w of wire) console.error("  " + JSON.stringify(w));
  console.log(JSON.stringify({ ok: true, scenario, ...summary, requests: wire.length, elapsedMs: summary.elapsedMs ?? Date.now() - started }));
  process.exit(0);
} catch (e) {
  await settleReads().catch(() => {});
  fail(e instanceof CheckError ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}${e?.code !== undefined ? ` (code ${e.code})` : ""}`);
}
