package proxy

import "github.com/acp-conductor/acp-conductor/internal/recent"

// maxUntied bounds the upstream connections the proxy keeps, and the
// connects for them pending, that no kept session's end ends (untied):
// only their mcp/disconnect surely does, since a session the proxy does
// not keep may never be closed, nor forgotten again. A peer that connects and never disconnects
// must not grow the proxy; past the bound such an mcp/connect is refused,
// saying so, and goes no further. A variable, for tests.
var maxUntied = 1024

// maxEnded bounds how many ended connections the proxy remembers: a
// client that never disconnects must not grow the proxy, and one that
// disconnects after maxEnded more have ended is told the connection is
// unknown, as of one never opened.
const maxEnded = 1024

// endedConns remembers the ids of the last connections the proxy ended
// (disconnected, or its session closed) or forgot (an upstream one whose
// sessions closed), oldest first out once it holds limit of them, and
// whether each was upstream. The RFD's mcp/disconnect "signals that the
// connection is closing": one for a connection that has closed already
// asks for nothing left to do, and an agent's MCP client may well send it
// after the session's close has ended the connection.
type endedConns = recent.Map[string, bool] // by connection id: whether upstream

// An upstreamConn is a connection the proxy saw opened with someone
// before it, and what ties it to a session: the server, while a session
// that declared it through the proxy is open, or else the session the
// conductor's _meta named on mcp/connect, if any, or the one whose
// set-up that declared the server was replaced.
type upstreamConn struct {
	server  string // in theirs when opened, or ""
	session string
	counted bool // in mcpHost.untied (set by setUpstream)
}

// An openingConn is an mcp/connect to someone before the proxy awaiting
// its answer. The sessions' ends and set-ups update its tie as they update
// those of the connections open, so that, once open, it is kept, or
// forgotten, as it would have been had it opened at once.
type openingConn struct {
	up        upstreamConn
	counted   bool // untied when it was sent, and so counted in untied
	forgotten bool // what tied it ended meanwhile
}

// untied reports whether nothing but an mcp/disconnect is sure to end c:
// no session that declared its server through the proxy was open when it
// was opened, and the session named for it or that tied it by a reload
// (replaced), if any, is not one the proxy keeps. Such a session, never
// seen set up or already forgotten for maxSessions, ends c only if the
// client closes it, and no bound on sessions forgets it. h.mu is held.
func (h *mcpHost) untiedConn(c upstreamConn) bool {
	return c.server == "" && (c.session == "" || h.sessions.byID[c.session] == nil)
}

// setUpstream records c as the upstream connection id, in place of any
// that had the id, keeping the count of untied ones. h.mu is held.
func (h *mcpHost) setUpstream(id string, c upstreamConn) {
	h.dropUpstream(id)
	c.counted = h.untiedConn(c)
	h.upstream[id] = c
	if c.counted {
		h.untied++
	}
}

// retie stops counting as untied the upstream connections tied to
// session, now kept: its end, or its being forgotten, ends them. h.mu is
// held.
func (h *mcpHost) retie(session string) {
	for id, c := range h.upstream {
		if c.counted && c.session == session && !h.untiedConn(c) {
			c.counted = false
			h.upstream[id] = c
			h.untied--
		}
	}
}

// dropUpstream forgets the upstream connection id, if it is one. h.mu is
// held.
func (h *mcpHost) dropUpstream(id string) {
	if c, ok := h.upstream[id]; ok {
		delete(h.upstream, id)
		if c.counted {
			h.untied--
		}
	}
}
