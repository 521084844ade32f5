package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/config"
	"github.com/acp-conductor/acp-conductor/transport"
)

// TestRemoteClientTrustsExtraCAs: with a PEM file of authorities, a
// remote component trusts a server the system does not, on every platform;
// a file that cannot be read or holds no certificate is an error naming
// the variable.
func TestRemoteClientTrustsExtraCAs(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("the system already trusts the test server")
	}
	c, err := remoteClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("with %s: %v", config.EnvExtraCACerts, err)
	}
	resp.Body.Close()

	if c, err := remoteClient(""); c != nil || err != nil {
		t.Errorf(`remoteClient("") = %v, %v; want Dial's default`, c, err)
	}
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o644)
	for _, file := range []string{filepath.Join(dir, "missing.pem"), junk} {
		if _, err := remoteClient(file); err == nil || !strings.Contains(err.Error(), config.EnvExtraCACerts) {
			t.Errorf("remoteClient(%s): %v, want an error naming %s", file, err, config.EnvExtraCACerts)
		}
	}
}

// TestRemoteConnectMessageLimit: remote-connect carries messages as long as
// the chain's max_message_bytes (which the conductor passes it), not only
// its default's: one past the limit ends the connection, naming the URL.
func TestRemoteConnectMessageLimit(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"t":"` + strings.Repeat("x", 100<<10) + `"}}`
	srv := &transport.Server{Serve: func(ctx context.Context, c transport.Conn, _ transport.ConnInfo) {
		if _, err := c.Read(ctx); err == nil {
			c.Write(ctx, []byte(big))
			c.Read(ctx) // until the client goes
		}
	}}
	ts := httptest.NewServer(srv)
	defer func() { srv.Close(); ts.Close() }()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/acp"
	for _, tc := range []struct {
		flags []string
		ok    bool
	}{
		{nil, true},
		{[]string{"--max-message-bytes", "200000"}, true},
		{[]string{"--max-message-bytes", "65536"}, false},
	} {
		// Its input stays open until its output has said what it will.
		cmd := exec.Command(binary, append(append([]string{config.RemoteCommand}, tc.flags...), url)...)
		cmd.Env = cleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
		line, _ := bufio.NewReaderSize(out, 256<<10).ReadString('\n')
		in.Close()
		cmd.Wait()
		got, code := strings.TrimSpace(line) == big, cmd.ProcessState.ExitCode()
		if got != tc.ok || (!tc.ok && (code != 1 || !strings.Contains(stderr.String(), url))) {
			t.Errorf("%q: got the message %v, exit %d, stderr %q; want the message %v", tc.flags, got, code, stderr.String(), tc.ok)
		}
	}
}

// TestRemoteRefused: when serve refuses the credentials, the editor's
// error, which carries the last line of remote-connect's stderr, says so
// plainly, says where the token is set and whether it was, and holds no
// token; over both profiles, for a token from the environment and for a
// chain file's headers.
func TestRemoteRefused(t *testing.T) {
	u, _, log := startServe(t, []string{"ACP_CONDUCTOR_TOKEN=right-token-123"}, "--", shellQuote(demo)+" sample-agent")
	const (
		wrong  = "the server refused the token (401 Unauthorized); set ACP_CONDUCTOR_REMOTE_TOKEN or the component's headers"
		none   = "the server wants a token (401 Unauthorized); no token was set: set ACP_CONDUCTOR_REMOTE_TOKEN or the component's headers"
		origin = "the server refused the token or the request (403 Forbidden: forbidden Origin); set ACP_CONDUCTOR_REMOTE_TOKEN or the component's headers"
	)
	for _, scheme := range []string{"ws", "http"} {
		url := scheme + strings.TrimPrefix(u, "http")
		chain := func(headers string) string {
			return writeFile(t, "chain.yaml", "agent:\n  url: "+url+"\n  headers: "+headers+"\n")
		}
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"wrong token", []string{"ACP_CONDUCTOR_REMOTE_TOKEN=wrong-token-456"}, []string{url}, wrong},
			{"no token", nil, []string{url}, none},
			{"blank token", []string{"ACP_CONDUCTOR_REMOTE_TOKEN= "}, []string{url}, none},
			{"wrong header", nil, []string{"--config", chain(`{Authorization: "Bearer wrong-token-456"}`)}, wrong},
			{"forbidden origin", nil, []string{"--config", chain(`{Authorization: "Bearer right-token-123", Origin: "https://elsewhere.example"}`)}, origin},
		} {
			t.Run(scheme+" "+tc.name, func(t *testing.T) {
				r := acp(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`+"\n",
					tc.env, append([]string{"agent"}, tc.args...)...)
				var resp struct {
					Error struct{ Message string }
				}
				json.Unmarshal([]byte(r.stdout), &resp)
				want := fmt.Sprintf(`component %q ended unexpectedly (exit status 1): acp-conductor: connecting to %s: %s`, url, url, tc.want)
				if resp.Error.Message != want || r.code != 1 {
					t.Errorf("exit %d, message\n%s\nwant exit 1, message\n%s\nstdout: %s\nstderr:\n%s\nserve:\n%s", r.code, resp.Error.Message, want, r.stdout, r.stderr, log)
				}
				for _, tok := range []string{"wrong-token-456", "right-token-123"} {
					if strings.Contains(r.stdout+r.stderr, tok) {
						t.Errorf("a token is shown:\nstdout: %s\nstderr:\n%s", r.stdout, r.stderr)
					}
				}
			})
		}
	}
}

// TestRemoteConnectLogs: what the transport of a remote component logs
// reaches the conductor's log, at the chain's level: a Streamable HTTP
// server's SSE event that carries no message is skipped with a debug line
// under the component's name, which a chain at info leaves out.
func TestRemoteConnectLogs(t *testing.T) {
	const after = `{"jsonrpc":"2.0","method":"_test/after_ping","params":{}}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.Header.Get(transport.HeaderConnectionID) == "":
			b, _ := io.ReadAll(r.Body)
			var req struct{ ID json.RawMessage }
			json.Unmarshal(b, &req)
			w.Header().Set(transport.HeaderConnectionID, "c1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}`, req.ID)
		case r.Method == http.MethodGet && r.Header.Get(transport.HeaderConnectionID) != "":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: ping\ndata: {}\n\ndata: "+after+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Method == http.MethodGet:
			http.Error(w, "no WebSocket here", http.StatusBadRequest) // Streamable HTTP, then
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer ts.Close()
	for _, level := range []string{"debug", "info"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd, stdin, stdout, stderr := startPiped(t, ctx, cleanEnv(), "agent", "--log-level", level, ts.URL+"/acp")
		io.WriteString(stdin, initialize+"\n")
		out := bufio.NewReader(stdout)
		var lines []string
		for len(lines) < 2 {
			line, err := out.ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				cancel()
				t.Fatalf("%s: after %q: %v\n%s", level, lines, err, stderr)
			}
			lines = append(lines, line)
		}
		stdin.Close()
		err := cmd.Wait()
		cancel()
		if err != nil || strings.TrimSpace(lines[1]) != after {
			t.Fatalf("%s: exit %v, got %q, want the initialize answer and then %s\n%s", level, err, lines, after, stderr)
		}
		logged := strings.Contains(stderr.String(), "skipped an SSE event that is not a message") && strings.Contains(stderr.String(), `"event": "ping"`)
		if logged != (level == "debug") {
			t.Errorf("at %s, the skipped event logged: %v, want %v\n%s", level, logged, level == "debug", stderr)
		}
	}
}
