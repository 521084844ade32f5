package proxy

// MCPTableSizes returns the number of entries in each table c keeps for
// its MCP servers, by name, for tests that check they do not grow.
func MCPTableSizes(c *Conn) map[string]int {
	h := c.mcp
	h.mu.Lock()
	defer h.mu.Unlock()
	return map[string]int{"declared": len(h.declared), "conns": len(h.conns), "theirs": len(h.theirs), "upstream": len(h.upstream),
		"sessions": h.sessions.n}
}

// SetMaxSessions sets how many sessions' MCP state a Conn that Serve starts
// from then on keeps, and returns what restores it.
func SetMaxSessions(n int) (restore func()) {
	old := maxSessions
	maxSessions = n
	return func() { maxSessions = old }
}

// SetMaxUntied sets how many untied upstream connections a Conn that Serve
// starts from then on keeps, and returns what restores it.
func SetMaxUntied(n int) (restore func()) {
	old := maxUntied
	maxUntied = n
	return func() { maxUntied = old }
}

// MaxSessionConns is how many connections to the proxy's servers one
// session holds.
const MaxSessionConns = maxSessionConns
