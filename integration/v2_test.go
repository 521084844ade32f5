package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestACPv2 runs the TS SDK's experimental/v2 editor through the conductor
// and two proxies (the proxy library's and the Python one) to a v2 agent and
// to a v1 agent. The negotiation passes through unchanged but for the
// MCP-over-ACP capability, which the chain advertises where the answer's
// version puts it: capabilities.session.mcp.acp {} for v2 (to an agent
// that takes stdio servers, which the bridge can reach), and
// agentCapabilities.mcpCapabilities.acp true for v1.
func TestACPv2(t *testing.T) {
	requireConductor(t)
	requireLibProxy(t)
	v2 := filepath.Join(peersDir, "v2.mjs")
	for _, tt := range []struct {
		name  string
		agent string
		want  string // the initialize result the editor must see, byte for byte
	}{
		{"v2 agent", shellJoin(nodeBin, v2, "agent"),
			`{"protocolVersion":2,"info":{"name":"acp-it-v2-agent","version":"1.0.0"},"capabilities":{"session":{"mcp":{"stdio":{},"acp":{}}}}}`},
		{"v1 agent", agentCmd("v1-agent"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			record := filepath.Join(t.TempDir(), "agent.txt")
			agent := tt.agent
			if strings.Contains(agent, "v2.mjs") {
				agent = shellJoin(nodeBin, v2, "agent", "--record", record, "--mcp", "stdio")
			}
			argv := append([]string{nodeBin, v2, "client", "--"}, agentModeArgs(libProxyCmd("lib1"), pyProxyCmd("py2"), agent)...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = peersDir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			var s struct {
				Initialize    json.RawMessage `json:"initialize"`
				SDKInitialize json.RawMessage `json:"sdkInitialize"`
				SessionID     string          `json:"sessionId"`
				Failures      []string        `json:"failures"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
				t.Fatalf("client output %q: %v (%v)\nstderr:\n%s", stdout.String(), err, runErr, stderr.String())
			}
			if tt.want != "" {
				if runErr != nil || len(s.Failures) > 0 {
					t.Fatalf("client: %v %q\nstderr:\n%s", runErr, s.Failures, stderr.String())
				}
				if string(s.Initialize) != tt.want {
					t.Errorf("the editor saw initialize result\n\t%s\nwant\n\t%s", s.Initialize, tt.want)
				}
				if !strings.Contains(string(s.SDKInitialize), `"acp":{}`) {
					t.Errorf("the SDK did not read the capability: %s", s.SDKInitialize)
				}
				if s.SessionID != "v2-session-1" {
					t.Errorf("session/new answered %q", s.SessionID)
				}
				saw, _ := os.ReadFile(record)
				if first, _, _ := strings.Cut(string(saw), "\n"); first != `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"acp-it-v2-client","version":"1.0.0"},"capabilities":{}}}` {
					t.Errorf("the agent's initialize is not the editor's:\n%s", saw)
				}
				return
			}
			// A v1 agent answers version 1, and its answer stays v1 (the v2
			// SDK editor may then give up; that is its choice).
			var r struct {
				ProtocolVersion   int `json:"protocolVersion"`
				AgentCapabilities struct {
					MCP map[string]json.RawMessage `json:"mcpCapabilities"`
				} `json:"agentCapabilities"`
				Capabilities json.RawMessage `json:"capabilities"`
			}
			if err := json.Unmarshal(s.Initialize, &r); err != nil {
				t.Fatalf("initialize result %s: %v\nstderr:\n%s", s.Initialize, err, stderr.String())
			}
			if r.ProtocolVersion != 1 || string(r.AgentCapabilities.MCP["acp"]) != "true" || r.Capabilities != nil {
				t.Errorf("a v1 agent's answer did not stay v1: %s", s.Initialize)
			}
		})
	}
}

// TestACPv2Bridged: a v2 editor offers an acp MCP server to a v2 agent (the
// SDK's) that does not speak MCP-over-ACP, and that refuses, as the SDK's
// assertSupportedMcpServers does, a whole session/new declaring a server
// over a transport it did not advertise in capabilities.session.mcp. An
// agent that advertised stdio gets the stdio bridge, with "type": "stdio"
// as v2 requires; one that advertised HTTP gets the HTTP bridge. Where the
// bridge can reach the agent over nothing it advertised (neither, or only
// HTTP with mcp_bridge stdio; v2 makes stdio opt-in), the editor is not
// told the chain takes acp servers, so it offers none, and the session
// opens all the same.
func TestACPv2Bridged(t *testing.T) {
	requireConductor(t)
	v2 := filepath.Join(peersDir, "v2.mjs")
	for _, tt := range []struct {
		mcp    string // what the agent advertises in capabilities.session.mcp
		bridge string // --mcp-bridge, or "" for the default (auto)
		want   string // the type the agent is declared the server as, or "" for none
	}{
		{"stdio", "", "stdio"},
		{"http", "", "http"},
		{"", "", ""},
		{"http", "stdio", ""},
		{"stdio", "stdio", "stdio"},
	} {
		t.Run("mcp="+tt.mcp+",bridge="+tt.bridge, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			record := filepath.Join(t.TempDir(), "agent.txt")
			conductorArgs := agentModeArgs(shellJoin(nodeBin, v2, "agent", "--record", record, "--mcp", tt.mcp))
			if tt.bridge != "" {
				conductorArgs = append(conductorArgs[:2:2], append([]string{"--mcp-bridge", tt.bridge}, conductorArgs[2:]...)...)
			}
			argv := append([]string{nodeBin, v2, "client", "--declare", "--"}, conductorArgs...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = peersDir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			var s struct {
				Initialize json.RawMessage `json:"initialize"`
				SessionID  string          `json:"sessionId"`
				Failures   []string        `json:"failures"`
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil || runErr != nil || s.SessionID != "v2-session-1" {
				t.Fatalf("session/new: %q (%v, %v)\nstderr:\n%s", stdout.String(), err, runErr, stderr.String())
			}
			if advertised := strings.Contains(string(s.Initialize), `"acp":{}`); advertised != (tt.want != "") {
				t.Errorf("the editor saw initialize result %s: MCP-over-ACP advertised %v, want %v", s.Initialize, advertised, tt.want != "")
			}
			saw, _ := os.ReadFile(record)
			var declared []map[string]any
			for _, line := range strings.Split(string(saw), "\n") {
				var m struct {
					Method string
					Params struct{ MCPServers []map[string]any }
				}
				if json.Unmarshal([]byte(line), &m) == nil && m.Method == "session/new" {
					declared = m.Params.MCPServers
				}
			}
			if tt.want == "" {
				if len(declared) != 0 {
					t.Errorf("the agent was declared %v, want no server", declared)
				}
				return
			}
			if len(declared) != 1 || declared[0]["type"] != tt.want || declared[0]["name"] != "editor-tools" {
				t.Errorf("the agent was declared %v, want the %s bridge", declared, tt.want)
			}
		})
	}
}
