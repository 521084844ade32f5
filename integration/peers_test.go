package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
)

// TestPeersDirect runs the SDK client straight against the SDK agent, with no
// conductor: it checks the test peers themselves, so that a failure elsewhere
// can be blamed on what sits between them.
func TestPeersDirect(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	cfg := conversationConfig(t, "direct")
	withMarker(t, &cfg)
	s := runClient(t, ctx, cfg, []string{nodeBin, filepath.Join(peersDir, "agent.mjs"), "--name", "direct-agent"})
	checkConversation(t, s, cfg)
	if got := s.exitCode(); got != 0 {
		t.Errorf("agent exit: %s", s.exitString())
	}
}

// TestPassthroughProxies drives each passthrough proxy directly, playing the
// conductor, to show that the proxies follow the RFD before they are used to
// test the conductor.
func TestPassthroughProxies(t *testing.T) {
	impls := []struct {
		name string
		argv func() []string
		lib  bool // the proxy library, which adds mcpCapabilities.acp to initialize's result
	}{
		{"go", func() []string { return []string{goProxy, "go-unit"} }, false},
		{"python", func() []string { return []string{python, "-u", "peers/passthrough_proxy.py", "py-unit"} }, false},
		{"library", func() []string { return []string{libProxy, "lib-unit"} }, true},
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			if impl.lib {
				requireLibProxy(t)
			}
			t.Parallel()
			ctx := testContext(t, 30*time.Second)
			p := startRaw(t, ctx, impl.argv())

			// proxy/initialize goes to the successor as initialize, params intact.
			initParams := `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}},"_meta":{"x":"<&> ü \u00e9"}}`
			p.send(t, `{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":`+initParams+`}`)
			m := p.recv(t, ctx)
			inner := m.successor(t)
			if m.Method != "proxy/successor" || m.ID == nil || inner.Method != "initialize" || string(inner.Params) != initParams {
				t.Fatalf("proxy/initialize became %s", m.raw)
			}
			initResult := `{"protocolVersion":1,"agentCapabilities":{"loadSession":false},"authMethods":[]}`
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, initResult))
			m = p.recv(t, ctx)
			if impl.lib {
				var r struct {
					ProtocolVersion   int `json:"protocolVersion"`
					AgentCapabilities struct {
						MCP struct {
							ACP bool `json:"acp"`
						} `json:"mcpCapabilities"`
					} `json:"agentCapabilities"`
				}
				if string(m.ID) != "1" || json.Unmarshal(m.Result, &r) != nil || r.ProtocolVersion != 1 || !r.AgentCapabilities.MCP.ACP {
					t.Fatalf("initialize response became %s", m.raw)
				}
			} else if string(m.ID) != "1" || string(m.Result) != initResult {
				t.Fatalf("initialize response became %s", m.raw)
			}

			// A request from the successor and one from the predecessor are in
			// flight together, answered in the opposite order.
			permParams := `{"sessionId":"s1","toolCall":{"toolCallId":"t"},"options":[]}`
			p.send(t, `{"jsonrpc":"2.0","id":"c-7","method":"proxy/successor","params":{"method":"session/request_permission","params":`+permParams+`}}`)
			perm := p.recv(t, ctx)
			if perm.Method != "session/request_permission" || perm.ID == nil || string(perm.Params) != permParams {
				t.Fatalf("unwrapped request became %s", perm.raw)
			}
			promptParams := `{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}`
			p.send(t, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":`+promptParams+`}`)
			prompt := p.recv(t, ctx)
			if inner := prompt.successor(t); prompt.Method != "proxy/successor" || prompt.ID == nil ||
				inner.Method != "session/prompt" || string(inner.Params) != promptParams {
				t.Fatalf("wrapped request became %s", prompt.raw)
			}
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32800,"message":"cancelled"}}`, prompt.ID))
			if m := p.recv(t, ctx); string(m.ID) != "2" || string(m.Error) != `{"code":-32800,"message":"cancelled"}` {
				t.Fatalf("error response became %s", m.raw)
			}
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"cancelled"}}}`, perm.ID))
			if m := p.recv(t, ctx); string(m.ID) != `"c-7"` || string(m.Result) != `{"outcome":{"outcome":"cancelled"}}` {
				t.Fatalf("response to the successor became %s", m.raw)
			}

			// Notifications both ways, in order; _proxy/successor accepted too.
			const n = 200
			for i := 0; i < n; i++ {
				method := "proxy/successor"
				if i%2 == 1 {
					method = "_proxy/successor"
				}
				p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":{"method":"session/update","params":{"i":%d}}}`, method, i))
				p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"i":%d}}`, i))
			}
			var up, down int
			for up+down < 2*n {
				m := p.recv(t, ctx)
				if m.ID != nil {
					t.Fatalf("notification became a request: %s", m.raw)
				}
				switch m.Method {
				case "session/update":
					if want := fmt.Sprintf(`{"i":%d}`, up); string(m.Params) != want {
						t.Fatalf("update %d: got %s", up, m.raw)
					}
					up++
				case "proxy/successor":
					in := m.successor(t)
					if want := fmt.Sprintf(`{"i":%d}`, down); in.Method != "session/cancel" || string(in.Params) != want {
						t.Fatalf("cancel %d: got %s", down, m.raw)
					}
					down++
				default:
					t.Fatalf("unexpected %s", m.raw)
				}
			}

			// Requests without params stay without params.
			p.send(t, `{"jsonrpc":"2.0","id":3,"method":"_x/ping"}`)
			if m := p.recv(t, ctx); string(m.successor(t).Params) != "" {
				t.Fatalf("params appeared: %s", m.raw)
			}

			// On EOF the proxy exits cleanly.
			p.stdin.Close()
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("proxy exit: %v\n%s", err, p.stderr.String())
			}
		})
	}
}

// TestSDKProxyCancel drives the SDK-built proxy (mcp_proxy.mjs) as the
// conductor does: a request that came from its successor, wrapped, and is
// cancelled with a plain $/cancel_request naming the envelope's id, as the
// ACP schema says, is cancelled toward its predecessor under the id the
// proxy sent it with;
// one from its predecessor, cancelled plainly, is cancelled toward its
// successor under the id of its proxy/successor request. Each waits for
// the answer of the hop it cancelled, and relays it.
func TestSDKProxyCancel(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 30*time.Second)
	p := startRaw(t, ctx, []string{nodeBin, filepath.Join(peersDir, "mcp_proxy.mjs"), "ts-unit"})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":{"protocolVersion":1}}`)
	m := p.recv(t, ctx)
	if m.Method != "proxy/successor" || m.successor(t).Method != "initialize" {
		t.Fatalf("proxy/initialize became %s", m.raw)
	}
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}`, m.ID))
	if m := p.recv(t, ctx); string(m.ID) != "1" || m.Result == nil {
		t.Fatalf("initialize answered %s", m.raw)
	}
	// cancelled reads a plain cancel naming id, the request the proxy
	// sent on; answers that request as cancelled; and reads that answer
	// relayed to asked.
	cancelled := func(id, asked string) {
		t.Helper()
		if m := p.recv(t, ctx); m.Method != "$/cancel_request" || m.ID != nil || string(m.Params) != `{"requestId":`+id+`}` {
			t.Fatalf("want a cancel for %s, got %s", id, m.raw)
		}
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32800,"message":"cancelled"}}`)
		if m := p.recv(t, ctx); string(m.ID) != asked || !strings.Contains(string(m.Error), "-32800") {
			t.Fatalf("want -32800 for %s, got %s", asked, m.raw)
		}
	}

	p.send(t, `{"jsonrpc":"2.0","id":"c-7","method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t"},"options":[]}}}`)
	perm := p.recv(t, ctx)
	if perm.Method != "session/request_permission" || perm.ID == nil {
		t.Fatalf("the successor's request became %s", perm.raw)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"c-7"}}`)
	cancelled(string(perm.ID), `"c-7"`)

	p.send(t, `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	prompt := p.recv(t, ctx)
	if prompt.Method != "proxy/successor" || prompt.successor(t).Method != "session/prompt" {
		t.Fatalf("the predecessor's request became %s", prompt.raw)
	}
	p.send(t, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`)
	cancelled(string(prompt.ID), "5")

	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("proxy exit: %v\n%s", err, p.stderr.String())
	}
}

type rawMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	raw    string
}

func (m *rawMsg) successor(t *testing.T) (inner struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}) {
	t.Helper()
	if err := json.Unmarshal(m.Params, &inner); err != nil {
		t.Fatalf("%s: %v", m.raw, err)
	}
	return inner
}

type rawPeer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *testio.Buffer
}

// startRaw runs argv, with env added to the environment, as a peer the
// test talks to line by line.
func startRaw(t *testing.T, ctx context.Context, argv []string, env ...string) *rawPeer {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return startCmd(t, cmd)
}

// startCmd is startRaw with the command given.
func startCmd(t *testing.T, cmd *exec.Cmd) *rawPeer {
	t.Helper()
	p := &rawPeer{cmd: cmd, lines: make(chan string, 1024), stderr: &testio.Buffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *rawPeer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func (p *rawPeer) recv(t *testing.T, ctx context.Context) *rawMsg {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("peer closed its stdout")
		}
		m := &rawMsg{raw: line}
		if err := json.Unmarshal([]byte(line), m); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		return m
	case <-ctx.Done():
		t.Fatalf("waiting for a message: %v", ctx.Err())
	}
	return nil
}

// conversationConfig is the standard single-session conversation: a plain
// prompt, one that asks for permission, and one that reads two files (one
// served from the client's map, one from disk).
func conversationConfig(t *testing.T, name string) clientConfig {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.txt")
	if err := os.WriteFile(real, []byte("on disk for "+name), 0o644); err != nil {
		t.Fatal(err)
	}
	return clientConfig{
		expectResults: []string{"readfile-result: virtual content for " + name, "readfile-result: on disk for " + name},
		Prompts: []string{
			"hello " + name + ` <&> "ünïcödé" 🎉`,
			"please ask permission for " + name,
			"readfile:/virtual/" + name + ".txt readfile:" + real,
		},
		Files:        map[string]string{"/virtual/" + name + ".txt": "virtual content for " + name},
		CancelPrompt: "hang until cancelled, " + name,
	}
}

// checkConversation asserts what conversationConfig should produce.
func checkConversation(t *testing.T, s *summary, cfg clientConfig) {
	t.Helper()
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if err := json.Unmarshal(s.Initialize, &init); err != nil || init.ProtocolVersion != 1 {
		t.Errorf("initialize result %s", s.Initialize)
	}
	if len(s.Sessions) != 1 {
		t.Fatalf("sessions: %+v", s.Sessions)
	}
	ps := s.Sessions[0].Prompts
	if len(ps) != len(cfg.Prompts)+1 {
		t.Fatalf("prompts: %+v", ps)
	}
	want := []int{0, 1, 2}
	if c := ps[len(ps)-1]; c.Tag != "cancel" || c.StopReason == nil || *c.StopReason != "cancelled" {
		t.Errorf("cancelled prompt: %+v", c)
	}
	ps = ps[:len(ps)-1]
	for _, p := range ps {
		if p.StopReason == nil || *p.StopReason != "end_turn" {
			t.Errorf("%s: stopReason %v, error %v", p.Tag, p.StopReason, p.Error)
		}
		if !slices.Equal(p.Updates, want) {
			t.Errorf("%s: updates %v, want %v", p.Tag, p.Updates, want)
		}
	}
	if len(s.Permissions) != 1 || !slices.Equal(s.Permissions[0].Options, []string{"allow-once", "reject-once"}) {
		t.Errorf("permission requests at the client: %+v", s.Permissions)
	}
	if got := ps[1].Results; !slices.Equal(got, []string{"permission-result: selected:allow-once"}) {
		t.Errorf("agent saw permission outcome %q", got)
	}
	if len(s.FSReads) != 2 {
		t.Errorf("fs reads at the client: %+v", s.FSReads)
	}
	if got := ps[2].Results; !slices.Equal(got, cfg.expectResults) {
		t.Errorf("agent saw file contents %q, want %q", got, cfg.expectResults)
	}
	for _, sess := range s.Sessions {
		if len(sess.Others) > 0 {
			t.Errorf("unexpected updates: %q", sess.Others)
		}
	}
}
