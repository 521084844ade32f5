package mcpsdk_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// An agent plays a proxy's conductor and, behind it, an agent that speaks
// MCP-over-ACP natively, over in-memory pipes: it sets up sessions through
// the proxy and connects an SDK MCP client to the MCP servers the proxy
// declares, through mcp/connect and mcp/message, the way the conductor
// delivers them.
type agent struct {
	t    *testing.T
	in   *io.PipeWriter // the proxy's input
	done chan error     // Serve's result

	wmu sync.Mutex // serializes lines to the proxy

	mu      sync.Mutex
	lastID  int
	waiting map[string]func(rpc) // answer handlers, by the id of our request
	clients map[string]chan rpc  // what each connection's client reads, by connection id
	setUps  chan rpc             // session/new as the proxy forwards it
}

// An rpc is any JSON-RPC message.
type rpc struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// startAgent serves p on pipes and plays the agent side of them. The test's
// cleanup ends the proxy's input and checks that Serve returns cleanly.
func startAgent(t *testing.T, p *proxy.Proxy) *agent {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &agent{t: t, in: inW, done: make(chan error, 1), waiting: map[string]func(rpc){}, clients: map[string]chan rpc{}, setUps: make(chan rpc, 10)}
	go func() { a.done <- p.Serve(context.Background(), inR, outW) }()
	read := make(chan struct{})
	go func() {
		defer close(read)
		a.read(outR)
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-a.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		<-read
	})
	return a
}

// read routes what the proxy sends: answers to our requests, and the
// server's mcp/message to the client of its connection.
func (a *agent) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m rpc
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			a.t.Errorf("the proxy sent %s: %v", sc.Bytes(), err)
			continue
		}
		if m.Method == "" {
			a.mu.Lock()
			fn := a.waiting[string(m.ID)]
			delete(a.waiting, string(m.ID))
			a.mu.Unlock()
			if fn != nil {
				fn(m)
			}
			continue
		}
		var env struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		json.Unmarshal(m.Params, &env)
		switch {
		case m.Method != "proxy/successor":
		case env.Method == "session/new":
			a.setUps <- rpc{ID: m.ID, Method: env.Method, Params: env.Params}
		case env.Method == "mcp/message":
			var inner struct {
				ConnectionID string          `json:"connectionId"`
				Method       string          `json:"method"`
				Params       json.RawMessage `json:"params"`
			}
			json.Unmarshal(env.Params, &inner)
			a.mu.Lock()
			ch := a.clients[inner.ConnectionID]
			a.mu.Unlock()
			if ch != nil {
				// The envelope's id serves as the MCP id: it is unique
				// among the proxy's requests.
				ch <- rpc{JSONRPC: "2.0", ID: m.ID, Method: inner.Method, Params: inner.Params}
			}
		}
	}
}

func (a *agent) send(m rpc) {
	m.JSONRPC = "2.0"
	line, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	a.in.Write(append(line, '\n'))
}

// request sends method to the proxy from its successor, and has onAnswer
// called with the answer. It returns the request's id.
func (a *agent) request(method string, params any, onAnswer func(rpc)) json.RawMessage {
	a.mu.Lock()
	a.lastID++
	id := json.RawMessage(fmt.Sprintf(`"a%d"`, a.lastID))
	a.waiting[string(id)] = onAnswer
	a.mu.Unlock()
	a.send(rpc{ID: id, Method: "proxy/successor", Params: mustJSON(map[string]any{"method": method, "params": params})})
	return id
}

// call is request, waiting for the answer.
func (a *agent) call(method string, params any) rpc {
	got := make(chan rpc, 1)
	a.request(method, params, func(m rpc) { got <- m })
	return <-got
}

// newSession sends session/new from the client side, answers it as the
// agent, and returns the acp servers the proxy declared, by name.
func (a *agent) newSession(sessionID, cwd string) map[string]string {
	a.mu.Lock()
	a.lastID++
	id := json.RawMessage(fmt.Sprintf("%d", a.lastID))
	answer := make(chan rpc, 1)
	a.waiting[string(id)] = func(m rpc) { answer <- m }
	a.mu.Unlock()
	a.send(rpc{ID: id, Method: "session/new", Params: mustJSON(map[string]any{"cwd": cwd, "mcpServers": []any{}})})
	m := <-a.setUps
	var p struct {
		MCPServers []struct {
			Type, Name string
			ServerID   string `json:"serverId"`
		} `json:"mcpServers"`
	}
	json.Unmarshal(m.Params, &p)
	servers := map[string]string{}
	for _, s := range p.MCPServers {
		if s.Type == "acp" {
			servers[s.Name] = s.ServerID
		}
	}
	a.send(rpc{ID: m.ID, Result: mustJSON(map[string]string{"sessionId": sessionID})})
	if r := <-answer; r.Error != nil {
		a.t.Fatalf("session/new: %s", r.Error)
	}
	return servers
}

// connect opens an MCP connection to the server with id acpID and returns
// an SDK transport for a client on it.
func (a *agent) connect(acpID string) *clientTransport {
	m := a.call("mcp/connect", map[string]string{"acpId": acpID})
	var r struct{ ConnectionID string }
	if err := json.Unmarshal(m.Result, &r); err != nil || r.ConnectionID == "" {
		a.t.Fatalf("mcp/connect: %s %s", m.Result, m.Error)
	}
	ch := make(chan rpc, 100)
	a.mu.Lock()
	a.clients[r.ConnectionID] = ch
	a.mu.Unlock()
	return &clientTransport{a: a, id: r.ConnectionID, in: ch, closed: make(chan struct{}), sent: map[string]json.RawMessage{}}
}

// A clientTransport is the agent's side of one MCP-over-ACP connection, as
// an SDK transport.
type clientTransport struct {
	a      *agent
	id     string
	in     chan rpc
	once   sync.Once
	closed chan struct{}

	mu   sync.Mutex
	sent map[string]json.RawMessage // the client's requests in flight: their mcp/message ids, by the client's
}

func (c *clientTransport) Connect(context.Context) (mcp.Connection, error) { return c, nil }
func (c *clientTransport) SessionID() string                               { return "" }

func (c *clientTransport) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return jsonrpc.DecodeMessage(mustJSON(m))
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *clientTransport) Write(ctx context.Context, msg jsonrpc.Message) error {
	raw, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	var m rpc
	json.Unmarshal(raw, &m)
	switch {
	case m.Method == "": // an answer to the server's request, by its envelope's id
		c.a.send(m)
	case m.ID == nil:
		params := m.Params
		if m.Method == "notifications/cancelled" {
			// The binding makes a request's mcp/message id its MCP id: a
			// cancel names the request by the id it went out under.
			var p map[string]json.RawMessage
			json.Unmarshal(params, &p)
			c.mu.Lock()
			p["requestId"] = c.sent[string(p["requestId"])]
			c.mu.Unlock()
			params = mustJSON(p)
		}
		c.a.send(rpc{Method: "proxy/successor", Params: mustJSON(map[string]any{"method": "mcp/message",
			"params": map[string]any{"connectionId": c.id, "method": m.Method, "params": params}})})
	default:
		mcpID := m.ID
		c.mu.Lock() // before the answer can come
		c.sent[string(mcpID)] = c.a.request("mcp/message", map[string]any{"connectionId": c.id, "method": m.Method, "params": m.Params}, func(r rpc) {
			c.mu.Lock()
			delete(c.sent, string(mcpID))
			c.mu.Unlock()
			select {
			case c.in <- rpc{JSONRPC: "2.0", ID: mcpID, Result: r.Result, Error: r.Error}:
			case <-c.closed:
			}
		})
		c.mu.Unlock()
	}
	return nil
}

// Close disconnects, as an agent closing its MCP client does.
func (c *clientTransport) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.a.call("mcp/disconnect", map[string]string{"connectionId": c.id})
	})
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// textOf returns the text of a tool result, and whether it is an error.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	s := strings.Join(parts, "")
	if res.IsError {
		s = "error: " + s
	}
	return s
}
