//go:build !linux

package supervisor

import (
	"fmt"
	"os"
)

// A Watch is the conductor's end of a chain's watchdog: Linux only.
type Watch struct{}

// Start returns nil elsewhere than on Linux, which has the parent-death
// signal the design relies on: the components are then started in process
// groups of their own, as everywhere, and nothing more.
func Start(string) (*Watch, error) { return nil, nil }

// Env returns env.
func (*Watch) Env(env []string) []string { return env }

// Started does nothing.
func (*Watch) Started(int) {}

// Ended does nothing.
func (*Watch) Ended(int) {}

// Close does nothing.
func (*Watch) Close() error { return nil }

// RunWatch is Linux-only.
func RunWatch(string) int {
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2
}
