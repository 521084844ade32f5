package conductor

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acp-conductor/acp-conductor/trace"

	"github.com/acp-conductor/acp-conductor/internal/tally"
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
	owed     int             // requests taken off inflight whose answer is not queued yet (call.take, retrack)
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
	// both counts its responses with both a result and an error
	// (bothAnswers).
	both tally.Counter
	// malformed counts its responses whose error is malformed
	// (malformedError).
	malformed tally.Counter
	// maxInFlight bounds inflight (see track); set before the peer reads.
	maxInFlight int
	// tooManyCalls counts its requests refused for maxInFlight (tooMany).
	tooManyCalls tally.Counter
	// drops counts the messages dropped for it once it was closed.
	drops tally.Counter
	// strays counts the lines it sent that were not JSON-RPC (stray).
	strays tally.Counter
	// unsent counts its responses to ids the conductor did not send it
	// (unmatched).
	unsent tally.Counter
	// refusedNotes counts its notifications the conductor refused
	// (refusedNote).
	refusedNotes tally.Counter
	// unawaited counts its answers to calls nobody awaits any more
	// (unawaitedAnswer).
	unawaited tally.Counter
	// ignored counts its notifications about no request in flight
	// (unheeded).
	ignored tally.Counter
	// rejectedInput counts a client's lines that were not JSON-RPC
	// (rejected): the editor's, or a bridged MCP client's.
	rejectedInput tally.Counter
}

// maxInFlight bounds the requests one peer may have in flight through the
// conductor: flow control bounds what is queued, not the calls awaiting an
// answer, so a peer that keeps asking one that never answers would grow
// both call tables without end.
const maxInFlight = 65536

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
	relaying  bool  // its reader is a proxy's; guarded by flow.mu
	paired    bool  // waitingOn's reader waited for it as it began; guarded by flow.mu
	// rethink wakes its waiting reader to decide again: the peer it waits
	// for has begun to wait for it (flow.go).
	rethink chan struct{}
	// pairWith and pairFrom are, for a proxy's reader going on past a
	// full outbox (flow.go), that outbox's peer and how much it held
	// then; only the reader touches them.
	pairWith *peer
	pairFrom int
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
	l := &link{ch: ch, out: newOutbox(hb, fl), proc: proc, readDone: make(chan struct{}), rethink: make(chan struct{}, 1)}
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

	// traced is where the trace is with it (traceSent, ...): the
	// conductor may answer for the peer asked (abandon), whose own answer
	// may come later all the same, and a restarted proxy's gate may hold
	// the request, which it may never let go (outbox.hold). It may also
	// bear the traceTaken mark: read and move it only through traceMove,
	// traceSwap and taken, which keep the two apart.
	traced atomic.Uint32
	idBuf  [12]byte // holds fromID when it fits (with traced, a call stays in the 144-byte size class)
}

// done takes c off its caller's list of requests in flight, and reports
// whether its caller still awaits the answer: not when the caller's
// process was restarted since (peer.replace), whose successor would take
// the answer for one of its own requests under the same id.
func (c *call) done() bool {
	return c.from == nil || c.from.untrack(c)
}

// take is done for an answer the conductor gives c itself (failCalls,
// answerWith, abandon), which may be queued on a goroutine the shutdown
// does not wait for (a restart's back-off given up, a timer): until told
// says the answer is queued, c's caller does not look idle to the
// shutdown's drain, which may close its output as soon as it does; a
// drain that ends otherwise (deadline, Abort) leaves the answer to
// awaitOwed, before the output closes. A peer's own answer needs no such
// care (relayAnswer): that peer's reader queues it, and stopAll waits for
// the reader before the output closes.
func (c *call) take() bool {
	return c.from == nil || c.from.untrackOwed(c)
}

// told says that c's answer, which take held its caller's drain for, is
// queued (or that c's hook took it).
func (c *call) told() {
	if c.from != nil {
		c.from.answerQueued()
	}
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
	if p.refusing != nil {
		// The shutdown's drain, told of a first request, may close p's
		// output at once: it hears of this one from refused, once its
		// refusal is queued.
		return p.refusing
	}
	p.askedLocked()
	if p.inflight.n >= p.maxInFlight {
		return p.tooMany(c)
	}
	p.inflight.push(c)
	return nil
}

// refused tells the shutdown's drain (runner.drain) that p has made a
// request, after the refusal track returned for it has been queued.
func (p *peer) refused() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.askedLocked()
}

// askedLocked closes p.asked at p's first request. p.mu is held.
func (p *peer) askedLocked() {
	if !p.hasAsked {
		p.hasAsked = true
		close(p.asked)
	}
}

// logTooMany is the diagnostic, logged in full once per peer and then
// counted, for a request refused for the bound on requests in flight.
const logTooMany = "refused requests past the limit on requests in flight: the peer asked waits to answer the earlier ones"

// tooMany returns the error that refuses c, a request from p past
// maxInFlight, naming the peer it would wait on, and says so the first
// time; the rest are counted, as a peer that keeps asking past the bound
// would log a line each. p.mu is held.
func (p *peer) tooMany(c *call) *wire.Error {
	switch n, whole, count := p.tooManyCalls.Add(1); {
	case whole:
		p.log.Warn(logTooMany, zap.Int("limit", p.maxInFlight), zap.String("to", c.to.name), zap.String("method", c.method))
	case count:
		p.log.Debug(logTooMany+", so far", zap.Int64("count", n))
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

// untrackOwed is untrack for call.take: c, taken off, still keeps p from
// looking idle, until answerQueued.
func (p *peer) untrackOwed(c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inflight.remove(c) {
		return false
	}
	p.owed++
	return true
}

// answerQueued says the answer to a request that call.take or retrack
// took off p's requests in flight is queued.
func (p *peer) answerQueued() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owed--
	p.idleIfNone()
}

// idleIfNone tells stopTaking's waiter once p has no request in flight.
// p.mu is held.
func (p *peer) idleIfNone() {
	if p.inflight.n == 0 && p.owed == 0 && p.idle != nil {
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
	return p.idleLocked()
}

// owing returns how many answers to p's requests taken off its requests
// in flight are not queued yet (see owed), and a channel that is closed
// once none is, and none of its requests is in flight.
func (p *peer) owing() (int, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owed, p.idleLocked()
}

// idleLocked returns the channel idleIfNone closes, closed already if p
// is idle. p.mu is held.
func (p *peer) idleLocked() <-chan struct{} {
	if p.idle == nil {
		p.idle = make(chan struct{})
		if p.inflight.n == 0 && p.owed == 0 {
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
		p.dropped()
	}
}

// sendMessage is send for a request or notification (k), which waits
// while a restarted proxy has not answered its replayed initialize
// (outbox.hold); a notification for a sealed client is dropped
// (outbox.seal).
func (p *peer) sendMessage(k kind, line ...[]byte) {
	if !p.link.Load().out.putMessage(nil, line, k) {
		p.dropped()
	}
}

// dropped notes a message dropped because p's outbox is closed. Once p
// is closed everything for it goes this way (an agent streaming on to a
// proxy that has exited): the first is logged, the rest counted, and the
// count logged now and then as they go on (tally), and when p is done
// (logDropped).
func (p *peer) dropped() {
	switch n, whole, count := p.drops.Add(1); {
	case whole:
		p.log.Debug("dropped message for closed peer; later ones are counted, and the count logged now and then")
	case count:
		p.log.Debug("dropped messages for closed peer, so far", zap.Int64("count", n))
	}
}

// logDropped logs how many messages were dropped for p, closed, how many
// lines of its output were dropped as not JSON-RPC, how many of its
// responses to ids the conductor did not send, of its notifications the
// conductor refused, of its answers nobody awaited, of its lines
// rejected as not JSON-RPC, of its notifications about no request in
// flight, of its responses with both members or a malformed error and of
// its requests past maxInFlight, where some were not logged yet, in full
// or in a count.
func (p *peer) logDropped() {
	for _, c := range []struct {
		t     *tally.Counter
		level zapcore.Level
		msg   string
	}{
		{&p.drops, zap.DebugLevel, "dropped messages for closed peer"},
		{&p.strays, zap.WarnLevel, "dropped output that is not JSON-RPC, in all"},
		{&p.unsent, zap.WarnLevel, "dropped responses to ids the conductor did not send, in all"},
		{&p.refusedNotes, zap.WarnLevel, "dropped notifications the conductor refused, in all"},
		{&p.unawaited, zap.DebugLevel, "dropped answers nobody awaits, in all"},
		{&p.rejectedInput, zap.WarnLevel, "rejected input, in all"},
		{&p.ignored, zap.DebugLevel, "ignored notifications about no request in flight, in all"},
		{&p.both, zap.DebugLevel, logBothAnswers + ", in all"},
		{&p.malformed, zap.DebugLevel, logMalformedError + ", in all"},
		{&p.tooManyCalls, zap.DebugLevel, logTooMany + ", in all"},
	} {
		if n, ok := c.t.Unreported(); ok {
			p.log.Log(c.level, c.msg, zap.Int64("count", n))
		}
	}
}

// strayLogged is how many of a component's stray lines are logged with
// what they said: enough to tell what prints them.
const strayLogged = 5

// stray logs line, output of p's that is not JSON-RPC (err says why),
// which is dropped. A component that prints as it goes (a debug print
// left in, a library's banner) would write a warning per line, so only
// the first strayLogged are, the last saying so; the rest are counted,
// and the count logged now and then as they go on (tally), and when p
// is done (logDropped).
func (p *peer) stray(line []byte, err error) {
	p.logFew(&p.strays, strayLogged, zap.WarnLevel, "dropped output that is not JSON-RPC", "later such lines",
		"dropped output that is not JSON-RPC", zap.Error(err), zap.ByteString("line", clip(line)))
}

// logFew logs one more of what t counts, at level: the first few in full,
// as msg with fields, the last of them saying that what comes later (its
// words) is counted; then, now and then (tally), the count so far, as
// counted says. Each of a peer's diagnostics that it may repeat without
// end goes this way.
func (p *peer) logFew(t *tally.Counter, few int64, level zapcore.Level, msg, later, counted string, fields ...zap.Field) {
	switch n, whole, count := t.Add(few); {
	case whole && n < few:
		p.log.Log(level, msg, fields...)
	case whole:
		p.log.Log(level, msg+"; "+later+" are counted, and the count logged now and then", fields...)
	case count:
		p.log.Log(level, counted+", so far", zap.Int64("count", n))
	}
}

// unsentLogged is how many of a peer's responses to ids the conductor did
// not send are logged with what they said.
const unsentLogged = 5

// unmatched logs m, a response of p's to an id the conductor did not send
// it, which is dropped. A peer may answer so each notification of a kind
// (Codex answers $/cancel_request with an error under a null id), so only
// the first unsentLogged are logged, as stray's lines are, and the rest
// counted.
func (p *peer) unmatched(m *wire.Message) {
	said := []zap.Field{zap.ByteString("id", m.ID)}
	if m.Error != nil { // what an error says may tell what it answers
		said = append(said, zap.ByteString("error", clip(m.Error)))
	}
	p.logFew(&p.unsent, unsentLogged, zap.WarnLevel, "dropped response to an id the conductor did not send", "later such responses",
		"dropped responses to ids the conductor did not send", said...)
}

// refusedLogged is how many of a peer's notifications the conductor
// refuses are logged with their method and why.
const refusedLogged = 5

// refusedNote logs m, a notification of p's the conductor refuses (e
// says why), which is dropped: it has no id to answer. A peer may send
// one of a kind for every turn (an envelope it may not send, say), so
// only the first refusedLogged are logged, as stray's lines are, and
// the rest counted.
func (p *peer) refusedNote(m *wire.Message, e *wire.Error) {
	p.logFew(&p.refusedNotes, refusedLogged, zap.WarnLevel, "dropped notification", "later ones the conductor refuses",
		"dropped notifications the conductor refused", zap.String("method", m.Method), zap.String("reason", e.Message))
}

// unawaitedLogged is how many of a peer's answers nobody awaits are
// logged with their id.
const unawaitedLogged = 5

// unawaitedAnswer logs an answer of p's under id, an id the conductor
// sent it, to a call nobody awaits any more: the conductor answered it
// itself, or p answered it before. A peer that answers each call twice
// would log a line each, so only the first unawaitedLogged are logged,
// and the rest counted.
func (p *peer) unawaitedAnswer(id json.RawMessage) {
	p.logFew(&p.unawaited, unawaitedLogged, zap.DebugLevel,
		"dropped an answer nobody awaits: the conductor answered the call itself, or the peer answered it before", "later such answers",
		"dropped answers nobody awaits", zap.ByteString("id", id))
}

// rejectedLogged is how many of a client's lines that are not JSON-RPC
// are logged with what they said.
const rejectedLogged = 5

// rejected logs line, a client's (the editor's, or a bridged MCP
// client's), which is not JSON-RPC (err says why) and is refused: with
// an error, as JSON-RPC requires, where it can be answered. A client that
// keeps writing such lines would write a warning each, so only the first
// rejectedLogged are logged, as stray's lines are, and the rest counted.
func (p *peer) rejected(line []byte, err error) {
	p.logFew(&p.rejectedInput, rejectedLogged, zap.WarnLevel, "rejected input", "later such lines",
		"rejected input", zap.Error(err), zap.ByteString("line", clip(line)))
}

// unheededLogged is how many of a peer's notifications about no request
// in flight are logged with what they named.
const unheededLogged = 5

// unheeded logs msg, about a notification of p's that names no request
// in flight (a cancel that crossed its answer, an MCP notification for
// nobody), which is dropped. Harmless one at a time, but a peer may send
// them without end, so only the first unheededLogged are logged, and the
// rest counted.
func (p *peer) unheeded(msg string, what zap.Field) {
	p.logFew(&p.ignored, unheededLogged, zap.DebugLevel, msg, "later notifications about no request in flight",
		"ignored notifications about no request in flight", what)
}
