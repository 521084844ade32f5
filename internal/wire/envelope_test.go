package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestWrappedSize checks that a buffer of WrappedSize holds every envelope
// AppendWrapped makes, in each dialect, so that encoding one never grows it.
func TestWrappedSize(t *testing.T) {
	for _, d := range Dialects {
		for _, id := range []json.RawMessage{nil, json.RawMessage(`12345`), json.RawMessage(`"a-string-id"`)} {
			for _, params := range []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"sessionId":"s1"}`)} {
				envelope := d.Successor(id)
				got := AppendWrapped(nil, id, envelope, "session/cancel", params)
				if n := WrappedSize(id, envelope, "session/cancel", params); len(got) > n {
					t.Errorf("WrappedSize = %d, but AppendWrapped made %d bytes: %s", n, len(got), got)
				}
			}
		}
	}
}

// checkUnwrapAgrees fails t unless m.Unwrap, answered from what Parse
// noted, says what Unwrap says of m's params, scanned again.
func checkUnwrapAgrees(t *testing.T, m *Message) {
	t.Helper()
	method, inner, err := m.Unwrap()
	wantMethod, wantInner, wantErr := Unwrap(m.Params)
	if method != wantMethod || !bytes.Equal(inner, wantInner) || (inner == nil) != (wantInner == nil) || (err == nil) != (wantErr == nil) {
		t.Fatalf("%s: Message.Unwrap = %q, %q, %v; Unwrap = %q, %q, %v", m.Raw, method, inner, err, wantMethod, wantInner, wantErr)
	}
}

// TestMessageUnwrap: what Parse notes of an envelope's params gives what
// scanning them again gives, wherever the names, their order or their
// spelling could make the two differ.
func TestMessageUnwrap(t *testing.T) {
	for _, tt := range []struct {
		line   string
		noted  bool // answered from what Parse noted
		method string
	}{
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"a":1}}}`, true, "session/update"},
		{`{"jsonrpc":"2.0","id":3,"method":"_proxy/successor/request","params":{"params":[1],"_meta":{},"method":"x"}}`, true, "x"},
		// The params before the method: Parse cannot yet tell.
		{`{"jsonrpc":"2.0","params":{"method":"m","params":null},"method":"proxy/successor"}`, true, "m"},
		// Of repeated names the last counts, inside and out.
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a","method":"b"}}`, true, "b"},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":1,"method":"n"}}`, true, "n"},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a"},"params":{"method":"c"}}`, true, "c"},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a"},"params":[]}`, false, ""},
		// Escaped names: the inner one might be method, the outer params.
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a","m\u0065thod":"e"}}`, false, "e"},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"a"},"p\u0061rams":{"method":"d"}}`, false, "d"},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"meth\u006fd":"z"},"params":{"method":"f"}}`, true, "f"},
		// No method, or not a string.
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"params":{}}}`, true, ""},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":7}}`, true, ""},
		{`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":""}}`, true, ""},
	} {
		m, err := Parse([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if m.notedEnvelope() != tt.noted {
			t.Errorf("%s: answered from notes %v, want %v", tt.line, m.notedEnvelope(), tt.noted)
		}
		checkUnwrapAgrees(t, m)
		if method, _, _ := m.Unwrap(); method != tt.method {
			t.Errorf("%s: method %q, want %q", tt.line, method, tt.method)
		}
	}
	// A message made, not parsed, is unwrapped by scanning its params.
	m := &Message{Method: MethodSuccessor, Params: json.RawMessage(`{"method":"made"}`)}
	if method, _, err := m.Unwrap(); method != "made" || err != nil {
		t.Errorf("made message: %q, %v", method, err)
	}
}

// FuzzMessageUnwrap: for every message Parse accepts, Message.Unwrap and
// Unwrap of its params agree, and AppendCarriedExtra gives the members of
// its params that are the carried message's, as encoding/json reads them.
func FuzzMessageUnwrap(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"a":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","params":{"m\u0065thod":"m","params":null},"method":"_proxy/successor"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"method":"x"},"params":{"method":"y"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":1,"method":"n"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"m","_meta":{},"x":1,"id":2,"_m\u0065ta":3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil || len(m.Params) == 0 || m.Params[0] != '{' {
			return
		}
		checkUnwrapAgrees(t, m)
		checkCarriedExtra(t, m)
	})
}
