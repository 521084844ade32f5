package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
)

// Real clients and agents from npm (integration/peers' lockfile), which
// editors and people run: acpx, a headless ACP client, as the editor; and
// as the agent Zed's @zed-industries/codex-acp (Codex) and
// @zed-industries/claude-agent-acp (Claude Code). The agents need accounts
// to do any work, but answer initialize and session/new, and ignore the end
// of their input, as they do under an editor.

// npmBin is the path of a program the peers' packages install.
func npmBin(name string) string { return filepath.Join(peersDir, "node_modules", ".bin", name) }

// TestAcpxClient runs acpx as the editor of a chain (the Go proxy, then the
// TypeScript SDK agent), local or with the agent behind `serve`: it
// initializes, opens a session in its working directory, prompts, answers
// the agent's permission request, and prints what went each way, which must
// be the agent's answers in order; it exits 0, and nothing of the chain is
// left running.
func TestAcpxClient(t *testing.T) {
	requireConductor(t)
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		acpxClient(t, agentCmd("acpx-agent"))
	})
	t.Run("remote", func(t *testing.T) {
		t.Parallel()
		s := startServe(t, agentCmd("acpx-agent"))
		acpxClient(t, s.url)
		s.waitNoChains(t)
	})
}

func acpxClient(t *testing.T, agent string) {
	ctx := testContext(t, 90*time.Second)
	dir, home := t.TempDir(), acpxHome(t)
	marker := markerChecked(t)
	const text = "please ask permission for acpx"
	cmd := exec.CommandContext(ctx, npmBin("acpx"), "--format", "json", "--approve-all", "--cwd", dir,
		"--agent", shellJoin(conductor, "agent", goProxyCmd("go1"), agent), "exec", text)
	cmd.Env = append(os.Environ(), "HOME="+home, markerVar+"="+marker, "ACP_CONDUCTOR_REMOTE_TOKEN="+serveToken)
	var stderr testio.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acpx: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	seen := readAcpx(t, out)
	want := []string{"permission-result: selected:allow-once", "#0/3 " + text, "#1/3 " + text, "#2/3 " + text}
	if seen.agent != "acpx-agent" || !slices.Equal(seen.texts, want) || seen.stop != "end_turn" {
		t.Errorf("acpx saw agent %q, updates %q, stop reason %q; want acpx-agent, %q, end_turn\n%s", seen.agent, seen.texts, seen.stop, want, out)
	}
}

// acpxHome returns a fresh HOME for acpx, and removes when the test ends
// the directory for its queue's sockets that acpx makes outside it, at a
// fixed place named by a hash of HOME (/tmp/acpx-<sha256(HOME)[:10]>), so
// that runs do not leave one behind each.
func acpxHome(t *testing.T) string {
	home := t.TempDir()
	sum := sha256.Sum256([]byte(home))
	sockets := filepath.Join("/tmp", "acpx-"+hex.EncodeToString(sum[:])[:10])
	t.Cleanup(func() { os.RemoveAll(sockets) })
	return home
}

// acpxSaw is what acpx printed with --format json: the messages of the
// ACP connection it had with the agent, and its own results.
type acpxSaw struct {
	agent   string   // the agent's name, from initialize
	texts   []string // agent_message_chunk texts, in order
	stop    string   // the prompt's stop reason
	actions []string // acpx's own results ("session_ensured", ...)
}

func readAcpx(t *testing.T, out []byte) acpxSaw {
	t.Helper()
	var seen acpxSaw
	for line := range strings.Lines(string(out)) {
		var m struct {
			Action string
			Method string
			Params struct {
				Update struct {
					SessionUpdate string
					Content       struct{ Text string }
				}
			}
			Result struct {
				AgentInfo  struct{ Name string }
				StopReason string
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("acpx printed %q: %v", line, err)
		}
		switch {
		case m.Action != "":
			seen.actions = append(seen.actions, m.Action)
		case m.Method == "session/update" && m.Params.Update.SessionUpdate == "agent_message_chunk":
			seen.texts = append(seen.texts, m.Params.Update.Content.Text)
		case m.Result.AgentInfo.Name != "":
			seen.agent = m.Result.AgentInfo.Name
		case m.Result.StopReason != "":
			seen.stop = m.Result.StopReason
		}
	}
	return seen
}

// TestAcpxSessions drives the chain through acpx's persistent sessions,
// which its plain `acpx AGENT PROMPT` uses: acpx leaves a queue owner
// running in the background, which holds the chain between commands.
// `sessions new` starts it; a prompt runs through it; a prompt the agent
// holds open is cancelled by a second acpx (session/cancel through the
// chain: stop reason cancelled); `sessions close` ends the owner, whose
// end of input ends the chain: nothing of it is left.
func TestAcpxSessions(t *testing.T) {
	requireConductor(t)
	ctx := testContext(t, 90*time.Second)
	dir, home := t.TempDir(), acpxHome(t)
	marker := markerChecked(t)
	agent := shellJoin(conductor, "agent", goProxyCmd("go1"), agentCmd("acpx-agent"))
	acpx := func(ctx context.Context, args ...string) *exec.Cmd {
		// A short idle TTL, so that an owner a failed test leaves behind
		// ends soon even if nothing kills it.
		cmd := exec.CommandContext(ctx, npmBin("acpx"), append([]string{"--format", "json", "--approve-all",
			"--cwd", dir, "--ttl", "30", "--agent", agent}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, markerVar+"="+marker)
		return cmd
	}
	run := func(args ...string) acpxSaw {
		t.Helper()
		cmd := acpx(ctx, args...)
		var stderr testio.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("acpx %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return readAcpx(t, out)
	}

	if seen := run("sessions", "new"); !slices.Equal(seen.actions, []string{"session_ensured"}) {
		t.Fatalf("sessions new printed %q, want session_ensured", seen.actions)
	}
	const text = "hello through acpx's owner"
	seen := run("prompt", text)
	if want := []string{"#0/3 " + text, "#1/3 " + text, "#2/3 " + text}; !slices.Equal(seen.texts, want) || seen.stop != "end_turn" {
		t.Errorf("prompt: updates %q, stop reason %q; want %q, end_turn", seen.texts, seen.stop, want)
	}

	// The agent answers "hang" with one chunk, then waits for the cancel;
	// without it, the prompt would run until the deadline.
	const hang = "please hang"
	heldCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	held := acpx(heldCtx, "prompt", hang)
	var heldErr testio.Buffer
	held.Stderr = &heldErr
	stdout, err := held.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	var heldOut strings.Builder
	lines := bufio.NewScanner(stdout)
	for started := false; !started; {
		if !lines.Scan() {
			err := held.Wait()
			t.Fatalf("acpx prompt %q ended (%v) before the agent's first chunk\nstdout:\n%s\nstderr:\n%s", hang, err, heldOut.String(), heldErr.String())
		}
		heldOut.WriteString(lines.Text() + "\n")
		started = strings.Contains(lines.Text(), "#0/3 "+hang)
	}
	if seen := run("cancel"); !slices.Equal(seen.actions, []string{"cancel_result"}) {
		t.Errorf("cancel printed %q, want cancel_result", seen.actions)
	}
	for lines.Scan() {
		heldOut.WriteString(lines.Text() + "\n")
	}
	if err := held.Wait(); err != nil {
		t.Fatalf("acpx prompt %q: %v\nstdout:\n%s\nstderr:\n%s", hang, err, heldOut.String(), heldErr.String())
	}
	if seen := readAcpx(t, []byte(heldOut.String())); !slices.Equal(seen.texts, []string{"#0/3 " + hang}) || seen.stop != "cancelled" {
		t.Errorf("held prompt: updates %q, stop reason %q; want [#0/3 %s], cancelled\n%s", seen.texts, seen.stop, hang, heldOut.String())
	}

	if seen := run("sessions", "close"); !slices.Equal(seen.actions, []string{"session_closed"}) {
		t.Errorf("sessions close printed %q, want session_closed", seen.actions)
	}
	// markerChecked's cleanup checks that the owner and the chain are gone.
}

// TestAcpxStopsCodex runs acpx's exec with Codex behind the chain, with
// no account: session/new fails with Codex's auth-required error, which
// acpx must show as it does directly. acpx then ends the agent as it ends
// any: it closes its stdin, sends SIGTERM 100ms later, and SIGKILL 1.5s
// after that. Codex ignores the end of its input, so a conductor that
// waited out its 2s grace for it was killed every time, leaving its
// outcome unlogged and its processes to the watchdog; told twice to stop,
// it must stop at once, before acpx has to kill it.
func TestAcpxStopsCodex(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	dir, home := t.TempDir(), acpxHome(t)
	marker := markerChecked(t)
	logFile := filepath.Join(t.TempDir(), "conductor.log")
	cmd := exec.CommandContext(ctx, npmBin("acpx"), "--format", "json", "--verbose", "--cwd", dir,
		"--agent", shellJoin(conductor, "agent", "--shutdown-grace", "2s", goProxyCmd("go1"), npmBin("codex-acp")), "exec", "hello")
	cmd.Env = append(os.Environ(), "HOME="+home, "CODEX_HOME="+t.TempDir(), markerVar+"="+marker,
		"ACP_CONDUCTOR_LOGGING_FILE="+logFile, "OPENAI_API_KEY=", "CODEX_API_KEY=")
	var stderr testio.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || !strings.Contains(string(out), `"error":{"code":-32000,"message":"Authentication required"}`) {
		t.Errorf("acpx exited with %v, printing\n%s\nwant exit 1 and Codex's auth-required error", err, out)
	}
	log, _ := os.ReadFile(logFile)
	if strings.Contains(stderr.String(), "forcing SIGKILL") || !strings.Contains(string(log), "stopped: ") {
		t.Errorf("acpx had to kill the conductor, or it did not log how it stopped\nacpx stderr:\n%s\nconductor log:\n%s", stderr.String(), log)
	}
	// markerChecked's cleanup checks that nothing of the chain is left.
}

// TestCodexAgent puts Codex behind a proxy that serves an MCP server (the
// Thinkwell-dialect twproxy). Codex advertises MCP over HTTP, so the
// conductor bridges the server over HTTP by default, or over stdio when
// told; Codex's own MCP client connects once it has opened the session (to
// the loopback URL, or by running the conductor's shim): it initializes and
// lists the tools through the bridge, as the owner logs. Authentication by
// API key is local (the key is never used: nothing is prompted). Codex
// ignores the end of its input; the conductor stops it after the grace and
// exits 0, and no process is left.
func TestCodexAgent(t *testing.T) {
	requireConductor(t)
	for _, bridge := range []string{"auto", "stdio"} {
		t.Run(bridge, func(t *testing.T) {
			t.Parallel()
			codexAgent(t, bridge)
		})
	}
}

func codexAgent(t *testing.T, bridge string) {
	ctx := testContext(t, 90*time.Second)
	dir := t.TempDir()
	marker := markerChecked(t)
	p := startRaw(t, ctx, []string{conductor, "agent", "--shutdown-grace", "2s", "--mcp-bridge", bridge,
		"ACP_IT_TW_LOG_MCP=1 " + twProxyCmd("tw", "thinkwell"), shellJoin(npmBin("codex-acp"))},
		markerVar+"="+marker, "CODEX_HOME="+t.TempDir(), "OPENAI_API_KEY=sk-acp-conductor-test")
	call := func(id, method, params string) *rawMsg {
		t.Helper()
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+`}`)
		for {
			if m := p.recv(t, ctx); string(m.ID) == id && m.Method == "" {
				return m
			}
		}
	}

	m := call("0", "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	var init struct {
		AgentCapabilities struct {
			MCPCapabilities struct{ HTTP bool }
		}
		AuthMethods []struct{ ID string }
	}
	json.Unmarshal(m.Result, &init)
	if !init.AgentCapabilities.MCPCapabilities.HTTP || !slices.ContainsFunc(init.AuthMethods, func(a struct{ ID string }) bool { return a.ID == "openai-api-key" }) {
		t.Fatalf("initialize answered %s, want Codex's capabilities and auth methods", m.raw)
	}
	if m := call("1", "authenticate", `{"methodId":"openai-api-key"}`); m.Error != nil {
		t.Fatalf("authenticate: %s", m.raw)
	}
	m = call("2", "session/new", `{"cwd":`+string(mustJSON(dir))+`,"mcpServers":[]}`)
	var session struct{ SessionID string }
	if json.Unmarshal(m.Result, &session); session.SessionID == "" {
		t.Fatalf("session/new answered %s", m.raw)
	}

	// What Codex's MCP client says to the server, as the owner logs it.
	said := func() bool {
		log := p.stderr.String()
		return strings.Contains(log, "MCP initialize on ") && strings.Contains(log, "MCP tools/list on ")
	}
	if !waitFor(ctx, said) {
		t.Errorf("Codex's MCP client did not initialize and list the tools of the proxy's server:\n%s", p.stderr.String())
	}

	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the conductor exited with %v after its input closed\n%s", err, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "codex-acp did not exit within the 2s grace period") {
		t.Errorf("the conductor did not say it stopped Codex:\n%s", p.stderr.String())
	}
}

// TestCodexEditorMCP: Codex's own MCP client (rmcp) reaches the editor's
// servers, offered with the SDK's McpOverAcpProvider (request binding, MCP
// 2026-07-28), through the conductor's bridge over HTTP and stdio: as the
// session starts it initializes each, which the conductor answers from
// the owner's server/discover, and lists its tools; a request that names
// a session names its own.
func TestCodexEditorMCP(t *testing.T) {
	requireConductor(t)
	for _, bridge := range []string{"auto", "stdio"} {
		t.Run(bridge, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			codex := shellJoin("CODEX_HOME="+t.TempDir(), "OPENAI_API_KEY=sk-acp-conductor-test", npmBin("codex-acp"))
			s := runMCPEditorArgs(t, ctx, []string{filepath.Join(peersDir, "mcp_editor.mjs"), "--provide", "--provide-mcp-server",
				"--authenticate", "openai-api-key", "--no-prompt", "--",
				conductor, "agent", "--shutdown-grace", "1s", "--mcp-bridge", bridge, codex})
			if s.Error != nil || s.SessionID == "" || len(s.Unexpected) > 0 {
				t.Fatalf("session %q, error %s, unexpected %v", s.SessionID, s.Error, s.Unexpected)
			}
			listed := map[string]bool{}
			for _, seen := range s.Seen {
				// Codex connects before it answers session/new: until the
				// answer, the conductor cannot name the session.
				if id, ok := seen.Meta["acp-conductor/sessionId"]; ok && id != s.SessionID {
					t.Errorf("the provider saw %s for %s naming session %v, not %s", seen.Method, seen.ServerID, id, s.SessionID)
				}
				if seen.Method == "tools/list" {
					listed[strings.SplitN(seen.ServerID, ":", 2)[0]] = true
				}
			}
			if !listed["editor-tools"] || !listed["mcpsdk-tools"] {
				t.Errorf("Codex listed the tools of %v, want editor-tools and mcpsdk-tools; the provider saw %+v", listed, s.Seen)
			}
			if s.Exit.Code == nil || *s.Exit.Code != 0 {
				t.Errorf("the conductor exited with %v, want 0", s.Exit.Code)
			}
		})
	}
}

// TestClaudeAgent runs Claude Code's agent behind the Go proxy. Without an
// account it cannot open a session; what it answers must reach the editor
// as it answers with no conductor (run directly, first). It ignores the end
// of its input; the conductor stops it, and whatever it started, and exits
// 0.
func TestClaudeAgent(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 90*time.Second)
	dir := t.TempDir()
	home := t.TempDir() // no account, whoever runs the tests
	env := []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + home}
	const (
		initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`
		wantInit   = `"agentInfo":{"name":"@zed-industries/claude-agent-acp"`
	)
	newSession := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":` + string(mustJSON(dir)) + `,"mcpServers":[]}}`
	answer := func(p *rawPeer, id string) *rawMsg {
		t.Helper()
		for {
			if m := p.recv(t, ctx); string(m.ID) == id && m.Method == "" {
				return m
			}
		}
	}

	// Directly, in a process group of its own, ended with the group.
	direct := exec.CommandContext(ctx, npmBin("claude-agent-acp"))
	direct.Env = append(os.Environ(), env...)
	direct.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d := startCmd(t, direct)
	t.Cleanup(func() { syscall.Kill(-direct.Process.Pid, syscall.SIGKILL) })
	d.send(t, initialize)
	if m := answer(d, "0"); !strings.Contains(m.raw, wantInit) {
		t.Fatalf("claude-agent-acp answered initialize with %s", m.raw)
	}
	d.send(t, newSession)
	want := answer(d, "1")

	marker := markerChecked(t)
	p := startRaw(t, ctx, []string{conductor, "agent", "--shutdown-grace", "2s", goProxyCmd("go1"), shellJoin(npmBin("claude-agent-acp"))},
		append(env, markerVar+"="+marker)...)
	p.send(t, initialize)
	if m := answer(p, "0"); !strings.Contains(m.raw, wantInit) {
		t.Fatalf("initialize through the chain answered %s", m.raw)
	}
	p.send(t, newSession)
	got := answer(p, "1")
	if string(got.Error) != string(want.Error) || (got.Result == nil) != (want.Result == nil) {
		t.Errorf("session/new through the chain answered\n\t%s\ndirectly\n\t%s", got.raw, want.raw)
	}
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the conductor exited with %v after its input closed\n%s", err, p.stderr.String())
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
