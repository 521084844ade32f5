package conductor

import (
	"bytes"
	"slices"

	"github.com/acp-conductor/acp-conductor/internal/trick"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Lent lines. A line that goes on as it came (actRelayLine: a streamed
// session/update, most of all) is queued as the slice of its reader's read
// buffer it lies in (wire.LineChannel.Lend), not a copy. The one rule:
// nothing may read a lent line once its reader refills that buffer, and
// the reader refills it only after its reclaim. So
//   - a write from the reader's goroutine (put's writeNow, its burst's
//     flush) writes the line where it lies;
//   - another goroutine's non-blocking write (another reader's flush)
//     marks the outbox as writing lent lines, which reclaim waits out;
//   - the writer goroutine, whose write may block, takes copies;
//   - what a write leaves unwritten is copied back into the queue;
//   - reclaim copies what is still queued of the reader's lines.
// Copies are made under the outbox's lock, which reclaim takes too. A
// peer that is not a LineChannel, or a traced chain, gets copies as before.

// lending: relayed lines are lent (see trick.Lend).
var lending = trick.On(trick.Lend)

// newReader returns the reader of l's lines, which lends them where it
// can: where l reads a LineChannel, and the chain is not traced (a trace
// keeps what it records).
func (c *chain) newReader(l *link) *reader {
	rd := new(reader)
	rd.lc, _ = l.ch.(*wire.LineChannel)
	if rd.lc != nil && c.trace == nil && lending {
		rd.reclaim = rd.reclaimLent
	}
	return rd
}

// next reads the next line from ch, rd's channel: lent, where rd lends.
func (rd *reader) next(ch channel) ([]byte, error) {
	if rd.reclaim != nil {
		return rd.lc.Lend(rd.reclaim)
	}
	return ch.Recv()
}

// pass sends raw, the line of a notification that goes on as it came, to p:
// lent where rd lends it, and with its newline in one segment where it
// lies just past it.
func (rd *reader) pass(p *peer, raw []byte) {
	var lc *wire.LineChannel
	if rd != nil {
		lc = rd.lc
	}
	segs := [2][]byte{raw, newline}
	line := segs[:]
	if whole := lc.WithNewline(raw); whole != nil {
		line = segs[:1]
		line[0] = whole // one segment to queue and write
	}
	if !rd.lends(raw) {
		p.sendMessage(kindNotification, line...)
		return
	}
	o := p.link.Load().out
	if !o.putMessage(lc, line, kindNotification) {
		p.dropped()
		return
	}
	if !slices.Contains(rd.lent, o) {
		rd.lent = append(rd.lent, o)
	}
}

// lends reports whether b lies in rd's read buffer, lent.
func (rd *reader) lends(b []byte) bool {
	return rd != nil && rd.reclaim != nil && rd.lc.Lends(b)
}

// own returns line, copied if rd lent it.
func (rd *reader) own(line []byte) []byte {
	if rd.lends(line) {
		return bytes.Clone(line)
	}
	return line
}

// reclaimLent takes back every line rd lent, before its buffer is
// refilled: the LineChannel calls it (rd.reclaim).
func (rd *reader) reclaimLent() {
	for _, o := range rd.lent {
		o.reclaim(rd.lc)
	}
	clear(rd.lent)
	rd.lent = rd.lent[:0]
}

// reclaim leaves o holding none of lc's lines: it waits for a write of lent
// lines under way on another goroutine, and copies those still queued.
func (o *outbox) reclaim(lc *wire.LineChannel) {
	o.mu.Lock()
	for o.writingLent {
		o.lentWritten.Wait()
	}
	if i := slices.Index(o.lenders, lc); i >= 0 {
		for j, s := range o.queue {
			if lc.Lends(s) {
				o.queue[j] = bytes.Clone(s)
			}
		}
		o.lenders = slices.Delete(o.lenders, i, i+1)
	}
	o.mu.Unlock()
}

// ownLent replaces, in segs, every lent segment by a copy, with o.mu held.
func (o *outbox) ownLent(segs [][]byte) {
	for j, s := range segs {
		for _, lc := range o.lenders {
			if lc.Lends(s) {
				segs[j] = bytes.Clone(s)
				break
			}
		}
	}
}

// forgetLenders empties the list of lenders, with o.mu held, once the queue
// holds none of their lines: a restarted peer's channel is not kept.
func (o *outbox) forgetLenders() {
	clear(o.lenders)
	o.lenders = o.lenders[:0]
}
