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

// RunWatch is the watchdog of the chain with the given ID: it reads the
// conductor's pipe (descriptor 3) until its end, which comes when the
// conductor exits or dies, then kills every process group the conductor
// told it of and every process that carries the chain's marker, and
// returns the exit status to leave with.
func RunWatch(id string) int {
	// Signals from the terminal are for the conductor, which ends the
	// chain; the end of the pipe is the watchdog's only cue.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	lowerPriority(os.Getpid())
	groups := make(map[int]bool)
	sc := bufio.NewScanner(os.NewFile(3, "conductor"))
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(string(line[1:]))
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	sweep(id, groups)
	return 0
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
