//go:build unix && !linux

package supervisor

// A Watch is the conductor's end of a chain's watchdog: without /proc and
// the parent-death signal, a groupWatch.
type Watch = groupWatch

// New prepares the watchdog of a new chain (see groupWatch).
func New() (*Watch, error) { return newGroupWatch() }
