package supervisor

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
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
// and reaped by its PID.
func Adopt() (release func(), err error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return func() {}, fmt.Errorf("adopting orphaned processes: %w", err)
	}
	self := os.Getpid()
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
		killAll("/proc", adoptedKin("/proc", self))
		reapAdopted("/proc", self)
	}), nil
}

// adoptedKin returns the processes under proc (/proc) that self adopted
// and all that they started, but for chains' watchdogs: a nested
// conductor killed outright leaves its watchdog to self, and the watchdog
// must finish its sweep.
func adoptedKin(proc string, self int) []process {
	live, _ := adopted(proc, self)
	live = slices.DeleteFunc(live, func(p process) bool { return isWatchdog(proc, p.pid) })
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
	for pid, stat := range stats(proc) {
		if parentPID(stat) != self || isOurs(pid) {
			continue
		}
		switch f := statFields(stat); {
		case len(f) > 0 && string(f[0]) == "Z":
			zombies = append(zombies, pid)
		case liveUserProcess(stat):
			live = append(live, process{pid: pid, ppid: self, start: startTicks(stat)})
		}
	}
	return live, zombies
}
