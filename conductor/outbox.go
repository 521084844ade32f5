package conductor

import (
	"bytes"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
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
// says someone (put, a flush or the writer) is writing, and keeps the order.
//
// While some reader is working through a burst of lines it read at once
// (see holdback), put only queues, and the outbox is flushed, all its lines
// in one system call, when the burst is done.
type outbox struct {
	mu     sync.Mutex
	queue  [][]byte
	closed bool
	busy   bool          // a write is in progress
	held   bool          // on hb's list, waiting for a flush
	ready  chan struct{} // has a value when queue is non-empty or closed
	try    func([][]byte) ([][]byte, error)
	hb     *holdback // nil: never hold lines back

	// Lent lines (lend.go): the channels whose read buffers the queue
	// may hold lines of, and whether a write of them is under way.
	lenders     []*wire.LineChannel
	writingLent bool
	lentWritten *sync.Cond // on mu: writingLent went false

	// What it holds, for flow control (flow.go): in the queue, and taken
	// by a write still under way.
	queued, writing size
	fl              *flow         // nil: unbounded
	drained         chan struct{} // non-nil while past the bound; closed when back under half

	// A restarted proxy's gate (see hold): while gate is set, requests and
	// notifications wait in gated, owned, until open; answers go on.
	gate      bool
	gated     [][]byte
	gatedSize size
	// In a traced chain, the records of the messages gated holds, in
	// order (see chain.sendTraced): made as the gate lets them go.
	gatedTrace []tracedSend
	// recording is held by a traced put (putTraced) across its record,
	// which must come before the message is queued, and by open and
	// close, which it must not cross. mu is not held across a record:
	// one the recorder is slow to take would hold up the writer and every
	// reader that asks, for flow control, what the outbox holds.
	recording sync.Mutex

	// The client's seal (see seal): notifications are refused and counted
	// in sealDrops.
	sealed    bool
	sealDrops *atomic.Int64
}

// A kind is what a line put on an outbox is: an answer goes on through a
// gate and a seal; a request waits at a gate; a notification waits at a
// gate and is refused by a seal.
type kind uint8

const (
	kindAnswer kind = iota
	kindRequest
	kindNotification
)

// kindOf is the kind of a request (id non-nil) or notification.
func kindOf(id []byte) kind {
	if id == nil {
		return kindNotification
	}
	return kindRequest
}

// size is an amount of queued output.
type size struct{ bytes, segs int }

func (s size) add(segs [][]byte) size {
	for _, b := range segs {
		s.bytes += len(b)
	}
	s.segs += len(segs)
	return s
}

func newOutbox(hb *holdback, fl *flow) *outbox {
	o := &outbox{ready: make(chan struct{}, 1), hb: hb, fl: fl}
	o.lentWritten = sync.NewCond(&o.mu)
	return o
}

// full returns, while the outbox is past its bound, a channel closed when
// it is back under half of it (or closed); nil otherwise.
func (o *outbox) full() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.drained
}

// replaying reports whether a gate holds what is sent to the outbox
// (hold) while the process it drains to is replayed its initializes: it
// has started (attach), and is not yet restored (open).
func (o *outbox) replaying() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gate && o.try != nil
}

// heldBytes returns how many bytes the outbox holds, queued or being written.
func (o *outbox) heldBytes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued.bytes + o.writing.bytes
}

// account updates the flow-control state after the queue or the write in
// progress changed, with o.mu held. The bound is checked when lines come
// in, the low mark when they have gone out.
func (o *outbox) account(in bool) {
	if o.fl == nil {
		return
	}
	bytes := o.queued.bytes + o.writing.bytes + o.gatedSize.bytes
	segs := o.queued.segs + o.writing.segs + o.gatedSize.segs
	switch {
	case in && o.drained == nil && !o.closed && (bytes > queueBytes || segs > queueSegments):
		o.drained = make(chan struct{})
		o.fl.over.Add(1)
	case o.drained != nil && (o.closed || bytes <= queueBytes/2 && segs <= queueSegments/2):
		close(o.drained)
		o.drained = nil
		o.fl.over.Add(-1)
	}
}

// put appends one line, given as segments that only together end in a
// newline, and reports whether the outbox still accepts messages.
func (o *outbox) put(segments ...[]byte) bool {
	return o.putFrom(nil, segments, kindAnswer)
}

// putMessage is put for a request or notification (k), which a gate
// holds (see hold) and, a notification, a seal refuses; lc is as for
// putFrom.
func (o *outbox) putMessage(lc *wire.LineChannel, segments [][]byte, k kind) bool {
	return o.putFrom(lc, segments, k)
}

// putTraced is putMessage in a traced chain: s records the message (k)
// as sent, when it is: at once, or when the gate lets it go; never if it
// is dropped, the outbox closed or sealed first (see chain.sendTraced).
func (o *outbox) putTraced(segments [][]byte, k kind, s *tracedSend) bool {
	o.recording.Lock()
	defer o.recording.Unlock()
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return false
	case o.sealed && k == kindNotification:
		o.mu.Unlock()
		o.sealDrops.Add(1)
		return true
	case k != kindAnswer && o.gate:
		o.gatedTrace = append(o.gatedTrace, *s)
		o.holdGated(segments)
		return true
	}
	o.mu.Unlock()
	// None can change before the put: close, seal and open wait for
	// recording, the gate being set only before the outbox is anyone's.
	s.record() // before it is queued, so before any answer to it
	return o.putFrom(nil, segments, k)
}

// seal refuses, from now on, the notifications put on o, counting each
// in drops. The shutdown seals the client's outbox before it queues the
// errors of the client's requests: under o's lock, so that a
// notification routed before the seal (topology.sealed) but put after it
// cannot follow those errors, whatever the goroutine that routed it.
func (o *outbox) seal(drops *atomic.Int64) {
	o.recording.Lock()
	defer o.recording.Unlock()
	o.mu.Lock()
	o.sealed, o.sealDrops = true, drops
	o.mu.Unlock()
}

// hold sets the gate: from now on requests and notifications (putMessage)
// wait until open, while answers (put) go on. A restarted proxy is sent
// its replayed initializes first, and a proxy written naively expects
// their answers, or the answers to what it asks while initializing,
// before anything else. It is set before the outbox is anyone's.
func (o *outbox) hold() {
	o.mu.Lock()
	o.gate = true
	o.mu.Unlock()
}

// open lifts the gate: what it held follows what is queued, in order.
func (o *outbox) open() {
	o.recording.Lock()
	defer o.recording.Unlock()
	o.mu.Lock()
	if !o.gate {
		o.mu.Unlock()
		return
	}
	records := o.gatedTrace
	o.gatedTrace = nil
	send := len(o.gated) > 0 && !o.closed
	o.mu.Unlock()
	if send {
		// Recorded before they are queued, so before any answer to them.
		// What the gate takes meanwhile follows them; close waits.
		for i := range records {
			records[i].record()
		}
	}
	o.mu.Lock()
	o.gate = false
	if len(o.gated) == 0 || o.closed {
		o.gated, o.gatedSize = nil, size{}
		o.account(false)
		o.mu.Unlock()
		return
	}
	o.queue = append(o.queue, o.gated...)
	o.queued = o.queued.add(o.gated)
	o.gated, o.gatedSize = nil, size{}
	if o.busy || o.try == nil {
		o.mu.Unlock()
		o.signal()
		return
	}
	o.writeNow()
}

// holdGated keeps segments behind the gate, with o.mu held and released.
func (o *outbox) holdGated(segments [][]byte) {
	// Owned: it may wait past the refill of the buffer it was read into.
	for _, s := range segments {
		o.gated = append(o.gated, bytes.Clone(s))
	}
	o.gatedSize = o.gatedSize.add(segments)
	o.account(true)
	o.mu.Unlock()
}

// putFrom is put for segments that lie in lc's read buffer, lent, or none
// if lc is nil; k says whether a gate holds them (a request or
// notification: putMessage) and a seal refuses them (a notification),
// which is taken, as the seal's drop, not reported as closed.
func (o *outbox) putFrom(lc *wire.LineChannel, segments [][]byte, k kind) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	if o.sealed && k == kindNotification {
		o.mu.Unlock()
		o.sealDrops.Add(1)
		return true
	}
	if k != kindAnswer && o.gate {
		o.holdGated(segments)
		return true
	}
	if lc != nil && !slices.Contains(o.lenders, lc) {
		o.lenders = append(o.lenders, lc)
	}
	o.queue = append(o.queue, segments...)
	o.queued = o.queued.add(segments)
	o.account(true)
	switch {
	case o.busy || o.try == nil:
		o.mu.Unlock()
		o.signal()
	case o.hb.holding():
		if !o.held {
			o.held = true
			o.mu.Unlock()
			o.hb.add(o)
			return true
		}
		o.mu.Unlock()
	default:
		o.writeNow()
	}
	return true
}

// flush writes what put held back, unless a write is already under way:
// its end hands the queue to the writer. A closed outbox's writer takes
// held lines on its own.
func (o *outbox) flush() {
	o.mu.Lock()
	o.held = false
	if o.busy || len(o.queue) == 0 || o.closed {
		o.mu.Unlock()
		return
	}
	o.writeNow()
}

// writeNow writes the queue without blocking, with o.mu held and released.
// What the peer does not take at once, and what is queued meanwhile, is
// left to the writer goroutine.
func (o *outbox) writeNow() {
	segs := o.queue
	o.queue = nil
	o.busy = true
	o.writing, o.queued = o.queued, size{}
	lent := len(o.lenders) > 0
	o.writingLent = lent
	o.mu.Unlock()
	large := largeBytes(segs)
	rest, err := o.try(segs) // never blocks
	written := err == nil && len(rest) == 0
	if written {
		clear(segs) // hold no written value past its write
	}
	o.mu.Lock()
	o.busy = false
	o.writing = size{}
	if lent {
		o.ownLent(rest) // left for the writer, whose write may block
		o.writingLent = false
		o.lentWritten.Broadcast()
		if written && len(o.queue) == 0 {
			o.forgetLenders()
		}
	}
	if written && len(o.queue) == 0 && !o.closed {
		if o.queue == nil && cap(segs) <= keptSegments {
			o.queue = segs[:0] // the next burst's, without growing it anew
		}
		o.account(false)
		o.mu.Unlock()
		wroteLarge(large)
		return
	}
	// Otherwise the writer has work, or was closed while this write held
	// busy and went back to waiting: wake it either way. What the peer did
	// not take goes first; lines queued meanwhile follow it. A write error
	// is the writer's to report.
	o.queue = append(rest, o.queue...)
	o.queued = o.queued.add(rest)
	o.account(false)
	o.mu.Unlock()
	o.signal()
}

// attach gives the outbox the non-blocking writer of the channel it now
// drains to: a restarted component's outbox queues while it is started.
func (o *outbox) attach(try func([][]byte) ([][]byte, error)) {
	o.mu.Lock()
	o.try = try
	o.mu.Unlock()
}

// close stops accepting messages; take still returns what was queued,
// but not what a gate held: the calls among it are failed with the
// process it waited for, or by the shutdown.
func (o *outbox) close() {
	o.recording.Lock() // not while a traced put or open records
	o.mu.Lock()
	o.closed = true
	o.gated, o.gatedSize, o.gatedTrace = nil, size{}, nil
	o.account(false)
	o.mu.Unlock()
	o.recording.Unlock()
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
// done is closed. Lines held back for a flush wait for it.
func (o *outbox) take(done <-chan struct{}, spare [][]byte) ([][]byte, bool) {
	for {
		o.mu.Lock()
		if len(o.queue) > 0 && !o.busy && (!o.held || o.closed) {
			if len(o.lenders) > 0 {
				o.ownLent(o.queue) // the writer's write may block
				o.forgetLenders()
			}
			lines := o.queue
			o.queue = spare[:0]
			o.busy = true
			o.writing, o.queued = o.queued, size{}
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
	o.writing = size{}
	o.account(false)
	more := len(o.queue) > 0
	o.mu.Unlock()
	if more {
		o.signal()
	}
}

// writeLoop drains l's outbox to its channel until the outbox is closed,
// then closes the channel's writing side. Small lines queued together are
// joined and written with one system call; large segments are written from
// where they are, never copied.
func (l *link) writeLoop(log *zap.Logger) {
	defer l.ch.Close()
	var spare [][]byte
	var out net.Buffers
	joined := make([]byte, 0, coalesceBytes)
	for {
		segs, ok := l.out.take(nil, spare)
		if !ok {
			return
		}
		out, joined = out[:0], joined[:0]
		start := 0 // of the run of small segments in joined
		for _, seg := range segs {
			if len(seg) >= largeValue || len(joined)+len(seg) > cap(joined) {
				if len(joined) > start {
					out = append(out, joined[start:])
					start = len(joined)
				}
				if len(seg) >= largeValue || len(seg) > cap(joined)-len(joined) {
					out = append(out, seg)
					continue
				}
			}
			joined = append(joined, seg...)
		}
		if len(joined) > start {
			out = append(out, joined[start:])
		}
		bufs := out
		large := largeBytes(out)
		err := l.ch.SendBuffers(&bufs)
		l.out.written()
		if err != nil {
			log.Debug("write failed", zap.Error(err))
			l.out.close()
			return // the reader side reports the peer's end
		}
		clear(segs)
		clear(out) // hold no written value past its write
		spare = segs
		wroteLarge(large)
	}
}

// keptSegments bounds the queue an outbox keeps for reuse once written.
const keptSegments = 1024

// coalesceBytes bounds how many bytes of small lines one write joins.
const coalesceBytes = 64 << 10
