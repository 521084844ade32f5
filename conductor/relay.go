package conductor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/trace"
)

// chain is the running relay: the peers at each position and the rules that
// connect them. Each peer's reader calls receive for every line it reads, in
// order, and receive only ever appends to other peers' outboxes, so messages
// from one peer to another keep their order on every path.
type chain struct {
	topo atomic.Pointer[topology] // replaced when a proxy is bypassed, or the client sealed
	// topoMu orders the replacements of topo (changeTopo): readers load
	// it alone, but a change made to a stale copy would undo another.
	topoMu sync.Mutex
	peers  []*peer // by position; in proxy mode peers[n+1] is peers[0]
	log    *zap.Logger
	mcp    *mcpRoutes
	bridge *bridge // nil in proxy mode, where the parent bridges
	hb     *holdback
	flow   *flow
	trace  *trace.Recorder // nil unless the chain is traced
	// bridged names the bridged MCP connections that are open.
	bridged bridgedNames
	// sealedDrops counts the notifications dropped for a sealed client.
	sealedDrops atomic.Int64
	// unadvertisedOnce logs that MCP-over-ACP is not advertised once, not
	// for each initialize answer passed on without it.
	unadvertisedOnce sync.Once

	// failed reports a component that broke the protocol's promises (here:
	// did not answer initialize in time) to the runner's failure policy.
	failed      func(p *peer, cause error)
	initTimeout time.Duration
	initMu      sync.Mutex
	initTimer   *time.Timer // running while the client's initialize is unanswered
}

// A reader is what a peer's reader goroutine keeps from one line to the
// next.
type reader struct {
	m  wire.Message      // each line's, parsed in turn (see dispatch)
	lc *wire.LineChannel // what it reads from, if a LineChannel

	// Where lines are lent (lend.go): reclaim, made once, and the outboxes
	// given lines of lc's buffer since it was last refilled.
	reclaim func()
	lent    []*outbox
}

// receive handles one line read from peer from by its reader rd.
func (c *chain) receive(from *peer, line []byte, rd *reader) {
	pos := from.pos
	if wire.IsBatch(line) {
		c.receiveBatch(from, pos, rd.own(line))
		return
	}
	if err := wire.ParseInto(&rd.m, line); err != nil {
		c.badInput(from, pos, rd.own(line), err, nil)
	} else {
		c.dispatch(pos, from, &rd.m, nil, rd)
	}
	rd.m = wire.Message{} // keeps no line alive until the next one comes
}

// dispatch carries out what route decides for one message; b is the batch
// it came in, if any, and rd the reader of its line, if it was read alone.
// m stays the caller's, who reuses it for the next line: what is relayed
// takes only slices of the line, which is the message's own, so m itself
// is copied only where it may be kept past dispatch (by the MCP router's
// calls, and by an answer's hook: see relayAnswer). A line lent by its
// reader is passed on from where it was read, or else owned first.
func (c *chain) dispatch(pos int, from *peer, m *wire.Message, b *batch, rd *reader) {
	dc := c.topo.Load().route(inbound{from: pos, msg: m, restarted: from.restarted()}, c)
	if dc.learn != nil {
		from.setDialect(dc.learn)
	}
	if dc.initialize && dc.enveloped && c.topo.Load().role(pos) == roleProxy {
		from.passedInit.Store(true) // it took its own initialize as a proxy
	}
	if dc.act == actRelayLine {
		if c.trace != nil {
			// A traced chain's lines are never lent (lend.go).
			if to := c.peers[dc.d.to]; !c.sendTraced(nil, nil, false, from, to, nil, dc.d.method, dc.raw, m.Raw, newline) {
				to.dropped()
			}
			return
		}
		rd.pass(c.peers[dc.d.to], m.Raw)
		return
	}
	if rd.lends(m.Raw) {
		old := m.Raw
		m.Own()
		dc.raw = wire.Moved(old, m.Raw, dc.raw)
	}
	switch dc.act {
	case actComplete:
		c.relayAnswer(from, m)
		return
	case actRefuse:
		c.answerError(from, m, dc.err, b)
		return
	case actCancel:
		c.cancel(from, dc.raw, dc.d.extra)
		return
	case actDrop:
		c.sealedDrops.Add(1) // logged once, as a count, as the chain stops
		return
	case actAnswerInit:
		if result, ok := from.takeReinit(dc.raw); ok {
			if c.trace != nil {
				method, params := tracedAs(m)
				traceByConductor(from, m.ID, method, params, result, false)
			}
			from.send(encodeResponse(m.ID, result))
			return
		}
		// Params its successor never answered: it answers them now.
	case actMCP:
		m = new(wire.Message(*m))
		if c.routeMCP(dc.src, dc.enveloped, from, m, dc.d.method, dc.raw, b) {
			return
		}
		if dc.err != nil {
			c.answerError(from, m, dc.err, b)
			return
		}
	}
	to := c.peers[dc.d.to]
	params := dc.raw
	var declared setup // acp MCP servers whose set-up the answer completes
	if dc.setup {
		var e *wire.Error
		if params, declared, e = c.onSessionSetup(dc.src, dc.d, params); e != nil {
			c.answerError(from, m, e, b)
			return
		}
	}
	if m.IsNotification() {
		c.relay(from, to, nil, dc.d, params)
		if len(declared.ids) > 0 {
			c.setupAnswered(declared, nil) // no answer will come
		}
		return
	}
	cl := &call{from: from, fromID: m.ID, method: dc.d.method, batch: b, dialect: dc.proxyInit}
	switch {
	case len(declared.ids) > 0:
		cl.onResponse = func(resp *wire.Message) bool { c.setupAnswered(declared, resp); return false }
	case sessionEnds(dc.d.method) && dc.d.to > dc.src:
		cl.onResponse = c.onSessionEnd(dc.d.method, params)
	case dc.act == actMCP && dc.d.method == methodMCPMessage:
		// A call the MCP tables do not route, passed on by position: the
		// peer asked may report on it all the same.
		cl.onResponse = c.mcp.noteCall(dc.src, to.pos, params, cl, nil)
	}
	if dc.initialize {
		cl.params = params
		cl.onResponse = c.onInitialize(to, dc.d, cl)
		if dc.initTimer {
			c.startInitTimer()
		}
		if dc.proxyInit != nil {
			var err error
			if params, err = dc.proxyInit.InitializeParams(params); err != nil {
				c.answerError(from, m, wire.Errorf(codeInvalidParams, "%s: %v", m.Method, err), b)
				return
			}
		}
	}
	c.relayCall(to, cl, dc.d, params)
}

// dialectAt returns the dialect the peer at pos speaks.
func (c *chain) dialectAt(pos int) *wire.Dialect { return c.peers[pos].getDialect() }

// relayCall relays a request to `to` on behalf of cl.from, under an id of its
// own. The call is tracked on both sides before the request leaves, so its
// response and a cancel for it always find it.
func (c *chain) relayCall(to *peer, cl *call, d delivery, params json.RawMessage) {
	cl.to, cl.id = to, to.nextID.Add(1)
	// The id aliases the line it came in; kept as it is, it would keep all
	// of that line (a 16 MiB prompt, say) live until the answer comes.
	// Most ids fit in the call itself.
	cl.fromID = append(cl.idBuf[:0], cl.fromID...)
	if cl.from != nil {
		if e := cl.from.track(cl); e != nil {
			refuseCall(cl, params, e) // the conductor is stopping, or cl.from asks too much
			cl.from.refused()
			return
		}
	}
	own := false
	if c.trace != nil {
		// Until it is sent, an answer to it (a failure of to, which may
		// come once it is registered) is the conductor's.
		own = cl.notSent(params)
	}
	if err := to.register(cl); err != nil {
		failCalls([]*call{cl}, goneError(to, err)) // its hook, if any, sees the failure
		return
	}
	var id [20]byte // an int64 in decimal, copied into the line: no allocation
	c.relayFor(cl, own, cl.from, to, strconv.AppendInt(id[:0], cl.id, 10), d, params)
}

// cancel translates a $/cancel_request for a request the sender made
// through the conductor into one for the id the next hop saw. It goes
// plain even when the request went in an envelope: the ACP schema cancels
// a proxy/successor request by its own id on that connection, and never
// carries a cancel to another hop inside one. (The sender's may come
// either way; route unwraps it.) A cancel for an unknown or finished
// request is ignored, as the request-cancellation RFD allows. An
// initialize that waits for a restarted proxy's replayed initialization
// has no next hop of its own: the conductor answers it, and the restart
// goes on, as the chain needs the proxy initialized; one still pending
// on a process is cancelled there, and should a restart replace that
// process first, answered so too (see peer.cancelInit).
func (c *chain) cancel(from *peer, params json.RawMessage, extra string) {
	id := requestID(params)
	cl := from.inFlight(id)
	if cl == nil {
		from.unheeded("ignored cancel for a request not in flight", zap.ByteString("requestId", id))
		return
	}
	var l *link // for an initialize, the link of the process it is pending on
	if wire.IsInitialize(cl.method) {
		waited, pending := cl.to.cancelInit(cl)
		switch {
		case waited:
			abandon(cl, errCancelled)
			return
		case pending == nil:
			// Answered meanwhile, or sent on past cl.to, bypassed, as
			// another call, which took cl's place: that one is cancelled.
			if again := from.inFlight(id); again != nil && again != cl {
				c.cancel(from, params, extra)
			}
			return
		}
		l = pending
	}
	// Only the id changes: _meta (trace context, say) goes on with it.
	out, err := wire.SetPath(params, []string{"requestId"}, wire.IntID(cl.id))
	if err != nil {
		out = cancelParams(cl.id)
	}
	d := delivery{method: cancelMethod(cl.to), extra: extra}
	if l == nil {
		c.relay(from, cl.to, nil, d, out)
		return
	}
	line := c.encode(cl.to, nil, d, out)
	if c.trace != nil {
		c.sendTraced(l.out, nil, false, from, cl.to, nil, d.method, out, line.segments()...)
		return
	}
	l.out.putMessage(nil, line.segments(), kindNotification)
}

// requestID returns the raw requestId of $/cancel_request params.
func requestID(params json.RawMessage) []byte {
	return wire.Member(params, "requestId")
}

// largeValue is the size from which params and results are relayed from
// the line they arrived in, between a header and a trailer, instead of
// being copied into a new line.
const largeValue = 32 << 10

// relay sends a request (id != nil) or notification from peer from (nil:
// the conductor itself) to peer to as d says.
func (c *chain) relay(from, to *peer, id json.RawMessage, d delivery, params json.RawMessage) {
	c.relayFor(nil, false, from, to, id, d, params)
}

// relayFor is relay for a request sent for cl, which the trace follows
// (see sendTraced); cl is nil for any other message.
func (c *chain) relayFor(cl *call, own bool, from, to *peer, id json.RawMessage, d delivery, params json.RawMessage) {
	line := c.encode(to, id, d, params)
	if c.trace != nil {
		if !c.sendTraced(nil, cl, own, from, to, id, d.method, params, line.segments()...) {
			to.dropped()
		}
		return
	}
	to.sendMessage(kindOf(id), line.segments()...)
}

// The trailers of lines relayed in segments. They are shared, and only
// ever read.
var (
	newline      = []byte("\n")
	closeObject  = []byte("}\n")
	closeWrapped = []byte("}}\n")
)

// An encoded line is one message ready to queue: one segment, or for a
// large value a head, the value as it arrived, and a trailer. It is a value,
// not a slice, so that handing a line to an outbox allocates nothing but
// the line.
type encoded struct {
	seg [3][]byte
	n   int
}

func oneSegment(line []byte) encoded { return encoded{seg: [3][]byte{line}, n: 1} }

func inSegments(head, value, tail []byte) encoded {
	return encoded{seg: [3][]byte{head, value, tail}, n: 3}
}

func (e *encoded) segments() [][]byte { return e.seg[:e.n] }

// encode returns the line that relays a request (id != nil) or
// notification to peer to as d says.
func (c *chain) encode(to *peer, id json.RawMessage, d delivery, params json.RawMessage) encoded {
	// The head is made with room for small params and the trailer, so that
	// the whole line is one allocation.
	room := len(id) + len(d.method) + len(closeWrapped)
	if len(params) < largeValue {
		room += len(params)
	}
	dl := to.getDialect()
	if dl.MCPMessage != wire.RFD.MCPMessage {
		d.method = dl.SpellMCP(d.method)
	}
	if d.extra != "" {
		// Members JSON-RPC does not define go on after method and params,
		// inside the envelope when it is wrapped: rare, so built whole.
		envelope := ""
		if d.wrap {
			envelope = dl.Successor(id)
		}
		return oneSegment(append(wire.AppendCallExtra(nil, id, envelope, d.method, params, []byte(d.extra)), '\n'))
	}
	var head []byte
	tail := closeObject
	switch {
	case d.wrap && params != nil:
		head = wire.AppendWrappedHead(make([]byte, 0, 96+room), id, dl.Successor(id), d.method)
		tail = closeWrapped
	case d.wrap:
		return oneSegment(append(wire.AppendWrapped(make([]byte, 0, 96+room), id, dl.Successor(id), d.method, nil), '\n'))
	case params != nil:
		head = wire.AppendHead(make([]byte, 0, 64+room), id, d.method)
	default:
		m := wire.Message{ID: id, Method: d.method}
		return oneSegment(append(m.Append(make([]byte, 0, 64+room)), '\n'))
	}
	if len(params) >= largeValue {
		return inSegments(head, params, tail)
	}
	return oneSegment(append(append(head, params...), tail...))
}

// relayAnswer returns a peer's response to whoever asked, under their id.
func (c *chain) relayAnswer(from *peer, m *wire.Message) {
	if m.Error != nil && m.Result != nil {
		bothAnswers(from, m)
	}
	if m.MalformedError() { // noted by Parse: nothing to check here
		malformedError(from, m)
	}
	cl := from.complete(m.ID)
	if cl == nil {
		if from.sent(m.ID) {
			from.unawaitedAnswer(m.ID)
		} else {
			from.unmatched(m)
		}
		return
	}
	// The trace sees the request end even when nobody takes the answer:
	// else it would wait for it for as long as the trace runs. One whose
	// hook may take it is recorded once the hook has (traceHooked).
	hooked := false
	if cl.to.trace != nil {
		if hooked = cl.hookMayTake(); !hooked {
			cl.traceReply(m.Result, m.Error)
		}
	}
	if !cl.done() {
		if hooked {
			cl.traceReply(m.Result, m.Error)
		}
		from.log.Debug("dropped an answer its caller no longer awaits: the caller was restarted, or the conductor answered it", zap.ByteString("id", m.ID))
		return
	}
	if cl.onResponse != nil {
		came := m
		m = new(wire.Message(*m)) // a hook may keep it (the bridge's hands it on)
		took := cl.onResponse(m)
		if hooked {
			cl.traceHooked(came, m)
		}
		if took {
			return
		}
	}
	line := encodeResponseTo(cl.fromID, m)
	cl.answer(line.segments()...)
}

// logBothAnswers is the diagnostic, logged in full once per peer and then
// counted, for a response that carries both a result and an error.
const logBothAnswers = "response with both result and error, which JSON-RPC 2.0 forbids: relayed as the error, its result dropped"

// bothAnswers makes m, a response with both a result and an error, the
// error alone, and says so the first time from sends one, counting the
// rest, which a peer may send without end. The error is the answer
// wherever it is read (the conductor's own hooks, the trace, the
// caller), so that no reader takes the request as done: the TypeScript
// SDK fails such a response with an error too (-32600, the response as
// its data), and other readers may take either member. A result beside
// "error":null is the result (see wire.Parse).
func bothAnswers(from *peer, m *wire.Message) {
	switch n, whole, count := from.both.Add(1); {
	case whole:
		from.log.Warn(logBothAnswers, zap.ByteString("id", m.ID), zap.ByteString("result", clip(m.Result)))
	case count:
		from.log.Debug(logBothAnswers+", so far", zap.Int64("count", n))
	}
	m.Result = nil
}

// logMalformedError is the diagnostic, logged in full once per peer and
// then counted, for a response whose error is not a JSON-RPC error
// object.
const logMalformedError = `response with a malformed error, not an object with an integer "code" and a string "message": answered as the conductor's -32603, the error in its data`

// malformedError makes m's error, which is not the object JSON-RPC 2.0
// requires ("error": null, a string, an object without an integer code or
// a string message), the conductor's own internal error, with the error as
// it came in data, and says so the first time from sends one, counting
// the rest. Relayed as it came, such an answer is no response to the
// TypeScript SDK, which fails the request with its own -32600 naming
// nobody, and another reader may wait for an answer for ever. As with bothAnswers, it is replaced
// before anyone reads it: the conductor's hooks, the trace, the caller.
func malformedError(from *peer, m *wire.Message) {
	switch n, whole, count := from.malformed.Add(1); {
	case whole:
		from.log.Warn(logMalformedError, zap.ByteString("id", m.ID), zap.ByteString("error", clip(m.Error)))
	case count:
		from.log.Debug(logMalformedError+", so far", zap.Int64("count", n))
	}
	who := from.name // the client, or a bridged MCP client
	if from.pos > 0 {
		who = fmt.Sprintf("component %q", from.name)
	}
	e := wire.Errorf(codeInternalError, "%s answered with a malformed error, not an object with an integer code and a string message", who)
	// The error goes in data as it came, as what the conductor relays does.
	out, err := wire.SetPath(e.Encode(), []string{"data"}, m.Error)
	if err != nil { // it cannot be: the object is the conductor's own
		out = e.WithData(m.Error).Encode()
	}
	m.Error = out
}

// answerError answers a request the conductor will not relay with its own
// error e, or logs a notification it drops.
func (c *chain) answerError(from *peer, m *wire.Message, e *wire.Error, b *batch) {
	if m.IsRequest() {
		if c.trace != nil {
			method, params := tracedAs(m)
			traceRefused(from, m.ID, method, params, e)
		}
		answer(from, b, encodeError(m.ID, e))
		return
	}
	from.refusedNote(m, e)
}

// badInput deals with a line that is not a JSON-RPC message. What would be
// a request is answered with the error, as JSON-RPC requires, under its id
// if that can be read, else null; what would answer a call fails that
// call. A component's other lines are its output gone astray: logged and
// dropped, not answered under null, so one print statement cannot break
// the chain.
func (c *chain) badInput(from *peer, pos int, line []byte, err error, b *batch) {
	if e, ok := errors.AsType[*wire.InvalidError](err); ok && e.ResponseID != nil {
		// What would answer a call: it fails, rather than wait for ever.
		failAnswered(from, e.ResponseID, wire.Errorf(codeInternalError, "%s answered with a message that is not JSON-RPC 2.0 (%s)", answerer(from), e.Reason))
	}
	id := wire.ParseErrorID(err)
	if pos == 0 {
		from.rejected(line, err)
	} else if from.stray(line, err); id == nil {
		return
	}
	answer(from, b, encodeError(id, wire.ParseError(err)))
}

// answerer names, in an error, a peer whose answer the conductor could not
// pass on: the client, a bridged MCP client, or a component.
func answerer(from *peer) string {
	if from.pos > 0 {
		return fmt.Sprintf("component %q", from.name)
	}
	return from.name
}

// oversize deals with a message that was too long to keep. A request is
// answered with an error, under null if its id could not be kept either
// (as JSON-RPC answers a request whose id it cannot read); a response
// fails the call that awaited it, so nobody waits for an answer that was
// thrown away, with the conductor's own error naming who answered: the
// caller's request was not at fault.
func (c *chain) oversize(from *peer, big *wire.OversizeError) {
	if big.IsBatch {
		c.oversizeBatch(from, big)
		return
	}
	id, method, isResponse := big.ID, big.Method, big.IsResponse
	from.log.Warn("dropped oversize message", zap.Int("limit", big.Limit), zap.String("method", method),
		zap.ByteString("id", id), zap.ByteString("head", clip(big.Head)))
	e := wire.Errorf(codeInvalidRequest, "message longer than the limit of %d bytes was discarded", big.Limit)
	switch {
	case isResponse && id != nil:
		failAnswered(from, id, answerTooLong(from, big.Limit))
	case method != "" && (id != nil || big.IDUnread):
		from.send(encodeError(id, e))
	}
}

// answerTooLong is the error for a call whose answer from peer was over
// the limit and discarded.
func answerTooLong(from *peer, limit int) *wire.Error {
	return wire.Errorf(codeInternalError, "%s answered with a message longer than the limit of %d bytes (max_message_bytes), which was discarded", answerer(from), limit)
}

// logBatchUnkept is the diagnostic for an oversize batch of which the
// conductor could not keep every id it must answer or fail: what it keeps
// of a line it discards is bounded, however long the line goes on.
const logBatchUnkept = "oversize batch held requests or responses whose ids the conductor could not keep (past the first 65,536 entries or 1 MiB of ids, or an id over 1 KiB): " +
	"those requests are answered together by one error under a null id, and the calls those responses answered stay pending until their peer ends or the conductor stops"

// oversizeBatch deals with a batch that was too long to keep, as oversize
// does with each request and response in it: the requests are answered
// together, in one batch, as JSON-RPC answers a batch.
func (c *chain) oversizeBatch(from *peer, big *wire.OversizeError) {
	var requests, responses int
	for _, en := range big.Batch {
		if en.IsResponse {
			responses++
		} else {
			requests++
		}
	}
	from.log.Warn("dropped oversize batch", zap.Int("limit", big.Limit), zap.Int("requests", requests),
		zap.Int("responses", responses), zap.ByteString("head", clip(big.Head)))
	if big.BatchUnkept > 0 || big.BatchUnkeptResponses > 0 {
		from.log.Warn(logBatchUnkept, zap.Int("requests", big.BatchUnkept), zap.Int("responses", big.BatchUnkeptResponses))
	}
	e := wire.Errorf(codeInvalidRequest, "batch longer than the limit of %d bytes was discarded", big.Limit)
	for _, en := range big.Batch {
		if en.IsResponse {
			failAnswered(from, en.ID, answerTooLong(from, big.Limit))
		}
	}
	var unkept *wire.Error // answers, under null, the requests whose ids were not kept
	if n := big.BatchUnkept; n > 0 {
		unkept = wire.Errorf(codeInvalidRequest, "batch longer than the limit of %d bytes was discarded; this answers %d of its requests whose ids the conductor could not keep", big.Limit, n)
	}
	if out := wire.RefuseBatch(big.Batch, e, unkept); out != nil {
		from.send(append(out, '\n'))
	}
}

// failAnswered fails, with e, the call that the response from peer under
// id answered, which was dropped: as failCalls does, its hook sees the
// failure first, so that what the conductor keeps for the call (an
// mcp/connect's waiters, a call in mcpcalls.go's table) is settled.
func failAnswered(from *peer, id json.RawMessage, e *wire.Error) {
	if cl := from.complete(id); cl != nil {
		failCalls([]*call{cl}, e)
	}
}

// failCalls answers calls that will never be answered by their peer, each
// with e. A call's hook sees the failure first, as it would an answer: to
// forget what it keeps for the call (noteCall, statelessCall, track), or
// to take the failure itself (returning true), as the hook of a call the
// conductor made for itself does. What the hook makes of the message it
// is shown is not the answer: a caller whose hook does not take the
// failure gets e as it is. The hooks that shape a peer's answer for its
// caller (asOutcome's {error} carrier, asInitialize's result made from the
// declaration) are for what the peer said; e is the conductor's own, which
// must not reach the caller as if the server had answered
// (TestMCPOwnerGoneRequestCaller).
func failCalls(calls []*call, e *wire.Error) {
	for _, cl := range calls {
		cl.to.forget(cl) // those its peer failed with are gone already
		if cl.to.trace != nil {
			cl.traceFailed(e.Encode())
		}
		if !cl.take() {
			continue // its caller's process was restarted since
		}
		hooked := false
		if cl.onResponse != nil {
			// The hook may take the failure, as it would an answer.
			shown := &wire.Message{ID: wire.IntID(cl.id), Error: e.Encode()} // the hook's to change; never sent
			hooked = cl.onResponse(shown)
		}
		if !hooked {
			if cl.to.trace != nil {
				cl.traceCallerAnswer(nil, e.Encode())
			}
			cl.answer(encodeError(cl.fromID, e))
		}
		cl.told()
	}
}

// refuseCall answers cl, of params, which track refused before it was
// sent, with e.
// Its hook sees the refusal first, as failCalls shows it a failure, so that
// what the conductor keeps for the call (a session set-up's servers, an
// MCP call's entry) is settled.
func refuseCall(cl *call, params json.RawMessage, e *wire.Error) {
	if cl.onResponse != nil {
		shown := &wire.Message{ID: wire.IntID(cl.id), Error: e.Encode()} // the hook's to change; never sent
		if cl.onResponse(shown) {
			return
		}
	}
	if cl.from != nil && cl.from.trace != nil {
		if cl.dialect != nil {
			params = cl.params // an initialize's, as its caller sent them
		}
		traceRefused(cl.from, cl.fromID, callerMethod(cl), params, e)
	}
	cl.answer(encodeError(cl.fromID, e))
}

// answerWith answers cl with resp, an answer given to another call in its
// stead (see runner.settle), as relayAnswer answers it with its own.
func answerWith(cl *call, resp *wire.Message) {
	// As in relayAnswer: one whose hook may take the answer is recorded
	// once the hook has, as what its caller got.
	hooked := false
	if cl.to.trace != nil {
		if hooked = cl.hookMayTake(); !hooked {
			cl.traceReply(resp.Result, resp.Error)
		}
	}
	if !cl.take() {
		if hooked {
			cl.traceReply(resp.Result, resp.Error)
		}
		return // its caller's process was restarted since
	}
	defer cl.told()
	m := new(wire.Message(*resp)) // its hook may change it, and others get it too
	if cl.onResponse != nil {
		took := cl.onResponse(m)
		if hooked {
			cl.traceHooked(resp, m)
		}
		if took {
			return
		}
	}
	if cl.to.trace != nil && !hooked {
		cl.traceCallerAnswer(m.Result, m.Error)
	}
	line := encodeResponseTo(cl.fromID, m)
	cl.answer(line.segments()...)
}

// abandon answers cl with the conductor's own error e, for a request whose
// answer is no longer awaited from the peer asked: if that answer comes
// after all, relayAnswer drops it, as cl is gone from that peer's calls.
func abandon(cl *call, e *wire.Error) {
	cl.to.forget(cl)
	if !cl.take() {
		return // answered meanwhile, or its caller's process was restarted since
	}
	defer cl.told()
	if cl.to.trace != nil {
		cl.traceFailed(e.Encode())
		cl.traceCallerAnswer(nil, e.Encode())
	}
	cl.answer(encodeError(cl.fromID, e))
}

// encodeResponseTo re-addresses response m to id; a large result is relayed
// from where it arrived, as in encode.
func encodeResponseTo(id json.RawMessage, m *wire.Message) encoded {
	if m.Extra() {
		// Members JSON-RPC does not define go on after the answer; rare,
		// so the line is built whole.
		out := wire.Message{ID: id, Result: m.Result, Error: m.Error}
		line := out.Append(nil)
		line = m.AppendExtra(line[:len(line)-1])
		return oneSegment(append(line, closeObject...))
	}
	if m.Error == nil && len(m.Result) >= largeValue {
		return inSegments(wire.AppendResultHead(make([]byte, 0, wire.ResponseSize(id, nil, nil)), id), m.Result, closeObject)
	}
	out := wire.Message{ID: id, Result: m.Result, Error: m.Error}
	return oneSegment(append(out.Append(make([]byte, 0, wire.ResponseSize(id, m.Result, m.Error)+1)), '\n'))
}

func encodeResponse(id, result json.RawMessage) []byte {
	m := wire.Message{ID: id, Result: result}
	return append(m.Append(nil), '\n')
}

func encodeError(id json.RawMessage, e *wire.Error) []byte {
	return append(wire.ErrorResponse(id, e).Append(nil), '\n')
}

// goneError is the answer to requests that p can no longer answer, for
// cause: a message that names p, once, and data that says how it ended.
func goneError(p *peer, cause error) *wire.Error {
	e := wire.Errorf(codeInternalError, "%s: %v", p.name, cause)
	if n, ok := errors.AsType[*namedError](cause); ok && n.name == p.name {
		e = wire.Errorf(codeInternalError, "%v", cause)
	}
	if proc := p.proc(); proc != nil {
		e = e.WithData(proc.describeExit())
	}
	return e
}

// errorCode returns the code of a JSON-RPC error object as wire.Parse
// checks it, so that -32601.0 is method-not-found as -32601 is; 0 for an
// error Parse calls malformed, or a code beyond 32 bits, which is none the
// conductor acts on.
func errorCode(raw json.RawMessage) jrpc2.Code {
	code, _, _, ok := wire.ReadError(raw)
	if !ok || code != int64(int32(code)) {
		return 0
	}
	return jrpc2.Code(code)
}

// errorMessage returns the message of a JSON-RPC error object, read as
// errorCode reads its code; "" for a malformed one.
func errorMessage(raw json.RawMessage) string {
	_, msg, _, _ := wire.ReadError(raw)
	return msg
}

func clip(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// startInitTimer bounds the client's initialize: when it fires, the deepest
// component still initializing is the one that hangs, and it is failed.
func (c *chain) startInitTimer() {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
	c.initTimer = time.AfterFunc(c.initTimeout, func() {
		for pos := len(c.peers) - 1; pos > 0; pos-- {
			if p := c.peers[pos]; p.proc() != nil && p.pendingInitialize() {
				c.failed(p, named(p.name, fmt.Errorf("component %q did not answer initialize within %v", p.name, c.initTimeout)))
				return
			}
		}
	})
}

func (c *chain) stopInitTimer() {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
}

// seal drops, from now on, the notifications for the client (see
// topology.sealed).
func (c *chain) seal() {
	c.changeTopo(func(t *topology) { t.sealed = true })
}

// bypass takes the proxy at pos out of the routes.
func (c *chain) bypass(pos int) {
	c.changeTopo(func(t *topology) {
		t.bypassed = append(append([]bool(nil), t.bypassed...), make([]bool, max(0, pos+1-len(t.bypassed)))...)
		t.bypassed[pos] = true
	})
}

// changeTopo replaces the topology with a copy that change has changed.
// A shutdown seals the client while a failed proxy may be bypassed.
func (c *chain) changeTopo(change func(*topology)) {
	c.topoMu.Lock()
	defer c.topoMu.Unlock()
	t := *c.topo.Load()
	change(&t)
	c.topo.Store(&t)
}

// readLoop feeds every line from l, a link of p, into the chain until l's
// input ends. While more lines are buffered it holds back the chain's
// writes, and it releases them before it reads again (see holdback).
func (c *chain) readLoop(p *peer, l *link) {
	more, _ := l.ch.(interface{ More() bool })
	hb, holding := c.hb, false
	rd := c.newReader(l)
	for {
		line, err := rd.next(l.ch)
		burst := more != nil && err == nil && more.More()
		if burst && !holding {
			hb.hold()
		}
		ok := c.handle(p, line, err, rd)
		if holding && !burst { // an error ends any burst
			hb.release()
		}
		holding = burst
		if !ok {
			return
		}
		if !burst {
			c.throttle(p, l)
		}
	}
}

// handle relays one line read from p by rd, or deals with the error
// reading it; it reports false when p's input has ended.
func (c *chain) handle(p *peer, line []byte, err error, rd *reader) bool {
	if err == nil {
		c.receive(p, line, rd)
		return true
	}
	// AsType, not As: As's target escapes, an allocation each time.
	if big, ok := errors.AsType[*wire.OversizeError](err); ok {
		c.oversize(p, big)
		return true
	}
	if !errors.Is(err, io.EOF) {
		p.log.Debug("read ended", zap.Error(err))
	}
	return false
}
