package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/creachadair/jrpc2/channel"

	"github.com/acp-conductor/acp-conductor/internal/trick"
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
	// Head holds the first bytes of the discarded line, for diagnostics.
	Head []byte
	// What the whole line said at its top level, wherever in it: its id
	// (nil if none, or not a valid one), its method, and whether it is a
	// response; so that a caller can still answer a request it had to drop,
	// or fail the call a dropped response answered.
	ID         json.RawMessage
	Method     string
	IsResponse bool
	// IDUnread says the line had an id that could not be kept, too long
	// (over 1 KiB) or none JSON-RPC allows: ID is nil, and a request is
	// answered under null, as JSON-RPC answers one whose id it cannot read.
	IDUnread bool
	// IsBatch says the line was a JSON array: a batch, of which ID,
	// Method and IsResponse say nothing. Batch then holds, in order, each
	// of its entries that is a request or a response with a valid id, so
	// that every request can still be answered and every call a dropped
	// response answered failed.
	IsBatch bool
	Batch   []OversizeEntry
	// BatchUnkept counts the requests of the batch that are not in
	// Batch: those past the first so many requests and responses (some
	// 65,000, or 1 MiB of their ids), as an over-long line may go on
	// without end and what is kept of it must not, and those whose id
	// could not be kept (see IDUnread). They can be answered only under
	// null. BatchUnkeptResponses counts its responses past those bounds,
	// whose calls cannot be told.
	BatchUnkept, BatchUnkeptResponses int
}

// An OversizeEntry is a request or a response in a batch too long to keep:
// its id, and which of the two it is.
type OversizeEntry struct {
	ID         json.RawMessage
	IsResponse bool
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
	limit int // what a line may hold: the configured limit, plus slack
	slack int
	long  []byte // scratch region for lines longer than r's buffer; see readLong
	lent  span   // r's buffer, once a line has been lent from it (see Lend)

	wmu sync.Mutex
	w   io.WriteCloser
}

var _ channel.Channel = (*LineChannel)(nil)

// headBytes is how much of an oversize line is kept for diagnostics.
const headBytes = 512

// readBufferSize is the read buffer of a channel: lines that fit are read
// with one copy.
const readBufferSize = 64 << 10

// useScratch: long lines are gathered off the heap (see readLong).
var useScratch = trick.On(trick.Scratch)

// NewLineChannel returns a channel reading lines from r and writing them to w.
// A limit <= 0 selects DefaultMaxMessageBytes.
func NewLineChannel(r io.Reader, w io.WriteCloser, limit int) *LineChannel {
	return newLineChannel(r, w, limit, readBufferSize)
}

// newLineChannel is NewLineChannel with a read buffer of size bytes (at
// least 16): the fuzz tests cross its edges with inputs of a few bytes.
func newLineChannel(r io.Reader, w io.WriteCloser, limit, size int) *LineChannel {
	if limit <= 0 {
		limit = DefaultMaxMessageBytes
	}
	return &LineChannel{r: bufio.NewReaderSize(nonblocking(r), size), limit: limit, w: w}
}

// EnvelopeOverhead is as much as relaying a message can add to it: a
// proxy/successor envelope around it and an id of the relay's own in place
// of the sender's.
const EnvelopeOverhead = 4 << 10

// AllowEnvelope makes c accept lines up to EnvelopeOverhead past its limit,
// and returns c. The limit applies to a message as its sender wrote it: a
// line from a conductor or a proxy may carry a message that was within the
// limit inside an envelope. It must be called before the first Recv.
func (c *LineChannel) AllowEnvelope() *LineChannel {
	c.slack = EnvelopeOverhead
	c.limit += c.slack
	return c
}

// Recv returns the next non-blank line, without its terminator (a newline,
// or CR LF) nor a UTF-8 byte order mark it starts with: a .NET program
// writes one ahead of its first line once Console.OutputEncoding is UTF-8,
// and the TypeScript SDK reads each line past one. The returned slice is
// owned by the caller. A line longer than the limit, not counting its
// terminator, is discarded and reported as an *OversizeError; the next
// call continues with the next line.
// A final line without a newline is returned before io.EOF.
func (c *LineChannel) Recv() ([]byte, error) {
	return c.recv(nil)
}

// recv is Recv, or Lend where reclaim is not nil.
func (c *LineChannel) recv(reclaim func()) ([]byte, error) {
	for {
		line, err := c.readLine(reclaim)
		if err != nil {
			if _, skipped := err.(*OversizeError); !skipped {
				c.long = unmapScratch(c.long) // reading is over
			}
			return nil, err
		}
		line = bytes.TrimPrefix(line, byteOrderMark)
		if !isBlank(line) {
			return line, nil
		}
	}
}

// WithNewline returns line with the newline that follows it, when line is
// one c's Recv returned and fitted the read buffer: Recv leaves its newline
// just past its end, in its capacity, where nothing writes. A relay that
// forwards such a line as it came then writes one segment, not two. It
// returns nil for any other line, and on a nil channel.
func (c *LineChannel) WithNewline(line []byte) []byte {
	if n := len(line); c != nil && cap(line) > n && line[:n+1][n] == '\n' {
		return line[:n+1]
	}
	return nil
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

// readLine reads a line, lent where reclaim is not nil (see Lend).
func (c *LineChannel) readLine(reclaim func()) ([]byte, error) {
	var frag []byte
	var err error
	if reclaim == nil {
		frag, err = c.r.ReadSlice('\n')
	} else {
		frag, err = c.lendSlice(reclaim)
	}
	switch {
	case err == nil:
		// The common case: the whole line sat in the read buffer.
		line := trimCR(frag[:len(frag)-1])
		if len(line) > c.limit {
			return nil, c.oversize(nil, frag, nil)
		}
		if reclaim != nil {
			// Its newline, or CR, lies just past its end (see WithNewline).
			return line[: len(line) : len(line)+1], nil
		}
		// The copy keeps the newline past its end (see WithNewline).
		out := make([]byte, len(line)+1)
		out[copy(out, line)] = '\n'
		return out[:len(line)], nil
	case errors.Is(err, bufio.ErrBufferFull):
		return c.readLong(frag)
	case errors.Is(err, io.EOF) && len(frag) > 0:
		line := trimCR(frag)
		if len(line) > c.limit {
			return nil, c.oversize(nil, frag, nil)
		}
		return append([]byte(nil), line...), nil
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
		if len(buf)+len(frag) > c.limit+2 { // +2: CR LF may still be in frag
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
	if line = trimCR(line); len(line) > c.limit {
		return nil, c.oversize(line, nil, nil)
	}
	out := copyOut(c.long, line)
	buf = buf[:0] // copyOut gave back what the line touched
	return out, nil
}

// scratch returns the channel's scratch buffer, empty: its mapped region,
// mapped on first use, or where mapping is not possible a heap buffer
// that grows as needed.
func (c *LineChannel) scratch() []byte {
	if c.long == nil && useScratch {
		c.long = mapScratch(c.limit + 2) // the line, and CR LF
	}
	if c.long == nil {
		return make([]byte, 0, 4*readBufferSize)
	}
	return c.long[:0]
}

// oversize skips the rest of a line that has grown past the limit and
// reports it, keeping only its first bytes and what its top level says
// (see OversizeError), which it scans for as it reads past. buf and frag
// are what was read of the line; err is the error of the last read:
// bufio.ErrBufferFull while the line goes on.
func (c *LineChannel) oversize(buf, frag []byte, err error) error {
	head := make([]byte, 0, headBytes)
	head = append(head, buf[:min(len(buf), headBytes)]...)
	head = append(head, frag[:min(len(frag), headBytes-len(head))]...)
	var scan memberScan
	scan.feed(buf)
	scan.feed(frag)
	if errors.Is(err, bufio.ErrBufferFull) {
		err = c.discardLine(&scan)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	e := &OversizeError{Limit: c.limit - c.slack, Head: head}
	if scan.batch {
		e.IsBatch, e.Batch, e.BatchUnkept, e.BatchUnkeptResponses = true, scan.entries(), scan.unkept, scan.unkeptResponses
	} else {
		e.ID, e.Method, e.IsResponse = scan.result()
		e.IDUnread = e.ID == nil && scan.hadID
	}
	return e
}

// discardLine consumes input up to and including the next newline, feeding
// it to scan.
func (c *LineChannel) discardLine(scan *memberScan) error {
	for {
		frag, err := c.r.ReadSlice('\n')
		scan.feed(frag)
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

// byteOrderMark is U+FEFF in UTF-8.
var byteOrderMark = []byte("\uFEFF")

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
