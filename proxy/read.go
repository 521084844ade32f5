package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// read is the proxy's only reader. It deals with each message completely,
// queueing what it forwards or starting the handler that claims it, before
// it reads the next; it never waits for a handler. That is what fixes the
// order of everything the proxy sends. It stops reading while the outbox is
// full (see outbox.throttle). read returns nil at the end of input.
func (c *Conn) read(ctx context.Context, ch *wire.LineChannel) error {
	var m wire.Message // each line's in turn; complete copies what it hands on
	for {
		c.out.throttle(ctx)
		line, err := ch.Recv()
		if err != nil {
			if done, err := c.readFailed(ctx, err); done {
				return err
			}
			continue
		}
		if err := wire.ParseInto(&m, line); err != nil {
			c.log.Warn("rejected input", "error", err)
			// Under the id of what would be a request, if it can be read.
			c.send(wire.ErrorResponse(wire.ParseErrorID(err), wire.ParseError(err)))
			continue
		}
		c.dispatch(&m)
		m = wire.Message{} // keeps no line alive until the next one comes
	}
}

// readFailed deals with what Recv returned instead of a line, and reports
// whether reading is over, and with what error (nil at the end of input).
func (c *Conn) readFailed(ctx context.Context, err error) (bool, error) {
	if big, ok := errors.AsType[*wire.OversizeError](err); ok {
		c.oversize(big)
		return false, nil
	}
	switch {
	case errors.Is(err, io.EOF):
		return true, nil
	case ctx.Err() != nil:
		return true, ctx.Err()
	default:
		return true, fmt.Errorf("proxy: reading: %w", err)
	}
}

// dispatch sorts one message by where it came from and what it is.
func (c *Conn) dispatch(m *wire.Message) {
	switch {
	case m.IsResponse():
		c.complete(m)
	case wire.IsSuccessor(m.Method):
		method, params, err := m.Unwrap()
		if err != nil {
			c.answerError(m, wire.Errorf(jrpc2.InvalidParams, "%s: %v", m.Method, err))
			return
		}
		// What the envelope's params hold beside method and params is the
		// carried message's own (the envelope's _meta aside).
		var extra []byte
		if m.CarriedExtra() { // a flag's test, where Parse took notes
			extra = m.AppendCarriedExtra(nil)
		}
		if method == wire.MethodCancelRequest && m.IsNotification() {
			c.cancelServed(params, extra)
			return
		}
		c.receive(m.ID, Successor, method, params, extra)
	case wire.ProxyInitDialect(m.Method) != nil:
		// Speak the dialect we were addressed in from now on.
		c.dialect.Store(wire.ProxyInitDialect(m.Method))
		c.unconducted = false
		c.receive(m.ID, Predecessor, wire.MethodInitialize, m.Params, extraOf(m))
	case m.Method == wire.MethodInitialize && wire.MarkedProxy(m.Params):
		// A conductor of the Thinkwell dialect (@thinkwell/conductor,
		// sacp-conductor).
		c.dialect.Store(wire.Thinkwell)
		c.unconducted = false
		c.receive(m.ID, Predecessor, wire.MethodInitialize, m.Params, extraOf(m))
	case m.Method == wire.MethodInitialize:
		if !c.unconducted {
			c.unconducted = true
			c.log.Error("started as an agent: an ACP proxy runs in a conductor's chain (acp-conductor agent PROXY AGENT), which initializes it with " + wire.MethodProxyInitialize)
		}
		c.answerError(m, errUnconducted(m.Method))
	case c.unconducted:
		// Relayed, it would go in an envelope to a successor the editor
		// does not have.
		c.answerError(m, errUnconducted(m.Method))
	case m.Method == wire.MethodCancelRequest && m.IsNotification():
		c.cancelServed(m.Params, extraOf(m))
	default:
		c.receive(m.ID, Predecessor, m.Method, m.Params, extraOf(m))
	}
}

// extraOf returns the top-level members of m that JSON-RPC does not
// define, as wire.Message.AppendExtra writes them, to go on with it
// wherever it is rebuilt; nil when there are none, almost always, which
// Parse noted, so that asking costs a flag's test.
func extraOf(m *wire.Message) []byte {
	if !m.Extra() {
		return nil
	}
	return m.AppendExtra(nil)
}

// errUnconducted refuses method from an editor that started the proxy as
// its agent.
func errUnconducted(method string) *wire.Error {
	return wire.Errorf(jrpc2.InvalidRequest,
		"%s: this component is an ACP proxy and must be started by a conductor, with %s, not initialize", method, wire.MethodProxyInitialize)
}

// receive passes a request or notification to its handler, or on. extra
// holds its members JSON-RPC does not define (see extraOf), which go on
// with it.
func (c *Conn) receive(id json.RawMessage, from Side, method string, params, extra json.RawMessage) {
	if c.mcp != nil && c.mcp.receive(id, from, method, params, extra) {
		return
	}
	fn := c.p.handler(from, method)
	if from == Predecessor && method == wire.MethodInitialize {
		fn = initializeHandler(fn)
	}
	if fn == nil {
		c.relay(id, from, method, params, extra)
		return
	}
	c.handle(id, from, method, params, extra, fn)
}

// answerError answers a request the proxy cannot take with e, or logs a
// notification it drops.
func (c *Conn) answerError(m *wire.Message, e *wire.Error) {
	if m.IsRequest() {
		c.send(wire.ErrorResponse(m.ID, e))
		return
	}
	c.log.Warn("dropped a notification", "method", m.Method, "reason", e.Message)
}

// send queues m outside any handler's place.
func (c *Conn) send(m *wire.Message) {
	c.out.put(nil, append(m.Append(nil), '\n'))
}

// oversize deals with a message too long to read. What can be recovered
// from its head decides what happens: a request is refused, and a response
// fails the call it answers; anything else is only logged.
func (c *Conn) oversize(big *wire.OversizeError) {
	id := big.ID
	c.log.Warn("dropped an oversize message", "limit", big.Limit, "id", string(id), "method", big.Method)
	switch {
	case id == nil:
	case big.Method != "":
		c.send(wire.ErrorResponse(id, wire.Errorf(jrpc2.InvalidRequest, "%v", big)))
	case big.IsResponse:
		e := wire.Errorf(jrpc2.InternalError, "response %v", big)
		c.complete(&wire.Message{ID: id, Error: e.Encode()})
	}
}
