package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creachadair/jrpc2"
	"golang.org/x/sync/errgroup"

	"github.com/acp-conductor/acp-conductor/internal/tally"
	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Inside the package, as in package conductor, a few verbs each say one way
// a message moves: send queues a line on the outbox (the outbox puts it);
// relay passes on a message no handler claimed; answer sends the response
// to a request the proxy received (answerError with the proxy's own error,
// relayAnswer with what a server answered); complete hands a response to
// the call awaiting it. Forward, Call and Notify are the public API's.

// A Conn is a proxy's connection to its conductor, and through it to both of
// its peers. Handlers reach it with [Request.Conn] to send requests and
// notifications of their own. Its methods may be called concurrently.
type Conn struct {
	p        *Proxy
	log      *slog.Logger
	out      *outbox
	ctx      context.Context // parent of every handler's context
	cancel   context.CancelCauseFunc
	handlers errgroup.Group // every running handler
	lastID   atomic.Int64
	dialect  atomic.Pointer[wire.Dialect] // the one it was initialized in; nil for wire.RFD
	// free is the holder of what Call and Notify send under a context no
	// handler gave. It never holds a place, and what it sends goes ahead of
	// every place: sent in no handler's place, it has no reason to wait for
	// one, and the handler that sent it may be waiting for its answer while
	// it holds its own place.
	free holder
	mcp  *mcpHost // serves p.MCPServers; nil if there are none
	// unconducted is set once a plain initialize was refused: the proxy
	// was started as an agent, by an editor. Only the reader uses it.
	unconducted bool
	// watching is set once a handler has started watchHolds, which runs
	// among the handlers until the connection stops. Only the reader
	// uses it.
	watching bool

	mu     sync.Mutex
	calls  map[int64]*call    // requests sent, by the proxy's own id, until answered
	served map[string]*served // requests received, by id, until answered
	err    error              // set once reading has stopped: a *cutOff
	warned map[string]bool    // what was warned of once: see warnOnce
	// tallies counts, by what and who, the bad answers a peer may send
	// without end, so that they cannot flood the log: see counter.
	tallies map[tallyKey]*tally.Counter
}

// A tallyKey names a kind of bad answer and who sends it.
type tallyKey struct{ what, who string }

// A call is a request the proxy sent and is waiting to see answered.
type call struct {
	// A relayed request is answered by passing the response back under
	// relayFor, the id it came with, under which relayed is what served
	// holds for it. One sent for an MCP server is answered by calling
	// onAnswer on the reader, in the order answers arrive. Any other has a
	// caller waiting on answer, which receives nil if the connection closes
	// first.
	relayFor string
	relayed  served
	onAnswer func(*wire.Message)
	answer   chan *wire.Message
	holder   *holder // the waiting handler's, or nil
	to       Side    // who answers it
}

// A served request is one the proxy received and has not yet answered.
type served struct {
	// A handled request has its handler's cancel; a relayed one, the id it
	// went on under.
	cancel    context.CancelCauseFunc
	relayedAs int64
}

func newConn(ctx context.Context, p *Proxy) *Conn {
	c := &Conn{
		p:      p,
		log:    p.Logger,
		out:    newOutbox(),
		calls:  make(map[int64]*call),
		served: make(map[string]*served),
		free:   holder{free: true},
	}
	if c.log == nil {
		c.log = defaultLogger()
	}
	// Not ctx's child: stop cancels it with a cause that says the proxy
	// stopped, which a handler can tell from its caller's cancel.
	c.ctx, c.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if len(p.MCPServers) > 0 {
		c.mcp = newMCPHost(c, p.MCPServers)
	}
	return c
}

// defaultLogger returns the logger of a proxy that set none: warnings and
// errors, as text, on standard error, which a conductor logs for each
// component; standard output carries only the protocol. One serves every
// connection, so that a connection costs no more than it did.
var defaultLogger = sync.OnceValue(func() *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	if os.Getenv(componentEnv) != "" {
		// acp-conductor logs each line of our stderr with the time: one
		// time is enough.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
})

// componentEnv is supervisor.ComponentEnv, which acp-conductor sets for
// every component it starts.
const componentEnv = "ACP_CONDUCTOR_COMPONENT"

// Call sends a request to one side and waits for its answer. An error answer
// is returned as an *[Error]. params is sent as it is if it is a
// json.RawMessage, and encoded as JSON otherwise; nil, or a value that is
// JSON null, sends none. JSON-RPC params are an object or an array: Call
// returns an error, and sends nothing, for any other value.
//
// Called from a handler (with its ctx, or one derived from it), the request
// is sent in the handler's place in the outgoing order. Under any other
// context (context.Background(), say) it is sent in no one's place, ahead of
// what waits for a handler, so that a handler may wait for its answer while
// it holds its place; see the package documentation. If ctx is done
// before the answer arrives, Call tells the conductor with $/cancel_request
// and returns ctx.Err(); if it is done already, Call sends nothing.
//
// A handler that sends under both may see its messages leave out of the
// order it sent them in. What it sends under ctx waits in its place, behind
// every earlier handler that still holds its own (one that has not
// returned, detached, or begun to wait for a peer); what it sends after
// that under a context no handler gave goes past all of them. Here the
// client may be asked before it hears the update:
//
//	conn.Notify(ctx, proxy.Predecessor, "session/update", update)
//	conn.Call(context.Background(), proxy.Predecessor, "session/request_permission", ask)
//
// To keep the order, send both under ctx, or contexts derived from it, which
// keep its place: context.WithTimeout(ctx, d) to bound the wait,
// context.WithoutCancel(ctx) for a call that the cancellation of the
// handler's request must not end. Call gives up the place while it waits, so
// a handler never waits behind itself:
//
//	conn.Notify(ctx, proxy.Predecessor, "session/update", update)
//	conn.Call(context.WithoutCancel(ctx), proxy.Predecessor, "session/request_permission", ask)
func (c *Conn) Call(ctx context.Context, to Side, method string, params any) (json.RawMessage, error) {
	raw, err := encodeParams(params)
	if err != nil {
		return nil, fmt.Errorf("proxy: %s: %w", method, err)
	}
	result, _, err := c.call(ctx, c.holderFrom(ctx), to, method, raw, nil)
	return result, err
}

// Notify sends a notification to one side, with params as [Conn.Call]
// takes them. It returns once the notification is queued; from a handler,
// it is queued in the handler's place, and otherwise, as for [Conn.Call],
// ahead of what waits for a handler, and so perhaps ahead of what a handler
// sent earlier under its own ctx: see [Conn.Call] for how to keep the order.
//
// If ctx is done, Notify sends nothing and returns ctx.Err(). A handler's
// ctx is done once its request is cancelled, though Forward still returns
// the answer (a prompt's stopReason "cancelled"): what the handler sends
// after that goes under context.WithoutCancel(ctx), which keeps its place.
func (c *Conn) Notify(ctx context.Context, to Side, method string, params any) error {
	raw, err := encodeParams(params)
	if err != nil {
		return fmt.Errorf("proxy: %s: %w", method, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.notify(c.holderFrom(ctx), to, method, raw, nil)
}

// notify and call send what Notify and Call do, with extra, the members
// JSON-RPC does not define of the message a handler forwards (see
// extraOf); call returns those of the answer, which its handler's answer
// carries in turn.
func (c *Conn) notify(h *holder, to Side, method string, params, extra json.RawMessage) error {
	params, err := checkParams(params)
	if err != nil {
		return fmt.Errorf("proxy: %s: %w", method, err)
	}
	if err := c.out.put(h, c.encode(to, nil, method, params, extra)); err != nil {
		return c.unsent(method, err)
	}
	return nil
}

// unsent returns the error of a message to method that was not sent
// because the connection had ended: err, the outbox's, unless the reading
// has stopped, which says why better.
func (c *Conn) unsent(method string, err error) error {
	if cut, ok := errors.AsType[*cutOff](c.closed()); ok {
		err = cut.why
	} else if err == ErrClosed {
		err = nil
	}
	return &notSent{proxy: c.p.name(), method: method, why: err}
}

func (c *Conn) call(ctx context.Context, h *holder, to Side, method string, params, extra json.RawMessage) (result, answerExtra json.RawMessage, err error) {
	params, err = checkParams(params)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: %s: %w", method, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	n := c.newID()
	id := wire.IntID(n)
	cl := &call{answer: make(chan *wire.Message, 1), holder: h, to: to}
	if err := c.register(n, cl); err != nil {
		return nil, nil, c.unsent(method, err)
	}
	if err := c.out.putWaiting(h, c.encode(to, id, method, params, extra), true); err != nil {
		c.forget(n)
		return nil, nil, c.unsent(method, err)
	}
	var m *wire.Message
	select {
	case m = <-cl.answer:
	case <-ctx.Done():
		if cause, ok := errors.AsType[*cancelRequested](context.Cause(ctx)); ok {
			// The caller asked to cancel the request this call serves: pass
			// the cancel on and wait, since the callee must still answer
			// (perhaps with partial results, or stopReason "cancelled"),
			// and that answer is the caller's.
			c.cancelRequest(id, cause.params, cause.extra)
			m = <-cl.answer
			break
		}
		if c.forget(n) {
			c.out.resume(h, false)
			c.cancelRequest(id, nil, nil)
			return nil, nil, ctx.Err()
		}
		m = <-cl.answer // the answer is already on its way
	}
	if m == nil {
		return nil, nil, c.closed()
	}
	answerExtra = extraOf(m)
	if m.Error != nil {
		return nil, answerExtra, decodeError(m.Error)
	}
	return m.Result, answerExtra, nil
}

// relay passes on a message no handler claimed, and, for a request, arranges
// for its answer to be passed back. It runs on the reader and so keeps the
// order of arrival.
func (c *Conn) relay(id json.RawMessage, from Side, method string, params, extra json.RawMessage) {
	to := from.other()
	if id == nil {
		c.out.put(nil, c.encode(to, nil, method, params, extra))
		return
	}
	// One allocation for the call and its entry in served, and one for the
	// id, a copy (it aliases the whole line it came in, which must not stay
	// live until the answer) that is also served's key.
	ours := c.newID()
	cl := &call{relayFor: string(id), relayed: served{relayedAs: ours}, to: to}
	if err := c.register(ours, cl); err != nil {
		return
	}
	c.mu.Lock()
	c.served[cl.relayFor] = &cl.relayed
	c.mu.Unlock()
	var buf [20]byte
	c.out.put(nil, c.encode(to, strconv.AppendInt(buf[:0], ours, 10), method, params, extra))
}

// handle runs fn for a message in a goroutine of its own, holding the
// message's place in the outgoing order.
func (c *Conn) handle(id json.RawMessage, from Side, method string, params, extra json.RawMessage, fn Handler) {
	h := &holder{from: from, method: method}
	ctx, cancel := context.WithCancelCause(context.WithValue(c.ctx, holderKey{}, h))
	r := &Request{Method: method, Params: params, From: from, id: id, extra: extra, conn: c, holder: h}
	if id != nil {
		c.mu.Lock()
		c.served[string(id)] = &served{cancel: cancel}
		c.mu.Unlock()
	}
	c.out.hold(h)
	if !c.watching {
		c.watching = true
		if d := c.p.holdWarning(); d >= 0 {
			c.handlers.Go(func() error {
				c.watchHolds(d)
				return nil
			})
		}
	}
	c.handlers.Go(func() error {
		defer c.out.release(h)
		defer cancel(nil)
		result, err := c.run(ctx, fn, r)
		if id == nil {
			if err != nil {
				c.log.Warn("notification handler failed", "method", method, "from", from, "error", err)
			}
			return nil
		}
		if result == nil && err == nil {
			c.warnNull(from, method)
		}
		if err == nil && result != nil && !wire.Valid(result) {
			// The caller hears only that the proxy failed; the proxy's
			// author needs to hear which handler did.
			c.log.Error("handler returned a result that is not JSON", "method", method, "from", from, "result", string(clip(result)))
			err = fmt.Errorf("proxy %s: the %s handler returned a result that is not JSON", c.p.name(), method)
		}
		if e, ok := errors.AsType[*Error](err); ok && len(e.Data) > 0 && !wire.Valid(e.Data) {
			c.log.Warn("handler returned an Error whose Data is not JSON: sent as a JSON string", "method", method, "from", from, "data", string(clip(e.Data)))
		}
		c.answer(h, id, result, err, r.forwardedExtra())
		return nil
	})
}

// watchHolds warns, once for each handler, of one that holds one place
// for d or longer: all traffic behind it waits, and nothing else would
// tell its author why the chain froze. It runs, from the first handler
// on, until the connection stops, and wakes only when the oldest place
// not yet warned of would be overdue, or every d, so that handling a
// message costs no more than noting when its place was taken.
func (c *Conn) watchHolds(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		stuck, next := c.out.stuck(d, time.Now())
		for _, h := range stuck {
			// Not under the outbox's lock: a slow log must not hold up
			// the traffic, nor the handler's answer.
			c.log.Warn(fmt.Sprintf("a handler has held its place in the outgoing order for over %v, holding up all later traffic both ways; a handler that waits on anything but its peers should call Request.Detach first", d),
				"method", h.method, "from", h.from)
		}
		t.Reset(next)
	}
}

// warnNull warns, once for each method, that a request handler returned no
// result and no error, which answers "result": null: few ACP methods accept
// that, and the handler more likely forgot to forward or to build an answer.
// A null meant as such is returned as json.RawMessage("null").
func (c *Conn) warnNull(from Side, method string) {
	if c.warnOnce("null " + from.String() + " " + method) {
		c.log.Warn(`a request handler returned a nil result and a nil error, which answers "result": null; return json.RawMessage("null") if that is meant`,
			"method", method, "from", from)
	}
}

// warnOnce reports whether key is new: whether what it names is to be
// warned of, rather than logged at debug level as said before.
func (c *Conn) warnOnce(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[key] {
		return false
	}
	if c.warned == nil {
		c.warned = make(map[string]bool)
	}
	c.warned[key] = true
	return true
}

// counter returns the tally of what from who, made on first use.
func (c *Conn) counter(what, who string) *tally.Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tallyKey{what, who}
	t := c.tallies[k]
	if t == nil {
		if c.tallies == nil {
			c.tallies = make(map[tallyKey]*tally.Counter)
		}
		t = new(tally.Counter)
		c.tallies[k] = t
	}
	return t
}

// logTallies logs, once the connection has ended, how many of each kind of
// bad answer each peer sent, where some were not logged yet.
func (c *Conn) logTallies() {
	c.mu.Lock()
	if len(c.tallies) == 0 { // as a rule: nothing to sort or log
		c.mu.Unlock()
		return
	}
	keys := slices.SortedFunc(maps.Keys(c.tallies), func(a, b tallyKey) int {
		return cmp.Or(cmp.Compare(a.what, b.what), cmp.Compare(a.who, b.who))
	})
	tallies := make([]*tally.Counter, len(keys))
	for i, k := range keys {
		tallies[i] = c.tallies[k]
	}
	c.mu.Unlock()
	for i, k := range keys {
		if n, ok := tallies[i].Unreported(); ok {
			c.log.Debug(k.what+", in all", "from", k.who, "count", n)
		}
	}
}

// logBothAnswers is the diagnostic, logged in full once for each of
// whoever answers and then counted, for a response that carries both a
// result and an error.
const logBothAnswers = "response with both result and error, which JSON-RPC 2.0 forbids: taken as the error, its result dropped"

// bothAnswers makes m, a response from who with both a result and an
// error, the error alone, and says so the first time who sends one,
// counting the rest, which a peer may send without end, as the conductor
// does. The error is the answer wherever it goes (relayed, to Forward or
// Call, to an MCP server), so that no reader takes the request as done:
// the TypeScript SDK fails such a response too, and another reader may
// take either member. A result beside "error": null is the
// result (see wire.Parse).
func (c *Conn) bothAnswers(who string, m *wire.Message) {
	switch n, whole, count := c.counter(logBothAnswers, who).Add(1); {
	case whole:
		c.log.Warn(logBothAnswers, "from", who, "id", string(m.ID), "result", string(clip(m.Result)))
	case count:
		c.log.Debug(logBothAnswers+", so far", "from", who, "count", n)
	}
	m.Result = nil
}

// logMalformedError is the diagnostic, logged in full once for each of
// whoever answers and then counted, for a response whose error is not a
// JSON-RPC error object.
const logMalformedError = `response with a malformed error, not an object with an integer "code" and a string "message": answered as the proxy's -32603, the error in its data`

// malformedError returns what stands for raw, the error of a response to
// id from who that is not the object JSON-RPC 2.0 requires ("error": null,
// a string, an object without an integer code or a string message): the
// proxy's own internal error, naming the proxy and who answered, with raw
// in data as it came, as the conductor does. Passed on as it came, such an
// answer is no response to the TypeScript SDK, which fails the request with
// its own -32600 naming nobody, and a handler would get an *Error that says
// nothing ([0] "" for null).
func (c *Conn) malformedError(who string, id, raw json.RawMessage) json.RawMessage {
	switch n, whole, count := c.counter(logMalformedError, who).Add(1); {
	case whole:
		c.log.Warn(logMalformedError, "from", who, "id", string(id), "error", string(clip(raw)))
	case count:
		c.log.Debug(logMalformedError+", so far", "from", who, "count", n)
	}
	e := wire.Errorf(jrpc2.InternalError, "proxy %s: %s answered with a malformed error, not an object with an integer code and a string message", c.p.name(), who)
	out, err := wire.SetPath(e.Encode(), []string{"data"}, raw)
	if err != nil { // it cannot be: the object is the proxy's own
		out = e.WithData(raw).Encode()
	}
	return out
}

// clip bounds what a log line quotes of a message.
func clip(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}

// run runs fn, turning a panic into an error, as net/http survives a
// handler's: the one request fails, not the proxy and every session in it.
func (c *Conn) run(ctx context.Context, fn Handler, r *Request) (result json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panicked", "method", r.Method, "from", r.From, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("proxy: the %s handler panicked: %v", r.Method, p)
		}
	}()
	return fn(ctx, r)
}

// answer sends the response to a request the proxy received, with extra
// (see extraOf) after its members.
func (c *Conn) answer(h *holder, id, result json.RawMessage, err error, extra json.RawMessage) {
	c.mu.Lock()
	delete(c.served, string(id))
	c.mu.Unlock()
	if err == nil {
		if result, err = checkParams(result); err != nil {
			err = fmt.Errorf("handler result: %w", err)
		}
	}
	m := &wire.Message{ID: id, Result: result}
	if err != nil {
		m = &wire.Message{ID: id, Error: errorObject(err)}
	}
	c.out.put(h, append(withExtra(m.Append(nil), extra), '\n'))
}

// complete hands a response from the conductor to the call it answers.
func (c *Conn) complete(m *wire.Message) {
	var cl *call
	n, ours := ownID(m.ID)
	if !ours { // spelled otherwise (5.0 for 5), as JSON.parse reads it
		n, ours = wire.IntOf(m.ID)
		ours = ours && n > 0
	}
	c.mu.Lock()
	if ours {
		cl = c.calls[n]
		delete(c.calls, n)
	}
	if cl != nil && cl.relayFor != "" {
		delete(c.served, cl.relayFor)
	}
	c.mu.Unlock()
	if cl == nil {
		c.log.Warn("dropped a response to an unknown id", "id", string(m.ID))
		return
	}
	if m.Error != nil && m.Result != nil {
		c.bothAnswers("its "+cl.to.String(), m)
	}
	if m.MalformedError() { // noted by Parse: nothing to check here
		m.Error = c.malformedError("its "+cl.to.String(), m.ID, m.Error)
	}
	switch {
	case cl.relayFor != "":
		out := wire.Message{ID: json.RawMessage(cl.relayFor), Result: m.Result, Error: m.Error}
		line := out.Append(make([]byte, 0, wire.ResponseSize(out.ID, out.Result, out.Error)+1))
		if m.Extra() { // rare: a flag's test
			line = withExtra(line, m.AppendExtra(nil))
		}
		c.out.put(nil, append(line, '\n'))
	case cl.onAnswer != nil:
		cl.onAnswer(new(wire.Message(*m))) // m is the reader's, reused for the next line
	default:
		c.out.resume(cl.holder, true)
		cl.answer <- new(wire.Message(*m))
	}
}

// shutdown ends the connection once reading has stopped, for why (nil at
// the end of the input): no answer can arrive any more. It answers the
// successor's requests it relayed, and fails every waiting call, with the
// error that says so, cancels and waits for every handler, and lets the
// writer finish.
//
// One input carries both sides, so its end says nothing of either; what
// the proxy writes then reaches whoever still reads through the conductor.
// acp-conductor closes the input of the component nearest the client first,
// reads its output to the end, and only then closes the next one's: the
// successor still waits on what the proxy passed toward the client, and
// hears why it will not come. The predecessor's requests it has answered
// itself before closing the input, and the predecessor's input is closed
// already, so an answer to them would be dropped: they get none.
func (c *Conn) shutdown(why error) {
	c.mu.Lock()
	c.err = &cutOff{proxy: c.p.name(), why: why}
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	var relayed []int64
	for n, cl := range calls {
		if cl.relayFor != "" && cl.to == Predecessor {
			relayed = append(relayed, n)
		}
	}
	if len(relayed) > 0 {
		slices.Sort(relayed) // in the order relayed
		cut := errorObject(c.err)
		for _, n := range relayed {
			m := wire.Message{ID: json.RawMessage(calls[n].relayFor), Error: cut}
			c.out.put(nil, append(m.Append(nil), '\n'))
		}
	}
	for _, cl := range calls {
		if cl.answer != nil {
			c.out.resume(cl.holder, false)
			cl.answer <- nil
		}
	}
	c.stop(why)
	c.handlers.Wait() // handlers never fail; they answer instead
	if c.mcp != nil {
		c.mcp.stop()
	}
	c.logTallies() // no answer comes any more
	c.out.close()
}

// stop cancels every handler's context, and the MCP connections', with a
// cause that is ErrClosed to errors.Is, and why, what stopped the proxy,
// too (nil at the end of its input).
func (c *Conn) stop(why error) {
	c.cancel(&stopped{proxy: c.p.name(), why: why})
}

func (c *Conn) register(n int64, cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.calls[n] = cl
	return nil
}

// closed returns the error of a call cut off by shutdown.
func (c *Conn) closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// forget withdraws a call, reporting false if its answer came first.
func (c *Conn) forget(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.calls[n]
	delete(c.calls, n)
	return ok
}

// getDialect returns the dialect the conductor initialized the proxy in.
func (c *Conn) getDialect() *wire.Dialect {
	if d := c.dialect.Load(); d != nil {
		return d
	}
	return wire.RFD
}

// newID returns an id for a request of the proxy's own: a positive integer.
func (c *Conn) newID() int64 { return c.lastID.Add(1) }

// ownID reads id as one the proxy gave, and reports false for any it
// cannot have given: anything but a positive integer as strconv writes it,
// of at most 18 digits.
func ownID(id json.RawMessage) (int64, bool) {
	if len(id) == 0 || len(id) > 18 || id[0] == '0' {
		return 0, false
	}
	var n int64
	for _, d := range id {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// encode builds the line that sends a request (id != nil) or notification
// to one side: plain to the predecessor, wrapped to the successor. extra,
// the message's members JSON-RPC does not define (see extraOf), go after
// its method and params: wrapped, in the envelope's params, where they stay
// with the message they came with, as the conductor puts them.
func (c *Conn) encode(to Side, id json.RawMessage, method string, params, extra json.RawMessage) []byte {
	if len(extra) > 0 { // rare: built whole
		envelope := ""
		if to == Successor {
			envelope = c.getDialect().Successor(id)
		}
		return append(wire.AppendCallExtra(nil, id, envelope, method, params, extra), '\n')
	}
	if to == Successor {
		envelope := c.getDialect().Successor(id)
		buf := make([]byte, 0, wire.WrappedSize(id, envelope, method, params)+1)
		return append(wire.AppendWrapped(buf, id, envelope, method, params), '\n')
	}
	m := wire.Message{ID: id, Method: method, Params: params}
	return append(m.Append(make([]byte, 0, len(params)+len(method)+len(id)+64)), '\n')
}

// withExtra returns obj, a JSON object built here, with the members extra
// (each `,name:value`) added before its closing brace.
func withExtra(obj, extra []byte) []byte {
	if len(extra) == 0 {
		return obj
	}
	return append(append(obj[:len(obj)-1], extra...), '}')
}

type holderKey struct{}

// holderFrom returns the holder of the handler whose context ctx is, or
// derives from, or c.free if there is none.
func (c *Conn) holderFrom(ctx context.Context) *holder {
	if h, _ := ctx.Value(holderKey{}).(*holder); h != nil {
		return h
	}
	return &c.free
}

// encodeParams returns v as raw JSON params: an object or an array, which
// is all JSON-RPC allows, or nil for none. A null, such as a nil pointer
// encodes to, is none too; any other value is refused here, since its peer
// could only refuse the message, and a notification's sender never hears
// of that.
func encodeParams(v any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = v
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0, trimmed[0] == '{', trimmed[0] == '[':
		return raw, nil // checkParams refuses what is not JSON
	case string(trimmed) == "null":
		return nil, nil
	default:
		return nil, errParamsNotStructured
	}
}

var errParamsNotStructured = errors.New("params must be a JSON object or array")

var errInvalidJSON = errors.New("invalid JSON")

// checkParams makes sure that raw JSON a handler supplied can go on the wire:
// that it is JSON, and that it fits on one line. JSON from the wire is
// returned as it is.
func checkParams(raw json.RawMessage) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	if !wire.Valid(raw) {
		return nil, errInvalidJSON
	}
	if bytes.IndexByte(raw, '\n') >= 0 {
		var buf bytes.Buffer
		json.Compact(&buf, raw) // valid, so cannot fail
		raw = buf.Bytes()
	}
	return raw, nil
}
