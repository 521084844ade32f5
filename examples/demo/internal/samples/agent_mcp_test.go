package samples

import (
	"strings"
	"testing"
)

// The agent advertises MCP-over-ACP and, at the end of a turn, calls the
// sample proxy's tool through the ACP connection: connect, initialize,
// tools/call, disconnect. A failure on the way is reported, not fatal.
func TestAgentUsesProxyTool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connect string // the answer to mcp/connect
		tool    string // the answer to tools/call, if it gets that far
		want    []string
	}{
		{
			name:    "ok",
			connect: `"result":{"connectionId":"c1"}`,
			tool:    `"result":{"content":[{"type":"text","text":"42 prompts"}]}`,
			want:    []string{`"status":"completed"`, `"text":"42 prompts"`, `(MCP-over-ACP): 42 prompts`},
		},
		{
			name:    "tool error",
			connect: `"result":{"connectionId":"c1"}`,
			tool:    `"result":{"content":[{"type":"text","text":"broken"}],"isError":true}`,
			want:    []string{`"status":"failed"`, `"text":"broken"`, `I could not use sample-proxy's tool: broken`},
		},
		{
			name:    "no connection",
			connect: `"error":{"code":-32602,"message":"unknown server"}`,
			want:    []string{`"status":"failed"`, `I could not use sample-proxy's tool: mcp/connect failed: unknown server`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newRawPeer(t)
			p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			p.expect(`"mcpCapabilities":{"acp":true,"http":false,"sse":false}`)
			p.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"fs","command":"x","args":[],"env":[]},{"type":"acp","name":"sample-proxy","id":"srv-1"}]}}`)
			p.expect(`"id":1`)
			p.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go"}]}}`)
			for {
				m, _ := p.recv()
				if m.Method == "session/request_permission" {
					p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"outcome":{"outcome":"selected","optionId":"reject-once"}}}`)
					break
				}
			}
			p.expect(`"status":"failed"`) // the README, declined
			p.expect(`You declined`)
			p.expect(`"toolCallId":"call_2"`, `"status":"in_progress"`, `prompt_count, an MCP tool that sample-proxy provides over ACP`)
			m := p.expect(`"method":"mcp/connect"`, `"params":{"acpId":"srv-1"}`)
			p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + tc.connect + `}`)
			if tc.tool != "" {
				m = p.expect(`"method":"mcp/message"`, `"connectionId":"c1"`, `"method":"initialize"`)
				p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`)
				p.expect(`"method":"mcp/message"`, `"method":"notifications/initialized"`)
				m = p.expect(`"method":"mcp/message"`, `"method":"tools/call"`, `"name":"prompt_count"`)
				p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + tc.tool + `}`)
				m = p.expect(`"method":"mcp/disconnect"`, `"connectionId":"c1"`)
				p.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`)
			}
			var rest []string
			for {
				m, line := p.recv()
				rest = append(rest, line)
				if m.IsResponse() {
					break
				}
			}
			got := strings.Join(rest, "\n")
			for _, w := range append(tc.want, `"stopReason":"end_turn"`) {
				if !strings.Contains(got, w) {
					t.Errorf("the end of the turn lacks %s:\n%s", w, got)
				}
			}
		})
	}
}
