// An ACP client (an "editor") built with the official TypeScript SDK
// (@agentclientprotocol/sdk, app API). It spawns the command after "--" (the
// conductor, or an agent directly), drives it over the command's stdio, and
// prints what it saw as JSON lines on stdout:
//
//   {"type":"event", ...}     progress the Go test may react to (hold mode)
//   {"type":"summary", ...}   last line: everything recorded, plus "failures"
//
// It exits 0 only if "failures" is empty.
//
// Usage: node client.mjs --config '<json>' -- CMD [ARGS...]
//        node client.mjs --config '<json with url>'
//
// Config (all optional):
//   mode            "conversation" (default) | "concurrent" | "hold"
//   prompts         conversation: prompt texts, sent in order on one session
//   cancelPrompt    conversation: then this prompt (containing "hang") is sent
//                   and cancelled with session/cancel after its first update;
//                   its stopReason must be "cancelled"
//   chunks          updates per prompt, sent to the agent in _meta["acp-it"]
//   sessions        concurrent: number of sessions (K)
//   promptsPerSession concurrent: prompts per session (M), sequential per session
//   holdPrompt      hold: text of the prompt that hangs (must contain "hang")
//   holdAction      hold, once the prompt is active (event "active" printed):
//                   "wait" (default): wait for someone else to end the command;
//                   "close-stdin": close the command's stdin at once;
//                   "close-on-eof": close it when the client's own stdin ends
//   activeTimeoutMs hold: how long the held prompt may take to send its first
//                   update (default 20000)
//   files           {path: content} served to fs/read_text_file; other paths
//                   are read from disk
//   cwd             session cwd (default process.cwd())
//   childEnv        {NAME: value} added to the spawned command's environment
//   cancelRequestPrompt conversation: then this prompt (containing "hang") is
//                   sent and abandoned with $/cancel_request after its first
//                   update; it must end cancelled (stopReason or -32800)
//   url             instead of spawning a command, connect to this ACP
//                   endpoint with the SDK's experimental remote transports
//   transport       with url: "ws" (experimental/ws-client, the default) or
//                   "http" (experimental/http-client, Streamable HTTP)
//   headers         with url: sent with every request (Authorization)
//   nullError       write every result the client answers with beside
//                   "error": null, as some JSON-RPC encoders do (and as the
//                   SDK itself refuses to read: -32600)
//   bom             start what it writes to the command with a UTF-8 byte
//                   order mark, as a .NET program's output starts once
//                   Console.OutputEncoding is UTF-8
//   timeoutMs       overall deadline (default 60000)
//   exitTimeoutMs   how long to wait for the command to exit after its stdin
//                   is closed (default 20000)
//
// Ordering is checked twice. "wire" order is taken from a tap between the
// ndjson stream and the SDK connection, so it is exactly the order in which
// lines arrived from the conductor; it is what the tests assert. "sdk" order is
// what the SDK's handlers and the prompt() promise observed, and is reported
// for information (the SDK dispatches notifications asynchronously).
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const ci = argv.indexOf("--config");
const config = ci >= 0 && (sep < 0 || ci < sep) ? JSON.parse(argv[ci + 1]) : {};
if (!config.url && (sep < 0 || sep === argv.length - 1)) {
  console.error("usage: node client.mjs --config JSON -- CMD [ARGS...]");
  process.exit(2);
}
const command = sep >= 0 ? argv.slice(sep + 1) : [];

const mode = config.mode ?? "conversation";
const chunks = config.chunks ?? 3;
const files = config.files ?? {};
const cwd = config.cwd ?? process.cwd();
const timeoutMs = config.timeoutMs ?? 60000;
const exitTimeoutMs = config.exitTimeoutMs ?? 20000;

const log = (...args) => console.error("[it-client]", ...args);
const failures = [];
const fail = (msg) => {
  failures.push(msg);
  log("FAIL:", msg);
};
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// ---- the command under test -------------------------------------------------

// With a url there is no command: a stand-in "child" whose stdin ending
// closes the remote connection, and which "exits" when that has closed.
const remote = config.url ? await remoteStream(config) : null;
const child = remote ? remote.child : spawn(command[0], command.slice(1), {
  stdio: ["pipe", "pipe", "inherit"],
  env: { ...process.env, ...(config.childEnv ?? {}) },
});
child.stdin.on("error", (err) => log("stdin of command:", err.message));
if (config.bom) child.stdin.write("\uFEFF");
const childExit = new Promise((resolve) => {
  child.on("exit", (code, signal) => resolve({ exitCode: code, signal }));
  child.on("error", (err) => {
    fail(`spawn ${command[0]}: ${err.message}`);
    resolve({ exitCode: null, signal: null, spawnError: err.message });
  });
});
let exitInfo = null;
childExit.then((info) => {
  exitInfo = info;
});

// ---- recording --------------------------------------------------------------

// One record per session: its prompts and two logs of what was observed.
const sessions = new Map(); // sessionId -> record
const outgoing = new Map(); // JSON-RPC id -> {method, sessionId, tag}
const permissionRequests = [];
const fsReads = [];
const unexpected = []; // messages we did not expect (unknown methods etc.)
let wireMessages = 0;

function sessionRecord(sessionId) {
  let rec = sessions.get(sessionId);
  if (!rec) {
    rec = { sessionId, prompts: [], byText: new Map(), wire: [], sdk: [], current: null, firstUpdate: new Map() };
    sessions.set(sessionId, rec);
  }
  return rec;
}

// Classifies an agent_message_chunk of a session: {tag, index} for "#i/N TEXT",
// or {tag, result} for the "...-result:" reports.
function classify(rec, update) {
  if (update?.sessionUpdate !== "agent_message_chunk" || update.content?.type !== "text") {
    return { other: update?.sessionUpdate ?? "?" };
  }
  const text = update.content.text;
  const m = /^#(\d+)\/(\d+) ([\s\S]*)$/.exec(text);
  if (m) {
    const prompt = rec.byText.get(m[3]);
    return { tag: prompt?.tag ?? `?${m[3]}`, index: Number(m[1]), of: Number(m[2]) };
  }
  if (/^(permission|readfile)-result: /.test(text)) {
    return { tag: rec.current?.tag ?? "?", result: text };
  }
  return { other: text };
}

function tapIncoming(msg) {
  wireMessages++;
  if (msg && typeof msg === "object" && "method" in msg) {
    if (msg.method === acp.methods.client.session.update && !("id" in msg)) {
      const rec = sessionRecord(msg.params?.sessionId);
      const c = classify(rec, msg.params?.update);
      rec.wire.push({ kind: "update", ...c });
      if (c.tag !== undefined && c.index === 0) {
        const waiter = rec.firstUpdate.get(c.tag);
        if (waiter) waiter();
      }
    }
    return;
  }
  if (msg && typeof msg === "object" && "id" in msg) {
    const out = outgoing.get(msg.id);
    if (out?.method === acp.methods.agent.session.prompt) {
      sessionRecord(out.sessionId).wire.push({ kind: "response", tag: out.tag, error: "error" in msg });
    }
  }
}

function tapOutgoing(msg) {
  if (msg && typeof msg === "object" && "method" in msg && "id" in msg) {
    const entry = { method: msg.method, sessionId: msg.params?.sessionId };
    if (msg.method === acp.methods.agent.session.prompt) {
      entry.tag = msg.params?._meta?.["acp-it"]?.tag;
    }
    outgoing.set(msg.id, entry);
  }
}

// ---- the SDK client ---------------------------------------------------------

const app = acp
  .client({ name: "acp-it-client" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const rec = sessionRecord(params.sessionId);
    rec.sdk.push({ kind: "update", ...classify(rec, params.update) });
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    permissionRequests.push({
      sessionId: params.sessionId,
      toolCallId: params.toolCall?.toolCallId,
      title: params.toolCall?.title,
      options: params.options.map((o) => o.optionId),
    });
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
    fsReads.push({ sessionId: params.sessionId, path: params.path });
    if (Object.hasOwn(files, params.path)) return { content: files[params.path] };
    try {
      return { content: readFileSync(params.path, "utf8") };
    } catch (err) {
      throw acp.RequestError.resourceNotFound(params.path);
    }
  })
  .onRequest("*", ({ method }) => {
    unexpected.push({ kind: "request", method });
    throw acp.RequestError.methodNotFound(method);
  })
  .onNotification("*", ({ method }) => {
    unexpected.push({ kind: "notification", method });
  });

const raw = remote ? remote.stream : acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const inTap = new TransformStream({
  transform(msg, controller) {
    tapIncoming(msg);
    controller.enqueue(msg);
  },
});
const outTap = new TransformStream({
  transform(msg, controller) {
    tapOutgoing(msg);
    const answer = msg && typeof msg === "object" && !("method" in msg) && Object.hasOwn(msg, "result");
    controller.enqueue(config.nullError && answer ? { ...msg, error: null } : msg);
  },
});
// Aborting the pipe aborts the transport, which for a remote one means
// closing the connection (a WebSocket close, an HTTP DELETE).
const pipeAbort = new AbortController();
const piped = outTap.readable
  .pipeTo(raw.writable, { signal: pipeAbort.signal })
  .catch((err) => log("writer closed:", err?.message ?? err));
const connection = app.connect({ readable: raw.readable.pipeThrough(inTap), writable: outTap.writable });
const agent = connection.agent;

// ---- helpers ----------------------------------------------------------------

let initializeResult = null;

async function initialize() {
  initializeResult = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: false }, terminal: false },
    clientInfo: { name: "acp-it-client", version: "0.0.0" },
  });
  if (initializeResult.protocolVersion !== acp.PROTOCOL_VERSION) {
    fail(`initialize: protocolVersion ${initializeResult.protocolVersion}`);
  }
}

async function newSession() {
  const res = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  if (typeof res.sessionId !== "string" || res.sessionId === "") {
    throw new Error(`session/new returned no sessionId: ${JSON.stringify(res)}`);
  }
  if (sessions.has(res.sessionId) && sessions.get(res.sessionId).prompts.length > 0) {
    fail(`session/new returned a duplicate sessionId ${res.sessionId}`);
  }
  sessionRecord(res.sessionId);
  return res.sessionId;
}

// Sends one prompt and records it. Returns the prompt record.
async function prompt(sessionId, tag, text, n = chunks, options = undefined) {
  const rec = sessionRecord(sessionId);
  const p = { tag, text, chunks: n, stopReason: null, error: null };
  rec.prompts.push(p);
  rec.byText.set(text, p);
  rec.current = p;
  try {
    const res = await agent.request(acp.methods.agent.session.prompt, {
      sessionId,
      prompt: [{ type: "text", text }],
      _meta: { "acp-it": { chunks: n, tag } },
    }, options);
    p.stopReason = res.stopReason;
  } catch (err) {
    p.error = `${err?.code ?? ""} ${err?.message ?? err}`.trim();
  }
  rec.sdk.push({ kind: "response", tag });
  return p;
}

// Checks one prompt against a session log: indices 0..n-1 in order, all before
// the prompt's response.
function checkOrder(log, p) {
  const problems = [];
  let next = 0;
  let responded = false;
  for (const e of log) {
    if (e.tag !== p.tag) continue;
    if (e.kind === "response") {
      if (responded) problems.push("two responses");
      responded = true;
      continue;
    }
    if (e.index === undefined) continue;
    if (responded) problems.push(`update #${e.index} after the response`);
    if (e.index !== next) problems.push(`update #${e.index} where #${next} was expected`);
    next = e.index + 1;
  }
  if (!responded) problems.push("no response");
  if (next !== p.chunks) problems.push(`saw updates up to #${next - 1} of ${p.chunks}`);
  return problems;
}

function verify() {
  for (const rec of sessions.values()) {
    for (const p of rec.prompts) {
      if (p.hang) continue;
      if (p.error) fail(`${p.tag}: prompt failed: ${p.error}`);
      else if (p.stopReason !== "end_turn") fail(`${p.tag}: stopReason ${p.stopReason}`);
      p.wireProblems = checkOrder(rec.wire, p);
      p.sdkProblems = checkOrder(rec.sdk, p);
      for (const problem of p.wireProblems) fail(`${p.tag} (wire): ${problem}`);
      p.results = rec.wire.filter((e) => e.tag === p.tag && e.result).map((e) => e.result);
      p.updates = rec.wire.filter((e) => e.tag === p.tag && e.index !== undefined).map((e) => e.index);
    }
  }
  if (unexpected.length > 0) fail(`unexpected messages: ${JSON.stringify(unexpected)}`);
}

function summary() {
  const sdkReorders = [];
  const out = {
    type: "summary",
    mode,
    command,
    conductorPid: child.pid,
    initialize: initializeResult,
    sessions: [...sessions.values()].map((rec) => ({
      sessionId: rec.sessionId,
      prompts: rec.prompts.map((p) => {
        if (p.sdkProblems?.length) sdkReorders.push({ tag: p.tag, problems: p.sdkProblems });
        return {
          tag: p.tag,
          text: p.text,
          chunks: p.chunks,
          stopReason: p.stopReason,
          error: p.error,
          updates: p.updates,
          results: p.results,
        };
      }),
      others: rec.wire.filter((e) => e.other !== undefined).map((e) => e.other),
    })),
    permissionRequests,
    fsReads,
    unexpected,
    wireMessages,
    sdkReorders,
    exit: exitInfo,
    failures,
  };
  return out;
}

async function closeAndWait() {
  child.stdin.end();
  const exited = await Promise.race([
    childExit,
    new Promise((resolve) => setTimeout(() => resolve(null), exitTimeoutMs).unref()),
  ]);
  if (!exited) {
    fail(`command did not exit within ${exitTimeoutMs}ms of its stdin closing`);
    child.kill("SIGKILL");
    exitInfo = await childExit;
    exitInfo.killedByClient = true;
  }
}

// ---- modes ------------------------------------------------------------------

async function conversation() {
  await initialize();
  const sessionId = await newSession();
  const texts = config.prompts ?? ["hello"];
  for (let i = 0; i < texts.length; i++) {
    await prompt(sessionId, `p${i}`, texts[i]);
  }
  if (config.cancelPrompt) {
    // A prompt that hangs after its first update until session/cancel, a
    // notification that must reach the agent through the whole chain.
    const rec = sessionRecord(sessionId);
    const first = new Promise((resolve) => rec.firstUpdate.set("cancel", resolve));
    const pending = prompt(sessionId, "cancel", config.cancelPrompt);
    const p = rec.prompts[rec.prompts.length - 1];
    p.hang = true;
    await first;
    await agent.notify(acp.methods.agent.session.cancel, { sessionId });
    await pending;
    if (p.stopReason !== "cancelled") {
      fail(`cancel: stopReason ${p.stopReason}, error ${p.error}, want stopReason cancelled`);
    }
  }
  if (config.cancelRequestPrompt) {
    // The same, abandoned with $/cancel_request (the SDK sends it when the
    // request's cancellation signal aborts).
    const rec = sessionRecord(sessionId);
    const first = new Promise((resolve) => rec.firstUpdate.set("cancel-request", resolve));
    const abort = new AbortController();
    const pending = prompt(sessionId, "cancel-request", config.cancelRequestPrompt, chunks, {
      cancellationSignal: abort.signal,
    });
    const p = rec.prompts[rec.prompts.length - 1];
    p.hang = true;
    await first;
    abort.abort();
    await pending;
    if (p.stopReason !== "cancelled" && !/-32800/.test(p.error ?? "")) {
      fail(`cancel-request: stopReason ${p.stopReason}, error ${p.error}, want cancelled`);
    }
  }
  verify();
  await closeAndWait();
}

async function concurrent() {
  await initialize();
  const k = config.sessions ?? 4;
  const m = config.promptsPerSession ?? 3;
  const ids = await Promise.all(Array.from({ length: k }, () => newSession()));
  if (new Set(ids).size !== ids.length) fail("session/new returned duplicate sessionIds");
  await Promise.all(
    ids.map(async (sessionId, s) => {
      for (let i = 0; i < m; i++) {
        await prompt(sessionId, `s${s}p${i}`, `session ${s} prompt ${i}`);
      }
    }),
  );
  verify();
  await closeAndWait();
}

async function hold() {
  await initialize();
  const sessionId = await newSession();
  const text = config.holdPrompt ?? "please hang";
  const rec = sessionRecord(sessionId);
  const first = new Promise((resolve) => rec.firstUpdate.set("hold", resolve));
  const pending = prompt(sessionId, "hold", text);
  rec.prompts[rec.prompts.length - 1].hang = true;
  const activeTimeoutMs = config.activeTimeoutMs ?? 20000;
  const active = await Promise.race([
    first.then(() => true),
    pending.then(() => false),
    new Promise((resolve) => setTimeout(() => resolve(false), activeTimeoutMs).unref()),
  ]);
  if (!active) {
    throw new Error(`the held prompt produced no first update within ${activeTimeoutMs}ms`);
  }
  emit({ type: "event", event: "active", conductorPid: child.pid, sessionId });
  const action = config.holdAction ?? "wait";
  if (action === "close-stdin") {
    await closeAndWait();
  } else if (action === "close-on-eof") {
    // The driver (the Go test) closes our stdin when it is done looking.
    await new Promise((resolve) => {
      process.stdin.on("end", resolve);
      process.stdin.on("error", resolve);
      process.stdin.resume();
    });
    await closeAndWait();
  } else {
    exitInfo = await childExit;
  }
  const p = await pending; // settles: the connection closes with the command
  if (!p.error && !p.stopReason) fail("hold prompt neither failed nor stopped");
}

const modes = { conversation, concurrent, hold };
if (!modes[mode]) {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}

const deadline = setTimeout(() => {
  fail(`timeout after ${timeoutMs}ms`);
  const s = summary();
  s.progress = [...sessions.values()].map((rec) => ({
    sessionId: rec.sessionId,
    wireEntries: rec.wire.length,
    prompts: rec.prompts.map((p) => [p.tag, p.stopReason, p.error]),
  }));
  emit(s);
  child.kill("SIGKILL");
  process.exit(1);
}, timeoutMs);

try {
  await modes[mode]();
} catch (err) {
  fail(`${mode}: ${err?.stack ?? err?.message ?? err}`);
  if (exitInfo === null) {
    child.kill("SIGKILL");
    exitInfo = await childExit;
    exitInfo.killedByClient = true;
  }
}
clearTimeout(deadline);
connection.close();
emit(summary());
process.exitCode = failures.length === 0 ? 0 : 1;
// Do not wait for stray handles (pipes of a command that left children behind).
setImmediate(() => process.exit(process.exitCode));

// remoteStream connects to config.url with the SDK's experimental client
// transports, and returns the stream with a stand-in child process.
async function remoteStream(config) {
  const headers = config.headers ?? {};
  const inFlight = new Set();
  let stream;
  if ((config.transport ?? "ws") === "http") {
    const { createHttpStream } = await import("@agentclientprotocol/sdk/experimental/http-client");
    // The SDK's close() starts the DELETE and a second close() (the pipe's
    // abort after the reader's cancel) does not wait for it; keep the
    // requests in flight so the "exit" waits until the server has them.
    const fetchImpl = (input, init) => {
      const p = fetch(input, init);
      inFlight.add(p);
      p.finally(() => inFlight.delete(p)).catch(() => {});
      return p;
    };
    stream = createHttpStream(config.url, { headers, fetch: fetchImpl });
  } else {
    const { createWebSocketStream } = await import("@agentclientprotocol/sdk/experimental/ws-client");
    const { WebSocket } = await import("ws");
    stream = createWebSocketStream(config.url, { WebSocket, headers, protocols: config.protocols });
  }
  const { EventEmitter } = await import("node:events");
  const child = new EventEmitter();
  child.pid = null;
  child.kill = () => child.stdin.end();
  child.stdin = new Writable({ write(_chunk, _enc, cb) { cb(); } });
  // Ending stdin closes the connection; the "exit" follows once it closed.
  child.stdin.on("finish", async () => {
    try {
      await connection.close();
    } catch {}
    pipeAbort.abort();
    await piped;
    await Promise.allSettled([...inFlight]);
    child.emit("exit", 0, null);
  });
  return { stream, child };
}
