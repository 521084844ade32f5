package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
)

// TestAppendExtra: Parse notes the top-level members JSON-RPC does not
// define, and AppendExtra gives them back as they came, in order, names
// spelled as they were; a name that decodes to one JSON-RPC defines is
// none of them.
func TestAppendExtra(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"x":1}}`, ``},
		{`{"jsonrpc":"2.0","id":1,"result":{},"x-trace":{"span":[1,2]}}`, `,"x-trace":{"span":[1,2]}`},
		{`{"x":1,"jsonrpc":"2.0","y" : "2","id":1,"error":{"code":1,"message":"m"},"z":null}`, `,"x":1,"y":"2","z":null`},
		{`{"jsonrpc":"2.0","method":"m","params":{},"_meta":{"k":"v"}}`, `,"_meta":{"k":"v"}`},
		{`{"jsonrpc":"2.0","method":"m","x\u0041":true}`, `,"x\u0041":true`},
		{`{"jsonrpc":"2.0","m\u0065thod":"m","p\u0061rams":{}}`, ``},
		{`{"jsonrpc":"2.0","id":1,"result":1,"error":null}`, ``},
		{`{"jsonrpc":"2.0","id":1,"result":1,"x":1,"x":2}`, `,"x":1,"x":2`},
	} {
		m, err := Parse([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if got := string(m.AppendExtra(nil)); got != tt.want || m.Extra() != (tt.want != "") {
			t.Errorf("%s: Extra() %v, AppendExtra %q; want %q", tt.line, m.Extra(), got, tt.want)
		}
	}
	if got := (&Message{ID: IntID(1), Result: raw("1")}).AppendExtra([]byte("x")); string(got) != "x" {
		t.Errorf("a message made, not parsed, has no extra members: %q", got)
	}
}

// TestAppendCarriedExtra: of an envelope's params, the members beside
// method and params are the carried message's own, but for the
// envelope's _meta and the names JSON-RPC defines; found from Parse's
// notes, or by a scan where it took none.
func TestAppendCarriedExtra(t *testing.T) {
	long := `"` + `\u0078\u0078\u0078` + `"` // escaped, long enough to be either name: no notes
	for _, tt := range []struct{ params, want string }{
		{`{"method":"m","params":{"a":1}}`, ``},
		{`{"method":"m","params":{},"_meta":{"k":1}}`, ``},
		{`{"method":"m","x-trace":[1],"params":{}}`, `,"x-trace":[1]`},
		{`{"method":"m","id":5,"jsonrpc":"1.0","result":1,"error":2,"x":3}`, `,"x":3`},
		{`{"method":"m","_m\u0065ta":{},"p\u0061rams":{}}`, ``},
		{`{"method":"m",` + long + `:1}`, `,` + long + `:1`},
	} {
		line := `{"jsonrpc":"2.0","method":"proxy/successor","params":` + tt.params + `}`
		m, err := Parse([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		made := &Message{Method: m.Method, Params: m.Params}
		for _, m := range []*Message{m, made} {
			if got := string(m.AppendCarriedExtra(nil)); got != tt.want {
				t.Errorf("%s (noted %v): %q, want %q", tt.params, m.notedEnvelope(), got, tt.want)
			}
		}
	}
}

// TestAppendCallExtra: a rebuilt request or notification carries its
// extra members after its method and params, plain or, wrapped, inside
// the envelope's params. Read back, they are what AppendExtra gives of
// the plain message, and what AppendCarriedExtra gives of the envelope:
// the carried message's own, but for a _meta, which there is the
// envelope's.
func TestAppendCallExtra(t *testing.T) {
	const extra, trace = `,"x-trace":{"span":[1,2]},"_m\u0065ta":null`, `,"x-trace":{"span":[1,2]}`
	for _, tt := range []struct {
		name             string
		id               string // "" for a notification
		envelope, method string
		params, extra    string // params "" for none
		want             string
		back             string // the extra members read back
	}{
		{"request", "7", "", "session/prompt", `{"a":1}`, extra,
			`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"a":1}` + extra + `}`, extra},
		{"notification without params", "", "", "session/cancel", "", extra,
			`{"jsonrpc":"2.0","method":"session/cancel"` + extra + `}`, extra},
		{"wrapped request", `"r&1"`, "proxy/successor", "session/prompt", `{"a":1}`, extra,
			`{"jsonrpc":"2.0","id":"r&1","method":"proxy/successor","params":{"method":"session/prompt","params":{"a":1}` + extra + `}}`, trace},
		{"wrapped notification without params", "", "_proxy/successor", "m<1>", "", extra,
			`{"jsonrpc":"2.0","method":"_proxy/successor","params":{"method":"m<1>"` + extra + `}}`, trace},
		{"no extra", "1", "", "m", `[]`, "", `{"jsonrpc":"2.0","id":1,"method":"m","params":[]}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var id, params json.RawMessage
			if tt.id != "" {
				id = raw(tt.id)
			}
			if tt.params != "" {
				params = raw(tt.params)
			}
			got := AppendCallExtra([]byte("x"), id, tt.envelope, tt.method, params, raw(tt.extra))
			if string(got) != "x"+tt.want {
				t.Fatalf("got\n%s\nwant\nx%s", got, tt.want)
			}
			if cap(got) == len(got) {
				t.Errorf("no room left for the newline: len %d, cap %d", len(got), cap(got))
			}
			m, err := Parse(got[1:])
			if err != nil {
				t.Fatalf("%s: %v", got[1:], err)
			}
			back := m.AppendExtra(nil)
			if tt.envelope != "" {
				back = m.AppendCarriedExtra(nil)
			}
			if string(back) != tt.back {
				t.Errorf("read back, the extra members are %q, want %q", back, tt.back)
			}
		})
	}
}

// checkExtra holds what AppendExtra gives of m, parsed from data, to
// encoding/json's reading of data: the members whose names JSON-RPC does
// not define, with their values; Extra says whether there are any.
func checkExtra(t *testing.T, m *Message, ref map[string]json.RawMessage) {
	t.Helper()
	want := map[string]string{}
	for k, v := range ref {
		switch k {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			want[k] = string(compact(t, v))
		}
	}
	extra := m.AppendExtra(nil)
	if m.Extra() != (len(want) > 0) || (len(extra) > 0) != m.Extra() {
		t.Fatalf("Extra() = %v, AppendExtra %s; encoding/json reads %v", m.Extra(), extra, want)
	}
	if got := membersOf(t, extra); !maps.Equal(got, want) {
		t.Fatalf("AppendExtra gives %v, encoding/json reads %v", got, want)
	}
}

// checkCarriedExtra is checkExtra for AppendCarriedExtra of an envelope's
// params, with and without Parse's notes.
func checkCarriedExtra(t *testing.T, m *Message) {
	t.Helper()
	var ref map[string]json.RawMessage
	if json.Unmarshal(m.Params, &ref) != nil {
		return
	}
	want := map[string]string{}
	for k, v := range ref {
		switch k {
		case "jsonrpc", "id", "method", "params", "result", "error", "_meta":
		default:
			want[k] = string(compact(t, v))
		}
	}
	for _, m := range []*Message{m, {Method: m.Method, Params: m.Params}} {
		if got := membersOf(t, m.AppendCarriedExtra(nil)); !maps.Equal(got, want) {
			t.Fatalf("AppendCarriedExtra of %s (noted %v) gives %v, encoding/json reads %v", m.Params, m.notedEnvelope(), got, want)
		}
	}
}

// membersOf reads `,name:value` members, as AppendExtra writes them, as
// encoding/json reads an object of them: the last of a name counting.
func membersOf(t *testing.T, extra []byte) map[string]string {
	t.Helper()
	obj := append(append([]byte("{"), bytes.TrimPrefix(extra, []byte(","))...), '}')
	var got map[string]json.RawMessage
	if err := json.Unmarshal(obj, &got); err != nil {
		t.Fatalf("members %s are no object's: %v", extra, err)
	}
	out := map[string]string{}
	for k, v := range got {
		out[k] = string(compact(t, v))
	}
	return out
}
