//go:build unix

package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A proxy process given Stdin and Stdout, on the blocking pipes a conductor
// starts it with, passes messages on and stops when its context ends, though
// its input stays open. The test runs itself as that process.
func TestStdio(t *testing.T) {
	if os.Getenv("PROXY_TEST_STDIO_CHILD") != "" {
		stdioChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStdio$")
	cmd.Env = append(os.Environ(), "PROXY_TEST_STDIO_CHILD=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var got []string
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		want := []string{
			`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"}}}`,
			`{"jsonrpc":"2.0","method":"_example/note","params":{"n":1}}`,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			done <- fmt.Errorf("proxy sent %q, want %q", got, want)
			return
		}
		done <- cmd.Wait()
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_example/note","params":{"n":1}}}`,
		`{"jsonrpc":"2.0","method":"_example/stop"}`,
	} {
		if _, err := fmt.Fprintln(in, line); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		t.Fatal("the proxy did not stop")
	}
}

// stdioChild is the proxy process of TestStdio. It reports failures on
// stderr and in its exit status; its stdout is the proxy's.
func stdioChild() {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
		os.Exit(1)
	}
	in, out := proxy.Stdin(), proxy.Stdout()
	if in == os.Stdin || out == os.Stdout || proxy.Stdout() != out {
		fail("Stdin and Stdout did not make new files of the pipes, once")
	}
	for _, fd := range []int{0, 1} {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK == 0 {
			fail("descriptor %d not in non-blocking mode", fd)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{
		"_example/stop": func(context.Context, *proxy.Request) (json.RawMessage, error) {
			// Once the reader waits in the poller for more input, which
			// never comes: the context must end that wait.
			go func() {
				for !waitingInPoller() {
					runtime.Gosched()
				}
				cancel()
			}()
			return nil, nil
		},
	}}
	if err := p.Serve(ctx, in, out); !errors.Is(err, context.Canceled) {
		fail("Serve returned %v, want context.Canceled", err)
	}
	os.Exit(0)
}

// waitingInPoller reports whether a goroutine of this process is parked in
// Go's poller, as the proxy's reader is once its input has nothing more.
func waitingInPoller() bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("internal/poll.runtime_pollWait"))
}
