// The benchmark's agent, built with the official ACP TypeScript SDK
// (@agentclientprotocol/sdk). session/prompt with _meta["acp-bench"].updates
// = K streams K agent_message_chunk updates, then answers end_turn. It does
// nothing else, so that what is measured is the path between editor and agent.
import * as acp from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";

let sessions = 0;
const app = acp
  .agent({ name: "bench-sdk-agent" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => ({
    protocolVersion: Math.min(params.protocolVersion, acp.PROTOCOL_VERSION),
    agentCapabilities: { loadSession: false },
    authMethods: [],
    agentInfo: { name: "bench-sdk-agent", version: "0.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: `bench-${++sessions}` }))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const k = params._meta?.["acp-bench"]?.updates ?? 0;
    for (let i = 0; i < k; i++) {
      await client.notify(acp.methods.client.session.update, {
        sessionId: params.sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `chunk ${i} of the answer` } },
      });
    }
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {});

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
connection.closed.then(() => process.exit(0));
