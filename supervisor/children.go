package supervisor

import (
	"os/exec"
	"sync"
)

// ours records the children this process started through Start and has
// not yet waited for: the ones whose exit status os/exec takes. Any other
// child of a process that adopts (Adopt) is a process it adopted, which
// only it will reap.
var ours struct {
	// starting is held for reading across every start, and for writing
	// across a search for adopted processes, so that a search never takes
	// a child that exists but is not yet recorded for one of ours.
	starting sync.RWMutex

	mu sync.Mutex
	// pids counts, by PID, the children started and not yet forgotten:
	// Wait forgets a child just after it is reaped, and by then a child
	// started since may have been given the same PID.
	pids map[int]int
}

// Start starts cmd and records its process as one of this process's own
// children, for Wait (or, for one released, forget) to reap. Every child
// of a program that adopts must be started through it.
func Start(cmd *exec.Cmd) error {
	ours.starting.RLock()
	defer ours.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	record(cmd.Process.Pid)
	return nil
}

// record records pid as a child started by Start.
func record(pid int) {
	ours.mu.Lock()
	defer ours.mu.Unlock()
	if ours.pids == nil {
		ours.pids = make(map[int]int)
	}
	ours.pids[pid]++
}

// Wait waits for cmd, started by Start, to exit, holding no thread while
// it runs where the platform allows (see awaitExit).
func Wait(cmd *exec.Cmd) error {
	awaitExit(cmd.Process.Pid)
	err := cmd.Wait()
	forget(cmd.Process.Pid)
	return err
}

// forget records that the child pid, started by Start, has been reaped.
func forget(pid int) {
	ours.mu.Lock()
	if ours.pids[pid]--; ours.pids[pid] <= 0 {
		delete(ours.pids, pid)
	}
	ours.mu.Unlock()
}

// isOurs reports whether pid is a child started by Start and not yet
// reaped.
func isOurs(pid int) bool {
	ours.mu.Lock()
	defer ours.mu.Unlock()
	return ours.pids[pid] > 0
}
