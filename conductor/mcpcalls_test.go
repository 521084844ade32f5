package conductor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// mcpCallChain starts the editor, two scripted proxies and an agent that
// speaks MCP-over-ACP, and opens session s1, in which the editor declares
// the server ed-1 and the first proxy adds its own, p1-1. It returns the
// sides by position: editor, proxies, agent.
func mcpCallChain(t *testing.T) []*scripted {
	t.Helper()
	ed, ps, ag := proxiesChain(t, 2, `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	ed.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"ed-1"}]}}`)
	setup1 := ps[0].recvMsg()
	ps[0].send(`{"jsonrpc":"2.0","id":"n1","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[` +
		`{"type":"acp","name":"tools","serverId":"ed-1"},{"type":"acp","name":"p1-tools","serverId":"p1-1"}]}}}`)
	setup2 := ps[1].recvMsg()
	ps[1].send(`{"jsonrpc":"2.0","id":"n2","method":"proxy/successor","params":{"method":"session/new","params":` + string(setup2.Params) + `}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s1"}`)
	ps[1].reply(setup2, string(ps[1].recvMsg().Result))
	ps[0].reply(setup1, string(ps[0].recvMsg().Result))
	if m := ed.recvMsg(); string(m.ID) != `"n"` || m.Error != nil {
		t.Fatalf("session/new: the editor got %s", m.Bytes())
	}
	return []*scripted{ed, ps[0], ps[1], ag}
}

// carriedMethod returns the method and params of m, unwrapped from a
// successor envelope if it came in one.
func carriedMethod(t *testing.T, m *wire.Message) (string, json.RawMessage) {
	t.Helper()
	if !wire.IsSuccessor(m.Method) {
		return m.Method, m.Params
	}
	method, params, err := m.Unwrap()
	if err != nil {
		t.Fatalf("%v: %s", err, m.Bytes())
	}
	return method, params
}

// ownerCalled reads the owner's first MCP request, the conductor's
// mcp/connect asking how it binds, refuses it as the TypeScript SDK does
// (per request, then), and returns the call that follows.
func ownerCalled(t *testing.T, owner *scripted) *wire.Message {
	t.Helper()
	probe := owner.recvMsg()
	if method, _ := carriedMethod(t, probe); method != methodMCPConnect {
		t.Fatalf("the owner got %s; want mcp/connect", probe.Bytes())
	}
	owner.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
	call := owner.recvMsg()
	if method, _ := carriedMethod(t, call); method != methodMCPMessage || !call.IsRequest() {
		t.Fatalf("the owner got %s; want the mcp/message call", call.Bytes())
	}
	return call
}

// notifyFrom sends an owner's mcp/message notification with params: in
// a successor envelope if wrapped, else plain.
func notifyFrom(owner *scripted, wrapped bool, params string) {
	if wrapped {
		owner.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"mcp/message","params":` + params + `}}`)
		return
	}
	owner.send(`{"jsonrpc":"2.0","method":"mcp/message","params":` + params + `}`)
}

// TestMCPProgressToCaller: a request-binding call to a declared server is
// made by a proxy (of the editor's server, or an earlier proxy's), by the
// editor (of a proxy's) or by the agent; its owner, which binds per
// request, reports progress on it and then answers. The progress reaches
// the caller, ahead of the answer, though the owner names the call in
// other spellings of its serverId and requestId (the TypeScript SDK tells
// calls apart by value); an owner that is a proxy sends it plain to its
// predecessor (as the TypeScript SDK does) or in an envelope (as an RFD
// proxy answers its successor). Once the call is answered, the owner's
// late notification about it goes to the agent, as one about no call the
// conductor relayed does, and it is the first thing the agent gets: the
// progress did not reach the agent instead.
func TestMCPProgressToCaller(t *testing.T) {
	const ed, p1, p2, agent = 0, 1, 2, 3
	for _, c := range []struct {
		name          string
		caller, owner int
		server        string
		wrapped       bool
	}{
		{"second proxy calls the editor's server", p2, ed, "ed-1", false},
		{"first proxy calls the editor's server", p1, ed, "ed-1", false},
		{"second proxy calls the first's, which notifies plain", p2, p1, "p1-1", false},
		{"second proxy calls the first's, which notifies in an envelope", p2, p1, "p1-1", true},
		{"the editor calls the first proxy's server", ed, p1, "p1-1", true},
		{"the agent calls the editor's server", agent, ed, "ed-1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sides := mcpCallChain(t)
			caller, owner, ag := sides[c.caller], sides[c.owner], sides[agent]
			caller.send(`{"jsonrpc":"2.0","id":"c1","method":"mcp/message","params":{"serverId":"` + c.server +
				`","requestId":7,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"t"}}}}`)
			call := ownerCalled(t, owner)
			spelled := strings.Replace(c.server, "-", `\u002d`, 1)
			progress := `{"serverId":"` + spelled + `","requestId":7.0,"method":"notifications/progress","params":{"progressToken":"t","progress":1}}`
			notifyFrom(owner, c.wrapped, progress)
			owner.reply(call, `{"result":{"content":[]}}`)

			if m := caller.recvMsg(); m.Method != methodMCPMessage || !m.IsNotification() || string(m.Params) != progress {
				t.Fatalf("the caller got %s; want the owner's progress, before the answer", m.Bytes())
			}
			if m := caller.recvMsg(); string(m.ID) != `"c1"` || string(m.Result) != `{"result":{"content":[]}}` {
				t.Fatalf("the caller got %s; want its call answered", m.Bytes())
			}
			late := `{"serverId":"` + c.server + `","requestId":7,"method":"notifications/progress","params":{"progressToken":"t","progress":2}}`
			notifyFrom(owner, c.wrapped, late)
			if m := ag.recvMsg(); m.Method != methodMCPMessage || string(m.Params) != late {
				t.Fatalf("the agent got %s; want the owner's late notification, and nothing before it", m.Bytes())
			}
		})
	}
}

// TestMCPProgressToCallerOnConnection: a proxy calls the editor's server,
// which binds per connection, so the conductor sends the call on the
// connection it opens for request-binding callers. The editor's progress
// on that connection reaches the proxy as the request binding's, naming
// its call, ahead of the answer; the agent gets nothing before the
// editor's next notification to it (a session/cancel).
func TestMCPProgressToCallerOnConnection(t *testing.T) {
	sides := mcpCallChain(t)
	ed, p2, ag := sides[0], sides[2], sides[3]
	p2.send(`{"jsonrpc":"2.0","id":"c1","method":"mcp/message","params":{"serverId":"ed-1","requestId":"r1","method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"t"}}}}`)
	connect := ed.recvMsg()
	if connect.Method != methodMCPConnect {
		t.Fatalf("the editor got %s; want mcp/connect", connect.Bytes())
	}
	ed.reply(connect, `{"connectionId":"conn-1"}`)
	call := ed.recvMsg()
	if call.Method != methodMCPMessage || string(wire.Member(call.Params, "connectionId")) != `"conn-1"` {
		t.Fatalf("the editor got %s; want the call on its connection", call.Bytes())
	}
	ed.send(`{"jsonrpc":"2.0","method":"mcp/message","params":{"connectionId":"conn-1","method":"notifications/progress","params":{"progressToken":"t","progress":1}}}`)
	ed.reply(call, `{"content":[]}`)
	if m := p2.recvMsg(); m.Method != methodMCPMessage || !m.IsNotification() ||
		string(m.Params) != `{"serverId":"ed-1","requestId":"r1","method":"notifications/progress","params":{"progressToken":"t","progress":1}}` {
		t.Fatalf("the proxy got %s; want the editor's progress on its call, before the answer", m.Bytes())
	}
	if m := p2.recvMsg(); string(m.ID) != `"c1"` || string(m.Result) != `{"result":{"content":[]}}` {
		t.Fatalf("the proxy got %s; want its call answered", m.Bytes())
	}
	// To the agent, through the proxies, which pass it on.
	ed.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	for _, p := range sides[1:3] {
		m := p.recvMsg()
		if m.Method != "session/cancel" {
			t.Fatalf("%s got %s; want the editor's session/cancel", p.name, m.Bytes())
		}
		p.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":` + string(m.Params) + `}}`)
	}
	if m := ag.recvMsg(); m.Method != "session/cancel" {
		t.Fatalf("the agent got %s; want only the editor's session/cancel", m.Bytes())
	}
}

// firstTo returns the next message want gets, failing t if other gets one
// first.
func firstTo(t *testing.T, want, other *scripted, what string) *wire.Message {
	t.Helper()
	select {
	case l := <-want.lines:
		return mustParse(t, l)
	case l := <-other.lines:
		t.Fatalf("%s reached %s, not %s: %s", what, other.name, want.name, l)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s reached no one", what)
	}
	return nil
}

// TestMCPProgressPassedOn: the agent calls a server no one in the chain
// declared, so the call goes by position, and each proxy passes it on
// toward the editor, which reports progress on it. Each proxy passes the
// progress on in an envelope, toward its successor, and each time it
// reaches the next proxy, the one that passed the call on to it, not the
// agent past it; then the answers come back the same way.
func TestMCPProgressPassedOn(t *testing.T) {
	ed, ps, ag := proxiesChain(t, 2, `{"protocolVersion":1}`)
	p1, p2 := ps[0], ps[1]
	const call = `{"serverId":"elsewhere","requestId":"r1","method":"tools/call","params":{"name":"slow"}}`
	ag.send(`{"jsonrpc":"2.0","id":"a1","method":"mcp/message","params":` + call + `}`)
	at2 := p2.recvMsg()
	p2.send(`{"jsonrpc":"2.0","id":"b1","method":"mcp/message","params":` + call + `}`)
	at1 := p1.recvMsg()
	p1.send(`{"jsonrpc":"2.0","id":"c1","method":"mcp/message","params":` + call + `}`)
	atEd := ed.recvMsg()
	if atEd.Method != methodMCPMessage || string(atEd.Params) != call {
		t.Fatalf("the editor got %s; want the call, passed on", atEd.Bytes())
	}

	const progress = `{"serverId":"elsewhere","requestId":"r1","method":"notifications/progress","params":{"progress":1}}`
	ed.send(`{"jsonrpc":"2.0","method":"mcp/message","params":` + progress + `}`)
	if m := firstTo(t, p1, ag, "the editor's progress"); m.Method != methodMCPMessage || string(m.Params) != progress {
		t.Fatalf("the first proxy got %s; want the editor's progress", m.Bytes())
	}
	notifyFrom(p1, true, progress)
	if m := firstTo(t, p2, ag, "the progress the first proxy passed on"); m.Method != methodMCPMessage || string(m.Params) != progress {
		t.Fatalf("the second proxy got %s; want the progress", m.Bytes())
	}
	notifyFrom(p2, true, progress)
	if m := ag.recvMsg(); m.Method != methodMCPMessage || string(m.Params) != progress {
		t.Fatalf("the agent got %s; want the progress", m.Bytes())
	}

	ed.reply(atEd, `{"result":{"content":[]}}`)
	p1.reply(at1, string(p1.recvMsg().Result))
	p2.reply(at2, string(p2.recvMsg().Result))
	if got := ag.recvLine(); string(got) != `{"jsonrpc":"2.0","id":"a1","result":{"result":{"content":[]}}}` {
		t.Errorf("the agent got %s; want its call answered", got)
	}
}

// TestCallKey: calls are told apart as the TypeScript SDK tells them,
// JSON.stringify([serverId, requestId]): by value.
func TestCallKey(t *testing.T) {
	for _, c := range []struct {
		a, b [2]string // serverId, requestId as raw JSON
		same bool
	}{
		{[2]string{`"s"`, `"r1"`}, [2]string{`"s"`, `"r1"`}, true},
		{[2]string{`"s"`, `"r1"`}, [2]string{`"s"`, `"r\u0031"`}, true},
		{[2]string{`"s-1"`, `1`}, [2]string{`"s\u002d1"`, `1`}, true},
		{[2]string{`"s"`, `7`}, [2]string{`"s"`, `7.0`}, true},
		{[2]string{`"s"`, `7`}, [2]string{`"s"`, `7e0`}, true},
		{[2]string{`"s"`, `0`}, [2]string{`"s"`, `-0`}, true},
		{[2]string{`"s"`, ` "r" `}, [2]string{`"s"`, `"r"`}, true},
		{[2]string{`"s"`, `7`}, [2]string{`"s"`, `"7"`}, false},
		{[2]string{`"s"`, `"r1"`}, [2]string{`"t"`, `"r1"`}, false},
		{[2]string{`"s"`, `null`}, [2]string{`"s"`, `"null"`}, false},
		{[2]string{`"s"`, `1`}, [2]string{`"s"`, `2`}, false},
	} {
		ka, oka := callKey(json.RawMessage(c.a[0]), json.RawMessage(c.a[1]))
		kb, okb := callKey(json.RawMessage(c.b[0]), json.RawMessage(c.b[1]))
		if !oka || !okb || (ka == kb) != c.same {
			t.Errorf("%v and %v: keys %q (%v) and %q (%v); want the same: %v", c.a, c.b, ka, oka, kb, okb, c.same)
		}
	}
	for _, bad := range [][2]json.RawMessage{{nil, json.RawMessage(`"r"`)}, {json.RawMessage(`"s"`), nil}, {json.RawMessage(`"s"`), json.RawMessage(`1e400`)}} {
		if k, ok := callKey(bad[0], bad[1]); ok {
			t.Errorf("callKey(%s, %s) = %q; want none", bad[0], bad[1], k)
		}
	}
}

// TestMCPCallsForgotten: a call the conductor relayed is forgotten when
// its answer passes, when the last session that declared its server
// ends, and when its caller or the peer it asked is restarted or
// bypassed; a second call under the same key to the same peer leaves the
// first's entry alone, and a call to another peer under that key is
// another call.
func TestMCPCallsForgotten(t *testing.T) {
	const params = `{"serverId":"ed-1","requestId":"r1","method":"tools/call"}`
	gone := func(mcpServer, string) *wire.Error { return wire.Errorf(codeMCPServerUnavailable, "gone") }
	for _, c := range []struct {
		name   string
		then   func(r *mcpRoutes, answered func(*wire.Message) bool)
		caller int
		known  bool
	}{
		{"in flight", func(*mcpRoutes, func(*wire.Message) bool) {}, 2, true},
		{"answered", func(_ *mcpRoutes, answered func(*wire.Message) bool) {
			answered(&wire.Message{Result: json.RawMessage(`{}`)})
		}, 0, false},
		{"failed", func(_ *mcpRoutes, answered func(*wire.Message) bool) {
			answered(&wire.Message{Error: json.RawMessage(`{"code":-32603,"message":"gone"}`)})
		}, 0, false},
		{"its session ended", func(r *mcpRoutes, _ func(*wire.Message) bool) { r.sessionEnded("session/close", `"s1"`) }, 0, false},
		{"another session ended", func(r *mcpRoutes, _ func(*wire.Message) bool) { r.sessionEnded("session/close", `"s2"`) }, 2, true},
		{"its caller restarted", func(r *mcpRoutes, _ func(*wire.Message) bool) { r.dropOwner(2, gone) }, 0, false},
		{"the peer asked restarted", func(r *mcpRoutes, _ func(*wire.Message) bool) { r.dropOwner(1, gone) }, 0, false},
		{"another proxy restarted", func(r *mcpRoutes, _ func(*wire.Message) bool) { r.dropOwner(3, gone) }, 2, true},
		{"a second call under its key", func(r *mcpRoutes, _ func(*wire.Message) bool) {
			second := &call{}
			if hook := r.noteCall(4, 1, json.RawMessage(params), second, nil); hook != nil {
				hook(&wire.Message{Result: json.RawMessage(`{}`)})
			}
		}, 2, true},
		{"a call to another peer under its key", func(r *mcpRoutes, _ func(*wire.Message) bool) {
			other := &call{}
			r.noteCall(4, 0, json.RawMessage(params), other, nil)(&wire.Message{Result: json.RawMessage(`{}`)})
		}, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newMCPRoutes()
			if _, found, e := r.declare(1, "session/load", json.RawMessage(`{"sessionId":"s1","mcpServers":[{"type":"acp","name":"t","serverId":"ed-1"}]}`)); !found || e != nil {
				t.Fatalf("declare: found %v, %v", found, e)
			}
			hook := r.noteCall(2, 1, json.RawMessage(params), &call{}, nil)
			c.then(r, hook)
			caller, known := r.callerOf(1, json.RawMessage(`{"serverId":"ed\u002d1","requestId":"r1","method":"notifications/progress"}`))
			if known != c.known || known && caller != c.caller {
				t.Errorf("the call's caller is %d (known %v); want %d (known %v)", caller, known, c.caller, c.known)
			}
			if len(r.calls) > 1 {
				t.Errorf("the table holds %d calls", len(r.calls))
			}
		})
	}
}
