// Drives an mcpqueue endpoint with the official @modelcontextprotocol/sdk@1.32.2
// Client as most hosts use it: no tasks capability, plain tools/call. A call
// that outlasts the api's --handle-after is handed over (a CallToolResult
// whose structuredContent is {taskId, status, pollAfterMs}); the client then
// calls the mirror tool tasks_result until it returns the tool's own result.
//
//   node clients/sdk-v1-mirror.mjs URL handover TOOL ARGS_JSON EXPECT
//
// Scenario handover: tools/list must list tasks_result and tasks_cancel;
// callTool(TOOL, ARGS) (with a progress handler) must come back as the
// hand-over; tasks_result {taskId} is called until its answer is no longer
// the hand-over, and that answer's first text block must contain EXPECT.
//
// Run it from integration/node. On success the last stdout line is
// {"ok":true,...}; on failure {"ok":false,"reason":...} and exit 1.
// MCPQ_TIMEOUT_MS bounds the whole run (default 90000).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [urlArg, scenario, tool, argsJSON, expect] = process.argv.slice(2);
if (!urlArg || scenario !== "handover" || !tool || !argsJSON || !expect) {
  console.error("usage: node sdk-v1-mirror.mjs URL handover TOOL ARGS_JSON EXPECT");
  process.exit(2);
}
const timeoutMs = Number(process.env.MCPQ_TIMEOUT_MS ?? 90000);
const started = Date.now();

class CheckError extends Error {}
function check(cond, reason) {
  if (!cond) throw new CheckError(reason);
}
function fail(reason) {
  console.log(JSON.stringify({ ok: false, scenario, reason }));
  console.error(`FAIL (${scenario}): ${reason}`);
  process.exit(1);
}
const overall = setTimeout(() => fail(`scenario did not finish within ${timeoutMs} ms`), timeoutMs);
process.on("unhandledRejection", (e) => fail(`unhandled rejection: ${e?.stack ?? e}`));

function textOf(result) {
  check(Array.isArray(result?.content) && result.content.length > 0, `result has no content: ${JSON.stringify(result)}`);
  const block = result.content[0];
  check(block.type === "text" && typeof block.text === "string", `first content block is not text: ${JSON.stringify(block)}`);
  return block.text;
}

// The hand-over: an ordinary result (not an error) naming the task.
function handedOver(result) {
  const s = result?.structuredContent;
  if (!s || typeof s.taskId !== "string") return undefined;
  check(result.isError !== true, `the hand-over is an error: ${JSON.stringify(result)}`);
  // working or input_required; a terminal status when the call ended just as the wait did
  check(["working", "input_required", "completed", "failed", "cancelled"].includes(s.status), `hand-over status ${JSON.stringify(s.status)}`);
  check(Number.isInteger(s.pollAfterMs) && s.pollAfterMs > 0, `hand-over pollAfterMs ${JSON.stringify(s.pollAfterMs)}`);
  check(textOf(result).includes("tasks_result"), `the hand-over text does not name tasks_result: ${textOf(result)}`);
  return s.taskId;
}

async function handover() {
  // No tasks capability: the client a 2025 host is.
  const client = new Client({ name: "mcpqueue-it-sdk-v1-mirror", version: "0.0.1" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(urlArg));
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ["tasks_result", "tasks_cancel", tool]) check(names.includes(n), `tools/list lacks ${n} (got ${names.join(", ")})`);

    let progress = 0;
    const t0 = Date.now();
    const first = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) }, undefined, {
      onprogress: () => { progress++; },
      resetTimeoutOnProgress: true,
    });
    const handoverMs = Date.now() - t0;
    const taskId = handedOver(first);
    check(taskId, `${tool} answered without a hand-over: ${JSON.stringify(first)}`);

    let rounds = 0;
    let result;
    for (;;) {
      rounds++;
      check(rounds <= 30, `tasks_result still running after ${rounds - 1} calls`);
      result = await client.callTool({ name: "tasks_result", arguments: { taskId } });
      const again = handedOver(result);
      if (!again) break;
      check(again === taskId, `tasks_result named task ${again}, want ${taskId}`);
    }
    const text = textOf(result);
    check(result.isError !== true, `tasks_result returned an error result: ${JSON.stringify(result)}`);
    check(text.includes(expect), `tasks_result text ${JSON.stringify(text)} lacks ${JSON.stringify(expect)}`);
    return {
      tool, taskId, status: "completed", text, handoverMs, rounds, progress,
      protocolVersion: transport.protocolVersion, elapsedMs: Date.now() - t0,
    };
  } finally {
    await client.close();
  }
}

try {
  const summary = await handover();
  clearTimeout(overall);
  console.log(JSON.stringify({ ok: true, scenario, ...summary }));
  process.exit(0);
} catch (e) {
  fail(e instanceof CheckError ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}${e?.code !== undefined ? ` (code ${e.code})` : ""}`);
}
