package proxy

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

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
// The queue is bounded (queueBytes, queueLines): once it is past its bound
// the reader stops reading (throttle) until it is back under half, so that
// a conductor that stops reading the proxy makes the proxy stop reading the
// conductor, and its memory stays bounded. The reader waits only while the
// writer can drain the queue without it: while a write is under way or a
// line, not a place, is next. Behind a place the queue waits for a handler,
// which may need a message only the reader can bring, so the reader goes on.
// A conductor, for its part, never waits for the proxy's input to drain
// while the proxy waits for it (see package conductor).
//
// Handing each line to the writer costs a goroutine wake-up, which dominates
// a proxy's latency; so when the queue is empty (and so holds no place) and
// no one is writing, put first tries to write the line itself, without
// blocking, and queues only what the conductor would not take at once. That
// cannot change the order: the line would have been the next one written.
// One flag, busy, says someone (put or the writer) is writing; while it is
// set, lines and places queue behind the write, and what it leaves unwritten
// goes back at the head of the queue.
type outbox struct {
	mu     sync.Mutex
	queue  []entry
	closed bool  // nothing more will be queued
	err    error // why put fails: the write error, or ErrClosed
	busy   bool  // a write is in progress
	ready  chan struct{}

	// try writes lines without blocking and returns what it could not
	// write; nil if the output cannot be written that way. seg is its
	// argument, owned by whoever set busy in put.
	try func([][]byte) ([][]byte, error)
	seg [1][]byte

	// For throttle: bytes and lines in the queue and in the write under
	// way, and the channel a waiting reader sleeps on (nil if none does).
	queued, writing, lines int
	wake                   chan struct{}
}

// The outbox's bound: past either, the reader stops reading.
const (
	queueBytes = 4 << 20
	queueLines = 8 << 10
)

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
	free     bool // it is no handler's: see Conn.free

	// For Conn.watchHolds: when h took the place it has, whether its
	// handler has been warned of, and what to name it by.
	since  time.Time
	warned bool
	from   Side
	method string
}

// holds reports whether h keeps a place. A nil holder (for what the proxy
// relays) and a free one never do.
func (h *holder) holds() bool {
	return h != nil && h.waiting == 0 && !h.done && !h.detached && !h.free
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
		h.since = time.Now()
	}
}

// put queues line in h's place, ahead of every place if h is free, or last
// if h holds no place.
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
	if o.try != nil && !o.busy && len(o.queue) == 0 {
		// Nothing is queued, so h has no place to keep, and no one is
		// writing: line is the next to go in any case.
		if wait && h != nil {
			h.waiting++
		}
		o.tryWrite(line)
		return nil
	}
	i := len(o.queue)
	if h.holds() || h != nil && h.free {
		// In h's place, or, for a free h, after what is free to go and
		// before what waits for a handler.
		for j, e := range o.queue {
			if e.place == h || h.free && e.place != nil {
				i = j
				break
			}
		}
	}
	o.queue = slices.Insert(o.queue, i, entry{line: line})
	o.queued += len(line)
	o.lines++
	if wait && h != nil {
		h.waiting++
		o.unplace(h)
	}
	o.signal()
	return nil
}

// tryWrite writes line at once if the output takes it without blocking, and
// queues what it does not take ahead of anything queued meanwhile. It is
// called with o.mu held and the queue empty, and returns with o.mu held; it
// lets go of the lock while it writes. A write error is left for the writer
// to meet again and report.
func (o *outbox) tryWrite(line []byte) {
	o.busy = true
	o.mu.Unlock()
	o.seg[0] = line
	rest, _ := o.try(o.seg[:]) // never blocks
	var left []byte
	if len(rest) > 0 {
		left = rest[0]
	}
	o.seg[0] = nil
	o.mu.Lock()
	o.busy = false
	if left == nil && len(o.queue) == 0 && !o.closed {
		return
	}
	if left != nil {
		o.queue = slices.Insert(o.queue, 0, entry{line: left})
		o.queued += len(left)
		o.lines++
	}
	o.signal()
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
		h.since = time.Now()
	}
	o.signal()
}

// stuck returns the holders not yet warned of that have held their places
// for d or longer at now, marking them warned of, and how long until the
// oldest place of the others will have been held that long (d if there is
// none). Places are taken at the end of the queue, so they are queued in
// the order of their since, and the scan stops at the first not overdue.
func (o *outbox) stuck(d time.Duration, now time.Time) (stuck []*holder, next time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next = d // a place taken from now on is d away
	if o.closed {
		return nil, next
	}
	for _, e := range o.queue {
		h := e.place
		if h == nil || h.warned {
			continue
		}
		if held := now.Sub(h.since); held < d {
			next = d - held
			break
		}
		h.warned = true
		stuck = append(stuck, h)
	}
	return stuck, next
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
	o.wakeReader()
}

// wakeReader lets a reader waiting in throttle look again. o.mu is held.
func (o *outbox) wakeReader() {
	if o.wake != nil {
		close(o.wake)
		o.wake = nil
	}
}

// throttle is called by the reader between messages: while the queue is
// past its bound and the writer is draining it, it waits, until the queue
// is under half its bound, the writer reaches a place, the outbox closes or
// ctx is done.
func (o *outbox) throttle(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	bytes, lines := queueBytes, queueLines
	for !o.closed && (o.queued+o.writing > bytes || o.lines > lines) &&
		(o.busy || len(o.queue) > 0 && o.queue[0].place == nil) {
		bytes, lines = queueBytes/2, queueLines/2 // once waiting, until under half
		if o.wake == nil {
			o.wake = make(chan struct{})
		}
		wake := o.wake
		o.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			o.mu.Lock()
			return
		}
		o.mu.Lock()
	}
}

// run is the writer. It returns nil once the outbox is closed and drained,
// or when ctx is done, and the error if a write fails.
func (o *outbox) run(ctx context.Context, ch *wire.LineChannel) error {
	var lines [][]byte
	var bufs net.Buffers // SendBuffers consumes it; one for every write
	for {
		clear(lines) // hold no written line past its write
		var ok bool
		if lines, ok = o.take(ctx, lines[:0]); !ok {
			return nil
		}
		bufs = lines
		err := ch.SendBuffers(&bufs)
		o.mu.Lock()
		o.busy = false
		o.writing = 0
		if err != nil {
			o.closed, o.err, o.queue = true, writeError{err}, nil
			o.queued, o.lines = 0, 0
			o.wakeReader()
			o.mu.Unlock()
			return o.err
		}
		o.wakeReader()
		more := len(o.queue) > 0
		o.mu.Unlock()
		if more {
			select {
			case o.ready <- struct{}{}:
			default:
			}
		}
	}
}

// take waits for lines the writer may send and returns them, appended to
// lines: everything up to the first place. It marks the outbox busy; the
// writer clears it once it has written them.
func (o *outbox) take(ctx context.Context, lines [][]byte) ([][]byte, bool) {
	for {
		o.mu.Lock()
		n := 0
		if !o.busy {
			for ; n < len(o.queue) && o.queue[n].place == nil; n++ {
				lines = append(lines, o.queue[n].line)
				o.queued -= len(o.queue[n].line)
				o.writing += len(o.queue[n].line)
			}
			o.lines -= n
			// What is left moves to the front, so that the queue's storage
			// serves again instead of being used up from its start.
			o.queue = slices.Delete(o.queue, 0, n)
			o.busy = n > 0
		}
		done := o.closed && len(o.queue) == 0 && !o.busy
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
