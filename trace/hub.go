package trace

import (
	"sync"
	"unsafe"
)

// DefaultHistoryBytes bounds what a Hub keeps for viewers that connect
// later; beyond it the oldest events are forgotten.
const DefaultHistoryBytes = 64 << 20

// A Hub keeps the events of a running trace and streams new ones to live
// viewers. A viewer that cannot keep up is disconnected rather than ever
// holding up the recorder; it can load the page again.
//
// The history is bounded by the memory it holds, not by the events'
// bytes: a small event's copy is rounded up to the allocator's size class,
// and takes a slot of 24 bytes, so that a history of tiny events counted
// by their bytes alone held several times its bound. The slots come in
// blocks, so that few are held empty, and none after a large event has
// taken the place of many small ones.
type Hub struct {
	mu sync.Mutex
	// blocks holds the encoded events kept, without newlines: the oldest
	// at blocks[0][head], n of them in order.
	blocks   [][][]byte
	head, n  int
	first    int // the sequence number of the oldest
	size     int // the memory the history holds: each event's (held), and every slot and block
	maxBytes int
	subs     map[*subscriber]struct{}
	closed   bool
}

// slot is what holding one slice costs, in a block or in the list of
// blocks; a block holds blockSlots.
const (
	slot       = int(unsafe.Sizeof([]byte(nil)))
	blockSlots = 256
)

// held is the memory the copy of an event holds: its cap, the size class
// the allocator rounded it up to, but 16 bytes at least, what the smallest
// allocations take under the race detector (without it they share blocks
// of 16 bytes, which one of them kept holds).
func held(line []byte) int { return max(cap(line), 16) }

type subscriber struct {
	ch   chan []byte // closed when the hub drops the subscriber
	next int         // the sequence number of the next event sent on ch
}

// NewHub returns a hub keeping up to maxBytes of history (0 means
// DefaultHistoryBytes), counted as the memory it holds.
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
	at := h.head + h.n
	if at/blockSlots == len(h.blocks) {
		old := cap(h.blocks)
		h.blocks = append(h.blocks, make([][]byte, blockSlots))
		h.size += blockSlots*slot + (cap(h.blocks)-old)*slot
	}
	h.blocks[at/blockSlots][at%blockSlots] = line
	h.n++
	h.size += held(line)
	for h.size > h.maxBytes && h.n > 1 {
		h.drop()
	}
	for s := range h.subs {
		if s.next-len(s.ch) < h.first {
			// It has yet to take an event the history has forgotten,
			// which its queue alone keeps alive: with large events, up
			// to its whole buffer's worth beyond the history's bound.
			h.unsubscribe(s)
			continue
		}
		select {
		case s.ch <- line:
			s.next++
		default:
			h.unsubscribe(s) // too slow: it reloads and catches up
		}
	}
}

// unsubscribe drops a subscriber that fell behind, emptying its queue: a
// stream blocked writing to a viewer that stopped reading would otherwise
// keep what is queued alive. The stream ends when it next reads, and the
// viewer, reconnecting, catches up from the history.
func (h *Hub) unsubscribe(s *subscriber) {
	delete(h.subs, s)
	close(s.ch)
	for range s.ch {
	}
}

// drop forgets the oldest event, and its block once that is empty.
func (h *Hub) drop() {
	h.size -= held(h.blocks[0][h.head])
	h.blocks[0][h.head] = nil
	h.head++
	h.n--
	h.first++
	if h.head == blockSlots {
		// Moved down rather than resliced, so that the list's array
		// holds no forgotten block, and its cap says what it costs.
		last := len(h.blocks) - 1
		copy(h.blocks, h.blocks[1:])
		h.blocks[last] = nil
		h.blocks = h.blocks[:last]
		h.head = 0
		h.size -= blockSlots * slot
	}
}

// event returns the i-th event of the history, the oldest 0.
func (h *Hub) event(i int) []byte {
	at := h.head + i
	return h.blocks[at/blockSlots][at%blockSlots]
}

// Snapshot returns the events kept so far and the sequence number that
// follows them, for Subscribe.
func (h *Hub) Snapshot() (events [][]byte, next int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	events = make([][]byte, h.n)
	for i := range events {
		events[i] = h.event(i)
	}
	return events, h.first + h.n
}

// Subscribe returns a channel of the events from sequence number from on
// (those still kept), the sequence number of the first it will carry, and
// a function that ends the subscription. The channel is closed when the hub
// closes or drops a subscriber that fell behind by more than buffer events.
func (h *Hub) Subscribe(from, buffer int) (<-chan []byte, int, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from = min(max(from, h.first), h.first+h.n)
	backlog := h.n - (from - h.first)
	s := &subscriber{ch: make(chan []byte, buffer+backlog)}
	for i := from - h.first; i < h.n; i++ {
		s.ch <- h.event(i)
	}
	s.next = h.first + h.n
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
