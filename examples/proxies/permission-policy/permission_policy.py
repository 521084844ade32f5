#!/usr/bin/env python3
"""permission-policy: an ACP proxy that answers the agent's permission requests
from a rule file, so the editor is asked only about what the rules leave open.

It sits in a proxy chain (see the proxy-chains RFD) and speaks to its conductor
over stdin and stdout, one JSON-RPC message per line. A session/request_permission
from the agent is matched against the rules, first match wins; if the matching
rule names an option kind the agent offers, the proxy selects that option
itself and the editor never sees the request. Everything else, including the
requests no rule decides, is passed on untouched in both directions. Values are
copied as the exact JSON text that arrived, never decoded and re-encoded.

One thread reads and routes, and never waits: a request is sent on under an id
of the proxy's own and its answer is passed back under the sender's id when it
arrives, so any number of requests are in flight both ways at once. Another
thread writes, so that a slow reader on the other end cannot stall the routing.
Only the reading thread touches the routing tables.

Usage: permission_policy.py --rules FILE   (or ACP_PERMISSION_RULES=FILE)

The rule file is JSON:

    {"rules": [
        {"kind": "read", "choose": "allow_once"},
        {"kind": "execute", "title": "git status*", "choose": "allow_always"},
        {"kind": "delete", "choose": "reject_once"},
        {"kind": "execute", "choose": "ask"}
    ]}

"kind" and "title" are shell-style globs matched against the tool call's kind
and title (a rule without them matches any); "choose" is allow_once,
allow_always, reject_once, reject_always, or ask (forward to the editor).
"""

import argparse
import fnmatch
import itertools
import json
import os
import queue
import re
import sys
import threading

CHOICES = ("allow_once", "allow_always", "reject_once", "reject_always", "ask")
ENVELOPES = ("proxy/successor", "_proxy/successor")
JSONRPC = ("jsonrpc", "id", "method", "params", "result", "error")
PREDECESSOR, SUCCESSOR = "predecessor", "successor"


def log(msg):
    print(f"permission-policy: {msg}", file=sys.stderr, flush=True)


# ---- rules -------------------------------------------------------------------


def load_rules(path):
    """Reads and checks a rule file; any mistake is an error naming the rule."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    rules = doc.get("rules") if isinstance(doc, dict) else None
    if not isinstance(rules, list):
        raise ValueError('want an object with a "rules" list')
    for n, rule in enumerate(rules, 1):
        if not isinstance(rule, dict):
            raise ValueError(f"rule {n}: want an object")
        unknown = sorted(set(rule) - {"kind", "title", "choose"})
        if unknown:
            raise ValueError(f"rule {n}: unknown key {unknown[0]!r}")
        if rule.get("choose") not in CHOICES:
            raise ValueError(f"rule {n}: \"choose\" must be one of {', '.join(CHOICES)}")
        for key in ("kind", "title"):
            if not isinstance(rule.get(key, ""), str):
                raise ValueError(f"rule {n}: {key!r} must be a string")
    return rules


def decide(rules, kind, title):
    """Returns the choice of the first rule matching the tool call, and the
    rule's number; "ask" and None if none does."""
    for n, rule in enumerate(rules, 1):
        if "kind" in rule and not fnmatch.fnmatchcase(kind, rule["kind"]):
            continue
        if "title" in rule and not fnmatch.fnmatchcase(title, rule["title"]):
            continue
        return rule["choose"], n
    return "ask", None


# ---- raw JSON ----------------------------------------------------------------

_decoder = json.JSONDecoder()
_space = re.compile(r"[ \t\n\r]*")


def members(text):
    """Returns the members of the JSON object in text as {name: raw value text},
    so that values can be passed on exactly as they came."""
    pos = _space.match(text, 0).end()
    if text[pos : pos + 1] != "{":
        raise ValueError("not a JSON object")
    out = {}
    pos = _space.match(text, pos + 1).end()
    if text[pos : pos + 1] == "}":
        return out
    while True:
        name, pos = _decoder.raw_decode(text, pos)
        pos = _space.match(text, pos).end()
        if text[pos : pos + 1] != ":":
            raise ValueError(f"expected ':' at {pos}")
        start = _space.match(text, pos + 1).end()
        _, end = _decoder.raw_decode(text, start)
        out[name] = text[start:end]
        pos = _space.match(text, end).end()
        if text[pos : pos + 1] == "}":
            return out
        if text[pos : pos + 1] != ",":
            raise ValueError(f"expected ',' or '}}' at {pos}")
        pos = _space.match(text, pos + 1).end()


def dumps(value):
    """Encodes a value of our own as compact JSON."""
    return json.dumps(value, separators=(",", ":"))


def extra(m, also=()):
    """Returns the members of m that JSON-RPC does not define (and not in
    also): they go on with the message, wrapped or not."""
    return [(k, v) for k, v in m.items() if k not in JSONRPC and k not in also]


def message(id=None, method=None, params=None, result=None, error=None, more=()):
    """Builds a JSON-RPC message; every argument but method is raw JSON text,
    and None leaves the member out. more holds the message's other members,
    as (name, raw text) pairs, written after these."""
    parts = ['"jsonrpc":"2.0"']
    if id is not None:
        parts.append('"id":' + id)
    if method is not None:
        parts.append('"method":' + dumps(method))
    for name, value in (("params", params), ("result", result), ("error", error)):
        if value is not None:
            parts.append(f'"{name}":{value}')
    parts += [f"{dumps(k)}:{v}" for k, v in more]
    return "{" + ",".join(parts) + "}"


def id_key(raw):
    """A request id as a table key: its value, so spelling does not matter."""
    return json.dumps(json.loads(raw))


# ---- the proxy ---------------------------------------------------------------


class Proxy:
    def __init__(self, rules, rfile, wfile):
        self.rules = rules
        self.rfile, self.wfile = rfile, wfile
        self.outbox = queue.SimpleQueue()
        self.envelope = "proxy/successor"  # or the Rust SDK's _proxy/successor
        self.ids = itertools.count(1)
        self.waiting = {}  # our id -> (id to answer under, side it came from)
        self.relayed = {}  # (side, id key) -> our id, to pass on $/cancel_request
        self.tool_calls = {}  # (session, tool call id) -> what updates said of it

    def run(self):
        writer = threading.Thread(target=self.write, name="writer")
        writer.start()
        for line in self.rfile:
            line = line.strip()
            if not line:
                continue
            try:
                self.dispatch(line.decode("utf-8"))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log(f"dropped a message it could not read: {exc}")
        self.outbox.put(None)
        writer.join()

    def write(self):
        while (line := self.outbox.get()) is not None:
            try:
                self.wfile.write(line.encode("utf-8") + b"\n")
                self.wfile.flush()
            except OSError as exc:
                log(f"writing to the conductor: {exc}")
                return

    def send(self, line):
        self.outbox.put(line)

    def dispatch(self, line):
        m = members(line)
        rid = m.get("id")
        if "method" not in m:
            self.pass_back(m)
            return
        method = json.loads(m["method"])
        params = m.get("params")
        if method in ENVELOPES:
            try:
                inner = members(params or "")
                inner_method = json.loads(inner["method"])
            except (ValueError, KeyError) as exc:
                if rid is not None:
                    err = dumps({"code": -32602, "message": f"permission-policy: bad {method}: {exc}"})
                    self.send(message(id=rid, error=err))
                return
            # The envelope's _meta and its own members end with it.
            self.from_successor(rid, inner_method, inner.get("params"), extra(inner, ("_meta",)))
        elif method in ("proxy/initialize", "_proxy/initialize"):
            # Speak the dialect we were addressed in. The conductor marks the
            # successor's answer as supporting MCP-over-ACP, as the RFD asks
            # of every proxy, so it is passed back as it is.
            self.envelope = "_proxy/successor" if method.startswith("_") else "proxy/successor"
            self.send_on(PREDECESSOR, rid, "initialize", params, extra(m))
        elif method == "$/cancel_request" and rid is None:
            self.cancel(params, extra(m))
        else:
            self.send_on(PREDECESSOR, rid, method, params, extra(m))

    def from_successor(self, rid, method, params, more):
        if rid is None and method == "$/cancel_request":
            self.cancel(params, more)
            return
        # Whatever goes wrong in looking at a message, it still goes on:
        # dropping it would leave its sender waiting.
        try:
            if rid is None and method == "session/update":
                self.observe(params)
            elif rid is not None and method == "session/request_permission":
                result = self.choose(params)
                if result is not None:
                    self.send(message(id=rid, result=result))
                    return
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log(f"{method}: passed on undecided: {exc}")
        self.send_on(SUCCESSOR, rid, method, params, more)

    def send_on(self, came_from, rid, method, params, more):
        """Passes a request or notification to the side it is not from; its
        members that JSON-RPC does not define, more, go in the envelope's
        params when it is wrapped."""
        if rid is not None:
            ours = next(self.ids)
            self.waiting[ours] = (rid, came_from)
            self.relayed[(came_from, id_key(rid))] = ours
            rid = str(ours)
        if came_from == SUCCESSOR:
            self.send(message(id=rid, method=method, params=params, more=more))
        else:
            inner = '{"method":' + dumps(method) + ("" if params is None else ',"params":' + params)
            inner += "".join(f",{dumps(k)}:{v}" for k, v in more) + "}"
            self.send(message(id=rid, method=self.envelope, params=inner))

    def pass_back(self, m):
        """Passes an answer to one of our requests back to whoever asked."""
        try:
            ours = json.loads(m.get("id", "null"))
        except ValueError:
            ours = None
        entry = self.waiting.pop(ours, None)
        if entry is None:
            log(f"dropped an answer to unknown id {m.get('id')}")
            return
        rid, came_from = entry
        self.relayed.pop((came_from, id_key(rid)), None)
        if "error" in m:
            self.send(message(id=rid, error=m["error"], more=extra(m)))
        else:
            self.send(message(id=rid, result=m.get("result", "null"), more=extra(m)))

    def cancel(self, params, more):
        """Passes on $/cancel_request for a request we sent on, under our id.

        The conductor names the request by the id it had here, whichever
        side it came from, and the cancel goes on plain, as the ACP schema
        says for every hop, even for a request we sent in an envelope. Only
        the id changes: _meta (trace context, say) and whatever else it
        carries go on with it.
        """
        target = json.dumps(json.loads(params or "{}").get("requestId"))
        for came_from in (PREDECESSOR, SUCCESSOR):
            ours = self.relayed.get((came_from, target))
            if ours is not None:
                kept = members(params)
                kept["requestId"] = dumps(ours)
                params = "{" + ",".join(f"{dumps(k)}:{v}" for k, v in kept.items()) + "}"
                self.send(message(method="$/cancel_request", params=params, more=more))
                return
        # answered already, or by us

    def observe(self, params):
        """Remembers the kind and title of tool calls, which a permission
        request may leave out, having announced them in updates."""
        p = json.loads(params or "{}")
        u = p.get("update") or {}
        if u.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
            return
        key = (p.get("sessionId"), u.get("toolCallId"))
        if u.get("status") in ("completed", "failed"):
            self.tool_calls.pop(key, None)
            return
        known = self.tool_calls.setdefault(key, {})
        known.update({k: u[k] for k in ("kind", "title") if isinstance(u.get(k), str)})

    def choose(self, params):
        """Returns the answer to a permission request as raw JSON, or None if
        the editor must be asked."""
        p = json.loads(params)
        call = p.get("toolCall") or {}
        known = self.tool_calls.get((p.get("sessionId"), call.get("toolCallId")), {})
        kind = call.get("kind") or known.get("kind") or ""
        title = call.get("title") or known.get("title") or ""
        choice, rule = decide(self.rules, kind, title)
        what = f"{kind or '?'} {title!r}"
        if choice == "ask":
            log(f"asking the editor about {what}" + (f" (rule {rule})" if rule else " (no rule matches)"))
            return None
        option = next((o for o in p.get("options") or [] if o.get("kind") == choice), None)
        if option is None:
            log(f"rule {rule} chooses {choice} for {what}, which the agent does not offer; asking the editor")
            return None
        log(f"rule {rule}: {choice} for {what}")
        return dumps({"outcome": {"outcome": "selected", "optionId": option["optionId"]}})


def main():
    ap = argparse.ArgumentParser(description="An ACP proxy that answers permission requests from rules.")
    ap.add_argument("--rules", default=os.environ.get("ACP_PERMISSION_RULES"),
                    help="JSON rule file (default: $ACP_PERMISSION_RULES)")
    args = ap.parse_args()
    if not args.rules:
        ap.error("no rule file: give --rules or set ACP_PERMISSION_RULES")
    try:
        rules = load_rules(args.rules)
    except (OSError, ValueError) as exc:
        log(f"{args.rules}: {exc}")
        sys.exit(2)
    log(f"{len(rules)} rules from {args.rules}")
    Proxy(rules, sys.stdin.buffer, sys.stdout.buffer).run()


if __name__ == "__main__":
    main()
