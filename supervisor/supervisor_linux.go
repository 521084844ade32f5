package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killAfter is how long the component gets after the conductor's SIGTERM
// before the supervisor kills it and everything it started. It is shorter
// than the conductor's own wait before SIGKILL (which the supervisor cannot
// survive to clean up after), so that the supervisor gets there first.
const killAfter = 200 * time.Millisecond

// Run runs args as a component and returns the exit status to leave with.
//
// The component inherits the supervisor's stdio and process group, so
// nothing is copied and the conductor's own shutdown (which signals the
// group) reaches it directly. The supervisor then lets go of its own stdin
// and stdout, so that the conductor sees the component's output end when
// the component closes it, even while it keeps running.
//
// The supervisor is a child subreaper: whatever the component starts and
// leaves behind, even in a session of its own (setsid), becomes its child
// rather than init's. When the component ends, when the conductor's SIGTERM
// is not enough, or when the conductor is gone (the kernel sends the
// supervisor SIGTERM, its parent-death signal), the supervisor kills every
// descendant before it exits.
func Run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "component-supervisor: no command")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "component-supervisor: cannot become a subreaper: %v\n", err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "component-supervisor: %v\n", err)
		return 127
	}
	releaseStdio()
	done := make(chan struct{})
	go func() { // owned: Run waits for done below
		defer close(done)
		_ = cmd.Wait()
	}()
	var deadline <-chan time.Time
	for {
		select {
		case <-done:
			killDescendants(true)
			return exitStatus(cmd.ProcessState)
		case <-sigs:
			if os.Getppid() != parent {
				// The conductor is gone: take everything it started with it.
				killDescendants(false)
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
			// Otherwise the conductor is stopping the group itself, and the
			// component got the same signal: give it a moment.
			if deadline == nil {
				deadline = time.After(killAfter)
			}
		case <-deadline:
			killDescendants(false) // then done, which reaps
		}
	}
}

// releaseStdio points the supervisor's stdin and stdout at /dev/null, so
// that the component holds the only copies of the conductor's pipes.
func releaseStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	for _, fd := range []int{0, 1} {
		_ = unix.Dup2(int(null.Fd()), fd)
	}
}

// killDescendants kills every process descended from this one until none
// is left or a bound passes: a process may start another while its
// siblings die. With reap, it also reaps the orphans it inherited; only
// once the component itself has been waited for, whose status is wanted.
func killDescendants(reap bool) {
	self := os.Getpid()
	for range 20 {
		pids := descendants(self)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond) // for the kills to land before looking again
	}
	for reap {
		if pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}

// descendants returns the live processes below pid, from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold anything: the fields
		// after it are "state ppid ...".
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// exitStatus mirrors the component's end: its exit code, or its signal
// re-raised so that the conductor's report shows it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
	}
	return ps.ExitCode()
}
