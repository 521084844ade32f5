package wire

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// The relay's reads and writes are on descriptors in non-blocking mode, so
// they never block, and on Linux they are made as raw system calls: not
// through the runtime's syscall entry, which, after the process has been
// idle long enough for the runtime's monitor thread (sysmon) to sleep,
// wakes it. A relay goes idle between most messages, so every message
// would cost a futex wake-up, the monitor's thread being scheduled, and its
// polling until it sleeps again (make bench shows what this saves: the
// rawio row).
var rawIO = trick.On(trick.RawIO)

// readNonblock reads from fd, which must be in non-blocking mode.
func readNonblock(fd int, p []byte) (int, error) {
	if !rawIO {
		return syscall.Read(fd, p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// maxIovec bounds the segments of one writev(2); Linux allows 1024.
const maxIovec = 1024

var useWritev = trick.On(trick.Writev)

// writev writes segs (up to maxIovec of them) with one system call to fd,
// which must be in non-blocking mode. A burst of more than 32 segments
// has its iovecs in *iov, which the caller keeps for its next burst.
func writev(fd int, segs [][]byte, iov *[]unix.Iovec) (int, error) {
	if len(segs) == 1 || !useWritev {
		return writeNonblock(fd, segs[0])
	}
	segs = segs[:min(len(segs), maxIovec)]
	if !rawIO {
		return unix.Writev(fd, segs)
	}
	var small [32]unix.Iovec // on the stack for most bursts
	if len(segs) <= len(small) {
		return writeIovecs(fd, appendIovecs(small[:0], segs))
	}
	v := appendIovecs((*iov)[:0], segs)
	n, err := writeIovecs(fd, v)
	clear(v) // let go of the lines
	*iov = v[:0]
	return n, err
}

// appendIovecs appends to v an iovec for each non-empty segment.
func appendIovecs(v []unix.Iovec, segs [][]byte) []unix.Iovec {
	for _, s := range segs {
		if len(s) > 0 {
			var e unix.Iovec
			e.Base = &s[0]
			e.SetLen(len(s))
			v = append(v, e)
		}
	}
	return v
}

func writeIovecs(fd int, v []unix.Iovec) (int, error) {
	if len(v) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func writeNonblock(fd int, p []byte) (int, error) {
	if !rawIO {
		return syscall.Write(fd, p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
