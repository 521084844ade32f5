package conductor

import "syscall"

// sysProcAttr puts a component in its own process group, and has the kernel
// signal it if the conductor dies without a chance to stop it (SIGKILL): a
// supervisor gets SIGTERM, which it handles by killing its group; a bare
// component gets SIGKILL.
func sysProcAttr(supervised bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if supervised {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}
