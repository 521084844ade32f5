// A passthrough proxy in Node that forwards every message unchanged, written
// on raw newline-delimited JSON-RPC so that it costs the same under any
// conductor. It speaks the dialect its conductor opens with:
//
//	proxy/initialize       the proxy-chains RFD: proxy/successor envelopes
//	_proxy/initialize      the Rust SDK: _proxy/successor envelopes
//	initialize             thinkwell/sacp: _proxy/successor/request and
//	                       _proxy/successor/notification envelopes, and
//	                       _meta.proxy: true in its initialize answer
//
// Both conductors of the benchmark run it, so their figures differ only by
// the conductor.
import { createInterface } from "node:readline";

const envelopes = {
  "proxy/initialize": { request: "proxy/successor", notification: "proxy/successor", meta: false },
  "_proxy/initialize": { request: "_proxy/successor", notification: "_proxy/successor", meta: false },
  initialize: { request: "_proxy/successor/request", notification: "_proxy/successor/notification", meta: true },
};
const incoming = new Set(["proxy/successor", "_proxy/successor", "_proxy/successor/request", "_proxy/successor/notification"]);

let dialect = envelopes["proxy/initialize"];
let nextId = 1;
const pending = new Map(); // our id -> {id: the caller's id, init: boolean}

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");

function onMessage(msg) {
  if (!("method" in msg)) {
    // A response to something we sent on: back to whoever asked, under
    // their id.
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    const out = { jsonrpc: "2.0", id: p.id };
    if ("error" in msg) out.error = msg.error;
    else out.result = p.init && dialect.meta ? { ...msg.result, _meta: { ...msg.result?._meta, proxy: true } } : msg.result;
    send(out);
    return;
  }
  if (incoming.has(msg.method)) {
    // From our successor: on to our predecessor, plain.
    const inner = msg.params ?? {};
    const out = { jsonrpc: "2.0", method: inner.method, params: inner.params };
    if ("id" in msg) {
      const id = nextId++;
      pending.set(id, { id: msg.id, init: false });
      out.id = id;
    }
    send(out);
    return;
  }
  // From our predecessor: on to our successor, in an envelope.
  let method = msg.method;
  const init = method in envelopes && "id" in msg;
  if (init) {
    dialect = envelopes[method];
    method = "initialize";
  }
  if ("id" in msg) {
    const id = nextId++;
    pending.set(id, { id: msg.id, init });
    send({ jsonrpc: "2.0", id, method: dialect.request, params: { method, params: msg.params } });
  } else {
    send({ jsonrpc: "2.0", method: dialect.notification, params: { method, params: msg.params } });
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    console.error("passthrough: not JSON:", line.slice(0, 200));
    return;
  }
  onMessage(msg);
});
lines.on("close", () => process.exit(0));
