//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/transport"
)

// TestRemoteQueryNotInArgv: a remote component's URL with a query, which
// may hold a token, reaches the server whole, while no command line, which
// every user of the machine can read in the process table, shows the query.
func TestRemoteQueryNotInArgv(t *testing.T) {
	queries := make(chan string, 8)
	srv := &transport.Server{Serve: func(ctx context.Context, c transport.Conn, _ transport.ConnInfo) {
		for {
			m, err := c.Read(ctx)
			if err != nil {
				return
			}
			var req struct{ ID json.RawMessage }
			json.Unmarshal(m, &req)
			c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"protocolVersion":1}}`))
		}
	}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case queries <- r.URL.RawQuery:
		default:
		}
		srv.ServeHTTP(w, r)
	}))
	defer func() { srv.Close(); ts.Close() }()
	const secret = "q-s3cret-42"
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/acp?token=" + secret

	// From a chain file, so that no command line holds the URL to begin
	// with (a person may type one; the conductor must not).
	cmd := exec.Command(binary, "agent", "--config", writeFile(t, "chain.yaml", "agent: {url: '"+url+"'}\n"))
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	io.WriteString(in, initRequest)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize: %q\nstderr: %s", line, stderr.String())
	}
	if q := <-queries; q != "token="+secret {
		t.Errorf("the server got the query %q, want token=%s", q, secret)
	}
	// The chain is up, every process of it running: none shows the query.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if cmdline, _ := os.ReadFile(p); bytes.Contains(cmdline, []byte(secret)) {
			t.Errorf("%s: %q", p, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
	in.Close()
	cmd.Wait()
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("the log shows the query:\n%s", stderr.String())
	}
}
