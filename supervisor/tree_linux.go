package supervisor

import (
	"bytes"
	"iter"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// A process is one entry of /proc: enough to find a process's children,
// and to tell it from a later process given the same PID.
type process struct {
	pid, ppid int
	start     uint64 // clock ticks since boot (startTicks)
}

// processes returns the live user processes under proc (/proc).
func processes(proc string) []process {
	var ps []process
	for pid, stat := range stats(proc) {
		if !liveUserProcess(stat) {
			continue
		}
		if ppid := parentPID(stat); ppid > 0 {
			ps = append(ps, process{pid: pid, ppid: ppid, start: startTicks(stat)})
		}
	}
	return ps
}

// stats yields the PID and /proc/PID/stat of every process under proc
// (/proc) that can be read.
func stats(proc string) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		for pid := range allPIDs(proc) {
			stat, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/stat")
			if err == nil && !yield(pid, stat) {
				return
			}
		}
	}
}

// allPIDs yields the PID of every process under proc (/proc).
func allPIDs(proc string) iter.Seq[int] {
	return func(yield func(int) bool) {
		d, err := os.Open(proc)
		if err != nil {
			return
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, name := range names {
			if pid, err := strconv.Atoi(name); err == nil && !yield(pid) {
				return
			}
		}
	}
}

// kin returns the live processes under proc (/proc) below roots, but for
// chains' watchdogs (see Snapshot).
func kin(proc string, roots []int) []process {
	return slices.DeleteFunc(descendants(processes(proc), roots), func(p process) bool {
		return isWatchdog(proc, p.pid)
	})
}

// descendants returns the processes of ps below roots (not roots
// themselves), following parent links.
func descendants(ps []process, roots []int) []process {
	children := make(map[int][]process, len(ps))
	for _, p := range ps {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []process
	seen := make(map[int]bool)
	next := roots
	for len(next) > 0 {
		pid := next[len(next)-1]
		next = next[:len(next)-1]
		for _, c := range children[pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out = append(out, c)
				next = append(next, c.pid)
			}
		}
	}
	return out
}

// killAll kills each of ps still alive under proc, and returns once none
// is (dead, or a zombie), or after a bound, as sweep does: a kill lands a
// moment after it is sent.
func killAll(proc string, ps []process) {
	for range 50 {
		n := 0
		for _, p := range ps {
			if p.kill(proc) {
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// kill kills p if it is still alive under proc as the same process (its
// PID may since have been given to another), and reports whether it was
// and the signal went: a process the conductor may not signal (a setuid
// program it adopted, EPERM) will not die of its hand, and waiting for it
// would only hold the end up.
func (p process) kill(proc string) bool {
	stat, err := os.ReadFile(proc + "/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil || !liveUserProcess(stat) || startTicks(stat) != p.start {
		return false
	}
	return sigkill(p.pid) == nil
}

// sigkill sends SIGKILL to pid; a variable, so that a test can meet a
// process it may not signal.
var sigkill = func(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// isWatchdog reports whether process pid under proc is a chain's watchdog,
// by its command line: the waiting shell, or the binary run as one.
func isWatchdog(proc string, pid int) bool {
	cmdline, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
		if string(arg) == shellName || string(arg) == Command {
			return true
		}
	}
	return false
}

// parentPID returns the parent's PID from stat, a /proc/PID/stat (its 4th
// field), or 0 if stat cannot say.
func parentPID(stat []byte) int {
	f := statFields(stat)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}
