//go:build unix

package proxy

import (
	"os"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
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
	stdin  = sync.OnceValue(func() *os.File { return wire.Pollable(os.Stdin, 0, "/dev/stdin") })
	stdout = sync.OnceValue(func() *os.File { return wire.Pollable(os.Stdout, 1, "/dev/stdout") })
)
