// An editor, built with the official TypeScript SDK, that offers an MCP
// server with the SDK's McpOverAcpProvider (request binding) and prompts once.
//
//   node mcp_editor.mjs [--provide] [--provide-mcp-server] [--prompt TEXT]
//     [--authenticate METHOD] [--no-prompt] -- COMMAND [ARGS...]
//
// With --authenticate it authenticates with METHOD after initialize. With
// --no-prompt it sends no prompt: it waits (up to 20 s) until the provider
// has seen a tools/list for each declared server, as an agent without a
// model (Codex without an account) lists them as its session starts.
//
// It spawns COMMAND (the conductor), initializes, opens a session (declaring
// its server "editor-tools" when --provide is given, and "mcpsdk-tools", an
// McpServer of the official @modelcontextprotocol/server package served
// with the SDK's fromMcpServer, when --provide-mcp-server is: its tool
// greet {name} answers "hello NAME from mcpsdk"), sends one prompt (TEXT,
// by default "use the tools") and prints, as its last stdout line, a JSON
// summary: the initialize result, the session id, the agent's "mcp-report"
// (see mcp_agent.mjs) or, from other agents, the texts of its message
// chunks, the "proxy-report"s of calling proxies (see mcp_proxy.mjs), the MCP
// requests the provider saw, the mcp/connect requests it refused, anything
// unexpected, and the command's exit
// status after its stdin closed.
import * as acp from "@agentclientprotocol/sdk/unstable";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { cancelled, greetServer } from "./mcp_tools.mjs";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const flags = argv.slice(0, sep);
const [cmd, ...args] = argv.slice(sep + 1);
const option = (name, dflt) => {
  const i = flags.indexOf(name);
  return i >= 0 && i + 1 < flags.length ? flags[i + 1] : dflt;
};
const log = (...a) => console.error(`[mcp-editor ${process.pid}]`, ...a);

const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

const provider = new acp.McpOverAcpProvider();
const seen = []; // MCP requests that reached the provider: {serverId, method, meta}
const unexpected = [];
let probes = 0; // mcp/connect requests refused
let report = null;
const proxyReports = {}; // by proxy name
const texts = [];
let reported;
const reportArrived = new Promise((resolve) => (reported = resolve));
const app = acp
  .client({ name: "mcp-editor" })
  .onRequest(acp.methods.client.mcp.message, (cx) => {
    seen.push({ serverId: cx.params.serverId, method: cx.params.method, meta: cx.params._meta ?? null });
    return provider.handleRequest(cx);
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const text = params.update?.content?.text ?? "";
    const proxy = /^proxy-report (\S+) /.exec(text);
    if (proxy) {
      // A calling proxy's (mcp_proxy.mjs): not the agent's, which the
      // prompt still waits for.
      proxyReports[proxy[1]] = JSON.parse(text.slice(proxy[0].length));
      return;
    }
    if (text.startsWith("mcp-report ")) report = JSON.parse(text.slice("mcp-report ".length));
    else texts.push(text);
    reported();
  })
  .onRequest("*", ({ method }) => {
    // The SDK has no mcp/connect (the connect binding): a conductor that
    // asks learns from the refusal that the owner binds per request. (An
    // SDK proxy passes the probe on; under @thinkwell/conductor it comes
    // in that dialect's spelling, _mcp/connect.)
    if (method === "mcp/connect" || method === "_mcp/connect") probes++;
    else unexpected.push({ kind: "request", method });
    throw acp.RequestError.methodNotFound(method);
  })
  // An SDK-built proxy's "wait" tool saw its call cancelled.
  .onNotification("_it/mcp_cancelled", (params) => params, ({ params }) => cancelled.push(params.owner))
  .onNotification("*", ({ method }) => {
    // The SDK acts on $/cancel_request itself (the handler's signal), and
    // on _it/mcp_cancelled above, and shows them here too.
    if (method !== "$/cancel_request" && method !== "_it/mcp_cancelled") unexpected.push({ kind: "notification", method });
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const connection = app.connect(stream);
const agent = connection.agent;

const summary = {};
try {
  summary.initialize = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  if (option("--authenticate")) await agent.request(acp.methods.agent.authenticate, { methodId: option("--authenticate") });
  const mcpServers = [];
  if (flags.includes("--provide")) {
    mcpServers.push(provider.registerServer(agent, { name: "editor-tools", handler: greetServer("editor") }).declaration);
  }
  if (flags.includes("--provide-mcp-server")) {
    const { McpServer } = await import("@modelcontextprotocol/server");
    const { fromMcpServer } = await import("@agentclientprotocol/sdk/experimental/mcp-server");
    const z = await import("zod/v4");
    const tools = fromMcpServer(() => {
      const server = new McpServer({ name: "mcpsdk", version: "1.0.0" });
      server.registerTool("greet", { inputSchema: z.object({ name: z.string() }) }, async ({ name }) => ({
        content: [{ type: "text", text: `hello ${name} from mcpsdk` }],
      }));
      return server;
    });
    mcpServers.push(provider.registerServer(agent, { name: "mcpsdk-tools", handler: tools.handler }).declaration);
  }
  const session = await agent.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers });
  summary.sessionId = session.sessionId;
  if (flags.includes("--no-prompt")) {
    // An agent with no model (Codex without an account) uses its MCP
    // servers as the session starts: wait for it to list the tools.
    const deadline = Date.now() + 20000;
    const servers = mcpServers.length;
    while (seen.filter((s) => s.method === "tools/list").length < servers && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  } else {
    summary.stopReason = (
      await agent.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: option("--prompt", "use the tools") }],
      })
    ).stopReason;
    // An SDK-built proxy may pass the prompt's answer on before the update
    // that preceded it: wait for the report, not for the order.
    await Promise.race([reportArrived, new Promise((r) => setTimeout(r, 20000))]);
  }
} catch (err) {
  summary.error = { code: err.code, message: err.message, data: err.data };
}
summary.report = report;
summary.proxyReports = proxyReports;
summary.texts = texts;
summary.cancelled = cancelled;
summary.seen = seen;
summary.unexpected = unexpected;
summary.connectProbes = probes;
child.stdin.end();
summary.exit = await exited;
console.log(JSON.stringify(summary));
process.exit(0);
