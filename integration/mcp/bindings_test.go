package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official TypeScript SDK's peers (../peers, installed by npm ci from
// its lockfile): mcp_editor.mjs offers a server with McpOverAcpProvider (the
// request binding), mcp_agent.mjs calls servers with McpOverAcpCaller.
var (
	peersDir  = absPath(filepath.Join("..", "peers"))
	nodeOnce  sync.Once
	nodeBin   string
	nodeSetUp error
)

// requireNodePeers finds node and installs the peers' packages when they
// are missing, as the integration package's TestMain does; without them
// the test fails, it does not skip.
func requireNodePeers(t *testing.T) {
	t.Helper()
	nodeOnce.Do(func() {
		if nodeBin, nodeSetUp = exec.LookPath("node"); nodeSetUp != nil {
			return
		}
		if _, err := os.Stat(filepath.Join(peersDir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = peersDir
		if out, err := cmd.CombinedOutput(); err != nil {
			nodeSetUp = &setUpError{string(out), err}
		}
	})
	if nodeSetUp != nil {
		t.Fatalf("the TypeScript SDK peers: %v", nodeSetUp)
	}
}

// absPath is path made absolute: the editor runs in a directory of its own.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		panic(err)
	}
	return abs
}

type setUpError struct {
	out string
	err error
}

func (e *setUpError) Error() string { return e.err.Error() + "\n" + e.out }

// TestMCPBindingTranslation puts callers and owners of different
// MCP-over-ACP bindings on either side of the conductor, which translates:
//
//   - the TypeScript SDK's McpOverAcpCaller (request binding, MCP
//     2026-07-28) calling toolproxy's server, which the proxy library serves
//     over the connect binding with the MCP Go SDK: the conductor opens one
//     connection, and the tool's input_required answer, its retry and its
//     progress notification cross it;
//   - sdkagent's MCP Go SDK client on the connect binding (natively), and
//     bridged over stdio and HTTP, calling the editor's McpOverAcpProvider,
//     as a 2026-07-28 client (server/discover passes through) and as a
//     2025-11-25 one (the conductor answers initialize from the owner's
//     server/discover and adds the per-request _meta).
func TestMCPBindingTranslation(t *testing.T) {
	requireNodePeers(t)
	t.Run("sdk caller, library owner", func(t *testing.T) {
		t.Parallel()
		s := runTSEditor(t, false, "use the tools", quote(toolProxy), quote(goProxy)+" passthrough", quote(nodeBin)+" "+quote(filepath.Join(peersDir, "mcp_agent.mjs")))
		if len(s.Report) != 1 {
			t.Fatalf("the agent called %d servers, want toolproxy's one", len(s.Report))
		}
		r := s.Report[0]
		if r.Error != nil || r.Outcome.Result == nil || len(r.Outcome.Result.Content) != 1 {
			t.Fatalf("no result: outer error %s, outcome error %s", r.Error, r.Outcome.Error)
		}
		want := "hello, ts-agent; roots: file:///ts-agent; via: input response; session: " + s.SessionID
		if got := r.Outcome.Result.Content[0].Text; got != want || strings.Join(r.Asked, ",") != "roots" {
			t.Errorf("result %q (asked for %v), want %q after one input request for roots", got, r.Asked, want)
		}
		if len(r.Progress) != 1 || r.Progress[0].Method != "notifications/progress" || r.Progress[0].Params["message"] != "greeting ts-agent" {
			t.Errorf("progress %+v, want toolproxy's one notification", r.Progress)
		}
	})
	t.Run("sdk caller, mcp-tools example", func(t *testing.T) {
		t.Parallel()
		project := t.TempDir()
		for _, f := range []string{"README.md", "main.go"} {
			if err := os.WriteFile(filepath.Join(project, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		agent := filepath.Join(peersDir, "mcp_agent.mjs")
		s := runTSEditorIn(t, project, []string{`MCP_IT_CALL={"name":"list_files","arguments":{}}`}, false, "list",
			quote(mcpTools), quote(nodeBin)+" "+quote(agent))
		if len(s.Report) != 1 || s.Report[0].Outcome.Result == nil || len(s.Report[0].Outcome.Result.Content) == 0 {
			t.Fatalf("no list_files result from mcp-tools: %+v", s.Report)
		}
		if got := s.Report[0].Outcome.Result.Content[0].Text; !strings.Contains(got, "README.md") || !strings.Contains(got, "main.go") {
			t.Errorf("list_files in the session's directory said %q, want README.md and main.go", got)
		}
	})
	for _, c := range []struct {
		name, advertise, protocol, wantProtocol string
		// wantServer is the serverInfo name the client saw: the
		// conductor's initialize answer takes it from server/discover;
		// a 2026-07-28 client talks to the owner itself.
		wantServer string
	}{
		{"go client native 2026-07-28", "acp", "", "2026-07-28", ""},
		{"go client native 2025-11-25", "acp", "2025-11-25", "2025-11-25", "editor"},
		{"go client bridged stdio 2025-11-25", "none", "2025-11-25", "2025-11-25", "editor"},
		{"go client bridged stdio 2026-07-28", "none", "", "2026-07-28", ""},
		{"go client bridged http 2025-06-18", "http", "2025-06-18", "2025-06-18", "editor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// A legacy client pings too, as a keep-alive would: the
			// provider, on 2026-07-28, has no ping, and the conductor
			// answers it.
			legacy := c.wantProtocol != "2026-07-28"
			prompt, _ := json.Marshal(map[string]any{"server": "editor-tools", "tool": "greet", "name": "go-agent", "protocol": c.protocol, "ping": legacy})
			s := runTSEditor(t, true, string(prompt), quote(goProxy)+" passthrough", quote(sdkAgent)+" --advertise "+c.advertise)
			rep := s.agentReport(t)
			var got map[string]any
			json.Unmarshal([]byte(rep.Result), &got)
			want := map[string]any{"owner": "editor", "greeting": "hello go-agent", "session": s.SessionID, "client": "sdkagent"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (result %s)", k, got[k], v, rep.Result)
				}
			}
			if rep.Protocol != c.wantProtocol || rep.ServerName != c.wantServer || strings.Join(rep.Tools, ",") != "greet" {
				t.Errorf("protocol %q, server %q, tools %v; want %s, %q, [greet]", rep.Protocol, rep.ServerName, rep.Tools, c.wantProtocol, c.wantServer)
			}
			if len(rep.Progress) != 1 || rep.Progress[0] != "editor working" {
				t.Errorf("progress %v, want the provider's one notification", rep.Progress)
			}
			if legacy && rep.Ping != "ok" {
				t.Errorf("the client's ping got %q; want it answered", rep.Ping)
			}
			if !rep.Closed || rep.CloseError != "" {
				t.Errorf("the client did not close cleanly: %s", rep.CloseError)
			}
			// The provider saw stateless requests only, each with the
			// session in the envelope's _meta.
			for _, m := range s.Seen {
				if m.Method == "initialize" || m.Meta["acp-conductor/sessionId"] != s.SessionID {
					t.Errorf("the provider saw %s with _meta %v", m.Method, m.Meta)
				}
			}
		})
	}
}

// TestMCPThinkwellOwner has sdkagent's MCP Go SDK client call the server
// of a Thinkwell-dialect proxy (twproxy, declared {"type":"http","url":
// "acp:<uuid>"} and served over _mcp/*), in a chain with an RFD proxy and a
// Rust-dialect one: natively over the connect binding, and bridged over
// stdio and HTTP, as a legacy client and as a 2026-07-28 one (which asks
// server/discover first, is refused, and initializes).
func TestMCPThinkwellOwner(t *testing.T) {
	requireNodePeers(t)
	for _, c := range []struct{ name, flavor, advertise, protocol string }{
		{"thinkwell native", "thinkwell", "acp", "2025-11-25"},
		{"sacp native", "sacp", "acp", "2025-06-18"},
		{"thinkwell bridged stdio", "thinkwell", "none", ""},
		{"sacp bridged http", "sacp", "http", "2025-11-25"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			prompt, _ := json.Marshal(map[string]string{"server": "tw2-tools", "tool": "greet", "name": "go-agent", "protocol": c.protocol})
			s := runTSEditor(t, false, string(prompt), quote(goProxy)+" go1",
				"ACP_IT_TW_FLAVOR="+c.flavor+" "+quote(twProxy)+" tw2",
				"ACP_IT_DIALECT=rust "+quote(goProxy)+" rs3",
				quote(sdkAgent)+" --advertise "+c.advertise)
			rep := s.agentReport(t)
			var got map[string]any
			json.Unmarshal([]byte(rep.Result), &got)
			want := map[string]any{"owner": "tw2", "greeting": "hello go-agent", "session": s.SessionID, "client": "sdkagent"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (result %s)", k, got[k], v, rep.Result)
				}
			}
			if c.protocol != "" && rep.Protocol != c.protocol {
				t.Errorf("protocol %q, want %q", rep.Protocol, c.protocol)
			}
			if rep.ServerName != "tw2-tools" || strings.Join(rep.Tools, ",") != "greet" {
				t.Errorf("server %q, tools %v; want tw2-tools, [greet]", rep.ServerName, rep.Tools)
			}
			if len(rep.Progress) != 1 || rep.Progress[0] != "tw2 working" {
				t.Errorf("progress %v, want twproxy's one notification", rep.Progress)
			}
			if !rep.Closed || rep.CloseError != "" {
				t.Errorf("the client did not close cleanly: %s", rep.CloseError)
			}
		})
	}
}

// tsSummary is mcp_editor.mjs's summary.
type tsSummary struct {
	SessionID string `json:"sessionId"`
	Stop      string `json:"stopReason"`
	Error     json.RawMessage
	Report    []struct {
		Outcome struct {
			Result *struct {
				Content []struct{ Text string }
			}
			Error json.RawMessage
		}
		Asked    []string
		Error    json.RawMessage
		Progress []struct {
			Method string
			Params map[string]any
		}
	}
	Texts []string
	Seen  []struct {
		Method string
		Meta   map[string]any
	}
	Unexpected []any
	Exit       struct{ Code *int }
}

// agentReport returns sdkagent's report, the one text of the summary, and
// fails t if there is none or the agent's MCP client failed.
func (s *tsSummary) agentReport(t *testing.T) report {
	t.Helper()
	if len(s.Texts) != 1 {
		t.Fatalf("the agent reported %d texts, want 1: %v", len(s.Texts), s.Texts)
	}
	var rep report
	if err := json.Unmarshal([]byte(s.Texts[0]), &rep); err != nil {
		t.Fatalf("the agent's report %s: %v", s.Texts[0], err)
	}
	if rep.Error != "" {
		t.Fatalf("the agent's MCP client failed: %s", rep.Error)
	}
	return rep
}

// runTSEditor runs mcp_editor.mjs (offering its server when provide is
// set) on an agent-mode conductor with the given components, and returns
// its summary once it checked that the prompt ended well, nothing
// unexpected reached the editor, the conductor exited 0 and no process is
// left.
func runTSEditor(t *testing.T, provide bool, prompt string, components ...string) *tsSummary {
	return runTSEditorIn(t, t.TempDir(), nil, provide, prompt, components...)
}

// runTSEditorIn is runTSEditor with the editor (and so the session) in dir
// and env added to the environment of every process.
func runTSEditorIn(t *testing.T, dir string, env []string, provide bool, prompt string, components ...string) *tsSummary {
	t.Helper()
	argv := append([]string{conductor, "agent", "--log-format", "json", "--shutdown-grace", "10s"}, components...)
	return runTSEditorOn(t, dir, env, provide, prompt, argv...)
}

// runTSEditorOn is runTSEditorIn with the agent the editor runs given as a
// whole command line (another conductor, say).
func runTSEditorOn(t *testing.T, dir string, env []string, provide bool, prompt string, argv ...string) *tsSummary {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	marker := watchedMarker(t)
	args := []string{filepath.Join(peersDir, "mcp_editor.mjs"), "--prompt", prompt}
	if provide {
		args = append(args, "--provide")
	}
	args = append(append(args, "--"), argv...)
	cmd := exec.CommandContext(ctx, nodeBin, args...)
	cmd.Env = append(append(os.Environ(), markerVar+"="+marker), env...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s tsSummary
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &s) != nil {
		t.Fatalf("mcp_editor: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("summary: %s\nthe conductor's log:\n%s", lines[len(lines)-1], stderr.String())
		}
	})
	if s.Error != nil || s.Stop != "end_turn" {
		t.Fatalf("the prompt failed: %s (stop reason %q)", s.Error, s.Stop)
	}
	if len(s.Unexpected) != 0 {
		t.Errorf("the editor got unexpected messages: %v", s.Unexpected)
	}
	if s.Exit.Code == nil || *s.Exit.Code != 0 {
		t.Errorf("the conductor exited %v after its stdin closed, want 0", s.Exit.Code)
	}
	return &s
}
