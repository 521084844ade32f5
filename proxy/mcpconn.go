package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// An MCPConn is one connection from the agent's MCP client to one of the
// proxy's [MCPServer]s: a pipe of whole MCP JSON-RPC messages, as they would
// travel over stdio, one way from the client and the other way to it.
//
// The proxy translates between those messages and MCP-over-ACP. A request
// from the client, which arrives as an mcp/message request, is read with an
// id the proxy assigns, and the server's response to that id answers the
// mcp/message request: its result, or its error as the JSON-RPC error. A
// request the server writes becomes an mcp/message request to the client,
// and its answer is read as the response, under the id the server gave it.
// Notifications pass both ways as they are, but for a cancel, which names
// a request by the id its receiver knows it by. When the client cancels a
// request ($/cancel_request, or MCP's notifications/cancelled naming its
// mcp/message id), the server reads MCP's notifications/cancelled for it
// under the id it knows, and the request is answered as cancelled at once,
// since MCP servers do not answer cancelled requests. When the server
// cancels one of its own, the client hears MCP's notification naming the
// mcp/message id it went out under.
//
// Read must be called by one goroutine at a time; the other methods may be
// called concurrently.
type MCPConn struct {
	id       string // the connectionId
	quotedID string // as JSON
	server   string // the server's Name
	h        *mcpHost
	session  *sessionRecord
	ctx      context.Context // Serve's: done when the connection ends
	cancel   context.CancelFunc

	// Guarded by mcpHost.mu.
	holder *sessionRecord // whose connections it counts among (see maxSessionConns)
	used   uint64         // mcpHost.clock when it was last used

	mu      sync.Mutex
	inbox   [][]byte                  // messages for Read
	ready   chan struct{}             // signalled when inbox grows
	lastID  int64                     // the last id given to a client request
	pending map[int64]json.RawMessage // client requests awaiting the server: their mcp/message ids, by the id given
	asked   map[int64]json.RawMessage // the server's requests awaiting the client: the server's id, by the id given
	ended   error                     // why the connection ended, or nil
	closed  bool                      // it was ended on this side
}

// newMCPConn returns a connection to d's server under the id proposed, or
// a new one if none was.
func newMCPConn(h *mcpHost, d declaration, proposed string) *MCPConn {
	id := proposed
	if id == "" {
		id = newUUID()
	}
	mc := &MCPConn{
		id:       id,
		quotedID: quoteJSON(id),
		server:   d.server.Name,
		h:        h,
		session:  d.session,
		ready:    make(chan struct{}, 1),
		pending:  make(map[int64]json.RawMessage),
		asked:    make(map[int64]json.RawMessage),
	}
	mc.ctx, mc.cancel = context.WithCancel(h.c.ctx)
	return mc
}

// quoteJSON returns s as a JSON string. A proposed id is the conductor's,
// so it takes JSON's quoting, not Go's (strconv.Quote).
func quoteJSON(s string) string {
	b, _ := json.Marshal(s) // a string cannot fail
	return string(b)
}

// ID returns the connection's id, the connectionId of the mcp/connect
// answer, unique across the chain.
func (c *MCPConn) ID() string { return c.id }

// Conn returns the proxy's connection to its conductor, through which the
// server may send requests and notifications of its own to either side: ask
// the client with session/request_permission, say, or tell it of progress
// with session/update. What it sends under its own context is in no
// handler's place (see the package documentation).
func (c *MCPConn) Conn() *Conn { return c.h.c }

// Session returns what the proxy knows, at the time of the call, of the ACP
// session the connection serves.
func (c *MCPConn) Session() MCPSession { return c.session.get() }

// Read returns the next message from the client: a request, a notification,
// or the response to a request the server wrote. Once the client has
// disconnected, its session has closed, or the proxy has stopped, Read
// returns the messages that arrived before, then io.EOF. After Close it returns [ErrClosed]. If ctx is
// done first, Read returns ctx.Err().
func (c *MCPConn) Read(ctx context.Context) (json.RawMessage, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case len(c.inbox) > 0:
			m := c.inbox[0]
			c.inbox[0] = nil
			c.inbox = c.inbox[1:]
			c.mu.Unlock()
			return m, nil
		case c.ctx.Err() != nil:
			c.mu.Unlock()
			return nil, io.EOF
		}
		c.mu.Unlock()
		select {
		case <-c.ready:
		case <-c.ctx.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Write sends one message to the client: the response to a request it read,
// or a request or notification of the server's own. It returns once the
// message is queued; the answer to a request is read later. A response to a
// request that was cancelled, or that the connection's end has already
// answered, is dropped. Write returns [ErrClosed] once the connection has
// ended, and an error if msg is not a JSON-RPC message (batches included:
// MCP has none since its 2025-06-18 revision).
func (c *MCPConn) Write(ctx context.Context, msg json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := wire.Parse(msg)
	if err != nil {
		return fmt.Errorf("proxy: writing an MCP message: %w", err)
	}
	c.mu.Lock()
	ended := c.ended != nil || c.ctx.Err() != nil
	c.mu.Unlock()
	switch {
	case ended:
		return ErrClosed
	case m.IsResponse():
		return c.relayAnswer(m)
	case m.IsNotification() && m.Method == "notifications/cancelled":
		return c.cancelAsked(m.Params)
	case m.IsNotification():
		return c.h.c.notify(nil, Successor, c.h.c.getDialect().SpellMCP(methodMCPMessage), c.envelope(m.Method, m.Params), nil)
	default:
		return c.request(m)
	}
}

// cancelAsked sends the server's cancel of a request of its own to the
// client, naming the request by the mcp/message id it went out under (the
// connect binding makes that its MCP id); the client's answer, should it
// come, is dropped. A cancel for a request not awaiting the client goes
// nowhere: it would name another request, or none.
func (c *MCPConn) cancelAsked(params json.RawMessage) error {
	c.mu.Lock()
	n := idGiven(c.asked, wire.Member(params, "requestId"))
	delete(c.asked, n)
	c.mu.Unlock()
	if n == 0 {
		return nil
	}
	c.h.c.forget(n)
	params, err := wire.SetPath(params, []string{"requestId"}, wire.IntID(n))
	if err != nil {
		return fmt.Errorf("proxy: writing an MCP message: %w", err)
	}
	return c.h.c.notify(nil, Successor, c.h.c.getDialect().SpellMCP(methodMCPMessage), c.envelope("notifications/cancelled", params), nil)
}

// Close ends the connection from the server's side: the client's pending
// requests are answered with an error, and what it sends from then on is
// refused. The client is not told otherwise (MCP-over-ACP gives servers no
// way to disconnect) and should disconnect in turn. The connection closes
// by itself when Serve returns.
func (c *MCPConn) Close() error {
	c.end(ErrClosed)
	return nil
}

// serve runs s on the connection, then closes it.
func (c *MCPConn) serve(s *MCPServer) {
	err := func() (err error) {
		defer func() { // a panic ends this connection, not the proxy
			if p := recover(); p != nil {
				c.h.c.log.Error("MCP server panicked", "server", s.Name, "connectionId", c.id, "panic", p, "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return s.Serve(c.ctx, c)
	}()
	why := ErrClosed
	if c.ctx.Err() != nil {
		why = io.EOF // the client, or the proxy's stop, ended it first
	}
	c.end(why)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) && !errors.Is(err, ErrClosed) {
		c.h.c.log.Warn("MCP server failed", "server", s.Name, "connectionId", c.id, "error", err)
	}
}

// codeConnectionClosed is the error code MCP's SDKs give requests cut off by
// the end of their connection.
const codeConnectionClosed = -32000

// end ends the connection, once: for io.EOF, from the client's side (or the
// proxy's stop); for ErrClosed, from the server's. The server's context is
// cancelled, the client's requests still pending are answered, and the
// server's are cancelled.
func (c *MCPConn) end(why error) {
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return
	}
	c.ended, c.closed = why, why == ErrClosed
	pending, asked := c.pending, c.asked
	c.pending, c.asked = nil, nil
	if c.closed {
		c.inbox = nil // Read returns ErrClosed from now on
	}
	c.mu.Unlock()
	c.cancel()
	hc := c.h.c
	for _, n := range slices.Sorted(maps.Keys(pending)) {
		hc.answer(nil, pending[n], nil, &Error{Code: codeConnectionClosed, Message: "MCP connection closed"}, nil)
	}
	for _, id := range slices.Sorted(maps.Keys(asked)) {
		if hc.forget(id) {
			hc.cancelRequest(wire.IntID(id), nil, nil)
		}
	}
}

// fromClient delivers an mcp/message from the client, request (id != nil)
// or notification. It runs on the reader.
func (c *MCPConn) fromClient(id, params json.RawMessage) {
	method, inner, err := wire.Unwrap(params)
	refuse := func(e *wire.Error) {
		if id != nil {
			c.h.c.send(wire.ErrorResponse(id, e))
		} else {
			c.h.c.log.Warn("dropped an mcp/message notification", "connectionId", c.id, "reason", e.Message)
		}
	}
	if err != nil {
		refuse(wire.Errorf(jrpc2.InvalidParams, "mcp/message without a method"))
		return
	}
	if id == nil && method == "notifications/cancelled" {
		c.cancelled(inner)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended != nil {
		refuse(wire.Errorf(codeConnectionClosed, "MCP connection closed"))
		return
	}
	m := wire.Message{Method: method, Params: inner}
	if id != nil {
		c.lastID++
		n := c.lastID
		m.ID = wire.IntID(n)
		c.pending[n] = bytes.Clone(id)
		// Registered before the server can see the request, and so answer
		// it, so that the answer finds it.
		c.h.c.mu.Lock()
		c.h.c.served[string(id)] = &served{cancel: func(error) { c.cancelRequest(n) }}
		c.h.c.mu.Unlock()
	}
	c.push(m.Append(nil))
}

// cancelled deals with MCP's notifications/cancelled from the client. It
// names the request by its mcp/message id, which the RFD's flattening makes
// the MCP id, and the server knows the request under the id the proxy gave
// it: it is cancelled as by $/cancel_request. A cancel for a request that is
// not pending on this connection is dropped, as MCP allows: passed on, it
// would name another request, or none, in the server's ids.
func (c *MCPConn) cancelled(params json.RawMessage) {
	c.mu.Lock()
	n := idGiven(c.pending, wire.Member(params, "requestId"))
	c.mu.Unlock()
	if n != 0 {
		c.cancelRequest(n)
	}
}

// cancelRequest deals with the client's $/cancel_request for the request
// given id n: the server is told, with MCP's own notification, and the
// request is answered as cancelled. It runs on the reader.
func (c *MCPConn) cancelRequest(n int64) {
	c.mu.Lock()
	id, ok := c.pending[n]
	delete(c.pending, n)
	if ok {
		c.push(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"cancelled by the client"}}`, n))
	}
	c.mu.Unlock()
	if ok {
		c.h.c.answer(nil, id, nil, context.Canceled, nil)
	}
}

// push queues a message for Read. c.mu must be held.
func (c *MCPConn) push(msg []byte) {
	if c.ended != nil {
		return
	}
	c.inbox = append(c.inbox, msg)
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// relayAnswer answers the client's request that the server's response m is for.
func (c *MCPConn) relayAnswer(m *wire.Message) error {
	n, given := ownID(m.ID)
	if !given {
		// Spelled otherwise (1.0 for 1) by a server that re-encodes
		// numbers: the same id, as a peer's response to a call is
		// (Conn.complete), lest the client's request go unanswered.
		n, given = wire.IntOf(m.ID)
	}
	c.mu.Lock()
	id, ok := c.pending[n]
	delete(c.pending, n)
	c.mu.Unlock()
	if !given || !ok {
		c.h.c.log.Debug("dropped an MCP response to no pending request", "connectionId", c.id, "id", string(m.ID))
		return nil
	}
	if m.Error != nil && m.Result != nil {
		c.h.c.bothAnswers(c.who(), m)
	}
	if e := m.Error; e != nil {
		if m.MalformedError() {
			e = c.h.c.malformedError(c.who(), m.ID, e)
		}
		c.h.c.answer(nil, id, nil, decodeError(e), nil)
	} else {
		c.h.c.answer(nil, id, m.Result, nil, nil)
	}
	return nil
}

// who names the server in what the proxy says of its answers.
func (c *MCPConn) who() string { return fmt.Sprintf("its MCP server %q", c.server) }

// request sends the server's request m to the client. The answer is
// delivered to Read as the response, under the server's id, by the reader
// that receives it, so answers are read in the order they arrive.
func (c *MCPConn) request(m *wire.Message) error {
	serverID := bytes.Clone(m.ID)
	params, err := checkParams(c.envelope(m.Method, m.Params))
	if err != nil {
		return fmt.Errorf("proxy: writing an MCP message: %w", err)
	}
	hc := c.h.c
	n := hc.newID()
	cl := &call{to: Successor, onAnswer: func(resp *wire.Message) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.asked[n]; ok {
			delete(c.asked, n)
			r := wire.Message{ID: serverID, Result: resp.Result, Error: resp.Error}
			c.push(r.Append(nil))
		}
	}}
	// Held throughout, so that end cannot miss the request.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended != nil {
		return ErrClosed
	}
	if err := hc.register(n, cl); err != nil {
		return err
	}
	if err := hc.out.put(nil, hc.encode(Successor, wire.IntID(n), hc.getDialect().SpellMCP(methodMCPMessage), params, nil)); err != nil {
		hc.forget(n)
		return err
	}
	c.asked[n] = serverID
	return nil
}

// envelope returns the params of an mcp/message carrying an MCP message on
// this connection.
func (c *MCPConn) envelope(method string, params json.RawMessage) json.RawMessage {
	m, _ := json.Marshal(method) // a string cannot fail
	buf := make([]byte, 0, len(c.quotedID)+len(m)+len(params)+48)
	buf = append(append(append(buf, `{"connectionId":`...), c.quotedID...), `,"method":`...)
	buf = append(buf, m...)
	if params != nil {
		buf = append(append(buf, `,"params":`...), params...)
	}
	return append(buf, '}')
}

// idGiven returns the id given to the request known elsewhere as id, in a
// map of such ids by the ids given, or 0 (no id given is 0). The id may be
// spelled otherwise (1.0 for 1): the very bytes are looked for first.
func idGiven(m map[int64]json.RawMessage, id json.RawMessage) int64 {
	for n, known := range m {
		if bytes.Equal(known, id) {
			return n
		}
	}
	want := wire.ReadID(id)
	for n, known := range m {
		if want.Same(known) {
			return n
		}
	}
	return 0
}
