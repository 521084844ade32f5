// The MCP server the MCP-over-ACP tests offer with the SDK's
// McpOverAcpProvider (request binding, MCP 2026-07-28), from an editor
// (mcp_editor.mjs) or a proxy (mcp_proxy.mjs). A tool "wait" waits until
// its request is cancelled. The tool greet {name}: it
// sends a progress notification for the request's progress token, then
// answers with a JSON text naming the owner, the greeting, the ACP session
// the conductor named in the envelope's _meta, and the calling client.
export const SESSION_META = "acp-conductor/sessionId";

// The owners whose "wait" call was cancelled, as their handler saw it.
export const cancelled = [];

// greetServer returns the handler of owner's server; onCancelled, if given,
// hears of each cancelled "wait" call too.
export function greetServer(owner, onCancelled) {
  return async (cx) => {
    switch (cx.method) {
      case "server/discover":
        return {
          result: {
            supportedVersions: ["2026-07-28"],
            capabilities: { tools: {} },
            serverInfo: { name: owner, version: "1.0.0" },
          },
        };
      case "tools/list":
        return {
          result: {
            tools: [{ name: "greet", inputSchema: { type: "object", properties: { name: { type: "string" } } } }],
          },
        };
      case "tools/call": {
        if (cx.params?.name === "wait") {
          // Tell the caller it started, then wait for the cancellation.
          await cx.notify("notifications/progress", { progressToken: cx.params?._meta?.progressToken, progress: 0 });
          await new Promise((resolve) => {
            if (cx.signal.aborted) resolve();
            cx.signal.addEventListener("abort", resolve, { once: true });
          });
          cancelled.push(owner);
          await onCancelled?.(owner);
          return { error: { code: -32800, message: "cancelled" } };
        }
        if (cx.params?.name !== "greet") {
          return { error: { code: -32602, message: `no tool ${cx.params?.name}` } };
        }
        const token = cx.params?._meta?.progressToken;
        if (token !== undefined) {
          await cx.notify("notifications/progress", { progressToken: token, progress: 1, message: `${owner} working` });
        }
        const text = JSON.stringify({
          owner,
          greeting: `hello ${cx.params?.arguments?.name}`,
          session: cx.envelopeMeta?.[SESSION_META] ?? null,
          client: cx.clientInfo?.name ?? null,
        });
        return { result: { content: [{ type: "text", text }] } };
      }
      default:
        return { error: { code: -32601, message: `Method not found: ${cx.method}` } };
    }
  };
}
