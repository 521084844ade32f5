package wire

// TryWriterOf returns ch's function that writes without blocking (see
// LineChannel.TryWriter), or nil where ch has none: a channel of another
// kind, a writer that is not a non-blocking file, or a platform without
// the system calls it takes.
func TryWriterOf(ch any) func(segs [][]byte) ([][]byte, error) {
	if t, ok := ch.(interface {
		TryWriter() func([][]byte) ([][]byte, error)
	}); ok {
		return t.TryWriter()
	}
	return nil
}
