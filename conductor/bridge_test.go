package conductor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRewriteDeclarations checks how acp MCP server declarations are
// rewritten for the bridge in each session set-up method and spelling,
// keeping what the bridge does not replace, and leaving other server types
// and every other param alone.
func TestRewriteDeclarations(t *testing.T) {
	routes := newMCPRoutes()
	routes.agentCapabilities(json.RawMessage(`{"agentCapabilities":{"mcpCapabilities":{"http":true}}}`))
	b := &bridge{mode: BridgeStdio, mcp: routes, declare: func(id, name string, http bool) (json.RawMessage, error) {
		if http {
			return json.RawMessage(fmt.Sprintf(`{"type":"http","name":%q,"url":"http://127.0.0.1:1/mcp/%s","headers":[]}`, name, id)), nil
		}
		return json.RawMessage(fmt.Sprintf(`{"name":%q,"command":"acp-conductor","args":["mcp-shim"],"env":[{"name":"TOKEN","value":%q}]}`, name, id)), nil
	}}
	const others = `{"name":"fs","command":"mcp-fs","args":[],"env":[]},{"type":"http","name":"web","url":"https://x","headers":[]},{"type":"sse","name":"old","url":"https://y","headers":[]}`
	for _, method := range []string{"session/new", "session/load", "session/resume", "session/fork"} {
		for _, spelling := range []string{"id", "serverId"} {
			for _, mode := range []BridgeMode{BridgeStdio, BridgeHTTP} {
				t.Run(fmt.Sprintf("%s/%s/%s", method, spelling, mode), func(t *testing.T) {
					b.mode = mode
					params := `{"sessionId":"s","cwd":"/p","mcpServers":[` + others +
						`,{"type":"acp","name":"tools",` + fmt.Sprintf("%q", spelling) + `:"srv-9","_meta":{"k":1},"x-unknown":true}],"_meta":{"top":2}}`
					if !sessionSetup(method) {
						t.Fatalf("%s is not a session set-up method", method)
					}
					if _, found, _ := routes.declare(2, method, json.RawMessage(params)); !found {
						t.Fatal("declare found no acp server")
					}
					if srv, ok := routes.server("srv-9"); !ok || srv.owner != 2 || srv.name != "tools" {
						t.Fatalf("owner of srv-9 = %+v, %v", srv, ok)
					}
					got, err := b.rewrite(json.RawMessage(params))
					if err != nil {
						t.Fatal(err)
					}
					var p struct {
						SessionID  string            `json:"sessionId"`
						Meta       map[string]int    `json:"_meta"`
						MCPServers []json.RawMessage `json:"mcpServers"`
					}
					if err := json.Unmarshal(got, &p); err != nil || p.SessionID != "s" || p.Meta["top"] != 2 || len(p.MCPServers) != 4 {
						t.Fatalf("rewritten params %s (%v)", got, err)
					}
					var before []json.RawMessage
					json.Unmarshal([]byte("["+others+"]"), &before)
					for i := range before {
						if string(p.MCPServers[i]) != string(before[i]) {
							t.Errorf("server %d changed: %s -> %s", i, before[i], p.MCPServers[i])
						}
					}
					var bridged map[string]any
					json.Unmarshal(p.MCPServers[3], &bridged)
					if bridged["name"] != "tools" || fmt.Sprint(bridged["_meta"]) != "map[k:1]" || bridged["x-unknown"] != true ||
						bridged["id"] != nil || bridged["serverId"] != nil {
						t.Errorf("bridged declaration %s", p.MCPServers[3])
					}
					switch mode {
					case BridgeStdio:
						if bridged["type"] != nil || bridged["command"] != "acp-conductor" || fmt.Sprint(bridged["env"]) != "[map[name:TOKEN value:srv-9]]" {
							t.Errorf("stdio declaration %s", p.MCPServers[3])
						}
					case BridgeHTTP:
						if bridged["type"] != "http" || bridged["url"] != "http://127.0.0.1:1/mcp/srv-9" {
							t.Errorf("http declaration %s", p.MCPServers[3])
						}
					}
				})
			}
		}
	}
}

// TestRewriteAuto checks that auto bridges over HTTP exactly when the agent
// said it supports MCP over HTTP.
func TestRewriteAuto(t *testing.T) {
	for _, caps := range []string{`{}`, `{"agentCapabilities":{"mcpCapabilities":{"http":true}}}`} {
		routes := newMCPRoutes()
		routes.agentCapabilities(json.RawMessage(caps))
		var gotHTTP bool
		b := &bridge{mode: BridgeAuto, mcp: routes, declare: func(_, _ string, http bool) (json.RawMessage, error) {
			gotHTTP = http
			return json.RawMessage(`{"name":"n"}`), nil
		}}
		if _, err := b.rewrite(json.RawMessage(`{"mcpServers":[{"type":"acp","name":"n","id":"a"}]}`)); err != nil {
			t.Fatal(err)
		}
		if want := caps != `{}`; gotHTTP != want {
			t.Errorf("agent %s: bridged over HTTP = %v, want %v", caps, gotHTTP, want)
		}
	}
}

// TestRewriteHTTPFallback: mcp_bridge http for an agent that never said it
// can reach MCP servers over HTTP bridges over stdio instead, and says so
// once.
func TestRewriteHTTPFallback(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	var gotHTTP []bool
	b := &bridge{mode: BridgeHTTP, mcp: newMCPRoutes(), log: zap.New(core), declare: func(_, _ string, http bool) (json.RawMessage, error) {
		gotHTTP = append(gotHTTP, http)
		return json.RawMessage(`{"name":"n"}`), nil
	}}
	b.mcp.agentCapabilities(json.RawMessage(`{"agentCapabilities":{"mcpCapabilities":{"acp":false}}}`))
	for range 2 {
		if _, err := b.rewrite(json.RawMessage(`{"mcpServers":[{"type":"acp","name":"n","id":"a"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(gotHTTP) != "[false false]" {
		t.Errorf("bridged over HTTP: %v, want stdio each time", gotHTTP)
	}
	if n := logs.FilterMessageSnippet("mcpCapabilities.http").Len(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}

// TestRewriteLongServerID: a server whose id is too long for an HTTP route
// is bridged over stdio, with a warning naming it, while the others of the
// same session still get HTTP.
func TestRewriteLongServerID(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	routes := newMCPRoutes()
	routes.agentCapabilities(json.RawMessage(`{"agentCapabilities":{"mcpCapabilities":{"http":true}}}`))
	b, mb, err := newBridge(Config{MCPBridge: BridgeHTTP, ShimExecutable: "acp-conductor"}, zap.New(core), routes)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	long := strings.Repeat("x", 4000)
	got, err := b.rewrite(json.RawMessage(`{"mcpServers":[{"type":"acp","name":"long","id":"` + long + `"},{"type":"acp","name":"short","id":"s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		MCPServers []map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(got, &p); err != nil || len(p.MCPServers) != 2 {
		t.Fatalf("rewritten params %s (%v)", got, err)
	}
	if s := p.MCPServers[0]; s["type"] != nil || s["command"] != "acp-conductor" {
		t.Errorf("the long id's declaration is not stdio: %v", s)
	}
	if s := p.MCPServers[1]; s["type"] != "http" {
		t.Errorf("the short id's declaration is not http: %v", s)
	}
	if w := logs.FilterMessageSnippet("too long for an HTTP route").FilterField(zap.String("server", "long")); w.Len() != 1 {
		t.Errorf("%d warnings naming the server, want 1: %v", w.Len(), logs.All())
	}
}

// TestRewriteTransports: the bridge gives an agent an acp MCP server only
// over a transport the agent can use, as its ACP version says (v1: stdio
// always, HTTP if advertised; v2: only what capabilities.session.mcp
// lists), and leaves out, with a warning naming it and the capability
// its version would need, a server it cannot give over any; a warning
// names the capability where that version puts it.
func TestRewriteTransports(t *testing.T) {
	const (
		v1   = `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":%s}}`
		v2   = `{"protocolVersion":2,"capabilities":{"session":{"mcp":%s}}}`
		none = "none"
	)
	for _, tt := range []struct {
		init string
		mode BridgeMode
		want string // the transport the server is given over, or none
		warn string // a snippet of the one warning, or ""
	}{
		{fmt.Sprintf(v1, `{}`), BridgeAuto, "stdio", ""},
		{fmt.Sprintf(v1, `{"http":true}`), BridgeAuto, "http", ""},
		{fmt.Sprintf(v1, `{}`), BridgeHTTP, "stdio", "did not advertise agentCapabilities.mcpCapabilities.http"},
		{fmt.Sprintf(v1, `{"http":true}`), BridgeStdio, "stdio", ""},
		{`{"protocolVersion":2,"capabilities":{"session":{}}}`, BridgeAuto, none,
			"advertises none of capabilities.session.mcp.http or capabilities.session.mcp.stdio"},
		{fmt.Sprintf(v2, `{}`), BridgeHTTP, none, "advertises none of capabilities.session.mcp.http or capabilities.session.mcp.stdio"},
		{fmt.Sprintf(v2, `{"stdio":{}}`), BridgeAuto, "stdio", ""},
		{fmt.Sprintf(v2, `{"http":{}}`), BridgeAuto, "http", ""},
		{fmt.Sprintf(v2, `{"stdio":{},"http":{}}`), BridgeAuto, "http", ""},
		{fmt.Sprintf(v2, `{"stdio":{}}`), BridgeHTTP, "stdio", "did not advertise capabilities.session.mcp.http"},
		{fmt.Sprintf(v2, `{"http":{}}`), BridgeStdio, none, "advertises none of capabilities.session.mcp.stdio (mcp_bridge is stdio)"},
		{fmt.Sprintf(v2, `{"stdio":null,"http":false}`), BridgeAuto, none, "advertises none of"},
	} {
		t.Run(string(tt.mode)+" "+tt.init, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			routes := newMCPRoutes()
			routes.agentCapabilities(json.RawMessage(tt.init))
			b := &bridge{mode: tt.mode, mcp: routes, log: zap.New(core), declare: func(_, name string, http bool) (json.RawMessage, error) {
				if http {
					return json.RawMessage(`{"type":"http","url":"http://127.0.0.1:1/x","headers":[]}`), nil
				}
				return json.RawMessage(`{"type":"stdio","command":"acp-conductor"}`), nil
			}}
			const fs = `{"type":"stdio","name":"fs","command":"mcp-fs","args":[],"env":[]}`
			got, err := b.rewrite(json.RawMessage(`{"mcpServers":[{"type":"acp","name":"tools","serverId":"a"},` + fs + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				MCPServers []json.RawMessage `json:"mcpServers"`
			}
			if err := json.Unmarshal(got, &p); err != nil {
				t.Fatal(err)
			}
			want := 2
			if tt.want == none {
				want = 1
			}
			if len(p.MCPServers) != want || string(p.MCPServers[len(p.MCPServers)-1]) != fs {
				t.Fatalf("the agent was given %s, want %d servers, the other one untouched", got, want)
			}
			if tt.want != none {
				var s map[string]any
				json.Unmarshal(p.MCPServers[0], &s)
				if s["type"] != tt.want || s["name"] != "tools" {
					t.Errorf("the server was given as %s, want %s", p.MCPServers[0], tt.want)
				}
			}
			warns := logs.All()
			switch {
			case tt.warn == "" && len(warns) > 0:
				t.Errorf("unexpected warnings: %v", warns)
			case tt.warn != "":
				text := ""
				for _, w := range warns {
					text += w.Message + " " + fmt.Sprint(w.ContextMap()) + "\n"
				}
				if len(warns) != 1 || !strings.Contains(text, tt.warn) {
					t.Errorf("warnings %q, want one saying %q", text, tt.warn)
				}
				if tt.want == none && !strings.Contains(text, "tools") {
					t.Errorf("the warning does not name the server: %q", text)
				}
				if strings.Contains(tt.init, `"protocolVersion":2`) && strings.Contains(text, "mcpCapabilities") {
					t.Errorf("a warning for a v2 agent names v1's capability: %q", text)
				}
			}
		})
	}
}

// TestRewriteLongServerIDNoStdio: a server whose id is too long for an
// HTTP route is not bridged over stdio to a v2 agent that advertised HTTP
// alone: it is left out, with a warning naming it.
func TestRewriteLongServerIDNoStdio(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	routes := newMCPRoutes()
	routes.agentCapabilities(json.RawMessage(`{"protocolVersion":2,"capabilities":{"session":{"mcp":{"http":{}}}}}`))
	b, mb, err := newBridge(Config{MCPBridge: BridgeAuto, ShimExecutable: "acp-conductor"}, zap.New(core), routes)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	long := strings.Repeat("x", 4000)
	got, err := b.rewrite(json.RawMessage(`{"mcpServers":[{"type":"acp","name":"long","serverId":"` + long + `"},{"type":"acp","name":"short","serverId":"s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		MCPServers []map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(got, &p); err != nil || len(p.MCPServers) != 1 || p.MCPServers[0]["name"] != "short" || p.MCPServers[0]["type"] != "http" {
		t.Fatalf("rewritten params %s (%v), want only short, over http", got, err)
	}
	if w := logs.FilterMessageSnippet("not passed to the agent").FilterField(zap.String("server", "long")); w.Len() != 1 {
		t.Errorf("%d warnings naming the server, want 1: %v", w.Len(), logs.All())
	}
}
