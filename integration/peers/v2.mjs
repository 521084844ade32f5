// An ACP v2 editor and agent, built with the official TypeScript SDK's
// experimental/v2 app API (its unstable entry point, whose schema knows the
// MCP-over-ACP capability), for checking that the conductor passes a v2
// negotiation through.
//
//   node v2.mjs agent [--record FILE] [--mcp TRANSPORTS]
//       An agent that answers initialize in v2 (protocolVersion 2, info,
//       capabilities.session {}) and session/new. With --record, every line
//       it receives is appended to FILE. With --mcp (a comma-separated list
//       of MCP transports, such as "stdio,http", or "" for none), it
//       advertises them in capabilities.session.mcp and, as an SDK agent
//       should, refuses a session/new that declares a server over any other
//       (assertSupportedMcpServers).
//
//   node v2.mjs client [--declare] -- CMD [ARGS...]
//       Spawns CMD, initializes it asking for protocolVersion 2, opens a
//       session (with --declare, offering an acp MCP server of its own), and
//       prints one JSON line: the raw initialize result as it arrived on the
//       wire ("initialize"), what the SDK made of it ("sdkInitialize"), the
//       session id, and "failures". It offers its server only if the chain
//       advertised capabilities.session.mcp.acp, as an editor should.
import * as acp from "@agentclientprotocol/sdk/experimental/v2/unstable";
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const argv = process.argv.slice(2);
const role = argv[0];

function tapped(stream, onIncoming) {
  const inTap = new TransformStream({
    transform(msg, controller) {
      onIncoming(msg);
      controller.enqueue(msg);
    },
  });
  return { writable: stream.writable, readable: stream.readable.pipeThrough(inTap) };
}

if (role === "agent") {
  const i = argv.indexOf("--record");
  const record = i >= 0 ? argv[i + 1] : null;
  const m = argv.indexOf("--mcp");
  const mcp =
    m >= 0
      ? Object.fromEntries(
          argv[m + 1]
            .split(",")
            .filter(Boolean)
            .map((t) => [t, {}]),
        )
      : null;
  const app = acp
    .agent({ name: "acp-it-v2-agent" })
    .onRequest(acp.methods.agent.initialize, ({ params }) => ({
      protocolVersion: Math.min(params.protocolVersion, acp.PROTOCOL_VERSION),
      info: { name: "acp-it-v2-agent", version: "1.0.0" },
      capabilities: { session: mcp ? { mcp } : {} },
    }))
    .onRequest(acp.methods.agent.session.new, ({ params }) => {
      if (mcp) acp.assertSupportedMcpServers(params.mcpServers, mcp);
      return { sessionId: "v2-session-1" };
    });
  const raw = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const conn = app.connect(
    tapped(raw, (msg) => {
      if (record) appendFileSync(record, JSON.stringify(msg) + "\n");
    }),
  );
  await conn.closed;
  process.exit(0);
} else if (role === "client") {
  const sep = argv.indexOf("--");
  const command = argv.slice(sep + 1);
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const failures = [];
  let wireInit = null;
  const raw = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const stream = tapped(raw, (msg) => {
    if (msg && msg.id === 0 && "result" in msg) wireInit = msg.result;
  });
  const timer = setTimeout(() => {
    failures.push("timed out");
    finish();
  }, 30000);
  let sdkInit = null;
  let sessionId = null;
  function finish() {
    clearTimeout(timer);
    console.log(JSON.stringify({ initialize: wireInit, sdkInitialize: sdkInit, sessionId, failures }));
    child.stdin.end();
    child.kill("SIGTERM");
    process.exit(failures.length ? 1 : 0);
  }
  try {
    await acp.client({ name: "acp-it-v2-client" }).connectWith(stream, async (cx) => {
      sdkInit = await cx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        info: { name: "acp-it-v2-client", version: "1.0.0" },
        capabilities: {},
      });
      // --declare: the editor offers an MCP server of its own (MCP-over-ACP),
      // as an editor should, only if the chain advertised that it takes one.
      const mcpServers =
        argv.slice(0, sep).includes("--declare") && sdkInit?.capabilities?.session?.mcp?.acp
        ? [{ type: "acp", name: "editor-tools", serverId: "srv-1" }]
        : [];
      const s = await cx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers });
      sessionId = s.sessionId;
    });
  } catch (err) {
    failures.push(String(err?.stack ?? err));
  }
  finish();
} else {
  console.error("usage: node v2.mjs agent [--record FILE] | client -- CMD [ARGS...]");
  process.exit(2);
}
