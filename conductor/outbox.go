package conductor

import (
	"sync"
)

// An outbox is a peer's FIFO of encoded lines. Readers of other peers append
// to it without ever blocking; one writer goroutine drains it. It is
// unbounded on purpose: two peers that each block writing to the other
// through bounded queues could deadlock the chain, and every message in it
// has already been read in full (and bounded by MaxMessageBytes).
type outbox struct {
	mu     sync.Mutex
	queue  [][]byte
	closed bool
	ready  chan struct{} // has a value when queue is non-empty or closed
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
// next queue's storage. It returns no lines and false once the outbox is
// closed and empty, or when done is closed.
func (o *outbox) take(done <-chan struct{}, spare [][]byte) ([][]byte, bool) {
	for {
		o.mu.Lock()
		if len(o.queue) > 0 {
			lines := o.queue
			o.queue = spare[:0]
			o.mu.Unlock()
			return lines, true
		}
		closed := o.closed
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
