#!/usr/bin/env node
// transcript-recorder: an ACP proxy that writes every message passing through
// it to a JSON Lines file, and changes nothing.
//
// It sits in a proxy chain (see the proxy-chains RFD) and speaks to its
// conductor over stdin and stdout, one JSON-RPC message per line. Each message
// is passed on the moment it arrives: from its predecessor (the client side)
// wrapped in proxy/successor, from its successor (the agent side) unwrapped.
// A request goes on under an id of the recorder's own and its answer comes
// back under the sender's id, so any number are in flight both ways at once.
// Params, results and errors are copied as the exact text that arrived.
//
// Each message is recorded once, as it passes, in the order it passes:
//
//   {"time":"2025-01-02T03:04:05.678Z","direction":"to_agent","message":{...}}
//
// direction is "to_agent" (from the predecessor on to the successor) or
// "to_client" (the other way). message is the message without any
// proxy/successor envelope, with the ids the conductor gave the recorder: a
// request and its answer carry the same id, in opposite directions. The file
// is appended to, and written synchronously, so it is complete whenever the
// recorder stops.
//
// Usage: node transcript-recorder.mjs --out FILE   (or ACP_TRANSCRIPT=FILE)
//
// Node 20 or later; no dependencies.
import { closeSync, openSync, writeSync } from "node:fs";
import { createInterface } from "node:readline";

const log = (...args) => console.error("transcript-recorder:", ...args);

const usage = "usage: transcript-recorder.mjs --out FILE   (or ACP_TRANSCRIPT=FILE)";
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === "-h" || args[0] === "--help")) {
  console.error(usage); // stdout is the protocol's, even here
  process.exit(0);
}
// A mistake names itself, not only the usage, so that a typo in a chain
// file is found from the conductor's log.
const refuse = (problem) => {
  log(problem);
  console.error(usage);
  process.exit(2);
};
let out = process.env.ACP_TRANSCRIPT;
for (let i = 0; i < args.length; i++) {
  if (args[i] !== "--out") refuse(`unknown argument ${JSON.stringify(args[i])}`);
  if (i + 1 >= args.length) refuse("--out needs a FILE");
  out = args[++i];
}
if (!out) refuse("no transcript file: give --out FILE or set ACP_TRANSCRIPT");
let fd;
try {
  fd = openSync(out, "a");
} catch (err) {
  log(`opening the transcript: ${err.message}`);
  process.exit(1);
}

// ---- raw JSON ---------------------------------------------------------------

// valueEnd returns the index just past the JSON value that starts at i in
// text, which must be valid JSON.
function valueEnd(text, i) {
  const c = text[i];
  if (c === '"') {
    for (i++; text[i] !== '"'; i++) if (text[i] === "\\") i++;
    return i + 1;
  }
  if (c === "{" || c === "[") {
    for (let depth = 0; ; i++) {
      const d = text[i];
      if (d === '"') i = valueEnd(text, i) - 1;
      else if (d === "{" || d === "[") depth++;
      else if ((d === "}" || d === "]") && --depth === 0) return i + 1;
    }
  }
  while (i < text.length && !",]} \t\r\n".includes(text[i])) i++;
  return i;
}

const skipSpace = (text, i) => {
  while (" \t\r\n".includes(text[i]) && i < text.length) i++;
  return i;
};

// members returns the raw text of each member of the JSON object in text,
// which must be valid JSON, so that values are passed on as they came.
function members(text) {
  const raw = new Map();
  let i = skipSpace(text, 0) + 1; // past the '{'
  for (;;) {
    i = skipSpace(text, i);
    if (text[i] === "}") return raw;
    if (text[i] === ",") i = skipSpace(text, i + 1);
    const nameEnd = valueEnd(text, i);
    const name = JSON.parse(text.slice(i, nameEnd));
    const start = skipSpace(text, skipSpace(text, nameEnd) + 1); // past the ':'
    const end = valueEnd(text, start);
    raw.set(name, text.slice(start, end));
    i = end;
  }
}

// JSONRPC holds the members JSON-RPC defines; a message's others go on with
// it, wrapped or not.
const JSONRPC = ["jsonrpc", "id", "method", "params", "result", "error"];

// extra returns the members of m that JSON-RPC does not define, but for
// those named in also, as [name, raw text] pairs.
const extra = (m, also = []) => [...m].filter(([k]) => !JSONRPC.includes(k) && !also.includes(k));

const pairs = (more) => more.map(([k, v]) => `,${JSON.stringify(k)}:${v}`).join("");

// message builds a JSON-RPC message from raw member texts, leaving out those
// that are undefined; more, the message's other members, come after them.
function message({ id, method, params, result, error, more = [] }) {
  let s = '{"jsonrpc":"2.0"';
  if (id !== undefined) s += `,"id":${id}`;
  if (method !== undefined) s += `,"method":${JSON.stringify(method)}`;
  if (params !== undefined) s += `,"params":${params}`;
  if (result !== undefined) s += `,"result":${result}`;
  if (error !== undefined) s += `,"error":${error}`;
  return s + pairs(more) + "}";
}

// ---- the proxy --------------------------------------------------------------

const ENVELOPES = ["proxy/successor", "_proxy/successor"];
let envelope = "proxy/successor"; // or the Rust SDK's, if addressed in it
let lastId = 0;
const waiting = new Map(); // our id -> {id, from}: whom to answer, under what id
const relayed = new Map(); // `${from} ${id}` -> our id, for $/cancel_request

function record(direction, line) {
  writeSync(fd, `{"time":${JSON.stringify(new Date().toISOString())},"direction":"${direction}","message":${line}}\n`);
}

function send(line) {
  process.stdout.write(line + "\n");
}

// sendOn passes a request or notification to the side it did not come from;
// its members that JSON-RPC does not define, more, go in the envelope's
// params when it is wrapped.
function sendOn(from, id, method, params, more) {
  if (id !== undefined) {
    const ours = ++lastId;
    waiting.set(ours, { id, from });
    relayed.set(`${from} ${JSON.stringify(JSON.parse(id))}`, ours);
    id = String(ours);
  }
  if (from === "successor") {
    send(message({ id, method, params, more }));
  } else {
    const inner = `{"method":${JSON.stringify(method)}${params === undefined ? "" : `,"params":${params}`}${pairs(more)}}`;
    send(message({ id, method: envelope, params: inner }));
  }
}

// passBack returns an answer to whoever sent the request it answers.
function passBack(m) {
  const ours = JSON.parse(m.get("id") ?? "null");
  const to = waiting.get(ours);
  if (!to) {
    log(`dropped an answer to unknown id ${m.get("id")}`);
    return;
  }
  waiting.delete(ours);
  relayed.delete(`${to.from} ${JSON.stringify(JSON.parse(to.id))}`);
  const line = m.has("error")
    ? message({ id: to.id, error: m.get("error"), more: extra(m) })
    : message({ id: to.id, result: m.get("result") ?? "null", more: extra(m) });
  record(to.from === "predecessor" ? "to_client" : "to_agent", line);
  send(line);
}

// withMember returns the JSON object text with member name set to the raw
// value, every other member's text as it was.
function withMember(text, name, value) {
  const m = members(text);
  m.set(name, value);
  return `{${[...m].map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`;
}

// cancel passes on $/cancel_request for a request we sent on, under our id.
// The conductor names the request by the id it had here, whichever side it
// came from, and the cancel goes on plain, as the ACP schema says for every
// hop, even for a request we sent in an envelope. Only the id changes:
// _meta (trace context, say) and whatever else it carries go on with it.
function cancel(params, more) {
  const target = JSON.stringify(params === undefined ? undefined : JSON.parse(params).requestId);
  for (const from of ["predecessor", "successor"]) {
    const ours = relayed.get(`${from} ${target}`);
    if (ours !== undefined) {
      send(message({ method: "$/cancel_request", params: withMember(params, "requestId", String(ours)), more }));
      return;
    }
  }
  // answered already
}

function dispatch(line) {
  // Parsed only to check its shape; what is passed on is the raw text.
  const parsed = JSON.parse(line);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error("not a JSON-RPC message");
  }
  const m = members(line);
  const id = m.get("id");
  if (!m.has("method")) {
    passBack(m);
    return;
  }
  const method = JSON.parse(m.get("method"));
  const params = m.get("params");
  if (ENVELOPES.includes(method)) {
    if (typeof parsed.params?.method !== "string" || Array.isArray(parsed.params)) {
      log(`dropped a ${method} with no method inside`);
      if (id !== undefined) {
        send(message({ id, error: `{"code":-32602,"message":"transcript-recorder: ${method} without a method"}` }));
      }
      return;
    }
    const inner = members(params);
    const innerMethod = parsed.params.method;
    const innerParams = inner.get("params");
    const more = extra(inner, ["_meta"]); // the envelope's _meta and members end with it
    record("to_client", message({ id, method: innerMethod, params: innerParams, more }));
    if (id === undefined && innerMethod === "$/cancel_request") cancel(innerParams, more);
    else sendOn("successor", id, innerMethod, innerParams, more);
    return;
  }
  record("to_agent", line);
  if (method === "proxy/initialize" || method === "_proxy/initialize") {
    // Speak the dialect we were addressed in. The conductor marks the
    // successor's answer as supporting MCP-over-ACP, as the RFD asks of
    // every proxy, so it is passed back as it is.
    envelope = method.startsWith("_") ? "_proxy/successor" : "proxy/successor";
    sendOn("predecessor", id, "initialize", params, extra(m));
  } else if (id === undefined && method === "$/cancel_request") {
    cancel(params, extra(m));
  } else {
    sendOn("predecessor", id, method, params, extra(m));
  }
}

process.stdout.on("error", (err) => {
  log(`writing to the conductor: ${err.message}`);
  process.exit(1);
});
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  line = line.trim();
  if (line === "") return;
  try {
    dispatch(line);
  } catch (err) {
    log(`dropped a message it could not read: ${err.message}`);
  }
});
// The conductor ends the chain by closing our stdin; what is queued for
// stdout still goes out before node exits.
lines.on("close", () => closeSync(fd));
