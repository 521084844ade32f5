package wire

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// lendCheck reads what it is given in chunks of the sizes it cycles
// through, and fails the test if it is asked to read while a line Lend
// returned is still held: the one thing a lender promises.
type lendCheck struct {
	t      *testing.T
	data   []byte
	chunks []int
	reads  int

	ch   *LineChannel
	held [][2][]byte // lent lines not yet reclaimed, and what they said
}

func (r *lendCheck) Read(p []byte) (int, error) {
	if len(r.held) > 0 {
		r.t.Fatalf("read %d with %d lent lines not reclaimed", r.reads, len(r.held))
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), max(1, r.chunks[r.reads%len(r.chunks)]))
	r.reads++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// reclaim checks that every line lent since the last one still says what it
// said when it was lent: the buffer has not been touched under it.
func (r *lendCheck) reclaim() {
	for _, h := range r.held {
		if !bytes.Equal(h[0], h[1]) {
			r.t.Fatalf("lent line %q changed to %q before its reclaim", h[1], h[0])
		}
	}
	r.held = r.held[:0]
}

// lendAll reads every line of data through Lend, from a channel whose read
// buffer holds size bytes, checking each lent line as lendCheck does, and
// returns them, copied, oversize lines as "<oversize>".
func lendAll(t *testing.T, data []byte, limit, size int, chunks ...int) []string {
	r := &lendCheck{t: t, data: data, chunks: chunks}
	r.ch = newLineChannel(r, nopWriteCloser{io.Discard}, limit, size)
	got := readLines(t, len(data)+2, func() ([]byte, error) { return r.ch.Lend(r.reclaim) }, func(line []byte) {
		if r.ch.Lends(line) {
			if end := line[:len(line)+1][len(line)]; end != '\n' && end != '\r' {
				t.Fatalf("lent line %q is followed by %q, not its line's end", line, end)
			}
			r.held = append(r.held, [2][]byte{line, bytes.Clone(line)})
		}
	})
	r.reclaim()
	return got
}

// TestLend: lent lines are the lines Recv returns, and the channel reads
// only once every lent line has been reclaimed, whatever sizes its reads
// come in; lines longer than its buffer are copies.
func TestLend(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := range 3000 {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"seq":%d}}`, i)
		switch i % 500 {
		case 7:
			line = strings.Repeat("L", readBufferSize+i) // longer than the buffer
		case 8:
			in.WriteString(" \t\n") // blank lines are skipped
		}
		if i%3 == 0 {
			in.WriteString(line + "\r\n")
		} else {
			in.WriteString(line + "\n")
		}
		want = append(want, line)
	}
	for _, chunks := range [][]int{{1 << 20}, {37}, {1, 2, 3, 5000}, {readBufferSize - 1, 10}} {
		got := lendAll(t, []byte(in.String()), 1<<20, readBufferSize, chunks...)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("reads of %v: lent lines differ from the input", chunks)
		}
	}

	// A line read as a copy is not lent; one Recv returns is never.
	ch := NewLineChannel(strings.NewReader("short\n"+strings.Repeat("x", readBufferSize+1)+"\nlast"), nopWriteCloser{io.Discard}, 1<<20)
	for i, lent := range []bool{true, false, false} {
		line, err := ch.Lend(func() {})
		if err != nil || ch.Lends(line) != lent {
			t.Errorf("line %d: Lends %v, err %v; want %v", i, ch.Lends(line), err, lent)
		}
	}
	if ch := NewLineChannel(strings.NewReader("a\n"), nopWriteCloser{io.Discard}, 0); ch.Lends(must(ch.Recv())) {
		t.Error("Recv's line is lent")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// FuzzLend is FuzzLineChannel's check for Lend, with reads in chunks of
// every size, and lendCheck's.
func FuzzLend(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nccc"), 2, 1, 0)
	f.Add([]byte(strings.Repeat("x", 40)+"\ny\n"), 32, 7, 0)
	f.Add([]byte("ab\r\nabc\r\nab\r"), 2, 3, 0)
	f.Add([]byte(strings.Repeat("x", 40)+"\r\n"+strings.Repeat("y", 41)+"\r\nz"), 40, 15, 1)
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk, size int) {
		if limit <= 0 || limit > 1<<20 {
			return
		}
		got := lendAll(t, data, limit, fuzzBufferSize(size), chunk, chunk/3+1)
		var want []string
		for _, l := range bytes.Split(data, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if len(bytes.TrimLeft(l, " \t\r")) > 0 && len(l) <= limit {
				want = append(want, string(l))
			}
		}
		got = slicesDelete(got, "<oversize>")
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("got %q\nwant %q", got, want)
		}
	})
}

func slicesDelete(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// TestOwn: a message made to own its line reads as a fresh parse of it,
// once the memory it was parsed from is overwritten.
func TestOwn(t *testing.T) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"session/prompt","params":{"prompt":[]},"x-extra":[1]}`,
		`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":7,"error":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/update","params":{"a":1},"x":2}}`,
		`{"jsonrpc":"2.0","method":"_proxy/successor","params":{"params":{"b":[1]},"method":"m","_meta":{}}}`,
		`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a"},"params":{"method":"b"}}`,
	} {
		checkOwn(t, []byte(s))
	}
}

func FuzzOwn(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"m","params":[1]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{},"x":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOwn(t, data)
	})
}

func checkOwn(t *testing.T, data []byte) {
	t.Helper()
	buf := bytes.Clone(data)
	m, err := Parse(buf)
	if err != nil {
		return
	}
	m.Own()
	for i := range buf {
		buf[i] = '#'
	}
	want, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, exp := describe(m), describe(want); got != exp {
		t.Fatalf("owned:\n%s\nfresh:\n%s", got, exp)
	}
	if cap(m.Raw) <= len(m.Raw) {
		t.Errorf("owned line has no room for its newline")
	}
}

// describe says everything a relay reads of m.
func describe(m *Message) string {
	method, inner, err := m.Unwrap()
	return fmt.Sprintf("raw %s\nid %s method %q params %s result %s error %s\nplain %v extra %v malformed %v\nextra %s carried %v %s\nunwrap %q %s %v",
		m.Raw, m.ID, m.Method, m.Params, m.Result, m.Error,
		m.Plain(), m.Extra(), m.MalformedError(),
		m.AppendExtra(nil), m.CarriedExtra(), m.AppendCarriedExtra(nil),
		method, inner, err)
}
