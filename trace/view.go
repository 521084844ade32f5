package trace

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// The viewer: a page, its style and its script, put together into one
// file with the events, so that it needs nothing from the network.
var (
	//go:embed viewer/viewer.html
	viewerHTML string
	//go:embed viewer/viewer.css
	viewerCSS string
	//go:embed viewer/viewer.js
	viewerJS string
)

// csp keeps the page from loading anything at all from elsewhere; a live
// page may reach back to the server it came from, for its event stream.
func csp(live bool) string {
	const page = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
	if live {
		return page + "; connect-src 'self'"
	}
	return page
}

// ViewOptions adjust a rendered viewer.
type ViewOptions struct {
	Title string // shown in the page's title and header
	// Live, if set, is the URL (relative to the page) of a server-sent
	// event stream of further events.
	Live string
}

// View writes one self-contained HTML page that shows events (each one
// JSON event, as ReadEvents returns them) as a sequence diagram.
func View(w io.Writer, events [][]byte, opts ViewOptions) error {
	if opts.Title == "" {
		opts.Title = "ACP trace"
	}
	live, _ := json.Marshal(opts.Live)
	var out bytes.Buffer
	json.HTMLEscape(&out, live)
	// The data goes in apart, so that nothing in it is replaced, and its
	// slot is found before the title goes in, which may hold anything.
	head, tail, ok := strings.Cut(viewerHTML, "{{DATA}}")
	if !ok {
		return errors.New("trace: viewer template has no data slot")
	}
	fill := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(opts.Title),
		"{{CSP}}", csp(opts.Live != ""),
		"{{CSS}}", viewerCSS,
		"{{JS}}", viewerJS,
		"{{LIVE}}", out.String(),
	)
	head, tail = fill.Replace(head), fill.Replace(tail)
	// The events are written one by one rather than gathered first: a
	// live page holds the whole history (up to 64 MiB), and each viewer
	// loading it at once held a copy of it, and another as the copy grew.
	bw := bufio.NewWriter(w)
	bw.WriteString(head)
	bw.WriteByte('[')
	var escaped bytes.Buffer
	for i, e := range events {
		if i > 0 {
			bw.WriteByte(',')
		}
		// HTMLEscape keeps "</script>" in a message from ending the script.
		escaped.Reset()
		json.HTMLEscape(&escaped, e)
		bw.Write(escaped.Bytes())
	}
	bw.WriteByte(']')
	bw.WriteString(tail)
	return bw.Flush()
}

// MaxEventBytes bounds one line of a trace file that ReadEvents accepts.
const MaxEventBytes = 256 << 20

// maxEventBytes is MaxEventBytes, a variable for tests.
var maxEventBytes = MaxEventBytes

// ErrCutShort says that a trace's last line is not a whole event and no
// newline ends it: the chain was writing it (the recorder writes in
// batches, which may end mid-line), or was killed while it did. That is
// the trace of a chain still running or of one that crashed, which is
// when it is wanted; ReadEvents returns the events before that line with
// this error, wrapped.
var ErrCutShort = errors.New("the last line is cut short (the chain was still writing it, or stopped while it did)")

// ReadEvents reads a trace: one JSON object per line, blank lines ignored.
// A line that is not a JSON object with a "type" is an error naming its
// line number, but for a last line with no newline, which ends the events
// with ErrCutShort.
func ReadEvents(r io.Reader) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	unended := false // the line scanned ends the input, with no newline
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		unended = atEOF && token != nil && advance == len(data) && data[len(data)-1] != '\n'
		return advance, token, err
	})
	var events [][]byte
	n := 1
	for ; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' || !json.Valid(line) {
			if unended {
				return events, fmt.Errorf("line %d: %w", n, ErrCutShort)
			}
			return nil, fmt.Errorf("line %d: not a JSON trace event", n)
		}
		// Every event has a type; a JSON Lines file of another kind (a
		// transcript, a log) has none, and would draw as an empty page.
		// The key is matched exactly: decoding into a struct would take
		// "TYPE" too, which the viewer does not read.
		var typ string
		if json.Unmarshal(wire.Member(line, "type"), &typ) != nil || typ == "" {
			return nil, fmt.Errorf("line %d: not a JSON trace event: it has no \"type\" string", n)
		}
		events = append(events, append([]byte(nil), line...))
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		// A message as long as max_message_bytes allows, set that high.
		return nil, fmt.Errorf("line %d: longer than %d bytes, the most an event may be: %w", n, maxEventBytes, err)
	} else if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	return events, nil
}
