package conductor

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Tracing (package trace) records each message where the relay hands it to
// its destination (relay, and dispatch's path for a line that goes on as
// it came), as the destination's outbox takes it or a restarted proxy's
// gate lets it go (sendTraced), and each answer where the relay returns it
// to the caller (relayAnswer, failCalls), or drops it because the caller's
// process was restarted since: every request recorded ends in the trace.
// What the conductor answers itself is a request to "conductor" and its
// answer (traceByConductor); so is what it answers a caller after taking
// a peer's answer itself, which goes to "conductor" (hookMayTake). A
// failure it gives for a peer that never answered is its own answer, from
// "conductor", to the request that peer was sent (traceFailed). Each
// hook is one nil test of the recorder, which the chain and each of its
// peers hold (never a call, so that a relayed request costs not a byte
// more): a chain that is not traced pays nothing else.

// traceSend records a request (id != nil) or notification from `from` (nil:
// the conductor) to `to`, as the destination sees it. The trace keeps id.
func (c *chain) traceSend(from, to *peer, id json.RawMessage, method string, params json.RawMessage) {
	c.trace.Send(traceName(from), to.name, id, method, params, to.pos < 0 || (from != nil && from.pos < 0))
}

// Where the trace is with a call (call.traced).
const (
	traceSent     = iota // its request is recorded (or is not held)
	traceAnswered        // its answer is recorded
	traceHeld            // its request is not recorded: a gate holds it, or it was never sent

	// traceTaken, beside the state, marks a call whose answer the
	// conductor takes (see takeAnswer): recorded as going to the
	// conductor, and, for a request the conductor sends in its caller's
	// stead (a retry), the request as the conductor's.
	traceTaken = 1 << 4
)

// traceMove moves cl's trace from state from to state to, keeping its
// mark, and reports whether it was in from.
func (cl *call) traceMove(from, to uint32) bool {
	for {
		old := cl.traced.Load()
		if old&^traceTaken != from {
			return false
		}
		if cl.traced.CompareAndSwap(old, old&traceTaken|to) {
			return true
		}
	}
}

// traceSwap puts cl's trace in state to, keeping its mark, and returns
// the state it was in and whether it is marked.
func (cl *call) traceSwap(to uint32) (was uint32, taken bool) {
	for {
		old := cl.traced.Load()
		if cl.traced.CompareAndSwap(old, old&traceTaken|to) {
			return old &^ traceTaken, old&traceTaken != 0
		}
	}
}

func (cl *call) taken() bool { return cl.traced.Load()&traceTaken != 0 }

// traceReply records the answer to cl: result, or an error object; only
// the first, for a request the conductor answered before the peer did.
// A request never sent (a gate held it and never let it go, or cl.to's
// outbox was closed: see sendTraced) never reached cl.to: the conductor
// answered it, and the trace says so (traceByConductor).
func (cl *call) traceReply(result, err json.RawMessage) { cl.traceEnd(result, err, false) }

// traceFailed records e, the conductor's own error object, as the answer
// to cl, which cl.to never gave (it is gone, say): from the conductor,
// not from cl.to.
func (cl *call) traceFailed(e json.RawMessage) { cl.traceEnd(nil, e, true) }

// traceEnd is traceReply, for an answer from the conductor if own.
func (cl *call) traceEnd(result, err json.RawMessage, own bool) {
	body := result
	if err != nil {
		body = err
	}
	was, taken := cl.traceSwap(traceAnswered)
	switch was {
	case traceAnswered:
		return // the trace has its answer already
	case traceHeld:
		if cl.from != nil && !taken { // else the conductor's own, which no one saw
			traceByConductor(cl.from, cl.fromID, callerMethod(cl), cl.params, body, err != nil)
		}
		return
	}
	to := traceName(cl.from)
	if taken {
		to = conductorName
	}
	if own {
		cl.to.trace.ReplyFor(cl.to.name, conductorName, to, wire.IntID(cl.id), body, true)
		return
	}
	cl.to.trace.Reply(cl.to.name, to, wire.IntID(cl.id), body, err != nil)
}

// A hook may take a peer's answer for the conductor: retry the request
// in the proxy's next dialect (retryInitialize), or give the caller
// another answer (a proxy's initialize refused in every dialect, or
// answered as by an agent; an owner's refusal of mcp/connect, which
// tells the conductor to open the connection itself). The trace then
// says what happened, as it does of every answer the conductor gives
// itself: the peer's answer goes to the conductor, a retry is the
// conductor's own request (and its answer the conductor's), and what the
// caller gets is the conductor's answer to a request from the caller to
// the conductor, under the caller's id (traceByConductor). An answer the
// hook only amends (capabilities, _meta) goes to the caller as the peer's.
// These are the calls whose hooks may do so, and those the conductor
// sends in their caller's stead (marked: a retry, an initialize resent
// past a bypassed proxy); only initialize and mcp/connect, so that no
// other answer waits for its hook to be traced.
func (cl *call) hookMayTake() bool {
	return cl.from != nil && cl.onResponse != nil && (cl.dialect != nil || isConnect(cl.method) || cl.taken())
}

// isConnect reports whether method is mcp/connect in any dialect's
// spelling: a traced connect keeps its caller's (mcpConnect).
func isConnect(method string) bool {
	m, _ := wire.MCPMethod(method)
	return m == methodMCPConnect
}

// takeAnswer records the answer to cl, result or an error object, as
// taken by the conductor: it goes to the conductor. It marks cl so that
// its caller's answer, whenever it is given, is traced as the
// conductor's (traceCallerAnswer).
func (cl *call) takeAnswer(result, err json.RawMessage) {
	cl.traced.Or(traceTaken)
	cl.traceReply(result, err)
}

// takeFailed is takeAnswer for e, the conductor's own error object, which
// cl.to never gave (see traceFailed).
func (cl *call) takeFailed(e json.RawMessage) {
	cl.traced.Or(traceTaken)
	cl.traceFailed(e)
}

// markTaken marks cl, a request the conductor sends in its caller's
// stead, before it is sent: traced from the conductor, and answered to
// it.
func (cl *call) markTaken() { cl.traced.Or(traceTaken) }

// traceHooked records the answer to cl, a call whose hook may take it
// (hookMayTake), once the hook has seen it: came is the peer's answer,
// shown what the hook made of it, which the caller gets (from the hook
// itself, if it returned true), unless the hook recorded it already: a
// retry does (retryInitialize), and so does a hook that sends more after
// its answer (mcpConnect's, what the connection held), calling this
// itself before it does, so that the trace keeps the order.
func (cl *call) traceHooked(came, shown *wire.Message) {
	if cl.traced.Load()&^traceTaken == traceAnswered {
		return // the hook recorded it
	}
	if !cl.taken() && sameOutcome(came, shown) {
		cl.traceReply(came.Result, came.Error) // passed on, perhaps amended
		return
	}
	cl.takeAnswer(came.Result, came.Error)
	cl.traceCallerAnswer(shown.Result, shown.Error)
}

// sameOutcome reports whether shown, what a hook made of the answer came,
// tells the caller what came said: both a result, or the same error.
func sameOutcome(came, shown *wire.Message) bool {
	if came.Error == nil || shown.Error == nil {
		return came.Error == nil && shown.Error == nil
	}
	return bytes.Equal(came.Error, shown.Error)
}

// traceCallerAnswer records the answer cl's caller gets, result or an
// error object, as the conductor's, if the conductor took cl's answer (or
// cl is its retry): a request from the caller to the conductor, and its
// answer.
func (cl *call) traceCallerAnswer(result, err json.RawMessage) {
	if cl.from == nil || !cl.taken() {
		return
	}
	body := result
	if err != nil {
		body = err
	}
	traceByConductor(cl.from, cl.fromID, callerMethod(cl), cl.params, body, err != nil)
}

// callerMethod is the method cl's caller sent, for a call the conductor
// may take the answer of: the client's initialize in its dialect (a
// parent conductor's proxy/initialize), a proxy's initialize, or
// mcp/connect as the caller spelled it.
func callerMethod(cl *call) string {
	if cl.dialect == nil {
		return cl.method
	}
	if cl.from.pos == 0 {
		if d := cl.from.dialect.Load(); d != nil {
			return d.Initialize
		}
	}
	return wire.MethodInitialize
}

// notSent says that cl, of params, has not been sent (yet): should it be
// answered before it is, the answer is the conductor's (see traceReply).
// It reports whether cl keeps params for that alone.
func (cl *call) notSent(params json.RawMessage) (own bool) {
	if cl.params == nil {
		cl.params, own = params, true // recorded with the conductor's answer
	}
	cl.traceMove(traceSent, traceHeld)
	return own
}

// traceRefused records a request from `from`, under id, that the
// conductor answers itself with e and never sends on: a request to the
// conductor, and its answer.
func traceRefused(from *peer, id json.RawMessage, method string, params json.RawMessage, e *wire.Error) {
	traceByConductor(from, id, method, params, e.Encode(), true)
}

// traceByConductor records a request from `from`, under id, that the
// conductor answers itself with body (an error object if isError): a
// request to the conductor, and its answer.
func traceByConductor(from *peer, id json.RawMessage, method string, params, body json.RawMessage, isError bool) {
	rec, id := from.trace, bytes.Clone(id)
	rec.Send(from.name, conductorName, id, method, params, from.pos < 0)
	rec.Reply(conductorName, from.name, id, body, isError)
}

// answerItself answers m, a request from `from` that the conductor
// answers itself with result (in batch b, if any), and traces it so.
func (c *chain) answerItself(from *peer, m *wire.Message, result json.RawMessage, b *batch) {
	if c.trace != nil {
		method, params := tracedAs(m)
		traceByConductor(from, m.ID, method, params, result, false)
	}
	answer(from, b, encodeResponse(m.ID, result))
}

// tracedAs returns the method and params a trace records m, a request the
// conductor answers itself, as: those of the message a successor envelope
// carries, as it records every envelope it relays, or m's own for an
// envelope it cannot read (which is why it is refused) or a plain message.
func tracedAs(m *wire.Message) (string, json.RawMessage) {
	if wire.IsSuccessor(m.Method) {
		if method, params, err := m.Unwrap(); err == nil {
			return method, params
		}
	}
	return m.Method, m.Params
}

// sendTraced sends to `to` a message from `from` (nil: the conductor),
// line, in a traced chain, recording it (id, method, params) as it goes:
// at once, or, while a restarted proxy's gate holds what is sent to it
// (outbox.hold), when the gate lets it go, which is when it is sent. One
// the gate never lets go, or that to's closed outbox drops, is never
// recorded as sent; a request among them, sent for cl (which notSent
// marked, owning params if own), is answered by the conductor, and traced
// so (traceReply). o is to's outbox; nil: the current link's. It reports
// whether the outbox took the line.
func (c *chain) sendTraced(o *outbox, cl *call, own bool, from, to *peer, id json.RawMessage, method string, params json.RawMessage, line ...[]byte) bool {
	if o == nil {
		o = to.link.Load().out
	}
	// The trace keeps id, which relayCall makes on its stack: a copy, made
	// only when tracing.
	kept := bytes.Clone(id)
	return o.putTraced(line, kindOf(id), &tracedSend{c: c, cl: cl, own: own, from: from, to: to, id: kept, method: method, params: params})
}

// A tracedSend is a message sendTraced records as it goes: made on the
// caller's stack, and copied only while a gate holds the message.
type tracedSend struct {
	c        *chain
	cl       *call
	own      bool
	from, to *peer
	id       json.RawMessage
	method   string
	params   json.RawMessage
}

// record records s as sent.
func (s *tracedSend) record() {
	from := s.from
	if s.cl != nil {
		if !s.cl.traceMove(traceHeld, traceSent) {
			return
		}
		if s.own {
			s.cl.params = nil // kept only in case it was never sent
		}
		if s.cl.taken() {
			from = nil // a retry: the conductor's own request
		}
	}
	s.c.traceSend(from, s.to, s.id, s.method, s.params)
}

// traceName names a peer in a trace; the conductor, for calls it makes
// itself, is "conductor".
func traceName(p *peer) string {
	if p == nil {
		return conductorName
	}
	return p.name
}

// bridgedNames hands out the names bridged MCP connections are traced and
// logged under: bridgedPrefix and the server's name, with "#2", "#3", ...
// after it for a connection opened while another of that name is open
// (to the same server, or to another one of that name). Each connection
// numbers the requests it is sent from 1, and a trace pairs a response
// with its request by who was asked and the id: two open connections of
// one name would take each other's answers. A name is free again once its
// connection has ended and failed what it had been asked.
type bridgedNames struct {
	mu   sync.Mutex
	open map[string]bool
}

// take returns a name for a new connection to the server named server.
func (b *bridgedNames) take(server string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]bool{}
	}
	base := bridgedPrefix + server
	name := base
	for n := 2; b.open[name]; n++ {
		name = base + "#" + strconv.Itoa(n)
	}
	b.open[name] = true
	return name
}

// release frees the name of a connection that has ended.
func (b *bridgedNames) release(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, name)
}
