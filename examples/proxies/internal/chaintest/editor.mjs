// An ACP client (an "editor") for the example proxies' tests, built on the
// official TypeScript SDK. It starts the command after "--" (a conductor),
// follows a script of sessions and prompts, and prints one JSON line: the
// text of every agent_message_chunk each prompt produced, every permission
// request it was asked (it answers each with the first option), and how the
// command exited once its stdin was closed. It exits 0 only if "failures" is
// empty.
//
// Usage: node editor.mjs --peers DIR --script JSON -- CMD [ARGS...]
//
// DIR is a directory where the SDK is installed (integration/peers). The
// script is {"sessions": [{"cwd": ..., "prompts": [...], "cancelPrompt": ...,
// "afterCancel": [...]}], "timeoutMs": N}. A session's cancelPrompt, if any,
// is sent after its prompts, with an AbortSignal that is aborted when its
// first update arrives, which makes the SDK send $/cancel_request; it must
// then be answered, within 15s, with stopReason "cancelled" or error -32800.
// (The agent of integration/peers waits after its first update for a prompt
// containing "hang".) The afterCancel prompts follow.
//
// Updates are taken from the stream below the SDK, which sees messages in the
// order they arrived, so each is credited to the prompt it came before the
// answer of; the SDK's own handlers may run later.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const option = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 && i < sep ? argv[i + 1] : undefined;
};
if (sep < 0 || sep === argv.length - 1 || !option("--peers") || !option("--script")) {
  console.error("usage: node editor.mjs --peers DIR --script JSON -- CMD [ARGS...]");
  process.exit(2);
}
const script = JSON.parse(option("--script"));
const command = argv.slice(sep + 1);

// The SDK is installed next to the peers, not here, so it is found from there.
const sdk = createRequire(path.join(path.resolve(option("--peers")), "package.json")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdk).href);

const report = { initialize: null, sessions: [], permissionRequests: [], exit: null, failures: [] };
const fail = (msg) => {
  report.failures.push(msg);
  console.error("[editor] FAIL:", msg);
};
// finish prints the report and exits once it is written: a write to a pipe
// may complete later.
const finish = () => {
  process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(report.failures.length === 0 ? 0 : 1));
};

const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
child.stdin.on("error", (err) => console.error("[editor] stdin of command:", err.message));
const exited = new Promise((resolve) => {
  child.on("exit", (code, signal) => resolve({ code, signal }));
  child.on("error", (err) => resolve({ code: null, signal: null, error: err.message }));
});

const deadline = setTimeout(() => {
  fail(`timed out after ${script.timeoutMs}ms`);
  child.kill("SIGKILL");
  finish();
}, script.timeoutMs ?? 60000);

const inFlight = new Map(); // sessionId -> the record of its prompt awaiting an answer

function tap(msg) {
  if (msg?.method !== acp.methods.client.session.update) return;
  const { sessionId, update } = msg.params ?? {};
  if (update?.sessionUpdate === "agent_message_chunk" && update.content?.type === "text") {
    const p = inFlight.get(sessionId);
    if (!p) {
      fail(`update for session ${sessionId} outside a prompt: ${update.content.text}`);
      return;
    }
    p.updates.push(update.content.text);
    p.onUpdate?.(); // the agent has started on the prompt
  }
}

const app = acp
  .client({ name: "examples-editor" })
  .onNotification(acp.methods.client.session.update, () => {}) // recorded by tap
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    report.permissionRequests.push({
      sessionId: params.sessionId,
      title: params.toolCall?.title,
      kind: params.toolCall?.kind,
      options: params.options.map((o) => o.optionId),
    });
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const tapped = stream.readable.pipeThrough(
  new TransformStream({
    transform(msg, controller) {
      tap(msg);
      controller.enqueue(msg);
    },
  }),
);
const connection = app.connect({ readable: tapped, writable: stream.writable });
const agent = connection.agent;

try {
  report.initialize = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "examples-editor", version: "0.0.0" },
  });
  for (const s of script.sessions) {
    const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd: s.cwd, mcpServers: [] });
    const rec = { sessionId, cwd: s.cwd, prompts: [] };
    report.sessions.push(rec);
    for (const text of s.prompts ?? []) await prompt(sessionId, rec, text);
    if (s.cancelPrompt) await cancelled(sessionId, rec, s.cancelPrompt);
    for (const text of s.afterCancel ?? []) await prompt(sessionId, rec, text);
  }
} catch (err) {
  fail(err?.stack ?? String(err));
}

// prompt sends a prompt and waits for it to end.
async function prompt(sessionId, rec, text) {
  const p = { text, stopReason: null, error: null, updates: [] };
  rec.prompts.push(p);
  inFlight.set(sessionId, p);
  try {
    const res = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
    p.stopReason = res.stopReason;
    if (res.stopReason !== "end_turn") fail(`prompt ${JSON.stringify(text)}: stopReason ${res.stopReason}`);
  } catch (err) {
    p.error = `${err?.code} ${err?.message ?? err}`;
    fail(`prompt ${JSON.stringify(text)}: ${p.error}`);
  }
  inFlight.delete(sessionId);
}

// cancelled sends a prompt and cancels it with $/cancel_request once the
// agent has started on it.
async function cancelled(sessionId, rec, text) {
  const p = { text, stopReason: null, error: null, updates: [] };
  rec.prompts.push(p);
  inFlight.set(sessionId, p);
  const abort = new AbortController();
  p.onUpdate = () => abort.abort();
  const answered = agent
    .request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] }, { cancellationSignal: abort.signal })
    .then(
      (res) => (p.stopReason = res.stopReason),
      (err) => (p.error = `${err?.code} ${err?.message ?? err}`),
    );
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(resolve, 15000, "late")));
  if ((await Promise.race([answered, late])) === "late") {
    fail(`prompt ${JSON.stringify(text)}: no answer 15s after $/cancel_request`);
  } else if (p.stopReason !== "cancelled" && !p.error?.startsWith("-32800 ")) {
    fail(`prompt ${JSON.stringify(text)}: answered ${p.stopReason ?? p.error} after $/cancel_request`);
  }
  clearTimeout(timer);
  inFlight.delete(sessionId);
}

child.stdin.end();
report.exit = await exited;
clearTimeout(deadline);
connection.close();
finish();
