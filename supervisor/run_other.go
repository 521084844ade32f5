//go:build !linux

package supervisor

import (
	"fmt"
	"os"
)

// Run recognises the watchdog's command lines, which are Linux's:
// elsewhere the watchdog is a shell alone (groupWaiter).
func Run(args []string) (status int, ok bool) {
	if len(args) < 1 || args[0] != Command {
		return 0, false
	}
	fmt.Fprintln(os.Stderr, "component-supervisor: only supported on Linux")
	return 2, true
}
