package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watched is an mcp.Transport that notes the requests and notifications the
// server sends the client, as the client reads them.
type watched struct {
	mcp.Transport

	mu            sync.Mutex
	requests      []string
	notifications []string
}

func (w *watched) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := w.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Connection: c, w: w}, nil
}

func (w *watched) seen() (requests, notifications []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests), slices.Clone(w.notifications)
}

type watchedConn struct {
	mcp.Connection
	w *watched
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && err == nil {
		c.w.mu.Lock()
		if r.ID.IsValid() {
			c.w.requests = append(c.w.requests, r.Method)
		} else {
			c.w.notifications = append(c.w.notifications, r.Method)
		}
		c.w.mu.Unlock()
	}
	return m, err
}

// acpTransport is an MCP client transport over MCP-over-ACP, as an agent
// that supports it natively has one: Connect sends mcp/connect for the
// declared server's id on the agent's ACP connection; each message of the
// client goes out in an mcp/message (a request for a request, whose answer
// comes back as the response; a notification for a notification); the
// server's mcp/message requests and notifications arrive, through the
// agent's reader, as the messages they carry; Close sends mcp/disconnect.
type acpTransport struct {
	a        *agent
	serverID string

	mu     sync.Mutex
	conn   *acpConn
	result string // how mcp/disconnect was answered
}

func (t *acpTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	res, err := t.a.call(ctx, "mcp/connect", map[string]string{"acpId": t.serverID})
	if err != nil {
		return nil, fmt.Errorf("mcp/connect: %w", err)
	}
	var r struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ConnectionID == "" {
		return nil, fmt.Errorf("mcp/connect answered %s", res)
	}
	c := &acpConn{t: t, id: r.ConnectionID, in: make(chan []byte, 64), closed: make(chan struct{}), asked: map[string]json.RawMessage{}, sent: map[string]json.RawMessage{}}
	t.a.mu.Lock()
	t.a.conns[c.id] = c
	t.a.mu.Unlock()
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	log.Printf("MCP connection %s open to %s", c.id, t.serverID)
	return c, nil
}

func (t *acpTransport) disconnected() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result
}

// An acpConn is one MCP-over-ACP connection, as an mcp.Connection.
type acpConn struct {
	t      *acpTransport
	id     string
	in     chan []byte // messages for Read
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	lastID int
	asked  map[string]json.RawMessage // the server's requests: the ACP id of each, by the id the client sees
	sent   map[string]json.RawMessage // the client's requests in flight: the ACP id of each, by the client's id
}

// toConn delivers the conductor's mcp/message to the connection it names,
// as the MCP message it carries. It runs on the reader.
func (a *agent) toConn(m *msg) {
	var p struct {
		ConnectionID string          `json:"connectionId"`
		Method       string          `json:"method"`
		Params       json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(m.Params, &p)
	a.mu.Lock()
	c := a.conns[p.ConnectionID]
	a.mu.Unlock()
	if c == nil || p.Method == "" {
		log.Printf("unexpected: refusing an mcp/message for connection %q, method %q", p.ConnectionID, p.Method)
		if m.ID != nil {
			a.send(&msg{ID: m.ID, Error: &rpcError{Code: -32602, Message: "mcp/message: unknown MCP connection or no method"}})
		}
		return
	}
	inner := msg{JSONRPC: "2.0", Method: p.Method, Params: p.Params}
	if string(inner.Params) == "null" {
		inner.Params = nil
	}
	if m.ID != nil {
		// The client answers under an id of this connection's, which
		// leads back to the ACP request.
		c.mu.Lock()
		c.lastID++
		inner.ID = json.RawMessage(fmt.Sprintf(`"server-%d"`, c.lastID))
		c.asked[string(inner.ID)] = m.ID
		c.mu.Unlock()
	}
	c.push(mustJSON(inner))
}

func (c *acpConn) push(line []byte) {
	select {
	case c.in <- line:
	case <-c.closed:
	}
}

func (c *acpConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case line := <-c.in:
		return jsonrpc.DecodeMessage(line)
	case <-c.closed:
		return nil, io.EOF
	case <-c.t.a.ctx.Done():
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *acpConn) Write(ctx context.Context, m jsonrpc.Message) error {
	raw, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return err
	}
	var out msg
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return io.EOF
	default:
	}
	a := c.t.a
	envelope := map[string]any{"connectionId": c.id, "method": out.Method}
	if out.Params != nil {
		envelope["params"] = out.Params
	}
	switch {
	case out.Method == "": // the client answering one of the server's requests
		c.mu.Lock()
		id, ok := c.asked[string(out.ID)]
		delete(c.asked, string(out.ID))
		c.mu.Unlock()
		if !ok {
			return fmt.Errorf("an answer to no request of the server's: %s", raw)
		}
		a.send(&msg{ID: id, Result: out.Result, Error: out.Error})
	case out.ID == nil:
		if out.Method == "notifications/cancelled" {
			// The binding makes a request's ACP id its MCP id: a cancel
			// names the request by the id it went out under.
			var p map[string]json.RawMessage
			json.Unmarshal(out.Params, &p)
			c.mu.Lock()
			acpID, ok := c.sent[string(p["requestId"])]
			c.mu.Unlock()
			if !ok {
				return nil // answered already
			}
			p["requestId"] = acpID
			envelope["params"] = p
		}
		a.send(&msg{Method: "mcp/message", Params: mustJSON(envelope)})
	default:
		mcpID := out.ID
		c.mu.Lock() // before the answer can come
		acpID := a.request("mcp/message", envelope, func(r *msg) {
			c.mu.Lock()
			delete(c.sent, string(mcpID))
			c.mu.Unlock()
			resp := msg{JSONRPC: "2.0", ID: mcpID, Result: r.Result, Error: r.Error}
			if resp.Result == nil && resp.Error == nil {
				resp.Result = json.RawMessage("null")
			}
			c.push(mustJSON(resp))
		})
		c.sent[string(mcpID)] = acpID
		c.mu.Unlock()
	}
	return nil
}

// Close disconnects, once.
func (c *acpConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		a := c.t.a
		a.mu.Lock()
		delete(a.conns, c.id)
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := a.call(ctx, "mcp/disconnect", map[string]string{"connectionId": c.id})
		result := "answered " + string(res)
		if err != nil {
			result = "failed: " + err.Error()
		}
		c.t.mu.Lock()
		c.t.result = result
		c.t.mu.Unlock()
		log.Printf("MCP connection %s: mcp/disconnect %s", c.id, result)
	})
	return nil
}

func (c *acpConn) SessionID() string { return "" }
