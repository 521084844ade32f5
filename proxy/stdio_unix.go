//go:build unix

package proxy

import (
	"os"
	"sync"
	"syscall"
)

// Stdin returns the process's standard input for [Proxy.Serve]'s in. When
// it is a pipe or a socket, as it is under a conductor, it is put in
// non-blocking mode and returned as a new file that Go's poller owns: Serve
// can then interrupt its read when its context ends, which it cannot do on
// os.Stdin, and a proxy waiting for input holds no thread. Anything else,
// such as a terminal, whose mode the shell shares, is returned as os.Stdin.
// Every call returns the same file. Once Stdin has been called, read
// standard input only through it: os.Stdin's reads then fail rather than
// wait when there is nothing to read.
func Stdin() *os.File { return stdin() }

// Stdout returns the process's standard output for [Proxy.Serve]'s out,
// made pollable as [Stdin] makes standard input. On such a file Serve
// writes each message straight from the goroutine that produced it whenever
// nothing is queued ahead of it and the conductor takes it at once, rather
// than handing it to its writer goroutine, a hand-off that is most of the
// latency a proxy adds. Every call returns the same file.
//
// Once Stdout has been called, write to standard output only through the
// file it returns: os.Stdout's writes then fail rather than wait when the
// conductor is slow to read.
func Stdout() *os.File { return stdout() }

var (
	stdin  = sync.OnceValue(func() *os.File { return pollable(os.Stdin, 0, "/dev/stdin") })
	stdout = sync.OnceValue(func() *os.File { return pollable(os.Stdout, 1, "/dev/stdout") })
)

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
