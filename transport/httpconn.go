package transport

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// httpConn is the server side of one Streamable HTTP connection. POSTs feed
// in; Write routes each outgoing message to a stream that a GET drains.
type httpConn struct {
	s  *Server
	id string

	in        chan []byte   // the client's messages, for Read
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	initID   string      // the id of the initialize whose answer the POST awaits
	initResp chan []byte // that answer

	mu       sync.Mutex
	routes   map[string]string // request id -> session whose stream gets its response ("" = connection)
	conn     *stream           // the connection-scoped stream
	sessions map[string]*stream
	buffered int       // bytes queued on all streams
	streams  int       // GETs attached
	lastSeen time.Time // of the last request or detached stream
}

// A stream is one SSE stream's queue. It holds messages until a GET takes
// them; one GET at a time may be attached.
type stream struct {
	queue    [][]byte
	wake     chan struct{} // signalled when queue grows
	attached bool
}

func newStream() *stream { return &stream{wake: make(chan struct{}, 1)} }

func newHTTPConn(s *Server, id, initID string) *httpConn {
	return &httpConn{
		s: s, id: id,
		in:       make(chan []byte, 16),
		done:     make(chan struct{}),
		initID:   initID,
		initResp: make(chan []byte, 1),
		routes:   make(map[string]string),
		conn:     newStream(),
		sessions: make(map[string]*stream),
		lastSeen: time.Now(),
	}
}

// receive hands a message from a POST to Read, waiting while Read is behind.
func (c *httpConn) receive(ctx context.Context, msg []byte) error {
	c.touch()
	select {
	case c.in <- msg:
		return nil
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *httpConn) touch() {
	c.mu.Lock()
	c.lastSeen = time.Now()
	c.mu.Unlock()
}

func (c *httpConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case msg := <-c.in:
		return msg, nil
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *httpConn) setRoute(id json.RawMessage, session string) {
	c.mu.Lock()
	c.routes[idKey(id)] = session
	c.mu.Unlock()
}

// Write queues msg on the stream the RFD assigns it. It never waits for the
// client: a connection whose client holds more than MaxBuffered unread is
// closed instead.
func (c *httpConn) Write(_ context.Context, msg []byte) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	m, err := wire.Parse(msg)
	if err != nil {
		return nil // nothing the conductor writes; nowhere to route it
	}
	if m.IsResponse() && m.ID != nil && c.initID != "" && idKey(m.ID) == c.initID {
		c.initID = ""
		c.initResp <- append([]byte(nil), msg...)
		return nil
	}
	msg = append([]byte(nil), msg...)
	c.mu.Lock()
	var session string
	if m.IsResponse() {
		key := idKey(m.ID)
		session = c.routes[key]
		delete(c.routes, key)
	} else {
		session = sessionOf(m.Params)
	}
	st := c.conn
	if session != "" {
		st = c.session(session)
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
		c.s.Logger.Warn("closing connection: its client is not reading",
			zap.String("connection", c.id), zap.Int("buffered_bytes", c.s.MaxBuffered))
		c.Close()
		return ErrClosed
	}
	return nil
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
		st = c.session(session)
	}
	if st.attached {
		c.mu.Unlock()
		http.Error(w, "the stream already has a receiver", http.StatusConflict)
		return
	}
	st.attached = true
	c.streams++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		st.attached = false
		c.streams--
		c.lastSeen = time.Now()
		c.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
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
		}
		if len(msgs) > 0 && rc.Flush() != nil {
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
// for the idle timeout.
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
		idle := c.streams == 0 && time.Since(c.lastSeen) > c.s.IdleTimeout
		c.mu.Unlock()
		if idle {
			c.s.Logger.Info("closing idle connection", zap.String("connection", c.id), zap.Duration("idle", c.s.IdleTimeout))
			c.Close()
			return
		}
	}
}
