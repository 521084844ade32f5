package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
)

// TestMCPOverACPRemote crosses a network hop: editor → acp-conductor →
// toolproxy → ws://… (acp-conductor serve → goproxy → sdkagent). The tool
// is provided by the local proxy and used by the remote agent, natively
// over MCP-over-ACP: its mcp/* messages go from the remote conductor up its
// WebSocket to the local conductor, which routes them to toolproxy.
func TestMCPOverACPRemote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	marker := watchedMarker(t)

	const token = "mcp-remote-token"
	srv := exec.Command(conductor, "serve", "--listen", "127.0.0.1:0", "--shutdown-grace", "10s", "--",
		"ACP_IT_TRACE=1 "+quote(goProxy)+" passthrough", quote(sdkAgent)+" --advertise acp")
	srv.Env = append(os.Environ(), markerVar+"="+marker, "ACP_CONDUCTOR_TOKEN="+token)
	srvLog := &testio.Buffer{}
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"url": "(ws://[^"]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			srvLog.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls)
	}()
	defer func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", srvLog)
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-ctx.Done():
	}
	if url == "" {
		t.Fatalf("serve did not start:\n%s", srvLog)
	}

	cmd := exec.Command(conductor, "agent", "--log-format", "json", "--shutdown-grace", "10s", quote(toolProxy), url)
	cmd.Env = append(os.Environ(), markerVar+"="+marker, "ACP_CONDUCTOR_REMOTE_TOKEN="+token)
	e := startEditor(t, cmd)
	exited := false
	defer func() {
		if !exited {
			e.stdin.Close()
			e.cmd.Process.Kill()
			e.wait(context.Background())
		}
		if t.Failed() {
			t.Logf("local conductor's log:\n%s", e.stderr)
		}
	}()

	e.request(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	cwd := t.TempDir()
	a := e.request(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(a.result, &s); err != nil || s.SessionID == "" {
		t.Fatalf("session/new: %s %s", a.result, a.err)
	}
	who := "remote editor"
	a = e.request(ctx, "session/prompt", map[string]any{
		"sessionId": s.SessionID,
		"prompt":    []map[string]string{{"type": "text", "text": fmt.Sprintf(`{"server":%q,"tool":%q,"name":%q}`, serverName, toolName, who)}},
	})
	if len(a.updates) != 1 {
		t.Fatalf("%d session updates, want the agent's one report: %s (error %s)", len(a.updates), a.updates, a.err)
	}
	var u struct {
		Content struct{ Text string }
	}
	var rep report
	if err := json.Unmarshal(a.updates[0], &u); err != nil || json.Unmarshal([]byte(u.Content.Text), &rep) != nil {
		t.Fatalf("the agent's update is not a report: %s", a.updates[0])
	}
	checkReport(t, latestRevision, "acp", rep, who, cwd, s.SessionID)
	if err := e.close(ctx); err != nil {
		t.Errorf("the local conductor exited with %v", err)
	}
	exited = true
}
