//go:build !unix

package conductor

// The conductor runs each component in a process group of its own and stops
// it with signals, which only Unix systems have.
import _ "github.com/acp-conductor/acp-conductor/internal/unixonly"
