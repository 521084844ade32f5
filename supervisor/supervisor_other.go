//go:build !linux

package supervisor

import (
	"fmt"
	"os"
)

// Run is Linux-only: it relies on the parent-death signal.
func Run(args []string) int {
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2
}
