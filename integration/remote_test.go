package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
	"github.com/acp-conductor/acp-conductor/transport"
)

// A served is an "acp-conductor serve" started by a test, on a free
// loopback port.
type served struct {
	url    string // ws://127.0.0.1:PORT/acp, or wss:// when served over TLS
	cmd    *exec.Cmd
	log    *testio.Buffer
	marker string // in its environment, so in every component's
}

const serveToken = "it-token-0123456789"

// startServe serves a chain of the given components, with serveToken, and
// checks when the test ends that nothing it started outlives it.
func startServe(t *testing.T, components ...string) *served {
	t.Helper()
	return startServeWith(t, nil, components...)
}

// startServeWith is startServe with more flags for serve.
func startServeWith(t *testing.T, flags []string, components ...string) *served {
	t.Helper()
	s := &served{log: &testio.Buffer{}, marker: newMarker()}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--shutdown-grace", "1s", "--max-connections", "64"}, flags...)
	args = append(append(args, "--"), components...)
	s.cmd = exec.Command(conductor, args...)
	s.cmd.Env = append(s.cmd.Environ(), "ACP_CONDUCTOR_TOKEN="+serveToken, markerVar+"="+s.marker)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"url": "(wss?://[^"]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.log.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("serve still running 20s after SIGTERM")
			s.cmd.Process.Kill()
			<-done
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var left []proc
		waitFor(ctx, func() bool { left = markedProcs(s.marker); return len(left) == 0 })
		if len(left) > 0 {
			t.Errorf("processes left after serve stopped:\n%s", procList(left))
			killMarked(t, s.marker)
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.log)
		}
	})
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("serve exited:\n%s", s.log)
		}
		s.url = u
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start listening:\n%s", s.log)
	}
	return s
}

// chainProcs lists what serve runs for its connections: every marked
// process but serve itself.
func (s *served) chainProcs() []proc {
	var out []proc
	for _, p := range markedProcs(s.marker) {
		if p.PID != s.cmd.Process.Pid {
			out = append(out, p)
		}
	}
	return out
}

// waitNoChains waits until every chain serve started has stopped.
func (s *served) waitNoChains(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var left []proc
	if !waitFor(ctx, func() bool { left = s.chainProcs(); return len(left) == 0 }) {
		t.Errorf("chains still running after their connections ended:\n%s", procList(left))
	}
}

func (s *served) httpURL() string { return "http" + strings.TrimPrefix(s.url, "ws") }

func remoteConfig(cfg clientConfig, url, profile string) clientConfig {
	cfg.URL, cfg.Transport = url, profile
	cfg.Headers = map[string]string{"Authorization": "Bearer " + serveToken}
	return cfg
}

// TestServeSDKEditor is the official TypeScript SDK as a remote editor,
// over its experimental ws-client and http-client, against serve running a
// proxy and the SDK agent: the standard conversation (updates, a permission
// round trip, file reads, session/cancel), two sessions on one connection,
// and two connections at once. Every chain stops when its connection ends.
func TestServeSDKEditor(t *testing.T) {
	requireConductor(t)
	for _, profile := range []string{"ws", "http"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			s := startServe(t, goProxyCmd("remote-proxy"), agentCmd("agent"))
			url := s.url
			if profile == "http" {
				url = s.httpURL()
			}
			ctx := testContext(t, 120*time.Second)

			cfg := remoteConfig(conversationConfig(t, "remote-"+profile), url, profile)
			sum := runClient(t, ctx, cfg, nil)
			checkConversation(t, sum, cfg)
			s.waitNoChains(t)

			// Two sessions on one connection, on two connections at once.
			cfg = remoteConfig(clientConfig{Mode: "concurrent", Sessions: 2, PromptsPerSession: 3}, url, profile)
			a, b := startClient(t, ctx, cfg, nil), startClient(t, ctx, cfg, nil)
			for _, rc := range []*runningClient{a, b} {
				sum := rc.wait(t)
				if len(sum.Failures) > 0 || len(sum.Sessions) != 2 {
					t.Errorf("concurrent: %d sessions, failures %q", len(sum.Sessions), sum.Failures)
				}
			}
			s.waitNoChains(t)
			if n := strings.Count(s.log.String(), "connection opened"); n != 3 {
				t.Errorf("serve logged %d connections, want 3", n)
			}
		})
	}
}

// TestServeCancelRequest: a prompt abandoned with $/cancel_request, which
// the SDK sends when a request's cancellation signal aborts, reaches the
// agent over both profiles and ends cancelled.
func TestServeCancelRequest(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	s := startServe(t, agentCmd("agent"))
	ctx := testContext(t, 90*time.Second)
	for _, profile := range []string{"ws", "http"} {
		url := s.url
		if profile == "http" {
			url = s.httpURL()
		}
		cfg := remoteConfig(clientConfig{Prompts: []string{"first"}, CancelRequestPrompt: "hang until $/cancel_request"}, url, profile)
		sum := runClient(t, ctx, cfg, nil)
		if len(sum.Failures) > 0 || len(sum.Sessions) != 1 || len(sum.Sessions[0].Prompts) != 2 {
			t.Errorf("%s: failures %q, sessions %+v", profile, sum.Failures, sum.Sessions)
		}
	}
	s.waitNoChains(t)
}

// TestServeRefusesWithoutToken: a missing or wrong token is refused with
// 401 before anything starts.
func TestServeRefusesWithoutToken(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	s := startServe(t, agentCmd("agent"))
	ctx := testContext(t, 60*time.Second)
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
		for _, profile := range []string{"ws", "http"} {
			url := s.url
			if profile == "http" {
				url = s.httpURL()
			}
			cfg := clientConfig{URL: url, Transport: profile, Headers: h, Prompts: []string{"x"}}
			sum := startClient(t, ctx, cfg, nil).wait(t)
			if len(sum.Failures) == 0 || !strings.Contains(strings.Join(sum.Failures, " "), "401") {
				t.Errorf("%s with %v: failures %q, want a 401", profile, h, sum.Failures)
			}
		}
	}
	req, _ := http.NewRequest("POST", s.httpURL(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without a token: %s", resp.Status)
	}
	if ps := s.chainProcs(); len(ps) > 0 {
		t.Errorf("refused requests started processes:\n%s", procList(ps))
	}
	if log := s.log.String(); strings.Contains(log, "connection opened") || strings.Contains(log, serveToken) {
		t.Errorf("serve's log shows a connection or the token:\n%s", log)
	}
}

// startSDKServer runs peers/agent.mjs as a remote agent (the SDK's
// experimental/server and Node adapter) and returns its ws:// URL.
func startSDKServer(t *testing.T, marker string, flags ...string) string {
	t.Helper()
	cmd := exec.Command(nodeBin, append([]string{filepath.Join(peersDir, "agent.mjs"), "--name", "remote-agent", "--listen", "127.0.0.1:0"}, flags...)...)
	cmd.Dir = peersDir
	cmd.Env = append(cmd.Environ(), markerVar+"="+marker)
	stderr := &testio.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("remote agent's stderr:\n%s", stderr)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the remote agent did not start: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(line)
}

// TestRemoteSDKAgent puts the SDK's experimental/server behind a local
// conductor as its agent: "agent PROXY ws://.../acp", and over Streamable
// HTTP when the server refuses the upgrade, where every request must send
// back the cookie the server set on that refusal.
func TestRemoteSDKAgent(t *testing.T) {
	requireConductor(t)
	for _, profile := range []string{"ws", "http"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 90*time.Second)
			cfg := conversationConfig(t, "sdk-server-"+profile)
			marker := withMarker(t, &cfg)
			// It sets a cookie and, over Streamable HTTP, refuses requests
			// that do not send it back.
			var url string
			if profile == "ws" {
				url = startSDKServer(t, marker, "--cookie", "backend=b1")
			} else {
				url = "http" + strings.TrimPrefix(startSDKServer(t, marker, "--no-websocket", "--cookie", "backend=b1"), "ws")
			}
			sum := runClient(t, ctx, cfg, agentModeArgs(goProxyCmd("local-proxy"), url))
			checkConversation(t, sum, cfg)
			if sum.exitCode() != 0 {
				t.Errorf("conductor exit: %s", sum.exitString())
			}
		})
	}
}

// TestRemoteAgentDrops: the remote agent drops its connection mid-prompt;
// the prompt fails with an error naming the URL, and the chain stops.
func TestRemoteAgentDrops(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	ctx := testContext(t, 60*time.Second)
	cfg := clientConfig{Prompts: []string{"drop the connection now"}}
	marker := withMarker(t, &cfg)
	url := startSDKServer(t, marker)
	sum := startClient(t, ctx, cfg, agentModeArgs(goProxyCmd("local-proxy"), url)).wait(t)
	if len(sum.Sessions) != 1 || len(sum.Sessions[0].Prompts) != 1 {
		t.Fatalf("sessions: %+v (failures %q)", sum.Sessions, sum.Failures)
	}
	p := sum.Sessions[0].Prompts[0]
	if p.Error == nil || !strings.Contains(*p.Error, url) {
		t.Errorf("the dropped prompt: error %v, want one naming %s", p.Error, url)
	}
	if sum.exitCode() == 0 {
		t.Errorf("the conductor exited 0 after its agent was lost")
	}
}

// TestNestedRemoteChain: editor -> local conductor (a proxy) -> serve (a
// proxy) -> agent, the standard conversation end to end.
func TestNestedRemoteChain(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	s := startServe(t, goProxyCmd("remote-proxy"), agentCmd("agent"))
	ctx := testContext(t, 90*time.Second)
	cfg := conversationConfig(t, "nested-remote")
	withMarker(t, &cfg)
	cfg.ChildEnv["ACP_CONDUCTOR_REMOTE_TOKEN"] = serveToken
	sum := runClient(t, ctx, cfg, agentModeArgs(goProxyCmd("local-proxy"), s.url))
	checkConversation(t, sum, cfg)
	if sum.exitCode() != 0 {
		t.Errorf("local conductor exit: %s", sum.exitString())
	}
	s.waitNoChains(t)
}

var demoOnce struct {
	sync.Once
	path string
	err  error
}

// demoBinary builds examples/demo, whose sample agent is a light agent for
// many chains at once.
func demoBinary(t *testing.T) string {
	demoOnce.Do(func() {
		demoOnce.path = filepath.Join(binDir, "demo")
		if out, err := goBuild(demoOnce.path, "./examples/demo"); err != nil {
			demoOnce.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if demoOnce.err != nil {
		t.Fatalf("building the demo: %v", demoOnce.err)
	}
	return demoOnce.path
}

// TestServeLoad: 50 connections at once, half WebSocket and half
// Streamable HTTP, 20 prompts each, through serve on loopback: no error,
// every prompt answered after its updates, and every chain stopped once its
// connection ended.
func TestServeLoad(t *testing.T) {
	requireConductor(t)
	const conns, prompts = 50, 20
	samples := demoBinary(t)
	s := startServe(t, shellJoin(samples, "sample-agent"))
	ctx := testContext(t, 240*time.Second)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loadConn(ctx, s.httpURL(), i%2 == 1, prompts); err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d connections failed", n, conns)
	}
	s.waitNoChains(t)
}

func loadConn(ctx context.Context, url string, httpOnly bool, prompts int) error {
	return converseRaw(ctx, url, transport.DialOptions{StreamableHTTP: httpOnly}, prompts)
}

// converseRaw dials url with opts and serveToken, and runs initialize,
// session/new and the prompts, each of which must be answered with a
// stopReason after updates.
func converseRaw(ctx context.Context, url string, opts transport.DialOptions, prompts int) error {
	opts.Header = http.Header{"Authorization": {"Bearer " + serveToken}}
	c, err := transport.Dial(ctx, url, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	call := func(id int, method, params string) (updates int, result json.RawMessage, err error) {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
		if err := c.Write(ctx, []byte(msg)); err != nil {
			return 0, nil, err
		}
		for {
			raw, err := c.Read(ctx)
			if err != nil {
				return updates, nil, fmt.Errorf("%s: %w", method, err)
			}
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return updates, nil, err
			}
			switch {
			case m.Method == "session/update":
				updates++
			case m.Method == "session/request_permission" && m.ID != nil:
				// The sample agent asks before it reads; allow it.
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`, *m.ID)
				if err := c.Write(ctx, []byte(answer)); err != nil {
					return updates, nil, err
				}
			case m.Method != "":
				return updates, nil, fmt.Errorf("unexpected %s", raw)
			case m.ID != nil && *m.ID == id:
				if m.Error != nil {
					return updates, nil, fmt.Errorf("%s: %s", method, m.Error)
				}
				return updates, m.Result, nil
			}
		}
	}
	if _, _, err := call(0, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`); err != nil {
		return err
	}
	_, res, err := call(1, "session/new", `{"cwd":"/","mcpServers":[]}`)
	if err != nil {
		return err
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(res, &sess)
	for i := range prompts {
		params := fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"load %d"}]}`, sess.SessionID, i)
		n, res, err := call(2+i, "session/prompt", params)
		if err != nil {
			return err
		}
		if n == 0 || !strings.Contains(string(res), `"stopReason"`) {
			return fmt.Errorf("prompt %d: %d updates, result %s", i, n, res)
		}
	}
	return nil
}

// TestRemoteProxyRestart: a remote proxy (serve --proxy) with on_failure:
// restart whose connection is lost is reconnected: the local conductor
// starts a new connection, which replays proxy/initialize to a fresh remote
// chain, and the next prompt goes through.
func TestRemoteProxyRestart(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	name := "remote-proxy-" + newMarker()
	s := startServeWith(t, []string{"--proxy"}, goProxyCmd(name))
	file := filepath.Join(t.TempDir(), "chain.yaml")
	chain := fmt.Sprintf(`proxies:
  - url: %s
    headers: {Authorization: "Bearer ${IT_REMOTE_TOKEN}"}
    on_failure: restart
agent:
  command: %s
  args: [%q, "--name", "agent"]
`, s.url, nodeBin, filepath.Join(peersDir, "agent.mjs"))
	if err := os.WriteFile(file, []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := newMarker()
	ctx := testContext(t, 90*time.Second)
	p := startRaw(t, ctx, []string{"env", "IT_REMOTE_TOKEN=" + serveToken, markerVar + "=" + marker, conductor, "agent", "--config", file})
	t.Cleanup(func() {
		wctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var left []proc
		if !waitFor(wctx, func() bool { left = markedProcs(marker); return len(left) == 0 }) {
			t.Errorf("processes left:\n%s", procList(left))
			killMarked(t, marker)
		}
	})
	call := func(id int, method, params string) *rawMsg {
		t.Helper()
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
		for {
			m := p.recv(t, ctx)
			if m.Method == "" && string(m.ID) == fmt.Sprint(id) {
				if m.Error != nil {
					t.Fatalf("%s: %s", method, m.Error)
				}
				return m
			}
		}
	}
	call(1, "initialize", `{"protocolVersion":1,"clientCapabilities":{}}`)
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(call(2, "session/new", `{"cwd":"/","mcpServers":[]}`).Result, &sess)
	prompt := func(id int) {
		t.Helper()
		m := call(id, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"prompt %d"}]}`, sess.SessionID, id))
		if !strings.Contains(string(m.Result), `"end_turn"`) {
			t.Fatalf("prompt %d: %s", id, m.raw)
		}
	}
	prompt(3)

	// The remote proxy dies; serve ends that chain and its connection.
	var victims []proc
	for _, pr := range s.chainProcs() {
		if strings.Contains(pr.Cmdline, name) {
			victims = append(victims, pr)
		}
	}
	if len(victims) == 0 {
		t.Fatalf("no remote proxy among %v", s.chainProcs())
	}
	for _, v := range victims {
		syscall.Kill(v.PID, syscall.SIGKILL)
	}
	if !waitFor(ctx, func() bool { return strings.Count(s.log.String(), "connection opened") == 2 }) {
		t.Fatalf("the local conductor did not reconnect:\n%s", p.stderr)
	}
	prompt(4)
	if !strings.Contains(p.stderr.String(), "restarted component") {
		t.Errorf("the local conductor did not log the restart:\n%s", p.stderr)
	}
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("local conductor: %v", err)
	}
	s.waitNoChains(t)
}

// TestServeVanishedClient: an editor killed with SIGKILL mid-prompt sends
// no DELETE. Over WebSocket the closed socket ends its connection; over
// Streamable HTTP the connection, with no request and no stream left, is
// ended after --idle-timeout. Either way its chain stops.
func TestServeVanishedClient(t *testing.T) {
	requireConductor(t)
	for _, profile := range []string{"ws", "http"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			s := startServeWith(t, []string{"--idle-timeout", "2s"}, goProxyCmd("remote-proxy"), agentCmd("agent"))
			url := s.url
			if profile == "http" {
				url = s.httpURL()
			}
			ctx := testContext(t, 90*time.Second)
			cfg := remoteConfig(clientConfig{Mode: "hold", HoldPrompt: "please hang", HoldAction: "wait"}, url, profile)
			rc := startClient(t, ctx, cfg, nil)
			rc.event(t, ctx) // the prompt is active: the chain is running
			if len(s.chainProcs()) == 0 {
				t.Fatalf("no chain running for the held prompt")
			}
			if err := rc.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-rc.done
			s.waitNoChains(t)
			if !waitFor(ctx, func() bool { return strings.Contains(s.log.String(), "connection ended") }) {
				t.Errorf("serve did not log the connection's end")
			}
			idle := strings.Contains(s.log.String(), "closing idle connection")
			if idle != (profile == "http") {
				t.Errorf("serve logged an idle close: %v, want %v", idle, profile == "http")
			}
		})
	}
}

// TestServeTrace: serve's one --trace holds every connection's chain.
// Each event names its connection, as serve logged it, and within a
// connection every response is paired with its request, though the two
// chains use the same component names and ids.
func TestServeTrace(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	file := filepath.Join(t.TempDir(), "serve.jsons")
	s := startServeWith(t, []string{"--trace", file}, shellJoin(demoBinary(t), "sample-agent"))
	ctx := testContext(t, 90*time.Second)
	errs := make(chan error, 2)
	for i := range 2 {
		go func() { errs <- loadConn(ctx, s.httpURL(), i == 1, 3) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s.waitNoChains(t)
	logged := map[string]bool{}
	for _, m := range regexp.MustCompile(`connection opened\t\{"connection": "(\w+)"`).FindAllStringSubmatch(s.log.String(), -1) {
		logged[m[1]] = true
	}
	var events []struct {
		Type, Method, Connection string
		ID                       json.RawMessage
	}
	if !waitFor(ctx, func() bool {
		b, _ := os.ReadFile(file)
		events = events[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e struct {
				Type, Method, Connection string
				ID                       json.RawMessage
			}
			if json.Unmarshal([]byte(line), &e) == nil {
				events = append(events, e)
			}
		}
		n := 0
		for _, e := range events {
			if e.Type == "response" && e.Method == "session/prompt" {
				n++
			}
		}
		return n == 6
	}) {
		t.Fatalf("the trace does not hold the 6 prompts' answers:\n%v", events)
	}
	seen := map[string]bool{}
	for _, e := range events {
		if !logged[e.Connection] {
			t.Errorf("an event of connection %q, which serve did not log: %+v", e.Connection, e)
		}
		seen[e.Connection] = true
		if e.Type == "response" && e.Method == "" {
			t.Errorf("a response not paired with its request: %+v", e)
		}
	}
	if len(seen) != 2 || len(logged) != 2 {
		t.Errorf("events of %d connections, %d logged; want 2", len(seen), len(logged))
	}
}

// TestServeSDKSubprotocol: the SDK's ws-client asked to request WebSocket
// subprotocols (its protocols option) fails a connection whose server
// selects none, as RFC 6455 has it; the SDK's own server selects the
// first offered, and serve must too.
func TestServeSDKSubprotocol(t *testing.T) {
	requireConductor(t)
	t.Parallel()
	s := startServe(t, agentCmd("agent"))
	ctx := testContext(t, 60*time.Second)
	cfg := remoteConfig(clientConfig{Prompts: []string{"hello"}}, s.url, "ws")
	cfg.Protocols = []string{"acp.v1", "other"}
	sum := runClient(t, ctx, cfg, nil)
	if len(sum.Failures) > 0 || len(sum.Sessions) != 1 || len(sum.Sessions[0].Prompts) != 1 {
		t.Errorf("failures %q, sessions %+v", sum.Failures, sum.Sessions)
	}
	s.waitNoChains(t)
}
