//go:build unix && !linux

package conductor

import (
	"fmt"
	"os"
)

// SuperviseCommand is the argument that makes the conductor's binary a
// component supervisor.
const SuperviseCommand = "component-supervisor"

// Supervise is Linux-only: it relies on the parent-death signal.
func Supervise(args []string) int {
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2
}
