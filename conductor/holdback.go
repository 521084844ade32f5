package conductor

import (
	"sync"
	"sync/atomic"
)

// A holdback batches writes under load. A peer that streams (an agent
// sending thousands of session/update notifications) fills the pipe faster
// than one message per read, and a reader then gets many lines from one
// read(2); writing each of them on its own would cost a write(2) per line
// per hop. So while any reader still has a whole line buffered, outboxes
// only queue what they are given and join this list; each reader, once it
// has handled the last line it had, flushes the list: every destination
// gets its lines in one write. A reader that handles one line at a time
// never holds anything back, so latency is what it was.
//
// Nothing waits on another reader's burst for longer than it takes to
// route the lines already read: holding never spans a read.
type holdback struct {
	holders atomic.Int32 // readers in the middle of a burst

	mu    sync.Mutex
	boxes []*outbox
	spare []*outbox
}

// holding reports whether puts should queue and wait for a flush. A nil
// holdback never holds.
func (h *holdback) holding() bool {
	return h != nil && h.holders.Load() > 0
}

// add puts o on the list of outboxes to flush. If the last holder let go
// before o got on the list, no one else would flush it, so add does.
func (h *holdback) add(o *outbox) {
	h.mu.Lock()
	h.boxes = append(h.boxes, o)
	h.mu.Unlock()
	if h.holders.Load() == 0 {
		h.flush()
	}
}

// hold starts a burst for one reader; release ends it.
func (h *holdback) hold() { h.holders.Add(1) }

func (h *holdback) release() {
	h.holders.Add(-1)
	h.flush()
}

// flush writes every outbox on the list. Flushes may run at once; each
// takes the list as it is and leaves an empty one.
func (h *holdback) flush() {
	h.mu.Lock()
	boxes := h.boxes
	h.boxes, h.spare = h.spare[:0], nil
	h.mu.Unlock()
	for _, o := range boxes {
		o.flush()
	}
	clear(boxes)
	h.mu.Lock()
	if h.spare == nil {
		h.spare = boxes[:0]
	}
	h.mu.Unlock()
}
