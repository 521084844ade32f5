//go:build unix

package wire

import (
	"os"
	"syscall"

	"github.com/acp-conductor/acp-conductor/internal/trick"
)

// Pollable returns a file for descriptor fd that Go's poller owns, or f as
// it is. A pipe or socket is put in non-blocking mode, so that Close can
// interrupt a read on it and TryWriter can write to it without blocking;
// anything else, such as a terminal, whose mode the shell shares, is left
// alone. It does not call f.Fd, which would put the descriptor back in
// blocking mode.
func Pollable(f *os.File, fd int, name string) *os.File {
	if !trick.On(trick.Pollable) {
		return f
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return f
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return f
	}
	if syscall.SetNonblock(fd, true) != nil {
		return f
	}
	return os.NewFile(uintptr(fd), name)
}
