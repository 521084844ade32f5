package supervisor

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once pid, a child not yet reaped, has exited, waiting
// in Go's poller on a pidfd, which becomes readable then (Linux 5.10 and
// later). os/exec's Wait blocks a thread in waitid(2) for as long as the
// child runs, one per component, and a serve running many chains would
// hold as many threads; after this the waitid returns at once. Where
// pidfds cannot be polled it returns at once, and the wait blocks as
// before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		if errors.Is(err, unix.EINTR) {
			return false
		}
		return err != nil || n > 0 // exited, or waitid will say what is wrong
	})
}
