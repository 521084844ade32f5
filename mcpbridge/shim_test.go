package mcpbridge

import (
	"bufio"
	"bytes"
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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

type testMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseTestMsg(b []byte) (*testMsg, error) {
	var m testMsg
	err := json.Unmarshal(b, &m)
	return &m, err
}

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

func env(srv StdioServer) map[string]string {
	m := make(map[string]string)
	for _, e := range srv.Env {
		m[e.Name] = e.Value
	}
	return m
}

// A shim is RunShim in this process, on pipes.
type shim struct {
	stdin  *io.PipeWriter
	stdout *bufio.Reader
	done   chan error
}

func startShim(t *testing.T, ctx context.Context, srv StdioServer) *shim {
	t.Helper()
	e := env(srv)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &shim{stdin: inW, stdout: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := RunShim(ctx, inR, outW, e[EnvSocket], e[EnvToken])
		outW.Close()
		s.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("shim did not stop")
		}
	})
	return s
}

func (s *shim) write(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		t.Fatalf("writing to shim: %v", err)
	}
}

func (s *shim) read(t *testing.T) string {
	t.Helper()
	line, err := s.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading from shim: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func (s *shim) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for Cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("shim did not exit")
		return nil
	}
}

func TestStdioDeclaration(t *testing.T) {
	b, err := New(Options{Executable: "/opt/acp-conductor"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := b.Stdio("id-1", "tools")
	if srv.Name != "tools" || srv.Command != "/opt/acp-conductor" || len(srv.Args) != 1 || srv.Args[0] != ShimCommand {
		t.Errorf("declaration = %+v", srv)
	}
	e := env(srv)
	if e[EnvSocket] != b.socket {
		t.Errorf("%s = %q, want %q", EnvSocket, e[EnvSocket], b.socket)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(e[EnvToken]) {
		t.Errorf("token %q is not 32 bytes in hex", e[EnvToken])
	}
	if again := env(b.Stdio("id-1", "tools")); again[EnvToken] != e[EnvToken] {
		t.Error("declaring a server again changed its token")
	}
	if other := env(b.Stdio("id-2", "tools")); other[EnvToken] == e[EnvToken] {
		t.Error("two servers share a token")
	}
	info, err := os.Stat(b.dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v, %v; want mode 0700", info.Mode(), err)
	}
	got, _ := json.Marshal(srv)
	want := fmt.Sprintf(`{"name":"tools","command":"/opt/acp-conductor","args":["mcp-shim"],"env":[{"name":"%s","value":"%s"},{"name":"%s","value":"%s"}]}`,
		EnvSocket, b.socket, EnvToken, e[EnvToken])
	if string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	if _, err := b.HTTP("id-1", "tools"); !errors.Is(err, ErrNoHTTP) {
		t.Errorf("HTTP without Options.HTTP: %v, want ErrNoHTTP", err)
	}
}

func TestShimRelaysBothWays(t *testing.T) {
	accept, conns := parked()
	b := startBridge(t, Options{}, accept)
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))

	sh.write(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	c := next(t, conns)
	if c.ServerID != "srv-1" || c.Name != "tools" || c.Transport != TransportStdio {
		t.Errorf("Conn = %q %q %q", c.ServerID, c.Name, c.Transport)
	}
	msg, err := recv(t, c)
	if err != nil || string(msg) != `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` {
		t.Fatalf("Recv = %s, %v", msg, err)
	}
	// Pretty-printed input still leaves as one line.
	if err := c.Send([]byte("{\"jsonrpc\":\"2.0\",\n \"id\":1,\"result\":{}}")); err != nil {
		t.Fatal(err)
	}
	if got := sh.read(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("shim wrote %s", got)
	}
	// A server-initiated request and its answer.
	c.Send([]byte(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`))
	if got := sh.read(t); got != `{"jsonrpc":"2.0","id":"s1","method":"ping"}` {
		t.Errorf("shim wrote %s", got)
	}
	sh.write(t, `{"jsonrpc":"2.0","id":"s1","result":{}}`)
	if msg, err := recv(t, c); err != nil || string(msg) != `{"jsonrpc":"2.0","id":"s1","result":{}}` {
		t.Errorf("Recv = %s, %v", msg, err)
	}
}

// TestLongTempDir gives the bridge a temporary directory whose path is too
// long for a Unix socket: it makes its socket under /tmp instead, and a shim
// still reaches it.
func TestLongTempDir(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	accept, conns := parked()
	b := startBridge(t, Options{}, accept)
	if len(b.socket) > maxSocketPath || !strings.HasPrefix(b.socket, "/tmp/") {
		t.Errorf("socket at %s", b.socket)
	}
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	sh.write(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if msg, err := recv(t, next(t, conns)); err != nil || string(msg) != `{"jsonrpc":"2.0","id":1,"method":"ping"}` {
		t.Errorf("Recv = %s, %v", msg, err)
	}
}

func TestShimStdinEOFEndsConn(t *testing.T) {
	ended := make(chan error, 1)
	b := startBridge(t, Options{}, func(ctx context.Context, c *Conn) {
		for {
			if _, err := c.Recv(); err != nil {
				ended <- err
				// Returning closes the Conn, which lets the shim exit.
				return
			}
		}
	})
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	sh.write(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	sh.stdin.Close()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("Recv after stdin EOF: %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv did not see EOF")
	}
	if err := sh.wait(t); err != nil {
		t.Errorf("RunShim = %v, want nil", err)
	}
}

func TestConnCloseEndsShim(t *testing.T) {
	b := startBridge(t, Options{}, func(ctx context.Context, c *Conn) {
		msg, err := c.Recv()
		if err != nil {
			return
		}
		req, _ := parseTestMsg(msg)
		// The owner went away: answer what is outstanding, then close.
		c.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"gone"}}`, req.ID))
		c.Close()
		if err := c.Send([]byte(`{}`)); !errors.Is(err, ErrClosed) {
			t.Errorf("Send after Close: %v, want ErrClosed", err)
		}
		if _, err := c.Recv(); !errors.Is(err, ErrClosed) {
			t.Errorf("Recv after Close: %v, want ErrClosed", err)
		}
	})
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	sh.write(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`)
	if got := sh.read(t); !strings.Contains(got, `"id":7,"error"`) {
		t.Errorf("shim wrote %s", got)
	}
	if _, err := sh.stdout.ReadString('\n'); err != io.EOF {
		t.Errorf("after Close, shim stdout: %v, want EOF", err)
	}
	if err := sh.wait(t); err != nil {
		t.Errorf("RunShim = %v, want nil", err)
	}
}

func TestShimContextEndsConn(t *testing.T) {
	connected, ended := make(chan struct{}), make(chan error, 1)
	b := startBridge(t, Options{}, func(ctx context.Context, c *Conn) {
		close(connected)
		_, err := c.Recv()
		ended <- err
	})
	ctx, cancel := context.WithCancel(t.Context())
	sh := startShim(t, ctx, b.Stdio("srv-1", "tools"))
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the shim did not connect")
	}
	cancel()
	if err := sh.wait(t); !errors.Is(err, context.Canceled) {
		t.Errorf("RunShim = %v, want context.Canceled", err)
	}
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("Recv = %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Conn did not end")
	}
}

func TestShimRefused(t *testing.T) {
	defer func(d time.Duration) { refusalInterval = d }(refusalInterval)
	refusalInterval = 0 // log each one, to check what is logged
	log, logs := observed()
	accepted := make(chan *Conn, 1)
	b := startBridge(t, Options{Logger: log}, func(ctx context.Context, c *Conn) { accepted <- c })
	good := b.Stdio("srv-1", "tools")
	e := env(good)

	wrong := strings.Repeat("0", 64)
	err := RunShim(t.Context(), strings.NewReader(""), io.Discard, e[EnvSocket], wrong)
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("wrong token: %v", err)
	}
	err = RunShim(t.Context(), strings.NewReader(""), io.Discard, e[EnvSocket], "")
	if err == nil || !strings.Contains(err.Error(), EnvToken) {
		t.Errorf("missing token: %v", err)
	}
	b.Revoke("srv-1", nil)
	err = RunShim(t.Context(), strings.NewReader(""), io.Discard, e[EnvSocket], e[EnvToken])
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("revoked token: %v", err)
	}
	// A peer that is not a shim at all.
	for _, hello := range []string{"not json\n", `{"mcpShim":2,"token":"x"}` + "\n", `{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n"} {
		nc, err := net.Dial("unix", e[EnvSocket])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(nc, hello)
		ans, _ := io.ReadAll(nc)
		nc.Close()
		if !bytes.Contains(ans, []byte(`"error"`)) {
			t.Errorf("hello %q answered %q", hello, ans)
		}
	}
	select {
	case c := <-accepted:
		t.Errorf("a refused peer became a Conn for %s", c.ServerID)
	default:
	}
	if n := logs.FilterMessage("refused MCP shim connection").Len(); n != 5 {
		t.Errorf("%d refusals logged, want 5", n)
	}
	for _, entry := range logs.All() {
		for _, f := range entry.Context {
			if strings.Contains(f.String, wrong) || strings.Contains(fmt.Sprint(f.Interface), wrong) {
				t.Errorf("log shows the presented token: %v", entry)
			}
		}
	}
}

func TestShimSilentPeerTimesOut(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 50 * time.Millisecond
	b := startBridge(t, Options{}, func(ctx context.Context, c *Conn) { t.Error("silent peer accepted") })
	nc, err := net.Dial("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(nc); err != nil {
		t.Errorf("bridge did not hang up on a silent peer: %v", err)
	}
}

func TestShimOversizeMessage(t *testing.T) {
	accept, conns := parked()
	b := startBridge(t, Options{MaxMessageBytes: 1024}, accept)
	sh := startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	sh.write(t, big)
	sh.write(t, `{"jsonrpc":"2.0","id":10,"method":"ping"}`)
	c := next(t, conns)
	_, err := recv(t, c)
	var over *wire.OversizeError
	if !errors.As(err, &over) || !bytes.HasPrefix(over.Head, []byte(`{"jsonrpc":"2.0","id":9,`)) {
		t.Fatalf("Recv = %v, want *wire.OversizeError with the line's head", err)
	}
	if msg, err := recv(t, c); err != nil || !strings.Contains(string(msg), `"id":10`) {
		t.Errorf("after an oversize line, Recv = %s, %v", msg, err)
	}
}

func TestShimsConcurrently(t *testing.T) {
	b := startBridge(t, Options{}, echo)
	var wg sync.WaitGroup
	for _, server := range []string{"srv-a", "srv-b"} {
		decl := b.Stdio(server, server)
		for i := range 4 {
			wg.Go(func() {
				sh := startShim(t, t.Context(), decl)
				for j := range 20 {
					sh.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"shim":%d}}`, j, i))
				}
				for j := range 20 {
					var resp struct {
						ID     int
						Result struct {
							Server string
							Params struct{ Shim int }
						}
					}
					if err := json.Unmarshal([]byte(sh.read(t)), &resp); err != nil {
						t.Error(err)
						return
					}
					if resp.ID != j || resp.Result.Server != server || resp.Result.Params.Shim != i {
						t.Errorf("shim %d of %s got %+v", i, server, resp)
					}
				}
				sh.stdin.Close()
				if err := sh.wait(t); err != nil {
					t.Errorf("RunShim = %v", err)
				}
			})
		}
	}
	wg.Wait()
}

// TestShimProcess runs the shim as an agent would: the declaration's
// command, arguments and environment, in a process of its own.
func TestShimProcess(t *testing.T) {
	accept, conns := parked()
	b := startBridge(t, Options{}, accept)
	decl := b.Stdio("srv-1", "tools")
	start := func(decl StdioServer) (*exec.Cmd, io.WriteCloser, *bufio.Reader, *bytes.Buffer) {
		cmd := exec.Command(decl.Command, decl.Args...)
		// The race runtime otherwise pauses a second at exit.
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		for _, e := range decl.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, stdin, bufio.NewReader(stdout), &stderr
	}
	wait := func(cmd *exec.Cmd) error {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatal("shim process did not exit")
			return nil
		}
	}

	t.Run("agent closes stdin", func(t *testing.T) {
		cmd, stdin, stdout, stderr := start(decl)
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		c := next(t, conns)
		if msg, err := recv(t, c); err != nil || !strings.Contains(string(msg), `"method":"ping"`) {
			t.Fatalf("Recv = %s, %v", msg, err)
		}
		c.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		if line, _ := stdout.ReadString('\n'); line != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
			t.Errorf("stdout: %q", line)
		}
		stdin.Close()
		if _, err := recv(t, c); err != io.EOF {
			t.Errorf("Recv after stdin closed: %v, want io.EOF", err)
		}
		c.Close()
		if err := wait(cmd); err != nil {
			t.Errorf("shim: %v; stderr: %s", err, stderr)
		}
	})
	t.Run("conductor closes", func(t *testing.T) {
		cmd, stdin, stdout, stderr := start(decl)
		defer stdin.Close()
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		c := next(t, conns)
		recv(t, c)
		c.Send([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"owner gone"}}`))
		c.Close()
		if rest, _ := io.ReadAll(stdout); string(rest) != `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"owner gone"}}`+"\n" {
			t.Errorf("stdout: %q", rest)
		}
		if err := wait(cmd); err != nil {
			t.Errorf("shim: %v; stderr: %s", err, stderr)
		}
	})
	t.Run("agent kills it", func(t *testing.T) {
		cmd, stdin, _, _ := start(decl)
		defer stdin.Close()
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		c := next(t, conns)
		recv(t, c)
		cmd.Process.Kill()
		wait(cmd)
		if _, err := recv(t, c); err != io.EOF {
			t.Errorf("Recv after the shim was killed: %v, want io.EOF", err)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		bad := decl
		bad.Env = []EnvVariable{decl.Env[0], {Name: EnvToken, Value: strings.Repeat("f", 64)}}
		cmd, stdin, _, stderr := start(bad)
		defer stdin.Close()
		var exit *exec.ExitError
		if err := wait(cmd); !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("shim with a wrong token: %v, want exit status 1", err)
		}
		if !strings.Contains(stderr.String(), "refused") {
			t.Errorf("stderr: %q", stderr)
		}
	})
}

// TestShimHandshakeBounded sends handshakes that a shim never would: longer
// than maxHelloBytes without a line end, and a line with more behind it.
// Each is refused as soon as the bridge has read what it may.
func TestShimHandshakeBounded(t *testing.T) {
	accept, conns := parked()
	b := startBridge(t, Options{MaxMessageBytes: 1 << 20}, accept)
	e := env(b.Stdio("srv-1", "tools"))
	hello := `{"mcpShim":1,"token":"` + e[EnvToken] + `"}`
	for _, tc := range []struct{ name, send, want string }{
		{"long", `{"mcpShim":1,"token":"` + strings.Repeat("a", 64<<10), "longer than 4096 bytes"},
		{"padded", hello[:len(hello)-1] + strings.Repeat(" ", maxHelloBytes) + "}\n", "longer than 4096 bytes"},
		{"more behind", hello + "\n" + `{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n", "data after the handshake line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := net.Dial("unix", e[EnvSocket])
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// Written in the background: the bridge stops reading, and
			// answers, before the rest is read.
			go io.WriteString(nc, tc.send)
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			ans, _ := bufio.NewReader(nc).ReadString('\n')
			if !strings.Contains(ans, `"error"`) || !strings.Contains(ans, tc.want) {
				t.Errorf("answered %q, want an error saying %q", ans, tc.want)
			}
		})
	}
	// A peer that connects and leaves without a word is no refusal.
	nc, err := net.Dial("unix", e[EnvSocket])
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	// Only a good shim gets in.
	startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	if c := next(t, conns); len(conns) != 0 || c.ServerID != "srv-1" {
		t.Errorf("%d more connections were accepted", len(conns))
	}
}

// TestShimHandshakesCapped holds maxHandshakes connections that never say a
// word: the bridge accepts no more until one is done, so they cost it a
// bounded number of descriptors; a good shim gets in once one times out.
func TestShimHandshakesCapped(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = time.Hour // only the test ends them
	full := reach(t, &tracked, maxHandshakes)
	accept, conns := parked()
	b := startBridge(t, Options{}, accept)
	e := env(b.Stdio("srv-1", "tools"))
	var silent []net.Conn
	for range maxHandshakes {
		nc, err := net.Dial("unix", e[EnvSocket])
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	// The kernel queues the next connection; the bridge does not take it
	// while all its slots are busy.
	startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
	waitClosed(t, full, "every handshake slot taken")
	if len(b.greeters) != maxHandshakes || len(conns) != 0 {
		t.Errorf("%d slots held, %d shims served; want all %d held, none served", len(b.greeters), len(conns), maxHandshakes)
	}
	silent[0].Close() // a slot frees: the shim's turn
	next(t, conns)
}

// TestRefusalsRateLimited refuses many shims at once: one warning says what
// the first was, one line counts the rest when the interval ends.
func TestRefusalsRateLimited(t *testing.T) {
	defer func(d time.Duration) { refusalInterval = d }(refusalInterval)
	for _, tc := range []struct {
		name     string
		interval time.Duration
		stop     bool // the count comes when the bridge stops, not before
	}{
		{"at the end of the interval", 50 * time.Millisecond, false},
		{"when the bridge stops", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusalInterval = tc.interval
			log, logs, waitLogged := observedWatch()
			b, err := New(Options{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- b.Serve(ctx, func(context.Context, *Conn) {}) }()
			socket := env(b.Stdio("srv-1", "tools"))[EnvSocket]
			const n = 20
			for range n {
				if err := RunShim(t.Context(), strings.NewReader(""), io.Discard, socket, strings.Repeat("0", 64)); err == nil {
					t.Fatal("a wrong token was accepted")
				}
			}
			counted := func() (lines, total int) {
				for _, e := range logs.All() {
					switch e.Message {
					case "refused MCP shim connection":
						lines, total = lines+1, total+1
					case "more MCP bridge connections refused":
						lines, total = lines+1, total+int(e.ContextMap()["count"].(int64))
					}
				}
				return
			}
			if tc.stop {
				if lines, _ := counted(); lines != 1 {
					t.Errorf("%d lines logged before the interval ended, want 1", lines)
				}
				cancel()
				<-done
			} else {
				waitLogged(t, func() bool { _, total := counted(); return total == n })
			}
			lines, total := counted()
			if total != n || lines >= n || (tc.stop && lines != 2) {
				t.Errorf("%d refusals logged in %d lines, want %d in fewer", total, lines, n)
			}
			cancel()
		})
	}
}

// TestRevokedTokenSaysWhy: a client that presents a revoked token is told
// the reason given to Revoke, its server's name and why it is gone: the
// shim's refusal says it, HTTP answers 410 with it, also once the server
// is declared again under a new token. Anyone else is refused as before,
// and no log shows the token.
func TestRevokedTokenSaysWhy(t *testing.T) {
	defer func(d time.Duration) { refusalInterval = d }(refusalInterval)
	refusalInterval = 0 // log each one, to check what is logged
	log, logs := observed()
	const reason = `MCP server "tools" is no longer available: session/close ended session "s1", which declared it`
	why := wire.Errorf(-33001, "%s", reason)

	b, _, c := httpBridge(t, Options{Logger: log})
	token := strings.TrimPrefix(c.header.Get("Authorization"), "Bearer ")
	e := env(b.Stdio("srv-2", "tools"))
	b.Revoke("srv-1", why)
	b.Revoke("srv-2", why)

	err := RunShim(t.Context(), strings.NewReader(""), io.Discard, e[EnvSocket], e[EnvToken])
	if err == nil || !strings.HasSuffix(err.Error(), "the conductor refused this shim: "+reason) {
		t.Errorf("a shim with the revoked token: %v; want it refused saying %s", err, reason)
	}
	err = RunShim(t.Context(), strings.NewReader(""), io.Discard, e[EnvSocket], strings.Repeat("0", 64))
	if err == nil || !strings.HasSuffix(err.Error(), errBadToken.Error()) {
		t.Errorf("a shim with a token never issued: %v; want it refused as unknown", err)
	}

	wantGone := func(what string) {
		t.Helper()
		resp := c.post(acceptBoth, `{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
		body := readAll(t, resp)
		if want, _ := json.Marshal(reason); resp.StatusCode != http.StatusGone || !strings.Contains(body, `"code":-33001`) || !strings.Contains(body, string(want)) {
			t.Errorf("%s: %s %s; want 410 with -33001 saying %s", what, resp.Status, body, reason)
		}
	}
	wantGone("the revoked token")
	other := newHTTPClient(t, HTTPServer{URL: c.url, Headers: []HTTPHeader{{"Authorization", "Bearer " + strings.Repeat("0", 64)}}})
	resp := other.post(acceptBoth, `{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "session/close") {
		t.Errorf("another token on the revoked route: %s %s; want 404, saying nothing of why", resp.Status, body)
	}
	if _, err := b.HTTP("srv-1", "tools"); err != nil {
		t.Fatal(err)
	}
	wantGone("the revoked token, the server declared anew")

	for _, entry := range logs.All() {
		for _, f := range entry.Context {
			if s := f.String + fmt.Sprint(f.Interface); strings.Contains(s, token) || strings.Contains(s, e[EnvToken]) {
				t.Errorf("the log shows a revoked token: %v", entry)
			}
		}
	}
}

// TestRevokedTokensBounded: the registry remembers why for the last
// maxRevoked tokens revoked, and forgets the oldest first.
func TestRevokedTokensBounded(t *testing.T) {
	var r registry
	var tokens []string
	for i := range maxRevoked + 1 {
		id := fmt.Sprint("srv-", i)
		tokens = append(tokens, r.declare(id, "tools").token)
		r.revoke(id, fmt.Errorf("reason %d", i))
	}
	if _, why := r.whyRevoked(tokens[0]); why != nil {
		t.Errorf("the oldest of %d revoked tokens is still remembered: %v", maxRevoked+1, why)
	}
	for _, i := range []int{1, maxRevoked} {
		if id, why := r.whyRevoked(tokens[i]); id != fmt.Sprint("srv-", i) || why == nil || why.Error() != fmt.Sprint("reason ", i) {
			t.Errorf("revoked token %d: %q, %v; want srv-%d, reason %d", i, id, why, i, i)
		}
	}
	if r.gone.Len() != maxRevoked {
		t.Errorf("%d revoked tokens kept, want %d", r.gone.Len(), maxRevoked)
	}
}

// TestRevokedConn: a Conn admitted before its token is revoked reports
// the reason given to Revoke from then on, and nil before, on either
// transport; declaring the server again in between keeps the token, and
// so the Conn still learns of the revocation.
func TestRevokedConn(t *testing.T) {
	why := errors.New("its session ended")
	for _, transport := range []string{TransportStdio, TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			var conn *Conn
			var b *Bridge
			if transport == TransportStdio {
				accept, conns := parked()
				b = startBridge(t, Options{}, accept)
				startShim(t, t.Context(), b.Stdio("srv-1", "tools"))
				conn = next(t, conns)
			} else {
				var conns chan *Conn
				var c *httpClient
				b, conns, c = httpBridge(t, Options{})
				conn = initialize(t, c, conns)
			}
			if err := conn.Revoked(); err != nil {
				t.Fatalf("before Revoke, Revoked() = %v", err)
			}
			b.Stdio("srv-1", "tools again")
			b.Revoke("srv-1", why)
			if err := conn.Revoked(); err != why {
				t.Errorf("after Revoke, Revoked() = %v, want %v", err, why)
			}
			b.Revoke("srv-1", errors.New("a second reason")) // nothing left to revoke
			if err := conn.Revoked(); err != why {
				t.Errorf("after a second Revoke, Revoked() = %v, want %v", err, why)
			}
		})
	}
}

// TestRevokedTokenTellsClient: a shim refused for a revoked token answers
// its client's requests with the reason, up to and including initialize,
// as a refused bridged connection is answered: the client (an MCP SDK's)
// would else report only that its server closed the pipe.
func TestRevokedTokenTellsClient(t *testing.T) {
	const reason = `MCP server "tools" is no longer available: p, the proxy that served it, was restarted`
	b := startBridge(t, Options{}, func(ctx context.Context, c *Conn) {})
	e := env(b.Stdio("srv-1", "tools"))
	b.Revoke("srv-1", wire.Errorf(-33001, "%s", reason))

	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	err := RunShim(t.Context(), strings.NewReader(in), &out, e[EnvSocket], e[EnvToken])
	if err == nil || !strings.HasSuffix(err.Error(), reason) {
		t.Errorf("RunShim: %v; want the refusal", err)
	}
	msg, _ := json.Marshal(reason)
	want := `{"jsonrpc":"2.0","id":"d","error":{"code":-33001,"message":` + string(msg) + `}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-33001,"message":` + string(msg) + `}}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("the client got\n%s\nwant\n%s", got, want)
	}
}
