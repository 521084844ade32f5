package conductor

import (
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Flow control. What is queued for a peer is bounded (queueBytes,
// queueSegments): once an outbox is past its bound, the chain's readers
// stop reading, after the line or burst in hand, until it is back under
// half. A source that keeps writing then blocks on its own pipe, as it would
// with no conductor in between, and the conductor's memory stays bounded
// whoever stops reading. Nothing is dropped or reordered: put never refuses
// a line for being over the bound; the bound is kept by not reading more.
//
// The rule that keeps this from deadlocking where a direct pipe would not:
// a reader waits only for an outbox that can drain without it, or that
// could not drain between the same two peers on a pipe of their own. An
// outbox drains when its peer reads, and a peer stops reading (when it
// stops for the conductor's sake at all) because its own output is
// blocked: its reader here is waiting. So the waits form a graph, reader →
// peer it waits for → that peer's reader → …. Two peers waiting for each
// other are two peers that each write without reading while the other
// does: an editor that writes requests and reads nothing, say, against
// the agent answering them. Joined by a pipe they would block each other
// just the same, so that wait stands, and the editor blocks on its own
// pipe. Any longer cycle is one the conductor would have made, and a
// reader never closes one: it goes on reading instead, and that outbox
// goes past its bound until the cycle is gone. Nor does a reader wait for
// its own peer's outbox (the answers the conductor makes itself, which a
// peer that stops reading while it cannot write would never take).
//
// A pair with a proxy in it is not such a pair. A proxy's one pipe carries
// both directions, so a proxy blocked writing toward the agent stops
// relaying the agent's updates to the editor too: a single-threaded agent
// streaming updates while a large prompt waits for it, with a proxy in
// between, would block for ever where the same editor and agent alone
// would not. So a proxy's reader does not wait for a peer whose reader
// waits for the proxy: it goes on reading, which lets the proxy read
// again, and wakes if the pair forms while it already waits. What it
// reads is what the proxy relays, so it goes on only until that outbox
// has grown by queueBytes since; past that (an editor that never reads,
// whose answers the proxy relays) the wait stands as for any pair. So a
// proxy flooded from both sides or a response that must get through to
// unblock a peer ends either in a peer that does not read of its own
// accord or in a reader that goes on. Readers wait for any peer's full
// outbox, not only for the ones they fed: every message in an ACP chain
// crosses every hop, so this costs nothing, and it needs no bookkeeping
// per message.
//
// A restarted proxy's outbox whose gate is closed (outbox.hold) drains
// only once the proxy's replayed initializes are answered, and those
// answers come from its successors: while its new process is replayed
// them, their readers do not wait for it, or the flood that filled it
// would hold everything until the initialize timeout failed the proxy.
// What they add to it meanwhile is bounded by that timeout; during the
// back-off before the process starts, they wait as for any outbox.
//
// A bridged MCP connection is a peer too, bounded the same way, but one
// peer feeds it and it feeds one: the peer that owns its server. Only the
// owner's reader waits for its outbox, and its reader waits only for the
// owner's. The owner's other output waits with its MCP output, since both
// come down one pipe, as they would if the agent spoke MCP-over-ACP
// itself. The connection's client runs in the agent's process, and a
// process blocked on one of its outputs reads none of its inputs, so in the
// graph of waits the connection and the agent are one node: the agent's
// reader never waits for its own connections' outboxes, nor they for the
// agent's, and a wait through the agent follows the waits of all its
// readers.
const (
	queueBytes    = 4 << 20 // queued for one peer before readers stop
	queueSegments = 8 << 10 // likewise in segments, which cost memory of their own
)

// flow is the chain's flow-control state.
type flow struct {
	over atomic.Int32 // outboxes past their bound; readers check it per line

	mu      sync.Mutex // guards every link's waitingOn, and bridged
	bridged []*peer    // the bridged MCP connections open

	releaseOnce sync.Once
	released    chan struct{} // closed when no reader may wait any more
}

func newFlow() *flow { return &flow{released: make(chan struct{})} }

// release lets every waiting reader go on, for good: the chain is stopping,
// and what is still read must reach its end.
func (f *flow) release() { f.releaseOnce.Do(func() { close(f.released) }) }

// throttle is called by p's reader, on link l, between lines (never in the
// middle of a burst, whose lines are held back until it ends: see
// holdback): while some other peer's outbox is past its bound, it waits.
func (c *chain) throttle(p *peer, l *link) {
	if c.flow.over.Load() == 0 {
		l.pairWith = nil
		return
	}
	relaying := p.pos > 0 && c.topo.Load().role(p.pos) == roleProxy
	var skipped []*peer // would close a cycle: not waited for this time
	for {
		q, drained := c.fullPeer(p, skipped)
		if q == nil {
			if !slices.Contains(skipped, l.pairWith) {
				l.pairWith = nil // the pair it went on past is gone
			}
			return
		}
		if !c.flow.wait(p, l, q, relaying) {
			skipped = append(skipped, q)
			continue
		}
		p.log.Debug("paused reading: a peer's queue is full", zap.String("full", q.name))
		select {
		case <-drained:
		case <-c.flow.released:
		case <-l.rethink:
		}
		c.flow.done(l)
		select {
		case <-c.flow.released:
			return
		default:
		}
	}
}

// fullPeer returns a peer whose outbox p's reader may wait for, other than
// those in skip, while that outbox is past its bound, with the channel
// closed when it drains.
func (c *chain) fullPeer(p *peer, skip []*peer) (*peer, <-chan struct{}) {
	for _, q := range c.feeds(p) {
		if q.host() == p.host() || slices.Contains(skip, q) {
			continue
		}
		o := q.link.Load().out
		if ch := o.full(); ch != nil {
			if q.pos > 0 && p.pos > q.pos && o.replaying() {
				continue // the answers that let it drain come from p's side
			}
			return q, ch
		}
	}
	return nil, nil
}

// feeds returns the peers whose outboxes p's reader may wait for: every
// component's and the client's, and the bridged connections whose server
// p owns; for a bridged connection, its owner's alone.
func (c *chain) feeds(p *peer) []*peer {
	if p.ends != nil {
		return []*peer{p.ends.owner}
	}
	c.flow.mu.Lock()
	defer c.flow.mu.Unlock()
	var owned []*peer
	for _, b := range c.flow.bridged {
		if b.ends.owner == p {
			owned = append(owned, b)
		}
	}
	if owned == nil {
		return c.peers
	}
	return append(owned, c.peers...)
}

// join and leave keep the list of bridged connections open.
func (f *flow) join(b *peer) {
	f.mu.Lock()
	f.bridged = append(f.bridged, b)
	f.mu.Unlock()
}

func (f *flow) leave(b *peer) {
	f.mu.Lock()
	f.bridged = slices.DeleteFunc(f.bridged, func(x *peer) bool { return x == b })
	f.mu.Unlock()
}

// wait records that p's reader, on link l, waits for q's outbox, unless q
// is p, or q's reader waits for p through others: then it reports false
// and records nothing. q's reader waiting for p itself is allowed, unless
// p is a proxy (relaying) whose reader has not yet gone on for long past
// q's outbox: see the rule above. q's reader, if a proxy's that began to
// wait for p before p's waited for q, is woken to decide again. Peers are compared by process (host), and a process waits for
// whatever any of its readers waits for.
func (f *flow) wait(p *peer, l *link, q *peer, relaying bool) bool {
	held := 0
	if relaying {
		held = q.link.Load().out.heldBytes()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var seen []*peer
	if f.closes(q.host(), p.host(), 0, &seen) {
		return false
	}
	paired := false
	if ql := f.waitsFor(q.host(), p.host()); ql != nil {
		if relaying {
			if l.pairWith != q {
				l.pairWith, l.pairFrom = q, held
			}
			if held-l.pairFrom < queueBytes {
				return false
			}
		}
		if ql.relaying && !ql.paired {
			// One that waits with the pair in view would decide the
			// same: woken, it would wake this one in turn, for ever.
			select {
			case ql.rethink <- struct{}{}:
			default:
			}
		}
		paired = true
	}
	l.waitingOn, l.relaying, l.paired = q, relaying, paired
	return true
}

// waitsFor returns the link of x's process whose reader waits for to's
// outbox, or nil.
func (f *flow) waitsFor(x, to *peer) *link {
	if l := x.link.Load(); l.waitingOn != nil && l.waitingOn.host() == to {
		return l
	}
	for _, b := range f.bridged {
		if b.ends.host == x {
			if l := b.link.Load(); l.waitingOn != nil && l.waitingOn.host() == to {
				return l
			}
		}
	}
	return nil
}

// closes reports whether x's process waits, through the waits recorded, for
// to's process along a path that would close a cycle of more than two:
// none at all (x is to), or two waits or more. One wait is a pair, and the
// walk does not go past it. Each process is walked from once (seen): a
// second path through it leads nowhere new.
func (f *flow) closes(x, to *peer, n int, seen *[]*peer) bool {
	if x == to {
		return n != 1
	}
	if slices.Contains(*seen, x) {
		return false
	}
	*seen = append(*seen, x)
	if w := x.link.Load().waitingOn; w != nil && f.closes(w.host(), to, n+1, seen) {
		return true
	}
	for _, b := range f.bridged {
		if b.ends.host == x {
			if w := b.link.Load().waitingOn; w != nil && f.closes(w.host(), to, n+1, seen) {
				return true
			}
		}
	}
	return false
}

func (f *flow) done(l *link) {
	f.mu.Lock()
	l.waitingOn, l.relaying, l.paired = nil, false, false
	f.mu.Unlock()
}
