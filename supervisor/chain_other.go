//go:build !linux

package supervisor

import (
	"errors"
	"os"
	"syscall"
)

// A Chain is the conductor's end of a chain's supervisor: Linux only.
type Chain struct{}

// ErrGone reports a supervisor that ended before the component did.
var ErrGone = errors.New("the component supervisor ended")

// StartChain returns nil elsewhere than on Linux, which has the
// parent-death signal and child subreapers the supervisor relies on: the
// components are then started directly.
func StartChain(string) (*Chain, error) { return nil, nil }

// Spawn is never called: StartChain returns no Chain.
func (*Chain) Spawn(string, []string, string, []string, [3]*os.File) (int, func() (syscall.WaitStatus, error), error) {
	return 0, nil, errors.ErrUnsupported
}

// Close does nothing.
func (*Chain) Close() error { return nil }
