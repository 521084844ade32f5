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
		groups := make(map[int]bool)
		sc := bufio.NewScanner(os.NewFile(3, "conductor"))
		for sc.Scan() {
			apply(groups, sc.Text())
		}
		sweep(args[2], groups)
		return 0, true
	case args[1] == SweepFlag:
		signal.Ignore(syscall.SIGINT, syscall.SIGHUP) // as the shell did
		lowerPriority(os.Getpid())
		groups := make(map[int]bool)
		for _, msg := range args[3:] {
			apply(groups, msg)
		}
		sweep(args[2], groups)
		return 0, true
	}
	return 0, false
}

// apply applies one line of the conductor's pipe to groups: "+PGID", a
// component's process group, or "-PGID", the same group gone.
func apply(groups map[int]bool, line string) {
	if len(line) < 2 {
		return
	}
	pgid, err := strconv.Atoi(line[1:])
	if err != nil || pgid <= 1 {
		return
	}
	switch line[0] {
	case '+':
		groups[pgid] = true
	case '-':
		delete(groups, pgid)
	}
}

// sweep kills every process group in groups and every process that
// carries the marker of chain id, again until none is left or a bound
// passes (a process may start another while its siblings die).
func sweep(id string, groups map[int]bool) {
	for range 50 {
		n := 0
		for g := range groups {
			if syscall.Kill(-g, syscall.SIGKILL) == nil {
				n++
			} else {
				delete(groups, g) // gone
			}
		}
		for _, pid := range marked(id) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond) // for the kills to land before looking again
	}
}

// marked returns the live processes, other than this one, whose
// environment marks them as processes of chain id.
func marked(id string) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := os.Getpid()
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		// Another user's processes, and a zombie's (its environment is
		// gone with its memory), read as nothing.
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err == nil && hasMarker(env, id) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasMarker reports whether env, a process's environment as /proc gives
// it, marks it as a process of chain id. The last entry for MarkerEnv
// counts, as for getenv.
func hasMarker(env []byte, id string) bool {
	var val []byte
	found := false
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(entry, []byte(MarkerEnv+"=")); ok {
			val, found = v, true
		}
	}
	if !found {
		return false
	}
	for chain := range bytes.SplitSeq(val, []byte{','}) {
		if string(chain) == id {
			return true
		}
	}
	return false
}
