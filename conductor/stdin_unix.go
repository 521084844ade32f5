//go:build unix

package conductor

import (
	"os"
	"syscall"
)

// Stdin returns the process's standard input as a file that
// Close can interrupt: with the descriptor in non-blocking mode, Go's
// poller owns it, so Run can unblock its reader when it stops.
func Stdin() (*os.File, error) {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin, err
	}
	return os.NewFile(0, "stdin"), nil
}
