// The cases of the fidelity test (fidelity.mjs), built from the official
// TypeScript SDK's own lists of ACP methods, so that a method the SDK adds
// is tested without anyone writing it down here.
//
// For each protocol version the methods come from the SDK's shipped JSON
// schema (schema/vN/schema.unstable.json, a superset of schema.json): every
// definition with "x-method" is a request, a response or a notification of
// that method, and "x-side" says who handles it ("agent": the editor sends
// it; "client": the agent sends it; "protocol": either). Params and results
// are generated from those definitions (sample), with _meta and fields no
// schema knows added. The experimental NES methods (experimental/nes), which
// have no JSON schema, take their params from the nes table below.
//
// What is written here by hand is checked against the SDK, and a
// disagreement is a failure (checkTables): the method lists the SDK exports
// must be the schema's; every override, exclusion and special case must
// name a method the SDK lists.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as v1 from "@agentclientprotocol/sdk/unstable";
import * as v1stable from "@agentclientprotocol/sdk";
import * as v2 from "@agentclientprotocol/sdk/experimental/v2/unstable";
import * as v2stable from "@agentclientprotocol/sdk/experimental/v2";
import * as nes from "@agentclientprotocol/sdk/experimental/nes";

const sdkDir = fileURLToPath(new URL("./node_modules/@agentclientprotocol/sdk/", import.meta.url));
const schemaFile = (version, unstable) =>
  JSON.parse(readFileSync(`${sdkDir}schema/v${version}/schema${unstable ? ".unstable" : ""}.json`, "utf8"));

export const sdk = { 1: v1, 2: v2 };
const stableSdk = { 1: v1stable, 2: v2stable };

// The tag that names a case, in every message of it: params._meta[TAG].
export const TAG = "acp-it/case";
// Extension methods of the test itself, beside those it tests.
export const SEND = "_acp-it/fidelity/send"; // editor → agent: send case N to the editor
export const HOLD = "_acp-it/fidelity/hold"; // held until cancelled
export const HOLDING = "_acp-it/fidelity/holding"; // the hold arrived

// Methods the SDK lists that a conductor speaks itself, with each of its
// proxies, and never relays between an editor and an agent: tested by
// TestPassthroughProxies and the conductor's own tests instead.
const conductorOwn = {
  "proxy/initialize": "the conductor initializes each proxy with it",
  "proxy/successor": "the envelope between a conductor and its proxies",
};

// Methods tested by a scenario of their own rather than as a plain case.
const special = {
  "$/cancel_request": "cancels a request held in flight, with _meta and unknown fields, both ways",
};

// Params or results the schema alone does not make valid for the SDK.
const overrides = {
  1: {
    initialize: { params: (p) => ({ ...p, protocolVersion: 1 }), result: (r) => ({ ...r, protocolVersion: 1 }) },
  },
  2: {
    initialize: { params: (p) => ({ ...p, protocolVersion: 2 }), result: (r) => ({ ...r, protocolVersion: 2 }) },
  },
};

// The experimental NES methods (the editor's, handled by the agent), which
// ship no JSON schema.
const pos = { line: 1, character: 2 };
const range = { start: pos, end: { line: 3, character: 4 } };
const nesMethods = {
  "nes/start": { kind: "request", params: { workspaceUri: "file:///w", repository: { name: "r", owner: "o", remoteUrl: "https://example.invalid/r" } }, result: { sessionId: "nes-1" } },
  "nes/suggest": { kind: "request", params: { sessionId: "nes-1", uri: "file:///w/a.ts", version: 3, position: pos, triggerKind: "manual" }, result: { suggestions: [] } },
  "nes/close": { kind: "request", params: { sessionId: "nes-1" }, result: {} },
  "nes/accept": { kind: "notification", params: { sessionId: "nes-1", id: "sugg-1" } },
  "nes/reject": { kind: "notification", params: { sessionId: "nes-1", id: "sugg-1", reason: "ignored" } },
  "document/didOpen": { kind: "notification", params: { sessionId: "nes-1", uri: "file:///w/a.ts", languageId: "typescript", version: 1, text: "let x = 1;\n" } },
  "document/didChange": { kind: "notification", params: { sessionId: "nes-1", uri: "file:///w/a.ts", version: 2, contentChanges: [{ range, text: "y" }] } },
  "document/didClose": { kind: "notification", params: { sessionId: "nes-1", uri: "file:///w/a.ts" } },
  "document/didSave": { kind: "notification", params: { sessionId: "nes-1", uri: "file:///w/a.ts" } },
  "document/didFocus": { kind: "notification", params: { sessionId: "nes-1", uri: "file:///w/a.ts", version: 2, position: pos, visibleRange: range } },
};

// Extension methods (JSON-RPC methods beginning with "_"), which no schema
// lists, both ways, with params and results of every JSON shape.
const extensions = [
  { method: "_foo/bar", kind: "request", params: { a: 1 }, result: { b: [true, null, "ü"] } },
  { method: "_foo/bar", kind: "notification", params: { a: 1 } },
  { method: "_acp-it/array", kind: "request", params: [1, "two", { three: 3 }], result: ["x", 2], untagged: true },
  { method: "_acp-it/none", kind: "request", params: undefined, result: null, untagged: true },
  { method: "_acp-it/scalar", kind: "request", params: {}, result: "just a string" },
  { method: "_acp-it/false", kind: "request", params: {}, result: false },
  { method: "_acp-it/none", kind: "notification", params: undefined, untagged: true },
  { method: "_acp-it/array", kind: "notification", params: [{ n: 1 }, "ü"], untagged: true },
  // Past the size from which the conductor relays a value from the line
  // it came in (32 KiB).
  { method: "_acp-it/large", kind: "request", params: { blob: "ü<&>".repeat(20000) }, result: { blob: "🎉".repeat(20000) } },
  { method: "_acp-it/large", kind: "notification", params: { blob: "\u2028".repeat(40000) } },
  // A method name JSON must escape, and one that is not ASCII.
  { method: '_acp-it/"quoted"\\/ünï', kind: "request", params: {}, result: {} },
];

// ---- generating values from the JSON schema ---------------------------------

// A string of every kind a relay could mangle: non-ASCII, HTML-ish, a JSON
// escape, U+2028 (a line break to JavaScript, not to JSON).
const STRING = 'x <&> "ü" \u2028 🎉';

function sample(schema, defs, seen = new Set()) {
  if (schema === true || schema === undefined) return {};
  if (schema.$ref) {
    const name = schema.$ref.split("/").pop();
    if (seen.has(name)) return null; // recursion: stop at the first cycle
    return sample(defs[name], defs, new Set([...seen, name]));
  }
  if ("const" in schema) return schema.const;
  if (schema.enum) return schema.enum.find((v) => v !== null) ?? schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const alt = alternatives.find((a) => a.type !== "null") ?? alternatives[0];
    const { anyOf, oneOf, ...rest } = schema;
    return merge(sample(rest, defs, seen), sample(alt, defs, seen));
  }
  let value;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "object":
    case undefined: {
      value = {};
      for (const name of schema.required ?? []) {
        // A member that may hold anything ("result": required, even if
        // null) is null.
        value[name] = sample(schema.properties?.[name] ?? {}, defs, seen) ?? null;
      }
      if (type === undefined && !schema.allOf && !schema.required) value = undefined;
      break;
    }
    case "string":
      value = schema.format === "uri" ? "file:///x" : STRING;
      break;
    case "integer":
      value = Math.max(schema.minimum ?? 1, 1);
      break;
    case "number":
      value = 1.5;
      break;
    case "boolean":
      value = true;
      break;
    case "array":
      value = Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items ?? {}, defs, seen));
      break;
    case "null":
      value = null;
      break;
  }
  for (const part of schema.allOf ?? []) value = merge(value, sample(part, defs, seen));
  return value;
}

function merge(a, b) {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (isObject(a) && isObject(b)) return { ...a, ...b };
  return b;
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

// What every case adds to the params and results it sends: _meta with the
// case's tag and nested values, and a member no schema has.
function dressed(value, tag, what) {
  if (!isObject(value)) return value;
  return {
    ...value,
    _meta: { [TAG]: tag, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", nested: { [what]: [1, 2.5, null, { deep: STRING }] } },
    "x-acp-it-unknown": { kept: [what, -1e300, { "": "empty key" }] },
  };
}

function errorFor(tag, method) {
  return { code: -32050, message: `${method} refused, ü`, data: { tag, nested: { list: [null, false, 0] }, _meta: { deep: true } } };
}

// ---- the tables ---------------------------------------------------------------

// methodsOf lists the methods of one schema file: {method, side, kind}.
function methodsOf(schema) {
  const out = new Map();
  for (const [name, def] of Object.entries(schema.$defs)) {
    if (!def["x-method"]) continue;
    const kind = name.endsWith("Notification") ? "notification" : name.endsWith("Request") ? "request" : "response";
    const key = `${def["x-side"]} ${def["x-method"]} ${kind === "response" ? "request" : kind}`;
    const entry = out.get(key) ?? { method: def["x-method"], side: def["x-side"], kind: kind === "response" ? "request" : kind };
    entry[kind === "response" ? "response" : "params"] = name;
    out.set(key, entry);
  }
  return [...out.values()];
}

// checkTables reports every way the hand-written parts of this file and the
// SDK's lists disagree.
function checkTables(version, listed, stableListed) {
  const failures = [];
  const mod = sdk[version];
  const names = new Set(listed.map((m) => m.method));
  for (const [what, table, stable] of [
    ["unstable", mod, listed],
    ["stable", stableSdk[version], stableListed],
  ]) {
    const fromSchema = new Set(stable.map((m) => `${m.side} ${m.method}`));
    const exported = new Set([
      ...Object.values(table.AGENT_METHODS).map((m) => `agent ${m}`),
      ...Object.values(table.CLIENT_METHODS).map((m) => `client ${m}`),
      ...Object.values(table.PROTOCOL_METHODS).map((m) => `protocol ${m}`),
      ...Object.values(table.PROXY_METHODS ?? {}).map((m) => `proxy ${m}`),
    ]);
    for (const m of fromSchema) if (!exported.has(m)) failures.push(`v${version} ${what}: the schema has ${m}, the SDK's method tables do not`);
    for (const m of exported) if (!fromSchema.has(m)) failures.push(`v${version} ${what}: the SDK's method tables have ${m}, its schema does not`);
  }
  for (const m of stableListed) {
    if (!listed.some((u) => u.method === m.method && u.side === m.side)) failures.push(`v${version}: stable ${m.side} ${m.method} is not in the unstable schema`);
  }
  for (const [table, what] of [[conductorOwn, "conductorOwn"], [special, "special"], [overrides[version], "overrides"]]) {
    for (const m of Object.keys(table)) if (!names.has(m)) failures.push(`v${version}: ${what} names ${m}, which the SDK does not list`);
  }
  for (const m of listed) {
    if (m.side === "proxy" && !conductorOwn[m.method]) failures.push(`v${version}: proxy method ${m.method} is neither relayed nor known as the conductor's own`);
    if (m.side === "protocol" && !special[m.method]) failures.push(`v${version}: protocol method ${m.method} has no scenario`);
  }
  if (version === 1) {
    const extra = Object.values(nes.AGENT_METHODS).filter((m) => !Object.values(v1.AGENT_METHODS).includes(m));
    for (const m of extra) if (!nesMethods[m]) failures.push(`nes: the SDK has ${m}, the nes table does not`);
    for (const m of Object.keys(nesMethods)) if (!extra.includes(m)) failures.push(`nes: the table has ${m}, the SDK does not`);
  }
  return failures;
}

// cases returns every case of one protocol version, in the order they run
// (initialize first), and the disagreements between this file and the SDK.
// A case is {tag, method, side ("agent": sent by the editor; "client": sent
// by the agent), kind, params, reply: {result} | {error} (requests)}.
export function cases(version) {
  const unstable = schemaFile(version, true);
  const listed = methodsOf(unstable);
  const failures = checkTables(version, listed, methodsOf(schemaFile(version, false)));
  const defs = unstable.$defs;
  const out = [];
  const add = (c) => {
    const base = `v${version} ${c.side} ${c.method} ${c.kind}${c.reply?.error ? " error" : ""}`;
    const n = out.filter((o) => o.base === base).length;
    const tag = n ? `${base} #${n + 1}` : base;
    out.push({
      ...c,
      base,
      tag,
      params: c.untagged ? c.params : dressed(c.params, tag, "params"),
      reply: c.reply?.result !== undefined ? { result: dressed(c.reply.result, tag, "result") } : c.reply,
    });
  };
  const relayed = listed.filter((m) => m.side === "agent" || m.side === "client");
  relayed.sort((a, b) => (b.method === "initialize") - (a.method === "initialize"));
  for (const m of relayed) {
    const o = overrides[version][m.method] ?? {};
    const params = (o.params ?? ((p) => p))(sample(defs[m.params], defs));
    if (m.kind === "notification") {
      add({ method: m.method, side: m.side, kind: "notification", params, schema: m.params });
      continue;
    }
    const result = (o.result ?? ((r) => r))(sample(defs[m.response], defs) ?? {});
    if (m.method === "initialize") {
      // An initialize refused first: the editor may try again.
      add({ method: m.method, side: m.side, kind: "request", params, reply: { error: errorFor("initialize", m.method) }, schema: m.params });
    }
    add({ method: m.method, side: m.side, kind: "request", params, reply: { result }, schema: m.params });
    if (m.method !== "initialize") {
      add({ method: m.method, side: m.side, kind: "request", params, reply: { error: errorFor(m.method, m.method) }, schema: m.params });
    }
  }
  if (version === 1) {
    for (const [method, n] of Object.entries(nesMethods)) {
      add({ method, side: "agent", kind: n.kind, params: n.params, reply: n.kind === "request" ? { result: n.result } : undefined, nes: true });
      if (n.kind === "request") add({ method, side: "agent", kind: n.kind, params: n.params, reply: { error: errorFor(method, method) }, nes: true });
    }
  }
  for (const side of ["agent", "client"]) {
    for (const e of extensions) {
      add({ method: e.method, side, kind: e.kind, params: e.params, reply: e.kind === "request" ? { result: e.result } : undefined, untagged: e.untagged, extension: true });
      if (e.kind === "request" && !e.untagged) add({ method: e.method, side, kind: e.kind, params: e.params, reply: { error: errorFor(e.method, e.method) }, extension: true });
    }
  }
  // The error cases' tags are fixed before the reply is built: rebuild
  // them with the case's own tag.
  for (const c of out) if (c.reply?.error) c.reply = { error: errorFor(c.tag, c.method) };
  return { cases: out, failures, excluded: conductorOwn, special };
}

// tagOf returns the case tag a message's params carry, if any.
export function tagOf(params) {
  return isObject(params) && isObject(params._meta) ? params._meta[TAG] : undefined;
}
