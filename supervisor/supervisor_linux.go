package supervisor

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunChain serves the conductor on the control socket (descriptor 3) until
// the conductor closes it or dies, then kills every process left below the
// supervisor, and returns the exit status to leave with.
//
// Each component is started in a process group of its own, with the
// descriptors that came with its request as its stdio, and its end is
// reported with its wait status. The supervisor holds no copy of any
// component's pipes, so the conductor sees a component's output end when
// the component closes it, even while it keeps running.
func RunChain() int {
	parent := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "component-supervisor: cannot become a subreaper: %v\n", err)
	}
	f := os.NewFile(3, "control")
	ctl, err := net.FileConn(f)
	f.Close() // FileConn made its own copy; no component inherits this one
	if err != nil {
		fmt.Fprintf(os.Stderr, "component-supervisor: no control socket: %v\n", err)
		return 2
	}
	conn, ok := ctl.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "component-supervisor: the control socket is not a Unix socket")
		return 2
	}
	releaseStdio()

	type request struct {
		spawn
		files []int
		err   error
	}
	requests := make(chan request)
	go func() { // ends with the process: RunChain returns only to exit
		defer close(requests)
		buf := make([]byte, 1<<20)
		oob := make([]byte, unix.CmsgSpace(3*4))
		for {
			n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				return // the conductor is done, or gone
			}
			var r request
			r.files, r.err = rights(oob[:oobn])
			if r.err == nil {
				r.err = json.Unmarshal(buf[:n], &r.spawn)
			}
			requests <- r
		}
	}()
	send := func(e event) {
		msg, _ := json.Marshal(e)
		_, _ = conn.Write(msg) // a conductor that is gone hears nothing
	}

	components := make(map[int]bool)
	for {
		select {
		case r, ok := <-requests:
			if !ok {
				killDescendants()
				return 0
			}
			if r.err == nil && len(r.files) != 3 {
				r.err = fmt.Errorf("%d descriptors with the request, want 3", len(r.files))
			}
			if r.err != nil {
				send(event{Error: "component-supervisor: " + r.err.Error()})
			} else if pid, err := syscall.ForkExec(r.Path, r.Args, &syscall.ProcAttr{
				Dir:   r.Dir,
				Env:   r.Env,
				Files: []uintptr{uintptr(r.files[0]), uintptr(r.files[1]), uintptr(r.files[2])},
				Sys:   &syscall.SysProcAttr{Setpgid: true},
			}); err != nil {
				send(event{Error: err.Error()})
			} else {
				components[pid] = true
				send(event{PID: pid})
			}
			for _, fd := range r.files {
				_ = syscall.Close(fd) // the component holds its own copies
			}
		case <-children:
			// Reap every child that has ended: a component, whose end the
			// conductor hears of, or an orphan that was adopted.
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
				if components[pid] {
					delete(components, pid)
					send(event{Exited: pid, Status: uint32(ws)})
				}
			}
		case <-sigs:
			if os.Getppid() != parent {
				// The conductor is gone: take everything it started with it.
				killDescendants()
				return 1
			}
			// Otherwise the conductor stops the components itself.
		}
	}
}

// rights returns the descriptors that came with a message.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		for _, fd := range f {
			// Only the copies dup'ed to 0, 1 and 2 may reach the
			// component: one more of its stdout would keep it open after
			// the component closed it.
			syscall.CloseOnExec(fd)
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// releaseStdio points the supervisor's stdin and stdout at /dev/null: it
// holds no copy of the conductor's own stdio.
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
// is left or a bound passes (a process may start another while its
// siblings die), and reaps them.
func killDescendants() {
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
	for {
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
