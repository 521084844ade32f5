package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCPRequestBinding runs MCP-over-ACP as the official TypeScript SDK
// binds it (mcp/message {serverId, requestId}, MCP 2026-07-28) through the
// conductor: the editor offers a server with McpOverAcpProvider, SDK-built
// proxies (mcp_proxy.mjs) offer one each, and the agent calls every one
// with McpOverAcpCaller, through 0, 1 and 3 proxies, passthroughs in Go and
// Python among them. Each call must come back with the owner's answer, the
// progress notification the owner sent for it, and the ACP session the
// conductor named in _meta["acp-conductor/sessionId"].
func TestMCPRequestBinding(t *testing.T) {
	requireConductor(t)
	tsProxy := func(name string) string { return shellJoin(nodeBin, filepath.Join(peersDir, "mcp_proxy.mjs"), name) }
	cases := []struct {
		name    string
		proxies []string
		owners  []string // the servers' owners, in declaration order
	}{
		{"0 proxies", nil, []string{"editor"}},
		{"1 go proxy", []string{goProxyCmd("go1")}, []string{"editor"}},
		{"1 sdk proxy", []string{tsProxy("ts1")}, []string{"editor", "ts1"}},
		{"3 proxies go-sdk-python", []string{goProxyCmd("go1"), tsProxy("ts2"), pyProxyCmd("py3")}, []string{"editor", "ts2"}},
		{"3 sdk proxies", []string{tsProxy("ts1"), tsProxy("ts2"), tsProxy("ts3")}, []string{"editor", "ts1", "ts2", "ts3"}},
		// A proxy-mode conductor in the chain: the servers of the editor and
		// the outer proxy pass through it (its parent owns them there), and
		// its own SDK proxy's server is reached through it.
		{"nested conductor", []string{tsProxy("ts1"), nestedCmd(tsProxy("ts2"), goProxyCmd("go3"))}, []string{"editor", "ts1", "ts2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			argv := agentModeArgs(append(c.proxies, shellJoin(nodeBin, filepath.Join(peersDir, "mcp_agent.mjs")))...)
			s := runMCPEditor(t, ctx, true, argv)
			checkMCPReport(t, s, c.owners)
		})
	}
}

// TestMCPProxyCaller: an SDK-built proxy (mcp_proxy.mjs with
// MCP_IT_PROXY_CALL=1) is an MCP caller too. Before it passes the prompt
// on, its McpOverAcpCaller calls the servers declared to it: the editor's
// McpOverAcpProvider, and an earlier SDK proxy's. Each call must come back
// to the proxy with the owner's answer, greeting the proxy, and with the
// progress notification the owner sent for it, which must reach the
// proxy, not the agent past it; the agent's own calls go on as in
// TestMCPRequestBinding.
func TestMCPProxyCaller(t *testing.T) {
	requireConductor(t)
	tsProxy := func(name string) string { return shellJoin(nodeBin, filepath.Join(peersDir, "mcp_proxy.mjs"), name) }
	tsCaller := func(name string) string { return "MCP_IT_PROXY_CALL=1 " + tsProxy(name) }
	for _, c := range []struct {
		name    string
		proxies []string
		caller  string
		called  []string // the servers' owners the proxy calls, in declaration order
		owners  []string // the agent's
	}{
		{"sdk proxy", []string{tsCaller("ts1")}, "ts1", []string{"editor"}, []string{"editor", "ts1"}},
		{"sdk proxy between passthroughs", []string{goProxyCmd("go1"), tsCaller("ts2"), pyProxyCmd("py3")}, "ts2", []string{"editor"}, []string{"editor", "ts2"}},
		{"sdk proxy after another", []string{tsProxy("ts1"), tsCaller("ts2")}, "ts2", []string{"editor", "ts1"}, []string{"editor", "ts1", "ts2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			argv := agentModeArgs(append(c.proxies, shellJoin(nodeBin, filepath.Join(peersDir, "mcp_agent.mjs")))...)
			s := runMCPEditor(t, ctx, true, argv)
			report, ok := s.ProxyReports[c.caller]
			if !ok {
				t.Fatalf("no report from %s; the proxies reported %v", c.caller, s.ProxyReports)
			}
			checkCallReport(t, c.caller, c.caller, s.SessionID, report, c.called)
			checkMCPCalls(t, s, c.owners, 2) // the proxy's call and the agent's
		})
	}
}

// TestMCPThinkwellDialect runs an MCP server of a Thinkwell-dialect proxy
// (twproxy: declared {"type":"http","url":"acp:<uuid>"}, served over
// _mcp/*, as @thinkwell/conductor's and as sacp's proxies read it) in a
// chain with an RFD proxy and a Rust-dialect one, beside the editor's
// McpOverAcpProvider: the TypeScript SDK agent's McpOverAcpCaller (the
// request binding) calls both, and each answers, with its progress and the
// session.
func TestMCPThinkwellDialect(t *testing.T) {
	requireConductor(t)
	for _, flavor := range []string{"thinkwell", "sacp"} {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			argv := agentModeArgs(goProxyCmd("go1"), twProxyCmd("tw2", flavor), rustProxyCmd("rs3"),
				shellJoin(nodeBin, filepath.Join(peersDir, "mcp_agent.mjs")))
			s := runMCPEditor(t, ctx, true, argv)
			checkMCPReport(t, s, []string{"editor", "tw2"})
			if len(s.Report) == 2 {
				d := s.Report[1].Declaration
				if d["type"] != "acp" || d["serverId"] != "acp:2b7f4e0c-9a1d-4c3e-8f56-71d0c4a9e2b5" || d["url"] != nil {
					t.Errorf("the agent got the Thinkwell server as %v, want an acp declaration", d)
				}
			}
		})
	}
}

// TestMCPRequestBindingCancel cancels a request-binding call in flight: the
// agent's McpOverAcpCaller aborts when the owner's tool reports progress,
// and the $/cancel_request reaches the owner's McpOverAcpProvider, hop by
// hop, whose handler sees its signal abort; the call ends cancelled. The
// owner is the editor, or an SDK-built proxy (mcp_proxy.mjs), which gets
// the cancel for the proxy/successor request that carried the call.
// Behind a nested conductor the call ends as it does in a flat chain.
func TestMCPRequestBindingCancel(t *testing.T) {
	requireConductor(t)
	tsProxy := func(name string) string { return shellJoin(nodeBin, filepath.Join(peersDir, "mcp_proxy.mjs"), name) }
	for _, c := range []struct {
		name    string
		proxies []string
		owner   string
	}{
		{"0 proxies", nil, "editor"},
		{"2 proxies go-python", []string{goProxyCmd("go1"), pyProxyCmd("py2")}, "editor"},
		{"sdk proxy owner", []string{goProxyCmd("go1"), tsProxy("ts2"), pyProxyCmd("py3")}, "ts2"},
		{"sdk proxy owner in a nested conductor", []string{goProxyCmd("go1"), nestedCmd(tsProxy("ts2"), pyProxyCmd("py3"))}, "ts2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			argv := agentModeArgs(append(c.proxies, "MCP_IT_CANCEL=1 "+shellJoin(nodeBin, filepath.Join(peersDir, "mcp_agent.mjs")))...)
			s := runMCPEditor(t, ctx, c.owner == "editor", argv)
			if len(s.Report) != 1 {
				t.Fatalf("the agent called %d servers, want %s's", len(s.Report), c.owner)
			}
			r := s.Report[0]
			// The owner's handler answers {error} (mcp_tools.mjs): the
			// caller gets that outcome, not an ACP error, however many
			// conductors are on the way.
			var code struct{ Code int }
			json.Unmarshal(r.Outcome.Error, &code)
			if code.Code != -32800 || r.Error != nil || strings.Join(s.Cancelled, ",") != c.owner {
				t.Errorf("outcome %s / error %s, cancelled handlers: %v; want outcome -32800 and [%s]", r.Outcome.Error, r.Error, s.Cancelled, c.owner)
			}
			if len(s.Unexpected) != 0 || s.Exit.Code == nil || *s.Exit.Code != 0 {
				t.Errorf("unexpected %v, exit %v", s.Unexpected, s.Exit.Code)
			}
		})
	}
}

// TestMCPFromMcpServer serves a server built with the official MCP
// TypeScript server package (@modelcontextprotocol/server's McpServer,
// adapted by the ACP SDK's fromMcpServer) from the editor's
// McpOverAcpProvider, and the TS SDK agent's McpOverAcpCaller calls its
// tool through the conductor, with and without a proxy in between.
func TestMCPFromMcpServer(t *testing.T) {
	requireConductor(t)
	for _, c := range []struct {
		name    string
		proxies []string
	}{
		{"0 proxies", nil},
		{"1 go proxy", []string{goProxyCmd("go1")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			argv := agentModeArgs(append(c.proxies, shellJoin(nodeBin, filepath.Join(peersDir, "mcp_agent.mjs")))...)
			args := []string{filepath.Join(peersDir, "mcp_editor.mjs"), "--provide-mcp-server", "--"}
			s := runMCPEditorArgs(t, ctx, append(args, argv...))
			if s.Error != nil || s.Stop != "end_turn" || len(s.Report) != 1 {
				t.Fatalf("the prompt: error %s, stop %q, %d servers called; want end_turn and mcpsdk-tools", s.Error, s.Stop, len(s.Report))
			}
			r := s.Report[0]
			if r.Error != nil || r.Outcome.Result == nil || len(r.Outcome.Result.Content) != 1 || r.Outcome.Result.Content[0].Text != "hello ts-agent from mcpsdk" {
				t.Errorf("greet: outer error %s, outcome %+v / %s; want hello ts-agent from mcpsdk", r.Error, r.Outcome.Result, r.Outcome.Error)
			}
			if len(s.Unexpected) != 0 || s.Exit.Code == nil || *s.Exit.Code != 0 {
				t.Errorf("unexpected %v, exit %v", s.Unexpected, s.Exit.Code)
			}
		})
	}
}

// mcpSummary is mcp_editor.mjs's summary.
type mcpSummary struct {
	SessionID string `json:"sessionId"`
	Stop      string `json:"stopReason"`
	Error     json.RawMessage
	Report    []mcpCallReport
	// ProxyReports are the calling proxies' reports, by name.
	ProxyReports map[string][]mcpCallReport
	Seen         []struct {
		ServerID string `json:"serverId"`
		Method   string
		Meta     map[string]any
	}
	Unexpected    []any
	Cancelled     []string
	ConnectProbes int
	Exit          struct{ Code *int }
}

// An mcpCallReport is what a caller (mcp_agent.mjs, or a calling
// mcp_proxy.mjs) made of its call to one server.
type mcpCallReport struct {
	Declaration map[string]any
	Outcome     struct {
		Result *struct {
			Content []struct{ Text string }
		}
		Error json.RawMessage
	}
	Error    json.RawMessage
	Progress []struct {
		Method string
		Params map[string]any
	}
}

// checkCallReport checks that who, an MCP client named client, called
// greet on the servers of owners, in order, and each answered as the
// owner, greeting the client, in session, with its progress notification
// on the way.
func checkCallReport(t *testing.T, who, client, session string, report []mcpCallReport, owners []string) {
	t.Helper()
	if len(report) != len(owners) {
		t.Fatalf("%s called %d servers, want %d (%v)", who, len(report), len(owners), owners)
	}
	for i, owner := range owners {
		r := report[i]
		if r.Error != nil || r.Outcome.Result == nil || len(r.Outcome.Result.Content) != 1 {
			t.Errorf("%s, calling %s: no result: outer error %s, outcome error %s", who, owner, r.Error, r.Outcome.Error)
			continue
		}
		var got map[string]any
		json.Unmarshal([]byte(r.Outcome.Result.Content[0].Text), &got)
		want := map[string]any{"owner": owner, "greeting": "hello " + client, "session": session, "client": client}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s, calling %s: %s = %v, want %v (result %s)", who, owner, k, got[k], v, r.Outcome.Result.Content[0].Text)
			}
		}
		token := "p-" + owner + "-tools"
		if len(r.Progress) != 1 || r.Progress[0].Method != "notifications/progress" || r.Progress[0].Params["progressToken"] != token {
			t.Errorf("%s, calling %s: progress %+v, want one notifications/progress for %s", who, owner, r.Progress, token)
		}
	}
}

// runMCPEditor runs mcp_editor.mjs (offering its server when provide is
// set) on argv, and returns its summary. Every process the run starts
// carries a marker, and none may be left when it ends.
func runMCPEditor(t *testing.T, ctx context.Context, provide bool, argv []string) *mcpSummary {
	t.Helper()
	args := []string{filepath.Join(peersDir, "mcp_editor.mjs")}
	if provide {
		args = append(args, "--provide")
	}
	return runMCPEditorArgs(t, ctx, append(append(args, "--"), argv...))
}

// runMCPEditorArgs runs node with args (mcp_editor.mjs and its arguments),
// as runMCPEditor does.
func runMCPEditorArgs(t *testing.T, ctx context.Context, args []string) *mcpSummary {
	t.Helper()
	cmd := exec.CommandContext(ctx, nodeBin, args...)
	cmd.Dir = peersDir
	marker := newMarker()
	cmd.Env = append(os.Environ(), markerVar+"="+marker)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		wctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var left []proc
		waitFor(wctx, func() bool { left = markedProcs(marker); return len(left) == 0 })
		if len(left) > 0 {
			t.Errorf("processes left running after the test:\n%s", procList(left))
			killMarked(t, marker)
		}
	})
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s mcpSummary
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &s) != nil {
		t.Fatalf("mcp_editor: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("summary: %s\nstderr: %s", lines[len(lines)-1], stderr.String())
		}
	})
	return &s
}

// checkMCPReport checks that the agent called greet on the servers of
// owners, in order, and each answered as the owner, in the session, with
// its progress notification on the way; and that the editor's provider
// saw the agent's call and no other.
func checkMCPReport(t *testing.T, s *mcpSummary, owners []string) {
	t.Helper()
	checkMCPCalls(t, s, owners, 1)
}

// checkMCPCalls is checkMCPReport where the editor's provider saw
// editorCalls calls, each a tools/call naming the session.
func checkMCPCalls(t *testing.T, s *mcpSummary, owners []string, editorCalls int) {
	t.Helper()
	if s.Error != nil || s.Stop != "end_turn" {
		t.Fatalf("the prompt failed: %s (stop reason %q)", s.Error, s.Stop)
	}
	checkCallReport(t, "the agent", "ts-agent", s.SessionID, s.Report, owners)
	if owners[0] == "editor" {
		ok := len(s.Seen) == editorCalls
		for _, seen := range s.Seen {
			ok = ok && seen.Method == "tools/call" && seen.Meta["acp-conductor/sessionId"] == s.SessionID
		}
		if !ok {
			t.Errorf("the editor's provider saw %+v, want %d tools/call naming session %s", s.Seen, editorCalls, s.SessionID)
		}
	}
	// The conductor learns each owner's binding from one refused
	// mcp/connect; a passthrough proxy relays its own to the editor.
	if s.ConnectProbes > len(owners) {
		t.Errorf("the editor refused %d mcp/connect, want at most one per owner (%d)", s.ConnectProbes, len(owners))
	}
	if len(s.Unexpected) != 0 {
		t.Errorf("the editor got unexpected messages: %v", s.Unexpected)
	}
	if s.Exit.Code == nil || *s.Exit.Code != 0 {
		t.Errorf("the conductor exited %v after its stdin closed, want 0", s.Exit.Code)
	}
}
