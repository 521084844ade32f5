package supervisor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Watch is the conductor's end of a chain's watchdog.
type Watch struct {
	id    string
	since uint64    // when this process started (startTicks), for the sweep
	r     *os.File  // the read end, until the watchdog holds it
	pipe  *os.File  // the write end, which only the conductor holds
	cmd   *exec.Cmd // the watchdog, once launched

	starts atomic.Uint64 // components started, for their markers (Env)

	mu     sync.Mutex
	groups map[int]bool // the components' process groups (and leaders' PIDs) still alive
	kin    []process    // what Snapshot found under them
}

// New prepares the watchdog of a new chain: its ID, for the components'
// environment (Env), and its pipe, which holds what Started and Ended say
// until the watchdog, launched once the components are (Launch), reads it.
func New() (*Watch, error) {
	r, w, err := os.Pipe() // close-on-exec: no component inherits either end
	if err != nil {
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	wt := &Watch{id: strconv.FormatUint(rand.Uint64(), 16), r: r, pipe: w, groups: make(map[int]bool)}
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		wt.since = startTicks(stat)
	}
	wt.send('@', wt.since) // the first line the watchdog reads
	return wt, nil
}

// waiter is the watchdog while the conductor lives, run by shell with the
// chain's ID as its argument, the pipe as descriptor 3 and the conductor's
// executable as descriptor 4 (opened by path only: it may be deleted or
// replaced meanwhile). It keeps what the pipe says, in order, as its
// arguments, and at the pipe's end becomes the sweep (SweepFlag). A shell
// starts in a fraction of what a Go program of the conductor's size takes,
// and its start competes with the components' (make bench: startup).
const waiter = `trap '' INT HUP
while IFS= read -r m; do set -- "$@" "$m"; done <&3
exec 3<&-
exec /proc/self/fd/4 ` + Command + ` ` + SweepFlag + ` "$@"`

// Launch starts the chain's watchdog, and returns once it has been
// executed, not once it runs, at the lowest priority. exe is the
// conductor's binary, which sweeps the chain once the pipe has ended: run
// by the waiting shell, or from the start where there is no shell (or it
// cannot be run).
func (w *Watch) Launch(exe string) error {
	defer func() {
		w.r.Close() // the watchdog has its own
		w.r = nil
	}()
	cmd, err := w.start(exe, true)
	if err != nil {
		cmd, err = w.start(exe, false)
	}
	if err != nil {
		return fmt.Errorf("chain watchdog: %w", err)
	}
	// The lowest priority a process can leave no one waiting on: nice 19.
	// SCHED_IDLE would keep it off the components' way a little more, but
	// on a busy machine it could take seconds to be scheduled to do its
	// work, which matters once the conductor is gone.
	w.cmd = cmd
	lowerPriority(cmd.Process.Pid)
	return nil
}

// start starts the watchdog: the waiting shell, or exe.
func (w *Watch) start(exe string, useShell bool) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if useShell {
		if _, err := os.Stat(shell); err != nil {
			return nil, err
		}
		fd, err := unix.Open(exe, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: exe, Err: err}
		}
		bin := os.NewFile(uintptr(fd), exe)
		defer bin.Close() // the shell has its own
		cmd = exec.Command(shell, "-c", waiter, shellName, w.id)
		cmd.ExtraFiles = []*os.File{w.r, bin}
	} else {
		cmd = exec.Command(exe, Command, WatchFlag, w.id)
		cmd.ExtraFiles = []*os.File{w.r}
	}
	// Its stdio is /dev/null: it holds none of the conductor's, which the
	// editor may read to their end.
	// A group of its own, so that no signal meant for the conductor's group
	// (a terminal's ^C) reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, Start(cmd)
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
// ID after it. The component's own marker (ComponentEnv), new at each
// call, is added after those of the components around it the same way,
// and returned, for Sweep.
func (w *Watch) Env(env []string) (_ []string, component string) {
	component = w.id + "." + strconv.FormatUint(w.starts.Add(1), 10)
	return append(env, nest(env, ComponentEnv, component), nest(env, MarkerEnv, w.id)), component
}

// nest returns the entry for name, for a component's environment: id
// after the IDs env gives name already (the last entry counts, as for
// getenv; exec keeps only the last).
func nest(env []string, name, id string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if outer, ok := strings.CutPrefix(env[i], name+"="); ok {
			if outer != "" {
				id = outer + "," + id
			}
			break
		}
	}
	return name + "=" + id
}

// Sweep kills every process left that carries component's marker (from
// Env), and waits for the kills to land: what a component that failed
// started outside its process group, which its end did not reach. The
// chain's end would kill them too, but a component restarted in a loop
// would leave a copy of each of its helpers per start running until then.
// The watchdog of a conductor nested in the component is left to finish
// its own sweep, as in Snapshot.
func (w *Watch) Sweep(component string) {
	ps := carrying("/proc", ComponentEnv, component, os.Getpid())
	killAll("/proc", slices.DeleteFunc(ps, func(p process) bool { return isWatchdog("/proc", p.pid) }))
}

// Started tells the watchdog of a component's process group, which its
// leader, the component, leads.
func (w *Watch) Started(pgid int) {
	w.mu.Lock()
	w.groups[pgid] = true
	w.mu.Unlock()
	w.send('+', uint64(pgid))
}

// Ended tells the watchdog that a component's process group is gone, so
// that it never signals a group whose ID has been reused.
func (w *Watch) Ended(pgid int) {
	w.mu.Lock()
	delete(w.groups, pgid)
	w.mu.Unlock()
	w.send('-', uint64(pgid))
}

// Snapshot records every live descendant of the components still running,
// by the parent links /proc shows now, for Close to kill whichever of them
// is still alive then; but not the watchdog of a conductor nested in the
// chain, which must finish its sweep should its conductor have been
// killed. It catches what neither the process groups nor the
// marker do: a process a component started in a session of its own and
// with an environment of its own (setsid under env -i). The conductor
// takes it as it begins to stop the components, while the links still lead
// to them; what a component has already orphaned has lost its link.
func (w *Watch) Snapshot() {
	w.mu.Lock()
	defer w.mu.Unlock()
	roots := make([]int, 0, len(w.groups))
	for pid := range w.groups {
		roots = append(roots, pid)
	}
	w.kin = append(w.kin, kin("/proc", roots)...)
}

// send tells the watchdog one thing; should the pipe be full (the
// watchdog has not yet read 64 KiB of these), it is lost, and the marker
// still finds the group's processes.
func (w *Watch) send(op byte, n uint64) { tell(w.pipe, op, n) }

// Close ends the chain, once every component has been reaped: it kills
// every process left that carries the chain's marker (what a component
// left in a session of its own) or that Snapshot found, then the
// watchdog, which has nothing left to do, and returns once the watchdog
// has been reaped (retire).
func (w *Watch) Close() error {
	sweep(w.id, chainEnd{since: w.since})
	w.mu.Lock()
	killAll("/proc", w.kin)
	w.kin = nil
	w.mu.Unlock()
	retire(w.cmd, w.pipe, w.r)
	return nil
}
