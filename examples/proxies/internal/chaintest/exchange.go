package chaintest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// exchanger starts cmd, a proxy, on pipes. exchange sends it one line and
// checks the line it writes back; stop closes its input and waits for it.
func exchanger(t testing.TB, cmd *exec.Cmd) (exchange func(send, want string), stop func()) {
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
	lines := bufio.NewScanner(out)
	exchange = func(send, want string) {
		t.Helper()
		fmt.Fprintln(in, send)
		if !lines.Scan() {
			t.Fatalf("the proxy stopped: %v", lines.Err())
		}
		if got := lines.Text(); got != want {
			t.Errorf("sent\n\t%s\ngot\n\t%s\nwant\n\t%s", send, got, want)
		}
	}
	return exchange, func() { in.Close(); cmd.Wait() }
}
