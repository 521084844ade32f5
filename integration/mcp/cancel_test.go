package mcp

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMCPCancel: the agent's MCP client, the official Go SDK's, cancels a
// call to toolproxy's server (the Go SDK's too, behind the proxy library,
// on the connect binding) by cancelling its context, which sends MCP's
// notifications/cancelled under the client's id for the call. The
// conductor relays every request under an id of its own, and the proxy
// library serves it under another: the cancel must reach the server as a
// cancel of that call, natively over MCP-over-ACP and bridged over stdio
// and HTTP. The agent then asks the server, on the same connection,
// whether its wait ended (toolproxy's waited).
func TestMCPCancel(t *testing.T) {
	for _, c := range []struct{ name, advertise string }{
		{"stdio", "none"},
		{"http", "http"},
		{"native", "acp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.Command(conductor, "agent", "--log-format", "json", "--shutdown-grace", "10s",
				quote(toolProxy), quote(sdkAgent)+" --advertise "+c.advertise)
			cmd.Env = os.Environ()
			e := startEditor(t, cmd)
			defer func() {
				e.stdin.Close()
				e.wait(ctx)
				if t.Failed() {
					t.Logf("conductor log:\n%s", e.stderr)
				}
			}()
			e.request(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
			a := e.request(ctx, "session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
			var s struct{ SessionID string }
			json.Unmarshal(a.result, &s)
			a = e.request(ctx, "session/prompt", map[string]any{
				"sessionId": s.SessionID,
				"prompt":    []map[string]string{{"type": "text", "text": `{"server":"it-tools","tool":"wait","cancel":true}`}},
			})
			if len(a.updates) != 1 {
				t.Fatalf("%d session updates, want the agent's one report: %s", len(a.updates), a.updates)
			}
			var u struct{ Content struct{ Text string } }
			var rep report
			if json.Unmarshal(a.updates[0], &u) != nil || json.Unmarshal([]byte(u.Content.Text), &rep) != nil {
				t.Fatalf("the agent's update is not a report: %s", a.updates[0])
			}
			if rep.Error != "" || rep.Result != "cancelled: 1" {
				t.Errorf("the agent (over %s) reports %q, error %q; want its wait cancelled at the server", rep.Transport, rep.Result, rep.Error)
			}
		})
	}
}
