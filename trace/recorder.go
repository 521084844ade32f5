package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// DefaultBuffer is how many messages a Recorder holds for its writer before
// it starts leaving them out of the trace.
const DefaultBuffer = 16 << 10

// Options configure a Recorder.
type Options struct {
	// Detail is how much of each message is kept; empty means Full.
	Detail Detail
	// Buffer bounds the messages waiting for the writer; 0 means
	// DefaultBuffer.
	Buffer int
	// Logger hears of lost events and write errors; nil discards.
	Logger *zap.Logger
	// Live, if set, receives every event as it is written, for Serve.
	Live *Hub
	// CloseTimeout bounds how long Close waits for the writer, which a
	// file nobody reads (a FIFO, a pipe, a hung mount) can block for
	// ever; 0 means DefaultCloseTimeout.
	CloseTimeout time.Duration
}

// DefaultCloseTimeout is how long Close waits for the writer by default.
const DefaultCloseTimeout = 5 * time.Second

// A Recorder writes the trace of a running chain. Its Send and Reply
// methods are called on the relay's path and never block; a nil *Recorder
// records nothing, so the relay tests for nil once and pays nothing more
// when tracing is off.
//
// Chains that share one trace (acp-conductor serve runs one per network
// connection) each record through a Recorder from ForConnection: their
// events carry the connection, and their requests and responses pair
// within it, though the component names and ids repeat across chains.
type Recorder struct {
	*sink
	conn  string // every event's connection; "" for a trace of one chain
	owner bool   // made by NewRecorder: its Close closes the sink
}

// sink is what the Recorders of one trace share.
type sink struct {
	start   time.Time
	queue   chan record
	full    chan struct{} // signalled when the queue is half full (see run)
	stop    chan struct{} // closed by Close, before the queue
	dropped atomic.Int64
	gap     atomic.Int64 // dropped since the last gap was queued (see put)
	log     *zap.Logger

	// The secrets Redact was told, until the writer takes them.
	secretMu   sync.Mutex
	newSecrets []string
	hasSecrets atomic.Bool

	mu     sync.RWMutex // held for reading by senders, for writing by Close
	closed bool
	wait   time.Duration // Close's bound
	done   chan struct{} // closed when the writer has flushed and returned
	err    error         // the first write error, read after done
}

// A record is a message as the relay hands it over: only what it already
// holds, so that recording costs the relay a copy of this struct. The writer
// goroutine does the rest.
type record struct {
	at       time.Duration
	conn     string
	kind     uint8
	mcp      bool // crossed a bridged MCP connection
	from, to string
	asked    string // of a response from someone else than who was asked (ReplyFor)
	id       json.RawMessage
	method   string
	body     json.RawMessage // params, result or error
}

const (
	kindRequest uint8 = iota
	kindNotification
	kindResponse
	kindGap // messages left out here, as many as id says (see put)
)

// NewRecorder starts a recorder writing the trace to w (which may be nil
// when the trace only goes to opts.Live). Close stops it.
func NewRecorder(w io.Writer, opts Options) *Recorder {
	if opts.Detail == "" {
		opts.Detail = Full
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = DefaultCloseTimeout
	}
	r := &Recorder{owner: true, sink: &sink{
		wait:  opts.CloseTimeout,
		start: time.Now(),
		queue: make(chan record, opts.Buffer),
		full:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		log:   opts.Logger,
		done:  make(chan struct{}),
	}}
	wr := &writer{detail: opts.Detail, live: opts.Live}
	if w != nil {
		wr.out = bufio.NewWriterSize(w, 64<<10)
	}
	go r.run(wr)
	return r
}

// ForConnection returns a Recorder that writes to r's trace with every
// event marked as the connection id's. Its Close does nothing: r's owner
// closes the trace. For a nil r it returns nil.
func (r *Recorder) ForConnection(id string) *Recorder {
	if r == nil {
		return nil
	}
	return &Recorder{sink: r.sink, conn: id}
}

// Send records a request (id != nil, the id the receiver sees) or a
// notification going from one component to another, as it means: method
// and params are those inside any proxy/successor envelope. mcp says that
// one end is a bridged MCP client, whose messages are MCP, not ACP.
func (r *Recorder) Send(from, to string, id json.RawMessage, method string, params json.RawMessage, mcp bool) {
	k := kindNotification
	if id != nil {
		k = kindRequest
	}
	r.put(record{kind: k, mcp: mcp, from: from, to: to, id: id, method: method, body: params})
}

// Reply records the response to the request recorded under id from `to` to
// `from`: from is the component that answered (or failed to), to the one
// that asked. body is the result, or the error object when isError.
func (r *Recorder) Reply(from, to string, id json.RawMessage, body json.RawMessage, isError bool) {
	rec := record{kind: kindResponse, from: from, to: to, id: id, body: body}
	if isError {
		rec.method = "error" // the writer's marker; responses carry no method
	}
	r.put(rec)
}

// ReplyFor is Reply for a response from someone else than asked, the
// one the request was sent to: the conductor, answering with its own
// failure a request that asked will never answer (it has exited, say).
func (r *Recorder) ReplyFor(asked, from, to string, id json.RawMessage, body json.RawMessage, isError bool) {
	rec := record{kind: kindResponse, from: from, to: to, asked: asked, id: id, body: body}
	if isError {
		rec.method = "error"
	}
	r.put(rec)
}

func (r *Recorder) put(rec record) {
	if r.putLocked(rec) {
		// Logged with no lock held: a logger stalled on its output (a
		// stderr nobody reads) must not hold up Close, which would then
		// hold up every sender behind it, the relay among them.
		r.log.Warn("trace: the writer fell behind; events are being left out of the trace",
			zap.Int("buffer", cap(r.queue)))
	}
}

// putLocked queues rec, or leaves it out; it reports whether this was the
// first message left out, which put logs once it holds no lock.
func (r *Recorder) putLocked(rec record) (firstDrop bool) {
	rec.at = time.Since(r.start)
	rec.conn = r.conn
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return false
	}
	if r.gap.Load() != 0 && !r.markGap() {
		return r.drop()
	}
	select {
	case r.queue <- rec:
		if len(r.queue) >= (cap(r.queue)+1)/2 {
			select {
			case r.full <- struct{}{}:
			default:
			}
		}
		return false
	default:
		return r.drop()
	}
}

// drop counts a message left out of the trace, and reports whether it is
// the first, which is logged.
func (r *Recorder) drop() bool {
	r.gap.Add(1)
	return r.dropped.Add(1) == 1
}

// markGap queues, where messages were left out, an event that says how
// many, so that the trace shows the gap where it is rather than only the
// log; it reports whether the queue took it (else they count on). Called
// with r.mu held for reading.
func (r *Recorder) markGap() bool {
	n := r.gap.Swap(0)
	if n == 0 {
		return true // another sender marked it
	}
	select {
	case r.queue <- gapRecord(n, time.Since(r.start)):
		return true
	default:
		r.gap.Add(n)
		return false
	}
}

func gapRecord(n int64, at time.Duration) record {
	return record{kind: kindGap, at: at, id: strconv.AppendInt(nil, n, 10)}
}

// Dropped reports how many messages were left out of the trace so far.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Close stops recording, waits until everything recorded is written, and
// returns the first write error. A writer still blocked after the
// CloseTimeout is left behind, and Close reports it. It does not close
// the writer. On a Recorder from ForConnection it does nothing.
func (r *Recorder) Close() error {
	if !r.owner {
		return nil
	}
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.stop)
		close(r.queue)
	}
	r.mu.Unlock()
	bound := time.NewTimer(r.wait)
	defer bound.Stop()
	select {
	case <-r.done:
	case <-bound.C:
		return fmt.Errorf("trace: the writer has been blocked for %v (a file nobody reads?); what was not written is lost", r.wait)
	}
	if n := r.dropped.Load(); n > 0 {
		r.log.Warn("trace: events were left out of the trace", zap.Int64("dropped", n))
	}
	return r.err
}

// batchDelay is how long the writer lets records gather after the first
// of a batch before it writes them, unless the queue fills halfway first.
// Woken for each message instead, the writer took a fifth more onto the
// relay's round trip than its work: each wake-up of a parked goroutine
// costs the scheduler a thread's wake on another core. 1, 3 and 10 ms
// measured alike (7 interleaved rounds); a longer wait makes each batch,
// which shares the cores with the chain, longer. A person watching the
// trace, live or in a file being followed, does not see it.
const batchDelay = time.Millisecond

// run is the writer goroutine: it writes the records of each batch, then
// flushes.
func (r *Recorder) run(w *writer) {
	defer close(r.done)
	gather := time.NewTimer(batchDelay)
	gather.Stop()
	for {
		rec, ok := <-r.queue
		if !ok {
			break
		}
		r.takeSecrets(w)
		w.write(&rec)
		gather.Reset(batchDelay)
		select {
		case <-gather.C:
		case <-r.full:
		case <-r.stop:
		}
		gather.Stop()
		for n := len(r.queue); n > 0; n-- {
			rec := <-r.queue
			r.takeSecrets(w)
			w.write(&rec)
		}
		w.flush()
	}
	if n := r.gap.Swap(0); n > 0 { // the last messages were left out
		rec := gapRecord(n, time.Since(r.start))
		w.write(&rec)
	}
	w.flush()
	if w.err != nil {
		r.err = w.err
		r.log.Warn("trace: writing the trace failed; it is incomplete", zap.Error(w.err))
	}
}

// writer turns records into events. Only the writer goroutine uses it.
type writer struct {
	detail  Detail
	out     *bufio.Writer
	live    *Hub
	buf     []byte       // the line being written
	pending pendingTable // requests awaiting their response
	secrets secretSet    // what is written as redacted
	err     error
}

// pendingLimit bounds the requests a trace remembers awaiting their
// response. Some never get one in the trace: a peer that never answers,
// or an answer left out when the writer fell behind. Kept for ever, they
// would grow with a trace that runs for weeks under serve.
const pendingLimit = 1 << 15

// A pendingTable holds requests awaiting their response in two
// generations: once the newer holds pendingLimit, it becomes the older and
// what the older held is forgotten, so a request is remembered for at
// least pendingLimit requests after it, and the table never holds more than
// twice that. A response whose request was forgotten is still written,
// without the method and session its request would have given it.
type pendingTable struct {
	newer, older map[pendingKey]pending
}

func (t *pendingTable) add(k pendingKey, p pending) {
	if t.newer == nil || len(t.newer) >= pendingLimit {
		t.older, t.newer = t.newer, make(map[pendingKey]pending)
	}
	t.newer[k] = p
}

// take returns and forgets the request of k.
func (t *pendingTable) take(k pendingKey) (pending, bool) {
	for _, m := range []map[pendingKey]pending{t.newer, t.older} {
		if p, ok := m[k]; ok {
			delete(m, k)
			return p, true
		}
	}
	return pending{}, false
}

type pendingKey struct {
	conn string
	to   string // who was asked
	id   string
}

type pending struct {
	method, session, protocol string
	// carrier says that the request was an mcp/message of the request
	// binding ({serverId, requestId}), whose answer is an ACP result that
	// holds the MCP response's outcome, {result} or {error}.
	carrier bool
}

func (w *writer) write(rec *record) {
	e := Event{TS: rec.at.Seconds(), Connection: rec.conn, Protocol: ProtocolACP, From: rec.from, To: rec.to, Method: rec.method}
	switch rec.kind {
	case kindRequest, kindNotification:
		e.Type = TypeNotification
		body, carrier := rec.body, false
		if rec.kind == kindRequest {
			e.Type, e.ID = TypeRequest, rec.id
		}
		if m, _ := wire.MCPMethod(rec.method); m == wire.RFD.MCPMessage {
			// MCP-over-ACP, in any dialect's spelling, from an agent or
			// for a bridged client: the MCP message is what it means.
			e.Protocol = ProtocolMCP
			e.Method = stringMember(body, "method")
			e.Session = stringMember(body, "sessionId")
			carrier = member(body, "requestId") != nil
			body = member(body, "params")
		} else if rec.mcp {
			e.Protocol = ProtocolMCP
		}
		if e.Session == "" {
			e.Session = stringMember(body, "sessionId")
		}
		if rec.mcp && rec.kind == kindNotification && rec.method == wire.MethodCancelRequest {
			// A bridged client's notifications/cancelled, which reaches an
			// owner that binds per request as the cancel of the
			// mcp/message that carries the request: recorded as what the
			// client sent, naming the request as the trace does.
			e.Method = mcpCancelled
		}
		e.Params, e.Bytes = w.keep(body, false)
		if rec.kind == kindRequest {
			w.pending.add(pendingKey{rec.conn, rec.to, string(rec.id)}, pending{e.Method, e.Session, e.Protocol, carrier})
		}
	case kindGap:
		e = Event{Type: TypeTrace, TS: e.TS, Component: "conductor", Level: "warn",
			Message: "trace gap: " + string(rec.id) + " messages left out here, as the trace's writer fell behind",
			Fields:  append(append([]byte(`{"dropped":`), rec.id...), '}')}
	case kindResponse:
		isError, body := rec.method == "error", rec.body
		e.Type, e.ID, e.IsError, e.Method = TypeResponse, rec.id, &isError, ""
		k := pendingKey{rec.conn, rec.from, string(rec.id)}
		if rec.asked != "" {
			k.to = rec.asked
		}
		if p, ok := w.pending.take(k); ok {
			e.Method, e.Session, e.Protocol = p.method, p.session, p.protocol
			if p.carrier && !isError {
				isError, body = outcome(body)
			}
		}
		if s := stringMember(body, "sessionId"); s != "" && !isError {
			e.Session = s // session/new's answer names the session it made
		}
		e.Payload, e.Bytes = w.keep(body, isError)
	}
	line, err := e.appendTo(w.buf[:0])
	if err != nil {
		// Not valid JSON, which the relay would not have passed on.
		e.Params, e.Payload = nil, nil
		line, _ = e.appendTo(w.buf[:0])
	}
	w.buf = line
	if w.out != nil && w.err == nil {
		_, w.err = w.out.Write(line)
	}
	if w.live != nil {
		w.live.publish(line[:len(line)-1])
	}
}

// mcpCancelled is MCP's notification that cancels a request.
const mcpCancelled = "notifications/cancelled"

// outcome returns the MCP response a request binding's answer holds: its
// error, which an error beside a result is, as JSON-RPC's readers take it;
// else its result. An answer that holds neither is returned as it is.
func outcome(answer json.RawMessage) (isError bool, body json.RawMessage) {
	if e := member(answer, "error"); e != nil && string(e) != "null" {
		return true, e
	}
	if r := member(answer, "result"); r != nil {
		return false, r
	}
	return false, answer
}

// keep returns what the trace keeps of a body at the writer's detail, and
// the body's size.
func (w *writer) keep(body json.RawMessage, isError bool) (json.RawMessage, int) {
	if body == nil {
		body = null
	}
	if w.detail == Full {
		return w.secrets.redact(body), len(body)
	}
	if isError {
		// Only a number: a code of another type may say anything.
		if code := member(body, "code"); code != nil {
			if _, err := strconv.ParseInt(string(code), 10, 64); err == nil {
				return append(append([]byte(`{"code":`), code...), '}'), len(body)
			}
			return json.RawMessage(`{"code":null}`), len(body)
		}
	}
	return null, len(body)
}

func (w *writer) flush() {
	if w.out != nil && w.err == nil {
		w.err = w.out.Flush()
	}
}
