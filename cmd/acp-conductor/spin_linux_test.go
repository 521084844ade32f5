package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// A conductor confined to one CPU (by its affinity here; a container's CPU
// limit counts alike in the runtime's default GOMAXPROCS) does not spin:
// the spinner would hold the CPU its peers need.
func TestSpinOneCPU(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: TestSpinDecision's default case covers it")
	}
	logFile := filepath.Join(t.TempDir(), "acp.log")
	cmd := exec.Command(binary, "proxy", "--log-file", logFile, "--log-format", "json")
	cmd.Env = append(cleanEnv(), "GOMAXPROCS=")
	// The child inherits the affinity of the thread that forks it.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
		var one unix.CPUSet
		one.Set(0)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			done <- err
			return
		}
		done <- cmd.Run()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if spun(t, logFile) {
		t.Error("a conductor confined to one CPU spins")
	}
}
