package proxy

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// An outbox is the proxy's one FIFO of outgoing lines, drained by one writer
// goroutine. Besides lines it holds places: a running handler keeps a place
// where its message arrived, and what it sends goes in before that place, so
// it leaves ahead of everything that arrived later. The writer stops at a
// place; the place goes once its handler waits for a peer, returns or
// detaches. A handler therefore delays the traffic behind it only while it
// runs, never while it waits for an answer that the traffic behind it might
// be needed to produce.
//
// The queue is unbounded so that the reader never waits for the writer: a
// proxy that stopped reading because its conductor was slow to read would
// deadlock a conductor that was waiting for it to read.
type outbox struct {
	mu     sync.Mutex
	queue  []entry
	closed bool  // nothing more will be queued
	err    error // why put fails: the write error, or ErrClosed
	ready  chan struct{}
}

// An entry is a line ending in a newline, or a place.
type entry struct {
	line  []byte
	place *holder
}

// A holder is the ordering state of one handler run. While it holds, it has
// at most one place in the queue; it has none otherwise. Its fields are
// guarded by the outbox's mutex.
type holder struct {
	waiting  int  // calls awaiting a response
	done     bool // the handler returned
	detached bool // the handler gave up ordering
}

// holds reports whether h keeps a place. A nil holder (for a call made
// outside any handler) never does.
func (h *holder) holds() bool {
	return h != nil && h.waiting == 0 && !h.done && !h.detached
}

func newOutbox() *outbox {
	return &outbox{ready: make(chan struct{}, 1)}
}

// hold queues a place for h.
func (o *outbox) hold(h *holder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.queue = append(o.queue, entry{place: h})
	}
}

// put queues line in h's place, or last if h holds no place.
func (o *outbox) put(h *holder, line []byte) error {
	return o.putWaiting(h, line, false)
}

// putWaiting is put, and if wait is set it also counts a call of h's as
// awaiting its response, in the same step: the request cannot be written, let
// alone answered, before h has let go of its place.
func (o *outbox) putWaiting(h *holder, line []byte, wait bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.err
	}
	i := len(o.queue)
	if h.holds() {
		for j, e := range o.queue {
			if e.place == h {
				i = j
				break
			}
		}
	}
	o.queue = slices.Insert(o.queue, i, entry{line: line})
	if wait {
		h.waiting++
		o.unplace(h)
	}
	o.signal()
	return nil
}

// resume counts one of h's calls as answered. A handler resumed by the
// response it waited for takes a new place at the end of the queue, so that
// what it does with the response is ordered as the response itself was; one
// resumed for any other reason goes on unordered.
func (o *outbox) resume(h *holder, place bool) {
	if h == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	h.waiting--
	if place && h.holds() && !o.closed {
		o.queue = append(o.queue, entry{place: h})
	}
	o.signal()
}

// release marks h's handler as returned.
func (o *outbox) release(h *holder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h.done = true
	o.unplace(h)
	o.signal()
}

// detach stops h from holding places.
func (o *outbox) detach(h *holder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h.detached = true
	o.unplace(h)
	o.signal()
}

// unplace removes the place of h, which no longer holds it. A place left
// behind would be taken up again if h resumed, and what h sent then would
// jump ahead of what arrived while it waited.
func (o *outbox) unplace(h *holder) {
	o.queue = slices.DeleteFunc(o.queue, func(e entry) bool { return e.place == h })
}

// close stops the outbox accepting lines; the writer still sends what was
// queued.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.closed, o.err = true, ErrClosed
	}
	o.signal()
}

func (o *outbox) signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// run is the writer. It returns nil once the outbox is closed and drained,
// or when ctx is done, and the error if a write fails.
func (o *outbox) run(ctx context.Context, ch *wire.LineChannel) error {
	for {
		lines, ok := o.take(ctx)
		if !ok {
			return nil
		}
		bufs := net.Buffers(lines)
		if err := ch.SendBuffers(&bufs); err != nil {
			o.mu.Lock()
			o.closed, o.err, o.queue = true, fmt.Errorf("proxy: writing: %w", err), nil
			o.mu.Unlock()
			return o.err
		}
	}
}

// take waits for lines the writer may send and returns them: everything up
// to the first place.
func (o *outbox) take(ctx context.Context) ([][]byte, bool) {
	for {
		o.mu.Lock()
		var lines [][]byte
		n := 0
		for ; n < len(o.queue) && o.queue[n].place == nil; n++ {
			lines = append(lines, o.queue[n].line)
		}
		clear(o.queue[:n])
		o.queue = o.queue[n:]
		done := o.closed && len(o.queue) == 0
		o.mu.Unlock()
		if len(lines) > 0 {
			return lines, true
		}
		if done {
			return nil, false
		}
		select {
		case <-o.ready:
		case <-ctx.Done():
			return nil, false
		}
	}
}
