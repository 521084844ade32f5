package proxy

import (
	"context"
	"encoding/json"
	"sync/atomic"
)

// A Handler handles the requests or notifications of one method from one
// side. For a request, what it returns is the answer; for a notification the
// result is ignored and an error is only logged. A request handler that
// returns a nil result and a nil error answers "result": null, which few ACP
// methods accept, so the proxy logs a warning, once for each method; one
// that means null returns json.RawMessage("null"), and an empty answer is
// json.RawMessage("{}"). A result that is not JSON, a zero-length one
// included, fails the request with [CodeInternalError] naming the handler, and is
// logged as an error.
//
// ctx is done when the handler returns, when its request is cancelled with
// $/cancel_request, or when the proxy stops; a handler must return soon
// after. context.Cause(ctx) tells the last two apart: it is [ErrCancelled]
// or [ErrClosed] to errors.Is. See the package documentation for how
// handlers are ordered.
type Handler func(ctx context.Context, r *Request) (result json.RawMessage, err error)

// A Request is a request or notification that arrived from one of the
// proxy's peers and that a [Handler] claimed.
type Request struct {
	// Method and Params are the message as it arrived: for a message from
	// the successor, what was inside its envelope. Params is nil if there
	// were none. A handler may replace either before it calls Forward.
	Method string
	Params json.RawMessage
	// From is the side the message came from; Forward sends it to the
	// other.
	From Side

	id     json.RawMessage // nil for a notification
	extra  json.RawMessage // its members JSON-RPC does not define (see extraOf); almost always nil
	conn   *Conn
	holder *holder
	// answered holds the members JSON-RPC does not define of the answer
	// Forward returned last, if it had any, for the handler's answer.
	answered atomic.Pointer[json.RawMessage]
}

// IsNotification reports whether r is a notification, which has no answer.
func (r *Request) IsNotification() bool { return r.id == nil }

// Conn returns the connection r arrived on, through which a handler sends
// requests and notifications of its own.
func (r *Request) Conn() *Conn { return r.conn }

// Forward sends r's Method and Params on to the side opposite From, in r's
// place in the outgoing order. For a request it waits for the answer and
// returns it; an error answer is returned as an *[Error]. For a notification
// it returns once the message is queued.
//
// If ctx ends before the answer arrives, Forward sends $/cancel_request and
// returns ctx.Err() without the answer, which the handler then cannot
// give. A handler that would end a session/prompt early sends
// session/cancel instead and goes on waiting for the answer, stopReason
// "cancelled", as the example shows.
//
// Forward may be called more than once (to retry, say); each call sends a
// new message.
//
// A message's top-level members that JSON-RPC does not define go on with
// it, whatever the handler makes of Method and Params, as they do with a
// message no handler claims; so do those of the answer Forward returns
// last, on the answer the handler returns, whatever it makes of it.
func (r *Request) Forward(ctx context.Context) (json.RawMessage, error) {
	to := r.From.other()
	if r.IsNotification() {
		return nil, r.conn.notify(r.holder, to, r.Method, r.Params, r.extra)
	}
	result, extra, err := r.conn.call(ctx, r.holder, to, r.Method, r.Params, r.extra)
	if extra != nil || r.answered.Load() != nil { // rare: nothing to do without
		r.answered.Store(&extra)
	}
	return result, err
}

// forwardedExtra returns what r's answer carries of the answer Forward
// returned last: see Forward.
func (r *Request) forwardedExtra() json.RawMessage {
	if p := r.answered.Load(); p != nil {
		return *p
	}
	return nil
}

// Detach releases r's handler from the outgoing order: from then on what it
// sends is queued when it is sent, and it no longer delays what arrived
// after r. A handler that will block on something other than its peers (a
// person, a slow tool) should detach first.
func (r *Request) Detach() { r.conn.out.detach(r.holder) }
