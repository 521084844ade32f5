package injector

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRun plays the conductor to the command: the prompt of a session set
// up in a directory with an AGENTS.md gets its text in front, and the end of
// the input ends Run cleanly.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "NOTES.md"), "Use tabs.")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), []string{"--file", "NOTES.md", "--max-bytes", "100"}, inR, outW, &stderr)
	}()
	lines := bufio.NewScanner(outR)
	exchange := func(send, want string) {
		t.Helper()
		if _, err := io.WriteString(inW, send+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s: %v", send, lines.Err())
		}
		if got := lines.Text(); got != want {
			t.Fatalf("sent\n\t%s\ngot\n\t%s\nwant\n\t%s", send, got, want)
		}
	}
	exchange(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	exchange(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}}`)
	exchange(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"`+dir+`","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd":"`+dir+`","mcpServers":[]}}}`)
	exchange(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	exchange(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[`+
			`{"type":"text","text":"Project instructions from `+filepath.Join(dir, "NOTES.md")+`:\n\nUse tabs."},{"type":"text","text":"hi"}]}}}`)
	exchange(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`, `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)

	inW.Close()
	if lines.Scan() {
		t.Errorf("after its input ended Run sent %s", lines.Text())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return at the end of its input")
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", &stderr)
	}
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   error
		stderr string
	}{
		{[]string{"--help"}, flag.ErrHelp, "usage: " + Usage},
		{[]string{"--nope"}, ErrUsage, "flag provided but not defined: -nope"},
		{[]string{"--file", "/etc/AGENTS.md"}, ErrUsage, "want a file name relative to the session's directory"},
		{[]string{"--max-bytes", "0"}, ErrUsage, "--max-bytes must be positive"},
		{[]string{"AGENTS.md"}, ErrUsage, `unexpected argument "AGENTS.md"`},
	} {
		var stderr strings.Builder
		_, out := io.Pipe()
		err := Run(context.Background(), tc.args, strings.NewReader(""), out, &stderr)
		if !errors.Is(err, tc.want) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("Run(%q) = %v, stderr %q; want %v and %q", tc.args, err, &stderr, tc.want, tc.stderr)
		}
	}
}
