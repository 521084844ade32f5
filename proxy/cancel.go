package proxy

import (
	"encoding/json"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Request ids belong to one connection, so a $/cancel_request between the
// proxy and its conductor names a request by the id it had on that
// connection, and is always sent plain, never in an envelope, even for a
// proxy/successor request: the ACP schema says so ("to cancel it, the sender
// sends $/cancel_request with the ID of this proxy/successor request on the
// same connection; cancellation is never forwarded to another hop"), and the
// TypeScript SDK's proxies do it. A wrapped one, as conductors and proxies
// of this project sent before, is still accepted. The conductor translates
// it to the ids of the next hop, as the proxy does for requests it relays.

// cancelServed handles $/cancel_request from the conductor for a request the
// proxy received. A handler sees its context cancelled; a relayed request is
// cancelled in turn under the proxy's own id, and whatever the peer answers
// is still passed back. Only the id changes on the way: what else the cancel
// carries (_meta, with trace context, say, and extra, its members JSON-RPC
// does not define) goes on with it. An id the proxy has already answered,
// or never saw, is ignored, as the request-cancellation RFD asks.
func (c *Conn) cancelServed(params, extra json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.RequestID == nil {
		c.log.Warn("ignored a malformed "+wire.MethodCancelRequest, "params", string(params))
		return
	}
	c.mu.Lock()
	s := c.served[string(p.RequestID)]
	if s == nil {
		s = c.servedAs(p.RequestID)
	}
	c.mu.Unlock()
	switch {
	case s == nil:
	case s.cancel != nil:
		s.cancel(&cancelRequested{params: params, extra: extra})
	default:
		c.cancelRequest(wire.IntID(s.relayedAs), params, extra)
	}
}

// servedAs returns the request served under id spelled otherwise (1.0 or
// 1e0 for 1, "\u0061" for "a"), which is the same id, as the TypeScript
// SDK reads a cancel; or nil. It is looked for only when no request has
// the very bytes. c.mu is held.
func (c *Conn) servedAs(id json.RawMessage) *served {
	want := wire.ReadID(id)
	for k, s := range c.served {
		if want.Same(json.RawMessage(k)) {
			return s
		}
	}
	return nil
}

// A cancelRequested is the cause of a handler's context cancelled by the
// caller's $/cancel_request, whose params and extra members it keeps. Calls
// made under it pass the cancel on, with those, and still wait for the
// answer, rather than abandon it.
type cancelRequested struct{ params, extra json.RawMessage }

func (*cancelRequested) Error() string { return "proxy: the caller cancelled the request" }
func (*cancelRequested) Unwrap() error { return ErrCancelled }

// cancelRequest tells the conductor that the proxy no longer needs the answer
// to its request id, whichever side it went to: plain, as for any request
// on this connection. The params of the cancel that caused it, if any, go
// on with only the id changed, and its members JSON-RPC does not define,
// extra, with them.
func (c *Conn) cancelRequest(id json.RawMessage, caused, extra json.RawMessage) {
	params := append(append([]byte(`{"requestId":`), id...), '}')
	if caused != nil {
		if p, err := wire.SetPath(caused, []string{"requestId"}, id); err == nil {
			params = p
		}
	}
	c.out.put(nil, c.encode(Predecessor, nil, wire.MethodCancelRequest, params, extra))
}
