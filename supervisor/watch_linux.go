package supervisor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Watch is the conductor's end of a chain's watchdog.
type Watch struct {
	id   string
	pid  int      // the watchdog's, until reaped (see reap)
	pipe *os.File // the write end, which only the conductor holds
}

// Start starts exe as the watchdog of a new chain, and returns once it has
// been executed, not once it runs: the conductor starts the components
// while the watchdog starts up, at the lowest priority.
func Start(exe string) (*Watch, error) {
	reap()
	id := strconv.FormatUint(rand.Uint64(), 16)
	r, w, err := os.Pipe() // close-on-exec: no component inherits either end
	if err != nil {
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	cmd := exec.Command(exe, Command, WatchFlag, id)
	cmd.ExtraFiles = []*os.File{r}
	// Its stdio is /dev/null: it holds none of the conductor's, which the
	// editor may read to their end.
	// A group of its own, so that no signal meant for the conductor's group
	// (a terminal's ^C) reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	// The lowest priority a process can leave no one waiting on: nice 19.
	// SCHED_IDLE would keep it off the components' way a little more, but
	// on a busy machine it could take seconds to be scheduled to do its
	// work, which matters once the conductor is gone.
	pid := cmd.Process.Pid
	lowerPriority(pid)
	_ = cmd.Process.Release() // reaped by PID: see reap
	return &Watch{id: id, pid: pid, pipe: w}, nil
}

// lowerPriority sets every thread of process pid to nice 19; the threads
// they start inherit it. Linux sets a nice value per thread: a thread its
// runtime started before this keeps its own, so the watchdog, once
// running, does this for itself too.
func lowerPriority(pid int) {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, pid, 19)
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
		}
	}
}

// Env returns env with the chain's marker added, for a component: the
// marker of the chains around this one, if env has one, and this chain's
// ID after it.
func (w *Watch) Env(env []string) []string {
	v := w.id
	for i := len(env) - 1; i >= 0; i-- {
		if outer, ok := strings.CutPrefix(env[i], MarkerEnv+"="); ok {
			if outer != "" {
				v = outer + "," + w.id
			}
			break
		}
	}
	return append(env, MarkerEnv+"="+v) // later entries win
}

// Started tells the watchdog of a component's process group.
func (w *Watch) Started(pgid int) { w.send('+', pgid) }

// Ended tells the watchdog that a component's process group is gone, so
// that it never signals a group whose ID has been reused.
func (w *Watch) Ended(pgid int) { w.send('-', pgid) }

func (w *Watch) send(op byte, pgid int) {
	msg := strconv.AppendInt([]byte{op}, int64(pgid), 10)
	msg = append(msg, '\n')
	rc, err := w.pipe.SyscallConn()
	if err != nil {
		return
	}
	// A pipe write of this size is atomic, and never waits: should the
	// watchdog not have read 64 KiB of these yet, this one is lost, and
	// the marker still finds the group's processes.
	_ = rc.Write(func(fd uintptr) bool {
		_, _ = unix.Write(int(fd), msg)
		return true
	})
}

// Close ends the chain, once every component has been reaped: it kills
// every process left that carries the chain's marker (what a component
// left in a session of its own), then the watchdog, which has nothing left
// to do. It does not wait for the watchdog to end: at its priority, on a
// busy machine, that can take a while. The watchdog is reaped by the next
// Start or Close, or by init once the conductor has exited.
func (w *Watch) Close() error {
	sweep(w.id, nil)
	w.pipe.Close()
	_ = syscall.Kill(w.pid, syscall.SIGKILL) // its PID is ours until reaped
	killed.Lock()
	killed.pids = append(killed.pids, w.pid)
	killed.Unlock()
	reap()
	return nil
}

// killed holds the watchdogs killed and not yet reaped.
var killed struct {
	sync.Mutex
	pids []int
}

// reap reaps the watchdogs that have ended since they were killed.
func reap() {
	killed.Lock()
	defer killed.Unlock()
	left := killed.pids[:0]
	for _, pid := range killed.pids {
		if got, err := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); got == 0 && err == nil {
			left = append(left, pid) // not yet ended
		}
	}
	killed.pids = left
}
