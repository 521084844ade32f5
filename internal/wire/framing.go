package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/creachadair/jrpc2/channel"
)

// DefaultMaxMessageBytes bounds one line. The official ACP SDKs cap lines at
// 10 to 32 MiB depending on SDK and version (the TypeScript SDK 2.4 at 32 MiB);
// the conductor must pass anything they can send, so its default sits above
// all of them.
const DefaultMaxMessageBytes = 64 << 20

// An OversizeError reports a line longer than the channel's limit. The line
// has been read past and discarded; the channel remains usable.
type OversizeError struct {
	Limit int
	// Head holds the first bytes of the discarded line, so that a caller can
	// still recover an id and answer a request it had to drop.
	Head []byte
}

func (e *OversizeError) Error() string {
	return fmt.Sprintf("message exceeds %d bytes", e.Limit)
}

// LineChannel is a channel.Channel that frames records as lines: each record
// is one line of JSON without embedded newlines, as ACP's stdio transport
// requires. Recv skips blank lines and never buffers more than the limit of
// one line.
type LineChannel struct {
	r     *bufio.Reader
	limit int
	long  []byte // scratch region for lines longer than r's buffer; see readLong

	wmu sync.Mutex
	w   io.WriteCloser
}

var _ channel.Channel = (*LineChannel)(nil)

// headBytes is how much of an oversize line is kept for diagnostics.
const headBytes = 512

// readBufferSize is the read buffer of a channel: lines that fit are read
// with one copy.
const readBufferSize = 64 << 10

// NewLineChannel returns a channel reading lines from r and writing them to w.
// A limit <= 0 selects DefaultMaxMessageBytes.
func NewLineChannel(r io.Reader, w io.WriteCloser, limit int) *LineChannel {
	if limit <= 0 {
		limit = DefaultMaxMessageBytes
	}
	return &LineChannel{r: bufio.NewReaderSize(r, readBufferSize), limit: limit, w: w}
}

// Recv returns the next non-blank line, without its terminator. The returned
// slice is owned by the caller. A line longer than the limit is discarded and
// reported as an *OversizeError; the next call continues with the next line.
// A final line without a newline is returned before io.EOF.
func (c *LineChannel) Recv() ([]byte, error) {
	for {
		line, err := c.readLine()
		if err != nil {
			if _, skipped := err.(*OversizeError); !skipped {
				c.long = unmapScratch(c.long) // reading is over
			}
			return nil, err
		}
		if !isBlank(line) {
			return line, nil
		}
	}
}

// More reports whether a whole line is already buffered, so that the next
// Recv returns without a system call. A reader uses it to hold back its
// writes while a burst it read at once is still being handled.
func (c *LineChannel) More() bool {
	n := c.r.Buffered()
	if n == 0 {
		return false
	}
	buf, _ := c.r.Peek(n) // never reads: n bytes are buffered
	return bytes.IndexByte(buf, '\n') >= 0
}

func (c *LineChannel) readLine() ([]byte, error) {
	frag, err := c.r.ReadSlice('\n')
	switch {
	case err == nil && len(frag)-1 > c.limit:
		return nil, c.oversize(nil, frag, nil)
	case err == nil:
		// The common case: the whole line sat in the read buffer.
		return trimCR(append(make([]byte, 0, len(frag)-1), frag[:len(frag)-1]...)), nil
	case errors.Is(err, bufio.ErrBufferFull):
		return c.readLong(frag)
	case errors.Is(err, io.EOF) && len(frag) > 0:
		if len(frag) > c.limit {
			return nil, c.oversize(nil, frag, nil)
		}
		return trimCR(append([]byte(nil), frag...)), nil
	default:
		return nil, err
	}
}

// readLong reads a line longer than the read buffer, whose first fragment
// is frag. The fragments are gathered in the channel's scratch region,
// mapped outside the Go heap, and the line is copied out of it once, at
// its final size: one allocation whatever its length. What a long line
// touched beyond the first MiB of the region goes back to the system as it
// is copied out, rather than when the collector gets to it: a 16 MiB line
// never holds 32 MiB.
func (c *LineChannel) readLong(frag []byte) ([]byte, error) {
	buf := c.scratch()
	defer func() { c.long = keepScratch(c.long, len(buf)) }()
	for {
		if len(buf)+len(frag) > c.limit+1 { // +1: the newline may still be in frag
			var err error
			if len(frag) == 0 || frag[len(frag)-1] != '\n' {
				err = bufio.ErrBufferFull
			}
			return nil, c.oversize(buf, frag, err)
		}
		buf = append(buf, frag...) // a mapped region has room for the whole line
		if len(frag) > 0 && frag[len(frag)-1] == '\n' {
			break
		}
		var err error
		frag, err = c.r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if !errors.Is(err, io.EOF) {
				return nil, err
			}
			if len(frag) == 0 {
				break // a last line without its newline
			}
		}
	}
	line := buf
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line) > c.limit {
		return nil, &OversizeError{Limit: c.limit, Head: append([]byte(nil), line[:min(len(line), headBytes)]...)}
	}
	out := copyOut(c.long, line)
	buf = buf[:0] // copyOut gave back what the line touched
	return trimCR(out), nil
}

// scratch returns the channel's scratch buffer, empty: its mapped region,
// mapped on first use, or where mapping is not possible a heap buffer
// that grows as needed.
func (c *LineChannel) scratch() []byte {
	if c.long == nil {
		c.long = mapScratch(c.limit + 1)
	}
	if c.long == nil {
		return make([]byte, 0, 4*readBufferSize)
	}
	return c.long[:0]
}

// oversize skips the rest of a line that has grown past the limit and
// reports it, keeping only its first bytes. err is the error of the last
// read: bufio.ErrBufferFull while the line goes on.
func (c *LineChannel) oversize(buf, frag []byte, err error) error {
	head := make([]byte, 0, headBytes)
	head = append(head, buf[:min(len(buf), headBytes)]...)
	head = append(head, frag[:min(len(frag), headBytes-len(head))]...)
	if errors.Is(err, bufio.ErrBufferFull) {
		err = c.discardLine()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return &OversizeError{Limit: c.limit, Head: head}
}

// discardLine consumes input up to and including the next newline.
func (c *LineChannel) discardLine() error {
	for {
		_, err := c.r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// Send writes rec followed by a newline as one write, so concurrent records
// never interleave.
func (c *LineChannel) Send(rec []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w == nil {
		return channel.ErrClosed
	}
	_, err := c.w.Write(append(rec, '\n'))
	return err
}

// SendBuffers writes records that each already end in a newline, in order,
// with as few system calls as the writer allows.
func (c *LineChannel) SendBuffers(recs *net.Buffers) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w == nil {
		return channel.ErrClosed
	}
	_, err := recs.WriteTo(c.w)
	return err
}

// Close closes the writing side. Reading continues until the peer's EOF.
func (c *LineChannel) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.w == nil {
		return nil
	}
	err := c.w.Close()
	c.w = nil
	return err
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
