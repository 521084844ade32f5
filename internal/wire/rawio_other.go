//go:build unix && !linux

package wire

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Raw system calls are Linux's (see rawio_linux.go).
const rawIO = false

// readNonblock reads from fd, which must be in non-blocking mode.
func readNonblock(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// writev writes the first of segs: the other systems x/sys/unix serves do
// not all have writev(2).
func writev(fd int, segs [][]byte, _ *[]unix.Iovec) (int, error) {
	return syscall.Write(fd, segs[0])
}
