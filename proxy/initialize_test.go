package proxy_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/acp-conductor/acp-conductor/proxy"
)

const initParams = `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}},"_meta":{"t":1}}`

func TestInitialize(t *testing.T) {
	tests := []struct {
		name   string
		result string // the successor's
		want   string // the proxy's
	}{{
		name:   "no capabilities",
		result: `{"protocolVersion":1}`,
		want:   `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}`,
	}, {
		name:   "no mcp capabilities",
		result: `{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"authMethods":[]}`,
		want:   `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"acp":true}},"authMethods":[]}`,
	}, {
		name:   "acp off",
		result: `{"agentCapabilities":{"mcpCapabilities":{"http":true, "acp":false, "sse":false}},"protocolVersion":1}`,
		want:   `{"agentCapabilities":{"mcpCapabilities":{"http":true, "acp":true, "sse":false}},"protocolVersion":1}`,
	}, {
		name:   "acp on",
		result: `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}},"_meta":{"m":[1, 2]}}`,
		want:   `{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}},"_meta":{"m":[1, 2]}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, &proxy.Proxy{})
			c.send(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":` + initParams + `}`)
			c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + initParams + `}}`)
			c.send(`{"jsonrpc":"2.0","id":1,"result":` + tt.result + `}`)
			c.expect(`{"jsonrpc":"2.0","id":0,"result":` + tt.want + `}`)
		})
	}
}

// The handler for "initialize" sees proxy/initialize, and its answer still
// advertises MCP-over-ACP.
func TestInitializeHandler(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"initialize": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				result, err := r.Forward(ctx)
				if err != nil {
					return nil, err
				}
				return proxy.EditMember(result, "agentCapabilities", func(json.RawMessage) (json.RawMessage, error) {
					return json.RawMessage(`{"loadSession":false}`), nil
				})
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":` + initParams + `}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":` + initParams + `}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	c.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false,"mcpCapabilities":{"acp":true}}}}`)
}

// A successor that fails to initialize fails the proxy's initialization with
// the same error.
func TestInitializeError(t *testing.T) {
	c := serve(t, &proxy.Proxy{})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"agent exited"}}`)
	c.expect(`{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"agent exited"}}`)
}

// A proxy started as if it were the agent refuses, and goes on refusing
// what the editor sends next, rather than relaying it in envelopes to a
// successor the editor does not have.
func TestInitializeAsAgentRefused(t *testing.T) { synctest.Test(t, testInitializeAsAgentRefused) }

func testInitializeAsAgentRefused(t *testing.T) {
	c := serve(t, &proxy.Proxy{})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	c.expectError("0", -32600)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	c.expectError("1", -32600)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	c.quiet()
}

// Initialized in the Rust SDK's dialect, the proxy speaks it: it wraps in
// _proxy/successor, and it understands both spellings.
func TestRustDialect(t *testing.T) {
	c := serve(t, &proxy.Proxy{})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"_proxy/initialize","params":{"protocolVersion":1}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"_proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	c.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}}`)

	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"_proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s"}}}`)
	c.send(`{"jsonrpc":"2.0","method":"_proxy/successor","params":{"method":"session/update","params":{"n":1}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`)
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"n":2}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":2}}`)
}

// Initialized by a conductor of the Thinkwell dialect (@thinkwell/conductor,
// sacp-conductor), with initialize marked _meta.proxy, the proxy says it took
// a proxy's part and speaks that dialect: requests and notifications go to
// its successor in envelopes of their own.
func TestThinkwellDialect(t *testing.T) {
	c := serve(t, &proxy.Proxy{})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"_proxy/successor/request","params":{"method":"initialize","params":{"protocolVersion":1,"_meta":{"proxy":true}}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	c.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}},"_meta":{"proxy":true,"symposium":{"proxy":true}}}}`)

	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"session/cancel","params":{"sessionId":"s"}}}`)
	c.send(`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"_proxy/successor/request","params":{"method":"session/new","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"session/update","params":{"n":1}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`)
	c.send(`{"jsonrpc":"2.0","id":9,"method":"_proxy/successor/request","params":{"method":"fs/read_text_file","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{}}`)
}
