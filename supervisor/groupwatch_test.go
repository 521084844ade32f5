//go:build unix

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestGroupWaiter runs the watchdog of the systems without /proc in this
// system's /bin/sh, and in every other shell of theirs found here (macOS's
// /bin/sh is bash, the BSDs' an ash like Debian's dash): at its pipe's end
// it kills the process groups it was told of, but not one it was told has
// ended, nor itself.
func TestGroupWaiter(t *testing.T) {
	shells := []string{"/bin/sh"}
	for _, name := range []string{"bash", "dash", "zsh", "ksh"} {
		if path, err := exec.LookPath(name); err == nil {
			shells = append(shells, path)
		}
	}
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) { testGroupWaiter(t, sh) })
	}
}

func testGroupWaiter(t *testing.T, sh string) {
	killed, spared, other := group(t), group(t), group(t)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	waiter := exec.Command(sh, "-c", groupWaiter, shellName)
	waiter.ExtraFiles = []*os.File{r}
	waiter.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// Lines as Watch sends them: other is told of and ended, as is spared
	// between two others, which stay listed; a group of 1 (init's) or a
	// malformed line must do no harm.
	fmt.Fprintf(w, "+%d\n+%d\n+%d\n-%d\n+%d\n-%d\n-99999999\nnonsense\n",
		other.Process.Pid, killed.Process.Pid, spared.Process.Pid, spared.Process.Pid, killed.Process.Pid, other.Process.Pid)
	w.Close()
	if err := waiter.Wait(); err != nil {
		t.Fatalf("the waiter: %v", err)
	}

	if sig := diedOf(t, killed); sig != syscall.SIGKILL {
		t.Errorf("the listed group died of %v, not the waiter's SIGKILL", sig)
	}
	// A SIGKILL the waiter sent, before it exited, would be what these die
	// of: a process exits with the first fatal signal sent to it.
	for _, cmd := range []*exec.Cmd{spared, other} {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		if sig := diedOf(t, cmd); sig != syscall.SIGTERM {
			t.Errorf("group %d, ended on the pipe, died of %v: the waiter killed it", cmd.Process.Pid, sig)
		}
	}
}

// TestGroupWatch: the Watch of the systems without /proc, started as the
// conductor starts it. Should the conductor die, the end of its pipe sets
// the watchdog killing the groups still running; should it end the chain
// itself (Close), the watchdog goes first and kills nothing.
func TestGroupWatch(t *testing.T) {
	t.Run("conductor dies", func(t *testing.T) {
		w, err := newGroupWatch()
		if err != nil {
			t.Fatal(err)
		}
		running, ended := group(t), group(t)
		w.Started(running.Process.Pid)
		w.Started(ended.Process.Pid)
		w.Ended(ended.Process.Pid)
		if err := w.Launch(""); err != nil {
			t.Fatal(err)
		}
		w.pipe.Close() // what the conductor's death does
		if sig := diedOf(t, running); sig != syscall.SIGKILL {
			t.Errorf("the running component died of %v, not the watchdog's SIGKILL", sig)
		}
		_ = syscall.Kill(ended.Process.Pid, syscall.SIGTERM)
		if sig := diedOf(t, ended); sig != syscall.SIGTERM {
			t.Errorf("the group told ended died of %v: the watchdog killed it", sig)
		}
	})
	t.Run("Close", func(t *testing.T) {
		w, err := newGroupWatch()
		if err != nil {
			t.Fatal(err)
		}
		running := group(t)
		w.Started(running.Process.Pid)
		if err := w.Launch(""); err != nil {
			t.Fatal(err)
		}
		watchdog := w.cmd.Process.Pid
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// Close returns once the watchdog has been reaped: it is gone from
		// the process table, and whatever it was going to kill has been
		// killed.
		if err := syscall.Kill(watchdog, 0); err != syscall.ESRCH {
			t.Fatalf("the watchdog, %d, is still in the process table after Close (signalling it: %v)", watchdog, err)
		}
		_ = syscall.Kill(running.Process.Pid, syscall.SIGTERM)
		if sig := diedOf(t, running); sig != syscall.SIGTERM {
			t.Errorf("a group still listed at Close died of %v: the watchdog killed it", sig)
		}
	})
}

// group starts a process in a process group of its own, killed with its
// group at the test's end.
func group(t *testing.T) *exec.Cmd {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd
}

// diedOf waits for cmd and returns the signal it died of.
func diedOf(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.Sys().(syscall.WaitStatus).Signal()
		}
		t.Fatalf("process %d: %v", cmd.Process.Pid, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("process %d still runs", cmd.Process.Pid)
	}
	return 0
}
