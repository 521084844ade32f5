// An ACP agent, built with the official TypeScript SDK, whose MCP client is
// the SDK's McpOverAcpCaller (the request binding: mcp/message {serverId,
// requestId}, MCP 2026-07-28). It advertises mcpCapabilities.acp. Each
// session/prompt makes it call greet {name: "ts-agent"} (or the tool call
// {name, arguments} in the environment variable MCP_IT_CALL) on every acp server
// the session declared, with a progress token (a result that asks for
// input, as MCP 2026-07-28 servers do for the client's roots, is retried
// once with the roots ["file:///ts-agent"]), and report, as one
// agent_message_chunk whose text is "mcp-report " + JSON: per server, its
// declaration, the outcome ({result} or {error}), the progress
// notifications that reached the request, or the outer error. With
// MCP_IT_CANCEL=1 it calls the tool "wait" instead and cancels the call
// (the SDK's cancellation signal, $/cancel_request on the wire) when its
// first progress notification arrives.
import * as acp from "@agentclientprotocol/sdk/unstable";
import { Readable, Writable } from "node:stream";

const log = (...args) => console.error(`[mcp-agent ${process.pid}]`, ...args);
const caller = new acp.McpOverAcpCaller({ clientInfo: { name: "ts-agent", version: "1.0.0" } });
const sessions = new Map(); // sessionId -> declarations
let counter = 0;
const toolCall = process.env.MCP_IT_CALL ? JSON.parse(process.env.MCP_IT_CALL) : { name: "greet", arguments: { name: "ts-agent" } };

const app = acp
  .agent({ name: "mcp-agent" })
  .onNotification(acp.methods.agent.mcp.message, caller.handleNotification)
  .onRequest(acp.methods.agent.initialize, ({ params }) => ({
    protocolVersion: Math.min(params.protocolVersion, acp.PROTOCOL_VERSION),
    agentCapabilities: { mcpCapabilities: { acp: true } },
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `mcp-session-${++counter}`;
    sessions.set(sessionId, params.mcpServers ?? []);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const report = [];
    for (const decl of sessions.get(params.sessionId) ?? []) {
      if (!acp.isMcpServerAcp(decl)) continue;
      const progress = [];
      const entry = { declaration: decl };
      try {
        const call = (extra) =>
          caller.request(
            client,
            decl.serverId,
            "tools/call",
            { ...toolCall, _meta: { progressToken: `p-${decl.name}` }, ...extra },
            { onNotification: (n) => progress.push(n) },
          );
        if (process.env.MCP_IT_CANCEL === "1") {
          const abort = new AbortController();
          entry.outcome = await caller.request(
            client,
            decl.serverId,
            "tools/call",
            { name: "wait", arguments: {}, _meta: { progressToken: `p-${decl.name}` } },
            { signal: abort.signal, onNotification: (n) => (progress.push(n), abort.abort()) },
          );
        }
        entry.outcome ??= await call({});
        const asked = entry.outcome.result?.inputRequests;
        if (entry.outcome.result?.resultType === "input_required" && asked) {
          const inputResponses = {};
          for (const [key, req] of Object.entries(asked)) {
            if (req.method === "roots/list") inputResponses[key] = { roots: [{ uri: "file:///ts-agent", name: "cwd" }] };
          }
          entry.asked = Object.keys(asked);
          entry.outcome = await call({ inputResponses });
        }
      } catch (err) {
        entry.error = { code: err.code, message: err.message, data: err.data };
      }
      entry.progress = progress;
      report.push(entry);
    }
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "mcp-report " + JSON.stringify(report) } },
    });
    return { stopReason: "end_turn" };
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
connection.closed?.then?.(() => process.exit(0));
process.stdin.on("end", () => {
  log("stdin closed");
  process.exit(0);
});
