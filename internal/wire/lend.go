package wire

import (
	"bytes"
	"unsafe"
)

// Lending. A relay that passes a line on as it came need not copy it out of
// the read buffer: it can write it from there, as long as nothing still
// holds it when the buffer is next refilled. Lend returns such lines, and
// calls back before each refill so that the relay can take back what it
// lent: wait for a write of them under way, copy those still queued.
// Copying each line cost the relay more than a tenth of its CPU per
// streamed update, most of it in touching fresh memory rather than the
// buffer that is already in cache (bench/README.md).

// A span is where a read buffer lies in memory. The Go heap does not move
// what it allocates, so the addresses stay put while the buffer lives.
type span struct{ lo, hi uintptr }

func (s span) holds(b []byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return len(b) > 0 && p >= s.lo && p < s.hi
}

// Lend is Recv, except that the line returned lies in c's read buffer,
// with its newline just past its end. Before c next reads its input, which
// overwrites that buffer, it calls reclaim, which must leave no one holding
// or writing any line Lend returned, or any part of one. A line longer than
// the buffer is returned as Recv returns it, a copy of its own.
func (c *LineChannel) Lend(reclaim func()) ([]byte, error) {
	return c.recv(reclaim)
}

// Lends reports whether b lies in c's read buffer: a line Lend returned, or
// part of one.
func (c *LineChannel) Lends(b []byte) bool {
	return c != nil && c.lent.holds(b)
}

// lendSlice is bufio.Reader.ReadSlice for Lend: a line already buffered is
// taken without a read, and reclaim is called before any read.
func (c *LineChannel) lendSlice(reclaim func()) ([]byte, error) {
	buf, _ := c.r.Peek(c.r.Buffered()) // never reads
	if c.lent.hi == 0 {
		// bufio's slices, even empty ones, run to the end of its buffer,
		// which is Size long.
		c.lent.hi = uintptr(unsafe.Pointer(unsafe.SliceData(buf))) + uintptr(cap(buf))
		c.lent.lo = c.lent.hi - uintptr(c.r.Size())
	}
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		c.r.Discard(i + 1)
		return buf[:i+1], nil
	}
	reclaim()
	return c.r.ReadSlice('\n')
}

// Own makes m independent of the memory it was parsed from, such as a line
// Lend returned: it copies Raw and points every field that lay in Raw at the
// same bytes of the copy.
func (m *Message) Own() {
	old := m.Raw
	raw := make([]byte, len(old), len(old)+1) // room for a newline, as Recv's
	copy(raw, old)
	m.ID, m.Params = Moved(old, raw, m.ID), Moved(old, raw, m.Params)
	m.Result, m.Error = Moved(old, raw, m.Result), Moved(old, raw, m.Error)
	if m.env.of != nil {
		m.env.of = &raw[offset(old, unsafe.Pointer(m.env.of))]
	}
	m.Raw = raw
}

// Moved returns the bytes of to that lie where s lies in from, which must
// hold s (nil stays nil): where a slice of a line lies in its copy.
func Moved(from, to, s []byte) []byte {
	if s == nil {
		return nil
	}
	i := offset(from, unsafe.Pointer(unsafe.SliceData(s)))
	return to[i : i+len(s) : i+len(s)]
}

// offset returns where p lies in b; it panics if p lies outside it.
func offset(b []byte, p unsafe.Pointer) int {
	i := int(uintptr(p) - uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	if i < 0 || i > len(b) {
		panic("wire: a slice moved from outside its line")
	}
	return i
}
