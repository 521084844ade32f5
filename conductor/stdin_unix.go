//go:build unix

package conductor

import (
	"os"
	"syscall"
)

// Stdin returns the process's standard input as a file that Close can
// interrupt, for Run's in: with a pipe or socket put in non-blocking mode,
// Go's poller owns the descriptor, so Run can unblock its reader when it
// stops. A terminal is left as it is: its mode is shared with the shell.
func Stdin() *os.File { return pollable(os.Stdin, 0, "stdin") }

// Stdout is Stdin's counterpart for Run's out: at shutdown, Run closes it
// after a bounded wait, rather than hang on an editor that stopped reading.
func Stdout() *os.File { return pollable(os.Stdout, 1, "stdout") }

// pollable returns a pollable file for descriptor fd, or f as it is. It
// does not call f.Fd, which would put the descriptor back in blocking mode.
func pollable(f *os.File, fd int, name string) *os.File {
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
