package chaintest

import (
	"os/exec"
	"testing"
)

// CancelKeepsMeta runs cmd, a proxy that passes on what it does not handle,
// on pipes, and checks that a $/cancel_request it passes on names the
// request by the proxy's own id and keeps everything else it carried (_meta
// with W3C trace context, members the proxy does not know), for a request
// from either side.
func CancelKeepsMeta(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	exchange, stop := exchanger(t, cmd)
	defer stop()
	const meta = `"_meta":{"traceparent":"00-abc-def-01"},"x-extra":[1,{"k":"ü"}]`
	exchange(`{"jsonrpc":"2.0","id":"r1","method":"session/prompt","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	exchange(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r1",`+meta+`}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1,`+meta+`}}`)
	exchange(`{"jsonrpc":"2.0","id":"w1","method":"proxy/successor","params":{"method":"fs/read_text_file","params":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{}}`)
	exchange(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{`+meta+`,"requestId":"w1"}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{`+meta+`,"requestId":2}}`)
}
