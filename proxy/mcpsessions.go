package proxy

import (
	"encoding/json"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// maxSessions bounds the sessions whose MCP state the proxy keeps: a client
// that never closes its sessions (session/close is recent, and few send
// it) must not grow the proxy. Past it, the least recently used is
// forgotten as if it had closed. A variable, for tests.
var maxSessions = 1024

// maxSessionConns bounds the connections to the proxy's servers that one
// session holds. Each ends with its session, but a session may stay open
// for the proxy's life, and an agent whose MCP client connects and never
// disconnects (or a hostile one) would grow it, and the proxy, a goroutine
// running Serve for each. An agent opens one connection to each server it
// uses in a session, and again when its MCP client restarts: 256, a
// quarter of the bounds on sessions and on untied connections, is far
// more than that for a proxy of a few servers, and one session's
// connections stay fewer than the ended ones the proxy remembers
// (maxEnded). Past it, the least recently used of the
// session's connections (opened, or sent on by the agent) ends as if its
// client had disconnected, as the least recently used session is
// forgotten past maxSessions: the session, and the connections it uses,
// go on.
//
// It bounds too, apart, the connections through the proxy to servers
// declared before it that the session's end would end (tied to it, see
// upstreamConn), with the connects for them pending: each is only a table
// entry, but a session open for the proxy's life would keep any number,
// as untied ones would but for maxUntied. The proxy cannot end those (they
// are its predecessor's), so past the bound an mcp/connect that would be
// tied to the session is refused, saying so, as one past maxUntied is,
// and the session's others go on. The same bound serves, not one of its
// own: an agent connects to a session's servers before the proxy as often
// as to the proxy's, and a session's end remembers each connection it
// ends, of either kind, as ended, so that twice the bound must stay within
// maxEnded lest one session's end push its own first connections out.
const maxSessionConns = 256

// A sessionTable holds the set-ups that succeeded and declared anything,
// the most recently used first: at most one for each session, the latest
// (a session loaded again gets fresh declarations, and the old ones are of
// no more use), and at most limit in all. A set-up is used when it
// succeeds, when a prompt names its session, and when the agent connects
// to one of its servers or sends on such a connection. Its fields, and the
// records' links, are guarded by mcpHost.mu.
type sessionTable struct {
	limit      int
	head, tail *sessionRecord
	n          int
	byID       map[string]*sessionRecord // by the session id each is kept under
	warned     bool                      // a session was forgotten for the limit
}

// push puts r first.
func (t *sessionTable) push(r *sessionRecord) {
	r.kept, r.prev, r.next = true, nil, t.head
	if t.head != nil {
		t.head.prev = r
	} else {
		t.tail = r
	}
	t.head = r
	t.n++
}

// remove takes r out of the table.
func (t *sessionTable) remove(r *sessionRecord) {
	if !r.kept {
		return
	}
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		t.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		t.tail = r.prev
	}
	if r.key != "" && t.byID[r.key] == r {
		delete(t.byID, r.key)
	}
	r.kept, r.prev, r.next, r.key = false, nil, nil, ""
	t.n--
}

// touch puts r, if kept, first, and keeps it under its id if it has
// learned one since (from mcp/connect) that no other holds, returning
// that id if so.
func (t *sessionTable) touch(r *sessionRecord) (keyed string) {
	if !r.kept {
		return ""
	}
	if t.head != r {
		t.remove(r)
		t.push(r)
	}
	if r.key == "" {
		if id := r.get().ID; id != "" && t.byID[id] == nil {
			r.key = id
			t.byID[id] = r
			return id
		}
	}
	return ""
}

// touch touches r in the table, and ties to it the upstream connections
// named for its session if it is now kept under the session's id (see
// recount). h.mu is held.
func (h *mcpHost) touch(r *sessionRecord) {
	if h.sessions.touch(r) != "" {
		h.recount()
	}
}

// A declaration is one server declared in one session.
type declaration struct {
	server  *MCPServer
	session *sessionRecord
}

// A sessionRecord is an MCPSession that set-up fills in as it learns more,
// and what the set-up declared.
type sessionRecord struct {
	mu sync.Mutex
	s  MCPSession

	// Guarded by mcpHost.mu.
	ids, theirs []string          // the proxy's servers it declared, and those before the proxy
	conns       map[*MCPConn]bool // the open connections to its servers, and to those of the set-ups it replaced (see maxSessionConns)
	upstream    int               // the upstream connections, open or pending, counted as tied to it (see maxSessionConns, upstreamConn.holder)
	settled     bool              // it succeeded
	dropped     bool              // its declarations were forgotten (its session closed)
	kept        bool              // in the sessionTable
	key         string            // the id it is kept under there, if any
	prev, next  *sessionRecord    // its neighbours there
}

// metaSessionID is the _meta key under which acp-conductor names the ACP
// session on mcp/connect (and on each request-binding mcp/message).
const metaSessionID = "acp-conductor/sessionId"

// learnID fills in the session's id from an mcp/connect's _meta, for an
// agent that connects before it has answered session/new.
func (r *sessionRecord) learnID(params json.RawMessage) {
	var id string
	if json.Unmarshal(wire.Member(wire.Member(params, "_meta"), metaSessionID), &id) != nil || id == "" {
		return
	}
	r.mu.Lock()
	if r.s.ID == "" {
		r.s.ID = id
	}
	r.mu.Unlock()
}

func (r *sessionRecord) get() MCPSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.s
}

// hold counts mc, just opened to a server r declared, among r's
// connections, as used, and returns the connections to end for
// maxSessionConns. h.mu is held.
func (h *mcpHost) hold(r *sessionRecord, mc *MCPConn) []*MCPConn {
	if r.conns == nil {
		r.conns = make(map[*MCPConn]bool)
	}
	r.conns[mc], mc.holder = true, r
	h.use(mc)
	return h.trim(r)
}

// adopt moves the connections old holds to r, which replaced it as its
// session's set-up: they end with the session, and so count among its
// own, lest a session set up again and again hold maxSessionConns for
// each set-up. It returns the connections to end for the bound. h.mu is
// held.
func (h *mcpHost) adopt(r, old *sessionRecord) []*MCPConn {
	if len(old.conns) == 0 {
		return nil
	}
	if r.conns == nil {
		r.conns = make(map[*MCPConn]bool)
	}
	for mc := range old.conns {
		r.conns[mc], mc.holder = true, r
	}
	old.conns = nil
	return h.trim(r)
}

// use marks mc as used now. h.mu is held.
func (h *mcpHost) use(mc *MCPConn) {
	h.clock++
	mc.used = h.clock
}

// trim forgets, past maxSessionConns, the least recently used of r's
// connections, as mcp/disconnect would: they are remembered as ended, so
// that the agent's later messages on them are refused as on any unknown
// connection and its mcp/disconnect of them succeeds. It warns the first
// time, and returns the connections to end. h.mu is held.
func (h *mcpHost) trim(r *sessionRecord) []*MCPConn {
	var ended []*MCPConn
	for len(r.conns) > maxSessionConns {
		var lru *MCPConn
		for mc := range r.conns {
			if lru == nil || mc.used < lru.used {
				lru = mc
			}
		}
		h.dropConn(lru)
		h.ended.Add(lru.id, false)
		ended = append(ended, lru)
		args := []any{"connectionId", lru.id, "server", lru.server, "session", r.get().ID, "limit", maxSessionConns}
		h.logOnce(&h.trimmed, "ended the least recently used MCP connection of a session, as if its client had disconnected, to keep no more than limit per session: the agent's messages on it are refused as on an unknown connection, and later ones are logged at debug level",
			"ended the least recently used MCP connection of a session", args...)
	}
	return ended
}

// dropConn forgets mc, one of the connections to the proxy's servers.
// h.mu is held.
func (h *mcpHost) dropConn(mc *MCPConn) {
	delete(h.conns, mc.id)
	if mc.holder != nil {
		delete(mc.holder.conns, mc)
	}
}
