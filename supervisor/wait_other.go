//go:build !linux

package supervisor

// awaitExit returns false: the wait for a child blocks a thread.
func awaitExit(pid int) bool { return false }
