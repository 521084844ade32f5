package transport

import (
	"context"
	"net"
	"syscall"
	"time"
)

// Listen listens on the TCP address addr for a Server. With unacked above
// zero, a connection whose sent data goes unacknowledged for that long ends
// (TCP_USER_TIMEOUT, on Linux; elsewhere the kernel's own retransmission
// limit applies, about a quarter of an hour). That is how a Streamable HTTP
// client whose network vanished is noticed: its SSE streams are written to
// (events, keepalives) and never acknowledged, which without it lasts until
// TCP gives up. A live client that stops reading for that long looks the
// same to TCP (a window that stays shut), and is ended too.
func Listen(ctx context.Context, addr string, unacked time.Duration) (net.Listener, error) {
	lc := net.ListenConfig{}
	if unacked > 0 {
		// Accepted connections inherit the listening socket's setting.
		lc.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, unacked) }); err != nil {
				return err
			}
			return serr
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}
