package supervisor

import (
	"bytes"
	"fmt"
	"iter"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Adopt makes this process a child subreaper (PR_SET_CHILD_SUBREAPER): a
// process under it whose parent exits is reparented to it, not to init.
// It reaps what it adopts as it exits, so that none is left a zombie (as
// PID 1 in a container it adopts without asking, and must reap as well).
// release kills the adopted processes still alive, and what they started,
// reaps them and stops: call it once the program's chains have stopped.
// This finds what neither a component's group nor the chain's marker
// does: a process that left its session and cleared its environment, and
// whose parent exited before the chain stopped.
//
// Only a program that starts each child of its own through Start may
// adopt: a child that Start did not record is taken for an adopted one,
// and reaped by its PID; but for the children it already had when it
// called Adopt (a wrapper's background job that exec'd into it), which
// are reaped and never killed.
func Adopt() (release func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return func() {}, fmt.Errorf("adopting orphaned processes: %w", err)
	}
	self := os.Getpid()
	// What is our child already was not left by a chain: a wrapper
	// script's background job, say, that exec'd into this program.
	for pid, stat := range childStats("/proc", self) {
		if parentPID(stat) == self && liveUserProcess(stat) {
			inherited.Store(pid, startTicks(stat))
		}
	}
	adopting.Store(true)
	exited := make(chan os.Signal, 1)
	signal.Notify(exited, syscall.SIGCHLD)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-exited:
				reapAdopted("/proc", self)
			case <-done:
				return
			}
		}
	})
	return sync.OnceFunc(func() {
		signal.Stop(exited)
		close(done)
		wg.Wait()
		KillAdopted()
	}), nil
}

// adopting is set once Adopt has made this process a subreaper.
var adopting atomic.Bool

// inherited holds the children this process had when it began to adopt,
// by PID, with their start times: they are reaped when they exit, as a
// parent must, but never killed as a chain's leftovers.
var inherited sync.Map

// KillAdopted kills what this process adopted (see Adopt), and what that
// started, and reaps it, as Adopt's release does, but goes on adopting. A
// program that runs chains one after another, or several at once (serve),
// calls it whenever none is running: all it adopted was then left by
// chains that have ended, whose own ends find only what carries their
// marker or still hangs under their components. Without Adopt it does
// nothing.
func KillAdopted() {
	if !adopting.Load() {
		return
	}
	self := os.Getpid()
	killAll("/proc", adoptedKin("/proc", self))
	reapAdopted("/proc", self)
}

// adoptedKin returns the processes under proc (/proc) that self adopted
// and all that they started, but for chains' watchdogs: a nested
// conductor killed outright leaves its watchdog to self, and the watchdog
// must finish its sweep.
//
// As PID 1 (a container's entrypoint), self adopts every orphan in the
// container, a `docker exec`'s background job among them, and so takes only
// those that carry a chain's marker: a chain's orphan that cleared its
// environment then lives on, but only as long as the container does.
func adoptedKin(proc string, self int) []process {
	live, _ := adopted(proc, self)
	live = slices.DeleteFunc(live, func(p process) bool {
		return isWatchdog(proc, p.pid) || self == 1 && !chainMarked(proc, p.pid)
	})
	if len(live) == 0 {
		return nil // the common case, without reading every process's stat
	}
	roots := make([]int, len(live))
	for i, p := range live {
		roots[i] = p.pid
	}
	return append(live, kin(proc, roots)...)
}

// reapAdopted reaps every adopted child of self under proc (/proc) that
// has exited. It takes a child for adopted only while no start is under
// way, so as never to take the exit status of a child Start has not yet
// recorded.
func reapAdopted(proc string, self int) {
	if _, zombies := adopted(proc, self); len(zombies) == 0 {
		return // the common case: one of ours exited
	}
	ours.starting.Lock()
	defer ours.starting.Unlock()
	_, zombies := adopted(proc, self)
	for _, pid := range zombies {
		_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
	}
}

// adopted returns the children of self under proc (/proc) that Start did
// not start: those alive, and the PIDs of those that have exited and wait
// to be reaped.
func adopted(proc string, self int) (live []process, zombies []int) {
	for pid, stat := range childStats(proc, self) {
		if parentPID(stat) != self || isOurs(pid) {
			continue
		}
		switch f := statFields(stat); {
		case len(f) > 0 && string(f[0]) == "Z":
			zombies = append(zombies, pid)
		case liveUserProcess(stat) && !wasInherited(pid, stat):
			live = append(live, process{pid: pid, ppid: self, start: startTicks(stat)})
		}
	}
	return live, zombies
}

// wasInherited reports whether the process of stat is a child this process
// had when it began to adopt (its PID may since have been reused).
func wasInherited(pid int, stat []byte) bool {
	start, ok := inherited.Load(pid)
	return ok && start == startTicks(stat)
}

// childStats yields the PID and /proc/PID/stat of each child of self under
// proc (/proc), from the children lists the kernel keeps for each of its
// threads: a child is on the list of the thread that started it, or that
// the kernel gave it to on adoption. Reading every process's stat instead
// takes milliseconds on a quiet machine, and would be done at every
// SIGCHLD. Where the kernel keeps no such lists (CONFIG_PROC_CHILDREN), it
// yields every process; the caller checks the parent either way.
func childStats(proc string, self int) iter.Seq2[int, []byte] {
	lists, _ := filepath.Glob(proc + "/" + strconv.Itoa(self) + "/task/*/children")
	if len(lists) == 0 {
		return stats(proc)
	}
	return func(yield func(int, []byte) bool) {
		for _, list := range lists {
			b, err := os.ReadFile(list)
			if err != nil {
				continue
			}
			for f := range bytes.FieldsSeq(b) {
				pid, err := strconv.Atoi(string(f))
				if err != nil {
					continue
				}
				stat, err := os.ReadFile(proc + "/" + string(f) + "/stat")
				if err == nil && !yield(pid, stat) {
					return
				}
			}
		}
	}
}

// chainMarked reports whether the process pid under proc (/proc) carries
// the marker of any chain (MarkerEnv). An environment it cannot read,
// another user's, is taken for unmarked.
func chainMarked(proc string, pid int) bool {
	env, err := os.ReadFile(proc + "/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.HasPrefix(entry, []byte(MarkerEnv+"=")) {
			return true
		}
	}
	return false
}
