package conductor

import (
	"os"

	"golang.org/x/sys/unix"
)

// unread returns how many bytes wait unread in f, a pipe, and whether it
// could tell (TIOCINQ is Linux's FIONREAD). It goes through SyscallConn,
// which leaves f in the poller, where Fd would make it blocking.
func unread(f *os.File) (n int, ok bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, false
	}
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { n, ioctlErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ioctlErr != nil {
		return 0, false
	}
	return n, true
}
