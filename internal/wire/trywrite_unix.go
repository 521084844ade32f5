//go:build unix

package wire

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/creachadair/jrpc2/channel"
	"golang.org/x/sys/unix"
)

// TryWriter returns a function that writes records without ever blocking,
// or nil when the channel's writer cannot: it must be an *os.File (or wrap
// one, with an Unwrap() io.Writer method, as a writer that must not be
// closed does) whose
// descriptor is in non-blocking mode (as os.Pipe's are, and Stdout-like
// files made pollable). The function writes as much of segs as the peer
// takes at once and returns the rest, to be written later in order.
func (c *LineChannel) TryWriter() func(segs [][]byte) ([][]byte, error) {
	f, ok := underlyingFile(c.w)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblock := false
	_ = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && flags&unix.O_NONBLOCK != 0
	})
	if !nonblock {
		return nil
	}
	var iov []unix.Iovec // a long burst's, kept for the next; c.wmu guards it
	return func(segs [][]byte) ([][]byte, error) {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.w == nil {
			return segs, channel.ErrClosed
		}
		var werr error
		err := rc.Write(func(fd uintptr) bool {
			for len(segs) > 0 {
				n, err := writev(int(fd), segs, &iov)
				switch {
				case n > 0:
					segs = advance(segs, n)
				case errors.Is(err, syscall.EINTR):
				case errors.Is(err, syscall.EAGAIN):
					return true // full: the rest waits for the writer
				default:
					werr = err
					return true
				}
			}
			return true // never wait for the descriptor
		})
		if err != nil {
			return segs, err
		}
		return segs, werr
	}
}

// advance drops the first n bytes of segs.
func advance(segs [][]byte, n int) [][]byte {
	for n > 0 && len(segs) > 0 {
		if n < len(segs[0]) {
			segs[0] = segs[0][n:]
			return segs
		}
		n -= len(segs[0])
		segs = segs[1:]
	}
	for len(segs) > 0 && len(segs[0]) == 0 {
		segs = segs[1:]
	}
	return segs
}

// underlyingFile returns the *os.File w writes to, looking through writers
// that wrap one.
func underlyingFile(w io.Writer) (*os.File, bool) {
	for {
		switch v := w.(type) {
		case *os.File:
			return v, true
		case interface{ Unwrap() io.Writer }:
			w = v.Unwrap()
		default:
			return nil, false
		}
	}
}
