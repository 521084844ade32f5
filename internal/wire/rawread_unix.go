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

	// The read in progress, for read: RawConn.Read takes a function, and
	// one made for each call (a closure over its buffer and results)
	// would be allocated for each.
	p    []byte
	n    int
	rerr error
	read func(fd uintptr) bool
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
	nr := &nonblockReader{f: f, rc: rc}
	nr.read = nr.readFD
	return nr
}

// readFD reads into r.p from fd, or reports that the poller must wait.
func (r *nonblockReader) readFD(fd uintptr) bool {
	for {
		r.n, r.rerr = readNonblock(int(fd), r.p)
		if !errors.Is(r.rerr, syscall.EINTR) {
			return !errors.Is(r.rerr, syscall.EAGAIN) // else wait in the poller
		}
	}
}

// Read is not safe for concurrent use, as no reader is.
func (r *nonblockReader) Read(p []byte) (int, error) {
	r.p = p
	err := r.rc.Read(r.read)
	n, rerr := r.n, r.rerr
	r.p, r.rerr = nil, nil
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
