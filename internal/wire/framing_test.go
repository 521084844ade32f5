package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestLineChannelRecv(t *testing.T) {
	in := "first\n\n  \r\nsecond\r\n" + strings.Repeat("x", 100) + "\nthird\n" + strings.Repeat("y", 11) + "\nlast-without-newline"
	ch := NewLineChannel(strings.NewReader(in), nopWriteCloser{io.Discard}, 100)
	got := readLines(t, len(in)+2, ch.Recv, nil)
	want := []string{"first", "second", strings.Repeat("x", 100), "third", strings.Repeat("y", 11), "last-without-newline"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestLineChannelByteOrderMark checks that a UTF-8 byte order mark that
// starts a line is not part of it, in a line that fits the read buffer and
// in one that does not, and that a line of a mark alone counts as blank.
func TestLineChannelByteOrderMark(t *testing.T) {
	long := strings.Repeat("x", 100)
	in := "\uFEFFfirst\n\uFEFF\r\nsecond\uFEFF\n\uFEFF" + long + "\n"
	ch := newLineChannel(strings.NewReader(in), nopWriteCloser{io.Discard}, 200, 16)
	var newlines []string
	got := readLines(t, 5, ch.Recv, func(line []byte) { newlines = append(newlines, string(ch.WithNewline(line))) })
	if want := []string{"first", "second\uFEFF", long}; !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if newlines[0] != "first\n" {
		t.Errorf("WithNewline of the first line is %q, want it with its newline", newlines[0])
	}
}

// readLines reads lines with next until io.EOF, at most n times, and
// returns them as strings, oversize lines as "<oversize>"; seen, if not
// nil, is shown each line as it was returned.
func readLines(t *testing.T, n int, next func() ([]byte, error), seen func([]byte)) []string {
	t.Helper()
	var got []string
	for range n {
		line, err := next()
		if _, ok := errors.AsType[*OversizeError](err); ok {
			got = append(got, "<oversize>")
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if seen != nil {
			seen(line)
		}
		got = append(got, string(line))
	}
	return got
}

// TestLineChannelOversize checks that a line over the limit is skipped
// without being buffered and that the channel goes on.
func TestLineChannelOversize(t *testing.T) {
	const limit = 1 << 10
	big := `{"id":42,"method":"x","params":"` + strings.Repeat("z", 1<<20) + `"}`
	in := "small\n" + big + "\nafter\n"
	ch := NewLineChannel(strings.NewReader(in), nopWriteCloser{io.Discard}, limit)
	if l, _ := ch.Recv(); string(l) != "small" {
		t.Fatalf("got %q", l)
	}
	_, err := ch.Recv()
	var oe *OversizeError
	if !errors.As(err, &oe) {
		t.Fatalf("want OversizeError, got %v", err)
	}
	if !bytes.HasPrefix(oe.Head, []byte(`{"id":42,`)) || len(oe.Head) > headBytes {
		t.Errorf("head = %.40q (len %d)", oe.Head, len(oe.Head))
	}
	if l, err := ch.Recv(); string(l) != "after" {
		t.Fatalf("after oversize: %q, %v", l, err)
	}
	// A line of exactly the limit is delivered whole.
	exact := strings.Repeat("e", limit)
	ch = NewLineChannel(strings.NewReader(exact+"\n"), nopWriteCloser{io.Discard}, limit)
	if l, err := ch.Recv(); string(l) != exact {
		t.Fatalf("line at the limit: len %d, %v", len(l), err)
	}
}

// TestLineChannelCRLFAtLimit: a line of exactly the limit, ended by CR LF,
// is delivered; its terminator does not count. Both when it fits the read
// buffer and when it is read in pieces.
func TestLineChannelCRLFAtLimit(t *testing.T) {
	for _, limit := range []int{100, 3 * readBufferSize} {
		exact := strings.Repeat("c", limit)
		ch := NewLineChannel(strings.NewReader(exact+"\r\n"+exact+"c\r\nafter\r\n"), nopWriteCloser{io.Discard}, limit)
		if l, err := ch.Recv(); string(l) != exact {
			t.Fatalf("limit %d: line at the limit with CR LF: len %d, %v", limit, len(l), err)
		}
		var oe *OversizeError
		if _, err := ch.Recv(); !errors.As(err, &oe) {
			t.Fatalf("limit %d: one byte over: %v", limit, err)
		}
		if l, err := ch.Recv(); string(l) != "after" {
			t.Fatalf("limit %d: after: %q, %v", limit, l, err)
		}
	}
}

// TestOversizeMembersAnywhere: what an over-long line's id and method are,
// and whether it is a response, is known wherever in the line they come,
// past the head, in a line read whole or in pieces.
func TestOversizeMembersAnywhere(t *testing.T) {
	pad := strings.Repeat("p", 200_000)
	tests := []struct {
		line     string
		id       string
		method   string
		response bool
	}{
		{`{"jsonrpc":"2.0","method":"session/prompt","params":{"text":"` + pad + `"},"id":77}`, "77", "session/prompt", false},
		{`{"params":{"a":["]}\"",{"id":1}],"t":"` + pad + `"}, "id" : "x\"y" ,"method":"m\u0065"}`, `"x\"y"`, "me", false},
		{`{"jsonrpc":"2.0","result":{"pad":"` + pad + `","id":9},"id":5}`, "5", "", true},
		{`{"jsonrpc":"2.0","error":{"code":1,"message":"` + pad + `"},"id":"e"}`, `"e"`, "", true},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"t":"` + pad + `"}}`, "", "session/update", false},
		{`{"id":{"bad":1},"method":"x","params":"` + pad + `"}`, "", "x", false},
	}
	for _, tt := range tests {
		for _, limit := range []int{1000, 2 * readBufferSize} {
			oe := readOversize(t, tt.line, limit)
			if string(oe.ID) != tt.id || oe.Method != tt.method || oe.IsResponse != tt.response {
				t.Errorf("%.60s (limit %d): id %s, method %q, response %v; want %s, %q, %v",
					tt.line, limit, oe.ID, oe.Method, oe.IsResponse, tt.id, tt.method, tt.response)
			}
		}
	}
}

// readOversize reads line, over limit, and the line after it, and returns
// the error that told of the first: the reading goes on with the next.
func readOversize(t *testing.T, line string, limit int) *OversizeError {
	t.Helper()
	ch := NewLineChannel(strings.NewReader(line+"\nnext\n"), nopWriteCloser{io.Discard}, limit)
	_, err := ch.Recv()
	var oe *OversizeError
	if !errors.As(err, &oe) {
		t.Fatalf("%.60s: want OversizeError, got %v", line, err)
	}
	if l, err := ch.Recv(); string(l) != "next" {
		t.Fatalf("after: %q, %v", l, err)
	}
	return oe
}

// TestParseErrorIDOversize: a request too long to keep is answered under
// its id, wherever in the line it is, as the conductor answers it; a
// notification, a response (whose id is its receiver's own), a batch
// (whose requests are answered one by one) and a line whose id cannot be
// read, under null.
func TestParseErrorIDOversize(t *testing.T) {
	pad := strings.Repeat("x", 100)
	for _, tt := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":"a","method":"x","params":"` + pad + `"}`, `"a"`},
		{`{"jsonrpc":"2.0","method":"x","params":"` + pad + `","id":5.0}`, `5.0`},
		{`{"jsonrpc":"2.0","method":"x","params":"` + pad + `"}`, ``},
		{`{"jsonrpc":"2.0","id":5,"result":"` + pad + `"}`, ``},
		{`[{"jsonrpc":"2.0","id":5,"method":"x","params":"` + pad + `"}]`, ``},
		{`{"jsonrpc":"2.0","id":{},"method":"x","params":"` + pad + `"}`, ``},
		{`{"jsonrpc":"2.0","id":5,"method":"x","params":"` + pad, `5`}, // never ended, but its id was read
	} {
		if got := ParseErrorID(readOversize(t, tt.in, 64)); string(got) != tt.want {
			t.Errorf("ParseErrorID(%.50s...) = %s, want %q", tt.in, got, tt.want)
		}
	}
}

// TestOversizeBatch: of an over-long batch, the id of each request and
// response in it is known, in order, wherever in the line it comes, so
// that each can be answered; notifications and entries without a valid id
// are not listed.
func TestOversizeBatch(t *testing.T) {
	pad := strings.Repeat("p", 200_000)
	type entry struct {
		id       string
		response bool
	}
	tests := []struct {
		line string
		want []entry
	}{
		{`[{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"text":"` + pad + `"}},` +
			`{"jsonrpc":"2.0","method":"session/cancel","params":{}},` +
			` { "params":{"id":9,"t":"` + pad + `"} , "method" : "x" , "id" : "late\"" } ,` +
			`42,"s",[{"id":3,"method":"nested"}],null,` +
			`{"jsonrpc":"2.0","id":{"bad":1},"method":"x"},` +
			`{"jsonrpc":"2.0","result":{"id":8,"pad":"` + pad + `"},"id":5},` +
			`{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":null},` +
			`{"jsonrpc":"2.0","id":6,"m\u0065thod":"y"}]`,
			[]entry{{"1", false}, {`"late\""`, false}, {"5", true}, {"null", true}, {"6", false}}},
		{`[{"jsonrpc":"2.0","method":"session/update","params":{"t":"` + pad + `"}}]`, nil},
		{` [` + strings.Repeat(`{"jsonrpc":"2.0","id":7,"method":"m"},`, 10_000) + `{"id":8,"method":"m"}]`,
			append(slices.Repeat([]entry{{"7", false}}, 10_000), entry{"8", false})},
	}
	for _, tt := range tests {
		for _, limit := range []int{1000, 2 * readBufferSize} {
			oe := readOversize(t, tt.line, limit)
			var got []entry
			for _, e := range oe.Batch {
				got = append(got, entry{string(e.ID), e.IsResponse})
			}
			if !oe.IsBatch || oe.ID != nil || oe.Method != "" || !slices.Equal(got, tt.want) {
				t.Errorf("%.60s (limit %d): batch %v, id %s, method %q, entries %.200v; want a batch of %.200v",
					tt.line, limit, oe.IsBatch, oe.ID, oe.Method, got, tt.want)
			}
		}
	}
}

// FuzzMemberScan holds the streaming scan of an over-long line to what
// encoding/json reads from the same object, however the line is cut into
// pieces: a request whose id it could not keep among them, to be answered
// under null.
func FuzzMemberScan(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"id":2}}`), 3)
	f.Add([]byte(`{"result":[1,"]",{"x":"}"}],"id":"s\"}"}`), 10)
	f.Add([]byte(` { "method" : "m" , "id" : -1.5e3 } `), 0)
	f.Add([]byte(`{"jsonrpc":"2.0","id":25 1,"method":"session/load"`), 14)
	f.Add([]byte(`{"method":"m" ,"id":1}`), 5)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"m\u0065thod":"a","\u0069d":"x\"y"}`), 20)
	f.Add([]byte(` [{"id":1,"method":"a"}, {"method":"n"},3,[{"id":4,"method":"x"}], {"result":{"id":2},"id":"r"}]`), 30)
	f.Add([]byte(`[{"error":{},"id":null,"method":1},{"id":{"a":1},"method":"b"}]`), 7)
	f.Add([]byte(`{"id":1,"method":"m","id":"`+strings.Repeat("x", maxScanned)+`"}`), 9)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		var s memberScan
		cut = min(max(cut, 0), len(data))
		s.feed(data[:cut])
		s.feed(data[cut:])
		id, method, resp := s.result() // must not panic, whatever data is
		if id != nil && !bytes.Contains(data, id) {
			t.Fatalf("id %q, which %q does not hold: an answer would go to an id never sent", id, data)
		}
		entries := s.entries()
		for _, e := range entries {
			if !bytes.Contains(data, e.ID) {
				t.Fatalf("batch entry id %q, which %q does not hold", e.ID, data)
			}
		}
		var batch []json.RawMessage
		if json.Unmarshal(data, &batch) == nil && batch != nil {
			// A batch: each object in it with a valid id that is a
			// request or a response, as for one message.
			var want []OversizeEntry
			unread := 0
			for _, raw := range batch {
				var m map[string]json.RawMessage
				if json.Unmarshal(raw, &m) != nil || m == nil {
					continue
				}
				id, method, resp := expectMembers(m)
				if id != nil && (method != "" || resp) {
					want = append(want, OversizeEntry{ID: id, IsResponse: resp})
				}
				if _, hasID := m["id"]; hasID && id == nil && method != "" {
					unread++
				}
			}
			if !s.batch || len(entries) != len(want) {
				t.Fatalf("batch %v, entries %v; want %v", s.batch, entries, want)
			}
			if s.unkept != unread {
				t.Fatalf("%d requests counted as not kept, want %d whose ids could not be", s.unkept, unread)
			}
			for i := range want {
				if !bytes.Equal(entries[i].ID, want[i].ID) || entries[i].IsResponse != want[i].IsResponse {
					t.Fatalf("entry %d: %s %v, want %s %v", i, entries[i].ID, entries[i].IsResponse, want[i].ID, want[i].IsResponse)
				}
			}
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return // not an object: only no panic
		}
		if s.batch || entries != nil {
			t.Fatalf("an object taken for a batch: %v", entries)
		}
		wantID, wantMethod, wantResp := expectMembers(m)
		if !bytes.Equal(id, wantID) {
			t.Errorf("id %s, want %s", id, wantID)
		}
		if method != wantMethod || resp != wantResp {
			t.Errorf("method %q, response %v; want %q, %v", method, resp, wantMethod, wantResp)
		}
		if _, hasID := m["id"]; (id == nil && s.hadID) != (hasID && wantID == nil) {
			t.Errorf("an id that could not be kept: %v, want %v", id == nil && s.hadID, hasID && wantID == nil)
		}
	})
}

// expectMembers is what the scan of an object should find, as
// encoding/json reads the object m.
func expectMembers(m map[string]json.RawMessage) (id json.RawMessage, method string, isResponse bool) {
	id = m["id"]
	if !validID(id) || len(id) > maxScanned {
		id = nil
	}
	if json.Unmarshal(m["method"], &method) != nil || len(m["method"]) > maxScanned {
		method = ""
	}
	_, hasResult := m["result"]
	_, hasError := m["error"]
	return id, method, (hasResult || hasError) && method == ""
}

func TestLineChannelSend(t *testing.T) {
	var buf bytes.Buffer
	ch := NewLineChannel(strings.NewReader(""), nopWriteCloser{&buf}, 0)
	ch.Send([]byte(`{"a":1}`))
	ch.Send([]byte(`{"b":2}`))
	if buf.String() != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("wrote %q", buf.String())
	}
	ch.Close()
	if err := ch.Send([]byte("x")); err == nil {
		t.Error("send after close succeeded")
	}
}

func FuzzLineChannel(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nccc"), 2, 0)
	f.Add([]byte(strings.Repeat("x", 40)+"\ny\n"), 32, 0)
	f.Add([]byte("\n\n\n"), 1, 0)
	f.Add([]byte("ab\r\nabc\r\nab\r"), 2, 0)
	f.Add([]byte(strings.Repeat("x", 40)+"\r\n"+strings.Repeat("y", 41)+"\r\nz"), 40, 1)
	f.Fuzz(func(t *testing.T, data []byte, limit, size int) {
		if limit <= 0 || limit > 1<<20 {
			return
		}
		ch := newLineChannel(bytes.NewReader(data), nopWriteCloser{io.Discard}, limit, fuzzBufferSize(size))
		var lines [][]byte
		for range len(data) + 2 {
			line, err := ch.Recv()
			var oe *OversizeError
			if errors.As(err, &oe) {
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(line) > limit || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("bad line %q for limit %d", line, limit)
			}
			lines = append(lines, line)
		}
		// Every line within the limit is delivered exactly as it was.
		var want [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			fits := len(l) <= limit // the terminator, CR LF or LF, does not count
			if len(bytes.TrimLeft(l, " \t\r")) > 0 && fits {
				want = append(want, l)
			}
		}
		if len(lines) != len(want) {
			t.Fatalf("got %d lines, want %d", len(lines), len(want))
		}
		for i := range want {
			if !bytes.Equal(lines[i], want[i]) {
				t.Fatalf("line %d = %q, want %q", i, lines[i], want[i])
			}
		}
	})
}

// fuzzBufferSize turns a fuzzed int into a read buffer of 16 to 79 bytes,
// so that inputs of a few bytes cross its edges: with the channel's own
// 64 KiB buffer, only inputs as long, slow to mutate and to minimize, do.
func fuzzBufferSize(n int) int {
	return 16 + int(uint(n)%64)
}

// TestMore: More says whether the next Recv has a whole line at hand.
func TestMore(t *testing.T) {
	r, w := io.Pipe()
	c := NewLineChannel(r, nopWriteCloser{io.Discard}, 0)
	go func() { w.Write([]byte("{\"a\":1}\n{\"b\":2}\n{\"c\"")) }()
	for _, want := range []struct {
		line string
		more bool
	}{{`{"a":1}`, true}, {`{"b":2}`, false}} {
		line, err := c.Recv()
		if err != nil || string(line) != want.line || c.More() != want.more {
			t.Fatalf("Recv = %q, %v; More = %v, want %q, %v", line, err, c.More(), want.line, want.more)
		}
	}
	go func() { w.Write([]byte(":3}\n")); w.Close() }()
	if line, err := c.Recv(); err != nil || string(line) != `{"c":3}` || c.More() {
		t.Fatalf("Recv = %q, %v; More = %v", line, err, c.More())
	}
}

// TestLongLinesInTurn reads long lines of every kind the scratch region
// handles (huge, gave back as copied; a few MiB, the first kept resident;
// just over the read buffer) in turn, and then an oversize one: each must
// come out whole and the same, whatever the one before left behind.
func TestLongLinesInTurn(t *testing.T) {
	var in strings.Builder
	var want []string
	for i, n := range []int{5<<20 + 3, 70 << 10, 3<<20 + 1, 1 << 20, 9 << 20, 100} {
		line := strings.Repeat(string(rune('a'+i)), n-7) + fmt.Sprintf("%07d", i)
		want = append(want, line)
		in.WriteString(line + "\n")
	}
	in.WriteString(strings.Repeat("o", 11<<20) + "\nlast\n")
	want = append(want, "last")
	ch := NewLineChannel(strings.NewReader(in.String()), nopWriteCloser{io.Discard}, 10<<20)
	for i, w := range want {
		got, err := ch.Recv()
		var big *OversizeError
		if i == len(want)-1 && errors.As(err, &big) {
			got, err = ch.Recv() // the oversize line, skipped
		}
		if err != nil || string(got) != w {
			t.Fatalf("line %d: %d bytes (%v), want %d bytes ending %q", i, len(got), err, len(w), w[max(0, len(w)-7):])
		}
	}
	if _, err := ch.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
}

// TestOversizeBatchBounded: what is kept of an over-long batch is bounded
// however long it goes on, and what is not kept is counted: requests and
// responses apart.
func TestOversizeBatchBounded(t *testing.T) {
	const n = maxBatchEntries + 1000
	entry := `{"jsonrpc":"2.0","id":12345,"method":"m"},`
	line := "[" + strings.Repeat(entry, n) + `{"id":1,"method":"m"},{"id":2,"result":{}},{"id":3,"error":{}}]`
	ch := NewLineChannel(strings.NewReader(line+"\nnext\n"), nopWriteCloser{io.Discard}, 1000)
	_, err := ch.Recv()
	var oe *OversizeError
	if !errors.As(err, &oe) || !oe.IsBatch {
		t.Fatalf("want an OversizeError of a batch, got %v", err)
	}
	if len(oe.Batch) != maxBatchEntries || oe.BatchUnkept != n+1-maxBatchEntries || oe.BatchUnkeptResponses != 2 {
		t.Errorf("%d entries kept, %d requests and %d responses not; want %d kept, %d and 2 not",
			len(oe.Batch), oe.BatchUnkept, oe.BatchUnkeptResponses, maxBatchEntries, n+1-maxBatchEntries)
	}
	if l, err := ch.Recv(); string(l) != "next" {
		t.Fatalf("after: %q, %v", l, err)
	}

	// Long ids fill the bound on their bytes first.
	long := `"` + strings.Repeat("i", maxScanned-2) + `"`
	var s memberScan
	s.feed([]byte("["))
	for range 2 * maxBatchIDBytes / maxScanned {
		s.feed([]byte(`{"id":` + long + `,"method":"m"},`))
	}
	if len(s.ids) > maxBatchIDBytes || s.unkept == 0 {
		t.Errorf("%d bytes of ids kept, %d entries not; want at most %d bytes", len(s.ids), s.unkept, maxBatchIDBytes)
	}
}
