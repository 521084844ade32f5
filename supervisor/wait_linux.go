package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once pid, a child not yet reaped, has exited, waiting
// in Go's poller on a pidfd, which becomes readable then (Linux 5.10 and
// later), and reports whether it did. os/exec's Wait blocks a thread in
// waitid(2) for as long as the child runs, one per component, and a serve
// running many chains would hold as many threads; after this the waitid
// returns at once. Where pidfds cannot be polled it returns false at once,
// and the wait blocks as before.
func awaitExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		if errors.Is(err, unix.EINTR) {
			return false
		}
		exited = err == nil && n > 0
		return exited || err != nil
	})
	return err == nil && exited
}
