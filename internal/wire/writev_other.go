//go:build unix && !linux

package wire

import "syscall"

// writev writes the first of segs: the other systems x/sys/unix serves do
// not all have writev(2).
func writev(fd int, segs [][]byte) (int, error) {
	return syscall.Write(fd, segs[0])
}
