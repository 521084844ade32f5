//go:build unix

package conductor

import (
	"os"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Stdin returns the process's standard input as a file that Close can
// interrupt, for Run's in: with a pipe or socket put in non-blocking mode,
// Go's poller owns the descriptor, so Run can unblock its reader when it
// stops. A terminal is left as it is: its mode is shared with the shell.
func Stdin() *os.File { return wire.Pollable(os.Stdin, 0, "stdin") }

// Stdout is Stdin's counterpart for Run's out: at shutdown, Run closes it
// after a bounded wait, rather than hang on an editor that stopped reading.
func Stdout() *os.File { return wire.Pollable(os.Stdout, 1, "stdout") }
