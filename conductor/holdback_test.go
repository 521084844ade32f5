package conductor

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// pipeLink is a link writing into an os.Pipe, with its writer running, and
// the pipe's reading end. Closing the link's outbox ends the writer.
func pipeLink(t *testing.T, hb *holdback) (*link, *bufio.Scanner) {
	l, sc, _ := pipeLinkDone(t, hb)
	return l, sc
}

// pipeLinkDone is pipeLink, also returning a channel closed when the
// writer has ended.
func pipeLinkDone(t *testing.T, hb *holdback) (*link, *bufio.Scanner, <-chan struct{}) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	l := newLink(wire.NewLineChannel(r, w, 0), nil, hb, nil)
	if l.out.try == nil {
		t.Fatal("an os.Pipe should allow direct writes")
	}
	done := make(chan struct{})
	go func() { defer close(done); l.writeLoop(zapNop()) }()
	t.Cleanup(func() { l.out.close(); <-done; r.Close() })
	return l, bufio.NewScanner(r), done
}

// TestHoldbackJoinsABurst: lines put while a reader holds go out together,
// in one direct write, when it lets go; and in their order.
func TestHoldbackJoinsABurst(t *testing.T) {
	hb := new(holdback)
	l, sc := pipeLink(t, hb)
	var writes [][]string
	try := l.out.try
	l.out.try = func(segs [][]byte) ([][]byte, error) {
		var w []string
		for _, s := range segs {
			w = append(w, string(s))
		}
		writes = append(writes, w)
		return try(segs)
	}

	hb.hold()
	for i := range 3 {
		l.out.put(fmt.Appendf(nil, "{\"n\":%d}\n", i))
	}
	if len(writes) != 0 {
		t.Fatalf("wrote %q while held", writes)
	}
	hb.release()
	if len(writes) != 1 || len(writes[0]) != 3 {
		t.Fatalf("writes after release: %q, want one of 3 lines", writes)
	}
	l.out.put([]byte("{\"n\":3}\n")) // not held: written at once, alone
	if len(writes) != 2 || len(writes[1]) != 1 {
		t.Fatalf("writes after an unheld put: %q", writes)
	}
	for i := range 4 {
		if !sc.Scan() || sc.Text() != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("line %d: %q (%v)", i, sc.Text(), sc.Err())
		}
	}
}

// TestHoldbackStrandsNothing races holders letting go against puts from
// goroutines that hold and that do not: every line must come out, each
// sender's in its order, whoever flushes.
func TestHoldbackStrandsNothing(t *testing.T) {
	const senders, lines = 6, 300
	hb := new(holdback)
	l, sc := pipeLink(t, hb)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				holds := s%2 == 0 // even senders hold for runs of 5 lines
				if holds && i%5 == 0 {
					hb.hold()
				}
				l.out.put(fmt.Appendf(nil, "%d %d\n", s, i))
				if holds && i%5 == 4 {
					hb.release()
				}
			}
		}()
	}
	wg.Wait() // every put has returned: nothing may wait for another flush
	got := make(chan error, 1)
	go func() {
		next := make([]int, senders)
		for range senders * lines {
			if !sc.Scan() {
				got <- fmt.Errorf("output ended early: %v; got up to %v", sc.Err(), next)
				return
			}
			var s, i int
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &s, &i); err != nil || i != next[s] {
				got <- fmt.Errorf("line %q: want sender %d's line %d (%v)", sc.Text(), s, next[s], err)
				return
			}
			next[s]++
		}
		got <- nil
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lines were left held: no one flushed them")
	}
}

// TestHoldbackAddAfterLastRelease plays the race TestHoldbackStrandsNothing
// can only hope to hit: put saw a holder, and the holder let go (flushing
// an empty list) before put got its outbox on the list.
func TestHoldbackAddAfterLastRelease(t *testing.T) {
	hb := new(holdback)
	l, sc := pipeLink(t, hb)
	hb.hold()
	l.out.mu.Lock() // what put does once it has seen hb holding...
	l.out.queue = append(l.out.queue, []byte("{}\n"))
	l.out.held = true
	l.out.mu.Unlock()
	hb.release()  // ...the last holder lets go...
	hb.add(l.out) // ...and then put adds the outbox
	done := make(chan bool, 1)
	go func() { done <- sc.Scan() && sc.Text() == "{}" }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatalf("read %q (%v)", sc.Text(), sc.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the line stayed held")
	}
}
