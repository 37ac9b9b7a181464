// Drives an mcpqueue endpoint with the official 2026-07-28 client:
// @modelcontextprotocol/client@2.4.0 (pinned to 2026-07-28) plus
// @modelcontextprotocol/ext-tasks@0.2.2 (io.modelcontextprotocol/tasks).
//
//   node clients/ext-tasks.mjs URL SCENARIO [TOOL [ARGS_JSON [EXPECT]]]
//
// Scenarios:
//   list-and-settle  list tools, call a task tool, settle it; the task must
//                    complete with a text result containing EXPECT.
//                    TOOL/ARGS/EXPECT from argv or MCPQ_TOOL / MCPQ_ARGS /
//                    MCPQ_EXPECT (default: render_report {title,pages:2},
//                    expecting "2 pages rendered").
//   cancel           start a long task (default wait {ms:60000}), wait until its
//                    handler runs (statusMessage contains the 5th argument or
//                    MCPQ_CANCEL_WHEN, default "waiting"), cancel it with
//                    execution.cancel() and check with tasks/get that it ends
//                    "cancelled".
//   elicit           call confirm_delete {filename}; the onInputRequest handler
//                    accepts with {confirm:true}; the task must complete with
//                    "Deleted <filename>" after exactly one input request.
//                    With a 6th argument ANSWER_JSON (TOOL ARGS_JSON EXPECT
//                    before it), any tool's elicitation is answered with it.
//   adaptive         call a short tool (default noop, expecting "ok") letting
//                    the server choose (task preference "allow"): the answer
//                    must be the result itself (kind "immediate", resultType
//                    "complete", no tasks/get); then a long one (wait
//                    {ms:2000}) must still come back as a task and settle.
//   listen           call a task tool (default wait {ms:1500}), open
//                    client.listen({taskIds:[id]}) (subscriptions/listen) and
//                    settle; the client must receive notifications/tasks for
//                    the task, ending with completed and a result containing
//                    EXPECT, and the server must then end the subscription
//                    gracefully.
//
// Run it from integration/node (ESM resolves the packages from there). On
// success the last stdout line is {"ok":true,...}; on failure it prints
// {"ok":false,"reason":...}, the wire log on stderr, and exits 1.
// MCPQ_TIMEOUT_MS bounds the whole run (default 90000).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  DispatchError,
  resultFromTaskOutcome,
} from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL_VERSION = "2026-07-28";
const TASKS_EXT = "io.modelcontextprotocol/tasks";
const clientInfo = { name: "mcpqueue-it-ext-tasks", version: "0.0.1" };
const clientCapabilities = { elicitation: {}, sampling: {}, roots: {} };

const [urlArg, scenario, toolArg, argsArg, expectArg, answerArg] = process.argv.slice(2);
const SCENARIOS = ["list-and-settle", "cancel", "elicit", "listen", "adaptive"];
if (!urlArg || !SCENARIOS.includes(scenario)) {
  console.error(`usage: node ext-tasks.mjs URL {${SCENARIOS.join("|")}} [TOOL [ARGS_JSON [EXPECT]]]`);
  process.exit(2);
}
const url = new URL(urlArg);
const timeoutMs = Number(process.env.MCPQ_TIMEOUT_MS ?? 90000);

// ---- failure handling --------------------------------------------------------
class CheckError extends Error {}
function check(cond, reason) {
  if (!cond) throw new CheckError(reason);
}
const wire = []; // every rawDispatch exchange, for checks and failure reports
function fail(reason) {
  console.log(JSON.stringify({ ok: false, scenario, reason }));
  console.error(`FAIL (${scenario}): ${reason}`);
  console.error("wire log:");
  for (const w of wire) console.error("  " + JSON.stringify(w));
  process.exit(1);
}
const overall = setTimeout(() => fail(`scenario did not finish within ${timeoutMs} ms`), timeoutMs);
process.on("unhandledRejection", (e) => fail(`unhandled rejection: ${e?.stack ?? e}`));

// ---- rawDispatch: one POST per request with the 2026-07-28 headers ----------
const NAME_FIELD = {
  "tools/call": "name", "prompts/get": "name", "resources/read": "uri",
  "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId",
};
const headerSafe = (v) => v.length > 0 && v === v.trim() && /^[\t\x20-\x7e]*$/.test(v)
  && !(v.startsWith("=?base64?") && v.endsWith("?="));
const encodeHeader = (v) => (headerSafe(v) ? v : `=?base64?${Buffer.from(v, "utf8").toString("base64")}?=`);

let nextId = 1;
async function rawDispatch(request, options = {}) {
  const id = `ext-${nextId++}`;
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": request.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? PROTOCOL_VERSION,
    "Mcp-Method": request.method,
  };
  const field = NAME_FIELD[request.method];
  if (field && typeof request.params?.[field] === "string") headers["Mcp-Name"] = encodeHeader(request.params[field]);
  for (const [k, v] of Object.entries(options.context?.headers ?? {})) {
    for (const existing of Object.keys(headers)) if (existing.toLowerCase() === k.toLowerCase()) delete headers[existing];
    headers[k] = k.toLowerCase() === "mcp-name" ? encodeHeader(v) : v;
  }
  const entry = { id, method: request.method, mcpName: headers["Mcp-Name"] };
  if (request.params?.taskId !== undefined) entry.taskId = request.params.taskId;
  entry.declaredTasks = request.params?._meta?.["io.modelcontextprotocol/clientCapabilities"]?.extensions?.[TASKS_EXT] !== undefined;
  wire.push(entry);

  let res;
  try {
    res = await fetch(url, {
      method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id, ...request }), signal: options.signal,
    });
  } catch (e) {
    entry.transportError = String(e?.message ?? e);
    entry.aborted = options.signal?.aborted === true;
    throw new DispatchError(`POST ${request.method} failed: ${e.message}`, true, { cause: e });
  }
  entry.status = res.status;
  const type = res.headers.get("content-type") ?? "";
  entry.contentType = type;
  const text = await res.text();
  let msg;
  if (type.includes("text/event-stream")) {
    for (const line of text.split(/\r?\n/)) {
      if (!line.startsWith("data:")) continue;
      const m = JSON.parse(line.slice(5).trim());
      if (m.id === id && ("result" in m || "error" in m)) msg = m;
    }
  } else {
    try { msg = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
  }
  if (msg && msg.id !== id) entry.idMismatch = msg.id;
  if (msg?.error) {
    entry.error = msg.error;
    return { kind: "error", error: msg.error };
  }
  if (msg && "result" in msg) {
    entry.resultType = msg.result?.resultType;
    if (typeof msg.result?.status === "string") entry.taskStatus = msg.result.status;
    return { kind: "result", result: msg.result };
  }
  entry.body = text.slice(0, 500);
  throw new DispatchError(`POST ${request.method}: HTTP ${res.status} without a JSON-RPC response`, res.status >= 500);
}

// Every exchange must have been a clean 200 with a JSON-RPC answer carrying our id.
function checkWire() {
  for (const w of wire) {
    // A notification that ends the task makes the session abort its poll in flight.
    if (scenario === "listen" && w.method === "tasks/get" && w.aborted) continue;
    check(!w.transportError, `${w.method} ${w.id}: transport error ${w.transportError}`);
    check(w.status === 200, `${w.method} ${w.id}: HTTP ${w.status} (${JSON.stringify(w.error ?? w.body)})`);
    check(w.idMismatch === undefined, `${w.method} ${w.id}: response id ${JSON.stringify(w.idMismatch)}`);
    check(!w.error, `${w.method} ${w.id}: JSON-RPC error ${JSON.stringify(w.error)}`);
    check(w.declaredTasks, `${w.method} ${w.id}: request did not declare ${TASKS_EXT}`);
    if (w.taskId !== undefined) check(w.mcpName === w.taskId, `${w.method}: Mcp-Name ${w.mcpName} != taskId ${w.taskId}`);
  }
}
const sent = (method, taskId) => wire.filter((w) => w.method === method && (taskId === undefined || w.taskId === taskId));

// ---- session -------------------------------------------------------------------
const inputCalls = []; // onInputRequest invocations
let inputFailure; // first check that failed inside onInputRequest (ext-tasks would otherwise wrap it)
let inputAnswer = () => { throw new Error("no input request expected in this scenario"); };

// subscriptions/listen is sent by the Client itself with its own capabilities:
// for task notifications they must declare the tasks extension.
const client = new Client(clientInfo, {
  capabilities: scenario === "listen" ? { ...clientCapabilities, extensions: { [TASKS_EXT]: {} } } : clientCapabilities,
  versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
});
let session;

function textOf(result) {
  check(Array.isArray(result?.content) && result.content.length > 0, `result has no content: ${JSON.stringify(result)}`);
  const block = result.content[0];
  check(block.type === "text" && typeof block.text === "string", `first content block is not text: ${JSON.stringify(block)}`);
  return block.text;
}

async function listTools() {
  const listed = await client.listTools();
  check(Array.isArray(listed?.tools), `tools/list returned no tools array: ${JSON.stringify(listed)}`);
  return listed.tools;
}

// Settles a task execution, recording every status the client observed.
async function settle(execution) {
  const statuses = [];
  const { outcome, lastTask } = await execution.settle({
    onEvent: (ev) => { if (ev.type === "task") statuses.push(ev.task.status); },
  });
  return { outcome, lastTask, statuses };
}

function describeOutcome(outcome) {
  if (outcome.status === "failed") return `failed: code=${outcome.error?.code} ${outcome.error?.message}`;
  return outcome.status;
}

// tasks/get through the official controller (goes through rawDispatch).
async function snapshot(taskId) {
  return session.task(taskId).snapshot();
}

async function listAndSettle() {
  const tool = toolArg ?? process.env.MCPQ_TOOL ?? "render_report";
  const args = JSON.parse(argsArg ?? process.env.MCPQ_ARGS ?? JSON.stringify({ title: "Q3", pages: 2 }));
  const expect = expectArg ?? process.env.MCPQ_EXPECT ?? (tool === "render_report" ? "2 pages rendered" : "");
  check(expect !== "", "no expected result text (MCPQ_EXPECT)");

  const tools = await listTools();
  const decl = tools.find((t) => t.name === tool);
  check(decl, `tool ${tool} not in tools/list (got ${tools.map((t) => t.name).join(", ") || "none"})`);
  check(decl.inputSchema?.type === "object", `tool ${tool} inputSchema.type is ${decl.inputSchema?.type}`);

  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  check(execution.kind === "task", `tools/call ${tool} was answered inline (kind ${execution.kind}), not as a task`);
  const taskId = execution.handle.taskId;
  check(typeof taskId === "string" && taskId.length > 0, "task handle without taskId");

  const { outcome, statuses } = await settle(execution);
  check(outcome.status === "completed", `task ${taskId} ended ${describeOutcome(outcome)}, want completed`);
  const result = resultFromTaskOutcome(outcome);
  check(result.isError !== true, `task ${taskId} completed with isError: ${JSON.stringify(result)}`);
  const text = textOf(result);
  check(text.includes(expect), `result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);
  if (decl.outputSchema) {
    const sc = result.structuredContent;
    check(sc && typeof sc === "object" && !Array.isArray(sc), `tool declares outputSchema but result has no structuredContent`);
    for (const k of decl.outputSchema.required ?? []) check(k in sc, `structuredContent lacks required ${k}: ${JSON.stringify(sc)}`);
  }
  check(sent("tasks/get", taskId).length > 0, "the client never polled tasks/get");

  // The terminal state is durable: a fresh tasks/get still reports it with the result.
  const after = await snapshot(taskId);
  check(after.taskId === taskId && after.status === "completed", `tasks/get after settle: ${after.status}`);
  check(after.raw?.result !== undefined, `tasks/get after settle has no inlined result: ${JSON.stringify(after.raw)}`);
  return { tool, taskId, status: outcome.status, statuses, text };
}

// Adaptive completion: the server answers a short call with its result and
// a long one with a task; the client, not asking for either, handles both.
async function adaptiveScenario() {
  const tool = toolArg ?? process.env.MCPQ_TOOL ?? "noop";
  const args = JSON.parse(argsArg ?? process.env.MCPQ_ARGS ?? "{}");
  const expect = expectArg ?? process.env.MCPQ_EXPECT ?? "ok";

  const short = await session.callTool(tool, args, { task: { preference: "allow" } });
  check(short.kind === "immediate", `tools/call ${tool} came back as ${short.kind}, want the result itself (immediate)`);
  const { outcome } = await short.settle();
  check(outcome.status === "completed", `immediate ${tool} ended ${describeOutcome(outcome)}`);
  const text = textOf(resultFromTaskOutcome(outcome));
  check(text.includes(expect), `result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);
  const calls = sent("tools/call");
  check(calls.length === 1 && calls[0].resultType === "complete", `tools/call ${tool} resultType ${calls[0]?.resultType}, want complete`);
  check(sent("tasks/get").length === 0, `an immediate result was polled with tasks/get`);

  const long = await session.callTool("wait", { ms: 2000 }, { task: { preference: "allow" } });
  check(long.kind === "task", `tools/call wait {ms:2000} came back as ${long.kind}, want a task`);
  const settled = await settle(long);
  check(settled.outcome.status === "completed", `task ${long.handle.taskId} ended ${describeOutcome(settled.outcome)}`);
  return { tool, text, taskId: long.handle.taskId, status: settled.outcome.status, statuses: settled.statuses };
}

async function cancelScenario() {
  const tool = toolArg ?? process.env.MCPQ_TOOL ?? "wait";
  const args = JSON.parse(argsArg ?? process.env.MCPQ_ARGS ?? JSON.stringify({ ms: 60000 }));
  const runningMarker = expectArg ?? process.env.MCPQ_CANCEL_WHEN ?? "waiting";

  const started = Date.now();
  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  check(execution.kind === "task", `tools/call ${tool} was answered inline (kind ${execution.kind}), not as a task`);
  const taskId = execution.handle.taskId;

  // Wait (event-driven, via the execution's own tasks/get polling) until the
  // handler is running, i.e. its progress message shows up in statusMessage.
  const statuses = [];
  let running;
  const isRunning = new Promise((resolve) => { running = resolve; });
  const settlement = execution.settle({
    onEvent: (ev) => {
      if (ev.type !== "task") return;
      statuses.push(ev.task.status);
      if (ev.task.status === "working" && (ev.task.statusMessage ?? "").includes(runningMarker)) running(ev.task);
    },
  });
  const first = await Promise.race([isRunning, settlement.then((s) => ({ settledEarly: s }))]);
  check(!first.settledEarly, `task ${taskId} settled (${first.settledEarly && describeOutcome(first.settledEarly.outcome)}) before it could be cancelled`);

  await execution.cancel();
  const cancels = sent("tasks/cancel", taskId);
  check(cancels.length === 1, `expected one tasks/cancel for ${taskId}, sent ${cancels.length}`);
  check(cancels[0].resultType === "complete", `tasks/cancel ack resultType ${cancels[0].resultType}`);
  const { outcome } = await settlement;
  check(outcome.status === "cancelled", `after cancel the execution outcome is ${describeOutcome(outcome)}`);

  // Cancellation is cooperative: poll tasks/get until the server reports a terminal status.
  let last;
  const deadline = Date.now() + 20000;
  for (;;) {
    last = await snapshot(taskId);
    check(last.taskId === taskId, `tasks/get identity ${last.taskId} != ${taskId}`);
    if (["completed", "failed", "cancelled"].includes(last.status)) break;
    check(Date.now() < deadline, `task ${taskId} still ${last.status} 20 s after tasks/cancel`);
    await new Promise((r) => setTimeout(r, 100));
  }
  check(last.status === "cancelled", `task ${taskId} ended ${last.status} after tasks/cancel, want cancelled`);
  check(last.raw?.result === undefined && last.raw?.error === undefined, `cancelled task carries result/error: ${JSON.stringify(last.raw)}`);
  const elapsedMs = Date.now() - started;
  if (typeof args.ms === "number") check(elapsedMs < args.ms, `took ${elapsedMs} ms, not shorter than the task itself`);
  return { tool, taskId, status: last.status, statuses, elapsedMs };
}

async function elicitScenario() {
  const tool = toolArg ?? process.env.MCPQ_TOOL ?? "confirm_delete";
  const filename = `report-${process.pid}-${Date.now()}.txt`;
  const args = JSON.parse(argsArg ?? process.env.MCPQ_ARGS ?? JSON.stringify({ filename }));
  const expect = expectArg ?? process.env.MCPQ_EXPECT ?? `Deleted ${args.filename}`;

  inputAnswer = (req, ctx) => {
    check(req.kind === "elicitation", `input request kind ${req.kind}, want elicitation`);
    check(ctx.scope === "task" && ctx.delivery === "task-update", `input delivered as ${ctx.scope}/${ctx.delivery}, want task/task-update`);
    check(typeof ctx.inputId === "string" && ctx.inputId !== "", "input request without a key");
    if (answerArg !== undefined) return JSON.parse(answerArg);
    check(typeof req.params?.message === "string" && req.params.message.includes(args.filename ?? ""),
      `elicitation message ${JSON.stringify(req.params?.message)} does not name the file`);
    const confirm = req.params?.requestedSchema?.properties?.confirm;
    check(confirm?.type === "boolean", `requestedSchema has no boolean confirm: ${JSON.stringify(req.params?.requestedSchema)}`);
    return { action: "accept", content: { confirm: true } };
  };

  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  check(execution.kind === "task", `tools/call ${tool} was answered inline (kind ${execution.kind}), not as a task`);
  const taskId = execution.handle.taskId;
  const { outcome, statuses } = await settle(execution);
  check(outcome.status === "completed", `task ${taskId} ended ${describeOutcome(outcome)}, want completed`);
  const result = resultFromTaskOutcome(outcome);
  check(result.isError !== true, `task completed with isError: ${JSON.stringify(result)}`);
  const text = textOf(result);
  check(text.includes(expect), `result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);

  check(inputCalls.length >= 1, "onInputRequest was never called");
  for (const c of inputCalls) check(c.taskId === taskId, `input request for task ${c.taskId}, want ${taskId}`);
  check(statuses.includes("input_required"), `client never observed input_required (saw ${statuses.join(",")})`);
  const updates = sent("tasks/update", taskId);
  check(updates.length === inputCalls.length, `${updates.length} tasks/update for ${inputCalls.length} input requests`);
  for (const u of updates) check(u.resultType === "complete", `tasks/update ack resultType ${u.resultType}`);
  return { tool, taskId, status: outcome.status, statuses, text, inputRequests: inputCalls.length,
    inputKeys: inputCalls.map((c) => c.inputId) };
}

const SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId";
const notifications = []; // every notification the client received outside a request

async function listenScenario() {
  const tool = toolArg ?? process.env.MCPQ_TOOL ?? "wait";
  const args = JSON.parse(argsArg ?? process.env.MCPQ_ARGS ?? JSON.stringify({ ms: 1500 }));
  const expect = expectArg ?? process.env.MCPQ_EXPECT ?? (tool === "wait" ? `waited ${args.ms} ms` : "");
  check(expect !== "", "no expected result text (MCPQ_EXPECT)");

  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  check(execution.kind === "task", `tools/call ${tool} was answered inline (kind ${execution.kind}), not as a task`);
  const taskId = execution.handle.taskId;

  // The official Client's own subscriptions/listen: resolves on the acknowledgement.
  const subscription = await client.listen({ taskIds: [taskId] });
  const { outcome } = await settle(execution);
  check(outcome.status === "completed", `task ${taskId} ended ${describeOutcome(outcome)}, want completed`);

  // The server ends the subscription once its only task has ended.
  const closed = await Promise.race([subscription.closed, new Promise((r) => setTimeout(() => r("still open"), 20000))]);
  check(closed === "graceful", `subscription closed ${closed}, want graceful (the server's listen result)`);

  const mine = notifications.filter((n) => n.method === "notifications/tasks");
  check(mine.length > 0, `no notifications/tasks received (notifications: ${JSON.stringify(notifications.map((n) => n.method))})`);
  const subIds = new Set(mine.map((n) => JSON.stringify(n.params?._meta?.[SUBSCRIPTION_ID])));
  check(subIds.size === 1 && !subIds.has(undefined), `notifications carry subscription ids ${[...subIds].join(",")}`);
  for (const n of mine) check(n.params?.taskId === taskId, `notification for task ${n.params?.taskId}, want ${taskId}`);
  const pushed = mine.map((n) => n.params.status);
  const terminal = ["completed", "failed", "cancelled"];
  check(pushed.filter((st) => terminal.includes(st)).length === 1 && terminal.includes(pushed.at(-1)),
    `pushed statuses ${pushed.join(",")}: want exactly one terminal status, last`);
  const final = mine.at(-1).params;
  check(final.status === "completed", `last notification ${final.status}, want completed`);
  const text = textOf(final.result);
  check(text.includes(expect), `notified result text ${JSON.stringify(text)} does not contain ${JSON.stringify(expect)}`);
  await subscription.close(); // idempotent after a graceful end
  // Whether the ext-tasks session settled from the pushed terminal state
  // (no tasks/get ever answered completed) or from its own polling.
  const settledFromNotification = !sent("tasks/get", taskId).some((w) => w.taskStatus === "completed");
  return { tool, taskId, status: final.status, statuses: pushed, text, notifications: mine.length, settledFromNotification,
    abortedPolls: sent("tasks/get", taskId).filter((w) => w.aborted).length };
}

try {
  await client.connect(new StreamableHTTPClientTransport(url)); // server/discover probe
  check(client.getProtocolEra() === "modern", `protocol era ${client.getProtocolEra()}, want modern`);
  const caps = client.getServerCapabilities();
  const ext = caps?.extensions?.[TASKS_EXT];
  check(ext && typeof ext === "object" && Object.keys(ext).length === 0,
    `server/discover capabilities.extensions[${TASKS_EXT}] is ${JSON.stringify(ext)}, want {}`);

  client.fallbackNotificationHandler = async (n) => { notifications.push(n); }; // ext-tasks chains to it
  session = createTaskSessionFromClient(client, {
    endpointId: `mcpqueue:${url.href}`,
    rawDispatch,
    v2RequestFraming: { protocolVersion: PROTOCOL_VERSION, clientInfo, clientCapabilities },
    onInputRequest: async (req, ctx) => {
      inputCalls.push({ kind: req.kind, scope: ctx.scope, delivery: ctx.delivery, taskId: ctx.taskId, inputId: ctx.inputId });
      try {
        return inputAnswer(req, ctx);
      } catch (e) {
        inputFailure ??= e.message;
        throw e;
      }
    },
    onError: (e) => console.error("session error:", e?.message ?? e),
  });
  check(session.capabilities.execution && session.capabilities.cancellation && session.capabilities.inputResponses,
    `ext-tasks did not enable v2 tasks: ${JSON.stringify(session.capabilities)}`);

  const run = { "list-and-settle": listAndSettle, cancel: cancelScenario, elicit: elicitScenario, listen: listenScenario, adaptive: adaptiveScenario }[scenario];
  const summary = await run();
  checkWire();
  await session.close();
  await client.close();
  clearTimeout(overall);
  console.log(JSON.stringify({ ok: true, scenario, ...summary, requests: wire.length }));
  process.exit(0);
} catch (e) {
  if (inputFailure) fail(`onInputRequest: ${inputFailure}`);
  fail(e instanceof CheckError ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}${e?.code !== undefined ? ` (code ${e.code})` : ""}`);
}
