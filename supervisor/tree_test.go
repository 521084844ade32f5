//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestKin reads a /proc laid out by hand: two components (10 and 20) and
// a tree under the first, one of whose processes has a name that holds
// ") " and one of which is a zombie, besides processes of no component's;
// the second is a nested conductor, with its own component and its
// watchdog, as the waiting shell and as the binary. The descendants of the
// components are found by their parent links, and nothing else is; the
// watchdogs are left to finish their sweeps.
func TestKin(t *testing.T) {
	proc, add := fakeProc(t)
	add("1", "1 (init) S 0"+rest)
	add("10", "10 (proxy) S 1"+rest)
	add("11", "11 (sh) S 10"+rest)
	add("12", "12 (a) b) S 11"+rest) // setsid, env -i: the link is all that is left
	add("13", "13 (gone) Z 11"+rest)
	add("14", "14 (sleep) S 12"+rest)
	add("20", "20 (acp-conductor) S 1"+rest, "acp-conductor", "agent", "--", "agent")
	add("21", "21 (agent) S 20"+rest, "agent")
	add("22", "22 (sh) S 20"+rest, "/bin/sh", "-c", waiter, shellName, "c2")
	add("23", "23 (acp-conductor) S 20"+rest, "/usr/bin/acp-conductor", Command, SweepFlag, "c3")
	add("30", "30 (editor) S 1"+rest)
	add("31", "31 (other) S 30"+rest)
	add("self", "30 (editor) S 1"+rest)

	var got []int
	for _, p := range kin(proc, []int{10, 20}) {
		got = append(got, p.pid)
		if p.start != 100 {
			t.Errorf("process %d started at %d, want 100", p.pid, p.start)
		}
	}
	slices.Sort(got)
	if want := []int{11, 12, 14, 21}; !slices.Equal(got, want) {
		t.Errorf("kin = %v, want %v", got, want)
	}
}

// TestKillChecksStart reads a process that has the PID of one found
// before but started later: it is another, and kill must leave it alone.
func TestKillChecksStart(t *testing.T) {
	self := os.Getpid()
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	// This test's own process, remembered as having started a tick later:
	// were kill to signal it, the test binary would die.
	process{pid: self, ppid: parentPID(stat), start: startTicks(stat) + 1}.kill("/proc")
	if parentPID(stat) != os.Getppid() {
		t.Errorf("parentPID = %d, want %d", parentPID(stat), os.Getppid())
	}
}

// TestKillAllGivesUpOnEPERM kills a process that the kill is refused for
// (as an adopted setuid program's is, to a conductor not run as root):
// one try, not one a millisecond until killAll's bound.
func TestKillAllGivesUpOnEPERM(t *testing.T) {
	proc, add := fakeProc(t)
	add("40", "40 (setuid) S 1"+rest)
	tries := 0
	defer func(orig func(int) error) { sigkill = orig }(sigkill)
	sigkill = func(pid int) error {
		if pid != 40 {
			t.Errorf("signalled %d, want 40", pid)
		}
		tries++
		return syscall.EPERM
	}
	killAll(proc, []process{{pid: 40, ppid: 1, start: 100}})
	if tries != 1 {
		t.Errorf("the refused kill was tried %d times, want once", tries)
	}
}

// rest is what follows the parent in a /proc/PID/stat of fakeProc's:
// pgrp session tty tpgid flags, then up to the start time (the 22nd
// field), 100 for every process.
const rest = " 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"

// fakeProc returns a directory laid out as /proc, and add, which adds a
// process to it: its PID, its stat and its command line.
func fakeProc(t *testing.T) (proc string, add func(pid, stat string, cmdline ...string)) {
	proc = t.TempDir()
	return proc, func(pid, stat string, cmdline ...string) {
		dir := filepath.Join(proc, pid)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		args := strings.Join(cmdline, "\x00") + "\x00"
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(args), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzStat reads a /proc/PID/stat whose command name, which a process sets
// for itself (prctl PR_SET_NAME, or its executable's name), holds anything:
// spaces, parentheses, what looks like other fields. The fields after it
// are still read right.
func FuzzStat(f *testing.F) {
	f.Add("sleep", uint32(1), uint64(100))
	f.Add(") S 1 (", uint32(7), uint64(0))
	f.Add("a) b) Z 99", uint32(12), uint64(1<<40))
	f.Fuzz(func(t *testing.T, comm string, ppid uint32, start uint64) {
		stat := []byte(fmt.Sprintf("42 (%s) S %d 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", comm, ppid, start))
		if got := parentPID(stat); got != int(ppid) {
			t.Errorf("parentPID(%q) = %d, want %d", stat, got, ppid)
		}
		if got := startTicks(stat); got != start {
			t.Errorf("startTicks(%q) = %d, want %d", stat, got, start)
		}
		if !liveUserProcess(stat) {
			t.Errorf("liveUserProcess(%q) = false", stat)
		}
	})
}

// FuzzMarks reads an environment that a process set for itself. marks
// finds id only in the last entry for the variable, among its values.
func FuzzMarks(f *testing.F) {
	f.Add([]byte(MarkerEnv+"=a,c1\x00B=2\x00"), "c1")
	f.Add([]byte(MarkerEnv+"=c1\x00"+MarkerEnv+"=c10\x00"), "c1")
	f.Add([]byte("\x00=\x00,"), "")
	f.Fuzz(func(t *testing.T, env []byte, id string) {
		want := false
		for _, e := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(e, MarkerEnv+"="); ok {
				want = slices.Contains(strings.Split(v, ","), id)
			}
		}
		if got := marks(env, MarkerEnv, id); got != want {
			t.Errorf("marks(%q, %q) = %v, want %v", env, id, got, want)
		}
	})
}
