package wire

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// maxIovec bounds the segments of one writev(2); Linux allows 1024.
const maxIovec = 1024

// writev writes segs (up to maxIovec of them) with one system call.
func writev(fd int, segs [][]byte) (int, error) {
	if len(segs) == 1 {
		return syscall.Write(fd, segs[0])
	}
	return unix.Writev(fd, segs[:min(len(segs), maxIovec)])
}
