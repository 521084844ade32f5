package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMCPOwnerRestarted: toolproxy, with on_failure: restart, is killed
// after the agent used its server. The agent's MCP client (the SDK's),
// connecting again to the server the session declared, hears that it is
// gone and why, over each transport; a new session's server works.
func TestMCPOwnerRestarted(t *testing.T) {
	for _, c := range []struct {
		advertise string
		why       string // what the client's error must say
	}{
		{"none", "the proxy that served it, was restarted"}, // the stdio shim
		{"acp", "the proxy that served it, was restarted"},
		{"http", "Gone"}, // 410, whose body the SDK does not show
	} {
		t.Run(c.advertise, func(t *testing.T) {
			t.Parallel()
			ownerRestarted(t, c.advertise, c.why)
		})
	}
}

func ownerRestarted(t *testing.T, advertise, why string) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	marker := watchedMarker(t)
	file := filepath.Join(t.TempDir(), "chain.yaml")
	chain := fmt.Sprintf("proxies:\n  - name: tp\n    command: %q\n    on_failure: restart\nagent:\n  command: %q\n  args: [--advertise, %s]\n", toolProxy, sdkAgent, advertise)
	if err := os.WriteFile(file, []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(conductor, "agent", "--config", file, "--shutdown-grace", "10s")
	cmd.Env = append(os.Environ(), markerVar+"="+marker)
	e := startEditor(t, cmd)
	defer func() {
		if t.Failed() {
			t.Logf("conductor log:\n%s", e.stderr)
		}
	}()

	e.request(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	session := func() string {
		var s struct{ SessionID string }
		a := e.request(ctx, "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
		if json.Unmarshal(a.result, &s); s.SessionID == "" {
			t.Fatalf("session/new: %s %s", a.result, a.err)
		}
		return s.SessionID
	}
	use := func(id string) report {
		t.Helper()
		a := e.request(ctx, "session/prompt", map[string]any{"sessionId": id,
			"prompt": []map[string]string{{"type": "text", "text": fmt.Sprintf(`{"server":%q,"tool":%q,"name":"x"}`, serverName, toolName)}}})
		var u struct{ Content struct{ Text string } }
		var rep report
		if len(a.updates) != 1 || json.Unmarshal(a.updates[0], &u) != nil || json.Unmarshal([]byte(u.Content.Text), &rep) != nil {
			t.Fatalf("session/prompt: %s %s, updates %s", a.result, a.err, a.updates)
		}
		return rep
	}
	s1 := session()
	if rep := use(s1); rep.Error != "" || !strings.Contains(rep.Result, "hello, x") {
		t.Fatalf("before the restart: %+v", rep)
	}

	procs, _ := markedProcs(marker)
	for _, p := range procs {
		if strings.Contains(p, toolProxy) {
			pid, _ := strconv.Atoi(p[:strings.IndexByte(p, ':')])
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for !strings.Contains(e.stderr.String(), "restarted component") {
		select {
		case <-ctx.Done():
			t.Fatal("toolproxy was not restarted")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if rep := use(s1); !strings.Contains(rep.Error, why) {
		t.Errorf("the old session's server after the restart: the client said %q, want it to say %q", rep.Error, why)
	}
	if rep := use(session()); rep.Error != "" || !strings.Contains(rep.Result, "hello, x") {
		t.Errorf("a new session's server: %+v", rep)
	}
	if err := e.close(ctx); err != nil {
		t.Errorf("the conductor exited with %v after its stdin closed; want status 0", err)
	}
}
