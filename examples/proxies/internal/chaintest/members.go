package chaintest

import (
	"os/exec"
	"testing"
)

// TopLevelMembersPass runs cmd, a proxy that passes on what it does not
// handle, on pipes, and checks that a message's top-level members that
// JSON-RPC does not define go on with it, as README.md's "Writing proxies"
// asks: into the envelope's params beside method and params when the proxy
// wraps the message, out of them when it unwraps one (but for the
// envelope's _meta, and its own top-level members, which end with it), and
// on responses and $/cancel_request, both ways.
func TopLevelMembersPass(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	exchange, stop := exchanger(t, cmd)
	defer stop()
	const extra = `"x-extra":[1,{"k":"ü"}]`
	// From the editor side, wrapped on the way to the agent side.
	exchange(`{"jsonrpc":"2.0","id":"r1","method":"session/prompt","params":{},`+extra+`}`,
		`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{},`+extra+`}}`)
	exchange(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r1"},`+extra+`}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1},`+extra+`}`)
	exchange(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"},`+extra+`}`,
		`{"jsonrpc":"2.0","id":"r1","result":{"stopReason":"cancelled"},`+extra+`}`)
	exchange(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"},`+extra+`}`,
		`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s"},`+extra+`}}`)
	// From the agent side, unwrapped: the envelope's _meta and its own
	// top-level members stay behind.
	exchange(`{"jsonrpc":"2.0","id":"w1","method":"proxy/successor","params":{"method":"fs/read_text_file","params":{},"_meta":{"e":1},`+extra+`},"x-envelope":2}`,
		`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{},`+extra+`}`)
	exchange(`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"no"},`+extra+`}`,
		`{"jsonrpc":"2.0","id":"w1","error":{"code":-32000,"message":"no"},`+extra+`}`)
	exchange(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s"},`+extra+`}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"},`+extra+`}`)
}
