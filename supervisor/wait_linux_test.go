package supervisor

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitHoldsNoThread: children waited for at once leave their waiters
// parked in Go's poller, not each in waitid(2) on a thread of its own, and
// each Wait still returns its child's exit status once it is killed.
func TestWaitHoldsNoThread(t *testing.T) {
	const n = 100
	before := threads(t)
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command("sleep", "60")
		if err := Start(cmds[i]); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
		}
	}()
	errs := make(chan error, n)
	for _, cmd := range cmds {
		go func() { errs <- Wait(cmd) }()
	}
	for deadline := time.Now().Add(20 * time.Second); parkedWaiters() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters wait in the poller", parkedWaiters(), n)
		}
	}
	if got := threads(t); got >= before+n/2 {
		t.Errorf("%d threads while %d children are waited for, %d before", got, n, before)
	}
	for _, cmd := range cmds {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	for range n {
		if err := <-errs; err == nil || err.Error() != "signal: killed" {
			t.Errorf("Wait = %v, want signal: killed", err)
		}
	}
}

// parkedWaiters counts the goroutines waiting in the poller for a child.
func parkedWaiters() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[IO wait")) && bytes.Contains(g, []byte("supervisor.awaitExit")) {
			n++
		}
	}
	return n
}

// threads returns the number of this process's threads.
func threads(t *testing.T) int {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}
