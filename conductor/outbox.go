package conductor

import (
	"sync"
)

// An outbox is a peer's FIFO of encoded lines. Readers of other peers append
// to it without ever blocking; one writer goroutine drains it. It is
// unbounded on purpose: two peers that each block writing to the other
// through bounded queues could deadlock the chain, and every message in it
// has already been read in full (and bounded by MaxMessageBytes).
//
// Handing each message to the writer costs a goroutine wake-up per hop,
// which dominates the relay's latency; so when nothing is queued and no one
// is writing, put first tries to write the line itself, without blocking,
// and queues only what the peer would not take at once. One flag, busy,
// says someone (put or the writer) is writing, and keeps the order.
type outbox struct {
	mu     sync.Mutex
	queue  [][]byte
	closed bool
	busy   bool          // a write is in progress
	ready  chan struct{} // has a value when queue is non-empty or closed
	try    func([][]byte) ([][]byte, error)
}

func newOutbox() *outbox {
	return &outbox{ready: make(chan struct{}, 1)}
}

// put appends one line, given as segments that only together end in a
// newline, and reports whether the outbox still accepts messages.
func (o *outbox) put(segments ...[]byte) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	if o.try != nil && !o.busy && len(o.queue) == 0 {
		o.busy = true
		o.mu.Unlock()
		rest, err := o.try(segments) // never blocks
		o.mu.Lock()
		o.busy = false
		if err == nil && len(rest) == 0 && len(o.queue) == 0 && !o.closed {
			o.mu.Unlock()
			return true
		}
		// Otherwise the writer has work, or was closed while this write
		// held busy and went back to waiting: wake it either way.
		// What the peer did not take goes first; lines queued meanwhile
		// follow it. A write error is the writer's to report.
		o.queue = append(rest, o.queue...)
		o.mu.Unlock()
		o.signal()
		return true
	}
	o.queue = append(o.queue, segments...)
	o.mu.Unlock()
	o.signal()
	return true
}

// close stops accepting messages; take still returns what was queued.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

func (o *outbox) signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// take waits for queued lines and returns all of them, reusing spare as the
// next queue's storage; the caller writes them and then calls written. It
// returns no lines and false once the outbox is closed and empty, or when
// done is closed.
func (o *outbox) take(done <-chan struct{}, spare [][]byte) ([][]byte, bool) {
	for {
		o.mu.Lock()
		if len(o.queue) > 0 && !o.busy {
			lines := o.queue
			o.queue = spare[:0]
			o.busy = true
			o.mu.Unlock()
			return lines, true
		}
		closed := o.closed && len(o.queue) == 0 && !o.busy
		o.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-o.ready:
		case <-done:
			return nil, false
		}
	}
}

// written ends the writer's turn at writing.
func (o *outbox) written() {
	o.mu.Lock()
	o.busy = false
	more := len(o.queue) > 0
	o.mu.Unlock()
	if more {
		o.signal()
	}
}
