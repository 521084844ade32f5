//go:build linux

package supervisor

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestMarkedScan reads a /proc laid out by hand: a marked process, an
// unmarked one, and the processes whose environment reads as empty, of
// which only a live user process started since the conductor is unsure (it
// may be in the middle of execve).
func TestMarkedScan(t *testing.T) {
	proc := t.TempDir()
	add := func(pid, environ, stat string) {
		dir := filepath.Join(proc, pid)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if environ != "-" {
			os.WriteFile(filepath.Join(dir, "environ"), []byte(environ), 0o644)
		}
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	}
	const rest = " 1 10 10 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"
	add("10", "A=1\x00"+MarkerEnv+"=outer,c1\x00", "10 (sh) S"+rest)
	add("11", "A=1\x00"+MarkerEnv+"=c2\x00", "11 (sh) S"+rest)
	add("12", "", "12 (a) b) R"+rest) // mid-exec; its name holds ") "
	add("13", "", "13 (kworker/0:1) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n")
	add("14", "", "14 (dead) Z"+rest)
	add("15", "-", "15 (other user's) S"+rest)
	add("16", MarkerEnv+"=c1\x00", "16 (self) R"+rest)
	add("self", MarkerEnv+"=c1\x00", "16 (self) R"+rest)
	add("1", "", "1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n") // started before the chain

	pids, unsure := marked(proc, "c1", 16, 50)
	if !slices.Equal(pids, []int{10}) || !slices.Equal(unsure, []int{12}) {
		t.Errorf("marked = %v, unsure %v; want [10], unsure [12]", pids, unsure)
	}
}

func TestLiveUserProcess(t *testing.T) {
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if !liveUserProcess(self) {
		t.Errorf("this process: not a live user process: %q", self)
	}
	// kthreadd, where the kernel shows it (not in every PID namespace).
	if stat, err := os.ReadFile("/proc/2/stat"); err == nil && liveUserProcess(stat) {
		if comm, _ := os.ReadFile("/proc/2/comm"); string(comm) == "kthreadd\n" {
			t.Errorf("kthreadd: a live user process: %q", stat)
		}
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1", "1 (x) SS 1 1 1 0 -1 0"} {
		if liveUserProcess([]byte(bad)) {
			t.Errorf("liveUserProcess(%q) = true", bad)
		}
	}
}

// startSleeps starts a process with no environment at all and one marked
// as chain id's, and returns once each has exec'd.
func startSleeps(t *testing.T, id string) (bare, marked *exec.Cmd) {
	t.Helper()
	bare = exec.Command("sleep", "1000")
	bare.Env = []string{}
	marked = exec.Command("sleep", "1000")
	marked.Env = append(os.Environ(), MarkerEnv+"="+id)
	for _, c := range []*exec.Cmd{bare, marked} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	execed(t, bare, func([]byte) bool { return true })
	execed(t, marked, func(env []byte) bool { return hasMarker(env, id) })
	return bare, marked
}

// execed returns once c, started, shows its own program and an
// environment that ready accepts. Until its exec, a child shows this
// process's program and environment; and Start returns as the exec
// passes the point of no return, before the new environment is in place,
// when it reads as empty for a moment.
func execed(t *testing.T, c *exec.Cmd, ready func(env []byte) bool) {
	t.Helper()
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir := "/proc/" + strconv.Itoa(c.Process.Pid)
	for {
		exe, err := os.Readlink(dir + "/exe")
		if err != nil {
			t.Fatalf("%v: %v", c.Args, err)
		}
		env, _ := os.ReadFile(dir + "/environ")
		if exe != self && ready(env) {
			return
		}
		runtime.Gosched()
	}
}

// TestSettle: of the unsure processes, the one that shows the chain's
// marker is killed, the one with no environment is left alone once
// unsureFor has passed, and one that has ended is forgotten.
func TestSettle(t *testing.T) {
	id := "settletest" + strconv.FormatUint(rand.Uint64(), 16)
	bare, marked := startSleeps(t, id)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	unsure := map[int]bool{bare.Process.Pid: true, marked.Process.Pid: true, gone.Process.Pid: true}
	if !settle(id, unsure) {
		t.Error("settle killed nothing")
	}
	if err := waitBounded(marked, 20*time.Second); err == nil || err.Error() != "signal: killed" {
		t.Errorf("marked process: %v, want killed", err)
	}
	if err := spared(bare); err != nil {
		t.Errorf("the process with no environment: %v", err)
	}
}

// TestMarkedSince: a process with no environment is unsure if it started
// since the conductor, not if before.
func TestMarkedSince(t *testing.T) {
	id := "sincetest" + strconv.FormatUint(rand.Uint64(), 16)
	bare, _ := startSleeps(t, id)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(bare.Process.Pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	started := startTicks(stat)
	if started == 0 {
		t.Fatalf("no start time in %q", stat)
	}
	if _, unsure := marked("/proc", id, os.Getpid(), started); !slices.Contains(unsure, bare.Process.Pid) {
		t.Errorf("a bare process started at the conductor's start is not unsure: %v", unsure)
	}
	if _, unsure := marked("/proc", id, os.Getpid(), started+1); slices.Contains(unsure, bare.Process.Pid) {
		t.Errorf("a bare process started before the conductor is unsure")
	}
}

// TestChainEndApply reads the conductor's pipe: component groups come and
// go, and the conductor's start time is kept; anything else is ignored.
func TestChainEndApply(t *testing.T) {
	e := chainEnd{groups: map[int]bool{}}
	for _, line := range []string{"@12345", "+100", "+200", "-100", "+1", "+x", "?300", "", "-", "+-5"} {
		e.apply(line)
	}
	if e.since != 12345 || len(e.groups) != 1 || !e.groups[200] {
		t.Errorf("since %d, groups %v; want 12345, [200]", e.since, e.groups)
	}
}

// TestSweepEndsDespiteEmptyEnvironment: a process started with no
// environment at all stays unsure; the sweep looks at it for a bounded
// time, ends, and leaves it alone, while a marked process is killed.
func TestSweepEndsDespiteEmptyEnvironment(t *testing.T) {
	id := "sweeptest" + strconv.FormatUint(rand.Uint64(), 16)
	bare, marked := startSleeps(t, id)
	sweep(id, chainEnd{})
	if err := waitBounded(marked, 20*time.Second); err == nil || err.Error() != "signal: killed" {
		t.Errorf("marked process: %v, want killed", err)
	}
	if err := spared(bare); err != nil {
		t.Errorf("the process with no environment: %v", err)
	}
}
