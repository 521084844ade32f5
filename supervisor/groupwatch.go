//go:build unix

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// A groupWatch is the conductor's end of a chain's watchdog where there is
// no /proc and no parent-death signal (the Watch of macOS and the BSDs). It
// knows only the components' process groups, which a shell kills at the
// end of the conductor's pipe (groupWaiter): what a component starts in its
// group dies with it, and what leaves the group is not followed. It builds
// on Linux too, for its tests.
type groupWatch struct {
	r    *os.File  // the read end, until the watchdog holds it
	pipe *os.File  // the write end, which only the conductor holds
	cmd  *exec.Cmd // the watchdog, once launched
}

// newGroupWatch prepares the watchdog of a new chain: its pipe, which
// holds what Started and Ended say until the watchdog, launched once the
// components are (Launch), reads it.
func newGroupWatch() (*groupWatch, error) {
	r, w, err := os.Pipe() // close-on-exec: no component inherits either end
	if err != nil {
		return nil, fmt.Errorf("chain watchdog: %w", err)
	}
	return &groupWatch{r: r, pipe: w}, nil
}

// Launch starts the chain's watchdog, a shell at the lowest priority, and
// returns once it has been executed. The conductor's binary is not needed:
// the shell does the killing itself.
func (w *groupWatch) Launch(string) error {
	defer func() {
		w.r.Close() // the watchdog has its own
		w.r = nil
	}()
	cmd := exec.Command(shell, "-c", groupWaiter, shellName)
	cmd.ExtraFiles = []*os.File{w.r}
	// A group of its own, so that no signal meant for the conductor's
	// group (a terminal's ^C) reaches it; its stdio is /dev/null.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := Start(cmd); err != nil {
		return fmt.Errorf("chain watchdog: %w", err)
	}
	w.cmd = cmd
	_ = unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, 19)
	return nil
}

// Env returns env: nothing here reads a marker.
func (*groupWatch) Env(env []string) ([]string, string) { return env, "" }

// Sweep does nothing: what a component leaves outside its group cannot
// be found without /proc.
func (*groupWatch) Sweep(string) {}

// Started tells the watchdog of a component's process group.
func (w *groupWatch) Started(pgid int) { tell(w.pipe, '+', uint64(pgid)) }

// Ended tells the watchdog that a component's process group is gone, so
// that it never signals a group whose ID has been reused.
func (w *groupWatch) Ended(pgid int) { tell(w.pipe, '-', uint64(pgid)) }

// Snapshot does nothing: descendants cannot be found without /proc.
func (*groupWatch) Snapshot() {}

// Close ends the chain, once every component has been reaped: it kills
// the watchdog, which has nothing left to do, and returns once it has
// been reaped (retire).
func (w *groupWatch) Close() error {
	retire(w.cmd, w.pipe, w.r)
	return nil
}

// groupWaiter is the watchdog where there is no /proc and no parent-death
// signal (macOS, the BSDs): a shell, run with the pipe as descriptor 3,
// that keeps the process groups the pipe tells of ("+PGID" started,
// "-PGID" gone) as its arguments and, at the pipe's end, which comes when
// the conductor exits or dies, kills those still listed. A conductor that
// ends normally has stopped its components and killed the watchdog first;
// this is for one killed outright, whose components would otherwise run on
// unless they exit at the end of their input. It is written for any POSIX
// shell, and tested on Linux's.
const groupWaiter = `trap '' INT HUP
while IFS= read -r m; do
	case $m in
	+*) set -- "$@" "${m#+}" ;;
	-*) g=${m#-}; for x; do shift; [ "$x" = "$g" ] || set -- "$@" "$x"; done ;;
	esac
done <&3
for g; do kill -s KILL -- "-$g" 2>/dev/null; done`
