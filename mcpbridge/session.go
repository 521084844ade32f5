package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A session is one MCP session of the streamable HTTP transport, and the
// transport of its Conn. POSTed messages queue for Recv. Each POST that
// carries requests holds a stream that waits for their responses; Send puts
// a response on the stream waiting for it, and any other message on the GET
// stream, else on the oldest open SSE POST stream, else in a backlog for the
// next stream to open.
type session struct {
	id     string // Mcp-Session-Id, or "" for a session of one POST
	t      *httpTransport
	server string // the declared server's id
	conn   *Conn

	in        chan []byte   // POSTed messages, for Recv
	ended     chan struct{} // the agent's side ended: DELETE, idleness, its one POST done
	closed    chan struct{} // Close was called
	endOnce   sync.Once
	closeOnce sync.Once

	mu       sync.Mutex
	over     bool               // ended or closed: nothing more is routed
	pending  map[string]*stream // by id key, the POST stream each request waits on
	posts    []*stream          // SSE POST streams still open, oldest first
	get      *stream            // the GET stream, if open
	backlog  [][]byte           // server messages waiting for a stream to open
	active   int                // HTTP requests in progress
	idleFrom time.Time
}

// A stream is one HTTP response that carries messages: a POST's, which is
// done once every request it carried is answered, or the session's GET
// stream, which is done when the session ends or another GET replaces it.
type stream struct {
	get        bool                       // the GET stream, not a POST's
	sse        bool                       // SSE events, not one JSON body
	batch      bool                       // the POST was a batch
	init       bool                       // the POST was initialize
	protocol   string                     // the POST's Mcp-Protocol-Version
	wait       map[string]json.RawMessage // unanswered requests: id by id key
	wake       chan struct{}              // signalled when out or done change
	out        []outgoing
	done       bool
	failedInit bool // initialize was answered with an error
}

type outgoing struct {
	data     []byte
	response bool
}

// Limits on what waits in a session for the other side to take it.
const (
	inboxSize = 64   // POSTs wait behind this many messages Recv has not taken
	maxQueued = 1024 // server messages waiting for the client, in the backlog or on one stream
	// Their bytes, likewise; one message is taken whatever its size.
	maxQueuedBytes = 16 << 20
)

var (
	errGone        = errors.New("mcpbridge: session ended")
	errDuplicateID = errors.New("mcpbridge: a request with this id is already in progress")
	errBacklogFull = fmt.Errorf("mcpbridge: %d server messages or %d MiB already wait for the client to take them", maxQueued, maxQueuedBytes>>20)
)

func newSession(t *httpTransport, id string, d *declaration) *session {
	s := &session{
		id:       id,
		t:        t,
		server:   d.serverID,
		in:       make(chan []byte, inboxSize),
		ended:    make(chan struct{}),
		closed:   make(chan struct{}),
		pending:  make(map[string]*stream),
		idleFrom: time.Now(),
	}
	s.conn = &Conn{ServerID: d.serverID, Name: d.name, Transport: TransportHTTP, decls: &t.b.decls, decl: d, t: s}
	return s
}

func newStream(sse bool) *stream {
	return &stream{sse: sse, wake: make(chan struct{}, 1)}
}

func (st *stream) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

func (s *session) recv() ([]byte, error) {
	select {
	case msg := <-s.in:
		return msg, nil
	case <-s.closed:
		return nil, ErrClosed
	case <-s.ended:
		select { // what was POSTed before the end still counts
		case msg := <-s.in:
			return msg, nil
		default:
			return nil, io.EOF
		}
	}
}

// deliver queues a POSTed message for Recv, waiting while the queue is full.
func (s *session) deliver(ctx context.Context, msg []byte) error {
	select {
	case <-s.ended:
		return errGone
	case <-s.closed:
		return errGone
	default:
	}
	select {
	case s.in <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.ended:
		return errGone
	case <-s.closed:
		return errGone
	}
}

func (s *session) send(msg []byte) error {
	msg = bytes.Clone(msg) // queued past the call: the caller may reuse its buffer
	elems, err := split(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		select {
		case <-s.closed:
			return ErrClosed
		default:
			return fmt.Errorf("mcpbridge: the agent ended the session: %w", io.EOF)
		}
	}
	for _, e := range elems {
		m, err := wire.Parse(e)
		if err != nil {
			return fmt.Errorf("mcpbridge: %w", err)
		}
		if m.IsResponse() {
			s.answerLocked(m, e)
		} else if err := s.routeLocked(e); err != nil {
			if errors.Is(err, errBacklogFull) {
				s.t.b.log.Warn("refused a server message for an MCP client over HTTP that does not take them",
					zap.String("server", s.server), zap.Error(err))
			}
			return err
		}
	}
	return nil
}

// answerLocked puts a response on the stream of the POST that carried its
// request.
func (s *session) answerLocked(m *wire.Message, data []byte) {
	k, ok := idKey(m.ID)
	st := s.pending[k]
	if !ok || st == nil {
		// Its POST was abandoned, and the request cancelled; or it never was.
		s.t.b.log.Debug("dropping MCP response for no pending request", zap.String("server", s.server), zap.ByteString("id", m.ID))
		return
	}
	delete(s.pending, k)
	delete(st.wait, k)
	st.out = append(st.out, outgoing{data: data, response: true})
	if st.init && m.Error != nil {
		st.failedInit = true
	}
	if len(st.wait) == 0 {
		st.done = true
		s.posts = slices.DeleteFunc(s.posts, func(p *stream) bool { return p == st })
	}
	st.signal()
}

// routeLocked puts a server request or notification on a stream, or in the
// backlog if none is open.
func (s *session) routeLocked(data []byte) error {
	st := s.get
	if st == nil && len(s.posts) > 0 {
		st = s.posts[0]
	}
	if st == nil {
		size := 0
		for _, m := range s.backlog {
			size += len(m)
		}
		if full(len(s.backlog), size, len(data)) {
			return errBacklogFull
		}
		s.backlog = append(s.backlog, data)
		return nil
	}
	size := 0
	for _, m := range st.out {
		size += len(m.data)
	}
	if full(len(st.out), size, len(data)) { // a client that does not read its stream
		return errBacklogFull
	}
	st.out = append(st.out, outgoing{data: data})
	st.signal()
	return nil
}

// full reports whether a queue of n messages holding size bytes may not
// take one more of more bytes: it holds maxQueued already, or the bytes
// would pass maxQueuedBytes (an empty queue takes any one message).
func full(n, size, more int) bool {
	return n >= maxQueued || n > 0 && size+more > maxQueuedBytes
}

// openPost registers the requests of a POST as waiting on st.
func (s *session) openPost(st *stream) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return errGone
	}
	for k := range st.wait {
		if s.pending[k] != nil {
			return errDuplicateID
		}
	}
	for k := range st.wait {
		s.pending[k] = st
	}
	if st.sse {
		s.posts = append(s.posts, st)
		if s.get == nil {
			st.out = s.takeBacklogLocked(st.out)
		}
	}
	return nil
}

// openGet makes st the session's GET stream. A GET stream already open is
// replaced, its unsent messages moved over: the client would not open
// another if it still read the first.
func (s *session) openGet() (*stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return nil, errGone
	}
	st := newStream(true)
	st.get = true
	if old := s.get; old != nil {
		st.out, old.out = old.out, nil
		old.done = true
		old.signal()
	}
	st.out = s.takeBacklogLocked(st.out)
	s.get = st
	return st, nil
}

func (s *session) takeBacklogLocked(out []outgoing) []outgoing {
	for _, m := range s.backlog {
		out = append(out, outgoing{data: m})
	}
	s.backlog = nil
	return out
}

// take returns what st has to write, and whether st is done once it has.
func (s *session) take(st *stream) ([]outgoing, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := st.out
	st.out = nil
	return out, st.done
}

// release detaches st when its HTTP response ends, done or not. Messages it
// still held are routed again. If notify is set, requests it still waited
// on, which can no longer be answered as streams do not resume, are
// cancelled with the server as a stdio client would cancel them.
func (s *session) release(st *stream, notify bool) {
	s.mu.Lock()
	if s.get == st {
		s.get = nil
	}
	s.posts = slices.DeleteFunc(s.posts, func(p *stream) bool { return p == st })
	var cancels [][]byte
	for k, id := range st.wait {
		delete(s.pending, k)
		if notify && !s.over {
			cancels = append(cancels, cancelled(id))
		}
	}
	st.wait, st.done = nil, true
	for _, m := range st.out {
		if !m.response && !s.over {
			s.routeLocked(m.data) // a full backlog drops it, as it would Send's
		}
	}
	st.out = nil
	s.mu.Unlock()

	for _, c := range cancels {
		select {
		case s.in <- c:
		default: // advisory, and Recv is not keeping up: drop it
		}
	}
}

// finishLocked stops all routing: requests still waiting get an error
// response with why, and every stream ends once it has written that.
func (s *session) finishLocked(why *wire.Error) {
	if s.over {
		return
	}
	s.over = true
	for k, st := range s.pending {
		resp := wire.ErrorResponse(st.wait[k], why)
		st.out = append(st.out, outgoing{data: resp.Bytes(), response: true})
		delete(st.wait, k)
		st.done = true
		st.signal()
	}
	clear(s.pending)
	for _, st := range s.posts {
		st.done = true
		st.signal()
	}
	s.posts = nil
	if s.get != nil {
		s.get.done = true
		s.get.signal()
	}
	s.backlog = nil
}

// codeConnectionClosed is the MCP SDKs' code for a connection that closed
// with requests outstanding.
const codeConnectionClosed = -32000

// end ends the session from the agent's side: Recv returns io.EOF after what
// was already POSTed.
func (s *session) end() {
	s.mu.Lock()
	s.finishLocked(&wire.Error{Code: codeConnectionClosed, Message: "MCP session ended"})
	s.mu.Unlock()
	s.endOnce.Do(func() { close(s.ended) })
	s.t.forget(s)
}

// close ends the session from the server's side. Requests the server
// never saw (POSTed as it closed) are answered with why its token was
// revoked, if it was: the server is gone for that reason, not merely
// disconnected.
func (s *session) close() error {
	why := &wire.Error{Code: codeConnectionClosed, Message: "MCP server connection closed"}
	if err := s.conn.Revoked(); err != nil {
		why = asRPCError(err)
	}
	s.mu.Lock()
	s.finishLocked(why)
	s.mu.Unlock()
	s.closeOnce.Do(func() { close(s.closed) })
	s.t.forget(s)
	return nil
}

// busy and idle bracket each HTTP request to the session, for the idle
// timeout.
func (s *session) busy() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

func (s *session) idle() {
	s.mu.Lock()
	if s.active--; s.active == 0 {
		s.idleFrom = time.Now()
	}
	s.mu.Unlock()
}

// idleSince reports how long the session has been idle at now.
func (s *session) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active > 0 || s.over {
		return 0
	}
	return now.Sub(s.idleFrom)
}

// cancelled returns the notification that cancels request id.
func cancelled(id json.RawMessage) []byte {
	params := append([]byte(`{"requestId":`), id...)
	params = append(params, `,"reason":"the client's HTTP request ended before its response"}`...)
	return (&wire.Message{Method: "notifications/cancelled", Params: params}).Bytes()
}
