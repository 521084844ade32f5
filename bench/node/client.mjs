// The benchmark's editor, built with the official ACP TypeScript SDK
// (@agentclientprotocol/sdk). It launches the command after "--" (the agent,
// a copier in front of it, or a conductor and its chain), opens one session,
// and prints one line of JSON:
//
//	{"latencyMedianNs", "latencyP99Ns", "tp100": {"updates", "seconds", "updatesPerSec"}, "errors"}
//
// Latency: prompts with no updates, one at a time, each timed from send to
// answer. Throughput: prompts with 100 updates each, one at a time; updates
// received per second. Every prompt's updates are counted: a missing or extra
// one is an error.
//
// Usage: node client.mjs [--warmup N] [--latency N] [--tp100 N] -- CMD [ARGS...]
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
if (sep < 0 || sep === argv.length - 1) {
  console.error("usage: node client.mjs [--warmup N] [--latency N] [--tp100 N] -- CMD [ARGS...]");
  process.exit(2);
}
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i < sep ? Number.parseInt(argv[i + 1], 10) : dflt;
};
const warmup = opt("--warmup", 100);
const latencyN = opt("--latency", 500);
const tpN = opt("--tp100", 50);
const command = argv.slice(sep + 1);

const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
child.on("error", (err) => {
  console.error(`bench client: spawn ${command[0]}: ${err.message}`);
  process.exit(1);
});

let updates = 0;
const app = acp
  .client({ name: "bench-sdk-client" })
  .onNotification(acp.methods.client.session.update, () => {
    updates++;
  });
const connection = app.connect(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
const agent = connection.agent;

let errors = 0;
let firstError = "";
const error = (msg) => {
  errors++;
  firstError ||= msg;
};

async function prompt(sessionId, k) {
  const before = updates;
  const res = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "hello" }],
    _meta: { "acp-bench": { updates: k } },
  });
  if (res.stopReason !== "end_turn") error(`stopReason ${res.stopReason}`);
  // The SDK dispatches notifications asynchronously: let the ones that came
  // before the answer run before counting.
  await new Promise((resolve) => setImmediate(resolve));
  if (updates - before !== k) error(`prompt with ${k} updates: saw ${updates - before}`);
}

try {
  await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "bench-sdk-client", version: "0.0.0" },
  });
  const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
  for (let i = 0; i < warmup; i++) await prompt(sessionId, 3);
  const lat = [];
  for (let i = 0; i < latencyN; i++) {
    const t0 = process.hrtime.bigint();
    await prompt(sessionId, 0);
    lat.push(Number(process.hrtime.bigint() - t0));
  }
  lat.sort((a, b) => a - b);
  const before = updates;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < tpN; i++) await prompt(sessionId, 100);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const n = updates - before;
  process.stdout.write(
    JSON.stringify({
      latencyMedianNs: lat[Math.floor(lat.length / 2)] ?? 0,
      latencyP99Ns: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))] ?? 0,
      tp100: { updates: n, seconds, updatesPerSec: n / seconds },
      errors,
      firstError,
    }) + "\n",
  );
} catch (err) {
  console.error(`bench client: ${err?.message ?? err}`);
  process.exitCode = 1;
}
child.stdin.end();
const exited = new Promise((resolve) => child.on("exit", resolve));
const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
await exited;
clearTimeout(timer);
process.exit();
