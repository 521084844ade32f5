package conductor

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
	"github.com/acp-conductor/acp-conductor/trace"
)

// What becomes of a session's MCP servers when the session ends: the
// connections the conductor opened for them are closed, whatever state
// they are in, nothing waiting on them is left unanswered, and a bridged
// server stops being reachable once no session declares it.

// sessionEnded fails t unless m answers the agent's request id with the
// conductor's error saying the session that declared the server ended.
func sessionEnded(t *testing.T, m *wire.Message, id string) {
	t.Helper()
	if string(m.ID) != id || m.Error == nil || errorCode(m.Error) != codeMCPServerUnavailable ||
		!strings.Contains(errorMessage(m.Error), `ended session "s1"`) {
		t.Fatalf("the agent got %s; want its request %s answered with an error saying session s1 ended", m.Bytes(), id)
	}
}

// TestMCPSessionEndsWhileOpening: a request-binding agent's first call to
// a connect-binding owner makes the conductor open the one connection
// such callers share; the session ends before the owner answers
// mcp/connect. When the answer comes, the connection is disconnected at
// once, the call is answered with an error naming why, and no route is
// kept for it: the owner's own request on it is refused as on any unknown
// connection.
func TestMCPSessionEndsWhileOpening(t *testing.T) {
	for _, end := range []string{"session/close", "session/delete"} {
		t.Run(end, func(t *testing.T) {
			ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
			ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/list","params":{}}}`)
			connect := ed.recvMsg()
			if connect.Method != methodMCPConnect {
				t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","id":"end","method":"` + end + `","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			if m := ed.recvMsg(); string(m.ID) != `"end"` || m.Error != nil {
				t.Fatalf("%s: the editor got %s", end, m.Bytes())
			}

			ed.reply(connect, `{"connectionId":"c1"}`)
			bye := ed.recvMsg()
			if bye.Method != methodMCPDisconnect || string(bye.Params) != `{"connectionId":"c1"}` {
				t.Fatalf("the connection opened after its session ended: the owner got %s; want mcp/disconnect for c1", bye.Bytes())
			}
			ed.reply(bye, `{}`)
			sessionEnded(t, ag.recvMsg(), "50")

			ed.send(`{"jsonrpc":"2.0","id":60,"method":"mcp/message","params":{"connectionId":"c1","method":"ping","params":{}}}`)
			if m := ed.recvMsg(); string(m.ID) != "60" || errorCode(m.Error) != codeInvalidParams ||
				!strings.Contains(errorMessage(m.Error), "unknown MCP connection") {
				t.Errorf("the owner's request on the disconnected connection got %s; want it refused as unknown", m.Bytes())
			}
		})
	}
}

// TestMCPSessionEndsWithCallInFlight: a request-binding agent's call is in
// flight on the connection the conductor shares for it when the session
// ends. The conductor disconnects the connection, so the owner may well
// never answer: the call is answered at once with an error naming why, and
// the owner's late answer goes nowhere.
func TestMCPSessionEndsWithCallInFlight(t *testing.T) {
	var out bytes.Buffer
	rec := trace.NewRecorder(&out, trace.Options{})
	ed, ag, _ := mcpChainWith(t, `{"acp":true}`, Config{Trace: rec})
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/call","params":{"name":"slow"}}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	call := ed.recvMsg()
	if _, method, _ := carried(t, call); method != "tools/call" {
		t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
	}

	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	bye := ed.recvMsg() // sent before the close's answer
	if bye.Method != methodMCPDisconnect {
		t.Fatalf("closing s1: the owner got %s; want mcp/disconnect", bye.Bytes())
	}
	if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
		t.Fatalf("session/close: the editor got %s", m.Bytes())
	}
	ed.reply(bye, `{}`)
	// The owner answers after all; then the editor asks the agent
	// something, which the agent gets next if that answer went nowhere.
	ed.reply(call, `{"content":[]}`)
	ed.send(`{"jsonrpc":"2.0","id":"next","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)

	sessionEnded(t, ag.recvMsg(), "50")
	m := ag.recvMsg()
	if m.Method != "session/new" {
		t.Fatalf("after its call was answered, the agent got %s; want the editor's session/new", m.Bytes())
	}
	// In the trace, the call the conductor answered is answered once: the
	// owner's late answer is not a second one.
	ag.reply(m, `{"sessionId":"s2"}`)
	ed.recvMsg()
	rec.Close()
	answeredOnce(t, readTrace(t, out.String()))
}

// TestAnsweredCallForgotten: a call the conductor answers itself (the
// agent's call on a connection whose session ended) leaves the table of
// calls of the peer asked at once, not when that peer answers, as an
// owner may never do; and the owner's late answer is dropped quietly, to
// no one: the conductor's ids to a peer only increase.
func TestAnsweredCallForgotten(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	var ch *chain
	ed, ag, _ := mcpChainWith(t, `{"acp":true}`, Config{Logger: zap.New(core), running: func(c *chain) { ch = c }})
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/call","params":{"name":"slow"}}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	call := ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	ed.reply(ed.recvMsg(), `{}`) // mcp/disconnect
	if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
		t.Fatalf("session/close: the editor got %s", m.Bytes())
	}
	sessionEnded(t, ag.recvMsg(), "50")
	// The editor's next request reaches the agent once its reader has
	// taken the disconnect's answer, which came before it.
	ed.send(`{"jsonrpc":"2.0","id":"next","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	ag.reply(ag.recvMsg(), `{"sessionId":"s2"}`)
	ed.recvMsg()
	if n := pendingOn(ch.peers[0]); n != 0 {
		t.Errorf("the editor's table holds %d calls once the conductor answered them all; want none", n)
	}

	ed.reply(call, `{"content":[]}`) // late: goes nowhere
	ed.send(`{"jsonrpc":"2.0","id":"again","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	if m := ag.recvMsg(); m.Method != "session/new" {
		t.Fatalf("after the owner's late answer, the agent got %s; want the editor's session/new", m.Bytes())
	}
	if n := logs.FilterMessageSnippet("dropped").Len(); n != 0 {
		t.Errorf("the owner's late answer was warned of: %v", logs.All())
	}
}

// pendingOn returns how many calls p's table holds.
func pendingOn(p *peer) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// TestMCPSessionEndsBridgedStdio: an agent without MCP-over-ACP has a
// bridged stdio server for the session's server. When the last session
// that declared it closes, the bridged connection ends (the shim exits and
// the owner hears mcp/disconnect), the declaration's token is refused
// from then on, saying why, and a later session that declares the server anew gets a
// new token and a server of its own.
func TestMCPSessionEndsBridgedStdio(t *testing.T) {
	ed, ag, declared := mcpChain(t, `{}`, BridgeStdio)
	c := &mcpUser{s: startShim(t, declared)}
	c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	ed.reply(ed.recvMsg(), `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
	if _, errObj, _ := c.recvResult(t); errObj != nil {
		t.Fatalf("initialize: %s", errObj)
	}

	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	owner := newOwnerWatch(t, ed)
	owner.await("close")

	// A shim that presents the revoked token is refused at once, and its
	// client's initialize answered with why; the owner hears nothing of it. (The disconnect of the first connection
	// may reach the owner meanwhile.)
	run := runShimOnce(t, declared)
	for waiting := true; waiting; {
		select {
		case <-run.exited:
			const why = `MCP server \"tools\" is no longer available: session/close ended session \"s1\", which declared it`
			if run.err == nil || !strings.Contains(run.stderr.String(), `refused this shim: MCP server "tools" is no longer available: session/close ended session "s1"`) {
				t.Errorf("a shim with the closed session's token exited with %v, saying %q; want it refused, saying session s1 ended", run.err, &run.stderr)
			}
			if want := `{"jsonrpc":"2.0","id":0,"error":{"code":-33001,"message":"` + why + `"}}` + "\n"; run.stdout.String() != want {
				t.Errorf("a shim with the closed session's token told its client %q, want %q", &run.stdout, want)
			}
			waiting = false
		case l, ok := <-ed.lines:
			if !ok {
				t.Fatal("the editor's input ended")
			}
			owner.saw(mustParse(t, l), "a shim with the closed session's token")
		case <-time.After(20 * time.Second):
			t.Fatal("a shim with the closed session's token neither exited nor reached the owner")
		}
	}
	owner.await("disconnect")
	shimEnded(t, c.s)

	ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
	m := ag.recvMsg()
	anew := oneServer(t, m)
	if envOf(anew, "ACP_CONDUCTOR_MCP_TOKEN") == envOf(declared, "ACP_CONDUCTOR_MCP_TOKEN") {
		t.Fatalf("declared anew, the server was given to the agent as %s; want a new token", anew)
	}
	ag.reply(m, `{"sessionId":"s2"}`)
	ed.recvMsg()
	c2 := &mcpUser{s: startShim(t, anew)}
	c2.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
	connect := ed.recvMsg()
	if got := string(wire.Member(wire.Member(connect.Params, "_meta"), metaSessionID)); connect.Method != methodMCPConnect || got != `"s2"` {
		t.Errorf("the server declared anew in s2 is connected as %s; want mcp/connect for session s2", connect.Bytes())
	}
}

// TestMCPSessionEndsBridgedCallInFlight: a bridged client's call is in
// flight at the owner when the last session that declared the server
// closes. The owner is told (mcp/disconnect, or for an owner that binds
// per request a cancel of the call), and the client's call is answered
// with the error naming the session that ended, before its server goes:
// on stdio ahead of the end of the shim's output, over HTTP on the POST
// that carried it.
func TestMCPSessionEndsBridgedCallInFlight(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		for _, binding := range []string{"connect", "request"} {
			t.Run(transport+"/"+binding, func(t *testing.T) {
				ed, ag, answer := bridgedRequest(t, transport, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait"}}`)
				connect := ed.recvMsg()
				if connect.Method != methodMCPConnect {
					t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
				}
				if binding == "connect" {
					ed.reply(connect, `{"connectionId":"c1"}`)
				} else {
					ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
				}
				call := ed.recvMsg()
				if _, method, _ := carried(t, call); method != "tools/call" {
					t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
				}
				closeS1(t, ed, ag, func(m *wire.Message) bool {
					switch {
					case binding == "connect" && m.Method == methodMCPDisconnect && string(m.Params) == `{"connectionId":"c1"}`:
						ed.reply(m, `{}`)
						return true
					case binding == "request" && m.Method == wire.MethodCancelRequest && string(wire.Member(m.Params, "requestId")) == string(call.ID):
						return true
					}
					return false
				})
				sessionEnded(t, answer(), "7")
			})
		}
	}
}

// TestMCPSessionEndsBridgedInitializeInFlight: a bridged legacy client's
// initialize to an owner that binds per request waits on the owner's
// server/discover, which the conductor sends for it, when the last session
// that declared the server closes. The owner is told (a cancel of the
// discover), and the initialize is answered with the error naming the
// session that ended, as the client's other calls in flight are, not left
// unanswered nor made a success: on stdio ahead of the end of the shim's
// output, over HTTP on the POST that carried it.
func TestMCPSessionEndsBridgedInitializeInFlight(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}`
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			ed, ag, answer := bridgedRequest(t, transport, initialize)
			connect := ed.recvMsg()
			if connect.Method != methodMCPConnect {
				t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			discover := ed.recvMsg()
			if _, method, _ := carried(t, discover); method != "server/discover" {
				t.Fatalf("the owner got %s, want the server/discover for the initialize", discover.Bytes())
			}
			closeS1(t, ed, ag, func(m *wire.Message) bool {
				return m.Method == wire.MethodCancelRequest && string(wire.Member(m.Params, "requestId")) == string(discover.ID)
			})
			sessionEnded(t, answer(), "7")
		})
	}
}

// bridgedRequest starts a chain with one server, owned by the editor and
// bridged over transport ("stdio" or "http") for an agent without
// MCP-over-ACP, whose MCP client sends line. answer returns the client's
// answer to it (see bridgedSend).
func bridgedRequest(t *testing.T, transport, line string) (ed, ag *scripted, answer func() *wire.Message) {
	t.Helper()
	caps, mode := `{}`, BridgeStdio
	if transport == "http" {
		caps, mode = `{"http":true}`, BridgeHTTP
	}
	ed, ag, declared := mcpChain(t, caps, mode)
	return ed, ag, bridgedSend(t, transport, declared, line)
}

// bridgedSend has an MCP client of the server declared, bridged over
// transport, send line, and returns a function that returns the client's
// answer to it: on stdio the shim's next message, after which its output
// must end; over HTTP the message in the reply to the POST that carried it.
func bridgedSend(t *testing.T, transport string, declared json.RawMessage, line string) (answer func() *wire.Message) {
	t.Helper()
	if transport == "stdio" {
		shim := startShim(t, declared)
		shim.send(line)
		return func() *wire.Message {
			m := shim.recvMsg()
			shimEnded(t, shim)
			return m
		}
	}
	url, token := httpDeclaration(t, declared)
	posted := make(chan string, 1)
	go func() {
		_, body := httpMCP(url, token, http.MethodPost, line)
		posted <- body
	}()
	return func() *wire.Message {
		select {
		case body := <-posted:
			// The bridge answers a POST as one event of a stream.
			_, data, _ := strings.Cut(body, "data: ")
			data, _, _ = strings.Cut(data, "\n")
			return mustParse(t, []byte(data))
		case <-time.After(20 * time.Second):
			t.Fatal("the POSTed request was never answered")
			return nil
		}
	}
}

// TestMCPOwnerGoneBridgedInitializeInFlight: a bridged legacy client's
// initialize to a proxy that owns the server and binds per request waits
// on the proxy's server/discover, which the conductor sends for it, when
// the proxy dies, under each failure policy. The initialize is answered
// with an error naming the proxy, as the client's other calls in flight
// are, not left unanswered nor made a success from the declaration: on
// stdio ahead of the end of the shim's output, over HTTP on the POST that
// carried it.
func TestMCPOwnerGoneBridgedInitializeInFlight(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}`
	for _, transport := range []string{"stdio", "http"} {
		for _, policy := range []Policy{PolicyRestart, PolicyBypass, PolicyFail} {
			t.Run(transport+"/"+string(policy), func(t *testing.T) {
				p, declared := proxyOwnedServer(t, transport, policy)
				answer := bridgedSend(t, transport, declared, initialize)
				probe := p.recvMsg()
				if method, _ := carriedMethod(t, probe); method != methodMCPConnect {
					t.Fatalf("the owner got %s; want mcp/connect", probe.Bytes())
				}
				p.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
				if discover := p.recvMsg(); !hasMethod(t, discover, mcpMethodDiscover) {
					t.Fatalf("the owner got %s, want the server/discover for the initialize", discover.Bytes())
				}
				p.w.Close() // the owner dies
				if m := answer(); string(m.ID) != "7" || m.Error == nil || !strings.Contains(errorMessage(m.Error), `"owner"`) {
					t.Fatalf("the client's initialize got %s; want an error naming the owner that went away", m.Bytes())
				}
			})
		}
		// The editor as the owner: it goes away by closing its input,
		// which ends the chain.
		t.Run(transport+"/editor", func(t *testing.T) {
			ed, _, answer := bridgedRequest(t, transport, initialize)
			probe := ed.recvMsg()
			if probe.Method != methodMCPConnect {
				t.Fatalf("the owner got %s; want mcp/connect", probe.Bytes())
			}
			ed.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			if discover := ed.recvMsg(); !hasMethod(t, discover, mcpMethodDiscover) {
				t.Fatalf("the owner got %s, want the server/discover for the initialize", discover.Bytes())
			}
			ed.w.Close()
			if m := answer(); string(m.ID) != "7" || m.Error == nil || !strings.Contains(errorMessage(m.Error), "client: closed its input") {
				t.Fatalf("the client's initialize got %s; want an error saying the owner, the editor, closed its input", m.Bytes())
			}
		})
	}
}

// TestMCPOwnerGoneNativeConnection: a native agent's own connection to a
// server that a proxy owns, opened by mcp/connect (which a connect-binding
// owner answers, or the conductor for one that binds per request), ends
// when the proxy is restarted or bypassed: the agent's call in flight on it
// fails naming the proxy, and its later use of it is answered with why
// (-33001, saying the proxy was restarted or bypassed), not as an unknown
// connection, and reaches no one; its mcp/disconnect succeeds.
func TestMCPOwnerGoneNativeConnection(t *testing.T) {
	for _, binding := range []string{"connect", "request"} {
		for _, policy := range []Policy{PolicyRestart, PolicyBypass} {
			t.Run(binding+"/"+string(policy), func(t *testing.T) {
				_, p, ag, _ := proxyOwnedChain(t, `{"acp":true}`, Config{Proxies: []Component{{OnFailure: policy}}})
				ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
				probe := p.recvMsg()
				if method, _ := carriedMethod(t, probe); method != methodMCPConnect {
					t.Fatalf("the owner got %s; want mcp/connect", probe.Bytes())
				}
				if binding == "connect" {
					p.reply(probe, `{"connectionId":"c1"}`)
				} else {
					p.send(`{"jsonrpc":"2.0","id":` + string(probe.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
				}
				c := &mcpUser{s: ag, cid: string(wire.Member(ag.recvMsg().Result, "connectionId"))}
				c.send("5", "tools/call", `{"name":"slow"}`)
				if call := p.recvMsg(); !hasMethod(t, call, "tools/call") {
					t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
				}
				p.w.Close() // the owner dies
				if m := ag.recvMsg(); string(m.ID) != "5" || m.Error == nil || !strings.Contains(errorMessage(m.Error), `owner`) {
					t.Fatalf("the agent's call in flight got %s; want an error naming the owner", m.Bytes())
				}

				c.send("6", "tools/list", `{}`)
				how := map[Policy]string{PolicyRestart: "restarted", PolicyBypass: "bypassed"}[policy]
				want := `{"code":-33001,"message":"MCP connection ` + jsonEscaped(c.cid) + ` ended: MCP server \"tools\" is no longer available: owner, the proxy that served it, was ` + how +
					`","data":{"connectionId":` + c.cid + `,"serverId":"srv-1"}}`
				if m := ag.recvMsg(); string(m.ID) != "6" || string(m.Error) != want {
					t.Errorf("the agent's use of the connection after its owner was %s got\n%s\nwant error\n%s", how, m.Bytes(), want)
				}
				ag.send(`{"jsonrpc":"2.0","id":"bye","method":"mcp/disconnect","params":{"connectionId":` + c.cid + `}}`)
				if m := ag.recvMsg(); string(m.ID) != `"bye"` || m.Error != nil {
					t.Errorf("the agent's mcp/disconnect of the ended connection got %s; want it to succeed", m.Bytes())
				}
			})
		}
	}
}

// jsonEscaped returns s as it reads inside a JSON string.
func jsonEscaped(s string) string {
	q := string(wire.AppendString(nil, s))
	return q[1 : len(q)-1]
}

// hasMethod reports whether m is an mcp/message, wrapped in a
// proxy/successor envelope or not, that carries method.
func hasMethod(t *testing.T, m *wire.Message, method string) bool {
	t.Helper()
	outer, params := carriedMethod(t, m)
	if outer != methodMCPMessage {
		return false
	}
	inner, _, err := wire.Unwrap(params)
	return err == nil && inner == method
}

// proxyOwnedServer starts a chain of one scripted proxy, "owner", with
// policy, and a scripted agent without MCP-over-ACP, which reaches the
// server over transport ("stdio" or "http"), and opens session s1, in
// which the proxy declares the server srv-1. It returns the proxy's side
// and the server as the agent was declared it.
func proxyOwnedServer(t *testing.T, transport string, policy Policy) (p *scripted, declared json.RawMessage) {
	t.Helper()
	caps, cfg := bridgedBy(transport, Config{Proxies: []Component{{OnFailure: policy}}})
	_, p, _, declared = proxyOwnedChain(t, caps, cfg)
	return p, declared
}

// bridgedBy returns the mcpCapabilities of an agent without MCP-over-ACP
// that reaches servers over transport ("stdio" or "http"), and cfg with
// the bridge for it.
func bridgedBy(transport string, cfg Config) (caps string, _ Config) {
	if transport == "http" {
		cfg.MCPBridge = BridgeHTTP
		return `{"http":true}`, cfg
	}
	cfg.MCPBridge = BridgeStdio
	return `{}`, cfg
}

// proxyOwnedChain is proxyOwnedServer for an agent whose mcpCapabilities
// are caps, with the rest of the chain's configuration in cfg (its one
// proxy's policy, the bridge, the grace period); it returns the editor's
// and the agent's sides too.
func proxyOwnedChain(t *testing.T, caps string, cfg Config) (ed, p, ag *scripted, declared json.RawMessage) {
	t.Helper()
	dir := t.TempDir()
	pc, pStarted := scriptedComponent(t, dir, "owner")
	pc.OnFailure = cfg.Proxies[0].OnFailure
	ac, aStarted := scriptedComponent(t, dir, "agent")
	cfg.Proxies, cfg.Agent, cfg.RestartBackoff = []Component{pc}, ac, time.Millisecond
	ed = scriptedEditor(startChain(t, cfg))
	p, ag = pStarted(), aStarted()
	ed.send(initLine)
	pinit := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":`+caps+`}}`)
	p.recvMsg()
	p.reply(pinit, `{"protocolVersion":1}`)
	ed.recvMsg()
	ed.send(`{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	setup := p.recvMsg()
	p.send(`{"jsonrpc":"2.0","id":"n1","method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","serverId":"srv-1"}]}}}`)
	m := ag.recvMsg()
	declared = oneServer(t, m)
	ag.reply(m, `{"sessionId":"s1"}`)
	p.reply(setup, string(p.recvMsg().Result))
	if m := ed.recvMsg(); string(m.ID) != `"n"` || m.Error != nil {
		t.Fatalf("session/new: the editor got %s", m.Bytes())
	}
	return ed, p, ag, declared
}

// closeS1 closes session s1, as the editor, and reads what the owner (the
// editor too) is sent until the close is answered and told has taken one
// message, that telling the owner its server is gone; any other message
// fails t.
func closeS1(t *testing.T, ed, ag *scripted, told func(*wire.Message) bool) {
	t.Helper()
	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	for wasTold, closed := false, false; !wasTold || !closed; {
		switch m := ed.recvMsg(); {
		case string(m.ID) == `"close"` && m.Error == nil:
			closed = true
		case !wasTold && told(m):
			wasTold = true
		default:
			t.Fatalf("after the close, the owner got %s", m.Bytes())
		}
	}
}

// TestMCPSessionEndsWhileBridgedOpening: a bridged client's connection is
// being opened (its owner has mcp/connect, unanswered) when the last
// session that declared the server closes. Once the owner answers, the
// connection ends: the owner hears mcp/disconnect for it, and the shim
// exits.
func TestMCPSessionEndsWhileBridgedOpening(t *testing.T) {
	ed, ag, declared := mcpChain(t, `{}`, BridgeStdio)
	c := &mcpUser{s: startShim(t, declared)}
	c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
	connect := ed.recvMsg()
	if connect.Method != methodMCPConnect {
		t.Fatalf("the owner got %s, want mcp/connect", connect.Bytes())
	}
	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
		t.Fatalf("session/close: the editor got %s", m.Bytes())
	}
	ed.reply(connect, `{"connectionId":"c1"}`)
	for {
		m := ed.recvMsg()
		if m.Method == methodMCPDisconnect && string(m.Params) == `{"connectionId":"c1"}` {
			ed.reply(m, `{}`)
			break
		}
		// The client's initialize may have been read before the
		// connection closed; nothing else may come.
		if _, method, _ := carried(t, m); method != "initialize" {
			t.Fatalf("the connection opened after its session ended: the owner got %s; want mcp/disconnect for c1", m.Bytes())
		}
	}
	shimEnded(t, c.s)
}

// TestMCPSessionEndsWhileDeclaredAnew: a session that declares the server
// is being set up (the agent has its session/new, with the server's
// bridged declaration, and has not answered) when the last other session
// that declared it closes. The server stays served: the new session's
// declaration works, for the new session.
func TestMCPSessionEndsWhileDeclaredAnew(t *testing.T) {
	ed, ag, _ := mcpChain(t, `{}`, BridgeStdio)
	ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
	setup := ag.recvMsg()
	declared := oneServer(t, setup)
	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
		t.Fatalf("session/close: the editor got %s", m.Bytes())
	}
	ag.reply(setup, `{"sessionId":"s2"}`)
	ed.recvMsg()

	c := &mcpUser{s: startShim(t, declared)}
	c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
	connect := ed.recvMsg()
	if got := string(wire.Member(wire.Member(connect.Params, "_meta"), metaSessionID)); connect.Method != methodMCPConnect || got != `"s2"` {
		t.Errorf("the server of s2, set up as s1 closed, is connected as %s; want mcp/connect for session s2", connect.Bytes())
	}
}

// TestMCPSessionEndsBridgedHTTP: as TestMCPSessionEndsBridgedStdio, for an
// agent that reaches the bridge over HTTP: the open MCP session ends, and
// the URL with its token answers 410 from then on, saying why (404 with
// any other token).
func TestMCPSessionEndsBridgedHTTP(t *testing.T) {
	ed, ag, declared := mcpChain(t, `{"http":true}`, BridgeHTTP)
	url, token := httpDeclaration(t, declared)
	opened := make(chan int, 1)
	go func() {
		status, _ := httpMCP(url, token, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}`)
		opened <- status
	}()
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	ed.reply(ed.recvMsg(), `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`)
	if status := <-opened; status != http.StatusOK {
		t.Fatalf("initialize over HTTP: status %d", status)
	}
	if status, _ := httpMCP(url, token, http.MethodDelete, ""); status != http.StatusBadRequest {
		t.Fatalf("a DELETE without a session, before the close, got %d; want 400 (admitted)", status)
	}

	ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
	ag.reply(ag.recvMsg(), `{}`)
	owner := newOwnerWatch(t, ed)
	owner.await("close")
	if status, body := httpMCP(url, token, http.MethodDelete, ""); status != http.StatusGone || !strings.Contains(body, `"code":-33001`) ||
		!strings.Contains(body, `is no longer available: session/close ended session \"s1\"`) {
		t.Fatalf("after the close, the declaration's URL answered %d %s; want 410 saying session s1 ended", status, body)
	}
	if status, body := httpMCP(url, strings.Repeat("0", 64), http.MethodDelete, ""); status != http.StatusNotFound || !strings.Contains(body, "unknown MCP route") {
		t.Fatalf("after the close, the declaration's URL answered %d %s to another token; want 404, unknown route", status, body)
	}
	owner.await("disconnect")

	ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
	m := ag.recvMsg()
	url2, token2 := httpDeclaration(t, oneServer(t, m))
	if token2 == token {
		t.Errorf("declared anew, the server kept the revoked token")
	}
	if status, _ := httpMCP(url2, token2, http.MethodDelete, ""); status != http.StatusBadRequest {
		t.Errorf("the new declaration's URL answered %d; want 400 (admitted)", status)
	}
}

// An ownerWatch reads what the owner (the editor) gets after a
// session/close whose answer and the bridged connection's mcp/disconnect
// may come in either order, and answers the disconnect.
type ownerWatch struct {
	t    *testing.T
	ed   *scripted
	seen map[string]bool // "close", "disconnect"
}

func newOwnerWatch(t *testing.T, ed *scripted) *ownerWatch {
	return &ownerWatch{t: t, ed: ed, seen: map[string]bool{}}
}

// saw notes m, failing the test for anything but the two expected.
func (w *ownerWatch) saw(m *wire.Message, after string) {
	w.t.Helper()
	switch {
	case string(m.ID) == `"close"` && m.Error == nil:
		w.seen["close"] = true
	case m.Method == methodMCPDisconnect && string(m.Params) == `{"connectionId":"c1"}`:
		w.seen["disconnect"] = true
		w.ed.reply(m, `{}`)
	default:
		w.t.Fatalf("after %s, the owner got %s", after, m.Bytes())
	}
}

// await reads until what has been seen.
func (w *ownerWatch) await(what string) {
	w.t.Helper()
	for !w.seen[what] {
		w.saw(w.ed.recvMsg(), "the close")
	}
}

func mustParse(t *testing.T, line []byte) *wire.Message {
	t.Helper()
	m, err := wire.Parse(line)
	if err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return m
}

// shimEnded fails t unless the shim's output ends with nothing more.
func shimEnded(t *testing.T, s *scripted) {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if ok {
			t.Fatalf("the shim wrote %s; want its output to end", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the shim's output never ended: its server is still there")
	}
}

// A shimRun is a declared stdio server run with nothing on its input.
type shimRun struct {
	exited chan struct{}
	err    error        // how it exited, once it has
	stdout bytes.Buffer // what its client was told, once it has exited
	stderr bytes.Buffer // what it said, once it has exited
}

// runShimOnce runs the declared stdio server with an initialize, and then
// the end, on its input.
func runShimOnce(t *testing.T, decl json.RawMessage) *shimRun {
	t.Helper()
	run := &shimRun{exited: make(chan struct{})}
	cmd := shimCommand(t, decl)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}}` + "\n")
	cmd.Stdout, cmd.Stderr = &run.stdout, &run.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { run.err = cmd.Wait(); close(run.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-run.exited
	})
	return run
}

// envOf returns the value of the environment variable name in a stdio
// declaration.
func envOf(decl json.RawMessage, name string) string {
	var d struct {
		Env []struct{ Name, Value string }
	}
	json.Unmarshal(decl, &d)
	for _, kv := range d.Env {
		if kv.Name == name {
			return kv.Value
		}
	}
	return ""
}

// httpDeclaration returns the URL and bearer token of an HTTP declaration.
func httpDeclaration(t *testing.T, decl json.RawMessage) (url, token string) {
	t.Helper()
	var d struct {
		Type, URL string
		Headers   []struct{ Name, Value string }
	}
	json.Unmarshal(decl, &d)
	for _, h := range d.Headers {
		if h.Name == "Authorization" {
			token, _ = strings.CutPrefix(h.Value, "Bearer ")
		}
	}
	if d.Type != "http" || d.URL == "" || token == "" {
		t.Fatalf("not an HTTP declaration with a token: %s", decl)
	}
	return d.URL, token
}

// httpMCP sends one request to a bridged HTTP server and returns its
// status and body.
func httpMCP(url, token, method, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A session/new that fails sets up no session, and a session/load that
// fails may name one that does not exist: nothing would ever close the
// servers only they declared, so those end with the answer, and their
// bridged declarations stop working. A server the loaded session had
// declared before stays.
func TestMCPSessionSetupFails(t *testing.T) {
	for _, tc := range []struct{ name, setup string }{
		{"new", `"method":"session/new","params":{"cwd":"/"`},
		{"load", `"method":"session/load","params":{"sessionId":"gone","cwd":"/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ed, ag, first := mcpChain(t, `{"http":true}`, BridgeHTTP)
			url1, token1 := httpDeclaration(t, first)
			ed.send(`{"jsonrpc":"2.0","id":3,` + tc.setup + `,"mcpServers":[{"type":"acp","name":"more","id":"srv-2"}]}}`)
			m := ag.recvMsg()
			url, token := httpDeclaration(t, oneServer(t, m))
			if status, _ := httpMCP(url, token, http.MethodDelete, ""); status != http.StatusBadRequest {
				t.Fatalf("before the answer, the declaration's URL answered %d; want 400 (admitted)", status)
			}
			ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32603,"message":"no room"}}`)
			if resp := ed.recvMsg(); resp.Error == nil {
				t.Fatalf("the editor got %s; want the agent's error", resp.Result)
			}
			if status, body := httpMCP(url, token, http.MethodDelete, ""); status != http.StatusGone || !strings.Contains(body, `"code":-33001`) ||
				!strings.Contains(body, `that declared it failed`) {
				t.Fatalf("after the failed set-up, its declaration's URL answered %d %s; want 410 saying the set-up failed", status, body)
			}

			// The same session again, declaring the first session's server:
			// failing, it leaves that server to the session that has it.
			ed.send(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"s1","cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
			m = ag.recvMsg()
			ag.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32603,"message":"busy"}}`)
			ed.recvMsg()
			if status, _ := httpMCP(url1, token1, http.MethodDelete, ""); status != http.StatusBadRequest {
				t.Fatalf("after a failed load of its session, the first server's URL answered %d; want 400 (admitted)", status)
			}
		})
	}
}

// TestMCPSessionEndsAsBridgedAdmitted: a bridged client is admitted (its
// token still good) just before the last session that declared its server
// ends, and reaches the relay just after: the test holds it between the
// two. Its first request is answered with why the server is gone, the
// session's end, and the shim exits.
func TestMCPSessionEndsAsBridgedAdmitted(t *testing.T) {
	for _, end := range []string{"session/close", "session/delete"} {
		t.Run(end, func(t *testing.T) {
			admitted, release := make(chan struct{}), make(chan struct{})
			var held, released sync.Once
			t.Cleanup(func() { released.Do(func() { close(release) }) })
			ed, ag, declared := mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, bridgeAccept: func(*mcpbridge.Conn) {
				held.Do(func() { close(admitted); <-release })
			}})
			c := &mcpUser{s: startShim(t, declared)}
			c.send("0", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client","version":"1"}}`)
			select {
			case <-admitted:
			case <-time.After(20 * time.Second):
				t.Fatal("the shim was never admitted")
			}

			ed.send(`{"jsonrpc":"2.0","id":"end","method":"` + end + `","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			if m := ed.recvMsg(); string(m.ID) != `"end"` || m.Error != nil {
				t.Fatalf("%s: the editor got %s", end, m.Bytes())
			}
			released.Do(func() { close(release) })

			m := c.s.recvMsg()
			if string(m.ID) != "0" || errorCode(m.Error) != codeMCPServerUnavailable ||
				!strings.Contains(errorMessage(m.Error), end+` ended session "s1"`) {
				t.Fatalf("the client admitted as %s ended got %s; want its request answered with an error saying so", end, m.Bytes())
			}
			shimEnded(t, c.s)
		})
	}
}

// TestMCPDeclarationWithoutID: an acp MCP server entry with an empty or no
// id names no server anyone can reach: the agent's calls, and the
// bridge's shim, find a server by its id. The session set-up that carries
// one is refused with invalid params naming the entry, and goes no
// further, whatever the agent; the schema requires the id, and an SDK
// agent refuses a set-up whose entry lacks it the same way.
func TestMCPDeclarationWithoutID(t *testing.T) {
	for _, agent := range []struct{ name, caps string }{{"native", `{"acp":true}`}, {"bridged", `{}`}} {
		for _, entry := range []string{`"id":""`, `"serverId":""`, `"id":"","serverId":""`, `"serverId":7`, `"x":1`} {
			t.Run(agent.name+"/"+entry, func(t *testing.T) {
				ed, ag, _ := mcpChain(t, agent.caps, BridgeStdio)
				ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-2"},{"type":"acp","name":"nameless",` + entry + `}]}}`)
				select {
				case l := <-ed.lines:
					m := mustParse(t, l)
					if string(m.ID) != "3" || errorCode(m.Error) != codeInvalidParams || !strings.Contains(errorMessage(m.Error), `mcpServers[1] ("nameless")`) {
						t.Fatalf("the editor got %s; want its session/new refused, naming the entry", l)
					}
				case l := <-ag.lines:
					t.Fatalf("the agent got %s; want the session/new refused before it", l)
				case <-time.After(20 * time.Second):
					t.Fatal("the session/new was neither refused nor passed on")
				}
				// The chain goes on: the next set-up reaches the agent.
				ed.send(`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-2"}]}}`)
				if m := ag.recvMsg(); m.Method != "session/new" || !strings.Contains(string(m.Params), `"tools"`) {
					t.Fatalf("the agent got %s, want the next session/new", m.Bytes())
				}
			})
		}
	}
}

// TestMCPRoutesForgetNativeConnections: an agent that connects to a
// server in each session and never disconnects leaves nothing in the
// routes once each session has ended but what says why its connections
// ended, and of that only the last maxEndedConns.
func TestMCPRoutesForgetNativeConnections(t *testing.T) {
	r := newMCPRoutes()
	const n = maxEndedConns + 10
	for i := range n {
		session := `"s` + strconv.Itoa(i) + `"`
		if _, _, e := r.declare(0, "session/load", json.RawMessage(`{"sessionId":`+session+`,"mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}`)); e != nil {
			t.Fatal(e)
		}
		if _, ok := r.open(0, "id", "srv-1", []byte(`"c`+strconv.Itoa(i)+`"`)); !ok {
			t.Fatalf("session %s: the connection was not opened", session)
		}
		if r.openStateless(mcpServer{owner: 0}, "srv-1", nil, nil) == nil {
			t.Fatalf("session %s: the stateless connection was not opened", session)
		}
		e := r.sessionEnded("session/close", session)
		if len(e.native) != 2 {
			t.Fatalf("session %s ended %d native connections, want 2", session, len(e.native))
		}
	}
	if len(r.conns) != 0 || len(r.owned) != 0 || len(r.servers) != 0 {
		t.Errorf("after %d sessions ended, the routes hold %d connections for the agent, %d by owner, %d servers; want none", n, len(r.conns), len(r.owned), len(r.servers))
	}
	if r.ended.Len() != maxEndedConns {
		t.Errorf("the routes remember %d ended connections, want %d", r.ended.Len(), maxEndedConns)
	}
	if _, ok := r.ended.lookup([]byte(`"c0"`)); ok {
		t.Error("the first ended connection is still remembered")
	}
	if why, ok := r.ended.lookup([]byte(`"c` + strconv.Itoa(n-1) + `"`)); !ok || !strings.Contains(why.Message, `ended session "s`+strconv.Itoa(n-1)+`"`) {
		t.Errorf("the last ended connection: %v, %v; want it remembered with its session's end", why, ok)
	}
}

// TestMCPEndedConnSpelledOtherwise: the agent may name a connection that
// ended as its own encoder spells the connectionId, not as it was given
// ("c\u00261" for "c&1", 7.0 for 7): the same JSON value finds why it
// ended, as byAgent finds a live one; another value, or a string for a
// number, finds nothing.
func TestMCPEndedConnSpelledOtherwise(t *testing.T) {
	var e endedConns
	e.Limit = maxEndedConns
	for _, id := range []string{`"c&1"`, `"\u00e9t\u00e9"`, `"c-1"`, `7`} {
		e.Add(id, wire.Errorf(codeInvalidParams, "%s", id))
	}
	for _, tt := range []struct {
		id, want string // want is the connection found, "" for none
	}{
		{`"c&1"`, `"c&1"`},
		{`"c\u00261"`, `"c&1"`},
		{`"été"`, `"\u00e9t\u00e9"`},
		{`"\u00e9t\u00e9"`, `"\u00e9t\u00e9"`},
		{`"c\u002d1"`, `"c-1"`},
		{`7.0`, `7`},
		{`7e0`, `7`},
		{`"7"`, ""},
		{`"c&2"`, ""},
		{`8`, ""},
		{``, ""},
	} {
		why, ok := e.lookup([]byte(tt.id))
		got := ""
		if ok {
			got = why.Message
		}
		if got != tt.want {
			t.Errorf("lookup(%s) found %q, want %q", tt.id, got, tt.want)
		}
	}
}

// TestMCPSessionEndsNativeConnection: a native agent's own connection to
// a server (opened by mcp/connect, which a connect-binding owner answers,
// or the conductor for one that binds per request) ends with the last
// session that declared the server, as the shared and bridged ones do,
// however the agent behaves after: an agent that connects in each session
// and never disconnects must not grow the conductor. The owner is told
// (mcp/disconnect, or a cancel of the call in flight) before the close's
// answer; the agent's call in flight is answered at once with why; its
// later use of the connection is answered with why and reaches no owner,
// and its mcp/disconnect succeeds. Closing a session while another that
// declared the server is open leaves the connection served.
func TestMCPSessionEndsNativeConnection(t *testing.T) {
	for _, binding := range []string{"connect", "request"} {
		t.Run(binding, func(t *testing.T) {
			ed, c := openMCP(t, false, binding)
			ag := c.s
			ed.send(`{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/","mcpServers":[{"type":"acp","name":"tools","id":"srv-1"}]}}`)
			ag.reply(ag.recvMsg(), `{"sessionId":"s2"}`)
			ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":"close-s2","method":"session/close","params":{"sessionId":"s2"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			if m := ed.recvMsg(); string(m.ID) != `"close-s2"` || m.Error != nil {
				t.Fatalf("closing s2 while s1 declares the server: the editor got %s; want only the close's answer", m.Bytes())
			}
			c.send("5", "tools/call", `{"name":"slow"}`)
			call := recvRequest(t, ed) // s1 still serves it

			ed.send(`{"jsonrpc":"2.0","id":"close-s1","method":"session/close","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			told := ed.recvMsg()
			switch binding {
			case "connect":
				if told.Method != methodMCPDisconnect || string(told.Params) != `{"connectionId":"c1"}` {
					t.Fatalf("closing s1: the owner got %s; want mcp/disconnect for c1", told.Bytes())
				}
				ed.reply(told, `{}`)
			case "request":
				if told.Method != wire.MethodCancelRequest || string(wire.Member(told.Params, "requestId")) != string(call.ID) {
					t.Fatalf("closing s1: the owner got %s; want a cancel of call %s", told.Bytes(), call.ID)
				}
			}
			if m := ed.recvMsg(); string(m.ID) != `"close-s1"` || m.Error != nil {
				t.Fatalf("closing s1: the editor got %s; want the close's answer", m.Bytes())
			}
			sessionEnded(t, ag.recvMsg(), "5")
			ed.reply(call, `{"content":[]}`) // late: goes nowhere

			c.send("6", "tools/list", `{}`)
			m := firstTo(t, ag, ed, "the agent's tools/list on the ended connection")
			sessionEnded(t, m, "6")
			if !strings.Contains(errorMessage(m.Error), "MCP connection "+c.cid+" ended") || string(wire.Member(m.Error, "data")) == "" ||
				string(wire.Member(wire.Member(m.Error, "data"), "connectionId")) != c.cid {
				t.Errorf("the agent's use of the ended connection got %s; want an error naming connection %s", m.Bytes(), c.cid)
			}
			ag.send(`{"jsonrpc":"2.0","id":"bye","method":"mcp/disconnect","params":{"connectionId":` + c.cid + `}}`)
			if m := firstTo(t, ag, ed, "the agent's mcp/disconnect of the ended connection"); string(m.ID) != `"bye"` || m.Error != nil {
				t.Errorf("the agent's mcp/disconnect of the ended connection got %s; want it to succeed", m.Bytes())
			}
		})
	}
}

// TestMCPErrorDataServerID: the conductor's own errors name a server in
// their data by its id as a JSON string without HTML escaping, as the
// rest of the data (a connectionId as it came) is written: "R&D", not
// "R\u0026D", however the editor spelled it. A native agent's call in
// flight when the server's last session ends, and its later use of the
// connection, are told so.
func TestMCPErrorDataServerID(t *testing.T) {
	for _, tt := range []struct {
		name     string
		declared string // the server id as the editor declares it
		want     string // as the conductor's error data names it
	}{
		{"plain", `"srv-1"`, `"srv-1"`},
		{"ampersand", `"R&D"`, `"R&D"`},
		{"ampersand escaped", `"R\u0026D"`, `"R&D"`},
		{"angle brackets", `"\u003ctools\u003e"`, `"<tools>"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, ag, setUp := mcpSetUp(t, `{"acp":true}`, Config{}, tt.declared)
			id := wire.Member(oneServer(t, setUp), "id")
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":` + string(id) + `}}`)
			ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`)
			c := &mcpUser{s: ag, cid: string(wire.Member(ag.recvMsg().Result, "connectionId"))}
			c.send("5", "tools/call", `{"name":"slow"}`)
			recvRequest(t, ed)

			ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			ed.reply(ed.recvMsg(), `{}`) // mcp/disconnect
			ed.recvMsg()                 // the close's answer
			for _, want := range []struct{ id, data string }{
				{"5", `{"serverId":` + tt.want + `,"sessionId":"s1"}`},
				{"6", `{"connectionId":"c1","serverId":` + tt.want + `,"sessionId":"s1"}`},
			} {
				if want.id == "6" {
					c.send("6", "tools/list", `{}`)
				}
				m := ag.recvMsg()
				if got := string(wire.Member(m.Error, "data")); string(m.ID) != want.id || errorCode(m.Error) != codeMCPServerUnavailable || got != want.data {
					t.Errorf("the agent's call %s got %s; want -33001 with data %s", want.id, m.Raw, want.data)
				}
			}
		})
	}
}

// TestMCPSessionEndsWhileNativeOpening: the last session that declared a
// server ends while its owner answers a native agent's mcp/connect. No
// connection is kept for a server that is gone: the agent's connect is
// answered with why, and a connection the owner opened meanwhile is
// disconnected.
func TestMCPSessionEndsWhileNativeOpening(t *testing.T) {
	for _, binding := range []string{"connect", "request"} {
		t.Run(binding, func(t *testing.T) {
			ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
			connect := ed.recvMsg()
			ed.send(`{"jsonrpc":"2.0","id":"close","method":"session/close","params":{"sessionId":"s1"}}`)
			ag.reply(ag.recvMsg(), `{}`)
			if m := ed.recvMsg(); string(m.ID) != `"close"` || m.Error != nil {
				t.Fatalf("session/close: the editor got %s", m.Bytes())
			}
			if binding == "connect" {
				ed.reply(connect, `{"connectionId":"c1"}`)
				if bye := ed.recvMsg(); bye.Method != methodMCPDisconnect || string(bye.Params) != `{"connectionId":"c1"}` {
					t.Fatalf("the connection opened after its server ended: the owner got %s; want mcp/disconnect for c1", bye.Bytes())
				} else {
					ed.reply(bye, `{}`)
				}
			} else {
				ed.send(`{"jsonrpc":"2.0","id":` + string(connect.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`)
			}
			if m := ag.recvMsg(); string(m.ID) != `"open"` || errorCode(m.Error) != codeMCPServerUnavailable ||
				!strings.Contains(errorMessage(m.Error), "its last session ended while client opened the connection") {
				t.Errorf("the agent's mcp/connect got %s; want it refused, saying the server's last session ended", m.Bytes())
			}
		})
	}
}

// TestMCPOwnerGoneRequestCaller: a request-binding agent's call, on the
// connection the conductor shares to a connect-binding owner, is in
// flight when the owner goes away (the editor closes its input). The
// call is answered with the conductor's error naming the owner, as an
// ACP error: the hook that carries the owner's MCP answers as {error}
// outcomes must not shape it, or the agent would take it for the server's
// answer.
func TestMCPOwnerGoneRequestCaller(t *testing.T) {
	ed, ag, _ := mcpChain(t, `{"acp":true}`, "")
	ag.send(`{"jsonrpc":"2.0","id":50,"method":"mcp/message","params":{"serverId":"srv-1","requestId":"r1","method":"tools/call","params":{"name":"slow"}}}`)
	ed.reply(ed.recvMsg(), `{"connectionId":"c1"}`) // mcp/connect
	if call := ed.recvMsg(); !hasMethod(t, call, "tools/call") {
		t.Fatalf("the owner got %s, want the tools/call", call.Bytes())
	}
	ed.w.Close()
	m := ag.recvMsg()
	if string(m.ID) != "50" || m.Result != nil || m.Error == nil || !strings.Contains(errorMessage(m.Error), "client: closed its input") {
		t.Fatalf("the agent's call got %s; want the conductor's error, saying the owner, the editor, closed its input", m.Bytes())
	}
}

// TestMCPOwnerGoneAtStopEndsShim: a bridged stdio client's call is in
// flight at the server's owner when the chain stops: the owner, a proxy,
// fails under the fail policy; the owner, the editor, closes its input;
// or the editor closes its input and the owner, a proxy, exits at the end
// of its own. The call is answered at once with an error naming the
// owner, and the shim's output ends then, not when the chain has
// stopped: the agent, which does not exit at the end of its input, is
// held for the grace period (a minute) while it does.
func TestMCPOwnerGoneAtStopEndsShim(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"wait"}}`
	for _, stop := range []string{"owner fails", "editor leaves", "owner ends with the chain"} {
		t.Run(stop, func(t *testing.T) {
			var ed, owner *scripted
			var answer func() *wire.Message
			want := `"owner"`
			if stop == "editor leaves" {
				var declared json.RawMessage
				ed, _, declared = mcpChainWith(t, `{}`, Config{MCPBridge: BridgeStdio, GracePeriod: time.Minute})
				answer = bridgedSend(t, "stdio", declared, call)
				owner, want = ed, "client: closed its input"
			} else {
				var declared json.RawMessage
				caps, cfg := bridgedBy("stdio", Config{Proxies: []Component{{OnFailure: PolicyFail}}, GracePeriod: time.Minute})
				ed, owner, _, declared = proxyOwnedChain(t, caps, cfg)
				answer = bridgedSend(t, "stdio", declared, call)
			}
			connect := owner.recvMsg()
			if method, _ := carriedMethod(t, connect); method != methodMCPConnect {
				t.Fatalf("the owner got %s; want mcp/connect", connect.Bytes())
			}
			owner.reply(connect, `{"connectionId":"c1"}`)
			if m := owner.recvMsg(); !hasMethod(t, m, "tools/call") {
				t.Fatalf("the owner got %s; want the tools/call", m.Bytes())
			}
			switch stop {
			case "owner fails":
				owner.w.Close()
			case "editor leaves":
				ed.w.Close()
			case "owner ends with the chain":
				ed.w.Close()
				inputEnded(t, owner)
				owner.w.Close()
				want = "the request was waiting on owner"
			}
			if m := answer(); string(m.ID) != "7" || m.Error == nil || !strings.Contains(errorMessage(m.Error), want) {
				t.Fatalf("the client's call got %s; want an error saying %s", m.Bytes(), want)
			}
		})
	}
}

// inputEnded fails t unless s's input ends, with nothing more on it.
func inputEnded(t *testing.T, s *scripted) {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if ok {
			t.Fatalf("%s got %s; want its input to end", s.name, l)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: its input never ended", s.name)
	}
}

// TestMCPVariantConnectionID: a connectionId the conductor makes up, for
// a connection whose owner gave an id another connection holds, is
// written without HTML escaping ("R&D~2", not "R\u0026D~2"), as the
// owner's own spelling of an id it did not have to change reaches the
// agent as it came.
func TestMCPVariantConnectionID(t *testing.T) {
	for _, tt := range []struct {
		name  string
		owner string // the connectionId the owner gives both connections
		want  string // the second's, as the agent gets it
	}{
		{"plain", `"c1"`, `"c1~2"`},
		{"ampersand", `"R&D"`, `"R&D~2"`},
		{"ampersand escaped", `"R\u0026D"`, `"R&D~2"`},
		{"angle brackets", `"<c>"`, `"<c>~2"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, ag, declared := mcpChainWith(t, `{"acp":true}`, Config{})
			id := wire.Member(declared, "id")
			var got []string
			for _, open := range []string{"open1", "open2"} {
				ag.send(`{"jsonrpc":"2.0","id":"` + open + `","method":"mcp/connect","params":{"acpId":` + string(id) + `}}`)
				ed.reply(ed.recvMsg(), `{"connectionId":`+tt.owner+`}`)
				got = append(got, string(wire.Member(ag.recvMsg().Result, "connectionId")))
			}
			if got[0] != tt.owner || got[1] != tt.want {
				t.Errorf("the agent's connections got ids %s; want %s as the owner gave it, then %s", got, tt.owner, tt.want)
			}
		})
	}
}

// TestMCPOwnerGoneServer: once the proxy that owns a server is restarted
// or bypassed, the agent's new mcp/connect to that server, or its
// request-binding call to it, is answered with why (-33001, saying the
// proxy was restarted or bypassed), not routed by position as for a
// server no one in the chain declared: that would reach the editor (or,
// in a nested conductor, the parent, which would take the editor's
// refusal for the owner's binding), which knows nothing of the server.
func TestMCPOwnerGoneServer(t *testing.T) {
	for _, policy := range []Policy{PolicyRestart, PolicyBypass} {
		t.Run(string(policy), func(t *testing.T) {
			_, p, ag, _ := proxyOwnedChain(t, `{"acp":true}`, Config{Proxies: []Component{{OnFailure: policy}}})
			ag.send(`{"jsonrpc":"2.0","id":"open","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
			p.reply(p.recvMsg(), `{"connectionId":"c1"}`)
			c := &mcpUser{s: ag, cid: string(wire.Member(ag.recvMsg().Result, "connectionId"))}
			c.send("5", "tools/call", `{"name":"slow"}`)
			p.recvMsg()
			p.w.Close() // the owner dies
			// The call in flight fails once the failure is handled, and
			// so the policy applied.
			if m := ag.recvMsg(); string(m.ID) != "5" || m.Error == nil {
				t.Fatalf("the agent's call in flight got %s; want an error", m.Bytes())
			}

			how := map[Policy]string{PolicyRestart: "restarted", PolicyBypass: "bypassed"}[policy]
			want := `{"code":-33001,"message":"MCP server \"tools\" is no longer available: owner, the proxy that served it, was ` + how + `","data":{"serverId":"srv-1"}}`
			ag.send(`{"jsonrpc":"2.0","id":"again","method":"mcp/connect","params":{"acpId":"srv-1"}}`)
			if m := ag.recvMsg(); string(m.ID) != `"again"` || string(m.Error) != want {
				t.Errorf("the agent's mcp/connect after the owner was %s got\n%s\nwant error\n%s", how, m.Bytes(), want)
			}
			ag.send(`{"jsonrpc":"2.0","id":"call","method":"mcp/message","params":{"serverId":"srv-1","requestId":1,"method":"tools/list","params":{}}}`)
			if m := ag.recvMsg(); string(m.ID) != `"call"` || string(m.Error) != want {
				t.Errorf("the agent's call after the owner was %s got\n%s\nwant error\n%s", how, m.Bytes(), want)
			}
		})
	}
}
