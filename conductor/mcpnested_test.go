package conductor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// lined is a message with the line it came as, for a failure to show.
type lined struct {
	*wire.Message
	line []byte
}

// recvLined returns s's next message with its line.
func recvLined(s *scripted) lined {
	s.t.Helper()
	l := s.recvLine()
	m, err := wire.Parse(l)
	if err != nil {
		s.t.Fatalf("%s: %v: %s", s.name, err, l)
	}
	return lined{m, l}
}

// unwrapped returns the method and params of m, out of its successor
// envelope if it has one.
func unwrapped(m lined) (string, string) {
	if wire.IsSuccessor(m.Method) {
		method, params, _ := wire.Unwrap(m.Params)
		return method, string(params)
	}
	return m.Method, string(m.Params)
}

// TestMCPNestedConductorTakesRequests: a proxy-mode conductor refuses the
// mcp/connect its parent opens for request-binding callers, saying that
// it takes their mcp/message {serverId, requestId} as it is; a call then
// reaches the owner (which binds per request) as it came, and its
// {error} outcome goes back as it is, not as an ACP error.
func TestMCPNestedConductorTakesRequests(t *testing.T) {
	owner, ownerStarted := scriptedComponent(t, t.TempDir(), "owner")
	parent := scriptedEditor(startChain(t, Config{Mode: ProxyMode, Proxies: []Component{owner}}))
	own := ownerStarted()
	parent.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":{"protocolVersion":1}}`)
	init := own.recvMsg()
	own.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	parent.reply(parent.recvMsg(), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	own.reply(init, string(own.recvMsg().Result))
	parent.recvMsg()
	parent.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	setUp := own.recvMsg()
	own.send(`{"jsonrpc":"2.0","id":"up2","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"srv-1"}]}}}`)
	parent.reply(parent.recvMsg(), `{"sessionId":"s1"}`)
	own.reply(setUp, string(own.recvMsg().Result))
	parent.recvMsg()

	parent.send(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"mcp/connect","params":{"serverId":"srv-1","_meta":{"acp-conductor/requestBinding":true}}}}`)
	if m := recvLined(parent); errorCode(m.Error) != codeMethodNotFound || !strings.Contains(string(m.Error), `"acp-conductor/requestBinding":true`) {
		t.Fatalf("the parent's marked mcp/connect was answered %s, want -32601 saying the request binding is taken", m.line)
	}
	parent.send(`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/call","params":{}}}}`)
	m := recvLined(own)
	if method, _ := unwrapped(m); method == methodMCPConnect {
		// The conductor's own question of the owner's binding.
		own.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
		m = recvLined(own)
	}
	if method, params := unwrapped(m); method != methodMCPMessage || !strings.Contains(params, `"requestId":"r1"`) {
		t.Fatalf("the owner got %s, want the call as it came", m.line)
	}
	own.reply(m.Message, `{"error":{"code":-32800,"message":"cancelled"}}`)
	if m := recvLined(parent); m.Error != nil || !strings.Contains(string(m.Result), `{"error":{"code":-32800`) {
		t.Errorf("the parent got %s, want the owner's {error} outcome", m.line)
	}
}

// TestMCPOwnerTakesEitherBinding: an owner that refuses the conductor's
// marked mcp/connect saying it takes the request binding (a nested
// conductor) is sent each caller's MCP traffic as the caller sent it: a
// request-binding call as it is, and the agent's own mcp/connect relayed,
// not answered with a translating connection of the conductor's.
func TestMCPOwnerTakesEitherBinding(t *testing.T) {
	dir := t.TempDir()
	nested, nestedStarted := scriptedComponent(t, dir, "nested")
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{nested}, Agent: agent}))
	px, ag := nestedStarted(), agentStarted()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	init := px.recvMsg()
	px.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`)
	px.reply(init, string(px.recvMsg().Result))
	ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	setUp := px.recvMsg()
	px.send(`{"jsonrpc":"2.0","id":"up2","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"srv-n"}]}}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s1"}`)
	px.reply(setUp, string(px.recvMsg().Result))
	ed.recvMsg()

	ag.send(`{"jsonrpc":"2.0","id":7,"method":"mcp/message","params":{"serverId":"srv-n","requestId":"r1","method":"tools/call","params":{}}}`)
	m := recvLined(px)
	if method, params := unwrapped(m); method != methodMCPConnect || !strings.Contains(params, `"acp-conductor/requestBinding":true`) {
		t.Fatalf("the owner got %s, want a marked mcp/connect", m.line)
	}
	px.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"not needed","data":{"acp-conductor/requestBinding":true}}}`)
	m = recvLined(px)
	if method, params := unwrapped(m); method != methodMCPMessage || !strings.Contains(params, `"requestId":"r1"`) {
		t.Fatalf("the owner got %s, want the call as it came", m.line)
	}
	px.reply(m.Message, `{"error":{"code":-32800,"message":"cancelled"}}`)
	if m := recvLined(ag); m.Error != nil || !strings.Contains(string(m.Result), `{"error":{"code":-32800`) {
		t.Errorf("the agent got %s, want the owner's {error} outcome", m.line)
	}

	ag.send(`{"jsonrpc":"2.0","id":8,"method":"mcp/connect","params":{"serverId":"srv-n"}}`)
	m = recvLined(px)
	if method, _ := unwrapped(m); method != methodMCPConnect {
		t.Fatalf("the owner got %s, want the agent's mcp/connect", m.line)
	}
	px.reply(m.Message, `{"connectionId":"c1"}`)
	if m := recvLined(ag); !strings.Contains(string(m.Result), `"connectionId":"c1"`) {
		t.Errorf("the agent got %s, want the owner's connection", m.line)
	}
}

// ownerConnEnded is the error a nested conductor gives for a connection
// to serverID whose owner inside it was restarted: it names the
// connection by the id the nested conductor gave, acp-conductor:1, which
// the caller need not know it by.
func ownerConnEnded(serverID string) string {
	cause := wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available: owner, the proxy that served it, was restarted", "tools").
		WithData(map[string]json.RawMessage{"serverId": dataString(serverID)})
	return string(connEndedError(`"acp-conductor:1"`, cause).Encode())
}

// declaringProxies plays proxies pxs through the editor's initialize and
// session/new, each declaring its one of servers on the way, and the
// agent answering both.
func declaringProxies(t *testing.T, ed *scripted, ag *scripted, agentInit string, pxs []*scripted, servers []string) {
	t.Helper()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	inits := make([]lined, len(pxs))
	for i, px := range pxs {
		inits[i] = recvLined(px)
		px.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	}
	ag.reply(ag.recvMsg(), agentInit)
	for i := len(pxs) - 1; i >= 0; i-- {
		pxs[i].reply(inits[i].Message, string(pxs[i].recvMsg().Result))
	}
	ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	declared := ""
	for i, px := range pxs {
		inits[i] = recvLined(px)
		if i > 0 {
			declared += ","
		}
		declared += `{"type":"acp","name":"tools","serverId":"` + servers[i] + `"}`
		px.send(`{"jsonrpc":"2.0","id":"up2","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[` + declared + `]}}}`)
	}
	ag.reply(ag.recvMsg(), `{"sessionId":"s1"}`)
	for i := len(pxs) - 1; i >= 0; i-- {
		pxs[i].reply(inits[i].Message, string(pxs[i].recvMsg().Result))
	}
	ed.recvMsg()
}

// TestMCPOwnerConnectionRenamed: an owner's error about a connection
// names it as the agent knows it, or not at all where the caller knows no
// connection, with the rest of the error, its cause, as it was. Two
// owners (nested conductors, say) give the same connectionId, so the
// agent knows the second by another; a request-binding caller's calls
// go on a connection the conductor opened for it.
func TestMCPOwnerConnectionRenamed(t *testing.T) {
	dir := t.TempDir()
	p1, p1Started := scriptedComponent(t, dir, "p1")
	p2, p2Started := scriptedComponent(t, dir, "p2")
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{p1, p2}, Agent: agent}))
	px1, px2, ag := p1Started(), p2Started(), agentStarted()
	declaringProxies(t, ed, ag, `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`, []*scripted{px1, px2}, []string{"srv-a", "srv-b"})

	connect := func(px *scripted, id, server string) {
		t.Helper()
		ag.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"mcp/connect","params":{"serverId":"` + server + `"}}`)
		px.reply(px.recvMsg(), `{"connectionId":"acp-conductor:1"}`)
		if m := recvLined(ag); !strings.Contains(string(m.Result), "acp-conductor:1") {
			t.Fatalf("the agent's mcp/connect was answered %s", m.line)
		}
	}
	connect(px1, "c1", "srv-a")
	connect(px2, "c2", "srv-b")
	ag.send(`{"jsonrpc":"2.0","id":"m2","method":"mcp/message","params":{"connectionId":"acp-conductor:1~2","method":"tools/list"}}`)
	m := recvLined(px2)
	px2.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":` + ownerConnEnded("srv-b") + `}`)
	m = recvLined(ag)
	if e := string(m.Error); !strings.Contains(e, `"message":"MCP connection \"acp-conductor:1~2\" ended: MCP server \"tools\" is no longer available: owner, the proxy that served it, was restarted"`) ||
		!strings.Contains(e, `"connectionId":"acp-conductor:1~2"`) || !strings.Contains(e, `"serverId":"srv-b"`) || !strings.Contains(e, `-33001`) {
		t.Errorf("the agent got %s, want the owner's error naming its connection acp-conductor:1~2", m.line)
	}

	// A request-binding call, on a connection of the conductor's own.
	ag.send(`{"jsonrpc":"2.0","id":"r1","method":"mcp/message","params":{"serverId":"srv-a","requestId":"q1","method":"tools/list"}}`)
	px1.reply(px1.recvMsg(), `{"connectionId":"acp-conductor:1"}`) // the connect, taken as an owner that binds per connection does
	m = recvLined(px1)
	px1.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":` + ownerConnEnded("srv-a") + `}`)
	m = recvLined(ag)
	if r := string(m.Result); !strings.Contains(r, `{"error":{"code":-33001,"message":"MCP connection ended: MCP server \"tools\" is no longer available: owner, the proxy that served it, was restarted"`) ||
		strings.Contains(r, "connectionId") || !strings.Contains(r, `"serverId":"srv-a"`) {
		t.Errorf("the agent got %s, want the owner's error naming no connection", m.line)
	}
}

// TestMCPOwnerConnectionBridged: a bridged MCP client, which knows no
// connection at all, hears an owner's error about its connection with
// no connection named, and the cause kept.
func TestMCPOwnerConnectionBridged(t *testing.T) {
	ed, _, declared := mcpChain(t, `{}`, BridgeStdio)
	shim := startShim(t, declared)
	shim.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	m := recvLined(ed)
	if m.Method != methodMCPConnect {
		t.Fatalf("the owner got %s, want mcp/connect", m.line)
	}
	ed.reply(m.Message, `{"connectionId":"acp-conductor:1"}`)
	m = recvLined(ed)
	ed.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":` + ownerConnEnded("srv-1") + `}`)
	m = recvLined(shim)
	if e := string(m.Error); !strings.Contains(e, `"message":"MCP connection ended: MCP server \"tools\" is no longer available: owner, the proxy that served it, was restarted"`) ||
		strings.Contains(e, "connectionId") || !strings.Contains(e, `"serverId":"srv-1"`) {
		t.Errorf("the client got %s, want the owner's error naming no connection", m.line)
	}
}
