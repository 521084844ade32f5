#!/usr/bin/env python3
"""A passthrough ACP proxy (proxy-chains RFD), Python 3 standard library only.

It talks to its conductor over stdio, newline-delimited JSON-RPC 2.0, and
forwards everything unchanged:

* ``proxy/initialize`` (id X) is forwarded as a ``proxy/successor`` request
  wrapping ``initialize``; its result or error is returned to X.
* Any other message from the predecessor (a plain request or notification) is
  wrapped as ``{"method":"proxy/successor","params":{"method":M,"params":P}}``,
  a request under our own id or a notification, as the original was; a
  response is returned to the original id.
* A ``proxy/successor`` (or ``_proxy/successor``) message from the conductor
  comes from the successor: it is unwrapped and sent to the predecessor plain
  (a request under our own id), and the answer is returned to the envelope's
  id.

A ``$/cancel_request`` for a request the proxy relayed becomes a plain one
for the id the proxy relayed it under. Raw values (ids, params,
results, errors) are otherwise copied as the exact text that arrived, never
re-encoded. The proxy never waits: one reader loop dispatches
each line at once and keeps only tables of outstanding ids, so requests in both
directions are in flight together and each direction keeps its order.
"""

import json
import os
import sys
import threading

NAME = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ACP_IT_PROXY_NAME", "py-proxy")
_decoder = json.JSONDecoder()
_ws = " \t\r\n"


def log(*args):
    print(f"[{NAME} {os.getpid()}]", *args, file=sys.stderr, flush=True)


def members(text):
    """Returns the members of the JSON object ``text`` as {key: raw value text}."""
    i = 0
    n = len(text)

    def skip(j):
        while j < n and text[j] in _ws:
            j += 1
        return j

    i = skip(i)
    if i >= n or text[i] != "{":
        raise ValueError("not an object")
    i = skip(i + 1)
    out = {}
    if i < n and text[i] == "}":
        return out
    while True:
        key, i = _decoder.raw_decode(text, i)
        if not isinstance(key, str):
            raise ValueError("bad key")
        i = skip(i)
        if text[i] != ":":
            raise ValueError("expected ':'")
        i = skip(i + 1)
        _, end = _decoder.raw_decode(text, i)
        out[key] = text[i:end]
        i = skip(end)
        if text[i] == ",":
            i = skip(i + 1)
            continue
        if text[i] == "}":
            return out
        raise ValueError("expected ',' or '}'")


def envelope(**fields):
    """Builds a JSON-RPC message from raw member texts (None = absent)."""
    parts = ['"jsonrpc":"2.0"']
    for key in ("id", "method", "params", "result", "error"):
        value = fields.get(key)
        if value is not None:
            parts.append(f'"{key}":{value}')
    return "{" + ",".join(parts) + "}"


class Proxy:
    def __init__(self, rfile, wfile):
        self.rfile = rfile
        self.wfile = wfile
        self.wlock = threading.Lock()
        self.next_id = 0
        # our id -> original raw id (the request we owe an answer to)
        self.pending = {}
        # (side, original raw id) -> our id, and back, for $/cancel_request
        self.relayed = {}
        self.side_of = {}

    def send(self, line):
        with self.wlock:
            self.wfile.write(line.encode("utf-8") + b"\n")
            self.wfile.flush()

    def request(self, side, method, params, answer_to):
        """Sends a request under a fresh id; its answer goes to raw id answer_to."""
        self.next_id += 1
        our = f'"py-{self.next_id}"'
        self.pending[our] = answer_to
        self.relayed[(side, answer_to)] = our
        self.side_of[our] = (side, answer_to)
        self.send(envelope(id=our, method=json.dumps(method), params=params))

    def cancel(self, params):
        """Handles a $/cancel_request from the conductor, plain or wrapped.

        It names a request the proxy received on this connection, from either
        side; the proxy cancels in turn the request it relayed it as, with a
        plain $/cancel_request under its own id, as the ACP schema says for
        every hop. A cancel for anything else is dropped: never forwarded.
        """
        try:
            fields = members(params or "{}")
        except (ValueError, IndexError):
            log("malformed $/cancel_request dropped:", params)
            return
        for side in ("predecessor", "successor"):
            our = self.relayed.get((side, fields.get("requestId")))
            if our is not None:
                fields["requestId"] = our
                body = "{" + ",".join(json.dumps(k) + ":" + v for k, v in fields.items()) + "}"
                self.send(envelope(method='"$/cancel_request"', params=body))
                return

    def error(self, raw_id, code, message):
        err = json.dumps({"code": code, "message": message})
        self.send(envelope(id=raw_id if raw_id is not None else "null", error=err))

    def wrap(self, method, params):
        inner = ['"method":' + json.dumps(method)]
        if params is not None:
            inner.append('"params":' + params)
        return "{" + ",".join(inner) + "}"

    def handle(self, line):
        try:
            m = members(line)
        except (ValueError, IndexError) as exc:
            log("unparseable line dropped:", exc)
            return
        raw_id = m.get("id")
        if "method" not in m:
            # A response to one of our requests.
            answer_to = self.pending.pop(raw_id, None)
            self.relayed.pop(self.side_of.pop(raw_id, None), None)
            if answer_to is None:
                log("response to unknown id", raw_id)
                return
            if "error" in m:
                self.send(envelope(id=answer_to, error=m["error"]))
            else:
                self.send(envelope(id=answer_to, result=m.get("result", "null")))
            return

        method = json.loads(m["method"])
        params = m.get("params")
        if method in ("proxy/successor", "_proxy/successor"):
            # From the successor: unwrap and hand to the predecessor.
            try:
                inner = members(params or "{}")
                inner_method = json.loads(inner["method"])
            except (ValueError, KeyError, IndexError) as exc:
                if raw_id is not None:
                    self.error(raw_id, -32602, f"bad {method} params: {exc}")
                return
            inner_params = inner.get("params")
            if raw_id is None:
                if inner_method == "$/cancel_request":
                    self.cancel(inner_params)
                    return
                self.send(envelope(method=json.dumps(inner_method), params=inner_params))
            else:
                self.request("successor", inner_method, inner_params, raw_id)
            return

        # From the predecessor: wrap for the successor.
        if method == "proxy/initialize":
            method = "initialize"
        if method == "$/cancel_request" and raw_id is None:
            self.cancel(params)
            return
        wrapped = self.wrap(method, params)
        if raw_id is None:
            self.send(envelope(method='"proxy/successor"', params=wrapped))
        else:
            self.request("predecessor", "proxy/successor", wrapped, raw_id)

    def run(self):
        for raw in self.rfile:
            line = raw.decode("utf-8").strip()
            if line:
                self.handle(line)


def main():
    log("started")
    Proxy(sys.stdin.buffer, sys.stdout.buffer).run()
    log("stdin closed; exiting")


if __name__ == "__main__":
    main()
