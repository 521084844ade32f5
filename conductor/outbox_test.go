package conductor

import (
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestOutboxCloseDuringDirectWrite closes an outbox while a direct write
// holds it busy: the writer must still see the close and end, or Run could
// never return.
func TestOutboxCloseDuringDirectWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := newLink(wire.NewLineChannel(r, w, 0), nil, nil, nil)
	if l.out.try == nil {
		t.Fatal("an os.Pipe should allow direct writes")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	try := l.out.try
	l.out.try = func(segs [][]byte) ([][]byte, error) {
		close(entered)
		<-release // hold busy while the outbox closes
		return try(segs)
	}
	done := make(chan struct{})
	go func() { defer close(done); l.writeLoop(zapNop()) }()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); l.out.put([]byte("{}\n")) }()
	<-entered
	waitParked(t, "(*outbox).take") // the writer waits for work...
	l.out.close()                   // ...sees the close, but the write holds busy
	close(release)
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not end after the outbox closed during a direct write")
	}
	buf := make([]byte, 8)
	if n, _ := r.Read(buf); string(buf[:n]) != "{}\n" {
		t.Errorf("the direct write wrote %q", buf[:n])
	}
}

func zapNop() *zap.Logger { return zap.NewNop() }

// waitParked waits until some goroutine is blocked inside fn.
func waitParked(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "[select") {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("no goroutine parked in %s", fn)
}

// TestClientOutputWritesDirectly: the client's output is wrapped so that
// the conductor never closes it, and the wrapper must not hide the pipe
// from the direct-write path, or every message to the editor would wait
// for the writer goroutine to wake.
func TestClientOutputWritesDirectly(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if l := newLink(wire.NewLineChannel(r, nopCloser{w}, 0), nil, nil, nil); l.out.try == nil {
		t.Fatal("no direct writes to a pipe wrapped in nopCloser")
	}
}

// TestOutboxReusesQueue: lines written at once, one by one or held back
// for a burst, leave the outbox their queue to fill again, so that a
// stream of them allocates nothing in the outbox; a queue grown past
// keptSegments is let go.
func TestOutboxReusesQueue(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	go func() { _, _ = io.Copy(io.Discard, r) }() // never full
	hb := new(holdback)
	l := newLink(wire.NewLineChannel(r, w, 0), nil, hb, nil)
	line := []byte("{}\n")
	burst := func(n int) {
		hb.hold()
		for range n {
			l.out.put(line)
		}
		hb.release()
	}
	burst(16)
	if n := testing.AllocsPerRun(100, func() { l.out.put(line) }); n != 0 {
		t.Errorf("a line written at once allocates %v times in the outbox, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { burst(16) }); n != 0 {
		t.Errorf("a burst of 16 lines allocates %v times in the outbox, want 0", n)
	}
	burst(keptSegments + 1)
	l.out.mu.Lock()
	kept := cap(l.out.queue)
	l.out.mu.Unlock()
	if kept != 0 {
		t.Errorf("after a burst of %d lines the outbox keeps a queue of %d", keptSegments+1, kept)
	}
}
