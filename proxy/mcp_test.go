package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
	"github.com/acp-conductor/acp-conductor/proxy"
)

// uuid matches the ids the proxy makes for servers and connections.
var uuid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// scrub replaces each id in line with a name in order of first appearance
// among all scrubbed lines (ID1, ID2, ...), so lines can be compared whole.
type scrub map[string]string

func (s scrub) line(line string) string {
	return uuid.ReplaceAllStringFunc(line, func(id string) string {
		if _, ok := s[id]; !ok {
			s[id] = fmt.Sprintf("ID%d", len(s)+1)
		}
		return s[id]
	})
}

// id returns the real id that name stands for.
func (s scrub) id(name string) string {
	for id, n := range s {
		if n == name {
			return id
		}
	}
	panic("no id " + name)
}

// expectScrubbed checks the proxy's next line, ids scrubbed.
func (c *conductor) expectScrubbed(s scrub, want string) {
	c.t.Helper()
	if got := s.line(c.recv()); got != want {
		c.t.Fatalf("proxy sent\n\t%s\nwant\n\t%s", got, want)
	}
}

// mcpHarness is a proxy whose MCP servers hand each connection to the test,
// which plays the server through the MCPConn, and whose Serve returns what
// the test sends on ret (or nil once the connection's context is done).
type mcpHarness struct {
	*conductor
	conns chan served
	s     scrub
}

type served struct {
	server string
	conn   *proxy.MCPConn
	ctx    context.Context
	ret    chan error
}

func serveMCP(t *testing.T, p *proxy.Proxy, names ...string) *mcpHarness {
	t.Helper()
	h := &mcpHarness{conns: make(chan served, 100), s: scrub{}}
	for _, name := range names {
		p.MCPServers = append(p.MCPServers, &proxy.MCPServer{
			Name: name,
			Serve: func(ctx context.Context, c *proxy.MCPConn) error {
				sv := served{server: name, conn: c, ctx: ctx, ret: make(chan error, 1)}
				h.conns <- sv
				select {
				case err := <-sv.ret:
					if err == errPanicNow {
						panic("a bug in the server")
					}
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
	}
	h.conductor = serve(t, p)
	return h
}

// connectS1 opens session s1 and connects to its server, and returns the
// served connection and its "connectionId" member, for params.
func (h *mcpHarness) connectS1() (served, string) {
	h.t.Helper()
	h.newSession(1, "s1")
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c","result":{"connectionId":"ID2"}}`)
	sv := h.conn()
	return sv, `"connectionId":"` + sv.conn.ID() + `"`
}

// conn returns the next connection served.
func (h *mcpHarness) conn() served {
	h.t.Helper()
	select {
	case s := <-h.conns:
		return s
	case <-time.After(timeout):
		h.t.Fatal("no MCP connection was served")
		return served{}
	}
}

// read returns the server's next message.
func (s served) read(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := s.conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return string(m)
}

func (s served) expect(t *testing.T, want string) {
	t.Helper()
	if got := s.read(t); got != want {
		t.Fatalf("the server read\n\t%s\nwant\n\t%s", got, want)
	}
}

func (s served) write(t *testing.T, msg string) {
	t.Helper()
	if err := s.conn.Write(context.Background(), json.RawMessage(msg)); err != nil {
		t.Fatalf("Write(%s): %v", msg, err)
	}
}

// newSession sets up a session through the proxy and returns the names of
// the ids the proxy declared in it.
func (h *mcpHarness) newSession(id int, sessionID string) {
	h.t.Helper()
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/w/%s","mcpServers":[]}}`, id, sessionID))
	line := h.recv()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal([]byte(line), &m)
	h.s.line(line)
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":%q}}`, m.ID, sessionID))
	h.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"sessionId":%q}}`, id, sessionID))
}

// The proxy declares its servers in every session set-up request, after the
// entries already there and with every other byte kept, under ids of its
// own for each session.
func TestMCPDeclarations(t *testing.T) {
	var seen string
	h := serveMCP(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/load": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				seen = string(r.Params)
				return r.Forward(ctx)
			},
		},
	}, "tools", "more")
	s := h.s

	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w", "mcpServers":[ {"name":"fs","command":"fs-mcp","args":[],"env":[]} ],"_meta":{"k":[1, 2]}}}`)
	h.expectScrubbed(s, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/w", "mcpServers":[{"name":"fs","command":"fs-mcp","args":[],"env":[]},{"type":"acp","name":"tools","serverId":"ID1"},{"type":"acp","name":"more","serverId":"ID2"}],"_meta":{"k":[1, 2]}}}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)

	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/load","params":{"sessionId":"s0","cwd":"/w"}}`)
	h.expectScrubbed(s, `{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/load","params":{"sessionId":"s0","cwd":"/w","mcpServers":[{"type":"acp","name":"tools","serverId":"ID3"},{"type":"acp","name":"more","serverId":"ID4"}]}}}`)
	if got := s.line(seen); !strings.Contains(got, `"serverId":"ID3"`) {
		t.Errorf("the session/load handler saw %s, without the declarations", got)
	}
	h.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)

	for i, method := range []string{"session/resume", "session/fork"} {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"sessionId":"s0","cwd":"/w","mcpServers":null}}`, 10+i, method))
		h.expectScrubbed(s, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":%q,"params":{"sessionId":"s0","cwd":"/w","mcpServers":[{"type":"acp","name":"tools","serverId":"ID%d"},{"type":"acp","name":"more","serverId":"ID%d"}]}}}`, 3+i, method, 5+2*i, 6+2*i))
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"no"}}`, 3+i))
		h.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"no"}}`, 10+i))
	}

	// What the proxy cannot add to goes on as it is.
	h.send(`{"jsonrpc":"2.0","id":20,"method":"session/new","params":{"cwd":"/w","mcpServers":{}}}`)
	h.expect(`{"jsonrpc":"2.0","id":5,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/w","mcpServers":{}}}}`)
	h.send(`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad"}}`)
	h.expect(`{"jsonrpc":"2.0","id":20,"error":{"code":-32602,"message":"bad"}}`)

	// Other requests are not touched.
	h.send(`{"jsonrpc":"2.0","id":21,"method":"session/prompt","params":{"sessionId":"s1","mcpServers":[]}}`)
	h.expect(`{"jsonrpc":"2.0","id":6,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","mcpServers":[]}}}`)
}

// One connection, both ways: the client's requests and notifications reach
// the server as plain MCP messages under ids the proxy gives, and the
// server's responses answer them; the server's own requests reach the client
// as mcp/message requests, whose answers it reads back under its own ids.
func TestMCPConnection(t *testing.T) { synctest.Test(t, testMCPConnection) }

func testMCPConnection(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.newSession(1, "s1")

	h.send(`{"jsonrpc":"2.0","id":"c1","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `","_meta":{}}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c1","result":{"connectionId":"ID2"}}`)
	sv := h.conn()
	if sv.server != "tools" || sv.conn.ID() != h.s.id("ID2") {
		t.Fatalf("served %s on connection %s", sv.server, sv.conn.ID())
	}
	if got := sv.conn.Session(); got.ID != "s1" || got.Cwd != "/w/s1" || got.Method != "session/new" {
		t.Errorf("Session() = %+v", got)
	}
	conn := `"connectionId":"` + sv.conn.ID() + `"`

	// A request and a notification from the client, in order.
	h.send(`{"jsonrpc":"2.0","id":"m1","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"initialize","params":{"protocolVersion":"2025-06-18"},"_meta":{"hop":1}}}}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"notifications/initialized"}}}`)
	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/list","params":null}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	sv.expect(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)

	// Responses in any order; an error is the JSON-RPC error.
	sv.write(t, `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no tools","data":{"x":1}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m2","error":{"code":-32601,"message":"no tools","data":{"x":1}}}`)
	sv.write(t, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18",
		"capabilities":{}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m1","result":{"protocolVersion":"2025-06-18","capabilities":{}}}`)

	// The server's own request, notification and second request.
	sv.write(t, `{"jsonrpc":"2.0","id":"q","method":"sampling/createMessage","params":{"maxTokens":5}}`)
	sv.write(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
	sv.write(t, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`)
	h.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"sampling/createMessage","params":{"maxTokens":5}}}}`)
	h.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"notifications/message","params":{"level":"info","data":"hi"}}}}`)
	h.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"roots/list"}}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"declined"}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":"q","error":{"code":-1,"message":"declined"}}`)

	// A response to nothing pending is dropped; a message that is not one is
	// refused.
	sv.write(t, `{"jsonrpc":"2.0","id":99,"result":{}}`)
	if err := sv.conn.Write(context.Background(), json.RawMessage(`[{"jsonrpc":"2.0","method":"x"}]`)); err == nil {
		t.Error("Write accepted a batch")
	}
	h.quiet()
}

// Many connections at once, to the same server and to others, in both
// spellings, each its own.
func TestMCPManyConnections(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "a", "b")
	h.newSession(1, "s1") // ID1, ID2
	h.newSession(2, "s2") // ID3, ID4

	conns := map[string]served{} // by scrubbed connection id
	for i, target := range []string{"ID1", "ID1", "ID2", "ID4"} {
		key := "acpId"
		if i%2 == 1 {
			key = "serverId"
		}
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":"mcp/connect","params":{%q:%q}}}`, 100+i, key, h.s.id(target)))
		h.expectScrubbed(h.s, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"connectionId":"ID%d"}}`, 100+i, 5+i))
		sv := h.conn()
		conns[h.s.line(sv.conn.ID())] = sv
	}
	for name, want := range map[string]string{"ID5": "a s1", "ID6": "a s1", "ID7": "b s1", "ID8": "b s2"} {
		if sv := conns[name]; sv.server+" "+sv.conn.Session().ID != want {
			t.Errorf("connection %s: server %s in session %s, want %s", name, sv.server, sv.conn.Session().ID, want)
		}
	}
	// A ping on each, answered in reverse order.
	names := []string{"ID5", "ID6", "ID7", "ID8"}
	for i, name := range names {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":%q,"method":"ping"}}}`, 200+i, h.s.id(name)))
	}
	for i := len(names) - 1; i >= 0; i-- {
		sv := conns[names[i]]
		sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		sv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"n":%d}}`, i))
		h.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":%d}}`, 200+i, i))
	}
}

// mcp/disconnect ends the connection: the server's context is done, Read
// returns what came before and then io.EOF, requests still pending are
// answered, and the connection is unknown from then on.
func TestMCPDisconnect(t *testing.T) { synctest.Test(t, testMCPDisconnect) }

func testMCPDisconnect(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()

	h.send(`{"jsonrpc":"2.0","id":"m0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"params":{}}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m0","error":{"code":-32602,"message":"mcp/message without a method"}}`)
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call","params":{"name":"slow"}}}}`)
	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{` + conn + `}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m","error":{"code":-32000,"message":"MCP connection closed"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
	select {
	case <-sv.ctx.Done():
	case <-time.After(timeout):
		t.Fatal("the server's context is not done after mcp/disconnect")
	}
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	if m, err := sv.conn.Read(context.Background()); err != io.EOF {
		t.Errorf("Read after disconnect = %s, %v; want io.EOF", m, err)
	}
	if err := sv.conn.Write(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{}}`)); !errors.Is(err, proxy.ErrClosed) {
		t.Errorf("Write after disconnect = %v, want ErrClosed", err)
	}

	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m2","error":{"code":-32602,"message":"mcp/message: unknown MCP connection","data":{` + conn + `}}}`)
	h.send(`{"jsonrpc":"2.0","id":"d2","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"nope"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d2","error":{"code":-32602,"message":"mcp/disconnect: unknown MCP connection","data":{"connectionId":"nope"}}}`)
	h.send(`{"jsonrpc":"2.0","id":"m3","method":"proxy/successor","params":{"method":"mcp/message","params":{"method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m3","error":{"code":-32602,"message":"mcp/message: unknown MCP connection","data":{"connectionId":null}}}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"nope","method":"ping"}}}`)
	h.quiet()
}

// A cancel for a request on a connection, ACP's $/cancel_request or MCP's
// notifications/cancelled naming the mcp/message's id, tells the server
// with MCP's notification under the id the server knows, and answers at
// once; the server's late response is dropped. An MCP cancel naming no
// request pending on the connection never reaches the server, where it
// would name another request.
func TestMCPCancel(t *testing.T) {
	for name, cancel := range map[string]string{
		"acp": `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"m"}}`,
		"mcp": `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{%s,"method":"notifications/cancelled","params":{"requestId":"m","reason":"user"}}}}`,
		// The id spelled otherwise is the same id.
		"acp spelled": `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"\u006d"}}`,
		"mcp spelled": `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{%s,"method":"notifications/cancelled","params":{"requestId":"\u006d","reason":"user"}}}}`,
	} {
		t.Run(name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testMCPCancel(t, cancel) }) })
	}
}

func testMCPCancel(t *testing.T, cancel string) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()

	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call"}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"notifications/cancelled","params":{"requestId":"elsewhere"}}}}`)
	h.send(strings.Replace(cancel, "%s", conn, 1))
	h.expect(`{"jsonrpc":"2.0","id":"m","error":{"code":-32800,"message":"Request cancelled"}}`)
	sv.expect(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"cancelled by the client"}}`)
	sv.write(t, `{"jsonrpc":"2.0","id":1,"result":{"late":true}}`)
	h.quiet()
}

// The server cancels a request of its own: the client hears MCP's cancel
// naming the request by the mcp/message id it went out under, which is all
// it knows it by, and its late answer is dropped. A cancel for a request
// not awaiting the client goes nowhere. The request's id may be spelled
// otherwise in the cancel.
func TestMCPServerCancels(t *testing.T) {
	for _, cancelID := range []string{`"q"`, `"\u0071"`} {
		t.Run(cancelID, func(t *testing.T) { testMCPServerCancels(t, cancelID) })
	}
}

func testMCPServerCancels(t *testing.T, cancelID string) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()
	sv.write(t, `{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"elicitation/create","params":{}}}}`)
	sv.write(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"elsewhere"}}`)
	sv.write(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+cancelID+`,"reason":"timeout"}}`)
	h.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"notifications/cancelled","params":{"requestId":2,"reason":"timeout"}}}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"result":{"late":true}}`)
	// The server reads next what the client sends next, not the answer.
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"notifications/roots/list_changed"}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
}

// errPanicNow, sent to a served connection's ret, makes its Serve panic.
var errPanicNow = errors.New("panic now")

// A server whose Serve panics ends its connection, as if it had returned
// an error: its pending request is answered, and the proxy goes on.
func TestMCPServerPanics(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call"}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	sv.ret <- errPanicNow
	h.expect(`{"jsonrpc":"2.0","id":"m","error":{"code":-32000,"message":"MCP connection closed"}}`)
	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m2","error":{"code":-32000,"message":"MCP connection closed"}}`)
	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{` + conn + `}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
}

// When Serve returns, the connection is closed: its pending requests are
// answered, later ones refused, and the server's requests in flight are
// cancelled. The client may still disconnect.
func TestMCPServerCloses(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()

	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call"}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	sv.write(t, `{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"elicitation/create","params":{}}}}`)

	sv.ret <- errors.New("tired")
	h.expect(`{"jsonrpc":"2.0","id":"m","error":{"code":-32000,"message":"MCP connection closed"}}`)
	h.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	if _, err := sv.conn.Read(context.Background()); !errors.Is(err, proxy.ErrClosed) {
		t.Errorf("Read after Serve returned: %v, want ErrClosed", err)
	}

	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m2","error":{"code":-32000,"message":"MCP connection closed"}}`)
	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{` + conn + `}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
}

// The proxy's stop ends every connection: Serve's context is done and Serve
// returns before Proxy.Serve does (goleak checks that nothing is left).
func TestMCPStop(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.newSession(1, "s1")
	for i := range 3 {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":%q}}}`, 10+i, h.s.id("ID1")))
		h.recv()
	}
	var svs []served
	for range 3 {
		svs = append(svs, h.conn())
	}
	// One blocked in Read, one waiting for the client's answer.
	readErr := make(chan error, 1)
	go func() {
		_, err := svs[0].conn.Read(context.Background())
		readErr <- err
	}()
	svs[1].write(t, `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`)
	h.recv()

	h.in.Close()
	if err := h.wait(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for i, sv := range svs {
		if sv.ctx.Err() == nil {
			t.Errorf("connection %d: the server's context is not done", i)
		}
	}
	if err := <-readErr; err != io.EOF {
		t.Errorf("Read when the proxy stopped: %v, want io.EOF", err)
	}
}

// mcp/connect for a server the proxy did not declare goes on toward its
// owner, and so do the messages on the connection it opens.
func TestMCPNotOurs(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"theirs"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"acpId":"theirs"}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"connectionId":"up-1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"connectionId":"up-1"}}`)

	h.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up-1","method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":2,"method":"mcp/message","params":{"connectionId":"up-1","method":"ping"}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"method":"mcp/message","params":{"connectionId":"up-1","method":"roots/list"}}`)
	h.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up-1","method":"roots/list"}}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}`)
	h.expect(`{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}`)

	h.send(`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"up-1"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"method":"mcp/disconnect","params":{"connectionId":"up-1"}}`)
	h.send(`{"jsonrpc":"2.0","id":4,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"result":{}}`)
	h.send(`{"jsonrpc":"2.0","id":5,"method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up-1","method":"ping"}}}`)
	h.expectError("5", -32602)
}

// A session the agent refuses leaves no server to connect to.
func TestMCPRefusedSession(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"tools","serverId":"ID1"}]}}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"auth required"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"auth required"}}`)
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":2,"method":"mcp/connect","params":{"acpId":"ID1"}}`)
}

// A session the agent closes leaves no server to connect to: its
// declarations are forgotten, so that a client that opens and closes
// sessions all day does not grow the proxy. A close the agent refuses, and
// the sessions still open, keep theirs.
func TestMCPClosedSession(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.newSession(1, "s1") // ID1
	h.newSession(2, "s2") // ID2

	h.send(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/close","params":{"sessionId":"s1"}}}`)
	h.send(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"busy"}}`)
	h.expect(`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"busy"}}`)
	h.send(`{"jsonrpc":"2.0","id":"c1","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c1","result":{"connectionId":"ID3"}}`)
	h.conn()

	h.send(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"session/close","params":{"sessionId":"s1"}}}`)
	h.send(`{"jsonrpc":"2.0","id":4,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":4,"result":{}}`)
	h.send(`{"jsonrpc":"2.0","id":"c2","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":5,"method":"mcp/connect","params":{"acpId":"ID1"}}`)

	h.send(`{"jsonrpc":"2.0","id":"c3","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID2") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c3","result":{"connectionId":"ID4"}}`)
	if sv := h.conn(); sv.conn.Session().ID != "s2" {
		t.Errorf("connected to session %q, want s2", sv.conn.Session().ID)
	}
}

// An agent may connect while the proxy still waits for its answer to
// session/new, before the session has an id.
func TestMCPConnectDuringSetUp(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w"}}`)
	h.s.line(h.recv())
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c","result":{"connectionId":"ID2"}}`)
	sv := h.conn()
	if s := sv.conn.Session(); s.ID != "" || s.Cwd != "/w" {
		t.Errorf("Session() before the answer = %+v", s)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"late"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"late"}}`)
	if s := sv.conn.Session(); s.ID != "late" {
		t.Errorf("Session() after the answer = %+v", s)
	}
}

func TestMCPServersChecked(t *testing.T) {
	serve := func(ctx context.Context, c *proxy.MCPConn) error { return nil }
	for _, servers := range [][]*proxy.MCPServer{
		{nil},
		{{Serve: serve}},
		{{Name: "x"}},
		{{Name: "x", Serve: serve}, {Name: "x", Serve: serve}},
	} {
		_, w := io.Pipe()
		p := &proxy.Proxy{MCPServers: servers}
		if err := p.Serve(context.Background(), strings.NewReader(""), w); err == nil {
			t.Errorf("Serve accepted %+v", servers)
		}
	}
}

// An agent may connect to its MCP servers before it answers session/new:
// the session's id is then known from the conductor's
// _meta["acp-conductor/sessionId"] on mcp/connect, and the answer keeps it.
func TestMCPSessionFromConnect(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w/early","mcpServers":[]}}`)
	line := h.recv()
	h.s.line(line)
	h.send(`{"jsonrpc":"2.0","id":"c1","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"` + h.s.id("ID1") + `","_meta":{"acp-conductor/sessionId":"early-1"}}}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c1","result":{"connectionId":"ID2"}}`)
	sv := h.conn()
	if got := sv.conn.Session(); got.ID != "early-1" || got.Cwd != "/w/early" {
		t.Errorf("Session() before session/new was answered = %+v, want id early-1", got)
	}
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"early-1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"early-1"}}`)
	if got := sv.conn.Session(); got.ID != "early-1" {
		t.Errorf("Session() after the answer = %+v", got)
	}
}

// Initialized in the Thinkwell dialect (@thinkwell/conductor, sacp up to
// 11), the proxy declares its servers the way those conductors read them,
// {"type":"http","url":"acp:<uuid>"}, takes the connection id they propose
// on _mcp/connect (by url; sacp's by acp_url, answered with connection_id
// too), and speaks _mcp/message in their envelopes both ways; sacp's
// _mcp/disconnect names the connection connection_id. What is not its own
// goes on in the spelling it came in.
func TestMCPThinkwellSpelling(t *testing.T) { synctest.Test(t, testMCPThinkwellSpelling) }

func testMCPThinkwellSpelling(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"method":"_proxy/successor/request","params":{"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}}`)
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	h.recv() // the proxy's answer, marked (TestThinkwellDialect)

	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":2,"method":"_proxy/successor/request","params":{"method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"http","name":"tools","url":"acp:ID1","headers":[]}]}}}`)
	h.send(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	url := `"acp:` + h.s.id("ID1") + `"`

	for i, c := range []struct{ connect, answer, disconnect string }{
		{`{"connectionId":"tw-1","url":` + url + `}`, `{"connectionId":"tw-1","connection_id":"tw-1"}`, `{"connectionId":"tw-1"}`}, // thinkwell
		{`{"acp_url":` + url + `}`, `{"connectionId":"ID2","connection_id":"ID2"}`, `{"connection_id":"ID2"}`},                     // sacp
	} {
		func() {
			h.send(`{"jsonrpc":"2.0","id":"c","method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":` + c.connect + `}}`)
			h.expectScrubbed(h.s, `{"jsonrpc":"2.0","id":"c","result":`+c.answer+`}`)
			sv := h.conn()
			if got := sv.conn.Session(); got.ID != "s1" {
				t.Errorf("Session() = %+v", got)
			}
			conn := `"connectionId":"` + sv.conn.ID() + `"`
			h.send(`{"jsonrpc":"2.0","id":"m","method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{` + conn + `,"method":"tools/list"}}}`)
			sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			sv.write(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)
			h.expect(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_mcp/message","params":{` + conn + `,"method":"notifications/progress","params":{"progress":1}}}}`)
			sv.write(t, `{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
			q := strconv.Itoa(3 + i) // the proxy's own request ids
			h.expect(`{"jsonrpc":"2.0","id":` + q + `,"method":"_proxy/successor/request","params":{"method":"_mcp/message","params":{` + conn + `,"method":"roots/list"}}}`)
			h.send(`{"jsonrpc":"2.0","id":` + q + `,"result":{"roots":[]}}`)
			sv.expect(t, `{"jsonrpc":"2.0","id":"q","result":{"roots":[]}}`)
			sv.write(t, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
			h.expect(`{"jsonrpc":"2.0","id":"m","result":{"tools":[]}}`)
			h.send(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_mcp/disconnect","params":` + strings.ReplaceAll(c.disconnect, "ID2", sv.conn.ID()) + `}}`)
			select {
			case <-sv.ctx.Done():
			case <-time.After(timeout):
				t.Fatal("the connection did not end on _mcp/disconnect")
			}
		}()
	}
	// A proposed id is answered as JSON quotes it.
	h.send(`{"jsonrpc":"2.0","id":"c2","method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"tw\u0001<","url":` + url + `}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"c2","result":{"connectionId":"tw\u0001\u003c","connection_id":"tw\u0001\u003c"}}`)
	if sv := h.conn(); sv.conn.ID() != "tw\x01<" {
		t.Errorf("the connection's id is %q", sv.conn.ID())
	}

	// A server that is not the proxy's: the connect goes on as it came,
	// and so do the messages on the connection it opens.
	h.send(`{"jsonrpc":"2.0","id":"o","method":"_proxy/successor/request","params":{"method":"_mcp/connect","params":{"connectionId":"up-1","url":"acp:elsewhere"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":5,"method":"_mcp/connect","params":{"connectionId":"up-1","url":"acp:elsewhere"}}`)
	h.send(`{"jsonrpc":"2.0","id":5,"result":{"connection_id":"up-1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"o","result":{"connection_id":"up-1"}}`)
	h.send(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_mcp/message","params":{"connectionId":"up-1","method":"notifications/initialized"}}}`)
	h.expect(`{"jsonrpc":"2.0","method":"_mcp/message","params":{"connectionId":"up-1","method":"notifications/initialized"}}`)
	h.quiet()
}

// tables returns a proxy whose FromPredecessor answers _test/tables with
// the sizes of its MCP tables, and a function that asks for them and
// returns them, with the Conn that answered.
func tablesProxy() (*proxy.Proxy, func(h *mcpHarness) (map[string]int, *proxy.Conn)) {
	var conn *proxy.Conn
	p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{
		"_test/tables": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
			conn = r.Conn()
			return json.Marshal(proxy.MCPTableSizes(r.Conn()))
		},
	}}
	return p, func(h *mcpHarness) (map[string]int, *proxy.Conn) {
		h.t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"tables","method":"_test/tables"}`)
		var resp struct{ Result map[string]int }
		if line := h.recv(); json.Unmarshal([]byte(line), &resp) != nil || resp.Result == nil {
			h.t.Fatalf("_test/tables: the proxy sent %s", line)
		}
		return resp.Result, conn
	}
}

// idOf returns the id of a line the proxy sent.
func idOf(t *testing.T, line string) string {
	t.Helper()
	var m struct{ ID json.RawMessage }
	if json.Unmarshal([]byte(line), &m) != nil || m.ID == nil {
		t.Fatalf("no id in %s", line)
	}
	return string(m.ID)
}

// openEverything sets up session sid, declaring a server of the editor's
// (ed-<sid>) before the proxy's, and opens a connection to the proxy's
// server, one through the proxy to the editor's, and one through the
// proxy to a server it never saw declared, for which the conductor's
// _meta names the session. It returns the proxy's served connection.
func (h *mcpHarness) openEverything(sid string) served {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":"n-` + sid + `","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-` + sid + `"}]}}`)
	fwd := h.recv()
	ours := uuid.FindString(fwd)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(h.t, fwd) + `,"result":{"sessionId":"` + sid + `"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"n-` + sid + `","result":{"sessionId":"` + sid + `"}}`)

	h.send(`{"jsonrpc":"2.0","id":"c-` + sid + `","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"` + ours + `"}}}`)
	if line := h.recv(); !strings.Contains(line, `"id":"c-`+sid+`","result":{"connectionId":`) {
		h.t.Fatalf("connecting to the proxy's server: %s", line)
	}
	sv := h.conn()
	for i, params := range []string{
		`{"serverId":"ed-` + sid + `"}`,
		`{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"` + sid + `"}}`,
	} {
		up := fmt.Sprintf("up%d-%s", i, sid)
		h.send(`{"jsonrpc":"2.0","id":"` + up + `","method":"proxy/successor","params":{"method":"mcp/connect","params":` + params + `}}`)
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(h.t, fwd) + `,"result":{"connectionId":"` + up + `"}}`)
		h.expect(`{"jsonrpc":"2.0","id":"` + up + `","result":{"connectionId":"` + up + `"}}`)
	}
	return sv
}

// The proxy keeps what a session's MCP traffic needs until the session
// closes, not only until its client disconnects: over many sessions whose
// clients never disconnect, its tables do not grow. Each closed session's
// connections end, to the proxy's server (its Serve sees the connection's
// context done) and through it (the agent's messages on them are refused
// as unknown from then on); a session still open keeps its own.
func TestMCPClosedSessionsLeaveNothing(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	kept := h.openEverything("kept")
	for i := range 20 {
		sid := fmt.Sprintf("s%d", i)
		sv := h.openEverything(sid)
		h.send(`{"jsonrpc":"2.0","id":"x-` + sid + `","method":"session/close","params":{"sessionId":"` + sid + `"}}`)
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
		h.expect(`{"jsonrpc":"2.0","id":"x-` + sid + `","result":{}}`)
		select {
		case <-sv.ctx.Done():
		case <-time.After(timeout):
			t.Fatalf("session %s closed, its MCP connection is still served", sid)
		}
	}
	got, _ := tables(h)
	if want := map[string]int{"declared": 1, "conns": 1, "theirs": 1, "upstream": 2, "sessions": 1}; !maps.Equal(got, want) {
		t.Errorf("after 20 sessions closed and one kept, the proxy's tables hold %v; want the kept session's, %v", got, want)
	}
	if kept.ctx.Err() != nil {
		t.Error("the connection of the session still open ended")
	}
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up0-s3","method":"ping"}}}`)
	h.expectError(`"m"`, -32602)
	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up0-kept","method":"ping"}}}`)
	if line := h.recv(); !strings.Contains(line, `"method":"mcp/message","params":{"connectionId":"up0-kept"`) {
		t.Errorf("a message on the open session's upstream connection: the proxy sent %s; want it passed on", line)
	}
}

// When the connection to the conductor closes, the proxy forgets every
// session's MCP state, closed or not.
func TestMCPConnectionEndLeavesNothing(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	for i := range 3 {
		h.openEverything(fmt.Sprintf("s%d", i))
	}
	_, conn := tables(h)
	h.in.Close()
	if err := h.wait(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for name, n := range proxy.MCPTableSizes(conn) {
		if n != 0 {
			t.Errorf("after Serve returned, the proxy's %s table holds %d entries", name, n)
		}
	}
}

// endedOrNot checks, for each served connection, whether it has ended.
func endedOrNot(t *testing.T, conns map[string]served, ended map[string]bool) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(ended)) {
		if !ended[name] {
			if conns[name].ctx.Err() != nil {
				t.Errorf("%s's MCP connection ended", name)
			}
			continue
		}
		select {
		case <-conns[name].ctx.Done():
		case <-time.After(timeout):
			t.Errorf("%s's MCP connection is still served", name)
		}
	}
}

// Nor does a client that never closes its sessions grow the proxy: past
// its limit the proxy forgets the MCP state of the least recently used
// session as if the session had closed, and warns of it once. A session
// is used when it is set up, when a prompt names it, and when the agent
// connects to or sends on a connection to one of its servers; the
// sessions in use keep theirs.
func TestMCPSessionsBounded(t *testing.T) {
	t.Cleanup(proxy.SetMaxSessions(3))
	var log testio.Buffer
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.NewTextHandler(&log, nil))
	h := serveMCP(t, p, "tools")
	conns := map[string]served{}
	for _, sid := range []string{"s0", "s1", "s2"} {
		conns[sid] = h.openEverything(sid)
	}
	// s0 is prompted, then s1's connection carries a message: s2 is the
	// least recently used, then s0.
	h.send(`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s0","prompt":[]}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"stopReason":"end_turn"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"p","result":{"stopReason":"end_turn"}}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"` + conns["s1"].conn.ID() + `","method":"notifications/initialized"}}}`)
	conns["s1"].expect(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	conns["s3"] = h.openEverything("s3")
	conns["s4"] = h.openEverything("s4")
	endedOrNot(t, conns, map[string]bool{"s0": true, "s1": false, "s2": true, "s3": false, "s4": false})
	got, _ := tables(h)
	if want := map[string]int{"declared": 3, "conns": 3, "theirs": 3, "upstream": 6, "sessions": 3}; !maps.Equal(got, want) {
		t.Errorf("with 5 sessions open and a limit of 3, the proxy's tables hold %v; want %v", got, want)
	}
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up0-s2","method":"ping"}}}`)
	h.expectError(`"m"`, -32602)
	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up0-s1","method":"ping"}}}`)
	if line := h.recv(); !strings.Contains(line, `"method":"mcp/message","params":{"connectionId":"up0-s1"`) {
		t.Errorf("a message on a kept session's upstream connection: the proxy sent %s; want it passed on", line)
	}

	var warned []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "least recently used session") && strings.Contains(line, "level=WARN") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "session=s2 limit=3") {
		t.Errorf("warned %q; want once, of s2\nlog:\n%s", warned, log.String())
	}
}

// Nor does an agent whose MCP client connects to a session's servers and
// never disconnects: each session holds at most MaxSessionConns
// connections to the proxy's servers, counting those to what its earlier
// set-ups declared, and past that the least recently used (opened, or
// sent on by the agent) ends as if its client had disconnected, with a
// warning the first time naming it. Its pending requests are answered, the
// agent's messages on it are refused as on any unknown connection and its
// mcp/disconnect succeeds; the session's other connections, the new one
// and those of other sessions go on.
func TestMCPSessionConnsBounded(t *testing.T) {
	const limit = proxy.MaxSessionConns
	var log testio.Buffer
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.NewTextHandler(&log, nil))
	h := serveMCP(t, p, "tools")
	h.newSession(1, "s1") // ID1
	h.newSession(2, "s2") // ID2
	connect := func(id, server string) served {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + server + `"}}}`)
		if line := h.recv(); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`+id+`","result":{"connectionId":`) {
			t.Fatalf("connect %s: the proxy sent %s", id, line)
		}
		return h.conn()
	}
	ping := func(id string, sv served) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"` + sv.conn.ID() + `","method":"ping"}}}`)
		line := sv.read(t)
		sv.write(t, strings.Replace(line, `"method":"ping"`, `"result":{}`, 1))
		h.expect(`{"jsonrpc":"2.0","id":"` + id + `","result":{}}`)
	}
	s1 := h.s.id("ID1")
	conns := make([]served, limit)
	conns[0] = connect("c0", s1)
	// A request on c0 that its server leaves pending.
	h.send(`{"jsonrpc":"2.0","id":"slow","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"` + conns[0].conn.ID() + `","method":"tools/call","params":{"name":"slow"}}}}`)
	conns[0].expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	for i := 1; i < limit; i++ {
		conns[i] = connect(fmt.Sprint("c", i), s1)
	}
	ping("p1", conns[1]) // c1 is used last: c0 is the least recently used, then c2
	other := connect("other", h.s.id("ID2"))

	// One more for s1: c0 ends, its pending request answered first.
	h.send(`{"jsonrpc":"2.0","id":"over","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + s1 + `"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"slow","error":{"code":-32000,"message":"MCP connection closed"}}`)
	if line := h.recv(); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"over","result":{"connectionId":`) {
		t.Fatalf("a connect past the bound: the proxy sent %s; want it answered", line)
	}
	over := h.conn()
	all := map[string]served{"c0": conns[0], "c1": conns[1], "c2": conns[2], "over": over, "other": other}
	endedOrNot(t, all, map[string]bool{"c0": true, "c1": false, "c2": false, "over": false, "other": false})
	c0 := `"connectionId":"` + conns[0].conn.ID() + `"`
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{` + c0 + `,"method":"ping"}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m","error":{"code":-32602,"message":"mcp/message: unknown MCP connection","data":{` + c0 + `}}}`)
	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{` + c0 + `}}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
	ping("p2", conns[1])
	ping("p3", over)
	ping("p4", other)

	// One more ends c2, the next least recently used.
	conns = append(conns, connect("over2", s1))
	endedOrNot(t, all, map[string]bool{"c1": false, "c2": true, "over": false, "other": false})

	// s1 loaded again: a connection to what the load declares counts among
	// those to what the earlier set-up did, and ends c3.
	h.send(`{"jsonrpc":"2.0","id":"l","method":"session/load","params":{"sessionId":"s1","cwd":"/w","mcpServers":[]}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"l","result":{}}`)
	loaded := connect("loaded", uuid.FindString(fwd))
	all["c3"], all["loaded"] = conns[3], loaded
	endedOrNot(t, all, map[string]bool{"c1": false, "c3": true, "over": false, "loaded": false, "other": false})
	ping("p5", loaded)

	if got, _ := tables(h); got["conns"] != limit+1 {
		t.Errorf("the proxy keeps %d connections to its servers; want %d, s1's %d and s2's", got["conns"], limit+1, limit)
	}
	var warned []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "least recently used MCP connection") && strings.Contains(line, "level=WARN") {
			warned = append(warned, line)
		}
	}
	if want := fmt.Sprintf("connectionId=%s server=tools session=s1 limit=%d", conns[0].conn.ID(), limit); len(warned) != 1 || !strings.Contains(warned[0], want) {
		t.Errorf("warned %q; want once, with %q\nlog:\n%s", warned, want, log.String())
	}
}

// A session set up again (loaded, say, each time the client shows it) gets
// fresh declarations, and the proxy forgets the earlier ones, of its own
// servers and of those before it: the agent connects to what the latest
// set-up declared. The connections opened meanwhile stay open until the
// session closes.
func TestMCPSessionLoadedAgain(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	first, _ := h.connectS1() // session/new: ID1, connected as ID2
	var latest string
	for i := range 3 {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","method":"session/load","params":{"sessionId":"s1","cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-%d"}]}}`, i, i))
		fwd := h.recv()
		latest = uuid.FindString(fwd)
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
		h.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","result":{}}`, i))
		if i == 0 {
			h.send(`{"jsonrpc":"2.0","id":"u","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-0"}}}`)
			fwd := h.recv()
			h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"connectionId":"up-ed0"}}`)
			h.expect(`{"jsonrpc":"2.0","id":"u","result":{"connectionId":"up-ed0"}}`)
		}
	}
	got, _ := tables(h)
	if want := map[string]int{"declared": 1, "conns": 1, "theirs": 1, "upstream": 1, "sessions": 1}; !maps.Equal(got, want) {
		t.Errorf("after a session loaded three times, the proxy's tables hold %v; want %v", got, want)
	}

	h.send(`{"jsonrpc":"2.0","id":"c1","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + h.s.id("ID1") + `"}}}`)
	if line := h.s.line(h.recv()); !strings.HasSuffix(line, `"method":"mcp/connect","params":{"acpId":"ID1"}}`) {
		t.Errorf("a connect to what session/new declared, after the loads: the proxy sent %s; want it passed on", line)
	}
	h.send(`{"jsonrpc":"2.0","id":"c2","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + latest + `"}}}`)
	if line := h.recv(); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"c2","result":{"connectionId":`) {
		t.Fatalf("a connect to what the last load declared: the proxy sent %s", line)
	}
	conns := map[string]served{"first": first, "latest": h.conn()}
	if s := conns["latest"].conn.Session(); s.ID != "s1" {
		t.Errorf("the latest connection's session is %+v", s)
	}
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up-ed0","method":"ping"}}}`)
	if line := h.recv(); !strings.Contains(line, `"method":"mcp/message","params":{"connectionId":"up-ed0"`) {
		t.Errorf("a message on the connection to what the first load declared: the proxy sent %s; want it passed on", line)
	}
	endedOrNot(t, conns, map[string]bool{"first": false, "latest": false})

	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
	endedOrNot(t, conns, map[string]bool{"first": true, "latest": true})
	h.send(`{"jsonrpc":"2.0","id":"m2","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up-ed0","method":"ping"}}}`)
	h.expectError(`"m2"`, -32602)
	if got, _ := tables(h); !maps.Equal(got, map[string]int{"declared": 0, "conns": 0, "theirs": 0, "upstream": 0, "sessions": 0}) {
		t.Errorf("after the session closed, the proxy's tables hold %v", got)
	}
}

// mcp/disconnect is idempotent. The agent's MCP client may disconnect
// after the session's close has ended its connection, or disconnect twice:
// for a connection the proxy ended itself it succeeds, request or
// notification (the RFD's disconnect signals that the connection is
// closing, which it has); for an upstream connection the proxy forgot at
// the close, it goes on to the connection's owner, which answers. A
// message on an ended connection is still refused, and so is a disconnect
// naming a connection the proxy never saw: the caller has the wrong id.
func TestMCPDisconnectEnded(t *testing.T) { synctest.Test(t, testMCPDisconnectEnded) }

func testMCPDisconnectEnded(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	disconnect := func(id, conn string) {
		h.t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"` + conn + `"}}}`)
	}

	sv := h.openEverything("s1")
	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
	<-sv.ctx.Done()

	disconnect("d1", sv.conn.ID())
	h.expect(`{"jsonrpc":"2.0","id":"d1","result":{}}`)
	disconnect("d2", sv.conn.ID())
	h.expect(`{"jsonrpc":"2.0","id":"d2","result":{}}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"` + sv.conn.ID() + `"}}}`)
	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"` + sv.conn.ID() + `","method":"ping"}}}`)
	h.expectError(`"m"`, -32602)

	disconnect("d3", "up0-s1")
	fwd = h.recv()
	if want := `"method":"mcp/disconnect","params":{"connectionId":"up0-s1"}}`; !strings.HasSuffix(fwd, want) {
		t.Fatalf("a disconnect of the closed session's upstream connection: the proxy sent %s; want it passed on", fwd)
	}
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d3","result":{}}`)

	live := h.openEverything("s2")
	disconnect("d4", live.conn.ID())
	h.expect(`{"jsonrpc":"2.0","id":"d4","result":{}}`)
	<-live.ctx.Done()
	disconnect("d5", live.conn.ID())
	h.expect(`{"jsonrpc":"2.0","id":"d5","result":{}}`)

	disconnect("d6", "never-opened")
	h.expect(`{"jsonrpc":"2.0","id":"d6","error":{"code":-32602,"message":"mcp/disconnect: unknown MCP connection","data":{"connectionId":"never-opened"}}}`)
	h.quiet()
}

// A server reaches the proxy's connection through its MCPConn, to ask the
// client and to tell it of progress while it serves a tool call; what it
// sends goes out at once, and the answer comes back to it.
func TestMCPConnConn(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	sv, conn := h.connectS1()
	h.send(`{"jsonrpc":"2.0","id":"m1","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call","params":{"name":"ask"}}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`)

	answer := make(chan string, 1)
	go func() {
		pc := sv.conn.Conn()
		sid := sv.conn.Session().ID
		if err := pc.Notify(sv.ctx, proxy.Predecessor, "session/update", map[string]string{"sessionId": sid}); err != nil {
			answer <- err.Error()
			return
		}
		result, err := pc.Call(sv.ctx, proxy.Predecessor, "session/request_permission", map[string]string{"sessionId": sid})
		if err != nil {
			answer <- err.Error()
			return
		}
		answer <- string(result)
	}()
	h.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`)
	var req struct{ ID json.RawMessage }
	line := h.recv()
	json.Unmarshal([]byte(line), &req)
	if want := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"method":"session/request_permission","params":{"sessionId":"s1"}}`; line != want {
		t.Fatalf("proxy sent\n\t%s\nwant\n\t%s", line, want)
	}
	h.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"outcome":{"outcome":"cancelled"}}}`)
	select {
	case got := <-answer:
		if got != `{"outcome":{"outcome":"cancelled"}}` {
			t.Fatalf("the server's call returned %s", got)
		}
	case <-time.After(timeout):
		t.Fatal("the server's call was not answered")
	}
	sv.write(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m1","result":{"content":[]}}`)
}

// An MCP server's response names the request it answers by the id the
// server read, however the server spells it (1.0 or 1e0 for 1, as one
// that re-encodes numbers writes it), as a peer's response names a call
// (TestResponseIDSpelledOtherwise): it answers the agent's mcp/message,
// rather than being dropped and leaving the mcp/message unanswered. A
// different id, "1" for 1, answers nothing.
func TestMCPServerAnswerSpelledOtherwise(t *testing.T) {
	for _, id := range []string{`1.0`, `1e0`, `0.1e1`, `1.00`} {
		t.Run(id, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testMCPServerAnswerSpelledOtherwise(t, id) })
		})
	}
}

func testMCPServerAnswerSpelledOtherwise(t *testing.T, id string) {
	h := serveMCP(t, &proxy.Proxy{Logger: slog.New(slog.DiscardHandler)}, "tools")
	sv, conn := h.connectS1()
	h.send(`{"jsonrpc":"2.0","id":"m1","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/list"}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	sv.write(t, `{"jsonrpc":"2.0","id":"1","result":{"wrong":true}}`)
	sv.write(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"tools":[]}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m1","result":{"tools":[]}}`)
	h.quiet()
}

// An MCP server's answer whose error is malformed answers the agent's
// mcp/message with the proxy's -32603, naming the server, the error as it
// came in data, as an answer from a peer would; and the agent's malformed
// answer to the server's request reaches the server as the same error,
// naming the successor.
func TestMCPServerMalformedError(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{Name: "tester", Logger: slog.New(slog.DiscardHandler)}, "tools")
	sv, conn := h.connectS1()
	h.send(`{"jsonrpc":"2.0","id":"m1","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call","params":{"name":"x"}}}}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	sv.write(t, `{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"m1","error":{"code":-32603,"message":"proxy tester: its MCP server \"tools\" answered with a malformed error, not an object with an integer code and a string message","data":{"message":"no code"}}}`)

	sv.write(t, `{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
	id := idOf(t, h.recv())
	h.send(`{"jsonrpc":"2.0","id":` + id + `,"error":null}`)
	sv.expect(t, `{"jsonrpc":"2.0","id":"q","error":{"code":-32603,"message":"proxy tester: its successor answered with a malformed error, not an object with an integer code and a string message","data":null}}`)
}

// An MCP server's answer with both a result and an error answers the
// agent's mcp/message with the error, as a peer's would, and is warned of
// once, naming the server.
func TestMCPServerBothMembers(t *testing.T) {
	var log testio.Buffer
	h := serveMCP(t, &proxy.Proxy{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}, "tools")
	sv, conn := h.connectS1()
	for _, id := range []string{"m1", "m2"} {
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/message","params":{` + conn + `,"method":"tools/call","params":{"name":"x"}}}}`)
		n := idOf(t, sv.read(t))
		sv.write(t, `{"jsonrpc":"2.0","id":`+n+`,"result":{"content":[]},"error":{"code":1,"message":"no"}}`)
		h.expect(`{"jsonrpc":"2.0","id":"` + id + `","error":{"code":1,"message":"no"}}`)
	}
	h.in.Close()
	h.wait()
	if got := strings.Count(log.String(), `level=WARN msg="response with both result and error`); got != 1 {
		t.Errorf("%d warnings of both members, want 1\nlog:\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), `from="its MCP server \"tools\""`) {
		t.Errorf("the warning names no server\nlog:\n%s", log.String())
	}
}

// The mcp/* messages the proxy passes on as themselves, an mcp/connect to
// a server not its own and the messages on the connection it opens, carry
// their top-level members JSON-RPC does not define, as any message does
// (TestUnknownMembersGoOn), and so does the answer to the connect.
func TestMCPUpstreamUnknownMembers(t *testing.T) {
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"elsewhere"},"x-trace":1}}`)
	h.expect(`{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{"serverId":"elsewhere"},"x-trace":1}`)
	h.send(`{"jsonrpc":"2.0","id":1,"result":{"connectionId":"up"},"x-r":2}`)
	h.expect(`{"jsonrpc":"2.0","id":"c","result":{"connectionId":"up"},"x-r":2}`)
	h.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"up","method":"notifications/initialized"},"x-trace":3}}`)
	h.expect(`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"up","method":"notifications/initialized"},"x-trace":3}`)
}

// An upstream connection that no session's close ends (to a server the
// proxy saw declared in no open session, with no session named on
// mcp/connect) ends only with its mcp/disconnect: a peer that connects and
// never disconnects would grow the proxy for as long as its connection to
// the conductor lasts. The proxy keeps 1024 of them; a connect past that
// is refused, saying why, with a warning the first time naming the bound
// (later ones at debug level), and goes no further, until one is
// disconnected. A connect tied to a session still goes on.
func TestMCPUntiedUpstreamBounded(t *testing.T) {
	var log testio.Buffer
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := serveMCP(t, p, "tools")
	connect := func(n int, params string) {
		t.Helper()
		id := fmt.Sprintf("c%d", n)
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":` + params + `}}`)
		fwd := h.recv()
		if !strings.Contains(fwd, `"method":"mcp/connect","params":`+params) {
			t.Fatalf("connect %d: the proxy sent %s; want the mcp/connect passed on", n, fwd)
		}
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"connectionId":"up-` + id + `"}}`)
		h.expect(`{"jsonrpc":"2.0","id":"` + id + `","result":{"connectionId":"up-` + id + `"}}`)
	}
	// s1 is kept, so its close or its being forgotten ends a connection
	// named for it: such a one is not counted under the bound.
	h.newSession(1, "s1")
	const limit = 1024
	for n := range limit {
		connect(n, `{"serverId":"elsewhere"}`)
	}
	refused := func(id, params string) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":` + params + `}}`)
		line := h.recv()
		if !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`+id+`","error":{"code":-32603,`) ||
			!strings.Contains(line, `1024 connections through the proxy to MCP servers that only mcp/disconnect ends`) || !strings.Contains(line, "disconnect one first") {
			t.Fatalf("connect %s past the bound: the proxy sent %s; want it refused, saying why", id, line)
		}
	}
	refused("over", `{"serverId":"elsewhere"}`)
	// Named for a session the proxy does not keep: untied too.
	refused("over-unkept", `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"gone"}}`)
	connect(limit+1, `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"s1"}}`)

	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"up-c0"}}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
	connect(limit+2, `{"serverId":"elsewhere"}`)
	if got, _ := tables(h); got["upstream"] != limit+1 {
		t.Errorf("the proxy keeps %d upstream connections; want %d", got["upstream"], limit+1)
	}

	// One line a refusal: a warning for the first, naming the bound, and
	// the second at debug level.
	var warned, debug []string
	for line := range strings.Lines(log.String()) {
		switch {
		case !strings.Contains(line, "refused an mcp/connect"):
		case strings.Contains(line, "level=WARN"):
			warned = append(warned, line)
		case strings.Contains(line, "level=DEBUG"):
			debug = append(debug, line)
		}
	}
	if want := fmt.Sprintf("method=mcp/connect server=elsewhere limit=%d", limit); len(warned) != 1 ||
		!strings.Contains(warned[0], "only mcp/disconnect ends") || !strings.Contains(warned[0], want) {
		t.Errorf("warned %q; want once, of the bound, with %q\nlog:\n%s", warned, want, log.String())
	}
	if want := fmt.Sprintf("server=elsewhere session=gone limit=%d", limit); len(debug) != 1 || !strings.Contains(debug[0], want) {
		t.Errorf("logged %q at debug level; want once, with %q\nlog:\n%s", debug, want, log.String())
	}
}

// Nor do the upstream connections a kept session's end ends (to a server
// it declared, or named for it on mcp/connect) grow with a session that
// stays open: each session holds at most MaxSessionConns of them, open or
// pending, and past that a connect that would be tied to it is refused,
// saying why, with a warning the first time, and goes no further; the
// proxy cannot end them, as they are its predecessor's. A load of the
// session, pending or done, adds no room; other sessions' connects, and
// untied ones, go on; a disconnect, or the session's end, makes room.
func TestMCPTiedUpstreamBounded(t *testing.T) {
	const limit = proxy.MaxSessionConns
	var log testio.Buffer
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.NewTextHandler(&log, nil))
	h := serveMCP(t, p, "tools")
	h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s1"}}`)
	h.newSession(2, "s2")
	const named = `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"s1"}}`
	refused := func(id, params string) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":` + params + `}}`)
		line := h.recv()
		if !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`+id+`","error":{"code":-32603,`) ||
			!strings.Contains(line, fmt.Sprintf(`%d connections through the proxy to MCP servers that session \"s1\"'s end ends are open`, limit)) ||
			!strings.Contains(line, "disconnect one first") {
			t.Fatalf("connect %s past the bound: the proxy sent %s; want it refused, saying why", id, line)
		}
	}
	disconnect := func(cid string) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"` + cid + `"}}}`)
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
		h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
	}

	// Tied by the server s1 declared, and by s1's id; the last one pending.
	for n := range limit - 1 {
		params := named
		if n%2 == 0 {
			params = `{"serverId":"ed-1"}`
		}
		h.upConnect(fmt.Sprint("t", n), params)
	}
	h.send(`{"jsonrpc":"2.0","id":"pending","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-1"}}}`)
	pending := h.recv()
	refused("over0", named)
	refused("over1", `{"serverId":"ed-1"}`)
	h.upConnect("other", `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"s2"}}`)
	h.upConnect("untied", `{"serverId":"elsewhere"}`)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, pending) + `,"result":{"connectionId":"pending"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"pending","result":{"connectionId":"pending"}}`)
	refused("over2", named)

	// s1 loaded again, declaring ed-2: while the load is pending and once
	// it is done, a connect to what it declares counts among s1's.
	h.send(`{"jsonrpc":"2.0","id":"l","method":"session/load","params":{"sessionId":"s1","cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-2"}]}}`)
	load := h.recv()
	refused("over3", `{"serverId":"ed-2"}`)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, load) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"l","result":{}}`)
	refused("over4", `{"serverId":"ed-2"}`)
	refused("over5", named)
	h.onUpstream("m0", "t0", true)

	disconnect("t0")
	h.upConnect("again", `{"serverId":"ed-2"}`)
	refused("over6", named)
	if got, _ := tables(h); got["upstream"] != limit+2 {
		t.Errorf("the proxy keeps %d upstream connections; want %d, s1's %d, s2's and the untied one", got["upstream"], limit+2, limit)
	}

	// s1 closes, ending its connections: set up again, it has room.
	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
	fwd = h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
	h.onUpstream("m1", "t1", false)
	h.newSession(3, "s1")
	h.upConnect("after", named)
	h.onUpstream("m2", "other", true)
	if got, _ := tables(h); got["upstream"] != 3 {
		t.Errorf("the proxy keeps %d upstream connections; want 3 (other, untied, after)", got["upstream"])
	}

	var warned []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "refused an mcp/connect") && strings.Contains(line, "level=WARN") {
			warned = append(warned, line)
		}
	}
	if want := fmt.Sprintf("session=s1 limit=%d", limit); len(warned) != 1 || !strings.Contains(warned[0], want) {
		t.Errorf("warned %q; want once, with %q\nlog:\n%s", warned, want, log.String())
	}
}

// A connection through the proxy to a server of a session that closes
// while the connection opens is forgotten once opened, as the close
// forgets those open: messages on it are refused as on any unknown
// connection, and it is not kept as one that only mcp/disconnect ends.
func TestMCPUpstreamOpenedAsSessionCloses(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"sessionId":"s1"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s1"}}`)

	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-1"}}}`)
	connect := h.recv()
	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
	fwd = h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, connect) + `,"result":{"connectionId":"late"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"c","result":{"connectionId":"late"}}`)

	h.send(`{"jsonrpc":"2.0","id":"m","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"late","method":"ping"}}}`)
	h.expectError(`"m"`, -32602)
	if got, _ := tables(h); got["upstream"] != 0 {
		t.Errorf("the proxy keeps %d upstream connections; want none", got["upstream"])
	}
}

// A connection whose tie passes to a session that holds MaxSessionConns
// already (its session closed, and the session left that declared its
// server is full) cannot be refused any more: it is kept, and counted as
// untied, here past the bound. While the count is at or past it with
// such among it, an untied connect is refused, and so is one that would
// be tied to a session with room, lest sessions that fill their room and
// close pass on connections without end. A session set up that declares
// their server takes them in, as far as it has room, and connects go on.
func TestMCPUpstreamPassedToFullSession(t *testing.T) {
	const limit = proxy.MaxSessionConns
	t.Cleanup(proxy.SetMaxUntied(1))
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.DiscardHandler)
	h := serveMCP(t, p, "tools")
	setUp := func(sid string) { // declaring ed-1, a server before the proxy
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"n-` + sid + `","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"sessionId":"` + sid + `"}}`)
		h.expect(`{"jsonrpc":"2.0","id":"n-` + sid + `","result":{"sessionId":"` + sid + `"}}`)
	}
	closeSession := func(sid string) {
		t.Helper()
		h.send(`{"jsonrpc":"2.0","id":"x-` + sid + `","method":"session/close","params":{"sessionId":"` + sid + `"}}`)
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
		h.expect(`{"jsonrpc":"2.0","id":"x-` + sid + `","result":{}}`)
	}
	upstream := func(want int) {
		t.Helper()
		if got, _ := tables(h); got["upstream"] != want {
			t.Fatalf("the proxy keeps %d upstream connections; want %d", got["upstream"], want)
		}
	}
	const named = `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"g"}}` // tied to g

	setUp("a")
	for n := range limit {
		h.upConnect(fmt.Sprint("a", n), `{"serverId":"ed-1"}`) // a is full
	}
	setUp("f")
	for n := range limit {
		h.upConnect(fmt.Sprint("f", n), `{"serverId":"ed-1"}`) // tied to f, the latest to declare ed-1
	}
	closeSession("f") // f's pass to a, which is full: untied, past the bound
	h.onUpstream("m0", "f0", true)
	upstream(2 * limit)
	h.untiedRefused("over0")
	h.newSession(1, "g")
	h.send(`{"jsonrpc":"2.0","id":"tied","method":"proxy/successor","params":{"method":"mcp/connect","params":` + named + `}}`)
	if line := h.recv(); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"tied","error":{"code":-32603,`) ||
		!strings.Contains(line, "1 connections through the proxy to MCP servers that only mcp/disconnect ends") || !strings.Contains(line, "or tied past their sessions' bound") {
		t.Fatalf("a connect tied to g, with connections passed past the bound: the proxy sent %s; want it refused for the bound", line)
	}

	setUp("e") // takes in f's: none is untied any more
	h.upConnect("g0", named)
	h.upConnect("u0", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over1")
	upstream(2*limit + 2)

	closeSession("a")
	closeSession("e") // no session declares ed-1 any more: a's and f's end
	h.onUpstream("m1", "f1", false)
	upstream(2)
}

// upConnect connects through the proxy to a server it did not declare,
// with params, and checks that the connect goes on and the answer, naming
// connection id, comes back.
func (h *mcpHarness) upConnect(id, params string) {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":` + params + `}}`)
	fwd := h.recv()
	if !strings.Contains(fwd, `"method":"mcp/connect","params":`+params) {
		h.t.Fatalf("connect %s: the proxy sent %s; want the mcp/connect passed on", id, fwd)
	}
	h.send(`{"jsonrpc":"2.0","id":` + idOf(h.t, fwd) + `,"result":{"connectionId":"` + id + `"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"` + id + `","result":{"connectionId":"` + id + `"}}`)
}

// untiedRefused checks that a connect that would be untied is refused
// for the bound.
func (h *mcpHarness) untiedRefused(id string) {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"elsewhere"}}}`)
	if line := h.recv(); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"`+id+`","error":{"code":-32603,`) || !strings.Contains(line, "only mcp/disconnect ends") {
		h.t.Fatalf("connect %s: the proxy sent %s; want it refused for the bound", id, line)
	}
}

// onUpstream checks whether an mcp/message on the upstream connection cid
// goes on (kept) or is refused as on an unknown connection.
func (h *mcpHarness) onUpstream(id, cid string, kept bool) {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"proxy/successor","params":{"method":"mcp/message","params":{"connectionId":"` + cid + `","method":"ping"}}}`)
	if !kept {
		h.expectError(`"`+id+`"`, -32602)
	} else if line := h.recv(); !strings.Contains(line, `"method":"mcp/message","params":{"connectionId":"`+cid+`"`) {
		h.t.Fatalf("a message on %s: the proxy sent %s; want it passed on", cid, line)
	}
}

// A session forgotten for maxSessions ends the upstream connections tied
// to it, by its server or by its id, as its close would; they were not
// counted against the bound on untied ones, so forgetting them frees no
// room there, and disconnecting an untied one frees exactly one.
func TestMCPSessionForgottenWithUpstream(t *testing.T) {
	t.Cleanup(proxy.SetMaxSessions(1))
	t.Cleanup(proxy.SetMaxUntied(2))
	h := serveMCP(t, &proxy.Proxy{Logger: slog.New(slog.DiscardHandler)}, "tools")
	h.openEverything("s0") // up0-s0 tied by its server, up1-s0 by s0's id
	h.upConnect("u0", `{"serverId":"elsewhere"}`)
	h.upConnect("u1", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over0")

	h.openEverything("s1") // past the limit: s0 is forgotten
	h.onUpstream("m0", "up0-s0", false)
	h.onUpstream("m1", "up1-s0", false)
	h.onUpstream("m2", "up0-s1", true)
	h.untiedRefused("over1")

	h.send(`{"jsonrpc":"2.0","id":"d","method":"proxy/successor","params":{"method":"mcp/disconnect","params":{"connectionId":"u0"}}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"d","result":{}}`)
	h.upConnect("u2", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over2")
}

// An mcp/connect handler that panics withdraws the connect, as one that
// fails does: it holds no place under the bound on untied connections.
func TestMCPUpstreamConnectPanics(t *testing.T) {
	t.Cleanup(proxy.SetMaxUntied(1))
	var calls atomic.Int32
	h := serveMCP(t, &proxy.Proxy{
		Logger: slog.New(slog.DiscardHandler),
		FromSuccessor: map[string]proxy.Handler{
			"mcp/connect": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				if calls.Add(1) == 1 {
					panic("a bug in the handler")
				}
				return r.Forward(ctx)
			},
		},
	}, "tools")
	h.send(`{"jsonrpc":"2.0","id":"c0","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"elsewhere"}}}`)
	h.expectError(`"c0"`, -32603)
	h.upConnect("u0", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over")
}

// A connection through the proxy that opens while the session whose
// set-up declared its server is loaded again, declaring others, is kept
// tied to the session, as one open by then is (TestMCPSessionLoadedAgain):
// not forgotten as if the session had closed, nor counted as untied. It
// ends when the session closes.
func TestMCPUpstreamOpenedAsSessionLoadedAgain(t *testing.T) {
	t.Cleanup(proxy.SetMaxUntied(1))
	h := serveMCP(t, &proxy.Proxy{}, "tools")
	load := func(i int) {
		t.Helper()
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","method":"session/load","params":{"sessionId":"s1","cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-%d"}]}}`, i, i))
		fwd := h.recv()
		h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
		h.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","result":{}}`, i))
	}
	load(0)
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-0"}}}`)
	connect := h.recv()
	load(1)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, connect) + `,"result":{"connectionId":"up-ed0"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"c","result":{"connectionId":"up-ed0"}}`)

	h.onUpstream("m", "up-ed0", true)
	h.upConnect("u0", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over")

	h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
	fwd := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
	h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
	h.onUpstream("m2", "up-ed0", false)
}

// A connection through the proxy that opens while what ties it ends (the
// session that declared its server, or the session the conductor named)
// is forgotten once open, as the end forgets those open, whether the
// session closes or is forgotten for maxSessions: kept, it would be tied
// to a session that can no longer end it, and so uncounted and unbounded.
func TestMCPUpstreamOpenedAsSessionEnds(t *testing.T) {
	for _, how := range []string{"closed", "forgotten"} {
		t.Run(how, func(t *testing.T) {
			t.Cleanup(proxy.SetMaxSessions(1))
			p, tables := tablesProxy()
			p.Logger = slog.New(slog.DiscardHandler)
			h := serveMCP(t, p, "tools")
			h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
			fwd := h.recv()
			h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"sessionId":"s1"}}`)
			h.expect(`{"jsonrpc":"2.0","id":"n","result":{"sessionId":"s1"}}`)

			h.send(`{"jsonrpc":"2.0","id":"c0","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-1"}}}`)
			byServer := h.recv()
			h.send(`{"jsonrpc":"2.0","id":"c1","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"s1"}}}}`)
			bySession := h.recv()
			if how == "closed" {
				h.send(`{"jsonrpc":"2.0","id":"x","method":"session/close","params":{"sessionId":"s1"}}`)
				fwd = h.recv()
				h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{}}`)
				h.expect(`{"jsonrpc":"2.0","id":"x","result":{}}`)
			} else {
				h.newSession(2, "s2") // past the limit: s1 is forgotten
			}
			h.send(`{"jsonrpc":"2.0","id":` + idOf(t, byServer) + `,"result":{"connectionId":"up-0"}}`)
			h.expect(`{"jsonrpc":"2.0","id":"c0","result":{"connectionId":"up-0"}}`)
			h.send(`{"jsonrpc":"2.0","id":` + idOf(t, bySession) + `,"result":{"connectionId":"up-1"}}`)
			h.expect(`{"jsonrpc":"2.0","id":"c1","result":{"connectionId":"up-1"}}`)

			h.onUpstream("m0", "up-0", false)
			h.onUpstream("m1", "up-1", false)
			if got, _ := tables(h); got["upstream"] != 0 {
				t.Errorf("the proxy keeps %d upstream connections; want none", got["upstream"])
			}
		})
	}
}

// A set-up whose handler panics, before or after the agent answers it,
// forgets what it declared as one whose handler fails does: the agent's
// connect to the proxy's server it declared goes on, as to a server the
// proxy does not know, and the tables keep nothing of it.
func TestMCPSetUpPanics(t *testing.T) {
	for _, how := range []string{"fails", "panics", "panics after the agent answers"} {
		t.Run(how, func(t *testing.T) {
			p, tables := tablesProxy()
			p.Logger = slog.New(slog.DiscardHandler)
			var declared string // the proxy's server's id, as the handler sees it declared
			p.FromPredecessor["session/new"] = func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				var req struct {
					MCPServers []struct{ Name, ServerID string }
				}
				json.Unmarshal(r.Params, &req)
				for _, s := range req.MCPServers {
					if s.Name == "tools" {
						declared = s.ServerID
					}
				}
				switch how {
				case "fails":
					return nil, errors.New("no")
				case "panics":
					panic("a bug in the handler")
				}
				r.Forward(ctx)
				panic("a bug in the handler")
			}
			h := serveMCP(t, p, "tools")
			h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
			if how == "panics after the agent answers" {
				fwd := h.recv()
				h.send(`{"jsonrpc":"2.0","id":` + idOf(t, fwd) + `,"result":{"sessionId":"s1"}}`)
			}
			h.expectError(`"n"`, -32603)
			if got, _ := tables(h); got["declared"]+got["theirs"]+got["sessions"] != 0 {
				t.Errorf("after the set-up %s, the proxy's tables hold %v", how, got)
			}
			h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"acpId":"` + declared + `"}}}`)
			if line, want := h.recv(), `"method":"mcp/connect","params":{"acpId":"`+declared+`"}}`; declared == "" || !strings.HasSuffix(line, want) {
				t.Errorf("a connect to %q, which the set-up declared: the proxy sent %s; want it passed on", declared, line)
			}
		})
	}
}

// A connection through the proxy to a server whose only set-up fails
// while the connection opens is forgotten once open: nothing would end it
// but its mcp/disconnect, and it was not counted as untied.
func TestMCPUpstreamOpenedAsSetUpFails(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
	setUp := h.recv()
	h.send(`{"jsonrpc":"2.0","id":"c","method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"ed-1"}}}`)
	connect := h.recv()
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, setUp) + `,"error":{"code":-32000,"message":"no"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"n","error":{"code":-32000,"message":"no"}}`)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, connect) + `,"result":{"connectionId":"up-0"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"c","result":{"connectionId":"up-0"}}`)
	h.onUpstream("m", "up-0", false)
	if got, _ := tables(h); got["upstream"] != 0 {
		t.Errorf("the proxy keeps %d upstream connections; want none", got["upstream"])
	}
}

// A connection through the proxy for a session the proxy does not keep,
// one never seen set up or one forgotten for maxSessions, is counted as
// untied, since a client that never closes that session never ends it:
// past the bound such a connect is refused. Once the session is set up
// and kept, its connections are tied to it, free their place, and end
// when it is forgotten.
func TestMCPUpstreamForSessionNotKept(t *testing.T) {
	t.Cleanup(proxy.SetMaxSessions(1))
	t.Cleanup(proxy.SetMaxUntied(2))
	p, tables := tablesProxy()
	p.Logger = slog.New(slog.DiscardHandler)
	h := serveMCP(t, p, "tools")
	h.openEverything("s0")
	h.newSession(1, "s1") // past the limit: s0 is forgotten
	h.upConnect("u0", `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"s0"}}`)
	h.upConnect("u1", `{"serverId":"elsewhere","_meta":{"acp-conductor/sessionId":"never"}}`)
	h.untiedRefused("over0")

	h.newSession(2, "never") // kept now, and s1 forgotten: u1 is tied to it
	h.upConnect("u2", `{"serverId":"elsewhere"}`)
	h.untiedRefused("over1")
	h.onUpstream("m0", "u1", true)

	h.newSession(3, "s3") // "never" is forgotten, and u1 with it
	h.onUpstream("m1", "u1", false)
	h.onUpstream("m2", "u0", true)
	if got, _ := tables(h); got["upstream"] != 2 {
		t.Errorf("the proxy keeps %d upstream connections; want 2 (u0, u2)", got["upstream"])
	}
}

// A connection through the proxy to a server declared only by a set-up
// that fails after the connection opened is forgotten with the set-up's
// declarations: nothing else would end it, and it was not counted as
// untied.
func TestMCPUpstreamOpenAsSetUpFails(t *testing.T) {
	p, tables := tablesProxy()
	h := serveMCP(t, p, "tools")
	h.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/w","mcpServers":[{"type":"acp","name":"ed","serverId":"ed-1"}]}}`)
	setUp := h.recv()
	h.upConnect("up-0", `{"serverId":"ed-1"}`)
	h.send(`{"jsonrpc":"2.0","id":` + idOf(t, setUp) + `,"error":{"code":-32000,"message":"no"}}`)
	h.expect(`{"jsonrpc":"2.0","id":"n","error":{"code":-32000,"message":"no"}}`)
	h.onUpstream("m", "up-0", false)
	if got, _ := tables(h); got["upstream"] != 0 {
		t.Errorf("the proxy keeps %d upstream connections; want none", got["upstream"])
	}
}
