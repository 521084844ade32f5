//go:build unix

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// pipeOutbox returns an outbox writing to a real pipe, as a proxy's stdout
// made pollable is, with its non-blocking writer counting the writes it
// tries, and the pipe's reading end. The outbox's writer is not started.
func pipeOutbox(t *testing.T) (*outbox, *wire.LineChannel, *os.File, *atomic.Int64) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ch := wire.NewLineChannel(strings.NewReader(""), w, 0)
	t.Cleanup(func() {
		ch.Close()
		r.Close()
	})
	try := ch.TryWriter()
	if try == nil {
		t.Fatal("no non-blocking writer for an os.Pipe")
	}
	tries := new(atomic.Int64)
	o := newOutbox()
	o.try = func(segs [][]byte) ([][]byte, error) {
		tries.Add(1)
		return try(segs)
	}
	return o, ch, r, tries
}

// startWriter runs o's writer until the test ends, or until stop, which
// returns once the writer has.
func startWriter(t *testing.T, o *outbox, ch *wire.LineChannel) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, ch) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// lineReader reads lines from r on a goroutine, once start is closed.
func lineReader(t *testing.T, r *os.File, start <-chan struct{}) <-chan string {
	lines := make(chan string, 1<<16)
	go func() {
		defer close(lines)
		<-start
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

func next(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("output closed")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("nothing written")
		return ""
	}
}

func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s... (%d bytes)", s[:40], len(s))
	}
	return s
}

// With nothing queued and no one writing, put writes the line itself: no
// writer runs here.
func TestOutboxWritesInline(t *testing.T) {
	o, _, r, tries := pipeOutbox(t)
	for i := range 3 {
		if err := o.put(nil, fmt.Appendf(nil, "line %d\n", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(o.queue) != 0 || tries.Load() != 3 {
		t.Fatalf("%d lines queued, %d tried inline; want 0 and 3", len(o.queue), tries.Load())
	}
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "line 0\nline 1\nline 2\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

// A line the pipe takes only part of leaves the rest at the head of the
// queue. What follows queues behind it, places included, until the writer
// has written it: the fast path never runs while anything is queued or a
// write is in progress.
func TestOutboxFullPipe(t *testing.T) {
	o, ch, r, tries := pipeOutbox(t)
	big := append(bytes.Repeat([]byte("x"), 1<<20), '\n') // more than any pipe holds
	o.put(nil, big)
	if len(o.queue) != 1 || len(o.queue[0].line) >= len(big) || len(o.queue[0].line) == 0 {
		t.Fatalf("after a partial write, queue %d entries; want the rest of the line", len(o.queue))
	}
	h := new(holder)
	o.put(nil, []byte("second\n"))
	o.hold(h)
	o.put(nil, []byte("after place\n"))
	o.put(h, []byte("in place\n"))
	if n := tries.Load(); n != 1 {
		t.Fatalf("%d writes tried inline; want only the first", n)
	}

	start := make(chan struct{})
	lines := lineReader(t, r, start)
	stopWriter := startWriter(t, o, ch)
	close(start)
	if got := next(t, lines); got != string(big[:len(big)-1]) {
		t.Fatalf("first line %s; want the big line whole", short(got))
	}
	for _, want := range []string{"second", "in place"} {
		if got := next(t, lines); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// What was read was taken from the queue before it was written: the
	// place is now at the head, and the writer cannot take what is behind it.
	o.mu.Lock()
	heldUp := len(o.queue) == 2 && o.queue[0].place == h && string(o.queue[1].line) == "after place\n"
	o.mu.Unlock()
	if !heldUp {
		t.Fatalf("queue %v; want the held place, then the line after it", o.queue)
	}
	o.release(h)
	if got := next(t, lines); got != "after place" {
		t.Fatalf("got %q, want %q", got, "after place")
	}

	// Once the queue has drained and the writer is idle, put writes inline
	// again: everything has been read, and the writer, stopped, is idle for
	// good.
	stopWriter()
	o.mu.Lock()
	queued, busy := len(o.queue), o.busy
	o.mu.Unlock()
	if queued != 0 || busy {
		t.Fatalf("with everything written, %d entries queued, busy %v", queued, busy)
	}
	before := tries.Load()
	o.put(nil, []byte("inline again\n"))
	if tries.Load() != before+1 {
		t.Fatal("put did not write inline with an idle writer")
	}
	if got := next(t, lines); got != "inline again" {
		t.Fatalf("got %q", got)
	}
}

// What is put while put writes inline, lines and places, queues behind the
// write, and the writer leaves it there until the write is over: the rest of
// a partly written line goes out before it, whole.
func TestOutboxWriteInProgress(t *testing.T) {
	o, ch, r, _ := pipeOutbox(t)
	startWriter(t, o, ch)
	h := new(holder)
	try := o.try
	first := true
	o.try = func(segs [][]byte) ([][]byte, error) {
		rest, err := try(segs)
		if first {
			first = false
			done := make(chan struct{})
			go func() {
				defer close(done)
				o.put(nil, []byte("during\n"))
				o.hold(h)
				o.put(h, []byte("held\n"))
				o.put(nil, []byte("after place\n"))
			}()
			<-done
			// The writer, woken by those puts, must take nothing while the
			// write is in progress: ask take itself, as the writer would.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if lines, ok := o.take(ctx, nil); ok {
				t.Errorf("the writer would write %q during put's write", lines)
			}
		}
		return rest, err
	}
	big := append(bytes.Repeat([]byte("x"), 1<<20), '\n')
	o.put(nil, big)

	start := make(chan struct{})
	lines := lineReader(t, r, start)
	close(start)
	if got := next(t, lines); got != string(big[:len(big)-1]) {
		t.Fatalf("first line %s; want the big line whole", short(got))
	}
	for _, want := range []string{"during", "held"} {
		if got := next(t, lines); got != want {
			t.Fatalf("got %s, want %q", short(got), want)
		}
	}
	o.release(h)
	if got := next(t, lines); got != "after place" {
		t.Fatalf("got %s, want %q", short(got), "after place")
	}
}

// An outbox closed while put writes inline still has its writer write what
// that write leaves, and then stop.
func TestOutboxCloseDuringWrite(t *testing.T) {
	for _, size := range []int{10, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			o, ch, r, _ := pipeOutbox(t)
			try := o.try
			o.try = func(segs [][]byte) ([][]byte, error) {
				rest, err := try(segs)
				o.close() // wakes the writer while the write is in progress
				// Let it run, or not: whether it sees the outbox closed
				// before or after the write is over, the outcome is the same.
				runtime.Gosched()
				return rest, err
			}
			done := make(chan error, 1)
			go func() { done <- o.run(context.Background(), ch) }()
			line := append(bytes.Repeat([]byte("x"), size), '\n')
			o.put(nil, line)
			start := make(chan struct{})
			lines := lineReader(t, r, start)
			close(start)
			if got := next(t, lines); got != string(line[:size]) {
				t.Fatalf("got %s, want the line whole", short(got))
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the writer did not stop")
			}
		})
	}
}

// Handlers running concurrently hold their places while the reader goes on
// queueing and writing, through a pipe that fills up now and then, and that
// is drained now and then (the test waits for the handlers and reads
// everything put so far) so that puts find the queue empty and write inline:
// each handler's lines come out in its place, everything else in the order
// it was put.
func TestOutboxPlacesThroughPipe(t *testing.T) {
	var inline, total int64
	for round := range 20 {
		o, ch, r, tries := pipeOutbox(t)
		start := make(chan struct{})
		lines := lineReader(t, r, start)
		startWriter(t, o, ch)

		const steps, perHandler = 300, 3
		var want []string
		var wg sync.WaitGroup
		checked := 0
		drain := func() { // waits for the handlers, and reads and checks all put so far
			t.Helper()
			wg.Wait()
			for ; checked < len(want); checked++ {
				if got := next(t, lines); got != want[checked] {
					t.Fatalf("round %d, line %d: got %s, want %s", round, checked, short(got), short(want[checked]))
				}
			}
		}
		line := func(name string) []byte {
			pad := ""
			if rand.IntN(8) == 0 {
				pad = strings.Repeat(".", rand.IntN(40<<10)) // fills the pipe now and then
			}
			return []byte(name + pad + "\n")
		}
		for i := range steps {
			if rand.IntN(3) == 0 {
				// The reader hands a message to a handler.
				h := new(holder)
				o.hold(h)
				mine := make([][]byte, perHandler)
				for k := range mine {
					mine[k] = line(fmt.Sprintf("h%d.%d", i, k))
					want = append(want, string(mine[k][:len(mine[k])-1]))
				}
				wg.Go(func() {
					for _, l := range mine {
						for range rand.IntN(10) {
							runtime.Gosched() // handlers finish in orders of their own
						}
						o.put(h, l)
					}
					o.release(h)
				})
			} else {
				// The reader forwards a message.
				l := line(fmt.Sprintf("r%d", i))
				want = append(want, string(l[:len(l)-1]))
				o.put(nil, l)
			}
			switch {
			case i == 20:
				close(start) // the pipe was full; start draining it
			case i > 20 && rand.IntN(10) == 0:
				drain()
			}
		}
		drain()
		inline += tries.Load()
		total += int64(len(want))
	}
	t.Logf("%d lines, %d tried inline", total, inline)
	if inline == 0 {
		t.Error("no line was tried inline")
	}
}
