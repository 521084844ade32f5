package conductor

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// fake returns a component that runs this test binary in the given role,
// recording what it receives under dir/name.txt.
func fake(t *testing.T, dir, name, role string, env ...string) Component {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := Component{Name: name, Command: exe, Env: map[string]string{
		"ACP_TEST_ROLE":       role,
		"GORACE":              "atexit_sleep_ms=0",
		"ACP_TEST_TRANSCRIPT": filepath.Join(dir, name+".txt"),
	}}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env[k] = v
	}
	return c
}

// editor plays the client side of a running conductor.
type editor struct {
	t    *testing.T
	in   *io.PipeWriter // the conductor's stdin
	out  *io.PipeReader // its stdout
	ch   *wire.LineChannel
	done chan error
	seen []string // every line received, in order
}

func startChain(t *testing.T, cfg Config) *editor {
	t.Helper()
	return startChainCtx(t, context.Background(), cfg)
}

// startChainCtx is startChain with a context for Run.
func startChainCtx(t *testing.T, ctx context.Context, cfg Config) *editor {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	e := &editor{t: t, in: inW, out: outR, ch: wire.NewLineChannel(outR, inW, 0), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		err := Run(ctx, cfg, inR, outW)
		outW.Close()
		e.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		// Read what is left, as a live editor would: a write to the pipe
		// waits for a reader, and the shutdown gives an editor that stops
		// reading until a second past the grace period (3s by default).
		// The pipe's reads may run beside a reader the test left behind.
		go io.Copy(io.Discard, outR)
		select {
		case <-e.done:
		case <-time.After(20 * time.Second):
			t.Error("conductor did not stop")
		}
	})
	return e
}

func (e *editor) send(line string) {
	e.t.Helper()
	if err := e.ch.Send([]byte(line)); err != nil {
		e.t.Fatalf("send: %v", err)
	}
}

// recv returns the next line from the conductor, failing the test after a
// generous bound rather than hanging.
func (e *editor) recv() string {
	e.t.Helper()
	type result struct {
		line []byte
		err  error
	}
	c := make(chan result, 1)
	go func() { l, err := e.ch.Recv(); c <- result{l, err} }()
	select {
	case r := <-c:
		if r.err != nil {
			e.t.Fatalf("recv: %v", r.err)
		}
		e.seen = append(e.seen, string(r.line))
		return string(r.line)
	case <-time.After(20 * time.Second):
		e.t.Fatal("no message from the conductor")
		return ""
	}
}

func (e *editor) recvMsg() *wire.Message {
	e.t.Helper()
	m, err := wire.Parse([]byte(e.recv()))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// close ends the editor's input and waits for Run's result, reading (and
// dropping) whatever the conductor still sends, as a live editor would.
func (e *editor) close() error {
	e.in.Close()
	go func() {
		for {
			if _, err := e.ch.Recv(); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-e.done:
		e.done <- err
		return err
	case <-time.After(20 * time.Second):
		e.t.Fatal("conductor did not stop after stdin closed")
		return nil
	}
}

// updateText returns the text of a session/update's content chunk.
func updateText(m *wire.Message) string {
	var u struct {
		Update struct {
			Content struct{ Text string } `json:"content"`
		} `json:"update"`
	}
	json.Unmarshal(m.Params, &u)
	return u.Update.Content.Text
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A logWatch lets a test wait for a chain to log a message, the
// conductor's own or a line of a component's stderr, which the conductor
// logs as it reads it.
type logWatch struct {
	mu      sync.Mutex
	seen    []string
	changed chan struct{} // closed and replaced at each message
}

// watchLogs returns a logger for a chain, which logs to t as usual, and
// the watch on what it logs.
func watchLogs(t *testing.T) (*zap.Logger, *logWatch) {
	w := &logWatch{changed: make(chan struct{})}
	return zaptest.NewLogger(t, zaptest.WrapOptions(zap.Hooks(w.add))), w
}

func (w *logWatch) add(e zapcore.Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, e.Message)
	close(w.changed)
	w.changed = make(chan struct{})
	return nil
}

// logged returns the messages logged so far that contain s.
func (w *logWatch) logged(s string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var found []string
	for _, m := range w.seen {
		if strings.Contains(m, s) {
			found = append(found, m)
		}
	}
	return found
}

// wait returns once a message containing s has been logged, failing the
// test after a generous bound rather than hanging.
func (w *logWatch) wait(t *testing.T, s string) {
	t.Helper()
	if !w.waitFor(s) {
		t.Fatalf("%q was never logged", s)
	}
}

// waitFor is wait for a hook, off the test's goroutine, which may not
// fail the test: it reports false when the bound passes first. Given
// several strings, it returns at the first message containing any.
func (w *logWatch) waitFor(s ...string) bool {
	bound := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		changed := w.changed
		for _, m := range w.seen {
			for _, s := range s {
				if strings.Contains(m, s) {
					w.mu.Unlock()
					return true
				}
			}
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-bound:
			return false
		}
	}
}
