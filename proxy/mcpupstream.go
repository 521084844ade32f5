package proxy

import (
	"slices"

	"github.com/acp-conductor/acp-conductor/internal/recent"
)

// maxUntied bounds the upstream connections the proxy keeps, and the
// connects for them pending, that no kept session's end ends (untied):
// only their mcp/disconnect surely does, since a session the proxy does
// not keep may never be closed, nor forgotten again. A peer that connects and never disconnects
// must not grow the proxy; at the bound such an mcp/connect is refused,
// saying so, with a warning the first time (later ones at debug level),
// and goes no further. A variable, for tests.
//
// Counted as untied too are the connections whose tie passed, open or
// pending, to a session that held maxSessionConns already (see count):
// they cannot be refused any more, and may take the count past the
// bound. While the count is at or past it with any of those in it, a
// connect that would be tied is refused as an untied one is, so that
// sessions cannot fill their room, close and pass their connections on
// without end: the connections kept, open or pending, are never more
// than at the last connect let through, when they were at most maxUntied
// and maxSessionConns for each set-up then holding some tied (a session
// kept, at most maxSessions, or a set-up pending); so the count passes
// the bound by at most maxSessionConns for each of those set-ups.
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
//
// Each is counted under one bound (by count): as untied (see maxUntied),
// or among the tied ones of the session whose end would end it (holder,
// see maxSessionConns).
type upstreamConn struct {
	server  string // in theirs when opened, or ""
	session string
	counted bool           // in mcpHost.untied
	passed  bool           // and in mcpHost.passed: its tie passed to a session that held its most
	holder  *sessionRecord // whose tied count (sessionRecord.upstream) it is in
}

// An openingConn is an mcp/connect to someone before the proxy awaiting
// its answer. The sessions' ends and set-ups update its tie as they update
// those of the connections open, so that, once open, it is kept, or
// forgotten, as it would have been had it opened at once. It is counted
// (up.counted, up.holder) while pending, so that connects at once cannot
// pass a bound.
type openingConn struct {
	up        upstreamConn
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

// tiedTo returns the set-up whose session's end would end c, tied, and
// whose tied connections c counts among: the latest that declared its
// server, or, if that one is a set-up still pending of a session kept,
// the kept one, whose connections the pending one adopts if it succeeds;
// or else the kept one of the session named for it. nil if nothing ties c
// any more (the set-ups that declared its server failed while it opened).
// h.mu is held.
func (h *mcpHost) tiedTo(c upstreamConn) *sessionRecord {
	if c.server == "" {
		if c.session == "" {
			return nil
		}
		return h.sessions.byID[c.session]
	}
	recs := h.theirs[c.server]
	if len(recs) == 0 {
		return nil
	}
	r := recs[len(recs)-1]
	if k := h.sessions.byID[r.get().ID]; k != nil {
		return k
	}
	return r
}

// count counts c under its bound: as untied if it is, or else among the
// tied connections of tiedTo(c). A connection whose tie passes, once it is
// open or pending, to a session that holds maxSessionConns already (a
// session kept meanwhile, or set up again) counts as untied instead: it
// cannot be refused any more, and the proxy cannot end it, but it must
// not take a session past its bound (see maxUntied). h.mu is held.
func (h *mcpHost) count(c *upstreamConn) {
	c.counted, c.passed, c.holder = false, false, nil
	if h.untiedConn(*c) {
		c.counted = true
		h.untied++
		return
	}
	switch r := h.tiedTo(*c); {
	case r == nil: // pending, and forgotten once open
	case r.upstream >= maxSessionConns:
		c.counted, c.passed = true, true
		h.untied++
		h.passed++
	default:
		c.holder = r
		r.upstream++
	}
}

// uncount undoes count. h.mu is held.
func (h *mcpHost) uncount(c *upstreamConn) {
	if c.counted {
		h.untied--
	}
	if c.passed {
		h.passed--
	}
	if c.holder != nil {
		c.holder.upstream--
	}
	c.counted, c.passed, c.holder = false, false, nil
}

// miscounted reports whether c is counted under a bound that is no longer
// its own: as untied though a kept session now ties it, or among the tied
// connections of a set-up no longer kept (closed, forgotten, or replaced
// by a set-up of its session) nor pending with its server declared. h.mu
// is held.
func (h *mcpHost) miscounted(c upstreamConn) bool {
	if c.holder != nil {
		return !c.holder.kept && (c.server == "" || !slices.Contains(h.theirs[c.server], c.holder))
	}
	return c.counted && !h.untiedConn(c)
}

// recount counts again, under its own bound, each upstream connection,
// open or pending, that is miscounted after the sessions' set-ups or ends
// changed what ties it. h.mu is held.
func (h *mcpHost) recount() {
	for id, c := range h.upstream {
		if h.miscounted(c) {
			h.uncount(&c)
			h.count(&c)
			h.upstream[id] = c
		}
	}
	for o := range h.opening {
		if !o.forgotten && h.miscounted(o.up) {
			h.uncount(&o.up)
			h.count(&o.up)
		}
	}
}

// setUpstream records c as the upstream connection id, in place of any
// that had the id, keeping the counts under the bounds. h.mu is held.
func (h *mcpHost) setUpstream(id string, c upstreamConn) {
	h.dropUpstream(id)
	h.count(&c)
	h.upstream[id] = c
}

// dropUpstream forgets the upstream connection id, if it is one. h.mu is
// held.
func (h *mcpHost) dropUpstream(id string) {
	if c, ok := h.upstream[id]; ok {
		delete(h.upstream, id)
		h.uncount(&c)
	}
}
