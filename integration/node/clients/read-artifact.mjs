// Reads a task artifact through the resource_link a tool returned, with an
// official client that checks the server's capabilities before each call
// (enforceStrictCapabilities: true): resources/read is refused client-side
// unless the server declared the resources capability.
//
//   node clients/read-artifact.mjs URL WIRE [BYTES]
//
// WIRE is "2025-11-25" (@modelcontextprotocol/sdk@1.32.2, initialize) or
// "2026-07-28" (@modelcontextprotocol/client@2.4.0, server/discover). The
// client calls the demo worker's export {bytes:BYTES (default 5000),
// name:"report.bin"} without a task, takes the resource_link from its
// content, reads it with client.readResource({uri}), and checks the blob is
// the BYTES bytes export writes ("0123456789…").
//
// Run it from integration/node. On success the last stdout line is
// {"ok":true,...}; on failure {"ok":false,"reason":...} and exit 1.
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from "@modelcontextprotocol/client";

const [urlArg, wire, bytesArg] = process.argv.slice(2);
const WIRES = ["2025-11-25", "2026-07-28"];
if (!urlArg || !WIRES.includes(wire)) {
  console.error(`usage: node read-artifact.mjs URL {${WIRES.join("|")}} [BYTES]`);
  process.exit(2);
}
const url = new URL(urlArg);
const bytes = Number(bytesArg ?? 5000);
const scenario = wire;

function fail(reason) {
  console.log(JSON.stringify({ ok: false, scenario, reason }));
  console.error(`FAIL (${wire}): ${reason}`);
  process.exit(1);
}
class CheckError extends Error {}
function check(cond, reason) {
  if (!cond) throw new CheckError(reason);
}
const overall = setTimeout(() => fail("did not finish within 60 s"), 60000);

const clientInfo = { name: "mcpqueue-it-read-artifact", version: "0.0.1" };
const options = { capabilities: {}, enforceStrictCapabilities: true };
let client;
if (wire === "2025-11-25") {
  client = new ClientV1(clientInfo, options);
} else {
  client = new ClientV2(clientInfo, { ...options, versionNegotiation: { mode: { pin: wire } } });
}

try {
  await client.connect(wire === "2025-11-25" ? new TransportV1(url) : new TransportV2(url));
  const caps = client.getServerCapabilities();
  check(caps?.resources, `server capabilities ${JSON.stringify(caps)} declare no resources`);

  const result = await client.callTool({ name: "export", arguments: { bytes, name: "report.bin" } });
  check(!result.isError, `export failed: ${JSON.stringify(result)}`);
  const link = (result.content ?? []).find((c) => c.type === "resource_link");
  check(link && typeof link.uri === "string", `no resource_link in ${JSON.stringify(result.content)}`);
  check(/^mcpq:\/\/tasks\/[^/]+\/artifacts\/report\.bin$/.test(link.uri), `link uri ${link.uri}`);

  const read = await client.readResource({ uri: link.uri });
  check(Array.isArray(read?.contents) && read.contents.length === 1, `resources/read contents ${JSON.stringify(read?.contents)?.slice(0, 300)}`);
  const [c] = read.contents;
  check(c.uri === link.uri, `contents[0].uri ${c.uri}, want ${link.uri}`);
  check(typeof c.blob === "string", `contents[0] has no blob: ${JSON.stringify(c).slice(0, 300)}`);
  const data = Buffer.from(c.blob, "base64").toString("latin1");
  let want = "";
  for (let i = 0; i < bytes; i++) want += String(i % 10);
  check(data === want, `artifact: ${data.length} bytes ${JSON.stringify(data.slice(0, 40))}…, want ${bytes} bytes of 0123456789…`);

  clearTimeout(overall);
  await client.close();
  console.log(JSON.stringify({ ok: true, scenario, uri: link.uri, bytes: data.length, mimeType: c.mimeType, resources: caps.resources }));
  process.exit(0);
} catch (e) {
  fail(e instanceof CheckError ? e.message : `${e?.name ?? "Error"}: ${e?.message ?? e}`);
}
