//go:build linux

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the conductor's binary for Launch.
func TestMain(m *testing.M) {
	if status, ok := Run(os.Args[1:]); ok {
		os.Exit(status)
	}
	os.Exit(m.Run())
}

// TestWatchdogOutlivesConductor plays a conductor that dies: it starts a
// component in a group of its own, a process in a session of its own with
// the chain's marker, and a group it says has ended, launches the watchdog,
// and closes the pipe's write end as the kernel does when the conductor is
// killed. The watchdog, a waiting shell or the binary from the start, must
// kill the first two, spare the third, whose group ID could have been
// reused, and exit. The shell still runs the conductor's binary if the
// binary was deleted meanwhile (an upgrade).
func TestWatchdogOutlivesConductor(t *testing.T) {
	for _, tc := range []struct {
		name, shell string
		deleted     bool
	}{
		{"shell", "/bin/sh", false},
		{"shell, binary deleted", "/bin/sh", true},
		{"no shell", "/nonexistent/sh", false},
		{"shell cannot run", "/dev/null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.shell); err != nil && tc.shell == "/bin/sh" {
				t.Fatalf("this test needs %s: %v", tc.shell, err)
			}
			defer func(s string) { shell = s }(shell)
			shell = tc.shell
			w, err := New()
			if err != nil {
				t.Fatal(err)
			}
			start := func(attr *syscall.SysProcAttr, env []string) *exec.Cmd {
				cmd := exec.Command("sleep", "1000")
				cmd.SysProcAttr, cmd.Env = attr, env
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				return cmd
			}
			grouped := start(&syscall.SysProcAttr{Setpgid: true}, os.Environ())
			w.Started(grouped.Process.Pid)
			env, _ := w.Env(os.Environ())
			detached := start(&syscall.SysProcAttr{Setsid: true}, env)
			ended := start(&syscall.SysProcAttr{Setpgid: true}, os.Environ())
			w.Started(ended.Process.Pid)
			w.Ended(ended.Process.Pid)

			exe := os.Args[0]
			if tc.deleted {
				exe = copyExecutable(t, exe)
			}
			if err := w.Launch(exe); err != nil {
				t.Fatal(err)
			}
			if tc.deleted {
				if err := os.Remove(exe); err != nil {
					t.Fatal(err)
				}
			}
			// Its command line, once its exec is through.
			var cmdline []byte
			for deadline := time.Now().Add(20 * time.Second); len(cmdline) == 0 && time.Now().Before(deadline); runtime.Gosched() {
				cmdline, _ = os.ReadFile("/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/cmdline")
			}
			if got := strings.Contains(string(cmdline), "-c\x00"); got != (tc.shell == "/bin/sh") {
				t.Errorf("watchdog's command line %q: run by a shell %v, want %v", cmdline, got, tc.shell == "/bin/sh")
			}
			w.pipe.Close() // the conductor is gone

			for _, c := range []*exec.Cmd{grouped, detached} {
				if err := waitBounded(c, 20*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
					t.Errorf("%v: %v, want killed", c.Args, err)
				}
			}
			if err := Wait(w.cmd); err != nil {
				t.Errorf("watchdog: %v, want exit 0", err)
			}
			if err := spared(ended); err != nil {
				t.Errorf("the group said to have ended: %v", err)
			}
		})
	}
}

// copyExecutable copies the executable at path into a temporary file.
func copyExecutable(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "conductor")
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// spared reports, as an error, that c was killed before now: it is ended
// with SIGTERM here, and must die of that. (A process killed but not yet
// reaped still takes signal 0.)
func spared(c *exec.Cmd) error {
	c.Process.Signal(syscall.SIGTERM)
	if err := waitBounded(c, 20*time.Second); err == nil || err.Error() != "signal: terminated" {
		return fmt.Errorf("%v: %v, want it alive until now (signal: terminated)", c.Args, err)
	}
	return nil
}

func waitBounded(c *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		c.Process.Kill()
		<-done
		return errors.New("still running after " + d.String())
	}
}
