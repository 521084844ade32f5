package wire

import (
	"bufio"
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

	wmu sync.Mutex
	w   io.WriteCloser
}

var _ channel.Channel = (*LineChannel)(nil)

// headBytes is how much of an oversize line is kept for diagnostics.
const headBytes = 512

// NewLineChannel returns a channel reading lines from r and writing them to w.
// A limit <= 0 selects DefaultMaxMessageBytes.
func NewLineChannel(r io.Reader, w io.WriteCloser, limit int) *LineChannel {
	if limit <= 0 {
		limit = DefaultMaxMessageBytes
	}
	return &LineChannel{r: bufio.NewReaderSize(r, 64<<10), limit: limit, w: w}
}

// Recv returns the next non-blank line, without its terminator. The returned
// slice is owned by the caller. A line longer than the limit is discarded and
// reported as an *OversizeError; the next call continues with the next line.
// A final line without a newline is returned before io.EOF.
func (c *LineChannel) Recv() ([]byte, error) {
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, err
		}
		if !isBlank(line) {
			return line, nil
		}
	}
}

func (c *LineChannel) readLine() ([]byte, error) {
	var buf []byte
	for {
		frag, err := c.r.ReadSlice('\n')
		content := frag
		if err == nil {
			content = frag[:len(frag)-1]
		}
		if len(buf)+len(content) > c.limit {
			return nil, c.oversize(buf, frag, err)
		}
		switch {
		case err == nil && buf == nil:
			// The common case: the whole line sat in the buffer.
			return trimCR(append(make([]byte, 0, len(content)), content...)), nil
		case err == nil:
			return trimCR(append(buf, content...)), nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, frag...)
		case errors.Is(err, io.EOF):
			if len(buf)+len(frag) == 0 {
				return nil, io.EOF
			}
			return trimCR(append(buf, frag...)), nil
		default:
			return nil, err
		}
	}
}

// oversize skips the rest of a line that has grown past the limit and
// reports it, keeping only its first bytes.
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
