package conductor

import "syscall"

// sysProcAttr puts a component in its own process group, and has the
// kernel kill it should the conductor die without a chance to stop it
// (SIGKILL). The signal comes when the thread that started it ends, which
// in a Go program is when the process does: no goroutine here locks its
// thread and exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
