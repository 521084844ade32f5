package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// httpConn is the server side of one Streamable HTTP connection. POSTs feed
// in; Write routes each outgoing message to a stream that a GET drains.
type httpConn struct {
	s  *Server
	id string

	in        chan []byte         // the client's messages, for Read
	pending   *semaphore.Weighted // bytes of POST bodies not yet taken by Read
	done      chan struct{}       // closed by Close
	room      chan struct{}       // signalled when a stream has sent a message
	closeOnce sync.Once

	initID   string      // the id of the initialize whose answer the POST awaits
	initResp chan []byte // that answer

	mu       sync.Mutex
	version  string           // the protocolVersion initialize negotiated, as JSON text
	routes   map[string]route // by request id: where its response goes
	awaited  map[string]int   // session -> responses routed to its stream and not yet written
	conn     *stream          // the connection-scoped stream
	sessions map[string]*stream
	buffered int       // bytes queued on all streams
	streams  int       // GETs attached
	requests int       // other requests being handled (a POST, an initialize awaiting its answer)
	lastSeen time.Time // of the last request or detached stream
}

// A route is where the response to one of the client's requests goes.
type route struct {
	session string // the session whose stream gets it ("" = the connection's)
	ends    bool   // the request ends that session: session/close, session/delete
}

// A stream is one SSE stream's queue. It holds messages until a GET takes
// them; one GET at a time may be attached.
type stream struct {
	queue    [][]byte
	wake     chan struct{} // signalled when queue grows
	attached bool
	// ending is set once the answer that closed the session is queued:
	// the GET ends when it has sent that and the answers still owed.
	ending bool
}

func newStream() *stream { return &stream{wake: make(chan struct{}, 1)} }

func newHTTPConn(s *Server, id, initID string) *httpConn {
	return &httpConn{
		s: s, id: id,
		in:       make(chan []byte, 16),
		pending:  newBudget(2 * s.MaxMessageBytes),
		done:     make(chan struct{}),
		room:     make(chan struct{}, 1),
		initID:   initID,
		initResp: make(chan []byte, 1),
		routes:   make(map[string]route),
		awaited:  make(map[string]int),
		conn:     newStream(),
		sessions: make(map[string]*stream),
		lastSeen: time.Now(),
	}
}

// receive hands a message from a POST to Read, waiting while Read is behind.
// Handed on, the message holds len(msg) bytes of h's budgets until Read
// takes it, or Close drops it.
func (c *httpConn) receive(ctx context.Context, msg []byte, h *hold) error {
	c.touch()
	h.keep(int64(len(msg)))
	select {
	case c.in <- msg:
		*h = hold{}
		select {
		case <-c.done: // Close may have drained c.in before msg came
			c.drain()
		default:
		}
		return nil
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release lets go of the budget a message taken from c.in held.
func (c *httpConn) release(n int) {
	c.pending.Release(int64(n))
	c.s.pending.Release(int64(n))
}

// drain drops what is left in c.in once the connection is closed, and its
// budget with it.
func (c *httpConn) drain() {
	for {
		select {
		case msg := <-c.in:
			c.release(len(msg))
		default:
			return
		}
	}
}

func (c *httpConn) touch() {
	c.mu.Lock()
	c.lastSeen = time.Now()
	c.mu.Unlock()
}

// begin notes a request in flight, which keeps the connection from being
// idle until end: an initialize waits for a chain to start, a POST for the
// chain to take its message.
func (c *httpConn) begin() {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
}

func (c *httpConn) end() {
	c.mu.Lock()
	c.requests--
	c.lastSeen = time.Now()
	c.mu.Unlock()
}

func (c *httpConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case msg := <-c.in:
		c.release(len(msg))
		return msg, nil
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setRoute notes the stream that gets the response to request id. It
// reports false, noting nothing, when that would be a session stream the
// connection does not have and may not buffer one more of.
func (c *httpConn) setRoute(id json.RawMessage, r route) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	session := r.session
	if session != "" && !c.counted(session) && c.buffering() >= c.s.MaxSessionStreams {
		return false
	}
	key := idKey(id)
	if old, ok := c.routes[key]; ok && old.session != "" {
		c.unawait(old.session) // a reused id: its earlier route is lost
	}
	c.routes[key] = r
	if session != "" {
		c.awaited[session]++
	}
	return true
}

// dropRoute forgets the route of request id, which never reached the
// chain (its client gave up on its POST): else its session would count
// among those awaiting an answer for the connection's life.
func (c *httpConn) dropRoute(id json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := idKey(id)
	if r, ok := c.routes[key]; ok {
		delete(c.routes, key)
		if r.session != "" {
			c.unawait(r.session)
		}
	}
}

// buffering counts the sessions whose messages would wait for a GET: those
// with a stream no GET receives (a stream left empty by its GET is
// dropped), and those without a stream that responses are routed to. c.mu
// is held.
func (c *httpConn) buffering() int {
	n := 0
	for _, st := range c.sessions {
		if !st.attached {
			n++
		}
	}
	for s := range c.awaited {
		if c.sessions[s] == nil {
			n++
		}
	}
	return n
}

// counted reports whether a session has a stream or awaits one; c.mu is held.
func (c *httpConn) counted(session string) bool {
	return c.sessions[session] != nil || c.awaited[session] > 0
}

func (c *httpConn) unawait(session string) {
	if c.awaited[session]--; c.awaited[session] <= 0 {
		delete(c.awaited, session)
	}
}

func (c *httpConn) protocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Write queues msg on the stream the RFD assigns it. While the client
// holds more than MaxBuffered unread, Write waits for it to read, which
// holds the chain back as a full pipe does on stdio (and as the
// TypeScript SDK's server waits for room); a client that reads nothing
// for StallTimeout has its connection closed.
func (c *httpConn) Write(ctx context.Context, msg []byte) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	m, err := wire.Parse(msg)
	if err != nil {
		if wire.IsBatch(msg) {
			return c.writeBatch(ctx, msg)
		}
		// Nowhere to route it, and nobody awaits it.
		c.s.Logger.Warn("dropped chain output that is not a JSON-RPC message",
			zap.String("connection", c.id), zap.Int("bytes", len(msg)), zap.Error(err))
		return nil
	}
	if m.IsResponse() && m.ID != nil && c.initID != "" && idKey(m.ID) == c.initID {
		c.initID = ""
		c.mu.Lock()
		c.version = protocolVersionOf(m.Result)
		c.mu.Unlock()
		c.initResp <- append([]byte(nil), msg...)
		return nil
	}
	msg = append([]byte(nil), msg...)
	c.mu.Lock()
	var session string
	ends := false
	if m.IsResponse() {
		key := idKey(m.ID)
		r := c.routes[key]
		session, ends = r.session, r.ends && closedSession(m.Error)
		delete(c.routes, key)
	} else {
		session = sessionOf(m.Params)
	}
	st := c.conn
	if session != "" {
		if !c.counted(session) && c.buffering() >= c.s.MaxSessionStreams {
			c.mu.Unlock()
			c.s.Logger.Warn("closing connection: its client opens none of its sessions' streams",
				zap.String("connection", c.id), zap.Int("buffered_sessions", c.s.MaxSessionStreams))
			c.Close()
			return ErrClosed
		}
		st = c.session(session)
		if m.IsResponse() {
			c.unawait(session)
		}
		st.ending = st.ending || ends
	}
	st.queue = append(st.queue, msg)
	c.buffered += len(msg)
	over := c.buffered > c.s.MaxBuffered
	c.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	if over {
		return c.waitForRoom(ctx)
	}
	return nil
}

// writeBatch writes each message of a batch from the chain as a message
// of its own. The RFD has no batches, and the TypeScript SDK's client
// skips an array on a stream: dropped whole, a request in it would wait
// for ever for the client's answer, and a client's request for the
// response in it. Each of its messages is one the RFD routes.
func (c *httpConn) writeBatch(ctx context.Context, msg []byte) error {
	var msgs [][]byte
	wire.EachElement(msg, func(v []byte) { msgs = append(msgs, v) })
	c.s.Logger.Debug("split a batch from the chain into its messages", zap.String("connection", c.id), zap.Int("messages", len(msgs)))
	for _, m := range msgs {
		if wire.IsBatch(m) { // no JSON-RPC message; Write would split it again
			c.s.Logger.Warn("dropped a batch nested in chain output",
				zap.String("connection", c.id), zap.Int("bytes", len(m)))
			continue
		}
		if err := c.Write(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// waitForRoom returns once the client holds no more than MaxBuffered
// unread. Each message a stream sends restarts the wait: only a client
// that reads nothing for StallTimeout is taken for gone.
func (c *httpConn) waitForRoom(ctx context.Context) error {
	stall := time.NewTimer(c.s.StallTimeout)
	defer stall.Stop()
	for {
		c.mu.Lock()
		over := c.buffered > c.s.MaxBuffered
		c.mu.Unlock()
		if !over {
			return nil
		}
		select {
		case <-c.room:
			stall.Reset(c.s.StallTimeout)
		case <-stall.C:
			c.s.Logger.Warn("closing connection: its client is not reading",
				zap.String("connection", c.id), zap.Int("buffered_bytes", c.s.MaxBuffered), zap.Duration("for", c.s.StallTimeout))
			c.Close()
			return ErrClosed
		case <-c.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closedSession reports whether the answer to a session/close or
// session/delete, an error object or nil, leaves the session gone: a
// success, or -32002 (resource not found), which ACP counts as the same end
// state, as the TypeScript SDK does. The code is read as the SDK reads it,
// as a number however it is spelled: -32002.0 and -3.2002e4 are -32002.
func closedSession(e json.RawMessage) bool {
	if e == nil {
		return true
	}
	var code *float64
	return json.Unmarshal(wire.Member(e, "code"), &code) == nil && code != nil && *code == -32002
}

// session returns the stream of a session, creating it; c.mu is held.
func (c *httpConn) session(id string) *stream {
	st := c.sessions[id]
	if st == nil {
		st = newStream()
		c.sessions[id] = st
	}
	return st
}

// Close ends the connection: Read reports io.EOF and every stream ends once
// what is queued on it has been sent.
func (c *httpConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.done)
		c.s.forget(c)
		c.drain()
	})
	return nil
}

// keepalive is how often an idle SSE stream gets a comment, so that
// intermediaries do not time it out.
const keepalive = 15 * time.Second

// serveStream attaches a GET to the connection's stream (session "") or a
// session's, and sends it what is queued and what comes, as SSE events.
func (c *httpConn) serveStream(w http.ResponseWriter, r *http.Request, session string) {
	c.mu.Lock()
	st := c.conn
	if session != "" {
		st = c.sessions[session]
	}
	if st != nil && st.attached {
		c.mu.Unlock()
		http.Error(w, "the stream already has a receiver", http.StatusConflict)
		return
	}
	if c.streams >= c.s.MaxStreams {
		c.mu.Unlock()
		http.Error(w, fmt.Sprintf("this connection already has %d streams open: close one first", c.s.MaxStreams), http.StatusConflict)
		return
	}
	if st == nil {
		st = c.session(session)
	}
	st.attached = true
	c.streams++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		st.attached = false
		c.streams--
		c.lastSeen = time.Now()
		over := false
		if session != "" {
			if len(st.queue) == 0 {
				delete(c.sessions, session) // the next message or GET makes it again
			} else {
				over = c.buffering() > c.s.MaxSessionStreams
			}
		}
		c.mu.Unlock()
		if over {
			c.s.Logger.Warn("closing connection: its client left too many sessions' streams with messages unread",
				zap.String("connection", c.id), zap.Int("buffered_sessions", c.s.MaxSessionStreams))
			c.Close()
		}
		if c.s.streamEnded != nil {
			c.s.streamEnded(session)
		}
	}()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	if v := c.protocolVersion(); v != "" {
		h.Set(HeaderProtocolVersion, v)
	}
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	// Once the connection has ended, what is left on the stream goes to a
	// client that reads it, or not at all: a client that reads nothing of
	// it for StallTimeout is gone, and its write fails. Else the GET, and
	// all that is queued on it, would wait as long as the client keeps its
	// TCP connection, which over HTTP/2 it keeps alive while it reads none
	// of the stream.
	watched, left := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-c.done:
			_ = rc.SetWriteDeadline(time.Now().Add(c.s.StallTimeout))
		case <-left:
		}
	}()
	defer func() {
		close(left)
		<-watched
		// An HTTP/1.1 connection kept alive keeps its deadline.
		_ = rc.SetWriteDeadline(time.Time{})
	}()
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	var buf []byte
	for {
		c.mu.Lock()
		msgs := st.queue
		st.queue = nil
		c.mu.Unlock()
		for i, msg := range msgs {
			buf = append(append(append(buf[:0], "data: "...), msg...), "\n\n"...)
			if _, err := w.Write(buf); err != nil {
				c.requeue(st, msgs[i:])
				return
			}
			c.mu.Lock()
			c.buffered -= len(msg)
			c.mu.Unlock()
			select {
			case c.room <- struct{}{}:
			default:
			}
			select {
			case <-c.done: // read from: another StallTimeout
				_ = rc.SetWriteDeadline(time.Now().Add(c.s.StallTimeout))
			default:
			}
		}
		if len(msgs) > 0 && rc.Flush() != nil {
			return
		}
		// A closed session's stream ends once it has sent all it owes:
		// held open, each session a client ever closed would keep a GET
		// and its goroutine until the connection ends. What comes for the
		// session later waits for a GET, as for any session without one.
		c.mu.Lock()
		over := st.ending && len(st.queue) == 0 && c.awaited[session] == 0 && !c.s.keepClosedStreams
		c.mu.Unlock()
		if over {
			return
		}
		select {
		case <-st.wake:
		case <-tick.C:
			if _, err := io.WriteString(w, ":\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-c.done:
			c.mu.Lock()
			left := len(st.queue)
			c.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// requeue puts back what a failed GET did not send, ahead of anything
// queued since.
func (c *httpConn) requeue(st *stream, msgs [][]byte) {
	c.mu.Lock()
	st.queue = append(append([][]byte(nil), msgs...), st.queue...)
	c.mu.Unlock()
}

// reapIdle closes the connection once it has had no request and no stream
// for the idle timeout: its client has vanished without DELETE.
func (c *httpConn) reapIdle() {
	period := c.s.IdleTimeout / 4
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		idle := c.streams == 0 && c.requests == 0 && time.Since(c.lastSeen) > c.s.IdleTimeout
		c.mu.Unlock()
		if idle {
			c.s.Logger.Info("closing idle connection", zap.String("connection", c.id), zap.Duration("idle", c.s.IdleTimeout))
			c.Close()
			return
		}
		if c.s.idleChecked != nil {
			c.s.idleChecked()
		}
	}
}
