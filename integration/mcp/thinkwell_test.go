package mcp

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPUnderThinkwell runs toolproxy, whose MCP server the proxy library
// serves, under @thinkwell/conductor (the TypeScript conductor, from npm)
// instead of acp-conductor: the TypeScript SDK's editor → thinkwell →
// toolproxy → sdkagent, and the same with toolproxy inside a proxy-mode
// acp-conductor. Thinkwell initializes proxies in the Thinkwell dialect
// and reads only its own declarations, {"type":"http","url":"acp:<uuid>"}
// (any other made it fail session/new), so the library, and a conductor
// under it, declare servers so; thinkwell bridges them to the agent over
// HTTP and reaches their owner with _mcp/connect {connectionId, url}, which
// it does not wait for before _mcp/message, and _mcp/disconnect. The
// agent's MCP Go SDK client lists the tools and calls greet, whose
// input_required answer and retry cross thinkwell. (Thinkwell sends the
// server's own notifications on to the agent, not to its HTTP client, so
// the agent does not wait for the progress one.)
func TestMCPUnderThinkwell(t *testing.T) {
	for _, c := range []struct{ name, proxy string }{
		{"proxy library", quote(toolProxy)},
		{"conductor in proxy mode", quote(conductor) + " proxy " + quote(toolProxy)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			underThinkwell(t, c.proxy)
		})
	}
}

func underThinkwell(t *testing.T, proxy string) {
	requireNodePeers(t)
	dir := t.TempDir()
	prompt, _ := json.Marshal(map[string]any{"server": serverName, "tool": toolName, "name": "tw-agent", "noProgress": true})
	s := runTSEditorOn(t, dir, nil, false, string(prompt),
		nodeBin, filepath.Join(peersDir, "thinkwell.mjs"), proxy, quote(sdkAgent)+" --advertise none")
	rep := s.agentReport(t)
	var decl struct{ Type, Name, URL string }
	json.Unmarshal(rep.Declaration, &decl)
	if decl.Type != "http" || decl.Name != serverName || !strings.HasPrefix(decl.URL, "http://127.0.0.1:") {
		t.Errorf("the agent was declared %s, want thinkwell's loopback HTTP server for %s", rep.Declaration, serverName)
	}
	if rep.ServerName != "toolproxy" || strings.Join(rep.Tools, ",") != toolproxyTools {
		t.Errorf("server %q, tools %v; want toolproxy, [%s]", rep.ServerName, rep.Tools, toolproxyTools)
	}
	want := "hello, tw-agent; roots: file://" + dir + "; via: input response; session: " + s.SessionID
	if rep.Result != want {
		t.Errorf("greet answered %q, want %q", rep.Result, want)
	}
	if !rep.Closed || rep.CloseError != "" {
		t.Errorf("the client did not close cleanly: %s", rep.CloseError)
	}
}

// TestMCPUnderThinkwellRequestOwner runs an MCP server that the TypeScript
// SDK's McpOverAcpProvider serves (mcp_proxy.mjs, the request binding)
// inside a proxy-mode acp-conductor under @thinkwell/conductor. Thinkwell
// proposes its own connectionId, sends on it before its _mcp/connect is
// answered and never reads the id the answer gives: the conductor must
// keep what comes early until the owner's refusal of mcp/connect tells
// its binding, and translate on a connection under the proposed id.
func TestMCPUnderThinkwellRequestOwner(t *testing.T) {
	requireNodePeers(t)
	dir := t.TempDir()
	prompt, _ := json.Marshal(map[string]any{"server": "ts1-tools", "tool": "greet", "name": "tw-agent", "noProgress": true})
	owner := quote(nodeBin + " " + filepath.Join(peersDir, "mcp_proxy.mjs") + " ts1")
	s := runTSEditorOn(t, dir, nil, false, string(prompt),
		nodeBin, filepath.Join(peersDir, "thinkwell.mjs"), quote(conductor)+" proxy "+owner, quote(sdkAgent)+" --advertise none")
	rep := s.agentReport(t)
	want := `{"owner":"ts1","greeting":"hello tw-agent","session":"` + s.SessionID + `","client":"sdkagent"}`
	if rep.Result != want {
		t.Errorf("greet answered %q, want %q (report %+v)", rep.Result, want, rep)
	}
}
