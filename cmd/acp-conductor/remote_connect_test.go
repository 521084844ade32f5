package main

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
