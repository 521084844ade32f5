package mcpbridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/creachadair/jrpc2"
	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

const (
	headerSession  = "Mcp-Session-Id"
	headerProtocol = "Mcp-Protocol-Version"
)

// httpTransport serves MCP's streamable HTTP transport on a loopback port.
type httpTransport struct {
	b    *Bridge
	ln   *limitListener
	srv  *http.Server
	host string // 127.0.0.1:PORT, the only Host admitted
	base string // http://127.0.0.1:PORT
	idle time.Duration

	mu       sync.Mutex
	sessions map[string]*session // by Mcp-Session-Id
	closing  bool
}

func newHTTPTransport(b *Bridge, idle time.Duration) (*httpTransport, error) {
	// 127.0.0.1 and nothing else, by construction: the transport has no
	// address to configure.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: %w", err)
	}
	t := &httpTransport{
		b:        b,
		ln:       newLimitListener(ln, maxHTTPConns),
		host:     ln.Addr().String(),
		base:     "http://" + ln.Addr().String(),
		idle:     idle,
		sessions: make(map[string]*session),
	}
	t.srv = &http.Server{
		Handler: t,
		// Clients are on this machine: headers come at once, and a
		// connection that sends none in time is someone else's.
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          zap.NewStdLog(b.log.Named("http")),
	}
	return t, nil
}

// headerTimeout bounds how long an HTTP client may take to send a
// request's headers.
var headerTimeout = 3 * time.Second

func (t *httpTransport) serve() error {
	err := t.srv.Serve(t.ln)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("mcpbridge: serving HTTP: %w", err)
}

// shutdown ends every session, which ends every handler, then the server.
func (t *httpTransport) shutdown() {
	t.mu.Lock()
	t.closing = true
	all := make([]*session, 0, len(t.sessions))
	for _, s := range t.sessions {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.srv.Shutdown(ctx); err != nil {
		t.srv.Close() // a client that does not read its response
	}
}

// reapIdle ends sessions idle for longer than the timeout, until ctx is done.
func (t *httpTransport) reapIdle(ctx context.Context) {
	if t.idle < 0 {
		return
	}
	tick := time.NewTicker(max(min(t.idle/4, time.Minute), time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			t.mu.Lock()
			var idle []*session
			for _, s := range t.sessions {
				if s.idleSince(now) >= t.idle {
					idle = append(idle, s)
				}
			}
			t.mu.Unlock()
			for _, s := range idle {
				t.b.log.Info("ending idle MCP session", zap.String("server", s.server))
				s.end()
			}
		}
	}
}

// open starts a session for d and its Conn: one that lasts, with an id, for
// an initialize POST, or one that ends with its POST otherwise.
func (t *httpTransport) open(d *declaration, lasting bool) (*session, error) {
	id := ""
	if lasting {
		id = rand.Text() + rand.Text() // 256 bits, visible ASCII as MCP requires
	}
	s := newSession(t, id, d)
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return nil, ErrClosed
	}
	if lasting {
		t.sessions[id] = s
	}
	t.mu.Unlock()
	if !t.b.spawn(s.conn) {
		return nil, ErrClosed
	}
	return s, nil
}

func (t *httpTransport) lookup(id string, d *declaration) *session {
	t.mu.Lock()
	s := t.sessions[id]
	t.mu.Unlock()
	if s == nil || s.server != d.serverID {
		return nil
	}
	return s
}

func (t *httpTransport) forget(s *session) {
	if s.id == "" {
		return
	}
	t.mu.Lock()
	if t.sessions[s.id] == s {
		delete(t.sessions, s.id)
	}
	t.mu.Unlock()
}

func (t *httpTransport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, why := t.admit(r)
	if why != nil {
		t.refuse(w, r, why)
		return
	}
	switch r.Method {
	case http.MethodPost:
		t.post(w, r, d)
	case http.MethodGet:
		t.getStream(w, r, d)
	case http.MethodDelete:
		t.delete(w, r, d)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, jrpc2.InvalidRequest, "method not allowed")
	}
}

func (t *httpTransport) post(w http.ResponseWriter, r *http.Request, d *declaration) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(t.b.maxBytes)))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, jrpc2.InvalidRequest, fmt.Sprintf("message exceeds %d bytes", t.b.maxBytes))
		}
		return // else the client went away
	}
	p, err := parsePost(body)
	if err != nil {
		writeResponse(w, http.StatusBadRequest, wire.ErrorResponse(badPostID(body, err), wire.ParseError(err)))
		return
	}

	var s *session
	created := false
	if id := r.Header.Get(headerSession); id != "" {
		if s = t.lookup(id, d); s == nil {
			writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session not found")
			return
		}
	} else {
		if s, err = t.open(d, p.init); err != nil {
			writeError(w, http.StatusServiceUnavailable, codeConnectionClosed, "the conductor is stopping")
			return
		}
		created = true
	}
	s.busy()
	defer s.idle()
	if s.id == "" {
		defer s.end() // a session of one POST ends with it
	}

	if len(p.requests) == 0 {
		if err := s.deliver(r.Context(), p.msg); err != nil {
			if errors.Is(err, errGone) {
				writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session ended")
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}

	st := newStream(acceptsSSE(r.Header.Values("Accept")))
	st.batch, st.init, st.wait = p.batch, p.init, p.requests
	st.protocol = r.Header.Get(headerProtocol)
	if err := s.openPost(st); err != nil {
		if errors.Is(err, errDuplicateID) {
			writeError(w, http.StatusBadRequest, jrpc2.InvalidRequest, err.Error())
		} else {
			writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session ended")
		}
		return
	}
	if created && s.id != "" {
		w.Header().Set(headerSession, s.id)
	}
	if err := s.deliver(r.Context(), p.msg); err != nil {
		s.release(st, false) // the server never saw the requests
		if created {
			s.end()
		}
		if errors.Is(err, errGone) {
			writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session ended")
		}
		return
	}
	if t.respond(w, r, s, st) && s.id != "" {
		// As the MCP SDKs do: a session that failed to initialize is over.
		s.end()
	}
}

// sessionOf returns the session a GET or DELETE names, or answers it with
// why there is none.
func (t *httpTransport) sessionOf(w http.ResponseWriter, r *http.Request, d *declaration) *session {
	id := r.Header.Get(headerSession)
	if id == "" {
		writeError(w, http.StatusBadRequest, jrpc2.InvalidRequest, r.Method+" needs an Mcp-Session-Id header")
		return nil
	}
	s := t.lookup(id, d)
	if s == nil {
		writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session not found")
	}
	return s
}

func (t *httpTransport) getStream(w http.ResponseWriter, r *http.Request, d *declaration) {
	s := t.sessionOf(w, r, d)
	if s == nil {
		return
	}
	st, err := s.openGet()
	if err != nil {
		writeError(w, http.StatusNotFound, jrpc2.InvalidRequest, "session ended")
		return
	}
	s.busy()
	defer s.idle()
	t.respond(w, r, s, st)
}

func (t *httpTransport) delete(w http.ResponseWriter, r *http.Request, d *declaration) {
	s := t.sessionOf(w, r, d)
	if s == nil {
		return
	}
	s.end()
	w.WriteHeader(http.StatusNoContent)
}

// A post is a checked POST body.
type post struct {
	msg      []byte                     // the body, on one line
	requests map[string]json.RawMessage // its requests' ids, by id key
	batch    bool
	init     bool // it is an initialize request
}

func parsePost(body []byte) (*post, error) {
	body = bytes.TrimSpace(body)
	if !wire.Valid(body) {
		return nil, wire.ErrNotJSON
	}
	body, _ = oneLine(body) // valid JSON, so it compacts
	p := &post{msg: body, requests: make(map[string]json.RawMessage)}
	elems, err := split(body)
	if err != nil {
		return nil, err
	}
	p.batch = body[0] == '['
	if len(elems) == 0 {
		return nil, fmt.Errorf("%w: empty batch", wire.ErrNotJSONRPC)
	}
	for _, e := range elems {
		m, err := wire.Parse(e)
		if err != nil {
			return nil, err
		}
		if !m.IsRequest() {
			continue
		}
		k, ok := idKey(m.ID)
		if !ok {
			return nil, fmt.Errorf("%w: request id is null", wire.ErrNotJSONRPC)
		}
		if _, dup := p.requests[k]; dup {
			return nil, fmt.Errorf("%w: two requests with id %s", wire.ErrNotJSONRPC, m.ID)
		}
		p.requests[k] = m.ID
		p.init = p.init || m.Method == "initialize"
	}
	if p.init && p.batch {
		return nil, fmt.Errorf("%w: initialize must be sent alone", wire.ErrNotJSONRPC)
	}
	return p, nil
}

// split returns the messages of a batch, or msg alone.
func split(msg []byte) ([]json.RawMessage, error) {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 || msg[0] != '[' {
		return []json.RawMessage{msg}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(msg, &elems); err != nil {
		return nil, fmt.Errorf("mcpbridge: %w", err)
	}
	return elems, nil
}

// idKey returns a map key for a JSON-RPC id, alike for ids that are equal
// but spelt differently as strings.
func idKey(id json.RawMessage) (string, bool) {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || string(id) == "null" {
		return "", false
	}
	if id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s" + s, true
		}
	}
	return "n" + string(id), true
}

// acceptsSSE reports whether an Accept header lists text/event-stream.
func acceptsSSE(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// writeError answers with a JSON-RPC error that has no id, as MCP allows
// for HTTP errors.
func writeError(w http.ResponseWriter, status int, code jrpc2.Code, msg string) {
	writeResponse(w, status, wire.ErrorResponse(nil, wire.Errorf(code, "%s", msg)))
}

func writeResponse(w http.ResponseWriter, status int, m *wire.Message) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(m.Bytes())
}

// badPostID returns the id to answer a POST that parsePost refused with
// err: that of the invalid request it held alone, if it can be read, as
// JSON-RPC 2.0 answers an invalid request (see wire.ParseErrorID); else
// nil, for null. A batch is refused whole, under null: the id of one of
// its requests would answer only that one.
func badPostID(body []byte, err error) json.RawMessage {
	if body = bytes.TrimSpace(body); len(body) > 0 && body[0] == '[' {
		return nil
	}
	return wire.ParseErrorID(err)
}
