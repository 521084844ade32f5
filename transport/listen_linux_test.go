package transport

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestListenUnacked: a server connection from Listen ends once what it sends
// has gone unacknowledged for the given time. The peer here stops reading
// with a small receive buffer, so its window shuts and the server's data
// waits unacknowledged, as it does when the network has vanished; the
// server's write then fails with ETIMEDOUT, which only the user timeout
// gives (without it the write would wait for the peer to read).
func TestListenUnacked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := Listen(ctx, "127.0.0.1:0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	client, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() // never read
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	rc, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	rc.Control(func(fd uintptr) { ms, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) })
	if err != nil || ms != 1000 {
		t.Errorf("accepted connection's TCP_USER_TIMEOUT = %d ms, %v; want 1000", ms, err)
	}

	server.SetWriteDeadline(time.Now().Add(25 * time.Second)) // a bound, should the option not work
	chunk := make([]byte, 64<<10)
	for {
		if _, err = server.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("write to a peer that acknowledges nothing more: %v, want ETIMEDOUT", err)
	}
}
