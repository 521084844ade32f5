//go:build !linux

package transport

import "time"

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's.
func setUserTimeout(uintptr, time.Duration) error { return nil }
