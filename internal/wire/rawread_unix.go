//go:build unix

package wire

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
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

	// For the spinner, where there is one (spin_linux.go): the
	// descriptor, whether the reader waits in the poller and since when,
	// and the descriptors it polls while it spins.
	spin     *spinner
	fd       int32
	waiting  atomic.Bool
	waitFrom int64
	fds      []unix.PollFd
}

// nonblocking returns r read through a nonblockReader when it is a file in
// non-blocking mode (a pipe from os.Pipe, or a standard stream made
// Pollable) and raw reads are in use, or r as it is.
func nonblocking(r io.Reader) io.Reader { return nonblockingWith(r, spin) }

// nonblockingWith is nonblocking with the given spinner, or none.
func nonblockingWith(r io.Reader, s *spinner) io.Reader {
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
	if s != nil {
		_ = rc.Control(func(fd uintptr) { nr.fd = int32(fd) })
		nr.spin = s
		s.add(nr)
	}
	return nr
}

// readFD reads into r.p from fd, or reports that the poller must wait.
func (r *nonblockReader) readFD(fd uintptr) bool {
	if r.spin != nil && r.waiting.Load() {
		r.spin.woken(r)
	}
	for {
		r.n, r.rerr = readNonblock(int(fd), r.p)
		if errors.Is(r.rerr, syscall.EINTR) {
			continue
		}
		if !errors.Is(r.rerr, syscall.EAGAIN) {
			return true
		}
		if r.spin != nil {
			if r.spin.wait(r, int(fd)) {
				return true
			}
			r.spin.parked(r)
		}
		return false // wait in the poller
	}
}

// Read is not safe for concurrent use, as no reader is.
func (r *nonblockReader) Read(p []byte) (int, error) {
	r.p = p
	err := r.rc.Read(r.read)
	n, rerr := r.n, r.rerr
	r.p, r.rerr = nil, nil
	if r.spin != nil && (err != nil || rerr != nil || n == 0 && len(p) > 0) {
		// The end of this input: the spinner polls it no more.
		r.waiting.Store(false)
		r.spin.remove(r)
		r.spin = nil
	}
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
