//go:build unix

package proxy

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// TestThrottleWaitsForTheWriter fills the outbox past its bound while
// nobody reads the pipe: the reader's throttle must not return until the
// writer has brought the queue back under half, and everything must come
// out once, in order.
func TestThrottleWaitsForTheWriter(t *testing.T) {
	o, ch, r, _ := pipeOutbox(t)
	startWriter(t, o, ch)
	line := append(bytes.Repeat([]byte("x"), 1000), '\n')
	n := 2 * queueBytes / len(line)
	for range n {
		if err := o.put(nil, line); err != nil {
			t.Fatal(err)
		}
	}
	left := make(chan int, 1)
	go func() {
		o.throttle(context.Background())
		o.mu.Lock()
		left <- o.queued + o.writing
		o.mu.Unlock()
	}()
	got, err := io.ReadAll(io.LimitReader(r, int64(n*len(line))))
	if err != nil || len(got) != n*len(line) || !bytes.Equal(got, bytes.Repeat(line, n)) {
		t.Fatalf("read %d bytes (%v), want %d lines of %d", len(got), err, n, len(line))
	}
	if q := <-left; q > queueBytes/2 {
		t.Errorf("throttle returned with %d bytes queued, more than half the bound (%d)", q, queueBytes/2)
	}
}

// TestThrottleNotBehindAPlace: a queue past its bound behind a handler's
// place cannot drain until the handler goes on, which may need what the
// reader would read next; throttle must not wait for it.
func TestThrottleNotBehindAPlace(t *testing.T) {
	o, ch, _, _ := pipeOutbox(t)
	startWriter(t, o, ch)
	h := &holder{}
	o.hold(h)
	line := append(bytes.Repeat([]byte("y"), 1000), '\n')
	for range 2 * queueBytes / len(line) {
		if err := o.put(nil, line); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o.throttle(ctx)
	if ctx.Err() != nil {
		t.Fatal("throttle waited behind a place")
	}
	// h keeps its place: released, the lines behind it would block the
	// writer on a pipe nobody reads, and the test could not end.
}
