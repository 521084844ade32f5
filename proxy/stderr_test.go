package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/proxy"
	"github.com/acp-conductor/acp-conductor/supervisor"
)

// A proxy that sets no Logger reports a handler's panic, with its stack, on
// its standard error, where a conductor logs it, and nothing of its ordinary
// traffic; its standard output holds only the protocol. Started by
// acp-conductor, which marks its components and logs each line of their
// stderr with the time, it leaves the time out. The test runs itself as
// that proxy.
func TestDefaultLoggerStderr(t *testing.T) {
	if os.Getenv("PROXY_TEST_STDERR_CHILD") != "" {
		p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{"_example/panic": panickingHandler}}
		if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	t.Run("alone", func(t *testing.T) { testDefaultLoggerStderr(t, "") })
	t.Run("component", func(t *testing.T) { testDefaultLoggerStderr(t, "1,1") })
}

func testDefaultLoggerStderr(t *testing.T, marker string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultLoggerStderr$")
	cmd.Env = append(os.Environ(), "PROXY_TEST_STDERR_CHILD=1", supervisor.ComponentEnv+"="+marker)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"method":"_example/panic"}` + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the proxy failed: %v\n%s", err, stderr.Bytes())
	}
	want := `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"proxy: the _example/panic handler panicked: the test's panic"}}` + "\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout.Bytes(), want)
	}
	log := stderr.String()
	if strings.Count(log, "\n") != 1 || !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "handler panicked") ||
		!strings.Contains(log, "the test's panic") || !strings.Contains(log, "proxy_test.panickingHandler") {
		t.Errorf("stderr is not one record of the panic with its stack:\n%s", log)
	}
	if hasTime := strings.HasPrefix(log, "time="); hasTime != (marker == "") {
		t.Errorf("with %s=%q, the record has a time: %v\n%s", supervisor.ComponentEnv, marker, hasTime, log)
	}
}

func panickingHandler(context.Context, *proxy.Request) (json.RawMessage, error) {
	panic("the test's panic")
}
