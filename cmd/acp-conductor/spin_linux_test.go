package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	var entry struct {
		Msg  string
		Spin *bool
	}
	if err := json.Unmarshal([]byte(first), &entry); err != nil || entry.Msg != "starting" || entry.Spin == nil {
		t.Fatalf("first log line = %q (%v), want the starting line with its spin field", first, err)
	}
	if *entry.Spin {
		t.Error("a conductor confined to one CPU spins")
	}
}
