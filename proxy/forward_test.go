package proxy_test

import (
	"testing"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// Unclaimed traffic goes through with params, ids and _meta exactly as they
// came; only the envelope changes.

func TestForwardFromPredecessor(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	c.send(`{"jsonrpc":"2.0","id":"a1","method":"session/new","params":{"cwd" : "/tmp","mcpServers":[ ],"_meta":{"traceparent":"00-abc-01"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd" : "/tmp","mcpServers":[ ],"_meta":{"traceparent":"00-abc-01"}}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1", "_meta":{"x":[1, 2.50]}}}`)
	c.expect(`{"jsonrpc":"2.0","id":"a1","result":{"sessionId":"s1", "_meta":{"x":[1, 2.50]}}}`)

	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1","_meta":{"why":"user"}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1","_meta":{"why":"user"}}}}`)

	// A request without params, and extension methods, go through too.
	c.send(`{"jsonrpc":"2.0","id":9,"method":"_vendor/ping"}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"_vendor/ping"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":null}`)
	c.expect(`{"jsonrpc":"2.0","id":9,"result":null}`)
}

func TestForwardFromSuccessor(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	// The envelope's own _meta belongs to the hop and stays behind.
	c.send(`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1","options":[],"_meta":{"k":"v"}},"_meta":{"hop":true}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","options":[],"_meta":{"k":"v"}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"},"_meta":{"r":1}}}`)
	c.expect(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"},"_meta":{"r":1}}}`)

	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"meta":{"hop":1},"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \u00e9\n"}}}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \u00e9\n"}}}}`)
}

// Ids the conductor uses for plain and wrapped requests, and ids the proxy
// uses toward either side, never get mixed up.
func TestForwardBothWaysInterleaved(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"path":"/a"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"path":"/a"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":{"content":"A"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":"A"}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
}

// An error from the successor reaches the predecessor exactly as it was
// sent, whether relayed or passed back by a handler.
func TestForwardError(t *testing.T) {
	const errObj = `{"message":"no such session", "code":-32602,"data":{"sessionId":"s9","detail":[1, 2]},"extra":true}`
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})

	c.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":1,"error":` + errObj + `}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"error":` + errObj + `}`)

	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":2,"error":` + errObj + `}`)
	c.expect(`{"jsonrpc":"2.0","id":4,"error":` + errObj + `}`)
}
