//go:build !unix

package proxy

import "os"

// Stdin returns the process's standard input for [Proxy.Serve]'s in:
// os.Stdin on this system.
func Stdin() *os.File { return os.Stdin }

// Stdout returns the process's standard output for [Proxy.Serve]'s out:
// os.Stdout on this system, where Serve hands every message to its writer
// goroutine.
func Stdout() *os.File { return os.Stdout }
