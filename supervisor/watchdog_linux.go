package supervisor

import (
	"bufio"
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Run runs the watchdog if args, a command line without the program's
// name, are one of its two forms, and returns the exit status to leave
// with; ok is false for any other command line.
//
//	component-supervisor --watch ID          the pipe as descriptor 3
//	component-supervisor --sweep ID MSG...   what the pipe said, in order
//
// The first reads the conductor's pipe until its end, which comes when the
// conductor exits or dies; the second is what the waiting shell becomes at
// that end. Either then kills every process group the conductor told of
// and every process that carries the chain's marker.
func Run(args []string) (status int, ok bool) {
	if len(args) < 3 || args[0] != Command {
		return 0, false
	}
	switch {
	case args[1] == WatchFlag && len(args) == 3:
		// Signals from the terminal are for the conductor, which ends the
		// chain; the end of the pipe is the watchdog's only cue.
		signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
		lowerPriority(os.Getpid())
		end := chainEnd{groups: make(map[int]bool)}
		sc := bufio.NewScanner(os.NewFile(3, "conductor"))
		for sc.Scan() {
			end.apply(sc.Text())
		}
		sweep(args[2], end)
		return 0, true
	case args[1] == SweepFlag:
		signal.Ignore(syscall.SIGINT, syscall.SIGHUP) // as the shell did
		lowerPriority(os.Getpid())
		end := chainEnd{groups: make(map[int]bool)}
		for _, msg := range args[3:] {
			end.apply(msg)
		}
		sweep(args[2], end)
		return 0, true
	}
	return 0, false
}

// chainEnd is what the sweep of a chain knows: the process groups of its
// components, and when its conductor started (in clock ticks since boot,
// as /proc/PID/stat gives it; 0 if unknown): no process of the chain
// started before.
type chainEnd struct {
	groups map[int]bool
	since  uint64
}

// apply applies one line of the conductor's pipe to e: "+PGID", a
// component's process group, "-PGID", the same group gone, or "@TICKS",
// when the conductor started.
func (e *chainEnd) apply(line string) {
	if len(line) < 2 {
		return
	}
	n, err := strconv.ParseUint(line[1:], 10, 63)
	if err != nil {
		return
	}
	switch pgid := int(n); {
	case line[0] == '@':
		e.since = n
	case pgid <= 1:
	case line[0] == '+':
		e.groups[pgid] = true
	case line[0] == '-':
		delete(e.groups, pgid)
	}
}

// sweep kills every process group of end and every process that carries
// the marker of chain id, again until none is left or a bound passes (a
// process may start another while its siblings die).
//
// A process in the middle of execve reads, for a moment, as having no
// environment at all, as does one started with none: such a process, if
// it started after the conductor, is looked at again, by itself, until it
// shows an environment or for unsureFor, so that a marked process caught
// mid-exec is not missed. Should
// one turn out marked, the whole sweep runs again, for what it may have
// started, a bounded number of times.
func sweep(id string, end chainEnd) {
	for range 5 {
		unsure := make(map[int]bool)
		for range 50 {
			n := 0
			for g := range end.groups {
				if syscall.Kill(-g, syscall.SIGKILL) == nil {
					n++
				} else {
					delete(end.groups, g) // gone
				}
			}
			pids, maybe := marked("/proc", id, os.Getpid(), end.since)
			for _, pid := range pids {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
			for _, pid := range maybe {
				unsure[pid] = true
			}
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond) // for the kills to land before looking again
		}
		if !settle(id, unsure) {
			return
		}
	}
}

// unsureFor is how long sweep waits for a process with no environment to
// show one: an exec takes a millisecond or so, many more on a loaded
// machine, and a process started with an empty environment must not hold
// every sweep up for long.
const unsureFor = 200 * time.Millisecond

// settle looks at each unsure process again until it shows an environment,
// ends, or unsureFor passes, and kills those that turn out marked as chain
// id's; it reports whether it killed one.
func settle(id string, unsure map[int]bool) (killed bool) {
	deadline := time.Now().Add(unsureFor)
	for len(unsure) > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
		for pid := range unsure {
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			switch {
			case err == nil && len(env) == 0:
				continue // still unsure
			case err == nil && hasMarker(env, id):
				killed = syscall.Kill(pid, syscall.SIGKILL) == nil || killed
			}
			delete(unsure, pid) // it ended, or shows its environment
		}
	}
	return killed
}

// marked returns the live processes under proc (/proc), other than self,
// whose environment marks them as processes of chain id, and the unsure
// ones: live user processes started since (clock ticks since boot) whose
// environment reads as empty, which is how a process looks for a moment
// during execve. Another user's processes read as nothing, and a zombie's
// environment is gone with its memory; a kernel thread never has one. One
// started before the chain is none of its own (an init that runs with no
// environment, say) and must not hold up every sweep.
func marked(proc, id string, self int, since uint64) (pids, unsure []int) {
	for pid := range allPIDs(proc) {
		if pid == self {
			continue
		}
		dir := proc + "/" + strconv.Itoa(pid)
		env, err := os.ReadFile(dir + "/environ")
		switch {
		case err != nil:
		case len(env) == 0:
			if stat, err := os.ReadFile(dir + "/stat"); err == nil && liveUserProcess(stat) && startTicks(stat) >= since {
				unsure = append(unsure, pid)
			}
		case hasMarker(env, id):
			pids = append(pids, pid)
		}
	}
	return pids, unsure
}

// pfKthread is the kernel's PF_KTHREAD flag, in /proc/PID/stat's flags.
const pfKthread = 0x00200000

// liveUserProcess reports whether stat, a /proc/PID/stat, is that of a
// process that is neither a zombie nor a kernel thread.
func liveUserProcess(stat []byte) bool {
	f := statFields(stat)
	if len(f) < 7 {
		return false
	}
	if s := f[0]; len(s) != 1 || s[0] == 'Z' || s[0] == 'X' || s[0] == 'x' {
		return false
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfKthread == 0
}

// startTicks returns when the process of stat, a /proc/PID/stat, started,
// in clock ticks since boot (its 22nd field), or 0 if stat cannot say.
func startTicks(stat []byte) uint64 {
	f := statFields(stat)
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return n
}

// statFields returns the fields of stat, a /proc/PID/stat, from the third,
// the state, on: "state ppid pgrp session tty_nr tpgid flags ...". The
// command name before them, in parentheses, may hold anything, spaces and
// parentheses included; nil if stat has none.
func statFields(stat []byte) [][]byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(stat[i+1:])
}

// hasMarker reports whether env, a process's environment as /proc gives
// it, marks it as a process of chain id.
func hasMarker(env []byte, id string) bool { return marks(env, MarkerEnv, id) }

// marks reports whether env, a process's environment as /proc gives it,
// has id among the comma-separated IDs of its variable name (MarkerEnv or
// ComponentEnv). The last entry for name counts, as for getenv.
func marks(env []byte, name, id string) bool {
	var val []byte
	found := false
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, []byte(name+"=")); ok {
			val, found = v, true
		}
	}
	if !found {
		return false
	}
	for v := range bytes.SplitSeq(val, []byte{','}) {
		if string(v) == id {
			return true
		}
	}
	return false
}

// carrying returns the live processes under proc (/proc), other than
// self, whose environment has id among the IDs of its variable name.
func carrying(proc, name, id string, self int) []process {
	var ps []process
	for pid := range allPIDs(proc) {
		if pid == self {
			continue
		}
		dir := proc + "/" + strconv.Itoa(pid)
		env, err := os.ReadFile(dir + "/environ")
		if err != nil || !marks(env, name, id) {
			continue
		}
		if stat, err := os.ReadFile(dir + "/stat"); err == nil && liveUserProcess(stat) {
			ps = append(ps, process{pid: pid, ppid: parentPID(stat), start: startTicks(stat)})
		}
	}
	return ps
}
