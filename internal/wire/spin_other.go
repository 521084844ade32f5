//go:build !linux

package wire

import "time"

// EnableSpin reports false: spinning before a wait needs the raw reads of
// Linux (see spin_linux.go).
func EnableSpin(time.Duration) bool { return false }
