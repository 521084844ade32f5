package chaintest

import (
	"bufio"
	"fmt"
	"os"
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
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	lines := bufio.NewScanner(out)
	exchange := func(send, want string) {
		t.Helper()
		fmt.Fprintln(in, send)
		if !lines.Scan() {
			t.Fatalf("the proxy stopped: %v", lines.Err())
		}
		if got := lines.Text(); got != want {
			t.Errorf("sent\n\t%s\ngot\n\t%s\nwant\n\t%s", send, got, want)
		}
	}
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
