//go:build !linux

package supervisor

// Adopt does nothing elsewhere than on Linux: orphans go to init.
func Adopt() (release func(), err error) { return func() {}, nil }

// KillAdopted does nothing elsewhere than on Linux, where nothing is
// adopted.
func KillAdopted() {}
