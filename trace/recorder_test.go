package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stuckWriter blocks its first Write until released, saying when it is in it.
type stuckWriter struct {
	entered, release chan struct{}
	mu               sync.Mutex // guards buf, which a test may read as the writer writes
	buf              bytes.Buffer
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	if w.entered != nil {
		close(w.entered)
		w.entered = nil
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// String returns what has been written.
func (w *stuckWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRecorderNeverBlocks holds the trace's writer in a write and records
// on: the buffer fills, and every message beyond it is dropped at once,
// counted, and logged once, instead of holding up the relay.
func TestRecorderNeverBlocks(t *testing.T) {
	w := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
	entered := w.entered
	core, logs := observer.New(zap.WarnLevel)
	r := NewRecorder(w, Options{Buffer: 1, Logger: zap.New(core)})
	r.Send("client", "agent", nil, "session/cancel", json.RawMessage(`{"sessionId":"s"}`), false)
	<-entered // the writer is stuck flushing the first event
	for range 10 {
		r.Send("client", "agent", nil, "session/cancel", json.RawMessage(`{"sessionId":"s"}`), false)
	}
	if got := r.Dropped(); got != 9 {
		t.Errorf("dropped %d, want 9 (one fits the buffer)", got)
	}
	if n := logs.FilterMessageSnippet("fell behind").Len(); n != 1 {
		t.Errorf("the loss was logged %d times, want once", n)
	}
	close(w.release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(w.buf.String(), "\n"); n != 3 {
		t.Errorf("%d events written, want 3 (two, and the gap of nine):\n%s", n, &w.buf)
	}
	if logs.FilterMessageSnippet("were left out").Len() != 1 {
		t.Error("Close did not report the total of dropped events")
	}
	r.Send("client", "agent", nil, "late", nil, false) // after Close: ignored, no panic
}

// stalledLog is a logger's output whose first write blocks until released,
// as a stderr nobody reads does; later writes go through.
type stalledLog struct {
	mu       sync.Mutex
	stalled  bool
	entered  chan struct{}
	release  chan struct{}
	messages []string
}

func (l *stalledLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	first := !l.stalled
	l.stalled = true
	l.mu.Unlock()
	if first {
		close(l.entered)
		<-l.release
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.messages = append(l.messages, string(p))
	return len(p), nil
}

// TestRecorderLogsDropUnlocked stalls the logger in the warning of the
// first message left out: the relay's other messages are still recorded
// or counted, and Close, which takes the sink's lock, is not held up by
// it (and so cannot hold up every sender behind it); the loss is still
// logged once.
func TestRecorderLogsDropUnlocked(t *testing.T) {
	w := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
	entered := w.entered
	lw := &stalledLog{entered: make(chan struct{}), release: make(chan struct{})}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(lw), zap.WarnLevel))
	r := NewRecorder(w, Options{Buffer: 1, Logger: logger})
	send := func(method string) { r.Send("client", "agent", nil, method, json.RawMessage(`{}`), false) }
	send("first")
	<-entered // the writer is stuck writing it
	send("queued")
	warned := make(chan struct{})
	go func() {
		defer close(warned)
		send("lost") // the first loss, whose warning stalls
	}()
	<-lw.entered
	for range 5 {
		send("lost") // recording goes on
	}
	if got := r.Dropped(); got != 6 {
		t.Errorf("dropped %d, want 6", got)
	}
	close(w.release)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	var err error
	select {
	case err = <-closed:
	case <-time.After(5 * time.Second):
		t.Error("Close is held up by the stalled logger")
		close(lw.release)
		err = <-closed
	}
	if err != nil {
		t.Error(err)
	}
	select {
	case <-lw.release:
	default:
		close(lw.release)
	}
	<-warned
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n := 0
	for _, m := range lw.messages {
		n += strings.Count(m, "fell behind")
	}
	if n != 1 {
		t.Errorf("the loss was logged %d times, want once:\n%s", n, strings.Join(lw.messages, ""))
	}
	if got := strings.Count(w.String(), "\n"); got != 3 {
		t.Errorf("%d events written, want 3 (two, and the gap of six):\n%s", got, w.String())
	}
}

// TestRecorderMarksGaps: messages left out while the writer is stuck are
// marked in the trace where they are missing, by one event of the type
// the Rust conductor's format gives lines that are no message ("trace"),
// saying how many; and those left out at the end are marked as the trace
// closes.
func TestRecorderMarksGaps(t *testing.T) {
	stuck := func(buffer int) (*Recorder, *stuckWriter, func(string)) {
		w := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
		entered := w.entered
		r := NewRecorder(w, Options{Buffer: buffer})
		send := func(method string) { r.Send("client", "agent", nil, method, json.RawMessage(`{}`), false) }
		send("first")
		<-entered // the writer is stuck writing it
		for range 10 {
			send("lost") // as many as fit the buffer, and the rest left out
		}
		close(w.release)
		return r, w, send
	}
	events := func(w *stuckWriter) []string {
		var got []string
		for _, line := range strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n") {
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not an event: %s", line)
			}
			if e.Type == TypeTrace {
				got = append(got, fmt.Sprintf("gap %s %s", e.Fields, e.Component))
				if !strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"from"`) {
					t.Errorf("a gap is written %s", line)
				}
				continue
			}
			got = append(got, e.Method)
		}
		return got
	}

	r, w, send := stuck(2)
	for deadline := time.Now().Add(10 * time.Second); strings.Count(w.String(), "\n") < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the writer never caught up:\n%s", w.String())
		}
		time.Sleep(time.Millisecond)
	}
	send("after")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(events(w)), `[first lost lost gap {"dropped":8} conductor after]`; got != want {
		t.Errorf("the trace is\n%v\nwant\n%s", got, want)
	}

	r, w, _ = stuck(1)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(events(w)), `[first lost gap {"dropped":9} conductor]`; got != want {
		t.Errorf("the trace that ends in a gap is\n%v\nwant\n%s", got, want)
	}
}

// TestRecorderEvents checks how each kind of message is recorded: a request
// and its response paired by receiver and id, with the method and session
// carried over; mcp/message as the MCP message it carries; metadata keeping
// only sizes and an error's code.
func TestRecorderEvents(t *testing.T) {
	for _, detail := range Details {
		var out bytes.Buffer
		r := NewRecorder(&out, Options{Detail: detail})
		r.Send("client", "agent", json.RawMessage("1"), "session/new", json.RawMessage(`{"cwd":"/"}`), false)
		r.Reply("agent", "client", json.RawMessage("1"), json.RawMessage(`{"sessionId":"s1"}`), false)
		r.Send("agent", "proxy", json.RawMessage("7"), "mcp/message", json.RawMessage(`{"connectionId":"c","method":"tools/call","params":{"name":"x"}}`), false)
		r.Reply("proxy", "agent", json.RawMessage("7"), json.RawMessage(`{"code":-32603,"message":"boom","data":"secret"}`), true)
		r.Send("mcp:tools", "proxy", nil, "notifications/initialized", nil, true)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		var got []Event
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			e.TS = 0
			got = append(got, e)
		}
		if len(got) != 5 {
			t.Fatalf("%s: %d events, want 5:\n%s", detail, len(got), &out)
		}
		resp := got[1]
		if resp.Type != TypeResponse || resp.Method != "session/new" || resp.Session != "s1" || string(resp.ID) != "1" || resp.IsError == nil || *resp.IsError {
			t.Errorf("%s: response recorded as %+v", detail, resp)
		}
		mcp := got[2]
		if mcp.Protocol != ProtocolMCP || mcp.Method != "tools/call" {
			t.Errorf("%s: mcp/message recorded as %+v", detail, mcp)
		}
		if e := got[3]; e.Protocol != ProtocolMCP || e.Method != "tools/call" || !*e.IsError {
			t.Errorf("%s: its error answer recorded as %+v", detail, e)
		}
		if got[4].Protocol != ProtocolMCP || got[4].Type != TypeNotification {
			t.Errorf("%s: a bridged client's notification recorded as %+v", detail, got[4])
		}
		switch detail {
		case Full:
			if string(mcp.Params) != `{"name":"x"}` || string(got[3].Payload) != `{"code":-32603,"message":"boom","data":"secret"}` {
				t.Errorf("full: params %s, error %s", mcp.Params, got[3].Payload)
			}
		case Metadata:
			if strings.Contains(out.String(), "secret") || strings.Contains(out.String(), `"name":"x"`) || strings.Contains(out.String(), "boom") {
				t.Errorf("metadata kept content:\n%s", &out)
			}
			if string(got[3].Payload) != `{"code":-32603}` || got[0].Bytes != len(`{"cwd":"/"}`) {
				t.Errorf("metadata: error %s, size %d", got[3].Payload, got[0].Bytes)
			}
		}
	}
}

// TestRecorderReplyFor records the conductor's failure of a request its
// receiver never answered: from the conductor, under the receiver's id,
// with the method and session of the request it ends.
func TestRecorderReplyFor(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, Options{})
	r.Send("client", "proxy", json.RawMessage("3"), "session/prompt", json.RawMessage(`{"sessionId":"s1"}`), false)
	r.ReplyFor("proxy", "conductor", "client", json.RawMessage("3"), json.RawMessage(`{"code":-32603,"message":"gone"}`), true)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var e Event
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Type != TypeResponse || e.From != "conductor" || e.To != "client" || string(e.ID) != "3" ||
		e.Method != "session/prompt" || e.Session != "s1" || e.IsError == nil || !*e.IsError {
		t.Errorf("the conductor's failure is recorded as %+v", e)
	}
}

// TestRecorderMCPMessageSpellings: every mcp/message is recorded as the
// MCP message it carries, and its answer under that message's method:
// the one a bridged client's message goes to its server's owner in (the
// conductor wraps it), and one spelled as the Thinkwell dialect spells
// it.
func TestRecorderMCPMessageSpellings(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, Options{})
	r.Send("mcp:tools", "proxy", json.RawMessage("3"), "mcp/message", json.RawMessage(`{"connectionId":"c","method":"tools/call","params":{"name":"x"}}`), true)
	r.Reply("proxy", "mcp:tools", json.RawMessage("3"), json.RawMessage(`{"content":[]}`), false)
	r.Send("agent", "tw-proxy", json.RawMessage("4"), "_mcp/message", json.RawMessage(`{"connectionId":"c","method":"tools/list","params":{}}`), false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Type+" "+e.Protocol+" "+e.Method+" "+string(e.Params))
	}
	want := []string{
		`request mcp tools/call {"name":"x"}`,
		`response mcp tools/call `,
		`request mcp tools/list {}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// recordLines records with Options{Detail: detail} what rec does, and
// returns the trace's lines, times set to 0.
func recordLines(t *testing.T, detail Detail, rec func(*Recorder)) []string {
	t.Helper()
	var out bytes.Buffer
	r := NewRecorder(&out, Options{Detail: detail})
	rec(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, l := range lines {
		var e Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		e.TS = 0
		b, _ := e.appendTo(nil)
		lines[i] = strings.TrimSuffix(string(b), "\n")
	}
	return lines
}

// TestRecorderRequestBinding: the request binding (mcp/message {serverId,
// requestId}, the TypeScript SDK's) answers an MCP request with an ACP
// result that holds the MCP response, {result} or {error}. The trace
// records that response as it records the request the mcp/message
// carries: an MCP error is an error, which at metadata detail keeps its
// code; a result is the payload. The connect binding's result is the MCP
// result itself, whatever members it has.
func TestRecorderRequestBinding(t *testing.T) {
	const req = `{"serverId":"ed-1","requestId":%d,"method":"tools/call","params":{"name":"x"}}`
	for _, tc := range []struct {
		name    string
		request string // the mcp/message's params
		answer  string // the ACP result it got
		full    string // the response's is_error and payload at each detail
		meta    string
	}{
		{"error", fmt.Sprintf(req, 1), `{"error":{"code":-32800,"message":"cancelled","data":"secret"}}`,
			`"is_error":true,"payload":{"code":-32800,"message":"cancelled","data":"secret"},"bytes":53`,
			`"is_error":true,"payload":{"code":-32800},"bytes":53`},
		{"result", fmt.Sprintf(req, 2), `{"result":{"content":[]}}`,
			`"is_error":false,"payload":{"content":[]},"bytes":14`,
			`"is_error":false,"payload":null,"bytes":14`},
		{"error beside a result", fmt.Sprintf(req, 3), `{"result":{},"error":{"code":-32602,"message":"no tool x"}}`,
			`"is_error":true,"payload":{"code":-32602,"message":"no tool x"},"bytes":37`,
			`"is_error":true,"payload":{"code":-32602},"bytes":37`},
		{"result beside a null error", fmt.Sprintf(req, 4), `{"result":{},"error":null}`,
			`"is_error":false,"payload":{},"bytes":2`,
			`"is_error":false,"payload":null,"bytes":2`},
		{"neither", fmt.Sprintf(req, 5), `{}`,
			`"is_error":false,"payload":{},"bytes":2`,
			`"is_error":false,"payload":null,"bytes":2`},
		{"connect binding", `{"connectionId":"c","method":"tools/call","params":{"name":"x"}}`, `{"error":{"code":1}}`,
			`"is_error":false,"payload":{"error":{"code":1}},"bytes":20`,
			`"is_error":false,"payload":null,"bytes":20`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for detail, want := range map[Detail]string{Full: tc.full, Metadata: tc.meta} {
				lines := recordLines(t, detail, func(r *Recorder) {
					r.Send("mcp:ed", "client", json.RawMessage("9"), "mcp/message", json.RawMessage(tc.request), true)
					r.Reply("client", "mcp:ed", json.RawMessage("9"), json.RawMessage(tc.answer), false)
				})
				want = `{"type":"response","ts":0,"protocol":"mcp","from":"client","to":"mcp:ed","id":9,"method":"tools/call",` + want + `}`
				if len(lines) != 2 || lines[1] != want {
					t.Errorf("%s: got\n%s\nwant the response\n%s", detail, strings.Join(lines, "\n"), want)
				}
			}
		})
	}
}

// TestRecorderBridgedCancel: a bridged MCP client's notifications/cancelled
// reaches an owner that binds per request as $/cancel_request for the
// mcp/message that carries the request; the trace records what the client
// sent, naming the request by the id the trace gives it. Anyone else's
// $/cancel_request is ACP's.
func TestRecorderBridgedCancel(t *testing.T) {
	lines := recordLines(t, Full, func(r *Recorder) {
		r.Send("mcp:ed", "client", nil, "$/cancel_request", json.RawMessage(`{"requestId":5,"reason":"user"}`), true)
		r.Send("agent", "client", nil, "$/cancel_request", json.RawMessage(`{"requestId":6}`), false)
	})
	want := []string{
		`{"type":"notification","ts":0,"protocol":"mcp","from":"mcp:ed","to":"client","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"},"bytes":31}`,
		`{"type":"notification","ts":0,"protocol":"acp","from":"agent","to":"client","method":"$/cancel_request","params":{"requestId":6},"bytes":15}`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestRecorderConnections: chains sharing one trace through ForConnection
// use the same names and ids; each event carries its connection, and each
// response pairs with its own connection's request.
func TestRecorderConnections(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, Options{})
	a, b := r.ForConnection("A"), r.ForConnection("B")
	a.Send("client", "agent", json.RawMessage(`1`), "session/prompt", json.RawMessage(`{"sessionId":"sa"}`), false)
	b.Send("client", "agent", json.RawMessage(`1`), "session/load", json.RawMessage(`{"sessionId":"sb"}`), false)
	b.Reply("agent", "client", json.RawMessage(`1`), json.RawMessage(`null`), false)
	a.Reply("agent", "client", json.RawMessage(`1`), json.RawMessage(`{"stopReason":"end_turn"}`), false)
	if err := a.Close(); err != nil { // does nothing: r owns the trace
		t.Fatal(err)
	}
	b.Send("client", "agent", nil, "session/cancel", json.RawMessage(`{"sessionId":"sb"}`), false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Connection+" "+e.Type+" "+e.Method+" "+e.Session)
	}
	want := []string{
		"A request session/prompt sa",
		"B request session/load sb",
		"B response session/load sb",
		"A response session/prompt sa",
		"B notification session/cancel sb",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.ForConnection("x") == nil || (*Recorder)(nil).ForConnection("x") != nil {
		t.Error("ForConnection of a nil Recorder must be nil, of a Recorder not")
	}
	if strings.Contains(strings.SplitN(buf.String(), "\n", 2)[0], `"connection":""`) {
		t.Error("an empty connection is written")
	}
}

// TestEventEncoding writes events as the writer does and as encoding/json
// does, and decodes both: the same event, each on one line, whatever the
// strings hold (quotes, escapes, control and HTML characters, non-ASCII,
// invalid UTF-8) and however the raw members are laid out (a message from
// a WebSocket may span lines).
func TestEventEncoding(t *testing.T) {
	no, yes := false, true
	for _, e := range []Event{
		{Type: TypeRequest, TS: 1.5, Protocol: ProtocolACP, From: "client", To: "agent", ID: json.RawMessage(`1`), Method: "session/prompt", Session: "s1", Params: json.RawMessage(`{"a":[1,2]}`), Bytes: 11},
		{Type: TypeResponse, TS: 5e-07, Protocol: ProtocolMCP, From: "a\"b\\c", To: "<tag>&\u2028", ID: json.RawMessage(`"x"`), Method: "é\x01\x1f\x7f", IsError: &yes, Payload: json.RawMessage("{\n  \"code\": -32603,\r\n  \"message\": \"m\"\n}"), Bytes: 40, Connection: "C1"},
		{Type: TypeResponse, TS: 1e22, From: "\xff\xfe", IsError: &no, Payload: json.RawMessage(`null`)},
		{Type: TypeNotification, Method: "", Params: json.RawMessage(` [ 1 , "a b" ] `)},
	} {
		assertEncodes(t, e)
	}
}

// FuzzEventEncoding: the same for any strings and any valid JSON params.
func FuzzEventEncoding(f *testing.F) {
	f.Add("agent", "proxy\n", "session/update", "s\u2028", []byte(`{"x":"<\u00e9>"}`), 0.25)
	f.Add("", "", "", "", []byte("[\n1\r\n]"), 1e-9)
	f.Fuzz(func(t *testing.T, from, to, method, session string, params []byte, ts float64) {
		if !json.Valid(params) || math.IsNaN(ts) || math.IsInf(ts, 0) {
			return // the relay passes on only valid JSON; a trace's times are finite
		}
		assertEncodes(t, Event{Type: TypeRequest, TS: ts, Protocol: ProtocolACP, From: from, To: to, ID: json.RawMessage(`7`), Method: method, Session: session, Params: params, Bytes: len(params)})
	})
}

func assertEncodes(t *testing.T, e Event) {
	t.Helper()
	ours, err := e.appendTo(nil)
	if err != nil {
		t.Fatalf("appendTo(%+v): %v", e, err)
	}
	if i := bytes.IndexByte(ours, '\n'); i != len(ours)-1 {
		t.Fatalf("%q is not one line", ours)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	got, err := decodeNumbers(ours)
	if err != nil {
		t.Fatalf("%q: %v", ours, err)
	}
	want, err := decodeNumbers(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("wrote %s\nencoding/json writes %s", ours, b.Bytes())
	}
}

// decodeNumbers decodes one JSON value as json.Unmarshal into an any
// does, except for a number no float64 holds (valid JSON may have 2e400,
// and the relay passes it on as it came), which stays its text.
func decodeNumbers(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v.String()
	case []any:
		for i := range v {
			v[i] = numbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = numbers(v[k])
		}
	}
	return v
}

// countingWriter counts its writes.
type countingWriter struct {
	mu     sync.Mutex
	writes int
	lines  int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

func (w *countingWriter) count() (writes, lines int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.lines
}

// TestRecorderBatches: messages recorded together are written together,
// in one write once batchDelay has passed since the first, rather than
// waking the writer for each; a queue half full is written at once.
// (synctest's clock moves only when every goroutine waits, so nothing here
// depends on how fast the machine is.)
func TestRecorderBatches(t *testing.T) {
	update := json.RawMessage(`{"sessionId":"s"}`)
	synctest.Test(t, func(t *testing.T) {
		w := &countingWriter{}
		r := NewRecorder(w, Options{Buffer: 1000})
		for range 100 {
			r.Send("agent", "client", nil, "session/update", update, false)
		}
		synctest.Wait()
		if writes, _ := w.count(); writes != 0 {
			t.Fatalf("%d writes before the batch delay passed", writes)
		}
		time.Sleep(batchDelay)
		synctest.Wait()
		if writes, lines := w.count(); writes != 1 || lines != 100 {
			t.Errorf("%d writes of %d events once the delay passed, want 1 of 100", writes, lines)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w := &countingWriter{}
		r := NewRecorder(w, Options{Buffer: 4})
		r.Send("agent", "client", nil, "session/update", update, false)
		synctest.Wait() // the writer has the first, and waits for more
		r.Send("agent", "client", nil, "session/update", update, false)
		r.Send("agent", "client", nil, "session/update", update, false)
		synctest.Wait()
		if writes, lines := w.count(); writes != 1 || lines != 3 {
			t.Errorf("with the queue half full: %d writes of %d events, want 1 of 3 without waiting", writes, lines)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMetadataKeepsOnlyNumericCode: at metadata detail an error keeps only
// its code, and only a numeric one: a code of another type (a string
// naming a path, an object) may say anything, and becomes null.
func TestMetadataKeepsOnlyNumericCode(t *testing.T) {
	for code, want := range map[string]string{
		`-32603`:                    `{"code":-32603}`,
		`"ENOENT /home/a/secret"`:   `{"code":null}`,
		`{"path":"/home/a/secret"}`: `{"code":null}`,
		`1.5`:                       `{"code":null}`,
	} {
		var out bytes.Buffer
		r := NewRecorder(&out, Options{Detail: Metadata})
		r.Send("agent", "client", json.RawMessage("1"), "fs/read_text_file", json.RawMessage(`{}`), false)
		r.Reply("client", "agent", json.RawMessage("1"), json.RawMessage(`{"code":`+code+`,"message":"m"}`), true)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), `"payload":`+want) {
			t.Errorf("code %s kept as:\n%s; want %s", code, &out, want)
		}
	}
}

// TestCloseBlockedWriter: a trace file nobody reads (a FIFO, a pipe, a
// hung mount) blocks the writer for ever; Close gives up on it after its
// bound, saying so, rather than hold the conductor's exit.
func TestCloseBlockedWriter(t *testing.T) {
	w := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
	entered := w.entered
	defer close(w.release) // the writer's goroutine ends with the test
	r := NewRecorder(w, Options{CloseTimeout: 50 * time.Millisecond})
	r.Send("client", "agent", json.RawMessage("1"), "initialize", json.RawMessage(`{}`), false)
	<-entered
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "blocked") {
		t.Errorf("Close = %v, want the writer reported blocked", err)
	}
}

// TestPendingBounded: requests never answered in the trace are remembered
// for at least pendingLimit requests after them, and then forgotten, so a
// trace that runs for weeks holds a bounded table. A response still pairs
// with a recent request; one whose request was forgotten is written
// without the request's method.
func TestPendingBounded(t *testing.T) {
	var out bytes.Buffer
	w := &writer{detail: Full, out: bufio.NewWriter(&out)}
	request := func(n int) {
		w.write(&record{kind: kindRequest, from: "client", to: "agent", id: json.RawMessage(strconv.Itoa(n)), method: "session/prompt", body: json.RawMessage(`{}`)})
	}
	respond := func(n int) Event {
		w.out.Flush()
		out.Reset()
		w.write(&record{kind: kindResponse, from: "agent", to: "client", id: json.RawMessage(strconv.Itoa(n)), body: json.RawMessage(`{}`)})
		w.out.Flush()
		var e Event
		if err := json.Unmarshal(out.Bytes(), &e); err != nil {
			t.Fatalf("response line %q: %v", out.Bytes(), err)
		}
		return e
	}
	const n = 3 * pendingLimit
	for i := range n {
		request(i)
	}
	if held := len(w.pending.newer) + len(w.pending.older); held > 2*pendingLimit {
		t.Errorf("after %d unanswered requests the trace remembers %d, more than %d", n, held, 2*pendingLimit)
	}
	if e := respond(n - pendingLimit); e.Method != "session/prompt" {
		t.Errorf("a response %d requests after its request: method %q, want session/prompt", pendingLimit, e.Method)
	}
	if e := respond(0); e.Method != "" || e.Type != TypeResponse {
		t.Errorf("a response to a forgotten request: %+v, want a response without a method", e)
	}
}

// TestRecorderGapsExact: senders on many goroutines overrun a small
// buffer; every message is either in the trace or counted by a gap
// marker, and the markers' counts add up to Dropped.
func TestRecorderGapsExact(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, Options{Buffer: 4, Detail: Metadata})
	const senders, each = 8, 500
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				r.Send("client", "agent", nil, "n", nil, false)
			}
		})
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var written, gaps int64
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not an event: %s", line)
		}
		if e.Type != TypeTrace {
			written++
			continue
		}
		var f struct{ Dropped int64 }
		if err := json.Unmarshal(e.Fields, &f); err != nil || f.Dropped <= 0 {
			t.Fatalf("a gap says %s", e.Fields)
		}
		gaps += f.Dropped
	}
	if gaps != r.Dropped() || written+gaps != senders*each {
		t.Errorf("%d written and %d in gaps of %d sent; Dropped says %d", written, gaps, senders*each, r.Dropped())
	}
	t.Logf("%d of %d dropped", r.Dropped(), senders*each)
}
