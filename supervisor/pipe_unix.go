//go:build unix

package supervisor

import (
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// shell waits for the end of the conductor's pipe, if the system has it;
// without it, on Linux, the watchdog is the conductor's binary from the
// start. Tests replace it.
var shell = "/bin/sh"

// shellName is the waiting shell's $0, by which a process list shows it,
// and Snapshot tells it from what a component started.
const shellName = "acp-conductor " + Command

// tell writes one line to the watchdog's pipe: op and n. A pipe write of
// this size is atomic, and never waits: should the watchdog not have read
// 64 KiB of these yet, the line is lost.
func tell(pipe *os.File, op byte, n uint64) {
	msg := strconv.AppendUint([]byte{op}, n, 10)
	msg = append(msg, '\n')
	rc, err := pipe.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Write(func(fd uintptr) bool {
		_, _ = unix.Write(int(fd), msg)
		return true
	})
}

// killed holds the watchdogs killed and not yet reaped.
var killed struct {
	sync.Mutex
	pids []int
}

// retire ends a chain's watchdog once the conductor has stopped the chain
// itself: it kills the watchdog pid, if launched (not 0), before closing
// pipe, whose end would set it killing, and closes r, the read end, if the
// watchdog never took it. It does not wait for the watchdog to end: at its
// priority, on a busy machine, that can take a while. It is reaped by the
// next New or Close, or by init once the conductor has exited.
func retire(pid int, pipe, r *os.File) {
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL) // its PID is ours until reaped
		killed.Lock()
		killed.pids = append(killed.pids, pid)
		killed.Unlock()
	}
	pipe.Close()
	if r != nil {
		r.Close()
	}
	reap()
}

// reap reaps the watchdogs that have ended since they were killed.
func reap() {
	killed.Lock()
	defer killed.Unlock()
	left := killed.pids[:0]
	for _, pid := range killed.pids {
		if got, err := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); got == 0 && err == nil {
			left = append(left, pid) // not yet ended
		} else {
			forget(pid)
		}
	}
	killed.pids = left
}
