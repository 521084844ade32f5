package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The MCP server toolproxy declares, the tool the tests call, and all its
// tools as tools/list gives them.
const (
	serverName     = "it-tools"
	toolName       = "greet"
	toolproxyTools = "greet,wait,waited"
)

// MCP revisions the agent's client asks for. Before 2026-07-28 a server
// may send the client requests of its own while it serves a call, and
// toolproxy's greet sends roots/list; from 2026-07-28 on it may not, and
// greet answers input_required with a roots/list input request instead.
const (
	legacyRevision = "2025-11-25"
	latestRevision = "2026-07-28" // the SDK's latest, which it asks for by default
)

// TestMCPOverACP runs editor → acp-conductor → toolproxy → goproxy →
// sdkagent, where toolproxy owns an MCP server (the official Go SDK's, over
// proxy/mcpsdk) two hops up the chain from the agent, and the agent's MCP
// client is the SDK's too. In each case the agent advertises some MCP
// capabilities, the conductor runs with some --mcp-bridge, and the agent
// must find in its session/new the declaration it can use (stdio, http or,
// natively, acp) and use it as any agent would. It does so in two sessions,
// one per MCP revision: it connects, lists the tools, calls greet (during
// which the server asks the client for its roots, and reports progress),
// and disconnects.
func TestMCPOverACP(t *testing.T) {
	for _, c := range []struct {
		name      string
		advertise string // sdkagent --advertise
		bridge    string // --mcp-bridge, or "" for the default (auto)
		transport string // the declaration the agent must get: stdio, http or acp
	}{
		{"stdio/auto", "none", "", "stdio"},
		{"stdio/forced", "http", "stdio", "stdio"},
		{"http/auto", "http", "", "http"},
		{"http/forced", "http", "http", "http"},
		// An agent that never said it can reach MCP over HTTP gets stdio,
		// and the conductor says so.
		{"http/forced-unadvertised", "none", "http", "stdio"},
		{"native", "acp", "", "acp"},
		{"native/bridge-configured", "acp,http", "http", "acp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runChain(t, c.advertise, c.bridge, c.transport)
		})
	}
}

// A report is what sdkagent says a prompt did (its report type).
type report struct {
	Declaration         json.RawMessage `json:"declaration"`
	Transport           string          `json:"transport"`
	Protocol            string          `json:"protocol"`
	ServerName          string          `json:"serverName"`
	Tools               []string        `json:"tools"`
	Result              string          `json:"result"`
	IsError             bool            `json:"isError"`
	Progress            []string        `json:"progress"`
	ServerRequests      []string        `json:"serverRequests"`
	ServerNotifications []string        `json:"serverNotifications"`
	Closed              bool            `json:"closed"`
	CloseError          string          `json:"closeError"`
	Disconnect          string          `json:"disconnect"`
	Ping                string          `json:"ping"`
	Error               string          `json:"error"`
}

// A connRecord is one MCP connection toolproxy served, as _it/mcp_connections
// reports it.
type connRecord struct {
	ID                 string `json:"connectionId"`
	SessionID          string `json:"sessionId"`
	Cwd                string `json:"cwd"`
	Open               bool   `json:"open"`
	ClientDisconnected bool   `json:"clientDisconnected"`
	Error              string `json:"error"`
}

func runChain(t *testing.T, advertise, bridge, transport string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	marker := newMarker()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		left, ok := leftovers(ctx, marker)
		if !ok {
			t.Log("no /proc here: not checking for processes left behind")
		}
		if len(left) > 0 {
			t.Errorf("processes left running:\n  %s", strings.Join(left, "\n  "))
			killMarked(marker)
		}
	})
	// A generous grace: the components exit as soon as their stdin closes,
	// but a race-enabled binary sleeps a second at exit (GORACE
	// atexit_sleep_ms), and the default 2s would then make the conductor
	// warn, and signal, for no fault of theirs.
	args := []string{"agent", "--log-format", "json", "--log-level", "info", "--shutdown-grace", "10s"}
	if bridge != "" {
		args = append(args, "--mcp-bridge", bridge)
	}
	args = append(args,
		quote(toolProxy),
		"ACP_IT_TRACE=1 "+quote(goProxy)+" passthrough",
		quote(sdkAgent)+" --advertise "+advertise,
	)
	cmd := exec.Command(conductor, args...)
	cmd.Env = append(os.Environ(), markerVar+"="+marker)
	e := startEditor(t, cmd)
	exited := false
	defer func() {
		if !exited {
			e.stdin.Close()
			e.cmd.Process.Kill()
			e.wait(context.Background())
		}
		if t.Failed() {
			t.Logf("conductor log:\n%s", e.stderr)
		}
	}()

	init := e.request(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	var caps struct {
		AgentCapabilities struct {
			MCP struct{ ACP bool } `json:"mcpCapabilities"`
		} `json:"agentCapabilities"`
	}
	if err := json.Unmarshal(init.result, &caps); err != nil || !caps.AgentCapabilities.MCP.ACP {
		t.Errorf("initialize: the chain does not advertise mcpCapabilities.acp: %s %s", init.result, init.err)
	}

	if procs, ok := markedProcs(marker); ok && len(procs) < 4 {
		// The conductor and its three components, at least: if not, the
		// marker does not work and the check for leftovers proves nothing.
		t.Errorf("the marker finds only these processes of the chain:\n  %s", strings.Join(procs, "\n  "))
	}

	type sessionInfo struct{ cwd, revision string }
	sessions := map[string]sessionInfo{}
	for _, revision := range []string{legacyRevision, latestRevision} {
		cwd := t.TempDir()
		a := e.request(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
		var s struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(a.result, &s); err != nil || s.SessionID == "" {
			t.Fatalf("session/new: %s %s", a.result, a.err)
		}
		sessions[s.SessionID] = sessionInfo{cwd, revision}
		who := "editor of " + strings.ReplaceAll(t.Name(), "/", " ")
		ask := fmt.Sprintf(`{"server":%q,"tool":%q,"name":%q}`, serverName, toolName, who)
		if revision == legacyRevision {
			ask = ask[:len(ask)-1] + fmt.Sprintf(`,"protocol":%q}`, revision)
		}
		a = e.request(ctx, "session/prompt", map[string]any{
			"sessionId": s.SessionID,
			"prompt":    []map[string]string{{"type": "text", "text": ask}},
		})
		var stop struct{ StopReason string }
		if err := json.Unmarshal(a.result, &stop); err != nil || stop.StopReason != "end_turn" {
			t.Errorf("session/prompt: %s %s, want stopReason end_turn", a.result, a.err)
		}
		if len(a.updates) != 1 {
			t.Fatalf("revision %s: %d session updates, want the agent's one report: %s", revision, len(a.updates), a.updates)
		}
		var u struct {
			Kind    string `json:"sessionUpdate"`
			Content struct{ Text string }
		}
		var rep report
		if err := json.Unmarshal(a.updates[0], &u); err != nil || u.Kind != "agent_message_chunk" || json.Unmarshal([]byte(u.Content.Text), &rep) != nil {
			t.Fatalf("revision %s: the agent's update is not a report: %s", revision, a.updates[0])
		}
		checkReport(t, revision, transport, rep, who, cwd, s.SessionID)
	}

	// The owner's side: every connection the agent opened has been ended,
	// by the client, before the chain stops.
	a := e.request(ctx, "_it/mcp_connections", map[string]any{})
	var conns struct {
		Settled     bool         `json:"settled"`
		Connections []connRecord `json:"connections"`
	}
	if err := json.Unmarshal(a.result, &conns); err != nil || !conns.Settled {
		t.Errorf("_it/mcp_connections: %s %s", a.result, a.err)
	}
	perSession := map[string]int{}
	for _, c := range conns.Connections {
		perSession[c.SessionID]++
		if c.Open || !c.ClientDisconnected || c.Error != "" {
			t.Errorf("MCP connection %s was not ended by the client's disconnect: %+v", c.ID, c)
		}
		if s, ok := sessions[c.SessionID]; !ok || c.Cwd != s.cwd {
			t.Errorf("MCP connection %s serves session %q (cwd %q); the sessions are %v", c.ID, c.SessionID, c.Cwd, sessions)
		}
	}
	for id, s := range sessions {
		// One MCP session, one connection to the owner; except over HTTP
		// in revision 2026-07-28, which is sessionless: every POST is a
		// connection of its own (server/discover, tools/list, and
		// tools/call twice, the second time with the input response).
		n := perSession[id]
		if transport == "http" && s.revision == latestRevision {
			if n < 2 {
				t.Errorf("session %s (revision %s over HTTP): the owner served %d MCP connections, want one per POST", id, s.revision, n)
			}
		} else if n != 1 {
			t.Errorf("session %s (revision %s): the owner served %d MCP connections, want 1", id, s.revision, n)
		}
	}

	if err := e.close(ctx); err != nil {
		t.Errorf("the conductor exited with %v after its stdin closed; want status 0", err)
	}
	exited = true

	// The passthrough proxy between the owner and the agent never sees
	// MCP-over-ACP: the conductor routes it straight to the owner.
	trace := componentLines(t, e.stderr.String(), "goproxy")
	if !slices.ContainsFunc(trace, func(l string) bool { return strings.Contains(l, `"method":"session/prompt"`) }) {
		t.Errorf("the passthrough proxy's trace shows no session/prompt; is ACP_IT_TRACE on?\n%s", strings.Join(trace, "\n"))
	}
	for _, l := range trace {
		if strings.Contains(l, `"method":"mcp/`) {
			t.Errorf("the passthrough proxy saw MCP-over-ACP: %s", l)
		}
	}
	var expected []string
	if bridge == "http" && transport == "stdio" {
		expected = append(expected, "did not advertise agentCapabilities.mcpCapabilities.http") // a v1 agent: v1's path
	}
	checkQuiet(t, e.stderr.String(), expected...)
}

// checkQuiet checks that nothing in the chain complained: no warning or
// error from the conductor, from the proxy library in toolproxy (which logs
// only traffic it dropped or refused), or from sdkagent; except the
// conductor's warnings that contain one of expected, which must be there.
func checkQuiet(t *testing.T, log string, expected ...string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		var entry struct {
			Level string `json:"level"`
			Peer  string `json:"peer"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &entry) != nil {
			continue
		}
		if i := slices.IndexFunc(expected, func(e string) bool { return entry.Level == "warn" && strings.Contains(entry.Msg, e) }); i >= 0 {
			expected = slices.Delete(expected, i, i+1)
			continue
		}
		switch {
		case entry.Level != "info" && entry.Level != "debug",
			entry.Peer == "toolproxy" && (strings.Contains(entry.Msg, "level=WARN") || strings.Contains(entry.Msg, "level=ERROR")),
			entry.Peer == "sdkagent" && strings.Contains(entry.Msg, "unexpected:"):
			t.Errorf("a complaint in the conductor's log: %s", l)
		}
	}
	for _, e := range expected {
		t.Errorf("no warning saying %q in the conductor's log", e)
	}
}

// checkReport checks what the agent did in one session.
func checkReport(t *testing.T, revision, transport string, rep report, who, cwd, sessionID string) {
	t.Helper()
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("revision %s: "+format, append([]any{revision}, args...)...)
	}
	if rep.Error != "" {
		errorf("the agent failed: %s", rep.Error)
	}
	if rep.Transport != transport {
		errorf("the agent connected over %q, want %q; its declaration: %s", rep.Transport, transport, rep.Declaration)
	}
	checkDeclaration(t, transport, rep.Declaration)
	if rep.Protocol != revision {
		errorf("MCP revision %q negotiated, want %q", rep.Protocol, revision)
	}
	if rep.ServerName != "toolproxy" {
		errorf("server %q, want toolproxy's", rep.ServerName)
	}
	if !slices.Contains(rep.Tools, toolName) {
		errorf("tools/list: %v, want %s", rep.Tools, toolName)
	}
	// The client's answer to the server's question is in the result.
	via := "input response"
	if revision == legacyRevision {
		via = "roots/list request"
	}
	want := fmt.Sprintf("hello, %s; roots: file://%s; via: %s; session: %s", who, cwd, via, sessionID)
	if rep.Result != want || rep.IsError {
		errorf("tools/call result %q (isError %v), want %q", rep.Result, rep.IsError, want)
	}
	// Before 2026-07-28 the question went over the wire, from the owner to
	// the agent's client; after, the client answered an input request.
	if asked := slices.Contains(rep.ServerRequests, "roots/list"); asked != (revision == legacyRevision) {
		errorf("the server sent the client requests %v", rep.ServerRequests)
	}
	if !slices.Equal(rep.Progress, []string{"greeting " + who}) || !slices.Contains(rep.ServerNotifications, "notifications/progress") {
		errorf("progress %q, server notifications %v; want one notifications/progress", rep.Progress, rep.ServerNotifications)
	}
	if !rep.Closed || rep.CloseError != "" {
		errorf("closing the MCP session: %q", rep.CloseError)
	}
	switch transport {
	case "stdio": // the shim exited cleanly once the client closed its stdin
		if rep.Disconnect != "exit status 0" {
			errorf("the stdio server (the shim) ended with %q", rep.Disconnect)
		}
	case "acp": // mcp/disconnect reached the owner, which answered
		if rep.Disconnect != "answered {}" {
			errorf("mcp/disconnect: %s", rep.Disconnect)
		}
	}
}

// checkDeclaration checks the MCP server declaration the agent got.
func checkDeclaration(t *testing.T, transport string, raw json.RawMessage) {
	t.Helper()
	var d map[string]json.RawMessage
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Errorf("declaration %s: %v", raw, err)
		return
	}
	var decl struct {
		Type    string
		Name    string
		ID      string
		Command string
		Args    []string
		Env     []struct{ Name, Value string }
		URL     string
		Headers []struct{ Name, Value string }
	}
	json.Unmarshal(raw, &decl)
	bad := func(why string) { t.Errorf("%s declaration %s: %s", transport, raw, why) }
	if decl.Name != serverName {
		bad("wrong name")
	}
	switch transport {
	case "acp":
		// The owner (the proxy library) declares serverId; the conductor
		// adds the RFD's id for an agent it has not heard from yet.
		if decl.Type != "acp" || decl.ID == "" || string(d["serverId"]) != strconv.Quote(decl.ID) || len(d) != 4 {
			bad("want the owner's declaration in both spellings: type, name, serverId and id")
		}
	case "stdio":
		var env []string
		for _, kv := range decl.Env {
			env = append(env, kv.Name)
		}
		slices.Sort(env)
		switch {
		case d["type"] != nil || d["id"] != nil || d["serverId"] != nil:
			bad("the acp type or id is still there")
		case decl.Command != conductor || !slices.Equal(decl.Args, []string{"mcp-shim"}):
			bad("want the conductor's own binary, with mcp-shim")
		case !slices.Equal(env, []string{"ACP_CONDUCTOR_MCP_SOCKET", "ACP_CONDUCTOR_MCP_TOKEN"}):
			bad("want the shim's socket and token in env")
		}
	case "http":
		switch {
		case decl.Type != "http" || d["id"] != nil || d["serverId"] != nil:
			bad("want type http and no id")
		case !strings.HasPrefix(decl.URL, "http://127.0.0.1:") || !strings.Contains(decl.URL, "/mcp/"):
			bad("want a loopback URL under /mcp/")
		case len(decl.Headers) != 1 || decl.Headers[0].Name != "Authorization" || !strings.HasPrefix(decl.Headers[0].Value, "Bearer "):
			bad("want the server's token in an Authorization header")
		case strings.Contains(decl.URL, strings.TrimPrefix(decl.Headers[0].Value, "Bearer ")):
			bad("the URL carries the token")
		}
	}
}

// componentLines returns what the component named name wrote on its
// stderr, from the conductor's JSON log.
func componentLines(t *testing.T, log, name string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		var entry struct {
			Peer   string `json:"peer"`
			Stream string `json:"stream"`
			Msg    string `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &entry) == nil && entry.Peer == name && entry.Stream == "stderr" {
			lines = append(lines, entry.Msg)
		}
	}
	return lines
}

// quote makes s one shell word, for the conductor's component strings.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
