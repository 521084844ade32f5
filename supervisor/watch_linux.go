package supervisor

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Watch is the conductor's end of a chain's watchdog.
type Watch struct {
	id   string
	cmd  *exec.Cmd
	pipe *os.File // the write end, which only the conductor holds
}

// Start starts exe as the watchdog of a new chain, and returns once it has
// been executed, not once it runs: the conductor starts the components
// while the watchdog starts up, at the lowest priority.
func Start(exe string) (*Watch, error) {
	id := strconv.FormatUint(rand.Uint64(), 16)
	r, w, err := os.Pipe() // close-on-exec: no component inherits either end
	if err != nil {
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	cmd := exec.Command(exe, Command, WatchFlag, id)
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stderr = os.Stderr // stdin and stdout are /dev/null: it holds none of the conductor's
	// A group of its own, so that no signal meant for the conductor's group
	// (a terminal's ^C) reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	// The threads its runtime starts inherit the policy of its first one.
	// Should a thread start before this, the watchdog only competes more.
	_ = unix.SchedSetAttr(cmd.Process.Pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
	return &Watch{id: id, cmd: cmd, pipe: w}, nil
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
// left in a session of its own), then the watchdog, and returns once it
// has been reaped.
func (w *Watch) Close() error {
	sweep(w.id, nil)
	w.pipe.Close()
	_ = w.cmd.Process.Kill() // nothing is left for it to do
	_ = w.cmd.Wait()
	return nil
}
