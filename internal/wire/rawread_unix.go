//go:build unix

package wire

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A nonblockReader reads a file in non-blocking mode with readNonblock (a
// raw system call on Linux, see rawIO), and waits in Go's poller while the
// file is empty, as os.File.Read does.
type nonblockReader struct {
	f  *os.File
	rc syscall.RawConn
}

// nonblocking returns r read through a nonblockReader when it is a file in
// non-blocking mode (a pipe from os.Pipe, or a standard stream made
// Pollable) and raw reads are in use, or r as it is.
func nonblocking(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok || !rawIO {
		return r
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return r
	}
	nonblock := false
	_ = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblock = err == nil && flags&unix.O_NONBLOCK != 0
	})
	if !nonblock {
		return r
	}
	return &nonblockReader{f: f, rc: rc}
}

func (r *nonblockReader) Read(p []byte) (int, error) {
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = readNonblock(int(fd), p)
			if !errors.Is(rerr, syscall.EINTR) {
				return !errors.Is(rerr, syscall.EAGAIN) // else wait in the poller
			}
		}
	})
	switch {
	case err != nil:
		// The file was closed: let os.File say so in its own words.
		return r.f.Read(p)
	case rerr != nil:
		return 0, &os.PathError{Op: "read", Path: r.f.Name(), Err: rerr}
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
