package conductor

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/trace"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A peer is one party the conductor relays for: the client, a component,
// or a bridged MCP connection. Its connection lives in a link, which a
// restarted component replaces; the peer's position, call tables and dialect
// outlive it.
type peer struct {
	name string
	pos  int // position in the chain; -1 for a bridged MCP connection
	log  *zap.Logger
	comp Component // what to start again, for a component
	// trace records the chain's messages; nil when it is not traced. The
	// peer holds it, not each call, so that a call costs nothing more.
	trace *trace.Recorder

	link atomic.Pointer[link]
	// ends is set for a bridged MCP connection: the peers it joins.
	ends *bridgeEnds

	nextID  atomic.Int64
	dialect atomic.Pointer[wire.Dialect] // nil for wire.RFD; read per wrapped message

	mu       sync.Mutex
	calls    map[int64]*call // requests sent to this peer, by the id it saw
	inflight callList        // requests from this peer
	gone     error           // set once the peer can no longer answer
	refusing *wire.Error     // set once the peer may start no more requests
	idle     chan struct{}   // closed when inflight empties, once someone waits
	asked    chan struct{}   // closed at the peer's first request
	hasAsked bool
	restarts []time.Time // when it was restarted, within the window

	// For replaying a proxy's initialization after a restart.
	initParams json.RawMessage // the params of the first initialize it took as a proxy
	// successorInits are what its successor last answered each of its
	// initializes, by the params it sent (see takeReinit). Under mu.
	successorInits []successorInit
	// reinit says its initializes are answered from successorInits, from
	// a restart until its replays are answered; set under mu.
	reinit      atomic.Bool
	reinitFirst bool // none of its initializes has been answered since the restart; under mu
	// replays are a restarted proxy's initializations sent again while
	// unanswered, in the order they go, one at a time: the first is in
	// flight. Their waiters are pending on p as its calls are: fail and
	// replace return them. Under mu.
	replays []*replay
	// cancelled are initialize requests pending on p's process whose
	// callers cancelled them: a restart answers them as cancelled instead
	// of sending them again (see cancelInit). Under mu.
	cancelled []*call
	// resending are the initialize requests taken from p, a bypassed
	// proxy, that wait to be sent on to its successor: a cancel finds
	// them here, and they are not sent (see resendHeld). Under mu.
	resending []*call
	// passedInit is set once a proxy's process has passed an initialize
	// on to its successor: it took its own as a proxy, so a refusal of it
	// that follows is its successor's, passed back (see retryInitialize).
	// A restart clears it (replace).
	passedInit atomic.Bool
	// saidBoth is set once the peer has sent a response with both a
	// result and an error, which is logged the first time only.
	saidBoth atomic.Bool
	// saidMalformed is set once the peer has sent a response whose error
	// is malformed, which is logged the first time only.
	saidMalformed atomic.Bool
	// maxInFlight bounds inflight (see track); set before the peer reads.
	maxInFlight int
	// saidTooMany is set once a request of the peer's was refused for
	// maxInFlight, which is logged the first time only.
	saidTooMany atomic.Bool
}

// maxInFlight bounds the requests one peer may have in flight through the
// conductor: flow control bounds what is queued, not the calls awaiting an
// answer, so a peer that keeps asking one that never answers would grow
// both call tables without end.
const maxInFlight = 65536

// A successorInit is a proxy's initialize of its successor, by its params,
// and the result its successor answered it with.
type successorInit struct{ params, result json.RawMessage }

// maxSuccessorInits bounds the answers kept per proxy: initializes are few,
// and one with params not kept goes to the successor again.
const maxSuccessorInits = 8

// bridgeEnds are the two peers a bridged MCP connection joins: the agent
// whose MCP client opened it, and the peer that owns its server.
type bridgeEnds struct{ host, owner *peer }

// host returns the peer whose process p stands for: for a bridged MCP
// connection the agent, whose MCP client it is; p itself otherwise.
func (p *peer) host() *peer {
	if p.ends != nil {
		return p.ends.host
	}
	return p
}

// A link is one connection of a peer: its channel, the outbox its writer
// drains, and for a component the process behind it.
type link struct {
	ch       channel
	out      *outbox
	proc     *process
	readDone chan struct{} // closed when the reader has seen the end

	waitingOn *peer // whose full outbox its reader waits for; guarded by flow.mu
}

// channel is what a link reads from and writes to: a wire.LineChannel, or a
// bridged MCP connection.
type channel interface {
	Recv() ([]byte, error)
	SendBuffers(*net.Buffers) error
	Close() error
}

// newLink returns a link writing to ch, whose outbox holds lines back while
// hb says so and is bounded as fl says (either may be nil).
func newLink(ch channel, proc *process, hb *holdback, fl *flow) *link {
	l := &link{ch: ch, out: newOutbox(hb, fl), proc: proc, readDone: make(chan struct{})}
	l.out.try = wire.TryWriterOf(ch)
	return l
}

// A call is a request the conductor sent to a peer on someone's behalf.
type call struct {
	from   *peer           // who is waiting for the answer
	fromID json.RawMessage // the id they used
	to     *peer           // who was asked
	id     int64           // the id they were asked under
	batch  *batch          // the batch it arrived in, if any
	method string          // the method as sent
	params json.RawMessage // kept only where the request may be sent again
	// dialect is, for a proxy's initialize, the dialect it was spelled in.
	dialect *wire.Dialect

	// onResponse, if set, sees the response first and may consume it
	// (returning true) instead of letting it go back to from; it may
	// change a peer's answer before it goes back. It sees a failure the
	// conductor answers (failCalls) too, but a failure it does not consume
	// goes back as the conductor's error, whatever it changed.
	onResponse func(resp *wire.Message) bool

	prev, next *call // in from's inflight list, under from.mu

	// traced is set once the trace has its answer: the conductor may
	// answer for the peer asked (abandon), whose own answer may come
	// later all the same.
	traced atomic.Bool
	idBuf  [12]byte // holds fromID when it fits (with traced, a call stays in the 144-byte size class)
}

// done takes c off its caller's list of requests in flight, and reports
// whether its caller still awaits the answer: not when the caller's
// process was restarted since (peer.replace), whose successor would take
// the answer for one of its own requests under the same id.
func (c *call) done() bool {
	return c.from == nil || c.from.untrack(c)
}

// answer sends the response line for c to whoever asked; a call the
// conductor made itself has no one to tell.
func (c *call) answer(line ...[]byte) {
	if c.from != nil {
		answer(c.from, c.batch, line...)
	}
}

func newPeer(name string, pos int, l *link, log *zap.Logger) *peer {
	p := &peer{
		name:  name,
		pos:   pos,
		log:   log.With(zap.String("peer", name)),
		calls: make(map[int64]*call),
		asked: make(chan struct{}),

		maxInFlight: maxInFlight,
	}
	p.link.Store(l)
	return p
}

// proc returns the process behind the peer's current link, or nil.
func (p *peer) proc() *process { return p.link.Load().proc }

// A replay is one initialization a restarted proxy is sent again, with
// the params its callers gave: the one that restores it (see
// recordedInit), or that of an initialize its old process left
// unanswered with other params. waiters are those initialize requests, which get its answer
// (see runner.settle); call is the conductor's request, nil until sent.
type replay struct {
	params   json.RawMessage
	call     *call
	waiters  []*call
	restores bool // the first, which restores p
}

// replace gives a restarted component its new link, with rp's call (if
// any) as its only call. It returns the calls the old process will never
// answer, and those it made that are still in flight: their answers are
// for no one now (see call.done), as the new process numbers its requests
// afresh. The initializes among the first wait instead for a replay of
// their own params, in the order p was sent them, but for those their
// callers cancelled (cancelInit), which it returns in cancelled; without
// rp, they are unanswered too. That is done under the hold of p.mu that
// installs the new link, so that a cancel finds each either pending on the
// old process or waiting for its replay, never in between. The peer takes
// requests again at once; they queue on the new link.
func (p *peer) replace(l *link, rp *replay) (unanswered, cancelled, orphaned []*call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	taken := p.takeCalls()
	for c := p.inflight.head; c != nil; c = p.inflight.head {
		p.inflight.remove(c)
		orphaned = append(orphaned, c)
	}
	p.idleIfNone()
	if rp != nil {
		p.calls[rp.call.id] = rp.call
		p.replays = []*replay{rp}
		slices.SortFunc(taken, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	}
	for _, c := range taken {
		switch {
		case rp == nil || c.from == nil || !wire.IsInitialize(c.method):
			unanswered = append(unanswered, c)
		case slices.Contains(p.cancelled, c):
			cancelled = append(cancelled, c)
		default:
			p.waitForReplay(c)
		}
	}
	p.cancelled = nil
	p.gone = nil
	p.reinit.Store(len(p.successorInits) > 0)
	p.reinitFirst = true
	// The new process may be another program: until it passes an
	// initialize on, a refusal of one is its own.
	p.passedInit.Store(false)
	p.link.Store(l)
	return unanswered, cancelled, orphaned
}

// takeCalls empties p's calls, and the waiters of its replays, and
// returns them. p.mu is held.
func (p *peer) takeCalls() []*call {
	calls := make([]*call, 0, len(p.calls))
	for _, c := range p.calls {
		calls = append(calls, c)
	}
	clear(p.calls)
	for _, rp := range p.replays {
		calls = append(calls, rp.waiters...)
	}
	p.replays = nil
	return calls
}

// waitForReplay has cl, an initialize p's old process left unanswered,
// wait for the replay of its own params: the first's, if they are the
// same, else one that follows the others. p.mu is held.
func (p *peer) waitForReplay(cl *call) {
	for _, rp := range p.replays {
		if bytes.Equal(rp.params, cl.params) {
			rp.waiters = append(rp.waiters, cl)
			return
		}
	}
	p.replays = append(p.replays, &replay{params: cl.params, waiters: []*call{cl}})
}

// replayAnswered takes the calls that wait for rp's answer, which has
// come, and returns the replay to send next, if any: none if p failed
// again since, which took them with its calls.
func (p *peer) replayAnswered(rp *replay) (waiters []*call, next *replay) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp {
		return nil, nil
	}
	p.replays = p.replays[1:]
	if len(p.replays) > 0 {
		next = p.replays[0]
	} else {
		p.reinit.Store(false) // restored: its initializes go on as anyone's
	}
	return rp.waiters, next
}

// sendingReplay records cl as rp's call, and reports whether rp is still
// the replay to send: not if p failed since.
func (p *peer) sendingReplay(rp *replay, cl *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp {
		return false
	}
	rp.call = cl
	p.calls[cl.id] = cl
	return true
}

// replayStalled reports whether rp is still the replay in flight on p,
// unanswered, and takes its waiters unless it is the one that restores p.
func (p *peer) replayStalled(rp *replay) (waiters []*call, stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replays) == 0 || p.replays[0] != rp || rp.call == nil || p.calls[rp.call.id] != rp.call {
		return nil, false
	}
	if !rp.restores {
		waiters, rp.waiters = rp.waiters, nil
	}
	return waiters, true
}

// cancelInit takes the cancel of cl, an initialize sent to p. If cl waits
// for a replay, or to be sent on past p, bypassed, it waits no more, and
// cancelInit reports so: the conductor answers it. A replay not yet sent that nobody waits for any more is not
// sent; one sent goes on, as the proxy is being initialized. If cl is
// pending on p's process, it is noted, so that a restart before that
// process answers it answers it as cancelled rather than send it again
// (see replace), and that process's link is returned, for the cancel: a
// restart may replace it before the cancel goes, and the new process
// never saw cl. Otherwise cl was answered meanwhile, and neither is.
func (p *peer) cancelInit(cl *call) (waited bool, pending *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, rp := range p.replays {
		if j := slices.Index(rp.waiters, cl); j >= 0 {
			rp.waiters = slices.Delete(rp.waiters, j, j+1)
			if i > 0 && len(rp.waiters) == 0 {
				p.replays = slices.Delete(p.replays, i, i+1)
			}
			return true, nil
		}
	}
	if i := slices.Index(p.resending, cl); i >= 0 {
		p.resending = slices.Delete(p.resending, i, i+1)
		return true, nil
	}
	if p.calls[cl.id] != cl {
		return false, nil
	}
	// Those answered since they were noted go: what is kept is bounded
	// by what is pending.
	p.cancelled = slices.DeleteFunc(p.cancelled, func(c *call) bool { return p.calls[c.id] != c })
	if !slices.Contains(p.cancelled, cl) {
		p.cancelled = append(p.cancelled, cl)
	}
	return false, p.link.Load()
}

// recordedInit returns the params a restart replays first, to restore p:
// those of the first initialize p took; failing that, those of the
// earliest still pending on it (as a replay, or from a caller), which it
// may take yet; nil if there are none. Params it refused, or that its
// dialect could not carry, would only fail every restart.
func (p *peer) recordedInit() json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initParams != nil {
		return p.initParams
	}
	if len(p.replays) > 0 {
		return p.replays[0].params
	}
	var first *call
	for _, c := range p.calls {
		if c.from != nil && wire.IsInitialize(c.method) && (first == nil || c.id < first.id) {
			first = c
		}
	}
	if first == nil {
		return nil
	}
	return first.params
}

// allowRestart records a restart and reports whether it is within limit
// restarts in window, and how many came before it in window.
func (p *peer) allowRestart(now time.Time, limit int, window time.Duration) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	recent := p.restarts[:0]
	for _, t := range p.restarts {
		if now.Sub(t) < window {
			recent = append(recent, t)
		}
	}
	p.restarts = recent
	if len(recent) >= limit {
		return len(recent), false
	}
	p.restarts = append(p.restarts, now)
	return len(recent), true
}

// rememberInit records params, those of an initialize p took as a proxy,
// for replaying after a restart, unless it took one before.
func (p *peer) rememberInit(params json.RawMessage) {
	p.mu.Lock()
	if p.initParams == nil {
		p.initParams = params
	}
	p.mu.Unlock()
}

// rememberSuccessorInit records result, what p's successor answered p's
// initialize of params, for answering it after a restart: the latest
// answer for those params, beside those for other params, the oldest of
// which goes past maxSuccessorInits.
func (p *peer) rememberSuccessorInit(params, result json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.successorInits {
		if bytes.Equal(p.successorInits[i].params, params) {
			p.successorInits[i].result = result
			return
		}
	}
	if len(p.successorInits) == maxSuccessorInits {
		p.successorInits = slices.Delete(p.successorInits, 0, 1)
	}
	// A copy: params alias the line they came in.
	p.successorInits = append(p.successorInits, successorInit{bytes.Clone(params), result})
}

// takeReinit returns the answer to give p's initialize of its successor
// with params, if p is a restarted proxy whose replays the conductor
// answers itself: what the successor answered the same params, so that
// each replay is answered for its own. The first after the restart, which
// restores p, gets the oldest answer kept if its params were not seen
// (the first initialize's, until more than maxSuccessorInits params have
// been answered), as the successor is initialized already; a later one
// whose params were not seen goes to the successor.
func (p *peer) takeReinit(params json.RawMessage) (json.RawMessage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reinit.Load() || len(p.successorInits) == 0 {
		return nil, false
	}
	first := p.reinitFirst
	p.reinitFirst = false
	if len(p.replays) == 0 {
		p.reinit.Store(false) // nothing replayed waits for the others
	}
	for _, si := range p.successorInits {
		if bytes.Equal(si.params, params) {
			return si.result, true
		}
	}
	if first {
		return p.successorInits[0].result, true
	}
	return nil, false
}

// restarted reports whether takeReinit may answer. It is read for every
// message the peer sends, so it takes no lock.
func (p *peer) restarted() bool { return p.reinit.Load() }

// pendingInitialize reports whether an initialize sent to p is unanswered,
// leaving out the conductor's replays, which have bounds of their own
// (runner.awaitReplay).
func (p *peer) pendingInitialize() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		if c.from != nil && wire.IsInitialize(c.method) {
			return true
		}
	}
	return false
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

// track records c as in flight from p, so that p can cancel it by its own
// id, or returns the error to refuse it with once p may start no more
// requests (see stopTaking), or has maxInFlight in flight already.
func (p *peer) track(c *call) *wire.Error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hasAsked {
		p.hasAsked = true
		close(p.asked)
	}
	if p.refusing != nil {
		return p.refusing
	}
	if p.inflight.n >= p.maxInFlight {
		return p.tooMany(c)
	}
	p.inflight.push(c)
	return nil
}

// logTooMany is the diagnostic, logged once per peer, for a request
// refused for the bound on requests in flight.
const logTooMany = "refused requests past the limit on requests in flight: the peer asked waits to answer the earlier ones"

// tooMany returns the error that refuses c, a request from p past
// maxInFlight, naming the peer it would wait on, and says so the first
// time. p.mu is held.
func (p *peer) tooMany(c *call) *wire.Error {
	if !p.saidTooMany.Swap(true) {
		p.log.Warn(logTooMany, zap.Int("limit", p.maxInFlight), zap.String("to", c.to.name), zap.String("method", c.method))
	} else {
		p.log.Debug(logTooMany, zap.String("to", c.to.name), zap.String("method", c.method))
	}
	return wire.Errorf(codeInternalError, "%s has %d requests in flight through the conductor, the limit: this %s was not sent on to %q, which has yet to answer them",
		p.name, p.maxInFlight, c.method, c.to.name)
}

// untrack takes c off p's requests in flight, and reports whether it was
// there.
func (p *peer) untrack(c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inflight.remove(c) {
		return false
	}
	p.idleIfNone()
	return true
}

// idleIfNone tells stopTaking's waiter once p has no request in flight.
// p.mu is held.
func (p *peer) idleIfNone() {
	if p.inflight.n == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// stopTaking makes p's further requests fail with e, and returns a channel
// that is closed once none of its requests is in flight any more.
func (p *peer) stopTaking(e *wire.Error) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = e
	if p.idle == nil {
		p.idle = make(chan struct{})
		if p.inflight.n == 0 {
			close(p.idle)
		}
	}
	return p.idle
}

// inFlightCount returns how many requests from p are awaiting an answer.
func (p *peer) inFlightCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight.n
}

// inFlightCalls returns the requests p has in flight, oldest first.
func (p *peer) inFlightCalls() []*call {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := make([]*call, 0, p.inflight.n)
	for c := p.inflight.head; c != nil; c = c.next {
		calls = append(calls, c)
	}
	return calls
}

// inFlight returns the call p made under id, if it is still open.
func (p *peer) inFlight(id []byte) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight.find(id)
}

// complete removes and returns the call answered by a response carrying id,
// spelled as strconv writes it or otherwise (wire.IntOf).
func (p *peer) complete(id json.RawMessage) *call {
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		var ok bool
		if n, ok = wire.IntOf(id); !ok {
			return nil // the conductor only sends integer ids
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls[n]
	delete(p.calls, n)
	return c
}

// forget takes c out of p's calls once the conductor has answered it
// itself, so that a peer that never answers does not keep it. The peer's
// own answer, should it come, finds nothing and is dropped: p's ids only
// increase, so no later call takes c's.
func (p *peer) forget(c *call) {
	p.mu.Lock()
	if p.calls[c.id] == c {
		delete(p.calls, c.id)
	}
	p.mu.Unlock()
}

// sent reports whether id, which answers no call in p's table, is one the
// conductor sent p (then answered, by p or by the conductor itself): p's
// ids count up from 1.
func (p *peer) sent(id json.RawMessage) bool {
	n, ok := wire.IntOf(id)
	return ok && n >= 1 && n <= p.nextID.Load()
}

// fail marks the peer gone and returns the calls it will never answer.
func (p *peer) fail(cause error) []*call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone == nil {
		p.gone = cause
	}
	return p.takeCalls()
}

// failBypassed is fail for p, a proxy taken out of the chain: the
// initializes among the calls it returns wait in resending to be sent on
// to its successor, but for those their callers cancelled while p held
// them (cancelInit), their cancel gone to p, which it returns apart. That
// is done under the one hold of p.mu that takes them, so that a cancel
// finds each either pending on p or waiting to be sent on, never in
// between.
func (p *peer) failBypassed(cause error) (calls, cancelled []*call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone == nil {
		p.gone = cause
	}
	for _, c := range p.takeCalls() {
		switch {
		case c.from == nil || !wire.IsInitialize(c.method):
			calls = append(calls, c)
		case slices.Contains(p.cancelled, c):
			cancelled = append(cancelled, c)
		default:
			p.resending = append(p.resending, c)
			calls = append(calls, c)
		}
	}
	p.cancelled = nil
	return calls, cancelled
}

// resendHeld runs send, which sends cl on past p, bypassed, and reports
// whether it did: not if cl was cancelled since (cancelInit). send runs
// under p.mu, so that a cancel that found cl waits until cl's successor
// call has taken its place, and finds that instead (see chain.cancel).
func (p *peer) resendHeld(cl *call, send func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.resending, cl)
	if i < 0 {
		return false
	}
	p.resending = slices.Delete(p.resending, i, i+1)
	send()
	return true
}

// retrack puts c in old's place among p's requests in flight, in one
// step, so that a cancel by their id finds one or the other. It reports
// false if old is not there (p's process was restarted since), or, once p
// may start no more requests, takes old off and returns the error to
// refuse it with.
func (p *peer) retrack(old, c *call) (bool, *wire.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refusing != nil {
		if p.inflight.remove(old) {
			p.idleIfNone()
			return false, p.refusing
		}
		return false, nil
	}
	return p.inflight.replace(old, c), nil
}

// getDialect returns the dialect p speaks: wire.RFD until it shows another.
func (p *peer) getDialect() *wire.Dialect {
	if d := p.dialect.Load(); d != nil {
		return d
	}
	return wire.RFD
}

func (p *peer) setDialect(d *wire.Dialect) { p.dialect.Store(d) }

// send queues one encoded line (with its newline), in one or more
// segments, on the current link.
func (p *peer) send(line ...[]byte) {
	if !p.link.Load().out.put(line...) {
		p.log.Debug("dropped message for closed peer")
	}
}
