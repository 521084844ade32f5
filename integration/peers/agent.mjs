// An ACP agent on stdio, built with the official TypeScript SDK
// (@agentclientprotocol/sdk, app API). It is the terminal agent of the
// integration tests: it does no AI, only deterministic, checkable work.
//
// session/prompt with text T:
//   - if T contains "permission", it asks the client with
//     session/request_permission and reports the outcome in an update whose
//     text starts with "permission-result: ";
//   - for every "readfile:PATH" in T, it calls fs/read_text_file and reports
//     the content in an update whose text starts with "readfile-result: ";
//   - it then streams N agent_message_chunk updates with text "#i/N T" for
//     i = 0..N-1. N comes from the prompt's _meta["acp-it"].chunks, else the
//     ACP_IT_CHUNKS environment variable, else 3;
//   - if T contains "slow", it first works for a second;
//   - if T contains "hang", it stops after chunk #0 and waits until the
//     session is cancelled (session/cancel) or the connection closes;
//   - it answers stopReason "end_turn" ("cancelled" after session/cancel).
//
// Flags (argv):
//   --grandchild   spawn a long-lived `sleep` child at start, so that tests can
//                  see whether the conductor's cleanup reaches grandchildren.
//   --ignore-eof   do not exit when stdin closes (the conductor must signal us).
//   --null-error   write every result it answers with beside "error": null,
//                  as some JSON-RPC encoders do, and as the SDK itself refuses
//                  to read (-32600): a relay must drop the member.
//   --malformed-error  refuse a prompt containing "fail" (-32000), and write
//                  every error it answers with as "error": null, which is no
//                  JSON-RPC error: the SDK refuses it as a response
//                  (-32600), and a relay must answer with an error of its own.
//   --unversioned  answer a prompt containing "unversioned" without the
//                  "jsonrpc" member, which the SDK does not read as JSON-RPC
//                  2.0: it fails the request with -32600.
//   --bom          start its output with a UTF-8 byte order mark, as a .NET
//                  program does once Console.OutputEncoding is UTF-8: the
//                  SDK reads each line past one.
//   --name NAME    name reported in initialize's agentInfo.
//   --listen HOST:PORT  serve remote editors instead of stdio, with the SDK's
//                  experimental/server and its Node adapter (Streamable HTTP
//                  and WebSocket at /acp), and print the endpoint's ws:// URL
//                  as the first line on stdout. A prompt containing "drop"
//                  then makes the whole agent exit after its first update,
//                  dropping every connection mid-prompt.
//   --no-websocket with --listen: refuse WebSocket upgrades (426), leaving
//                  Streamable HTTP only.
//   --cookie NAME=VALUE with --listen: set this cookie, as a load balancer
//                  pinning a client to a backend does, on the answer to any
//                  request without it (the refused upgrade, the 101), and
//                  refuse with 403 any Streamable HTTP request that does not
//                  send it back: the RFD requires clients to.
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const option = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};

const agentName = option("--name", "acp-it-agent");
const log = (...args) => console.error(`[${agentName} ${process.pid}]`, ...args);

if (flag("--grandchild")) {
  // A well-behaved agent reaps its own child on a graceful exit; it cannot
  // when it is killed by a signal, and then only a process-group signal from
  // the conductor reaches the grandchild.
  const child = spawn("sleep", ["3600"], { stdio: "ignore" });
  child.unref();
  process.on("exit", () => {
    try {
      child.kill("SIGKILL");
    } catch {}
  });
  log("spawned grandchild", child.pid);
}

const defaultChunks = Number.parseInt(process.env.ACP_IT_CHUNKS ?? "3", 10);

let sessionCounter = 0;
// sessionId -> { cancelled: boolean, wake: Set<() => void> }
const sessions = new Map();
let clientCapabilities = {};

function promptText(prompt) {
  return prompt
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");
}

function chunkCount(params) {
  const fromMeta = params._meta?.["acp-it"]?.chunks;
  if (Number.isInteger(fromMeta) && fromMeta >= 0) return fromMeta;
  return Number.isInteger(defaultChunks) && defaultChunks >= 0 ? defaultChunks : 3;
}

const app = acp
  .agent({ name: agentName })
  .onRequest(acp.methods.agent.initialize, ({ params }) => {
    clientCapabilities = params.clientCapabilities ?? {};
    return {
      protocolVersion: Math.min(params.protocolVersion, acp.PROTOCOL_VERSION),
      agentCapabilities: {
        loadSession: false,
        promptCapabilities: { image: false, audio: false, embeddedContext: false },
      },
      authMethods: [],
      agentInfo: { name: agentName, version: "0.0.0" },
    };
  })
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    sessionCounter += 1;
    const sessionId = `sess-${process.pid}-${sessionCounter}-${Math.random().toString(36).slice(2, 10)}`;
    sessions.set(sessionId, { cancelled: false, wake: new Set(), cwd: params.cwd });
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client, signal }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw acp.RequestError.sessionNotFound(params.sessionId);
    }
    session.cancelled = false;
    const text = promptText(params.prompt);
    if (flag("--malformed-error") && text.includes("fail")) {
      throw new acp.RequestError(-32000, "acp-it: asked to fail");
    }
    const n = chunkCount(params);
    const say = (chunk) =>
      client.notify(acp.methods.client.session.update, {
        sessionId: params.sessionId,
        update: {
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text: chunk },
        },
      });

    if (flag("--unversioned") && text.includes("unversioned")) {
      return { stopReason: "end_turn", _meta: { "acp-it-unversioned": true } };
    }
    if (text.includes("slow")) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    if (text.includes("permission")) {
      const response = await client.request(acp.methods.client.session.requestPermission, {
        sessionId: params.sessionId,
        toolCall: {
          toolCallId: `perm-${Math.random().toString(36).slice(2, 10)}`,
          title: "acp-it permission check",
          kind: "other",
          status: "pending",
        },
        options: [
          { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
          { optionId: "reject-once", name: "Reject once", kind: "reject_once" },
        ],
      });
      const outcome = response.outcome;
      await say(
        `permission-result: ${outcome.outcome}${outcome.outcome === "selected" ? `:${outcome.optionId}` : ""}`,
      );
    }

    for (const match of text.matchAll(/readfile:(\S+)/g)) {
      const path = match[1];
      if (!clientCapabilities.fs?.readTextFile) {
        await say(`readfile-result: ERROR client lacks fs.readTextFile`);
        continue;
      }
      const response = await client.request(acp.methods.client.fs.readTextFile, {
        sessionId: params.sessionId,
        path,
      });
      await say(`readfile-result: ${response.content}`);
    }

    for (let i = 0; i < n; i++) {
      if (session.cancelled || signal.aborted) {
        return { stopReason: "cancelled" };
      }
      await say(`#${i}/${n} ${text}`);
      if (i === 0 && text.includes("drop") && option("--listen")) {
        log("dropping every connection mid-prompt");
        process.exit(3);
      }
      if (i === 0 && text.includes("hang")) {
        log("hanging in session", params.sessionId);
        await new Promise((resolve) => {
          if (session.cancelled || signal.aborted) return resolve();
          session.wake.add(resolve);
          signal.addEventListener("abort", resolve, { once: true });
        });
      }
    }
    return { stopReason: session.cancelled ? "cancelled" : "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    const session = sessions.get(params.sessionId);
    if (!session) return;
    session.cancelled = true;
    for (const wake of session.wake) wake();
    session.wake.clear();
  });

if (option("--listen")) {
  await listen(option("--listen"));
} else {
  serveStdio();
}

async function listen(addr) {
  const { AcpServer } = await import("@agentclientprotocol/sdk/experimental/server");
  const { createNodeHttpHandler, createNodeWebSocketUpgradeHandler } = await import(
    "@agentclientprotocol/sdk/experimental/node"
  );
  const { WebSocketServer } = await import("ws");
  const { createServer } = await import("node:http");
  const server = new AcpServer({ agent: app });
  const wss = new WebSocketServer({ noServer: true });
  const handle = createNodeHttpHandler(server);
  const cookie = option("--cookie");
  const hasCookie = (req) => (req.headers.cookie ?? "").split(/;\s*/).includes(cookie);
  const http = createServer((req, res) => {
    if (cookie && !hasCookie(req)) {
      log(`refused a ${req.method} without the cookie ${cookie}`);
      res.writeHead(403, { "Set-Cookie": `${cookie}; Path=/; HttpOnly` });
      res.end("missing the affinity cookie");
      return;
    }
    handle(req, res);
  });
  if (cookie) {
    wss.on("headers", (headers, req) => {
      if (!hasCookie(req)) headers.push(`Set-Cookie: ${cookie}; Path=/; HttpOnly`);
    });
  }
  if (flag("--no-websocket")) {
    // A Streamable-HTTP-only server, as the RFD allows a proxy in between
    // to make it: the upgrade is refused.
    const setCookie = cookie ? `Set-Cookie: ${cookie}; Path=/; HttpOnly\r\n` : "";
    http.on("upgrade", (_req, socket) => {
      socket.end(`HTTP/1.1 426 Upgrade Required\r\n${setCookie}Content-Length: 0\r\nConnection: close\r\n\r\n`);
    });
  } else {
    http.on("upgrade", createNodeWebSocketUpgradeHandler(server, wss));
  }
  const i = addr.lastIndexOf(":");
  await new Promise((resolve) => http.listen(Number(addr.slice(i + 1)), addr.slice(0, i), resolve));
  process.stdout.write(`ws://${addr.slice(0, i)}:${http.address().port}/acp\n`);
  const stop = () => {
    server.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

function serveStdio() {
  if (flag("--bom")) process.stdout.write("\uFEFF");
  let stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  if (flag("--null-error")) stream = withNullError(stream);
  if (flag("--malformed-error")) stream = withMalformedError(stream);
  if (flag("--unversioned")) stream = withUnversioned(stream);
  const connection = app.connect(stream);
  connection.closed.then(() => {
    if (flag("--ignore-eof")) {
      log("connection closed; staying alive (--ignore-eof)");
      setInterval(() => {}, 1 << 30);
      return;
    }
    process.exit(0);
  });
}

// withNullError returns stream with "error": null added to each response
// with a result written to it (see --null-error).
function withNullError(stream) {
  const add = new TransformStream({
    transform(msg, controller) {
      const answer = msg && typeof msg === "object" && !("method" in msg) && Object.hasOwn(msg, "result");
      controller.enqueue(answer ? { ...msg, error: null } : msg);
    },
  });
  add.readable.pipeTo(stream.writable).catch((err) => log("writer closed:", err?.message ?? err));
  return { readable: stream.readable, writable: add.writable };
}

// withMalformedError returns stream with the error of each error response
// written to it replaced by null (see --malformed-error).
function withMalformedError(stream) {
  const spoil = new TransformStream({
    transform(msg, controller) {
      const refusal = msg && typeof msg === "object" && !("method" in msg) && Object.hasOwn(msg, "error");
      controller.enqueue(refusal ? { ...msg, error: null } : msg);
    },
  });
  spoil.readable.pipeTo(stream.writable).catch((err) => log("writer closed:", err?.message ?? err));
  return { readable: stream.readable, writable: spoil.writable };
}

// withUnversioned returns stream with the "jsonrpc" member removed from
// each answer whose result is marked "acp-it-unversioned" (see
// --unversioned).
function withUnversioned(stream) {
  const strip = new TransformStream({
    transform(msg, controller) {
      if (msg?.result?._meta?.["acp-it-unversioned"]) {
        const { jsonrpc, ...rest } = msg;
        controller.enqueue(rest);
        return;
      }
      controller.enqueue(msg);
    },
  });
  strip.readable.pipeTo(stream.writable).catch((err) => log("writer closed:", err?.message ?? err));
  return { readable: stream.readable, writable: strip.writable };
}
