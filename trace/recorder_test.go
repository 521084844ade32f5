package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// stuckWriter blocks its first Write until released, saying when it is in it.
type stuckWriter struct {
	entered, release chan struct{}
	buf              bytes.Buffer
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	if w.entered != nil {
		close(w.entered)
		w.entered = nil
		<-w.release
	}
	return w.buf.Write(p)
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
	if n := strings.Count(w.buf.String(), "\n"); n != 2 {
		t.Errorf("%d events written, want 2:\n%s", n, &w.buf)
	}
	if logs.FilterMessageSnippet("were left out").Len() != 1 {
		t.Error("Close did not report the total of dropped events")
	}
	r.Send("client", "agent", nil, "late", nil, false) // after Close: ignored, no panic
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
