package transport

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// AdmitListener wraps ln so that a TCP connection that has carried no
// request a Guard let through within admit is closed (Guard.Wrap admits
// it; the http.Server needs ConnContext for that). net/http bounds an
// HTTP/1 connection that never completes its headers by
// ReadHeaderTimeout, but an HTTP/2 one that sends its preface and nothing
// else only by IdleTimeout (minutes): this bounds both alike, however
// many refused requests they carry. A zero admit means no bound.
func AdmitListener(ln net.Listener, admit time.Duration) net.Listener {
	return &admitListener{Listener: ln, admit: admit}
}

type admitListener struct {
	net.Listener
	admit time.Duration
}

func (l *admitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.admit <= 0 {
		return c, err
	}
	ac := &admitConn{Conn: c}
	ac.timer = time.AfterFunc(l.admit, func() { _ = c.Close() })
	return ac, nil
}

// admitConn is a connection closed unless admitted in time.
type admitConn struct {
	net.Conn
	once  sync.Once
	timer *time.Timer
}

func (c *admitConn) admitted() { c.once.Do(func() { c.timer.Stop() }) }

func (c *admitConn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}

type connKey struct{}

// ConnContext is for http.Server's ConnContext: it lets Guard admit the
// connection a request came over, which an HTTP/2 request does not
// otherwise reveal.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if ac, ok := c.(*admitConn); ok {
		return context.WithValue(ctx, connKey{}, ac)
	}
	return ctx
}

// admit keeps open the connection that carried the request of ctx.
func admit(ctx context.Context) {
	if ac, ok := ctx.Value(connKey{}).(*admitConn); ok {
		ac.admitted()
	}
}

// LimitListener wraps ln so that at most n of the connections it accepted
// are open at once: beyond, Accept waits for one to close, and new ones
// wait in the kernel's backlog, holding no descriptor of the server's
// (netutil.LimitListener). n <= 0 means no bound.
func LimitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, n)
}
