package conductor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// mcpUser is the agent's MCP client of srv-1, the editor's server: the
// agent itself over MCP-over-ACP (native), or an MCP client of the stdio
// server the conductor declared in its place (bridged).
type mcpUser struct {
	s   *scripted
	cid string // native: the connectionId, as JSON
}

// send sends an MCP request (id != "") or notification.
func (c *mcpUser) send(id, method, params string) {
	msg := `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`
	if c.cid != "" {
		msg = `{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":` + c.cid + `,"method":"` + method + `","params":` + params + `}}`
	}
	if id != "" {
		msg = `{"jsonrpc":"2.0","id":` + id + msg[len(`{"jsonrpc":"2.0"`):]
	}
	c.s.send(msg)
}

// recv returns the next message to the client, MCP-over-ACP unwrapped.
func (c *mcpUser) recv(t *testing.T) (id json.RawMessage, method string, params json.RawMessage) {
	return carried(t, c.s.recvMsg())
}

// carried returns the id of m and the method and params it carries:
// those of the MCP message inside an mcp/message, or its own.
func carried(t *testing.T, m *wire.Message) (json.RawMessage, string, json.RawMessage) {
	t.Helper()
	if m.Method != methodMCPMessage {
		return m.ID, m.Method, m.Params
	}
	method, params, err := wire.Unwrap(m.Params)
	if err != nil {
		t.Fatalf("mcp/message %s: %v", m.Params, err)
	}
	return m.ID, method, params
}

// openMCP opens the agent's connection to srv-1, whose owner, the editor,
// binds per connection ("connect": it answers mcp/connect) or per request
// ("request": it refuses mcp/connect, as the TypeScript SDK's provider
// does).
func openMCP(t *testing.T, bridged bool, binding string) (ed *scripted, c *mcpUser) {
	t.Helper()
	caps, bridge := `{"acp":true}`, BridgeMode("")
	if bridged {
		caps, bridge = `{}`, BridgeStdio
	}
	ed, ag, declared := mcpChain(t, caps, bridge)
	c = &mcpUser{s: ag}
	if bridged {
		c.s = startShim(t, declared)
		c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"client","version":"1"}}`)
	} else {
		ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
	}
	connect := ed.recvMsg()
	if connect.Method != methodMCPConnect {
		t.Fatalf("the owner got %s, want mcp/connect", connect.Method)
	}
	if binding == "connect" {
		ed.reply(connect, `{"connectionId":"c1"}`)
	} else {
		ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
	}
	if !bridged {
		c.cid = string(wire.Member(ag.recvMsg().Result, "connectionId"))
		return ed, c
	}
	init := ed.recvMsg() // initialize, or server/discover for a per-request owner
	if binding == "connect" {
		ed.reply(init, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
	} else {
		ed.reply(init, `{"result":{"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`)
	}
	if _, _, result := c.recvResult(t); result == nil {
		t.Fatal("the MCP client's initialize failed")
	}
	c.send("", "notifications/initialized", `{}`)
	return ed, c
}

// recvResult returns the next response to the client.
func (c *mcpUser) recvResult(t *testing.T) (id, errObj, result json.RawMessage) {
	t.Helper()
	m := c.s.recvMsg()
	if !m.IsResponse() {
		t.Fatalf("the MCP client got %s, want a response", m.Bytes())
	}
	return m.ID, m.Error, m.Result
}

// recvRequest returns the next request the editor gets, skipping the
// notifications/initialized a connect-binding owner is passed.
func recvRequest(t *testing.T, ed *scripted) *wire.Message {
	t.Helper()
	for {
		m := ed.recvMsg()
		if _, method, _ := carried(t, m); method != "notifications/initialized" {
			return m
		}
	}
}

// TestMCPCancelToOwner: the agent's MCP client cancels a tool call with
// MCP's notifications/cancelled, naming it by its own id. The owner saw
// the call under the conductor's id, and must hear of the cancel under
// that one: in MCP's notification on a connection, or, for an owner that
// binds per request, as ACP's $/cancel_request for the mcp/message that
// carried it.
func TestMCPCancelToOwner(t *testing.T) {
	for _, tc := range []struct {
		bridged bool
		binding string
	}{{false, "connect"}, {false, "request"}, {true, "connect"}, {true, "request"}} {
		t.Run(fmt.Sprintf("bridged=%v/%s", tc.bridged, tc.binding), func(t *testing.T) {
			ed, c := openMCP(t, tc.bridged, tc.binding)
			// Two calls, so that a cancel under the wrong id cancels the other.
			c.send("7", "tools/call", `{"name":"first"}`)
			first := recvRequest(t, ed)
			c.send("8", "tools/call", `{"name":"second"}`)
			second := recvRequest(t, ed)
			c.send("", "notifications/cancelled", `{"requestId":8,"reason":"user"}`)

			m := ed.recvMsg()
			id, method, params := carried(t, m)
			want := "notifications/cancelled"
			if tc.binding == "request" {
				want = wire.MethodCancelRequest
			}
			if id != nil || method != want || string(wire.Member(params, "requestId")) != string(second.ID) {
				t.Fatalf("the owner, which saw the calls as %s and %s, got %s; want %s for %s", first.ID, second.ID, m.Bytes(), want, second.ID)
			}
			if method == "notifications/cancelled" && string(wire.Member(params, "reason")) != `"user"` {
				t.Errorf("the cancel lost its reason: %s", params)
			}

			// A cancel for a call already answered goes nowhere: the next
			// thing the owner gets is the client's next call.
			ed.reply(first, `{"content":[]}`)
			c.recvResult(t)
			c.send("", "notifications/cancelled", `{"requestId":7}`)
			c.send("9", "tools/list", `{}`)
			if _, method, _ := carried(t, recvRequest(t, ed)); method != "tools/list" {
				t.Errorf("after a cancel for an answered call, the owner got %s, want the tools/list", method)
			}
		})
	}
}

// TestMCPCancelToClient: the owner, which binds per connection, cancels a
// request it made of the agent's MCP client, with ACP's $/cancel_request
// or MCP's notification on the connection. The client must hear of it
// under the id it saw, and in its own terms: a bridged client speaks MCP
// only.
func TestMCPCancelToClient(t *testing.T) {
	for _, tc := range []struct {
		bridged bool
		cancel  string // how the owner cancels: acp or mcp
		want    string // the method the client gets
	}{
		{false, "acp", wire.MethodCancelRequest},
		{false, "mcp", "notifications/cancelled"},
		{true, "acp", "notifications/cancelled"},
		{true, "mcp", "notifications/cancelled"},
	} {
		t.Run(fmt.Sprintf("bridged=%v/%s", tc.bridged, tc.cancel), func(t *testing.T) {
			ed, c := openMCP(t, tc.bridged, "connect")
			ed.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"connectionId":"c1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}}`)
			ed.send(`{"jsonrpc":"2.0","id":51,"method":"mcp/message","params":{"connectionId":"c1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":2}}}`)
			first, _, _ := c.recv(t)
			asked, _, _ := c.recv(t)
			if tc.cancel == "acp" {
				ed.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":51}}`)
			} else {
				ed.send(`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"c1","method":"notifications/cancelled","params":{"requestId":51}}}`)
			}
			id, method, params := c.recv(t)
			if id != nil || method != tc.want || string(wire.Member(params, "requestId")) != string(asked) {
				t.Errorf("the client, asked as %s and %s, got %s %s; want %s for %s", first, asked, method, params, tc.want, asked)
			}
		})
	}
}

// TestMCPBridgedRefused: the owner refuses a bridged client's connection.
// The client's initialize is answered with an error that says who refused
// it and why, rather than the server just going away.
func TestMCPBridgedRefused(t *testing.T) {
	ed, _, declared := mcpChain(t, `{}`, BridgeStdio)
	c := &mcpUser{s: startShim(t, declared)}
	c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
	connect := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32603,"message":"no sessions here yet"}}`)
	id, errObj, _ := c.recvResult(t)
	if string(id) != "0" || errObj == nil || !strings.Contains(errorMessage(errObj), "no sessions here yet") ||
		!strings.Contains(errorMessage(errObj), `refused the connection to MCP server "tools"`) {
		t.Errorf("the client's initialize got id %s, error %s; want its refusal", id, errObj)
	}
}

// TestMCPBridgedRefusedEveryRequest: a client that asks again after the
// refusal, as the official MCP Go SDK's does (server/discover, then
// initialize for an older server), hears the refusal again rather than a
// broken pipe, which would be all it reports.
func TestMCPBridgedRefusedEveryRequest(t *testing.T) {
	ed, _, declared := mcpChain(t, `{}`, BridgeStdio)
	c := &mcpUser{s: startShim(t, declared)}
	c.send("0", "server/discover", `{}`)
	connect := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32603,"message":"no sessions here yet"}}`)
	for _, req := range []struct{ id, method string }{{"0", "server/discover"}, {"1", "initialize"}} {
		if req.id != "0" {
			c.send(req.id, req.method, `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
		}
		id, errObj, _ := c.recvResult(t)
		if string(id) != req.id || errObj == nil || !strings.Contains(errorMessage(errObj), "no sessions here yet") {
			t.Errorf("the client's %s got id %s, error %s; want the refusal", req.method, id, errObj)
		}
	}
}

// TestMCPBridgedBadInput: a bridged MCP client's line that is no JSON-RPC
// 2.0 message is refused under the id of the request it would be, when
// that can be read, and under null when it cannot.
func TestMCPBridgedBadInput(t *testing.T) {
	ed, _, declared := mcpChain(t, `{}`, BridgeStdio)
	s := startShim(t, declared)
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}`)
	connect := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"result":{"connectionId":"c1"}}`)
	ed.recvMsg() // the client's initialize, on the connection
	for _, tc := range []struct{ in, want string }{
		{`{"id":5,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}`},
		{`{"id":6,"result":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}`},
	} {
		s.send(tc.in)
		if got := string(s.recvLine()); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.in, got, tc.want)
		}
	}
}

// TestMCPBridgedBadInputLoggedSparingly: a bridged MCP client that keeps
// writing lines that are not JSON-RPC has each refused, the first few
// logged with what they said, the rest counted, not one warning each.
func TestMCPBridgedBadInputLoggedSparingly(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	ed, _, declared := mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, Logger: zap.New(core)})
	s := startShim(t, declared)
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}`)
	connect := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"result":{"connectionId":"c1"}}`)
	ed.recvMsg() // the client's initialize, on the connection
	const bad = 10000
	for range bad {
		s.send(`{"id":5,"method":"tools/list"}`)
	}
	for range bad {
		if m := s.recvMsg(); errorCode(m.Error) != codeInvalidRequest {
			t.Fatalf("got %s, want -32600", m.Bytes())
		}
	}
	s.w.Close() // the bridged connection ends, and logs its count
	counted := func(en observer.LoggedEntry) bool { return en.ContextMap()["count"] == int64(bad) }
	for deadline := time.Now().Add(10 * time.Second); len(logs.Filter(counted).All()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the bridged connection's end logged no count")
		}
		time.Sleep(time.Millisecond)
	}
	loggedSparingly(t, logs, "rejected MCP lines", bad, rejectedLogged+1, func(en observer.LoggedEntry) bool {
		return strings.Contains(en.Message, "rejected input") || strings.Contains(en.Message, "dropped MCP input")
	})
}

// TestMCPBridgedRefusedOversize: a bridged client whose connection the
// owner refused, and whose first message is too long to keep, is answered
// at once, as the chain answers one: each request of an over-long batch
// gets the refusal, together in a batch, and those whose ids were too
// long to keep one more under null; a batch with no request gets nothing,
// and the request after it the refusal; a request whose id was too long
// to keep gets it under null. (Over HTTP, a body past the limit is
// answered 413 before it is read, refused or not.)
func TestMCPBridgedRefusedOversize(t *testing.T) {
	const limit = 4096
	pad := strings.Repeat("x", 2*limit)
	longID := `"` + strings.Repeat("i", 2048) + `"` // past what the scan keeps of an id
	for _, tt := range []struct {
		name, first string
		batch       bool
		ids         string // refused, in order
	}{
		{"batch", `[{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"pad":"` + pad + `"}},` +
			`{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","params":{},"method":"tools/list","id":7}]`, true, `"a" 7`},
		{"notifications", `[{"jsonrpc":"2.0","method":"notifications/initialized","params":{"pad":"` + pad + `"}}]`, false, `"after"`},
		{"request", `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"pad":"` + pad + `"}}`, false, `"a"`},
		{"batch with an id not kept", `[{"jsonrpc":"2.0","id":` + longID + `,"method":"initialize","params":{"pad":"` + pad + `"}},` +
			`{"jsonrpc":"2.0","params":{},"method":"tools/list","id":7},{"jsonrpc":"2.0","id":` + longID + `,"method":"ping"}]`, true, `7 null`},
		{"request with an id not kept", `{"jsonrpc":"2.0","id":` + longID + `,"method":"initialize","params":{"pad":"` + pad + `"}}`, false, `null`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, _, declared := mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, MaxMessageBytes: limit})
			s := startShim(t, declared)
			// The request after is answered only if the first message was
			// not: the connection ends at the first answer.
			s.send(tt.first + "\n" + `{"jsonrpc":"2.0","id":"after","method":"ping"}`)
			connect := ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32603,"message":"no sessions here yet"}}`)
			got := s.recvLine()
			var ids []string
			refused := func(v []byte) {
				m, err := wire.Parse(v)
				if err != nil || !strings.Contains(errorMessage(m.Error), `refused the connection to MCP server "tools"`) {
					t.Errorf("the client got %s, want the refusal", v)
					return
				}
				ids = append(ids, string(m.ID))
			}
			if wire.IsBatch(got) {
				wire.EachElement(got, refused)
			} else {
				refused(got)
			}
			if wire.IsBatch(got) != tt.batch || strings.Join(ids, " ") != tt.ids {
				t.Errorf("the client got %.300s; want %s refused (in a batch: %v)", got, tt.ids, tt.batch)
			}
		})
	}
}

// TestMCPClientGone: the agent's MCP client ends its connection, with a
// call in flight at an owner that binds per request: a bridged client goes
// away, a native agent sends mcp/disconnect. With no connection of its own
// to end, the owner is told to cancel the call, or its handler would run
// on for nobody.
func TestMCPClientGone(t *testing.T) {
	for _, bridged := range []bool{true, false} {
		t.Run(fmt.Sprintf("bridged=%v", bridged), func(t *testing.T) {
			ed, c := openMCP(t, bridged, "request")
			c.send("3", "tools/call", `{"name":"slow"}`)
			call := recvRequest(t, ed)
			if bridged {
				c.s.w.Close() // the client ends its server's stdin
			} else {
				c.s.send(`{"jsonrpc":"2.0","id":"bye","method":"mcp/disconnect","params":{"connectionId":` + c.cid + `}}`)
			}
			m := ed.recvMsg()
			if m.Method != wire.MethodCancelRequest || string(wire.Member(m.Params, "requestId")) != string(call.ID) {
				t.Errorf("the owner, with call %s in flight, got %s; want a cancel for it", call.ID, m.Bytes())
			}
		})
	}
}

// TestMCPForkSession: a server declared in session/fork belongs to the new
// session, which the fork's answer names, not to the one it copies, which
// its params name: the owner hears of the fork's session, and closing the
// copied session leaves the fork's shared connection open, closing the
// fork ends it.
func TestMCPForkSession(t *testing.T) {
	ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
	ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/fork","params":{"sessionId":"s1","cwd":"/","mcpServers":[{"type":"acp","name":"forked-tools","serverId":"srv-f"}]}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"fork-2"}`)
	ed.recvMsg()
	// A request-binding call: the conductor opens one shared connection.
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-f","requestId":"r1","method":"tools/list","params":{}}}`)
	connect := ed.recvMsg()
	if got := string(wire.Member(wire.Member(connect.Params, "_meta"), "acp-conductor/sessionId")); got != `"fork-2"` {
		t.Errorf("mcp/connect for the fork's server names session %s, want the fork's: %s", got, connect.Params)
	}
	ed.reply(connect, `{"connectionId":"cF"}`)
	ed.reply(ed.recvMsg(), `{"tools":[]}`)
	ag.recvMsg()
	closeSessions(t, ed, ag, "s1", "fork-2")
}

// TestMCPServerOfManySessions: a provider registered once declares its
// server in every session (the TypeScript SDK's McpOverAcpProvider, as
// integration/peers/mcp_proxy.mjs uses it). Closing the first session
// leaves the shared connection to it open for the second; closing the
// last ends it.
func TestMCPServerOfManySessions(t *testing.T) {
	ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
	ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s2"}`)
	ed.recvMsg()
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/list","params":{}}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	ed.reply(ed.recvMsg(), `{"tools":[]}`)
	ag.recvMsg()
	closeSessions(t, ed, ag, "s1", "s2")
}

// closeSessions closes the sessions in turn, each answered by the agent,
// and checks that only the last ends the shared MCP connection: the
// conductor disconnects it before it relays that close's answer.
func closeSessions(t *testing.T, ed, ag *scripted, sessions ...string) {
	t.Helper()
	for i, session := range sessions {
		last := i == len(sessions)-1
		ed.send(`{"jsonrpc":"2.0","id":"close-` + session + `","method":"session/close","params":{"sessionId":"` + session + `"}}`)
		ag.reply(ag.recvMsg(), `{}`)
		if m := ed.recvMsg(); (m.Method == methodMCPDisconnect) != last {
			t.Errorf("closing %s: the editor got %s; want a disconnect %v", session, m.Bytes(), last)
		} else if last {
			ed.reply(m, `{}`)
		}
	}
}

// TestMCPProgressToTranslatedCaller: the editor, owner of a server it
// serves per request, reports progress on a call that the conductor made
// for a connect-binding caller (a native agent, or a bridged client). The
// editor's notification goes by the MCP tables, not by position: the
// caller hears it as MCP's notification on its connection, before the
// call's answer.
func TestMCPProgressToTranslatedCaller(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		t.Run(map[bool]string{false: "native", true: "bridged"}[bridged], func(t *testing.T) {
			ed, c := openMCP(t, bridged, "request")
			c.send("5", "tools/call", `{"name":"slow","_meta":{"progressToken":"p1"}}`)
			call := recvRequest(t, ed)
			if _, method, _ := carried(t, call); method != "tools/call" {
				t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":"srv-1","requestId":` + string(wire.Member(call.Params, "requestId")) +
				`,"method":"notifications/progress","params":{"progressToken":"p1","progress":1}}}`)
			id, method, params := c.recv(t)
			if id != nil || method != "notifications/progress" || string(params) != `{"progressToken":"p1","progress":1}` {
				t.Fatalf("the caller got %s %s %s, want the owner's progress", id, method, params)
			}
			ed.reply(call, `{"result":{"content":[]}}`)
			if id, errObj, result := c.recvResult(t); string(id) != "5" || errObj != nil || string(result) != `{"content":[]}` {
				t.Errorf("the call was answered %s %s %s", id, errObj, result)
			}
		})
	}
}

// TestMCPProgressToTranslatedCallerSpelledOtherwise: the owner of a
// server it serves per request names the call the conductor made for a
// connect-binding caller by its serverId and requestId as its JSON
// encoder spells them, which may not be the conductor's: the TypeScript
// SDK's JSON.stringify writes "&", "<" and U+2028 as themselves, where the
// conductor's encoder escapes them. The same JSON value names the same
// call: its progress reaches the caller on its connection.
func TestMCPProgressToTranslatedCallerSpelledOtherwise(t *testing.T) {
	for _, tt := range []struct {
		name      string
		declared  string // the server id, as the owner declares it
		serverID  string // as the owner names it back; %s: as it got it
		requestID string // %s: as it got it; escaped: its colon escaped
	}{
		{"as sent", `"srv-1"`, "%s", "%s"},
		{"ampersand", `"R&D"`, `"R&D"`, "%s"},
		{"angle brackets", `"\u003ctools\u003e"`, `"<tools>"`, "%s"},
		{"line separator", `"a\u2028b"`, "\"a\u2028b\"", "%s"},
		{"escaped request id", `"srv-1"`, "%s", "escaped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, ag, _ := mcpSetUp(t, `{"acp":true}`, Config{}, tt.declared)
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":` + tt.declared + `}}`)
			connect := ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			cid := wire.Member(ag.recvMsg().Result, "connectionId")
			c := &mcpUser{s: ag, cid: string(cid)}
			c.send("5", "tools/call", `{"name":"slow","_meta":{"progressToken":"p1"}}`)
			call := recvRequest(t, ed)
			serverID, requestID := string(wire.Member(call.Params, "serverId")), string(wire.Member(call.Params, "requestId"))
			if tt.serverID != "%s" {
				serverID = tt.serverID
			}
			if tt.requestID == "escaped" {
				requestID = strings.Replace(requestID, ":", `\u003a`, 1)
			}
			ed.send(`{"jsonrpc":"2.0","method":"mcp/message","params":{"serverId":` + serverID + `,"requestId":` + requestID +
				`,"method":"notifications/progress","params":{"progressToken":"p1","progress":1}}}`)
			m := ag.recvMsg()
			if _, method, _ := carried(t, m); method != "notifications/progress" || string(wire.Member(m.Params, "connectionId")) != string(cid) {
				t.Fatalf("named as %s %s, the progress reached the agent as %s; want it on its connection %s", serverID, requestID, m.Raw, cid)
			}
			ed.reply(call, `{"result":{"content":[]}}`)
			if id, errObj, _ := c.recvResult(t); string(id) != "5" || errObj != nil {
				t.Errorf("the call was answered %s %s", id, errObj)
			}
		})
	}
}

// TestMCPConnectionIDSpelledOtherwise: the agent names a connection by
// the connectionId its owner gave, as the agent's own JSON encoder spells
// it, which may not be the owner's (Go's escapes "&", Python's non-ASCII
// letters): the same JSON value names the same connection, and the owner
// gets its own spelling back.
func TestMCPConnectionIDSpelledOtherwise(t *testing.T) {
	for _, tt := range []struct {
		name         string
		owner, agent string // the connectionId as each spells it
	}{
		{"as given", `"c1"`, `"c1"`},
		{"ampersand", `"c\u00261"`, `"c&1"`},
		{"letter", `"\u00e9t\u00e9"`, `"été"`},
		{"escaped by the agent", `"c-1"`, `"c\u002d1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
			ed.reply(ed.recvMsg(), `{"connectionId":`+tt.owner+`}`)
			if got := string(wire.Member(ag.recvMsg().Result, "connectionId")); got != tt.owner {
				t.Fatalf("the agent got connectionId %s, want the owner's %s", got, tt.owner)
			}
			ag.send(`{"jsonrpc":"2.0","id":"m","method":"mcp/message","params":{"connectionId":` + tt.agent + `,"method":"tools/list","params":{}}}`)
			m := firstTo(t, ed, ag, "the agent's tools/list")
			if got := string(wire.Member(m.Params, "connectionId")); m.Method != methodMCPMessage || got != tt.owner {
				t.Fatalf("the owner got %s; want the tools/list on its connection %s", m.Raw, tt.owner)
			}
			ed.reply(m, `{"tools":[]}`)
			if m := ag.recvMsg(); string(m.ID) != `"m"` || m.Error != nil {
				t.Errorf("the agent got %s, want its call answered", m.Raw)
			}
		})
	}
}

// TestMCPUnknownConnectionData: the agent's message on a connection the
// conductor does not know is refused with the connectionId in the error's
// data as it came, in the agent's own spelling, not re-escaped: an agent
// compares it with what it sent.
func TestMCPUnknownConnectionData(t *testing.T) {
	for _, id := range []string{`"c&1"`, `"c\u00261"`, `"<c>"`, "\"c\u20281\"", `7`} {
		ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
		ag.send(`{"jsonrpc":"2.0","id":"m","method":"mcp/message","params":{"connectionId":` + id + `,"method":"tools/list","params":{}}}`)
		m := firstTo(t, ag, ed, "the refusal of a message on an unknown connection")
		if errorCode(m.Error) != codeInvalidParams || string(wire.Member(m.Error, "data")) != `{"connectionId":`+id+`}` {
			t.Errorf("a message on unknown connection %s got error\n%s\nwant -32602 with data {\"connectionId\":%s}", id, m.Error, id)
		}
	}
}

// TestMCPPingToStatelessOwner: a legacy MCP client (bridged over stdio or
// HTTP, or a native agent on a connection) pings a server whose owner
// binds per request and speaks MCP 2026-07-28, which has no ping and
// refuses it as unknown. The conductor, whose connection ping checks,
// answers {} itself, and the owner hears nothing of it.
func TestMCPPingToStatelessOwner(t *testing.T) {
	for _, client := range []string{"stdio", "http", "native"} {
		t.Run(client, func(t *testing.T) {
			var ed *scripted
			var pong, after func() string // the ping's answer; the owner's next message
			if client == "http" {
				var declared json.RawMessage
				ed, _, declared = mcpChain(t, `{"http":true}`, BridgeHTTP)
				url, token := httpDeclaration(t, declared)
				answered := make(chan string, 1)
				go func() {
					_, body := httpMCP(url, token, http.MethodPost, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
					answered <- body
				}()
				connect := ed.recvMsg()
				ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
				pong = func() string {
					select {
					case body := <-answered:
						return body
					case <-time.After(20 * time.Second):
						t.Fatal("the ping was never answered")
						return ""
					}
				}
				after = func() string {
					listed := make(chan struct{})
					go func() {
						httpMCP(url, token, http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`)
						close(listed)
					}()
					m := ed.recvMsg()
					ed.reply(m, `{"result":{"tools":[]}}`)
					<-listed
					_, method, _ := carried(t, m)
					return method
				}
			} else {
				var c *mcpUser
				ed, c = openMCP(t, client == "stdio", "request")
				c.send("5", "ping", `{}`)
				pong = func() string { return string(c.s.recvLine()) }
				after = func() string {
					c.send("6", "tools/list", `{}`)
					_, method, _ := carried(t, recvRequest(t, ed))
					return method
				}
			}
			if got := pong(); !strings.Contains(got, `{"jsonrpc":"2.0","id":5,"result":{}}`) {
				t.Errorf("the client's ping was answered %s; want {} under its id", got)
			}
			if method := after(); method != "tools/list" {
				t.Errorf("after the ping, the owner got %s; want the next call, tools/list", method)
			}
		})
	}
}

// TestMCPBridgedInitializeFromDiscover: a bridged legacy client's
// initialize to an owner that binds per request is answered from the
// owner's answer to server/discover: its result in the shape of an
// InitializeResult; one built from the declaration when the owner's
// server has none (method not found, in the carrier or as the owner's own
// error); and any other failure as the error it is, not a made-up success
// the client would only see through at its next call.
func TestMCPBridgedInitializeFromDiscover(t *testing.T) {
	declared := `{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-06-18","serverInfo":{"name":"tools","version":"0"}}}`
	for _, tc := range []struct{ name, answer, want string }{
		{"result", `"result":{"result":{"capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"ed","version":"2"}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{"listChanged":true}},"protocolVersion":"2025-06-18","serverInfo":{"name":"ed","version":"2"}}}`},
		{"none", `"result":{"error":{"code":-32601,"message":"Method not found"}}`, declared},
		{"none, refused", `"error":{"code":-32601,"message":"Method not found"}`, declared},
		{"MCP error", `"result":{"error":{"code":-32603,"message":"discovery broke"}}`,
			`{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"discovery broke"}}`},
		{"failed", `"error":{"code":-32603,"message":"the owner broke"}`,
			`{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"the owner broke"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ed, _, decl := mcpChain(t, `{}`, BridgeStdio)
			c := &mcpUser{s: startShim(t, decl)}
			c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
			connect := ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			discover := ed.recvMsg()
			if _, method, _ := carried(t, discover); method != "server/discover" {
				t.Fatalf("the owner got %s, want server/discover", discover.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","id":` + string(discover.ID) + `,` + tc.answer + `}`)
			if got := string(c.s.recvLine()); got != tc.want {
				t.Errorf("server/discover answered %s: the client's initialize got\n%s\nwant\n%s", tc.answer, got, tc.want)
			}
		})
	}
}
