package conductor

import (
	"bytes"
	"testing"
)

// TestOutboxBound: an outbox past its bound says so, and counts in the
// chain's flow state, until its writer has brought it under half.
func TestOutboxBound(t *testing.T) {
	fl := newFlow()
	o := newOutbox(nil, fl) // no direct writes: everything queues
	line := append(bytes.Repeat([]byte("x"), 1000), '\n')
	n := 0
	for ; o.full() == nil; n++ {
		if n > 2*queueBytes/len(line) {
			t.Fatalf("%d lines of %d bytes queued and the outbox is not full", n, len(line))
		}
		o.put(line)
	}
	if n*len(line) <= queueBytes {
		t.Errorf("full after %d bytes, within the bound of %d", n*len(line), queueBytes)
	}
	drained := o.full()
	if fl.over.Load() != 1 {
		t.Errorf("flow counts %d full outboxes, want 1", fl.over.Load())
	}
	lines, _ := o.take(nil, nil)
	o.put(line) // queued while the write is under way: still counted
	select {
	case <-drained:
		t.Fatal("drained before anything was written")
	default:
	}
	o.written()
	<-drained
	if o.full() != nil || fl.over.Load() != 0 {
		t.Errorf("after the write: full %v, flow counts %d", o.full() != nil, fl.over.Load())
	}
	if len(lines) != n {
		t.Errorf("took %d lines, want %d", len(lines), n)
	}
}

// TestOutboxCloseReleases: closing a full outbox lets its waiters go.
func TestOutboxCloseReleases(t *testing.T) {
	fl := newFlow()
	o := newOutbox(nil, fl)
	o.put(make([]byte, queueBytes+1))
	drained := o.full()
	if drained == nil {
		t.Fatal("not full")
	}
	o.close()
	<-drained
	if fl.over.Load() != 0 {
		t.Errorf("flow counts %d full outboxes after close", fl.over.Load())
	}
}

// TestFlowWaitNoCycle: a reader may not wait for its own peer's outbox,
// nor close a cycle of waits longer than two peers; two peers waiting for
// each other are what a pipe between them would give.
func TestFlowWaitNoCycle(t *testing.T) {
	fl := newFlow()
	var ps []*peer
	for i := range 3 {
		ps = append(ps, newPeer("p", i, newLink(nil, nil, nil, fl), zapNop()))
	}
	a, b, c := ps[0], ps[1], ps[2]
	link := func(p *peer) *link { return p.link.Load() }
	if fl.wait(a, link(a), a) {
		t.Error("a waits for its own outbox")
	}
	if !fl.wait(a, link(a), b) {
		t.Fatal("a may not wait for b, which waits for nobody")
	}
	if !fl.wait(b, link(b), c) {
		t.Fatal("b may not wait for c")
	}
	if fl.wait(c, link(c), a) {
		t.Error("c waits for a, which waits for c through b")
	}
	if !fl.wait(c, link(c), b) {
		t.Error("c may not wait for b, which waits for c: a pair")
	}
	fl.done(link(c))
	fl.done(link(b))
	if !fl.wait(c, link(c), a) {
		t.Error("c may not wait for a once b no longer waits")
	}
}
