//go:build !linux

package supervisor

import (
	"fmt"
	"os"
)

// RunChain is Linux-only: it relies on the parent-death signal and on
// child subreapers.
func RunChain() int {
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2
}
