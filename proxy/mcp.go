package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// MCP over ACP, the proxy's side of it. For each session the client sets up,
// the proxy declares each of its MCP servers under a fresh id in the
// request's mcpServers before passing it on. The conductor records the proxy
// as the owner of those ids and sends it, as if from its successor, the
// agent's mcp/connect for them and everything on the connections they open.
// A fresh id per session, rather than one per server, is what lets a
// connection know its session (its working directory, say) although the
// agent's MCP client never names it: the RFD gives the id that purpose.
//
// Under a conductor of the Thinkwell dialect (@thinkwell/conductor, sacp
// up to 11) the declarations and methods are that dialect's
// (wire.Dialect.MCPByURL): a server is {"type":"http","url":"acp:<uuid>"},
// its conductor proposes the connection id on _mcp/connect, and the
// methods are _mcp/*. Those conductors read no other declaration.
//
// Messages on a connection are handled on the reader, in the order they
// arrive, since MCP's own order matters (initialize before
// notifications/initialized before tools/list); the server reads them from
// its MCPConn at its own pace. mcp/connect for an id the proxy did not
// declare, and the connections it opens, belong to someone before the proxy
// and go on as any other message would, until they are disconnected or the
// sessions that declared the server through the proxy have all closed (or
// the session the conductor named on mcp/connect has), a session forgotten
// for maxSessions counting as closed. One tied to no session that way, or
// only to a session the proxy does not keep (never seen set up, or
// forgotten), may end only when disconnected, so the proxy keeps at most
// maxUntied of them, and refuses a connect past that. A connection to the
// proxy's own servers ends with its session, but a session open for long
// could hold any number, so each session holds at most maxSessionConns,
// the least recently used ending past that. So could one tied by its end
// to a session kept: each session holds at most maxSessionConns of those
// too, and a connect past that, which the proxy cannot end, is refused.

// MCP-over-ACP methods, and the requests that set up a session and so carry
// mcpServers.
const (
	methodMCPConnect    = "mcp/connect"
	methodMCPMessage    = "mcp/message"
	methodMCPDisconnect = "mcp/disconnect"
)

var sessionSetUp = map[string]bool{
	"session/new": true, "session/load": true, "session/resume": true, "session/fork": true,
}

// sessionEnd holds the requests after whose success a session's servers
// are of no more use (the conductor's list).
var sessionEnd = map[string]bool{"session/close": true, "session/delete": true}

// An MCPServer is an MCP server that a proxy offers the agent over ACP
// itself, as the MCP-over-ACP RFD describes: it needs no process, port or
// file of its own, and the agent reaches it through the conductor whether or
// not the agent speaks MCP-over-ACP (the conductor bridges for agents that
// do not). List it in [Proxy.MCPServers].
//
// The server's side of the MCP protocol is Serve's: the proxy only carries
// whole JSON-RPC messages between it and the agent's MCP client, so any MCP
// implementation can sit on top (package
// github.com/acp-conductor/acp-conductor/proxy/mcpsdk adapts the official
// Go SDK's servers).
type MCPServer struct {
	// Name is the name the server is declared with. Agents show it, and
	// often prefix the names of its tools with it, so it should be short
	// and unique among the session's MCP servers.
	Name string

	// Serve serves one connection from the agent's MCP client, reading the
	// client's messages from c and writing the server's, and returns when
	// it is done with the connection. It runs on a goroutine of its own for
	// each connection, so it may be running for many connections, to one
	// server or several, at once.
	//
	// ctx is done when the client disconnects or the proxy stops, and
	// Serve should then return soon; once it returns, c is closed.
	Serve func(ctx context.Context, c *MCPConn) error
}

// An MCPSession is what the proxy knows of the ACP session that an MCP
// connection serves: the one whose set-up request declared the server the
// agent connected to.
type MCPSession struct {
	// ID is the session's id. It comes from the answer to session/new or
	// session/fork, and from the request for session/load and
	// session/resume. An agent that connects to its MCP servers before
	// answering session/new leaves it empty until it answers, unless the
	// conductor named the session on mcp/connect (acp-conductor does, in
	// _meta["acp-conductor/sessionId"]).
	ID string
	// Cwd is the session's working directory, as the request gave it.
	Cwd string
	// Method and Params are the set-up request as the proxy received it,
	// with its declarations added, for anything else a server needs.
	Method string
	Params json.RawMessage
}

// checkMCPServers reports what is wrong with a list of servers, if anything.
func checkMCPServers(servers []*MCPServer) error {
	names := make(map[string]bool)
	for i, s := range servers {
		switch {
		case s == nil:
			return fmt.Errorf("proxy: MCPServers[%d] is nil", i)
		case s.Name == "":
			return fmt.Errorf("proxy: MCPServers[%d] has no Name", i)
		case s.Serve == nil:
			return fmt.Errorf("proxy: MCP server %q has no Serve function", s.Name)
		case names[s.Name]:
			return fmt.Errorf("proxy: two MCP servers are named %q", s.Name)
		}
		names[s.Name] = true
	}
	return nil
}

// An mcpHost serves a proxy's MCP servers on one connection to its
// conductor.
type mcpHost struct {
	c         *Conn
	servers   []*MCPServer
	maxUntied int // maxUntied when the host started, which tests change

	// Each entry lasts until its session ends, if not until the client
	// disconnects, or until the connection to the conductor closes: a
	// client that opens sessions all day and never disconnects must not
	// grow the proxy. Nor must one that never closes them: sessions
	// bounds the sessions kept, and a session set up again replaces what
	// its earlier set-up declared.
	mu            sync.Mutex
	declared      map[string]declaration      // by server id
	conns         map[string]*MCPConn         // by connection id
	theirs        map[string][]*sessionRecord // servers declared before the proxy, by id: the sessions that declared them
	upstream      map[string]upstreamConn     // connections opened with someone before the proxy, by id
	opening       map[*openingConn]bool       // connects to someone before the proxy awaiting their answer
	untied        int                         // of upstream and of opening, those counted as untied (see maxUntied, count)
	passed        int                         // of those, the ones whose tie passed to a session that held its most
	clock         uint64                      // counts the uses of conns, to find a session's least recently used
	trimmed       bool                        // a connection was ended for maxSessionConns
	refusedTied   bool                        // an upstream connect was refused for maxSessionConns
	refusedUntied bool                        // an upstream connect was refused for maxUntied
	ended         endedConns                  // connections the proxy ended or forgot, for their late mcp/disconnect
	sessions      sessionTable                // the set-ups whose declarations are kept
}

func newMCPHost(c *Conn, servers []*MCPServer) *mcpHost {
	return &mcpHost{
		c:         c,
		servers:   servers,
		declared:  make(map[string]declaration),
		conns:     make(map[string]*MCPConn),
		theirs:    make(map[string][]*sessionRecord),
		upstream:  make(map[string]upstreamConn),
		opening:   make(map[*openingConn]bool),
		maxUntied: maxUntied,
		ended:     endedConns{Limit: maxEnded},
		sessions:  sessionTable{limit: maxSessions, byID: make(map[string]*sessionRecord)},
	}
}

// stop forgets everything once the connection to the conductor is closed
// and its handlers, the servers' included, have returned: nothing about
// any of it can arrive any more.
func (h *mcpHost) stop() {
	h.mu.Lock()
	h.declared, h.conns = map[string]declaration{}, map[string]*MCPConn{}
	h.theirs, h.upstream, h.untied, h.passed = map[string][]*sessionRecord{}, map[string]upstreamConn{}, 0, 0
	h.opening = map[*openingConn]bool{}
	h.ended = endedConns{Limit: maxEnded}
	h.sessions = sessionTable{limit: h.sessions.limit, byID: map[string]*sessionRecord{}}
	h.mu.Unlock()
}

// receive takes the messages that concern the proxy's MCP servers, and
// reports whether it took m. It runs on the reader.
func (h *mcpHost) receive(id json.RawMessage, from Side, method string, params, extra json.RawMessage) bool {
	switch {
	case from == Predecessor && sessionSetUp[method]:
		h.c.handle(id, from, method, params, extra, h.setUp(h.c.p.handler(from, method)))
		return true
	case from == Predecessor && sessionEnd[method]:
		h.c.handle(id, from, method, params, extra, h.tearDown(h.c.p.handler(from, method)))
		return true
	case from == Predecessor && method == "session/prompt":
		h.prompted(params)
		return false
	case from != Successor:
		return false
	}
	switch rfd, _ := wire.MCPMethod(method); rfd { // in any dialect's spelling
	case methodMCPConnect:
		return h.connect(id, method, params, extra)
	case methodMCPMessage, methodMCPDisconnect:
		return h.onConn(id, rfd, params)
	}
	return false
}

// setUp wraps the handler of a session set-up request (nil: forwarding) so
// that the request declares the proxy's servers. fn sees the declarations
// already in r.Params, and the agent's answer completes the session's record.
func (h *mcpHost) setUp(fn Handler) Handler {
	if fn == nil {
		fn = forward
	}
	return func(ctx context.Context, r *Request) (json.RawMessage, error) {
		var req struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		}
		_ = json.Unmarshal(r.Params, &req) // what cannot be read stays unknown
		rec := &sessionRecord{s: MCPSession{Cwd: req.Cwd, Method: r.Method}}
		if r.Method == "session/load" || r.Method == "session/resume" {
			rec.s.ID = req.SessionID // session/fork names the session it copies
		}
		theirs := h.noteTheirs(r.Params, rec)
		ids, params, err := h.declare(r.Params, rec, h.c.getDialect())
		if err != nil {
			h.c.log.Warn("could not declare the proxy's MCP servers; the session goes on without them",
				"method", r.Method, "error", err)
			rec.s.Params = r.Params // for no one: nothing was declared
		} else {
			r.Params = params
		}

		// A set-up whose handler panics failed as one that returns an
		// error did: nothing will connect, and kept, its declarations
		// would be no session's, for the Conn's life.
		done := false
		defer func() {
			if !done {
				h.forget(ids, theirs, rec)
			}
		}()
		result, err := fn(ctx, r)
		if err != nil {
			return nil, err // no session, so nothing will connect
		}
		done = true
		var res struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(result, &res) == nil && res.SessionID != "" {
			rec.mu.Lock()
			rec.s.ID = res.SessionID
			rec.mu.Unlock()
		}
		h.keep(rec, ids, theirs)
		return result, nil
	}
}

// keep enters rec, a set-up that succeeded, which declared ids and noted
// theirs, in the table of sessions, first: in place of the set-up its
// session had (see replaced), and, past the table's limit, forgetting the
// least recently used session.
func (h *mcpHost) keep(rec *sessionRecord, ids, theirs []string) {
	var ended []*MCPConn
	h.mu.Lock()
	t := &h.sessions
	rec.ids, rec.theirs, rec.settled = ids, theirs, true
	if rec.dropped || len(ids)+len(theirs) == 0 {
		h.mu.Unlock()
		return
	}
	id := rec.get().ID
	if old := t.byID[id]; id != "" && old != nil {
		h.replaced(old, id)
		ended = append(ended, h.adopt(rec, old)...)
	}
	t.push(rec)
	if id != "" {
		rec.key, t.byID[id] = id, rec
		h.recount() // those named for it before it was kept, and those the set-up it replaced held
	}
	for t.n > t.limit {
		victim := t.tail
		session := victim.get().ID
		if !t.warned {
			t.warned = true
			h.c.log.Warn("forgot the MCP state of the least recently used session, as if it had closed, to keep that of no more than limit sessions: its MCP connections end, and later ones are logged at debug level",
				"session", session, "limit", t.limit)
		} else {
			h.c.log.Debug("forgot the MCP state of the least recently used session", "session", session)
		}
		// Its connections too, but not a set-up of the session still
		// awaiting its answer (a load of it, say): that one is live.
		match := func(r *sessionRecord) bool { return r == victim }
		if session != "" {
			match = func(r *sessionRecord) bool { return r.settled && r.get().ID == session }
		}
		ended = append(ended, h.end(match, session)...)
	}
	h.mu.Unlock()
	for _, mc := range ended {
		mc.end(io.EOF)
	}
}

// replaced forgets old, the set-up session had until another succeeded:
// its declarations, which the agent was given anew, and its notes of the
// servers before the proxy. Connections still open stay, tied to the
// session, until it closes: those to the proxy's servers are (by their
// record's id), and those the proxy saw opened to servers only old
// declared, or that are opening to them, are tied to it by id. h.mu is
// held.
func (h *mcpHost) replaced(old *sessionRecord, session string) {
	h.sessions.remove(old)
	for _, id := range old.ids {
		delete(h.declared, id)
	}
	gone := h.unnote(old.theirs, func(r *sessionRecord) bool { return r == old })
	for cid, up := range h.upstream {
		if gone[up.server] {
			h.setUpstream(cid, upstreamConn{session: session})
		}
	}
	for o := range h.opening {
		if gone[o.up.server] {
			o.up.server, o.up.session = "", session // still counted as it was: keep recounts it
		}
	}
}

// prompted marks the session a prompt names as used.
func (h *mcpHost) prompted(params json.RawMessage) {
	raw := wire.Member(params, "sessionId")
	if len(raw) < 2 || raw[0] != '"' {
		return
	}
	id, ok := wire.Unquote(raw)
	if !ok {
		return
	}
	h.mu.Lock()
	if r := h.sessions.byID[id]; r != nil {
		h.touch(r)
	}
	h.mu.Unlock()
}

// declare adds a declaration of every server, each under a new id, to the
// mcpServers of params, keeping the entries and bytes already there, and
// records them, and the params, for rec's session. The declarations are
// those the conductor's dialect d reads.
func (h *mcpHost) declare(params json.RawMessage, rec *sessionRecord, d *wire.Dialect) ([]string, json.RawMessage, error) {
	ids := make([]string, len(h.servers))
	entries := make([]json.RawMessage, len(h.servers))
	for i, s := range h.servers {
		ids[i] = newUUID()
		var e []byte
		var err error
		if d.MCPByURL {
			ids[i] = "acp:" + ids[i]
			e, err = json.Marshal(struct {
				Type    string   `json:"type"`
				Name    string   `json:"name"`
				URL     string   `json:"url"`
				Headers []string `json:"headers"`
			}{"http", s.Name, ids[i], []string{}})
		} else {
			// serverId is the current schema's spelling, which SDK
			// agents require; conductors route either spelling.
			e, err = json.Marshal(struct {
				Type     string `json:"type"`
				Name     string `json:"name"`
				ServerID string `json:"serverId"`
			}{"acp", s.Name, ids[i]})
		}
		if err != nil {
			return nil, nil, err
		}
		entries[i] = e
	}
	params, err := EditMember(params, "mcpServers", func(list json.RawMessage) (json.RawMessage, error) {
		return appendElems(list, entries)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mcpServers: %w", err)
	}
	rec.s.Params = params // before anything can connect and read it
	h.mu.Lock()
	for i, s := range h.servers {
		h.declared[ids[i]] = declaration{server: s, session: rec}
	}
	h.mu.Unlock()
	return ids, params, nil
}

// noteTheirs records the acp servers that params declare before the proxy
// adds its own as declared in rec's session, and returns their ids.
func (h *mcpHost) noteTheirs(params json.RawMessage, rec *sessionRecord) []string {
	var servers []json.RawMessage
	if json.Unmarshal(wire.Member(params, "mcpServers"), &servers) != nil {
		return nil
	}
	var ids []string
	for _, raw := range servers {
		var typ, url string
		_ = json.Unmarshal(wire.Member(raw, "type"), &typ)
		_ = json.Unmarshal(wire.Member(raw, "url"), &url)
		switch {
		case typ == "http" && strings.HasPrefix(url, "acp:"):
			ids = append(ids, url)
		case typ == "acp":
			if id := firstNonEmpty(raw, "id", "serverId"); id != "" {
				ids = append(ids, id)
			}
		}
	}
	h.mu.Lock()
	for _, id := range ids {
		h.theirs[id] = append(h.theirs[id], rec)
	}
	h.mu.Unlock()
	return ids
}

// tearDown wraps the handler of a request that ends a session (nil:
// forwarding) so that, once the agent has agreed, what the proxy keeps for
// the session is forgotten (closed): no one connects to its servers any
// more, and kept, it would grow with every session a client opens in the
// Conn's life.
func (h *mcpHost) tearDown(fn Handler) Handler {
	if fn == nil {
		fn = forward
	}
	return func(ctx context.Context, r *Request) (json.RawMessage, error) {
		var req struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(r.Params, &req) // as the client sent it, whatever fn does
		result, err := fn(ctx, r)
		if err == nil && req.SessionID != "" {
			h.closed(req.SessionID)
		}
		return result, err
	}
}

// closed forgets what the proxy keeps for the session with id session:
// the declarations of its servers, and the connections to them, which end
// as if their client had disconnected (a server's Read returns io.EOF);
// the servers declared before the proxy that no other open session
// declared, and the connections the proxy saw opened to them or for the
// session, whose messages are refused from then on as on any unknown
// connection, but for a late mcp/disconnect (onConn).
func (h *mcpHost) closed(session string) {
	h.mu.Lock()
	ended := h.end(func(r *sessionRecord) bool { return r.get().ID == session }, session)
	h.mu.Unlock()
	for _, mc := range ended {
		mc.end(io.EOF)
	}
}

// end forgets, as closed says, what the proxy keeps for the set-ups that
// match, of session if it is not "", and returns the connections to end.
// h.mu is held.
func (h *mcpHost) end(match func(*sessionRecord) bool, session string) []*MCPConn {
	var ended []*MCPConn
	for id, d := range h.declared {
		if match(d.session) {
			delete(h.declared, id)
			d.session.dropped = true // a set-up still awaiting its answer keeps nothing
		}
	}
	for id, mc := range h.conns {
		if match(mc.session) {
			h.dropConn(mc)
			h.ended.Add(id, false)
			ended = append(ended, mc)
		}
	}
	var theirs []string
	for id := range h.theirs {
		theirs = append(theirs, id)
	}
	gone := h.unnote(theirs, match)
	ends := func(up upstreamConn) bool {
		return gone[up.server] || up.server == "" && session != "" && up.session == session
	}
	for id, up := range h.upstream {
		if ends(up) {
			h.dropUpstream(id)
			h.ended.Add(id, true)
		}
	}
	for o := range h.opening {
		if ends(o.up) {
			o.forgotten = true // once open, as those above
		}
	}
	for r := h.sessions.head; r != nil; {
		next := r.next
		if match(r) {
			h.sessions.remove(r)
		}
		r = next
	}
	h.recount() // those left that the set-ups ended held (their server declared elsewhere too)
	return ended
}

// unnote removes the set-ups that match from those noted as declaring each
// of ids, servers before the proxy, and returns the ids that no set-up
// declares any more. h.mu is held.
func (h *mcpHost) unnote(ids []string, match func(*sessionRecord) bool) map[string]bool {
	gone := make(map[string]bool)
	for _, id := range ids {
		recs, ok := h.theirs[id]
		if !ok {
			continue
		}
		if recs = slices.DeleteFunc(recs, match); len(recs) > 0 {
			h.theirs[id] = recs
			continue
		}
		delete(h.theirs, id)
		gone[id] = true
	}
	return gone
}

// forget withdraws what a failed set-up in rec's session declared: ids of
// the proxy's servers, theirs of servers before it, and the connections
// the proxy saw opened to those only it declared, which are forgotten as
// end forgets them: no session's end would end them any more, and they
// were not counted as untied.
func (h *mcpHost) forget(ids, theirs []string, rec *sessionRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		delete(h.declared, id)
	}
	gone := h.unnote(theirs, func(r *sessionRecord) bool { return r == rec })
	for id, up := range h.upstream {
		if gone[up.server] {
			h.dropUpstream(id)
			h.ended.Add(id, true)
		}
	}
	h.recount() // those left that rec held (their server declared elsewhere too)
}

// connect opens a connection to one of the proxy's servers and starts
// serving it, under the connectionId the conductor proposed if it did. An
// mcp/connect (spelled method) for a server the proxy did not declare goes
// on toward its owner, and the proxy notes the connection it opens, so that
// the messages on it go on too, as themselves, extra (see extraOf) with
// them; one the proxy serves is not passed on, and extra ends with it.
func (h *mcpHost) connect(id json.RawMessage, method string, params, extra json.RawMessage) bool {
	h.mu.Lock()
	d, ok := h.declared[connectTarget(params)]
	h.mu.Unlock()
	switch {
	case !ok && id == nil:
		return false
	case !ok:
		h.c.handle(id, Successor, method, params, extra, h.connectUpstream(h.c.p.handler(Successor, method)))
		return true
	case id == nil:
		h.c.log.Warn("dropped an mcp/connect notification; connecting takes a request")
		return true
	}
	d.session.learnID(params)
	var proposed string
	_ = json.Unmarshal(wire.Member(params, "connectionId"), &proposed)
	h.mu.Lock()
	if _, up := h.upstream[proposed]; up || h.conns[proposed] != nil {
		proposed = "" // taken: the answer names another
	}
	mc := newMCPConn(h, d, proposed)
	h.conns[mc.id] = mc
	trimmed := h.hold(d.session, mc)
	h.touch(d.session)
	h.mu.Unlock()
	for _, old := range trimmed {
		old.end(io.EOF)
	}
	answer := `{"connectionId":` + mc.quotedID + `}`
	if h.c.getDialect().MCPByURL {
		answer = `{"connectionId":` + mc.quotedID + `,"connection_id":` + mc.quotedID + `}`
	}
	h.c.answer(nil, id, json.RawMessage(answer), nil, nil)
	h.c.handlers.Go(func() error {
		mc.serve(d.server)
		return nil
	})
	return true
}

// logOnce logs what a bound made the proxy do: a warning the first time,
// which *warned records, and the same at debug level after, so that a peer
// pressing against a bound does not flood the log.
func (h *mcpHost) logOnce(warned *bool, warn, debug string, args ...any) {
	if *warned {
		h.c.log.Debug(debug, args...)
		return
	}
	*warned = true
	h.c.log.Warn(warn, args...)
}

// connectUpstream wraps the handler for an mcp/connect that is not the
// proxy's (nil: forwarding) to note the connection it opens. One that
// would be untied with the host's maxUntied counted already, or tied
// then with some of those passed from full sessions (see maxUntied), or
// tied to a session that holds maxSessionConns such connections already,
// is refused before fn runs.
func (h *mcpHost) connectUpstream(fn Handler) Handler {
	if fn == nil {
		fn = forward
	}
	return func(ctx context.Context, r *Request) (json.RawMessage, error) {
		server := connectTarget(r.Params)
		o := &openingConn{}
		_ = json.Unmarshal(wire.Member(wire.Member(r.Params, "_meta"), metaSessionID), &o.up.session)
		h.mu.Lock()
		if len(h.theirs[server]) > 0 {
			o.up.server = server
		}
		untied := h.untiedConn(o.up)
		if (untied || h.passed > 0) && h.untied >= h.maxUntied {
			args := []any{"method", r.Method, "server", server}
			if o.up.session != "" {
				args = append(args, "session", o.up.session) // one it does not keep, if untied
			}
			args = append(args, "limit", h.maxUntied)
			if h.passed > 0 {
				args = append(args, "passed", h.passed)
			}
			h.logOnce(&h.refusedUntied, "refused an mcp/connect through the proxy: limit connections to MCP servers that only mcp/disconnect ends (declared in none of its open sessions, for no session it keeps), or tied past their sessions' bound, are open, the most the proxy keeps; later ones are logged at debug level",
				"refused an mcp/connect through the proxy for the bound on connections that only mcp/disconnect ends", args...)
			h.mu.Unlock()
			return nil, &Error{Code: int(jrpc2.InternalError), Message: fmt.Sprintf(
				"proxy %s: %s to %q refused: %d connections through the proxy to MCP servers that only mcp/disconnect ends (declared in none of its open sessions, for no session it keeps), or tied past their sessions' bound, are open, the most it keeps; disconnect one first",
				h.c.p.name(), r.Method, server, h.maxUntied)}
		}
		if rec := h.tiedTo(o.up); !untied && rec != nil && rec.upstream >= maxSessionConns {
			session := rec.get().ID
			args := []any{"method", r.Method, "server", server, "session", session, "limit", maxSessionConns}
			h.logOnce(&h.refusedTied, "refused an mcp/connect through the proxy: the session holds limit connections to MCP servers declared before the proxy, the most the proxy keeps for one session; later ones are logged at debug level",
				"refused an mcp/connect through the proxy for the bound on a session's connections", args...)
			h.mu.Unlock()
			return nil, &Error{Code: int(jrpc2.InternalError), Message: fmt.Sprintf(
				"proxy %s: %s to %q refused: %d connections through the proxy to MCP servers that session %q's end ends are open, the most it keeps for one session; disconnect one first",
				h.c.p.name(), r.Method, server, maxSessionConns, session)}
		}
		// Counted while pending too, so that connects at once cannot
		// pass a bound.
		h.count(&o.up)
		h.opening[o] = true
		h.mu.Unlock()
		withdraw := func() { // h.mu held
			delete(h.opening, o)
			h.uncount(&o.up)
		}
		// A handler that panics must withdraw it too: pending for ever,
		// it would hold a place under a bound.
		panicked := true
		defer func() {
			if panicked {
				h.mu.Lock()
				withdraw()
				h.mu.Unlock()
			}
		}()
		result, err := fn(ctx, r)
		panicked = false
		h.mu.Lock()
		defer h.mu.Unlock()
		withdraw()
		if cid := connectionID(result); err == nil && cid != "" {
			switch {
			case o.forgotten, o.up.server != "" && len(h.theirs[o.up.server]) == 0:
				// What tied it ended while it opened: its server's
				// sessions, or its session, closed or were forgotten for
				// maxSessions (end), or the set-ups that declared its
				// server failed (forget). Forgotten, as end forgets those
				// it finds.
				h.ended.Add(cid, true)
			default:
				if len(h.theirs[server]) > 0 {
					o.up.server = server // declared through the proxy meanwhile
				}
				h.setUpstream(cid, o.up)
			}
		}
		return result, err
	}
}

// onConn delivers an mcp/message or mcp/disconnect to the connection it
// names. A connection that is not the proxy's, but that it saw opened, is
// left to ordinary handling; one it never heard of is refused. A
// disconnect is idempotent: for a connection the proxy ended already
// (disconnected, or its session closed) it succeeds; for an upstream one
// it forgot, it goes on to the owner, whose connection it is. Only a
// connection the proxy has no trace of, never opened or long gone
// (maxEnded), is refused: the caller has the wrong id, or the wrong
// proxy.
func (h *mcpHost) onConn(id json.RawMessage, method string, params json.RawMessage) bool {
	raw := wire.Member(params, "connectionId")
	if raw == nil {
		raw = wire.Member(params, "connection_id") // sacp's _mcp/disconnect
	}
	cid := connectionID(params)
	h.mu.Lock()
	mc := h.conns[cid]
	if mc != nil {
		h.touch(mc.session)
		h.use(mc)
	}
	_, up := h.upstream[cid]
	var endedUp, ended bool
	if method == methodMCPDisconnect {
		switch {
		case mc != nil:
			h.dropConn(mc)
			h.ended.Add(cid, false)
		case up:
			h.dropUpstream(cid)
			h.ended.Add(cid, true)
		default:
			endedUp, ended = h.ended.Get(cid)
		}
	}
	h.mu.Unlock()
	switch {
	case mc != nil && method == methodMCPMessage:
		mc.fromClient(id, params)
	case mc != nil:
		mc.end(io.EOF)
		if id != nil {
			h.c.answer(nil, id, json.RawMessage(`{}`), nil, nil)
		}
	case up || endedUp:
		return false
	case ended:
		if id != nil {
			h.c.answer(nil, id, json.RawMessage(`{}`), nil, nil)
		}
	case id != nil:
		if raw == nil {
			raw = json.RawMessage("null")
		}
		h.c.send(wire.ErrorResponse(id, wire.Errorf(jrpc2.InvalidParams, "%s: unknown MCP connection", method).
			WithData(map[string]json.RawMessage{"connectionId": raw})))
	default:
		h.c.log.Warn("dropped a notification for an unknown MCP connection", "method", method, "connectionId", string(raw))
	}
	return true
}

// connectTarget returns the server id an mcp/connect names: acpId in the
// RFD's spelling, serverId in the Rust SDK's, url in the Thinkwell
// dialect's (acp_url in sacp's).
func connectTarget(params json.RawMessage) string {
	return firstString(params, "acpId", "serverId", "url", "acp_url")
}

// connectionID returns the connection an mcp/connect answer or an
// mcp/message or mcp/disconnect names: connectionId, or sacp's
// connection_id.
func connectionID(obj json.RawMessage) string {
	return firstString(obj, "connectionId", "connection_id")
}

// firstNonEmpty returns the first of obj's members named that is a
// string other than "".
func firstNonEmpty(obj json.RawMessage, names ...string) string {
	for _, name := range names {
		if s := firstString(obj, name); s != "" {
			return s
		}
	}
	return ""
}

// firstString returns the first of obj's members named that is a string.
func firstString(obj json.RawMessage, names ...string) string {
	for _, name := range names {
		var s string
		if raw := wire.Member(obj, name); raw != nil && json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return ""
}

var errNotArray = errors.New("not a JSON array")

// appendElems returns the JSON array list with elems added at its end, and
// its own elements byte for byte as they were. A missing or null list counts
// as empty.
func appendElems(list json.RawMessage, elems []json.RawMessage) (json.RawMessage, error) {
	list = bytes.TrimSpace(list)
	var old []json.RawMessage
	if len(list) > 0 && string(list) != "null" {
		if list[0] != '[' || json.Unmarshal(list, &old) != nil {
			return nil, errNotArray
		}
	}
	out := []byte{'['}
	if len(old) > 0 {
		out = append(append(out, bytes.TrimSpace(list[1:len(list)-1])...), ',')
	}
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']'), nil
}

// newUUID returns a random (version 4) UUID. Server and connection ids must
// be unique across the whole chain, whose conductor routes by them.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
