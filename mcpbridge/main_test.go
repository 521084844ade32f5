package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain doubles as the shim: a stdio declaration made by a bridge in
// these tests names the test binary itself, which an agent runs with the
// argument mcp-shim, so the shim is tested as a real process too.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == ShimCommand {
		os.Exit(shimMain())
	}
	if os.Getenv("ACP_TEST_BRIDGE_HOLD") != "" {
		holdBridge() // a conductor's bridge, until it is killed
	}
	goleak.VerifyTestMain(m)
}

// shimMain is what acp-conductor mcp-shim does.
func shimMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stdin := os.Stdin
	if syscall.SetNonblock(0, true) == nil {
		stdin = os.NewFile(0, "stdin")
	}
	err := RunShim(ctx, stdin, os.Stdout, os.Getenv(EnvSocket), os.Getenv(EnvToken))
	if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startBridge serves a new bridge with accept until the test ends, then
// checks that Serve returns cleanly and Close removes the socket directory.
func startBridge(t *testing.T, opts Options, accept func(context.Context, *Conn)) *Bridge {
	t.Helper()
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, accept) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return")
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket directory left behind: %v", err)
		}
	})
	return b
}

// parked returns an accept that hands each Conn to the test and keeps it
// open until Serve stops.
func parked() (func(context.Context, *Conn), chan *Conn) {
	conns := make(chan *Conn, 16)
	return func(ctx context.Context, c *Conn) {
		conns <- c
		<-ctx.Done()
	}, conns
}

// echo answers every request with a result naming the Conn's server and
// echoing the request's params, until Recv fails.
func echo(ctx context.Context, c *Conn) {
	for {
		msg, err := c.Recv()
		if err != nil {
			return
		}
		req, err := parseTestMsg(msg)
		if err != nil || req.ID == nil {
			continue
		}
		c.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"server":%q,"params":%s}}`, req.ID, c.ServerID, orNull(req.Params)))
	}
}

func next(t *testing.T, conns chan *Conn) *Conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
		return nil
	}
}

// recv returns the Conn's next message, failing the test after a while.
func recv(t *testing.T, c *Conn) ([]byte, error) {
	t.Helper()
	type result struct {
		msg []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		msg, err := c.Recv()
		ch <- result{msg, err}
	}()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-time.After(10 * time.Second):
		c.Close() // ends the Recv, so no goroutine outlives the test
		<-ch
		t.Fatal("Recv timed out")
		return nil, nil
	}
}

func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zap.DebugLevel)
	return zap.New(core), logs
}

// reach makes *hook, a count the package reports to tests, close the
// returned channel once the count is want, and unsets it when the test
// ends. Call it before the bridge starts, so that it is unset only once
// the bridge has stopped.
func reach[T comparable](t *testing.T, hook *func(T), want T) <-chan struct{} {
	reached := make(chan struct{})
	var once sync.Once
	*hook = func(n T) {
		if n == want {
			once.Do(func() { close(reached) })
		}
	}
	t.Cleanup(func() { *hook = nil })
	return reached
}

// waitClosed waits for ch to close, failing the test after a generous
// bound rather than hanging.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("never: %s", what)
	}
}

// observedWatch is observed, with a function that waits until cond, which
// reads the logs, holds: cond is checked again at each message logged.
func observedWatch() (*zap.Logger, *observer.ObservedLogs, func(t *testing.T, cond func() bool)) {
	core, logs := observer.New(zap.DebugLevel)
	var mu sync.Mutex
	changed := make(chan struct{})
	log := zap.New(core, zap.Hooks(func(zapcore.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		close(changed)
		changed = make(chan struct{})
		return nil
	}))
	wait := func(t *testing.T, cond func() bool) {
		t.Helper()
		bound := time.After(10 * time.Second)
		for {
			mu.Lock()
			ch := changed
			mu.Unlock()
			if cond() {
				return
			}
			select {
			case <-ch:
			case <-bound:
				t.Fatal("what the test waits for was never logged")
			}
		}
	}
	return log, logs, wait
}
