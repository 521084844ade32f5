//go:build unix

package supervisor

import (
	"os"
	"os/exec"
	"strconv"

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

// retire ends a chain's watchdog once the conductor has stopped the chain
// itself: it kills the watchdog, if launched (cmd not nil), before closing
// pipe, whose end would set it killing, closes r, the read end, if the
// watchdog never took it, and reaps the watchdog, so that no process of
// the chain, nor a zombie of one, outlives the conductor's Run (serve
// outlives its chains). At nice 19 on a busy machine the killed watchdog
// may take a few milliseconds to be scheduled and die; that wait is not
// bounded, as the conductor's reap of its killed components is not: a
// SIGKILL cannot be ignored.
func retire(cmd *exec.Cmd, pipe, r *os.File) {
	if cmd != nil {
		_ = cmd.Process.Kill() // not yet reaped: its PID is still its own
	}
	pipe.Close()
	if r != nil {
		r.Close()
	}
	if cmd != nil {
		_ = Wait(cmd)
	}
}
