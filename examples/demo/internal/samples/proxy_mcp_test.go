package samples

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestProxyMCP plays the conductor and an agent with native MCP-over-ACP
// to the sample proxy: the proxy declares its server in the session, and
// the agent connects to it and calls its tool, which counts the session's
// prompts.
func TestProxyMCP(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Proxy(context.Background(), inR, outW) }()
	ch := wire.NewLineChannel(outR, inW, 0)
	defer func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("Proxy: %v", err)
		}
		ch.Close()
	}()
	exchange := func(send string) *wire.Message {
		t.Helper()
		if err := ch.Send([]byte(send)); err != nil {
			t.Fatal(err)
		}
		line, err := ch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		m, err := wire.Parse(line)
		if err != nil {
			t.Fatalf("proxy sent %s: %v", line, err)
		}
		return m
	}
	fromAgent := func(id, method, params string) *wire.Message {
		t.Helper()
		return exchange(`{"jsonrpc":"2.0","id":` + id + `,"method":"proxy/successor","params":{"method":"` + method + `","params":` + params + `}}`)
	}

	fwd := exchange(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	_, params, _ := wire.Unwrap(fwd.Params)
	servers := acpServers(params)
	if len(servers) != 1 || servers[0].name != ProxyMCPServer {
		t.Fatalf("the proxy declared %s", params)
	}
	exchange(`{"jsonrpc":"2.0","id":` + string(fwd.ID) + `,"result":{"sessionId":"s1"}}`)
	for range 2 {
		fwd = exchange(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
		exchange(`{"jsonrpc":"2.0","id":` + string(fwd.ID) + `,"result":{"stopReason":"end_turn"}}`)
	}

	m := fromAgent(`"c"`, "mcp/connect", `{"acpId":"`+servers[0].id+`"}`)
	var conn struct{ ConnectionID string }
	json.Unmarshal(m.Result, &conn)
	on := `{"connectionId":"` + conn.ConnectionID + `",`
	for _, tc := range []struct{ params, want string }{
		{`"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}}`,
			`"result":{"capabilities":{"tools":{}},"protocolVersion":"2025-03-26","serverInfo":{"name":"sample-proxy","version":"0.1.0"}}`},
		{`"method":"tools/list"}`, `"name":"prompt_count"`},
		{`"method":"tools/call","params":{"name":"prompt_count","arguments":{}}}`,
			`"text":"sample-proxy has passed on 2 prompt(s) in session s1."`},
		{`"method":"tools/call","params":{"name":"nope"}}`, `"error":{"code":-32602,"message":"unknown tool \"nope\""}`},
		{`"method":"resources/list"}`, `"code":-32601`},
	} {
		m := fromAgent(`"m"`, "mcp/message", on+tc.params)
		if line := string(m.Bytes()); !strings.Contains(line, tc.want) {
			t.Errorf("%s: got %s, want %s in it", tc.params, line, tc.want)
		}
	}
	if m := fromAgent(`"d"`, "mcp/disconnect", on[:len(on)-1]+"}"); string(m.Result) != "{}" {
		t.Errorf("mcp/disconnect: %s", m.Bytes())
	}
}
