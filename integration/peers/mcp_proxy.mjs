// A proxy per the proxy-chains RFD built with the official TypeScript SDK
// (an agent() app with proxy/initialize and proxy/successor handlers) that
// offers an MCP server with the SDK's McpOverAcpProvider (request binding).
//
//   node mcp_proxy.mjs NAME
//
// It declares "NAME-tools" in every session/new it passes on, serves the
// mcp/message requests the conductor delivers to it (inside proxy/successor,
// as coming from its successor) and passes everything else through.
import * as acp from "@agentclientprotocol/sdk/unstable";
import { Readable, Writable } from "node:stream";
import { greetServer } from "./mcp_tools.mjs";

const name = process.argv[2] ?? "ts-proxy";
const SUCCESSOR = "proxy/successor";
const provider = new acp.McpOverAcpProvider();
let registration = null;

const raw = (params) => params; // custom methods need a params parser
const toSuccessor = (client, method, params) => client.request(SUCCESSOR, { method, params });

const app = acp
  .agent({ name })
  .onRequest("proxy/initialize", raw, async ({ params, client }) => {
    registration ??= provider.registerServer(client, { name: `${name}-tools`, handler: greetServer(name) });
    return toSuccessor(client, "initialize", params);
  })
  .onRequest(acp.methods.agent.session.new, ({ params, client }) =>
    toSuccessor(client, "session/new", { ...params, mcpServers: [...(params.mcpServers ?? []), registration.declaration] }),
  )
  // From the successor, through the conductor: MCP for our server, or a
  // request for the predecessor.
  .onRequest(SUCCESSOR, raw, ({ params, client, signal }) => {
    if (params.method === "mcp/message") {
      return provider.handleRequest({ params: params.params, agent: client, client, signal });
    }
    return client.request(params.method, params.params);
  })
  .onNotification(SUCCESSOR, raw, ({ params, client }) => client.notify(params.method, params.params))
  .onRequest("*", ({ method, params, client }) => toSuccessor(client, method, params))
  .onNotification("*", ({ method, params, client }) => client.notify(SUCCESSOR, { method, params }));

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
// No process.exit on stdin's end: the SDK runs handlers concurrently, so a
// notification read before the end may still be on its way out; Node exits
// by itself once nothing is left to do.
connection.closed.then(() => process.stdin.destroy());
