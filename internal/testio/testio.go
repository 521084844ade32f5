// Package testio holds I/O helpers for tests only: nothing outside a
// _test.go file should import it. It is a package of its own so that the
// test packages of the module, and of the modules beside it that replace
// this one with their checkout (integration/mcp), share one copy.
package testio

import (
	"bytes"
	"sync"
)

// A Buffer is a bytes.Buffer guarded by a mutex, for what a test captures
// while something else still writes it: a process's stderr set as
// exec.Cmd.Stderr (which exec copies from a goroutine of its own), or a
// logger's output written from the goroutines of the code under test. A
// test may read it with String at any time, not only after the writers are
// done. Its zero value is an empty buffer ready to use; it must not be
// copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer, as bytes.Buffer.Write does; it never
// fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns a copy of everything written so far. It makes a *Buffer
// a fmt.Stringer, so that %s and %v print what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
