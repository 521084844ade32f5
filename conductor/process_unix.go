//go:build unix && !linux

package conductor

import "syscall"

// sysProcAttr puts a component in its own process group.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
