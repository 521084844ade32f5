package conductor

import "syscall"

// sysProcAttr puts a component started without a supervisor in its own
// process group, and has the kernel kill it if the conductor dies without
// a chance to stop it (SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
