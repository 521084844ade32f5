//go:build !unix

package supervisor

// A Watch is the conductor's end of a chain's watchdog: Unix only.
type Watch struct{}

// New returns nil elsewhere than on Unix systems, where the conductor does
// not run (internal/unixonly).
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
