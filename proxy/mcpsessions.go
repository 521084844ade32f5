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
// named for its session if it is now kept under the session's id. h.mu is
// held.
func (h *mcpHost) touch(r *sessionRecord) {
	if id := h.sessions.touch(r); id != "" {
		h.retie(id)
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
	ids, theirs []string       // the proxy's servers it declared, and those before the proxy
	settled     bool           // it succeeded
	dropped     bool           // its declarations were forgotten (its session closed)
	kept        bool           // in the sessionTable
	key         string         // the id it is kept under there, if any
	prev, next  *sessionRecord // its neighbours there
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
