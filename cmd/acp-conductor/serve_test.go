package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/transport"
)

func TestServeRefusesToStart(t *testing.T) {
	agent := shellQuote(demo) + " sample-agent"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no token", nil, []string{"serve", "--", agent}, "no token"},
		{"no auth off loopback", nil, []string{"serve", "--insecure-no-auth", "--listen", "0.0.0.0:0", "--", agent}, "loopback address only"},
		{"no TLS off loopback", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--listen", "0.0.0.0:0", "--", agent}, "over TLS"},
		{"negative TCP bound", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--max-tcp-connections", "-1", "--", agent}, "--max-tcp-connections must be positive"},
		{"no idle timeout", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--idle-timeout", "0s", "--", agent}, "--idle-timeout must be positive"},
		// A host with no port is loopback, but no address to listen on.
		{"no port", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--listen", "127.0.0.1", "--", agent}, `--listen "127.0.0.1": want HOST:PORT`},
		{"no port, no auth", nil, []string{"serve", "--insecure-no-auth", "--listen", "localhost", "--", agent}, `--listen "localhost": want HOST:PORT`},
		{"empty token file", nil, []string{"serve", "--token-file", writeFile(t, "token", "\n"), "--", agent}, "is empty"},
		// serve does not spin: --spin is no flag of its own, not one ignored.
		{"spin", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--spin", "1ms", "--", agent}, "unknown flag: --spin\nRun 'acp-conductor serve --help' for usage."},
		{"TLS files missing", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--tls-cert", "/no/such/cert.pem", "--tls-key", "/no/such/key.pem", "--", agent}, "--tls-cert /no/such/cert.pem, --tls-key /no/such/key.pem: open /no/such/cert.pem"},
		{"port in use", []string{"ACP_CONDUCTOR_TOKEN=x"}, []string{"serve", "--listen", taken, "--", agent}, "--listen " + taken + ": the port is in use by another program"},
	} {
		r := acp(t, "", tc.env, tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" || strings.Contains(r.stderr, "serving") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q, want 1, none and %q, and no word of serving", tc.name, r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// startServe runs "acp-conductor serve" on a free loopback port and returns
// its endpoint URL (http://...) once it listens.
func startServe(t *testing.T, env []string, args ...string) (string, *exec.Cmd, *lockedLog) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	log := &lockedLog{ended: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		defer close(log.ended)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`"url": "ws://([^"]+)"`)
		for sc.Scan() {
			log.add(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- "http://" + m[1]
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("serve exited:\n%s", log)
		}
		return u, cmd, log
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", log)
	}
	return "", nil, nil
}

type lockedLog struct {
	mu    sync.Mutex
	lines []string
	wake  chan struct{} // closed and replaced at each line
	ended chan struct{} // closed once serve's stderr has been read to its end
}

// wait waits for serve to exit, once its stderr has been read to the end:
// exec's Wait closes the pipe, and a line not yet read would be lost.
func (l *lockedLog) wait(cmd *exec.Cmd) error {
	<-l.ended
	return cmd.Wait()
}

func (l *lockedLog) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
	l.mu.Unlock()
}

// changed returns a channel closed when the next line is added.
func (l *lockedLog) changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}
func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestServe serves the demo's sample chain and talks to it over both
// profiles, with the token; a request without it gets 401.
func TestServe(t *testing.T) {
	samples := shellQuote(demo)
	u, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--", samples+" sample-proxy", samples+" sample-agent")

	resp, err := http.Post(u, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %s, want 401", resp.Status)
	}

	auth := http.Header{"Authorization": {"Bearer tok-123"}}
	for _, url := range []string{"ws" + strings.TrimPrefix(u, "http"), u} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := transport.Dial(ctx, url, transport.DialOptions{Header: auth})
		if err != nil {
			t.Fatal(err)
		}
		for i, msg := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		} {
			if err := c.Write(ctx, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			got, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("%s: %v\n%s", url, err, log)
			}
			if want := []string{`"protocolVersion":1`, `"sessionId"`}[i]; !strings.Contains(string(got), want) {
				t.Errorf("%s: answer %s, want %s", url, got, want)
			}
		}
		c.Close()
		cancel()
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- log.wait(cmd) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, log)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve still running 20s after SIGTERM\n%s", log)
	}
	out := log.String()
	for _, want := range []string{"refused request", "connection opened", "connection ended", "chain stopped"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tok-123") {
		t.Errorf("the token was logged:\n%s", out)
	}
}

// TestRemoteAgent runs "agent PROXY URL" against a chain that serve runs:
// the nested case, editor -> conductor -> remote conductor -> agent, with a
// proxy on each side, over both profiles. Then the remote side goes away,
// and the local conductor fails naming the URL.
func TestRemoteAgent(t *testing.T) {
	samples := shellQuote(demo)
	for _, scheme := range []string{"ws", "http"} {
		t.Run(scheme, func(t *testing.T) {
			u, srv, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-9"}, "--", samples+" sample-proxy", samples+" sample-agent")
			url := scheme + strings.TrimPrefix(u, "http")
			cmd := exec.Command(binary, "agent", samples+" sample-proxy", url)
			cmd.Env = append(cleanEnv(), "ACP_CONDUCTOR_REMOTE_TOKEN=tok-9")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			stderr := &lockedLog{}
			errPipe, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			go func() {
				sc := bufio.NewScanner(errPipe)
				for sc.Scan() {
					stderr.add(sc.Text())
				}
			}()
			out := bufio.NewReader(stdout)
			call := func(msg string) string {
				if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
					t.Fatal(err)
				}
				line, err := out.ReadString('\n')
				if err != nil {
					t.Fatalf("no answer to %s: %v\nlocal:\n%s\nremote:\n%s", msg, err, stderr, log)
				}
				return line
			}
			if got := call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`); !strings.Contains(got, `"protocolVersion":1`) {
				t.Fatalf("initialize: %s", got)
			}
			if got := call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`); !strings.Contains(got, `"sessionId"`) {
				t.Fatalf("session/new: %s", got)
			}
			// The remote side goes away: the local chain fails, naming the URL.
			srv.Process.Kill()
			srv.Wait()
			io.Copy(io.Discard, out)
			err := cmd.Wait()
			if err == nil {
				t.Errorf("the local conductor exited 0 after its agent was lost")
			}
			if !strings.Contains(stderr.String(), "connection to "+url+" ") {
				t.Errorf("the local conductor's log does not name %s:\n%s", url, stderr)
			}
			if !strings.Contains(log.String(), "connection opened") {
				t.Errorf("serve logged no connection:\n%s", log)
			}
		})
	}
}

// TestRemoteProxy: a proxy-mode chain served remotely is a proxy of a local
// chain, given by its URL: proxy/initialize and the successor traffic cross
// the connection, over both profiles.
func TestRemoteProxy(t *testing.T) {
	samples := shellQuote(demo)
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-p"}, "--proxy", "--", samples+" sample-proxy")
	for _, url := range []string{"ws" + strings.TrimPrefix(u, "http"), u} {
		cmd := exec.Command(binary, "agent", url, samples+" sample-agent")
		cmd.Env = append(cleanEnv(), "ACP_CONDUCTOR_REMOTE_TOKEN=tok-p")
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}` + "\n")
		stderr := &lockedLog{}
		cmd.Stderr = writerFunc(func(p []byte) (int, error) { stderr.add(string(p)); return len(p), nil })
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\nlocal:\n%s\nremote:\n%s", url, err, stderr, log)
		}
		if !strings.Contains(string(out), `"id":1,"result"`) || !strings.Contains(string(out), `"sessionId"`) {
			t.Errorf("%s: got %s\nlocal:\n%s\nremote:\n%s", url, out, stderr, log)
		}
	}
	if n := strings.Count(log.String(), "connection opened"); n != 2 {
		t.Errorf("serve saw %d connections, want 2:\n%s", n, log)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestServeH2C: on loopback, plain HTTP serves HTTP/2 (h2c) as the RFD's
// Streamable HTTP requires, beside HTTP/1.1 for clients that lack it.
func TestServeH2C(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-h"}, "--", shellQuote(demo)+" sample-agent")
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok-h")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("h2c: %v\n%s", err, log)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || resp.Header.Get(transport.HeaderConnectionID) == "" {
		t.Errorf("h2c initialize: %s %s, connection %q", resp.Proto, resp.Status, resp.Header.Get(transport.HeaderConnectionID))
	}
}

// TestServeIdleKeepAlive: serve closes a TCP connection kept alive with no
// request in progress once the idle timeout has passed (here --idle-timeout
// 1s, shorter than the default 2m), over HTTP/1.1 and h2c; a Streamable
// HTTP connection's SSE stream and a WebSocket, opened before and used
// after, are not cut.
func TestServeIdleKeepAlive(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-k"}, "--idle-timeout", "1s", "--", shellQuote(demo)+" sample-agent")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	auth := http.Header{"Authorization": {"Bearer tok-k"}}
	// Every POST on a TCP connection of its own: the idle ones are the
	// test's.
	oneShot := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var conns []transport.Conn
	for _, opts := range []struct {
		url  string
		opts transport.DialOptions
	}{
		{u, transport.DialOptions{Header: auth, HTTPClient: oneShot, StreamableHTTP: true}},
		{"ws" + strings.TrimPrefix(u, "http"), transport.DialOptions{Header: auth}},
	} {
		c := dialInitialized(ctx, t, opts.url, opts.opts, log)
		defer c.Close()
		conns = append(conns, c)
	}

	for _, tc := range []struct {
		name string
		open func(net.Conn) error // sends something, and reads its answer, if any
	}{
		{"HTTP/1.1", func(c net.Conn) error {
			fmt.Fprintf(c, "GET /elsewhere HTTP/1.1\r\nHost: %s\r\n\r\n", hostPort(u))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.Close {
				return errors.New("the server closed the connection after its answer")
			}
			return err
		}},
		{"h2c", func(c net.Conn) error {
			// The client preface and an empty SETTINGS frame; no stream.
			_, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
			return err
		}},
	} {
		c, err := net.Dial("tcp", hostPort(u))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := tc.open(c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// Whatever the server still sends (h2's SETTINGS, GOAWAY), then
		// its end of the connection.
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("%s: an idle connection still open 20s later, the idle timeout 1s: %v", tc.name, err)
		}
	}

	for i, c := range conns {
		if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got, err := c.Read(ctx); err != nil || !strings.Contains(string(got), `"sessionId"`) {
			t.Errorf("connection %d, open longer than the idle timeout: session/new answered %s, %v\n%s", i, got, err, log)
		}
	}
}

// TestServeSignals: serve treats SIGINT and SIGHUP as SIGTERM, stopping each
// connection's chain along its shutdown path and exiting 0; and a second
// signal skips a drain that would otherwise last the whole grace period (a
// prompt in flight to an agent that never answers, grace 60 s).
func TestServeSignals(t *testing.T) {
	for _, tc := range []struct {
		sigs  []syscall.Signal
		agent string
	}{
		{[]syscall.Signal{syscall.SIGHUP}, shellQuote(demo) + " sample-agent"},
		{[]syscall.Signal{syscall.SIGINT}, shellQuote(demo) + " sample-agent"},
		{[]syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, "sleep 1000"},
	} {
		t.Run(fmt.Sprint(tc.sigs), func(t *testing.T) {
			u, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--shutdown-grace", "60s", "--log-level", "debug", "--", tc.agent)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := transport.Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), transport.DialOptions{Header: http.Header{"Authorization": {"Bearer tok-123"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)); err != nil {
				t.Fatal(err)
			}
			if len(tc.sigs) == 1 {
				if _, err := c.Read(ctx); err != nil { // the chain runs
					t.Fatalf("initialize: %v\n%s", err, log)
				}
			} else if !waitLine(ctx, log, "started component") {
				t.Fatalf("the chain never started:\n%s", log)
			}
			for i, sig := range tc.sigs {
				cmd.Process.Signal(sig)
				if i == 0 && len(tc.sigs) > 1 && !waitLine(ctx, log, "draining") {
					t.Fatalf("no drain after %v:\n%s", sig, log)
				}
			}
			done := make(chan error, 1)
			go func() { done <- log.wait(cmd) }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after %v: %v\n%s", tc.sigs, err, log)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("serve still running 20s after %v (grace 60s)\n%s", tc.sigs, log)
			}
			if !strings.Contains(log.String(), "chain stopped") {
				t.Errorf("no chain stopped along its shutdown path:\n%s", log)
			}
		})
	}
}

// waitLine waits until the log has a line containing s, or ctx ends.
func waitLine(ctx context.Context, log *lockedLog, s string) bool {
	for {
		// The channel is taken before the lines are read: a line added
		// between the two would otherwise wake no one.
		changed := log.changed()
		if strings.Contains(log.String(), s) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// gatedAgent answers initialize and session/new at once; a prompt it
// answers only once the file $GATE exists, after an update saying it has
// the prompt and one saying it is done.
const gatedAgent = `while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
  case "$line" in
  *'"method":"initialize"'*) echo '{"jsonrpc":"2.0","id":'$id',"result":{"protocolVersion":1,"agentCapabilities":{}}}' ;;
  *'"method":"session/new"'*) echo '{"jsonrpc":"2.0","id":'$id',"result":{"sessionId":"s1"}}' ;;
  *'"method":"session/prompt"'*)
    echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"working"}}}}'
    while [ ! -e "$GATE" ]; do sleep 0.01; done
    echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}'
    echo '{"jsonrpc":"2.0","id":'$id',"result":{"stopReason":"end_turn"}}' ;;
  esac
done
`

// TestServeStopDrains: serve told to stop (SIGTERM) with a prompt in
// flight stops each chain along the path agent mode follows on stdio: the
// prompt's updates and answer still reach the client, over either
// transport, before its connection ends; then serve exits 0.
func TestServeStopDrains(t *testing.T) {
	for _, scheme := range []string{"ws", "http"} {
		t.Run(scheme, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "gate")
			agent := "env GATE=" + shellQuote(gate) + " sh " + shellQuote(writeFile(t, "agent.sh", gatedAgent))
			u, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--log-level", "debug", "--shutdown-grace", "20s", "--", agent)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := transport.Dial(ctx, scheme+strings.TrimPrefix(u, "http"), transport.DialOptions{
				Header: http.Header{"Authorization": {"Bearer tok-123"}}, StreamableHTTP: scheme == "http"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// next returns the next message that contains want.
			next := func(want string) {
				t.Helper()
				for {
					msg, err := c.Read(ctx)
					if err != nil {
						t.Fatalf("the connection ended (%v) before %s came\n%s", err, want, log)
					}
					if strings.Contains(string(msg), want) {
						return
					}
				}
			}
			for _, msg := range []string{
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
				`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
				`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`,
			} {
				if err := c.Write(ctx, []byte(msg)); err != nil {
					t.Fatal(err)
				}
			}
			next(`"working"`)
			cmd.Process.Signal(syscall.SIGTERM)
			for !strings.Contains(log.String(), "draining") {
				select {
				case <-log.changed():
				case <-ctx.Done():
					t.Fatalf("the chain never began to drain:\n%s", log)
				}
			}
			os.WriteFile(gate, nil, 0o600)
			next(`"done"`)
			next(`"id":3`)
			if err := log.wait(cmd); err != nil {
				t.Errorf("serve: %v\n%s", err, log)
			}
		})
	}
}

// TestServeWarnsUnknownEnv: serve, like agent, names an ACP_CONDUCTOR_
// variable that is no setting, where a typo would otherwise go unseen.
func TestServeWarnsUnknownEnv(t *testing.T) {
	_, cmd, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123", "ACP_CONDUCTOR_SHUTDOWN_GARCE=1s"}, "--", "cat")
	cmd.Process.Signal(syscall.SIGTERM)
	log.wait(cmd)
	if !strings.Contains(log.String(), `ignored an unknown setting in the environment	{"variable": "ACP_CONDUCTOR_SHUTDOWN_GARCE"}`) {
		t.Errorf("serve's log does not name the unknown variable:\n%s", log)
	}
}

// TestServeIgnoresSpin: serve does not spin, and takes no --spin
// (TestServeRefusesToStart), but a chain file or an environment shared
// with agent may set spin; serve says, once, that it ignores it, naming
// where it was set. A spin of 0, or none, says nothing.
func TestServeIgnoresSpin(t *testing.T) {
	chain := writeFile(t, "chain.yaml", "agent: {command: cat}\nspin: 200us\n")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		from string // "" for no line
	}{
		{"from the environment", []string{"ACP_CONDUCTOR_SPIN=100us"}, []string{"--", "cat"}, `"from": "environment variable ACP_CONDUCTOR_SPIN"`},
		{"from the chain file", nil, []string{"--config", chain}, `"from": "chain file ` + chain + `:2"`},
		{"zero", []string{"ACP_CONDUCTOR_SPIN=0"}, []string{"--config", chain}, ""},
		{"unset", nil, []string{"--", "cat"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cmd, log := startServe(t, append([]string{"ACP_CONDUCTOR_TOKEN=tok-123"}, tc.env...), tc.args...)
			cmd.Process.Signal(syscall.SIGTERM)
			log.wait(cmd)
			lines := strings.Count(log.String(), "ignored the spin setting: serve does not spin")
			switch {
			case tc.from == "" && lines != 0:
				t.Errorf("serve says it ignores spin, which is not set:\n%s", log)
			case tc.from != "" && (lines != 1 || !strings.Contains(log.String(), tc.from)):
				t.Errorf("serve says %d times that it ignores spin, want once, with %s:\n%s", lines, tc.from, log)
			}
		})
	}
}

// dialInitialized connects to url and has the chain there answer the
// editor's initialize; log, serve's, is shown should it not.
func dialInitialized(ctx context.Context, t *testing.T, url string, opts transport.DialOptions, log fmt.Stringer) transport.Conn {
	t.Helper()
	c, err := transport.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, []byte(initialize)); err != nil {
		c.Close()
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); err != nil {
		c.Close()
		t.Fatalf("%s: initialize: %v\n%s", url, err, log)
	}
	return c
}

// TestServeSilentWebSocket: a WebSocket that sends no first message within
// --idle-timeout is closed: it started no chain, but held a connection
// slot for as long as it answered pings.
func TestServeSilentWebSocket(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--idle-timeout", "1s", "--", shellQuote(demo)+" sample-agent")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := transport.Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), transport.DialOptions{Header: http.Header{"Authorization": {"Bearer tok-123"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Read = %v; want the server to close the silent socket\n%s", err, log)
	}
	for !strings.Contains(log.String(), "closing a connection that sent no first message") {
		select {
		case <-log.changed():
		case <-ctx.Done():
			t.Fatalf("serve did not say why it closed the socket:\n%s", log)
		}
	}
}

// TestServeTCPBound: with --max-tcp-connections 1, a second TCP
// connection is served only once the first has closed.
func TestServeTCPBound(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-t"}, "--max-tcp-connections", "1", "--", shellQuote(demo)+" sample-agent")
	ask := func(c net.Conn, d time.Duration) error {
		fmt.Fprintf(c, "PUT /acp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok-t\r\nContent-Length: 0\r\n\r\n", hostPort(u))
		c.SetReadDeadline(time.Now().Add(d))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	first, err := net.Dial("tcp", hostPort(u))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := ask(first, 10*time.Second); err != nil {
		t.Fatalf("the first connection: %v\n%s", err, log)
	}
	second, err := net.Dial("tcp", hostPort(u))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := ask(second, 300*time.Millisecond); err == nil {
		t.Fatal("a second TCP connection was served, the bound 1")
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(second), nil); err != nil {
		t.Fatalf("the second connection once the first closed: %v\n%s", err, log)
	} else {
		resp.Body.Close()
	}
}

// TestServeMessageLimit: unless a layer sets max_message_bytes, serve
// takes no message the TypeScript SDK's HTTP client could not, so that
// the agent's answer over its limit fails only that call, where the SDK
// would close its whole transport. A POST declaring the SDK's limit is
// refused before its body is read; a limit set explicitly still applies.
func TestServeMessageLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		refused bool
	}{
		{"default", nil, true},
		{"set", []string{"ACP_CONDUCTOR_MAX_MESSAGE_BYTES=67108864"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _, log := startServe(t, append([]string{"ACP_CONDUCTOR_TOKEN=tok-123"}, tc.env...), "--", "cat")
			host := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/acp")
			nc, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fmt.Fprintf(nc, "POST /acp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok-123\r\n"+
				"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n",
				host, transport.SDKMaxMessageBytes)
			nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			status, err := bufio.NewReader(nc).ReadString('\n')
			refused := err == nil && strings.Contains(status, " 413 ")
			if refused != tc.refused {
				t.Errorf("a POST of %d bytes: %q, %v; want refused with 413: %v\n%s", transport.SDKMaxMessageBytes, status, err, tc.refused, log)
			}
		})
	}
}

// TestServeWebSocketBatch: a batch over a WebSocket meets the conductor's
// own batch handling, as on stdio: each entry goes to the chain as a
// message of its own (an SDK agent refuses batches), and the answers come
// back together in one array, as JSON-RPC 2.0 answers a batch. Streamable
// HTTP refuses one with 400 instead, as its answers would belong on
// several streams.
func TestServeWebSocketBatch(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "agent-input")
	agent := "sh -c " + shellQuote("tee "+shellQuote(seen)+" | "+shellQuote(demo)+" sample-agent")
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=tok-123"}, "--", shellQuote(demo)+" sample-proxy", agent)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialInitialized(ctx, t, "ws"+strings.TrimPrefix(u, "http"), transport.DialOptions{Header: http.Header{"Authorization": {"Bearer tok-123"}}}, log)
	defer c.Close()
	batch := `[{"jsonrpc":"2.0","id":"a","method":"session/new","params":{"cwd":"/","mcpServers":[]}},` +
		`{"jsonrpc":"2.0","method":"$/nothing"},` +
		`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{"cwd":"/","mcpServers":[]}}]`
	if err := c.Write(ctx, []byte(batch)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v\n%s", err, log)
	}
	var answers []struct {
		ID     string          `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(got, &answers); err != nil || len(answers) != 2 ||
		!strings.Contains(string(answers[0].Result)+string(answers[1].Result), `"sessionId"`) {
		t.Fatalf("answer %s (%v); want an array of the two sessions\n%s", got, err, log)
	}
	ids := []string{answers[0].ID, answers[1].ID}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("answer ids %q, want a and b", ids)
	}
	c.Close()
	data, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "[") {
			t.Errorf("the agent was sent a batch: %s", line)
		}
	}
	if n := strings.Count(string(data), `"method":"session/new"`); n != 2 {
		t.Errorf("the agent was sent %d session/new, want 2:\n%s", n, data)
	}
}

// TestListenErrorKeepsCause: a port in use is said plainly, and the
// listener's own error is still there, to read and to test for.
func TestListenErrorKeepsCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	got := listenError("--listen", ln.Addr().String(), err)
	if !errors.Is(got, syscall.EADDRINUSE) || !strings.Contains(got.Error(), "in use by another program") || !strings.Contains(got.Error(), err.Error()) {
		t.Errorf("listenError = %v, want the advice and %v", got, err)
	}
}
