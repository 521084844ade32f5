package mcpbridge

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
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

// limitListener accepts at most n connections at a time: Accept waits
// while n are open. (golang.org/x/net/netutil.LimitListener does the same,
// but x/net would move x/sys and x/text forward in every module here for
// forty lines.)
type limitListener struct {
	net.Listener
	sem    *semaphore.Weighted
	ctx    context.Context // done when the listener is closed
	cancel context.CancelFunc
	open   atomic.Int64 // connections accepted and not closed
}

func newLimitListener(l net.Listener, n int64) *limitListener {
	ctx, cancel := context.WithCancel(context.Background())
	return &limitListener{Listener: l, sem: semaphore.NewWeighted(n), ctx: ctx, cancel: cancel}
}

func (l *limitListener) Accept() (net.Conn, error) {
	if l.sem.Acquire(l.ctx, 1) != nil {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.sem.Release(1)
		return nil, err
	}
	l.counted(l.open.Add(1))
	return &limitedConn{Conn: c, release: func() { l.counted(l.open.Add(-1)); l.sem.Release(1) }}, nil
}

// httpConnsChanged, if set (by tests, before a bridge starts), is called
// with the number of HTTP connections open each time it changes.
var httpConnsChanged func(open int64)

func (l *limitListener) counted(open int64) {
	if httpConnsChanged != nil {
		httpConnsChanged(open)
	}
}

func (l *limitListener) Close() error {
	l.cancel()
	return l.Listener.Close()
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
