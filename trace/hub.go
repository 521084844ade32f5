package trace

import (
	"sync"
)

// DefaultHistoryBytes bounds what a Hub keeps for viewers that connect
// later; beyond it the oldest events are forgotten.
const DefaultHistoryBytes = 64 << 20

// A Hub keeps the events of a running trace and streams new ones to live
// viewers. A viewer that cannot keep up is disconnected rather than ever
// holding up the recorder; it can load the page again.
type Hub struct {
	mu       sync.Mutex
	history  [][]byte // encoded events, oldest first, without newlines
	first    int      // the sequence number of history[0]
	size     int      // bytes in history
	maxBytes int
	subs     map[*subscriber]struct{}
	closed   bool
}

type subscriber struct {
	ch chan []byte // closed when the hub drops the subscriber
}

// NewHub returns a hub keeping up to maxBytes of history (0 means
// DefaultHistoryBytes).
func NewHub(maxBytes int) *Hub {
	if maxBytes <= 0 {
		maxBytes = DefaultHistoryBytes
	}
	return &Hub{maxBytes: maxBytes, subs: map[*subscriber]struct{}{}}
}

// publish adds one encoded event. It never blocks.
func (h *Hub) publish(line []byte) {
	line = append([]byte(nil), line...)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.history = append(h.history, line)
	h.size += len(line)
	for h.size > h.maxBytes && len(h.history) > 1 {
		h.size -= len(h.history[0])
		h.history[0] = nil
		h.history = h.history[1:]
		h.first++
	}
	for s := range h.subs {
		select {
		case s.ch <- line:
		default:
			delete(h.subs, s) // too slow: it reloads and catches up
			close(s.ch)
		}
	}
}

// Snapshot returns the events kept so far and the sequence number that
// follows them, for Subscribe.
func (h *Hub) Snapshot() (events [][]byte, next int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.history...), h.first + len(h.history)
}

// Subscribe returns a channel of the events from sequence number from on
// (those still kept), the sequence number of the first it will carry, and
// a function that ends the subscription. The channel is closed when the hub
// closes or drops a subscriber that fell behind by more than buffer events.
func (h *Hub) Subscribe(from, buffer int) (<-chan []byte, int, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from = min(max(from, h.first), h.first+len(h.history))
	backlog := h.history[min(from-h.first, len(h.history)):]
	s := &subscriber{ch: make(chan []byte, buffer+len(backlog))}
	for _, line := range backlog {
		s.ch <- line
	}
	if h.closed {
		close(s.ch)
		return s.ch, from, func() {}
	}
	h.subs[s] = struct{}{}
	return s.ch, from, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// Close ends every subscription; events published later are ignored.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}
