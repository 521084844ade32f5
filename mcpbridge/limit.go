package mcpbridge

import (
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/netutil"
)

// Bounds on what peers that have not proven anything can hold. Anyone on the
// machine can connect to the HTTP port, and every connection is a file
// descriptor of the conductor's, which also needs them for pipes when it
// restarts a proxy.
const (
	// maxHTTPConns bounds the HTTP connections open at once; more wait in
	// the kernel's accept queue, which costs the conductor no descriptor.
	// A client holds one per SSE stream and request in progress.
	maxHTTPConns = 256
	// maxHandshakes bounds the shim connections that have not yet
	// presented a token; more wait in the accept queue likewise.
	maxHandshakes = 16
)

// limitListener accepts at most n connections at a time
// (netutil.LimitListener: Accept waits while n are open, so more wait in
// the kernel's accept queue), and counts those open for the tests.
type limitListener struct {
	net.Listener
	open atomic.Int64 // connections accepted and not closed
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: netutil.LimitListener(l, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.counted(l.open.Add(1))
	return &countedConn{Conn: c, release: func() { l.counted(l.open.Add(-1)) }}, nil
}

// httpConnsChanged, if set (by tests, before a bridge starts), is called
// with the number of HTTP connections open each time it changes.
var httpConnsChanged func(open int64)

func (l *limitListener) counted(open int64) {
	if httpConnsChanged != nil {
		httpConnsChanged(open)
	}
}

// countedConn is counted out when it is first closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
