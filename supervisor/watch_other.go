//go:build !linux

package supervisor

import (
	"fmt"
	"os"
)

// A Watch is the conductor's end of a chain's watchdog: Linux only.
type Watch struct{}

// New returns nil elsewhere than on Linux, which has the parent-death
// signal the design relies on: the components are then started in process
// groups of their own, as everywhere, and nothing more.
func New() (*Watch, error) { return nil, nil }

// Launch does nothing.
func (*Watch) Launch(string) error { return nil }

// Env returns env.
func (*Watch) Env(env []string) ([]string, string) { return env, "" }

// Sweep does nothing.
func (*Watch) Sweep(string) {}

// Started does nothing.
func (*Watch) Started(int) {}

// Ended does nothing.
func (*Watch) Ended(int) {}

// Snapshot does nothing.
func (*Watch) Snapshot() {}

// Close does nothing.
func (*Watch) Close() error { return nil }

// Run recognises the watchdog's command lines, which are Linux-only.
func Run(args []string) (status int, ok bool) {
	if len(args) < 1 || args[0] != Command {
		return 0, false
	}
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2, true
}
