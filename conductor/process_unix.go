//go:build unix && !linux

package conductor

import "syscall"

// sysProcAttr puts a component in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
