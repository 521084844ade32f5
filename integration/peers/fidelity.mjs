// An editor and an agent built with the official TypeScript SDK that send
// each other every ACP method the SDK knows (fidelity_cases.mjs), for
// checking that what crosses a conductor arrives as it was sent.
//
//   node fidelity.mjs agent --version N --record FILE
//       An agent of protocol version N (1: the SDK's unstable v1 entry point
//       with the experimental NES methods; 2: experimental/v2/unstable). It
//       answers each case as the table says, through the SDK's typed handler
//       for the method where it has one, and sends the editor what the
//       editor asks it to (_acp-it/fidelity/send).
//
//   node fidelity.mjs client --version N --record FILE -- CMD [ARGS...]
//       Spawns CMD and runs every case in order: those the editor sends, and
//       those it asks the agent to send, then $/cancel_request both ways. It
//       prints one JSON line: the cases, and "failures".
//
//   node fidelity.mjs cases --version N
//       Prints the cases, params and replies included, as one JSON line.
//
// Each side appends to its FILE, one JSON object a line: every message it
// read or wrote, as the SDK's stream carried it ({"wire": "in"|"out",
// "msg"}), what each handler was given ({"handled": TAG, "typed", "params"}),
// and what each call came to in the SDK ({"outcome": TAG, "result"|"error"}).
// The Go test (TestFidelity) pairs what one side sent with what the other
// received.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as nes from "@agentclientprotocol/sdk/experimental/nes";
import { cases, sdk, tagOf, SEND, HOLD, HOLDING } from "./fidelity_cases.mjs";

const argv = process.argv.slice(2);
const role = argv[0];
const flag = (name) => {
  const i = argv.indexOf(name);
  return i >= 0 && (argv.indexOf("--") < 0 || i < argv.indexOf("--")) ? argv[i + 1] : undefined;
};
const version = Number(flag("--version") ?? 1);
const recordFile = flag("--record");
const acp = sdk[version];
const { cases: table, failures: tableFailures, excluded, special } = cases(version);

const record = (obj) => {
  if (recordFile) appendFileSync(recordFile, JSON.stringify(obj) + "\n");
};

// tapped records every message the SDK reads from or writes to stream.
function tapped(stream) {
  const tap = (wire) =>
    new TransformStream({
      transform(msg, controller) {
        record({ wire, msg });
        controller.enqueue(msg);
      },
    });
  const out = tap("out");
  void out.readable.pipeTo(stream.writable).catch(() => {});
  return { readable: stream.readable.pipeThrough(tap("in")), writable: out.writable };
}

// caseFor finds the case a handler was given: by the tag in its params, or,
// for a case whose params cannot carry one, by method and kind.
function caseFor(side, method, kind, params) {
  const tag = tagOf(params);
  if (tag !== undefined) return table.find((c) => c.tag === tag);
  return table.find((c) => c.untagged && c.side === side && c.method === method && c.kind === kind);
}

function errorOf(err) {
  if (err instanceof acp.RequestError) return { code: err.code, message: err.message, data: err.data };
  return { thrown: String(err?.stack ?? err) };
}

// serve registers on app the handlers for every case that side receives:
// the SDK's typed handler where it has one for the method (the params are
// then what its schema made of them), a raw one otherwise.
function serve(app, side) {
  const done = new Set();
  for (const c of table.filter((c) => c.side === side)) {
    const key = `${c.kind} ${c.method}`;
    if (done.has(key)) continue;
    done.add(key);
    const handle = (typed) => async ({ params }) => {
      const found = caseFor(side, c.method, c.kind, params);
      record({ handled: found?.tag ?? null, method: c.method, kind: c.kind, typed, params: params ?? null });
      if (!found) throw new acp.RequestError(-32099, `no case for ${c.method}`, { params });
      if (c.kind === "notification") return;
      if (found.reply.error) {
        const { code, message, data } = found.reply.error;
        throw new acp.RequestError(code, message, data);
      }
      return found.reply.result;
    };
    const on = c.kind === "request" ? "onRequest" : "onNotification";
    try {
      app[on](c.method, handle(true));
    } catch (err) {
      if (!/Unknown ACP|params parser/.test(String(err?.message))) throw err;
      app[on](c.method, (p) => p, handle(false));
    }
  }
  // A request held until it is cancelled: it ends with -32800 carrying
  // data, as the other side should see it.
  app.onRequest(HOLD, (p) => p, async ({ params, signal, ...cx }) => {
    record({ handled: tagOf(params), method: HOLD, kind: "request", typed: false, params });
    const peer = cx.client ?? cx.agent;
    const cancelled = new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    await peer.notify(HOLDING, { _meta: params._meta });
    await cancelled;
    throw acp.RequestError.requestCancelled({ tag: tagOf(params), _meta: { why: "cancelled" } });
  });
}

// send makes one case's call through the SDK and records what it came to.
async function send(peer, c) {
  try {
    if (c.kind === "notification") {
      await peer.notify(c.method, c.params);
      record({ outcome: c.tag, sent: true });
      return { sent: true };
    }
    const result = await peer.request(c.method, c.params);
    record({ outcome: c.tag, result: result ?? null });
    return { result: result ?? null };
  } catch (err) {
    const error = errorOf(err);
    record({ outcome: c.tag, error });
    return { error };
  }
}

// cancelHeld sends HOLD to peer, waits until the other side holds it, and
// cancels it with a $/cancel_request of its own that carries _meta and a
// member no schema has. holding resolves when HOLDING arrives.
async function cancelHeld(peer, holding, tag, sentIds) {
  const params = { _meta: { "acp-it/case": tag } };
  const answer = peer.request(HOLD, params).then(
    (result) => ({ result }),
    (err) => ({ error: errorOf(err) }),
  );
  await holding.promise;
  const id = sentIds.get(tag);
  await peer.notify("$/cancel_request", {
    requestId: id,
    _meta: { "acp-it/case": `${tag} cancel`, traceparent: "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" },
    "x-acp-it-unknown": ["kept", { "ü": 1 }],
  });
  const outcome = await answer;
  record({ outcome: tag, ...outcome });
  return outcome;
}

const deferred = () => {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
};

// idsOf remembers the id of each HOLD this side writes, by its tag, from
// the tap: the SDK does not tell its own request ids.
function idsOf(stream, ids) {
  const t = new TransformStream({
    transform(msg, controller) {
      if (msg?.method === HOLD && msg.id !== undefined) ids.set(tagOf(msg.params), msg.id);
      controller.enqueue(msg);
    },
  });
  void t.readable.pipeTo(stream.writable).catch(() => {});
  return { readable: stream.readable, writable: t.writable };
}

if (role === "agent") {
  const app = version === 1 ? nes.agent({ name: "acp-it-fidelity-agent" }) : acp.agent({ name: "acp-it-fidelity-agent" });
  serve(app, "agent");
  const ids = new Map();
  let holding = deferred();
  app.onNotification(HOLDING, (p) => p, () => holding.resolve());
  // The editor asks for each case the agent sends, and is answered with
  // what the call came to in the agent's SDK.
  app.onRequest(SEND, (p) => p, async ({ params, client }) => {
    if (params.done) return {};
    if (params.cancel) {
      holding = deferred();
      return cancelHeld(client, holding, params.cancel, ids);
    }
    const c = table.find((c) => c.tag === params.tag);
    return send(client, c);
  });
  const raw = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
  const conn = app.connect(idsOf(tapped(raw), ids));
  await conn.closed;
  process.exit(0);
} else if (role === "client") {
  const sep = argv.indexOf("--");
  const command = argv.slice(sep + 1);
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const failures = [...tableFailures];
  const ids = new Map();
  let holding = deferred();
  const app = acp.client({ name: "acp-it-fidelity-client" });
  serve(app, "client");
  app.onNotification(HOLDING, (p) => p, () => holding.resolve());
  const raw = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const timer = setTimeout(() => {
    failures.push("timed out");
    finish();
  }, Number(process.env.ACP_IT_TIMEOUT_MS ?? 60000));
  function finish() {
    clearTimeout(timer);
    const summary = table.map(({ tag, method, side, kind, reply, untagged, extension, nes }) => ({
      tag, method, side, kind, reply: reply && (reply.error ? "error" : "result"), untagged: !!untagged, extension: !!extension, nes: !!nes,
    }));
    console.log(JSON.stringify({ version, cases: summary, excluded, special, failures }));
    child.stdin.end();
    process.exit(failures.length ? 1 : 0);
  }
  try {
    await app.connectWith(idsOf(tapped(raw), ids), async (cx) => {
      for (const c of table) {
        if (c.side === "agent") {
          await send(cx, c);
        } else {
          const outcome = await cx.request(SEND, { tag: c.tag });
          record({ outcome: c.tag, ...outcome });
        }
      }
      // $/cancel_request, the editor's, then the agent's.
      await cancelHeld(cx, holding, `v${version} agent $/cancel_request`, ids);
      const outcome = await cx.request(SEND, { cancel: `v${version} client $/cancel_request` });
      record({ outcome: `v${version} client $/cancel_request`, ...outcome });
      await cx.request(SEND, { done: true });
    });
  } catch (err) {
    failures.push(String(err?.stack ?? err));
  }
  finish();
} else if (role === "cases") {
  // The table itself, for an editor that writes its own lines.
  console.log(JSON.stringify({ version, cases: table, failures: tableFailures }));
} else {
  console.error("usage: node fidelity.mjs agent --version N --record FILE | client --version N --record FILE -- CMD [ARGS...] | cases --version N");
  process.exit(2);
}
