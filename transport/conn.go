package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// A Conn is one ACP connection: a full-duplex sequence of JSON-RPC messages.
type Conn interface {
	// Read returns the next message from the peer, compact JSON without a
	// trailing newline. It returns io.EOF when the peer ended the
	// connection cleanly, and another error when it was lost.
	Read(ctx context.Context) ([]byte, error)
	// Write sends one message. msg must not contain a newline.
	Write(ctx context.Context, msg []byte) error
	// Close ends the connection. It is safe to call more than once.
	Close() error
}

// ErrClosed is returned by the methods of a Conn that was closed.
var ErrClosed = errors.New("transport: connection closed")

// compact returns msg as one line: compacted when it is JSON, and with any
// line break replaced by a space when it is not, so that the receiver's
// parser reports the bad message rather than two broken lines.
func compact(msg []byte) []byte {
	if bytes.IndexByte(msg, '\n') < 0 && bytes.IndexByte(msg, '\r') < 0 {
		return msg
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err == nil {
		return buf.Bytes()
	}
	out := bytes.ReplaceAll(msg, []byte("\n"), []byte(" "))
	return bytes.ReplaceAll(out, []byte("\r"), []byte(" "))
}

// sessionOf returns the sessionId member of an object, or "". Its name is
// read as every SDK reads it, escapes decoded and the last of repeated
// names counting, so that the stream a message goes to is that of the
// session its reader sees.
func sessionOf(obj json.RawMessage) string {
	var id string
	if v := wire.Member(obj, "sessionId"); len(v) > 0 && v[0] == '"' {
		_ = json.Unmarshal(v, &id)
	}
	return id
}

// protocolVersionOf returns the protocolVersion member of an initialize
// result as header text: a number as written, a string unquoted; "" if none.
func protocolVersionOf(result json.RawMessage) string {
	v := wire.Member(result, "protocolVersion")
	switch {
	case len(v) == 0:
		return ""
	case v[0] == '"':
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		return string(v)
	}
	return ""
}

// idKey is a message id as a map key: its JSON text, compacted.
func idKey(id json.RawMessage) string { return string(compact(id)) }

// Lines adapts c to the stdio transport: r yields each message from c as a
// line, and each line written to w goes to c as one message. Closing r stops
// a pending read; closing w closes c. ctx bounds every operation.
func Lines(ctx context.Context, c Conn) (r io.ReadCloser, w io.WriteCloser) {
	ctx, cancel := context.WithCancel(ctx)
	return &lineReader{ctx: ctx, cancel: cancel, c: c}, &lineWriter{ctx: ctx, c: c}
}

type lineReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	c      Conn
	buf    []byte // what is left of the current line
}

func (r *lineReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		msg, err := r.c.Read(r.ctx)
		if err != nil {
			if r.ctx.Err() != nil {
				return 0, io.EOF
			}
			return 0, err
		}
		r.buf = append(compact(msg), '\n')
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *lineReader) Close() error { r.cancel(); return nil }

type lineWriter struct {
	ctx context.Context
	c   Conn

	mu      sync.Mutex
	partial []byte // the start of a line whose newline has not come yet
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
			w.partial = nil
		}
		p = p[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := w.c.Write(w.ctx, line); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

func (w *lineWriter) Close() error { return w.c.Close() }
