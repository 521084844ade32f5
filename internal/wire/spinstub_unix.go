//go:build unix && !linux

package wire

// Readers never spin here (see spin_linux.go): spin is always nil.
type spinner struct{}

var spin *spinner

func (*spinner) add(*nonblockReader)            {}
func (*spinner) remove(*nonblockReader)         {}
func (*spinner) wait(*nonblockReader, int) bool { return false }
func (*spinner) parked(*nonblockReader)         {}
func (*spinner) woken(*nonblockReader)          {}
