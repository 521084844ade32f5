package conductor

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestAdvertiseMCPOverACP: MCP-over-ACP is advertised, to the editor and
// to a proxy from its successor alike, only where something can serve
// an acp server: the agent natively, or the bridge over a transport the
// agent took (v1: stdio always; v2: only what capabilities.session.mcp
// lists, and only those of mcp_bridge's mode). A proxy's own acp servers
// go through the same bridge, so it is told no more than the editor.
func TestAdvertiseMCPOverACP(t *testing.T) {
	const (
		v1 = `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":%s}}`
		v2 = `{"protocolVersion":2,"capabilities":{"session":{"mcp":%s}}}`
	)
	for _, tt := range []struct {
		answer string
		mode   BridgeMode
		want   bool
	}{
		{strings.Replace(v1, "%s", `{}`, 1), BridgeAuto, true},
		{strings.Replace(v1, "%s", `{}`, 1), BridgeStdio, true},
		{strings.Replace(v2, "%s", `{}`, 1), BridgeAuto, false},
		{`{"protocolVersion":2,"capabilities":{"session":{}}}`, BridgeAuto, false},
		{strings.Replace(v2, "%s", `{"stdio":{}}`, 1), BridgeAuto, true},
		{strings.Replace(v2, "%s", `{"http":{}}`, 1), BridgeAuto, true},
		{strings.Replace(v2, "%s", `{"http":{}}`, 1), BridgeHTTP, true},
		{strings.Replace(v2, "%s", `{"http":{}}`, 1), BridgeStdio, false},
		{strings.Replace(v2, "%s", `{"stdio":{}}`, 1), BridgeStdio, true},
		{strings.Replace(v2, "%s", `{"acp":{}}`, 1), BridgeStdio, true},
	} {
		t.Run(string(tt.mode)+" "+tt.answer, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			agent, agentStarted := scriptedComponent(t, dir, "agent")
			ed := scriptedEditor(startChain(t, Config{Proxies: []Component{proxy}, Agent: agent, MCPBridge: tt.mode}))
			px, ag := proxyStarted(), agentStarted()
			ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`)
			init := px.recvMsg()
			px.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":2}}}`)
			ag.reply(ag.recvMsg(), tt.answer)
			seen := px.recvMsg()
			if got := wire.HasMCPOverACP(seen.Result); got != tt.want {
				t.Errorf("the proxy saw %s: MCP-over-ACP advertised %v, want %v", seen.Result, got, tt.want)
			}
			px.reply(init, string(seen.Result))
			answer := ed.recvMsg()
			if got := wire.HasMCPOverACP(answer.Result); got != tt.want {
				t.Errorf("the editor saw %s: MCP-over-ACP advertised %v, want %v", answer.Result, got, tt.want)
			}
		})
	}
}

// TestAdvertiseMCPOverACPProxyMode: in proxy mode the parent bridges for
// the whole tree, so a v2 parent's answer that claims no MCP-over-ACP is
// believed, and passed on to the inner proxy and back to the parent as
// it is; a v1 parent can always bridge (stdio is built in).
func TestAdvertiseMCPOverACPProxyMode(t *testing.T) {
	for _, tt := range []struct {
		answer string
		want   bool
	}{
		{`{"protocolVersion":1,"agentCapabilities":{}}`, true},
		{`{"protocolVersion":2,"capabilities":{"session":{"mcp":{}}}}`, false},
		{`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"acp":{}}}}}`, true},
	} {
		t.Run(tt.answer, func(t *testing.T) {
			t.Parallel()
			proxy, proxyStarted := scriptedComponent(t, t.TempDir(), "inner")
			parent := scriptedEditor(startChain(t, Config{Mode: ProxyMode, Proxies: []Component{proxy}}))
			px := proxyStarted()
			parent.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":{"protocolVersion":2}}`)
			init := px.recvMsg()
			px.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":2}}}`)
			up := parent.recvMsg()
			if up.Method != wire.MethodSuccessor {
				t.Fatalf("the parent got %s, want the initialize for our successor", up.Method)
			}
			parent.reply(up, tt.answer)
			seen := px.recvMsg()
			if got := wire.HasMCPOverACP(seen.Result); got != tt.want {
				t.Errorf("the inner proxy saw %s: MCP-over-ACP advertised %v, want %v", seen.Result, got, tt.want)
			}
			px.reply(init, string(seen.Result))
			answer := parent.recvMsg()
			if got := wire.HasMCPOverACP(answer.Result); got != tt.want {
				t.Errorf("the parent saw %s: MCP-over-ACP advertised %v, want %v", answer.Result, got, tt.want)
			}
		})
	}
}

// TestAdvertiseMCPOverACPWarnsOnce: that MCP-over-ACP is not advertised
// is logged once for the chain, not once for each initialize answer
// passed on without it (the client's and each proxy's).
func TestAdvertiseMCPOverACPWarnsOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	dir := t.TempDir()
	first, firstStarted := scriptedComponent(t, dir, "first")
	second, secondStarted := scriptedComponent(t, dir, "second")
	agent, agentStarted := scriptedComponent(t, dir, "agent")
	ed := scriptedEditor(startChain(t, Config{Proxies: []Component{first, second}, Agent: agent, Logger: zap.New(core)}))
	p1, p2, ag := firstStarted(), secondStarted(), agentStarted()
	ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`)
	init1 := p1.recvMsg()
	p1.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":2}}}`)
	init2 := p2.recvMsg()
	p2.send(`{"jsonrpc":"2.0","id":"up","method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":2}}}`)
	ag.reply(ag.recvMsg(), `{"protocolVersion":2,"capabilities":{"session":{"mcp":{}}}}`)
	p2.reply(init2, string(p2.recvMsg().Result))
	p1.reply(init1, string(p1.recvMsg().Result))
	if answer := ed.recvMsg(); wire.HasMCPOverACP(answer.Result) {
		t.Fatalf("the editor saw %s: MCP-over-ACP advertised", answer.Result)
	}
	if n := logs.FilterMessageSnippet("MCP-over-ACP not advertised").Len(); n != 1 {
		t.Errorf("%d warnings that MCP-over-ACP is not advertised, want 1", n)
	}
}

// TestAdvertiseMCPOverACPUnknownAgent: a proxy that answers initialize
// itself, before the agent has answered one (or without passing it on),
// leaves the agent's MCP transports unknown. In v2 every transport is
// opt-in, so nothing is known to serve an acp server and none is
// claimed; in v1 stdio is built in, and the bridge reaches any agent.
func TestAdvertiseMCPOverACPUnknownAgent(t *testing.T) {
	for _, tt := range []struct {
		answer string
		want   bool
	}{
		{`{"protocolVersion":1,"agentCapabilities":{}}`, true},
		{`{"protocolVersion":2,"capabilities":{"session":{}}}`, false},
	} {
		t.Run(tt.answer, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			proxy, proxyStarted := scriptedComponent(t, dir, "proxy")
			agent, _ := scriptedComponent(t, dir, "agent")
			ed := scriptedEditor(startChain(t, Config{Proxies: []Component{proxy}, Agent: agent}))
			px := proxyStarted()
			ed.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`)
			px.reply(px.recvMsg(), tt.answer)
			answer := ed.recvMsg()
			if got := wire.HasMCPOverACP(answer.Result); got != tt.want {
				t.Errorf("the editor saw %s: MCP-over-ACP advertised %v, want %v", answer.Result, got, tt.want)
			}
		})
	}
}
