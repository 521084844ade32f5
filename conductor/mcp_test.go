package conductor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPNative routes MCP-over-ACP between a native agent and a proxy two
// hops up the chain: connect, a tool call during which the server asks the
// client a question, an unknown connection, disconnect. The proxy in between
// never sees any of it.
func TestMCPNative(t *testing.T) {
	for _, spelling := range []string{"id", "serverId"} {
		t.Run(spelling, func(t *testing.T) {
			dir := t.TempDir()
			e := startChain(t, Config{
				Proxies: []Component{
					fake(t, dir, "owner", "mcp-owner", "ACP_TEST_MCP_SPELLING="+spelling),
					fake(t, dir, "middle", "proxy"),
				},
				Agent: fake(t, dir, "agent", "mcp-agent"),
			})
			e.send(initLine)
			e.recvMsg()
			e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
			got := map[string]string{}
			for {
				m := e.recvMsg()
				if m.IsResponse() && string(m.ID) == "2" {
					break
				}
				if string(m.ID) == "1" {
					e.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
					continue
				}
				var u struct {
					Update struct {
						Content struct{ Text string } `json:"content"`
					} `json:"update"`
				}
				json.Unmarshal(m.Params, &u)
				label, rest, _ := strings.Cut(u.Update.Content.Text, " ")
				got[label] = rest
			}
			want := map[string]string{
				"declared":   mustJSON([]map[string]any{{"_meta": map[string]any{"kept": true}, spelling: "srv-1", "name": "owner-tools", "type": "acp"}}),
				"connect":    `{"connectionId":"conn-1","_meta":{"got":{"` + map[string]string{"id": "acpId", "serverId": "serverId"}[spelling] + `":"srv-1"}}}`,
				"call":       `{"content":[{"type":"text","text":"tool ran; client said {'answer':'yes'}"}]}`,
				"bogus":      `{"code":-32602,"message":"mcp/message: unknown MCP connection","data":{"connectionId":"no-such-conn"}}`,
				"disconnect": `{}`,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: got %s\nwant %s", k, got[k], v)
				}
			}
			e.close()
			middle, _ := os.ReadFile(filepath.Join(dir, "middle.txt"))
			if strings.Contains(string(middle), `"method":"mcp/`) {
				t.Errorf("the proxy in between saw MCP traffic:\n%s", middle)
			}
		})
	}
}
