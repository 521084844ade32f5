package conductor

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A peer is one connection of the conductor: the client, or a component.
type peer struct {
	name string
	log  *zap.Logger
	ch   *wire.LineChannel
	out  *outbox
	proc *process // nil for the client

	readDone chan struct{} // closed when the peer's output has ended

	nextID atomic.Int64

	mu       sync.Mutex
	calls    map[int64]*call  // requests sent to this peer, by the id it saw
	inflight map[string]*call // requests from this peer, by the id it used
	gone     error            // set once the peer can no longer answer
	dialect  dialect          // how this peer spells the proxy methods
}

// A dialect is a spelling of the proxy methods: the RFD's or the Rust SDK's.
type dialect bool

const (
	dialectRFD  dialect = false
	dialectRust dialect = true
)

func (d dialect) successor() string {
	if d == dialectRust {
		return wire.MethodSuccessorRust
	}
	return wire.MethodSuccessor
}

func (d dialect) initialize() string {
	if d == dialectRust {
		return wire.MethodProxyInitRust
	}
	return wire.MethodProxyInitialize
}

// A call is a request the conductor sent to a peer on someone's behalf.
type call struct {
	from   *peer           // who is waiting for the answer
	fromID json.RawMessage // the id they used
	to     *peer           // who was asked
	id     int64           // the id they were asked under
	wrap   bool            // whether it went inside a successor envelope
	batch  *batch          // the batch it arrived in, if any
	method string          // the method as sent
	params json.RawMessage // kept only where the request may be sent again

	// onResponse, if set, sees the response first and may consume it
	// (returning true) instead of letting it go back to from.
	onResponse func(resp *wire.Message) bool
}

// reply sends the response line for c to whoever asked.
func (c *call) reply(line []byte) { answer(c.from, c.batch, line) }

func newPeer(name string, ch *wire.LineChannel, log *zap.Logger) *peer {
	return &peer{
		name:     name,
		log:      log.With(zap.String("peer", name)),
		ch:       ch,
		out:      newOutbox(),
		calls:    make(map[int64]*call),
		inflight: make(map[string]*call),

		readDone: make(chan struct{}),
	}
}

// register records c, asked of p under c.id, or returns the reason p
// cannot take requests any more.
func (p *peer) register(c *call) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone != nil {
		return p.gone
	}
	p.calls[c.id] = c
	return nil
}

// track records c as in flight from p, so that p can cancel it by its own id.
func (p *peer) track(c *call) {
	p.mu.Lock()
	p.inflight[string(c.fromID)] = c
	p.mu.Unlock()
}

func (p *peer) untrack(c *call) {
	p.mu.Lock()
	if p.inflight[string(c.fromID)] == c {
		delete(p.inflight, string(c.fromID))
	}
	p.mu.Unlock()
}

// inFlight returns the call p made under id, if it is still open.
func (p *peer) inFlight(id []byte) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight[string(id)]
}

// complete removes and returns the call answered by a response carrying id.
func (p *peer) complete(id json.RawMessage) *call {
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return nil // the conductor only sends integer ids
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls[n]
	delete(p.calls, n)
	return c
}

// fail marks the peer gone and returns the calls it will never answer.
func (p *peer) fail(cause error) []*call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone == nil {
		p.gone = cause
	}
	calls := make([]*call, 0, len(p.calls))
	for _, c := range p.calls {
		calls = append(calls, c)
	}
	clear(p.calls)
	return calls
}

func (p *peer) getDialect() dialect {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dialect
}

func (p *peer) setDialect(d dialect) {
	p.mu.Lock()
	p.dialect = d
	p.mu.Unlock()
}

// send queues one encoded message (without its newline).
func (p *peer) send(line []byte) {
	if !p.out.put(line) {
		p.log.Debug("dropped message for closed peer")
	}
}

// writeLoop drains the outbox to the channel until the outbox is closed or
// done is closed, then closes the channel's writing side. Lines queued
// together go out in one system call.
func (p *peer) writeLoop(done <-chan struct{}) error {
	defer p.ch.Close()
	var spare [][]byte
	for {
		lines, ok := p.out.take(done, spare)
		if !ok {
			return nil
		}
		bufs := net.Buffers(lines)
		if err := p.ch.SendBuffers(&bufs); err != nil {
			p.log.Debug("write failed", zap.Error(err))
			p.out.close()
			return nil // the reader side reports the peer's end
		}
		clear(lines)
		spare = lines
	}
}
