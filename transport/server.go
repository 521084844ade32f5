package transport

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Header names of the RFD.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
	// HeaderProtocolVersion carries the protocolVersion the connection's
	// initialize negotiated, on every request after it (the RFD's "SHOULD";
	// the TypeScript SDK 2.4 neither sends nor checks it).
	HeaderProtocolVersion = "Acp-Protocol-Version"
)

// SDKMaxMessageBytes is the TypeScript SDK 2.4's DEFAULT_MAX_MESSAGE_BYTES,
// the longest message its Streamable HTTP client takes from a server: one
// longer on an SSE stream errors its whole transport, not the message.
const SDKMaxMessageBytes = 32 << 20

// Defaults for the zero values of Server.
const (
	DefaultMaxMessageBytes = 64 << 20
	DefaultMaxBuffered     = 64 << 20
	// DefaultMaxSessionStreams is the TypeScript SDK's
	// DEFAULT_MAX_BUFFERED_SESSION_STREAMS.
	DefaultMaxSessionStreams = 1024
	// DefaultMaxStreams is generous for a client's sessions in use at
	// once; each open stream holds a goroutine and its buffers.
	DefaultMaxStreams  = 256
	DefaultIdleTimeout = 5 * time.Minute
	DefaultInitTimeout = 2 * time.Minute
	DefaultBodyTimeout = time.Minute
	// DefaultStallTimeout is the TypeScript SDK's: its server closes a
	// connection whose full buffer has not moved for a minute.
	DefaultStallTimeout = time.Minute
)

// ErrServerStopped is the cause of the context each Serve was given, once
// the server stops (Shutdown, Close): what a chain tells its client.
var ErrServerStopped = errors.New("the server is stopping")

// ConnInfo describes a new connection, for logs.
type ConnInfo struct {
	ID        string // its Acp-Connection-Id
	Transport string // "websocket" or "http"
	Remote    string // the client's address
	UserAgent string
	Proto     string // the HTTP version of the request that made it: HTTP/2.0 over TLS or h2c, or HTTP/1.1
}

// A Server serves the /acp endpoint. Each ACP connection, a WebSocket or a
// Streamable HTTP connection created by its initialize, is handed to Serve
// on its own goroutine; the connection ends when Serve returns, and Serve
// sees io.EOF from Read when the client ends it.
type Server struct {
	Serve func(ctx context.Context, c Conn, info ConnInfo)

	// MaxConnections bounds the connections served at once (503 beyond);
	// zero means no bound.
	MaxConnections int
	// MaxMessageBytes bounds one message from the client (413 or close
	// status 1009 beyond). Zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// MaxBuffered bounds what one HTTP connection holds for streams its
	// client has not opened or is not reading; beyond it a write waits for
	// the client to read. Zero means DefaultMaxBuffered.
	MaxBuffered int
	// StallTimeout ends an HTTP connection whose client, with MaxBuffered
	// unread, reads nothing for that long. Zero means DefaultStallTimeout.
	StallTimeout time.Duration
	// MaxSessionStreams bounds the sessions of one HTTP connection that hold
	// messages no GET is receiving. A session-scoped request that would
	// need one more is refused with 400; output from the chain that would
	// need one more closes the connection. Zero means
	// DefaultMaxSessionStreams.
	MaxSessionStreams int
	// MaxStreams bounds the SSE streams (GETs) open at once on one HTTP
	// connection, its own and its sessions': a GET beyond it gets 409,
	// which the TypeScript SDK's client takes as that session's failure,
	// not the connection's. A GET for any session opens its stream (see
	// the package doc), so without a bound one connection could hold a
	// goroutine and its buffers for each of as many sessions as it names.
	// Zero means DefaultMaxStreams.
	MaxStreams int
	// IdleTimeout ends an HTTP connection that has had no request and no
	// open stream for that long: a client that vanished never says DELETE.
	// Zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// InitTimeout bounds how long an HTTP initialize waits for its answer.
	// Zero means DefaultInitTimeout.
	InitTimeout time.Duration
	// PingInterval is how often a WebSocket connection pings its client;
	// one whose pong does not come within the interval is closed, so that a
	// client whose network vanished is noticed in seconds rather than when
	// TCP gives up. Zero means DefaultPingInterval; negative turns the
	// heartbeat off. Streamable HTTP has IdleTimeout instead.
	PingInterval time.Duration
	// MaxPendingBytes bounds the bytes of POST bodies, over all HTTP
	// connections, being read or waiting for their chain to take them
	// (those of a body without Content-Length count as MaxMessageBytes
	// while it is read); a POST beyond it waits, its body unread, for
	// room. Each connection's are bounded too, by twice MaxMessageBytes,
	// so that one connection cannot take it all. Zero means four times
	// MaxMessageBytes; it is never less than MaxMessageBytes.
	MaxPendingBytes int
	// BodyTimeout bounds how long a POST's body takes to arrive once it
	// has room in the budgets (408 beyond): a body that never ends would
	// hold its room for ever. Zero means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Logger receives who connected and when each connection ended. Nil
	// discards.
	Logger *zap.Logger

	once   sync.Once
	ctx    context.Context // each Serve's; cancelled by Shutdown and Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // one per connection being served

	refuseUpgrade bool // tests: a server with Streamable HTTP only
	// Tests: a server that, as the TypeScript SDK's, holds a closed
	// session's stream open.
	keepClosedStreams bool
	// Tests: called once a stream's GET has ended and its state is
	// updated (with its session, "" for the connection's), and after each
	// idle check that kept the connection.
	streamEnded func(session string)
	idleChecked func()
	// Tests: called when a POST's body waits for room in a budget.
	bodyWaits func()
	// Tests: a WebSocket heartbeat's timeout (zero: the interval), and a
	// function called after each pong.
	pingTimeout time.Duration
	pong        func()

	pending *semaphore.Weighted // MaxPendingBytes

	mu     sync.Mutex
	active int
	http   map[string]*httpConn
	ws     map[*wsConn]bool
}

func (s *Server) init() {
	s.once.Do(func() {
		s.ctx, s.cancel = context.WithCancelCause(context.Background())
		s.http = make(map[string]*httpConn)
		s.ws = make(map[*wsConn]bool)
		if s.Logger == nil {
			s.Logger = zap.NewNop()
		}
		if s.MaxMessageBytes <= 0 {
			s.MaxMessageBytes = DefaultMaxMessageBytes
		}
		if s.MaxPendingBytes <= 0 {
			s.MaxPendingBytes = 4 * s.MaxMessageBytes
		}
		s.MaxPendingBytes = max(s.MaxPendingBytes, s.MaxMessageBytes)
		s.pending = newBudget(s.MaxPendingBytes)
		if s.MaxBuffered <= 0 {
			s.MaxBuffered = DefaultMaxBuffered
		}
		if s.MaxSessionStreams <= 0 {
			s.MaxSessionStreams = DefaultMaxSessionStreams
		}
		if s.MaxStreams <= 0 {
			s.MaxStreams = DefaultMaxStreams
		}
		if s.IdleTimeout <= 0 {
			s.IdleTimeout = DefaultIdleTimeout
		}
		if s.BodyTimeout <= 0 {
			s.BodyTimeout = DefaultBodyTimeout
		}
		if s.InitTimeout <= 0 {
			s.InitTimeout = DefaultInitTimeout
		}
		if s.StallTimeout <= 0 {
			s.StallTimeout = DefaultStallTimeout
		}
	})
}

// Shutdown stops the server gracefully: it refuses new connections and
// cancels the context every Serve was given, so that each winds down its
// own way, while their connections stay open to carry what they still
// send; it waits until each Serve has returned. If ctx is done first, it
// closes what is left, as Close does, and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.cancel(ErrServerStopped)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close ends every connection at once and waits until each Serve has
// returned.
func (s *Server) Close() {
	s.init()
	s.cancel(ErrServerStopped)
	s.mu.Lock()
	hcs := make([]*httpConn, 0, len(s.http))
	for _, c := range s.http {
		hcs = append(hcs, c)
	}
	wcs := make([]*wsConn, 0, len(s.ws))
	for c := range s.ws {
		wcs = append(wcs, c)
	}
	s.mu.Unlock()
	for _, c := range hcs {
		c.Close()
	}
	for _, c := range wcs {
		c.closeNow()
	}
	s.wg.Wait()
}

// Active returns the number of connections being served.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	if r.Method != http.MethodPost && r.ContentLength != 0 {
		// Nothing here reads it; over HTTP/1.x net/http would, before
		// answering, and wait for ever for one that is not sent.
		s.refuseBody(w, r, http.StatusBadRequest, r.Method+" takes no body")
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r)
	case http.MethodGet:
		if isUpgrade(r) && !s.refuseUpgrade {
			s.websocket(w, r)
			return
		}
		s.stream(w, r)
	case http.MethodDelete:
		s.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// offered returns the WebSocket subprotocols r requests, so that Accept
// selects the first. ACP names none, but a client that requests some (the
// TypeScript SDK's ws-client does when its protocols option is set) must,
// by RFC 6455, fail a handshake that selects none; the SDK's server, as
// the ws library does by default, selects the first offered.
func offered(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "websocket") {
				return true
			}
		}
	}
	return false
}

// errTooMany refuses a connection beyond MaxConnections.
var errTooMany = errors.New("too many connections")

// acquire takes a connection slot, or returns why it cannot: the server is
// stopping (ErrServerStopped), or has MaxConnections (errTooMany).
func (s *Server) acquire() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ctx.Err() != nil:
		return ErrServerStopped
	case s.MaxConnections > 0 && s.active >= s.MaxConnections:
		return errTooMany
	}
	s.active++
	s.wg.Add(1)
	return nil
}

func (s *Server) release() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.wg.Done()
}

// run serves c until Serve returns, then closes it. It owns the slot
// acquire took.
func (s *Server) run(c Conn, info ConnInfo) {
	defer s.release()
	start := time.Now()
	log := s.Logger.With(zap.String("connection", info.ID))
	log.Info("connection opened", zap.String("transport", info.Transport),
		zap.String("remote", info.Remote), zap.String("proto", info.Proto), zap.String("user_agent", clip(info.UserAgent)))
	if hc, ok := c.(*httpConn); ok {
		reaped := make(chan struct{})
		go func() { hc.reapIdle(); close(reaped) }()
		defer func() { <-reaped }() // it returns once c is closed, below
	}
	s.Serve(s.ctx, c, info)
	c.Close()
	after := zap.Duration("after", time.Since(start).Round(time.Millisecond))
	if wc, ok := c.(*wsConn); ok {
		if err := wc.heartbeatLost(); err != nil {
			log.Warn("connection ended: heartbeat lost", after, zap.Error(err))
			return
		}
	}
	log.Info("connection ended", after)
}

func newID() string { return rand.Text() }

func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	if err := s.acquire(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	id := newID()
	w.Header().Set(HeaderConnectionID, id)
	// Behind a Guard, whose Origin rule Streamable HTTP follows too, the
	// library's own check would refuse what the Guard allows; without one,
	// it stays on: a browser page may only open a socket to the host that
	// served it.
	judged, _ := r.Context().Value(originJudged{}).(bool)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: judged, Subprotocols: offered(r)})
	if err != nil {
		s.release()
		// The library's error quotes the header it refused, which the
		// peer chose and may be a megabyte long.
		s.Logger.Info("websocket upgrade failed", zap.String("remote", r.RemoteAddr), zap.String("error", clip(err.Error())))
		return
	}
	hb := heartbeat{interval: pingInterval(s.PingInterval), timeout: s.pingTimeout, pong: s.pong}
	c := newWSConn(ws, s.MaxMessageBytes, hb)
	s.mu.Lock()
	s.ws[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.ws, c)
		s.mu.Unlock()
	}()
	s.run(c, ConnInfo{ID: id, Transport: "websocket", Remote: r.RemoteAddr, UserAgent: r.UserAgent(), Proto: r.Proto})
}

// sessionMethods are the methods whose POST must name their session in
// Acp-Session-Id (the TypeScript SDK's list).
var sessionMethods = map[string]bool{
	"session/cancel": true, "session/close": true, "session/delete": true,
	"session/fork": true, "session/load": true, "session/prompt": true,
	"session/resume": true, "session/set_config_option": true,
	"session/set_mode": true, "session/set_model": true,
}

// sessionEnds are the methods whose answer, a success, ends the session
// they name, and so its stream.
var sessionEnds = map[string]bool{"session/close": true, "session/delete": true}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		s.refuseBody(w, r, http.StatusUnsupportedMediaType, "Unsupported Media Type: POST a JSON-RPC message as application/json")
		return
	}
	// The connection is known, or not, from the headers: a POST for one
	// that is not is refused before its body is read.
	var c *httpConn
	if r.Header.Get(HeaderConnectionID) != "" {
		if c = s.connOf(w, r); c == nil {
			return
		}
	}
	if !s.sessionHeaderOK(w, r) {
		return
	}
	if r.ContentLength > int64(s.MaxMessageBytes) {
		s.refuseBody(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("message exceeds %d bytes", s.MaxMessageBytes))
		return
	}
	body, h, err := s.readBody(w, r, c)
	defer func() { h.release() }() // what receive did not hand on
	if err != nil {
		s.bodyError(w, r, err)
		return
	}
	if wire.IsBatch(body) {
		writeJSON(w, http.StatusBadRequest, wire.ErrorResponse(json.RawMessage("null"),
			wire.Errorf(-32600, "JSON-RPC batches are not supported")).Bytes(), nil)
		return
	}
	body = compact(body)
	m, err := wire.Parse(body)
	if err != nil {
		http.Error(w, "not a JSON-RPC message: "+err.Error(), http.StatusBadRequest)
		return
	}
	if wire.IsInitialize(m.Method) && m.ID != nil { // a proxy-mode chain's too
		if c != nil {
			http.Error(w, "initialize is not allowed on an existing connection", http.StatusBadRequest)
			return
		}
		s.initialize(w, r, m, h)
		return
	}
	if c == nil {
		http.Error(w, "missing "+HeaderConnectionID, http.StatusBadRequest)
		return
	}
	c.begin()
	defer c.end()
	if m.Method != "" {
		hdr, inParams := r.Header.Get(HeaderSessionID), sessionOf(m.Params)
		switch {
		case hdr == "" && (sessionMethods[m.Method] || inParams != ""):
			http.Error(w, "missing "+HeaderSessionID, http.StatusBadRequest)
			return
		case hdr != "" && inParams != "" && hdr != inParams:
			http.Error(w, "mismatched "+HeaderSessionID, http.StatusBadRequest)
			return
		}
		if len(m.ID) > MaxIDLength {
			http.Error(w, fmt.Sprintf("the request's id exceeds %d bytes", MaxIDLength), http.StatusBadRequest)
			return
		}
		if m.ID != nil {
			rt := route{session: hdr, ends: sessionEnds[m.Method]}
			if m.Method == "session/load" {
				rt.session = "" // its answer precedes the session's stream
			}
			if !c.setRoute(m.ID, rt) {
				http.Error(w, fmt.Sprintf("this connection already holds messages for %d sessions whose streams are not open: open their streams (GET with %s) first",
					s.MaxSessionStreams, HeaderSessionID), http.StatusBadRequest)
				return
			}
		}
	}
	if err := c.receive(r.Context(), m.Raw, h); err != nil {
		if m.Method != "" && m.ID != nil {
			c.dropRoute(m.ID) // not delivered: no answer will come to route
		}
		http.Error(w, "unknown "+HeaderConnectionID, http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// initialize creates an HTTP connection, starts serving it, and answers the
// POST with the initialize response.
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, m *wire.Message, h *hold) {
	if err := s.acquire(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	c := newHTTPConn(s, newID(), idKey(m.ID))
	c.begin()
	defer c.end()
	s.mu.Lock()
	s.http[c.id] = c
	s.mu.Unlock()
	go s.run(c, ConnInfo{ID: c.id, Transport: "http", Remote: r.RemoteAddr, UserAgent: r.UserAgent(), Proto: r.Proto})
	h.bind(c)

	timer := time.NewTimer(s.InitTimeout)
	defer timer.Stop()
	if err := c.receive(r.Context(), m.Raw, h); err == nil {
		var resp []byte
		select {
		case resp = <-c.initResp:
		case <-c.done:
		case <-r.Context().Done():
		case <-timer.C:
		}
		if resp == nil {
			// An answer written just before the connection ended (a chain
			// that answers, then breaks a limit) is still the answer.
			select {
			case resp = <-c.initResp:
			default:
			}
		}
		if resp != nil {
			h := http.Header{HeaderConnectionID: {c.id}}
			if v := c.protocolVersion(); v != "" {
				h.Set(HeaderProtocolVersion, v)
			}
			writeJSON(w, http.StatusOK, resp, h)
			return
		}
	}
	c.Close()
	e := wire.Errorf(-32603, "initialize failed: the connection ended before it was answered")
	writeJSON(w, http.StatusInternalServerError, wire.ErrorResponse(m.ID, e).Bytes(), nil)
}

func writeJSON(w http.ResponseWriter, status int, body []byte, h http.Header) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) lookup(id string) *httpConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.http[id]
}

func (s *Server) forget(c *httpConn) {
	s.mu.Lock()
	if s.http[c.id] == c {
		delete(s.http, c.id)
	}
	s.mu.Unlock()
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	if !acceptsEventStream(r) {
		http.Error(w, "Not Acceptable: GET needs Accept: text/event-stream, or a WebSocket upgrade", http.StatusNotAcceptable)
		return
	}
	if !s.sessionHeaderOK(w, r) {
		return
	}
	if c := s.connOf(w, r); c != nil {
		c.serveStream(w, r, r.Header.Get(HeaderSessionID))
	}
}

// MaxIDLength bounds a session's id, in Acp-Session-Id, and the id of a
// client's request, as the TypeScript SDK's server does (its
// DEFAULT_MAX_ID_LENGTH): the connection keeps each as a key while its
// stream or answer is pending, so that without a bound a header of up to
// a megabyte (or an id of up to a message) would be kept for each of
// MaxSessionStreams sessions or each request in flight.
const MaxIDLength = 1024

// sessionHeaderOK answers r with 400 and reports false if its
// Acp-Session-Id is longer than MaxIDLength.
func (s *Server) sessionHeaderOK(w http.ResponseWriter, r *http.Request) bool {
	if len(r.Header.Get(HeaderSessionID)) > MaxIDLength {
		s.refuseBody(w, r, http.StatusBadRequest, fmt.Sprintf("%s exceeds %d bytes", HeaderSessionID, MaxIDLength))
		return false
	}
	return true
}

// connOf returns the connection r names in its Acp-Connection-Id header, or
// answers r with the reason there is none and returns nil. A request that
// names a protocol version other than the one the connection negotiated is
// refused with 400, as MCP's Streamable HTTP does with MCP-Protocol-Version.
func (s *Server) connOf(w http.ResponseWriter, r *http.Request) *httpConn {
	cid := r.Header.Get(HeaderConnectionID)
	if cid == "" {
		s.refuseBody(w, r, http.StatusBadRequest, "missing "+HeaderConnectionID)
		return nil
	}
	c := s.lookup(cid)
	if c == nil {
		s.refuseBody(w, r, http.StatusNotFound, "unknown "+HeaderConnectionID)
		return nil
	}
	if v := strings.TrimSpace(r.Header.Get(HeaderProtocolVersion)); v != "" {
		if nv := c.protocolVersion(); nv != "" && v != nv {
			s.refuseBody(w, r, http.StatusBadRequest, fmt.Sprintf("unsupported %s %q: this connection negotiated protocol version %s", HeaderProtocolVersion, v, nv))
			return nil
		}
	}
	return c
}

func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, p := range strings.Split(v, ",") {
			if mt, _, _ := mime.ParseMediaType(strings.TrimSpace(p)); mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if c := s.connOf(w, r); c != nil {
		c.Close()
		w.WriteHeader(http.StatusAccepted)
	}
}
