// A proxy per the proxy-chains RFD built with the official TypeScript SDK
// (an agent() app with proxy/initialize and proxy/successor handlers) that
// offers an MCP server with the SDK's McpOverAcpProvider (request binding).
//
//   node mcp_proxy.mjs NAME
//
// It declares "NAME-tools" in every session/new it passes on, serves the
// mcp/message requests the conductor delivers to it (inside proxy/successor,
// as coming from its successor) and passes everything else through.
//
// With MCP_IT_PROXY_CALL=1 it is a caller too, with the SDK's
// McpOverAcpCaller (client name NAME): before it passes a session/prompt
// on, it calls greet {name: NAME} on every acp server declared to it in
// that session (by the editor and the proxies before it), with a progress
// token, and reports to its predecessor, as one agent_message_chunk whose
// text is "proxy-report NAME " + JSON: per server, its declaration, the
// outcome, the progress notifications that reached the call, or the outer
// error.
//
// A request from the successor is cancelled either way a conductor may
// send it: a plain $/cancel_request naming the proxy/successor request (the
// SDK's schema, and what acp-conductor sends; the SDK aborts the handler's
// signal itself), or one wrapped in proxy/successor (as acp-conductor sent
// it before), which aborts the same request here. Either way an MCP request
// ends in its McpOverAcpProvider, and one passed on to the predecessor is
// cancelled there by the SDK, under the id it was sent with. When its
// "wait" tool sees the cancellation it tells the editor, with the
// notification _it/mcp_cancelled {owner}.
import * as acp from "@agentclientprotocol/sdk/unstable";
import { Readable, Writable } from "node:stream";
import { greetServer } from "./mcp_tools.mjs";

const name = process.argv[2] ?? "ts-proxy";
const SUCCESSOR = "proxy/successor";
const provider = new acp.McpOverAcpProvider();
let registration = null;
// The requests from the successor in flight, by the id of the
// proxy/successor request that carried them, for a wrapped cancel to abort.
const inflight = new Map();

const raw = (params) => params; // custom methods need a params parser
// A cancelled request from the predecessor cancels the proxy/successor
// request it became, which the SDK names in a plain $/cancel_request.
const toSuccessor = (client, method, params, signal) =>
  client.request(SUCCESSOR, { method, params }, signal ? { cancellationSignal: signal } : undefined);

// The caller's side (MCP_IT_PROXY_CALL=1).
const caller = new acp.McpOverAcpCaller({ clientInfo: { name, version: "1.0.0" } });
const declaredBefore = new Map(); // sessionId -> the acp servers declared before this proxy
const callServers = async (client, sessionId) => {
  const report = [];
  for (const decl of declaredBefore.get(sessionId) ?? []) {
    const entry = { declaration: decl, progress: [] };
    try {
      entry.outcome = await caller.request(
        client,
        decl.serverId,
        "tools/call",
        { name: "greet", arguments: { name }, _meta: { progressToken: `p-${decl.name}` } },
        { onNotification: (n) => entry.progress.push(n) },
      );
    } catch (err) {
      entry.error = { code: err.code, message: err.message, data: err.data };
    }
    report.push(entry);
  }
  await client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `proxy-report ${name} ${JSON.stringify(report)}` } },
  });
};
const calling = process.env.MCP_IT_PROXY_CALL === "1";
const app = acp
  .agent({ name })
  // First in the chain: the SDK offers a notification to each handler in
  // turn, a step later each time, while an answer settles its call at
  // once, and a call's progress comes just before its answer.
  .onNotification("mcp/message", raw, (cx) =>
    calling ? caller.handleNotification(cx) : cx.client.notify(SUCCESSOR, { method: "mcp/message", params: cx.params }),
  )
  .onRequest("proxy/initialize", raw, async ({ params, client }) => {
    registration ??= provider.registerServer(client, {
      name: `${name}-tools`,
      handler: greetServer(name, (owner) => client.notify("_it/mcp_cancelled", { owner })),
    });
    return toSuccessor(client, "initialize", params);
  })
  .onRequest(acp.methods.agent.session.new, async ({ params, client }) => {
    const result = await toSuccessor(client, "session/new", {
      ...params,
      mcpServers: [...(params.mcpServers ?? []), registration.declaration],
    });
    declaredBefore.set(result.sessionId, (params.mcpServers ?? []).filter(acp.isMcpServerAcp));
    return result;
  })
  // From the successor, through the conductor: MCP for our server, or a
  // request for the predecessor.
  .onRequest(SUCCESSOR, raw, async ({ params, client, signal, requestId }) => {
    // It ends on the SDK's own cancel (signal) or on a wrapped one
    // (inflight), whichever comes.
    const abort = new AbortController();
    const onCancel = () => abort.abort(signal.reason);
    signal.addEventListener("abort", onCancel, { once: true });
    inflight.set(JSON.stringify(requestId), abort);
    try {
      if (params.method === "mcp/message") {
        return await provider.handleRequest({ params: params.params, agent: client, client, signal: abort.signal });
      }
      return await client.request(params.method, params.params, { cancellationSignal: abort.signal });
    } finally {
      inflight.delete(JSON.stringify(requestId));
      signal.removeEventListener("abort", onCancel);
    }
  })
  .onNotification(SUCCESSOR, raw, ({ params, client }) => {
    if (params.method === "$/cancel_request") {
      // Names one of our proxy/successor requests: cancellation is never
      // forwarded to another hop.
      inflight.get(JSON.stringify(params.params?.requestId))?.abort(acp.RequestError.requestCancelled());
      return;
    }
    return client.notify(params.method, params.params);
  })
  .onRequest("*", ({ method, params, client, signal }) => toSuccessor(client, method, params, signal))
  .onNotification("*", ({ method, params, client }) => {
    // The SDK acts on a cancel from the predecessor itself (the handler's
    // signal, then a cancel under the id the successor saw): its id means
    // nothing one hop on.
    if (method === "$/cancel_request") return;
    return client.notify(SUCCESSOR, { method, params });
  });

if (calling) {
  app.onRequest(acp.methods.agent.session.prompt, async ({ params, client, signal }) => {
    await callServers(client, params.sessionId);
    return toSuccessor(client, "session/prompt", params, signal);
  });
}

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
// No process.exit on stdin's end: the SDK runs handlers concurrently, so a
// notification read before the end may still be on its way out; Node exits
// by itself once nothing is left to do.
connection.closed.then(() => process.stdin.destroy());
