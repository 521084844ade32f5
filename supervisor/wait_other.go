//go:build !linux

package supervisor

// awaitExit returns at once: the wait for a child blocks a thread.
func awaitExit(pid int) {}
