package proxy

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// FuzzErrorRoundTrip: an error object a peer sent goes back byte for byte
// when it is passed on unchanged; what an Error of a handler's encodes to
// is a well-formed error object that reads back as the same code, message
// and data (data that is not JSON as a string of it).
func FuzzErrorRoundTrip(f *testing.F) {
	f.Add([]byte(`{"code":-32601,"message":"Method not found"}`), -32602, "m", []byte(`{"x":[1]}`))
	f.Add([]byte(`{"code":1e3,"message":"a\u00e9","data":[1],"d\u0061ta":2}`), 0, "", []byte(`disk full`))
	f.Add([]byte(`{"code":1.5,"message":"x"}`), 7, "\xff", []byte(` 1 `))
	f.Add([]byte(`{"code":9223372036854775808,"message":""}`), -1, "<&>", []byte(nil))
	f.Fuzz(func(t *testing.T, raw []byte, code int, msg string, data []byte) {
		if json.Valid(raw) {
			e := decodeError(raw)
			if _, _, _, ok := wire.ReadError(raw); ok && !bytes.Equal(e.encode(), raw) {
				t.Fatalf("%s, passed on unchanged, went back as %s", raw, e.encode())
			}
			if _, _, _, ok := wire.ReadError(e.encode()); !ok {
				t.Fatalf("%s went back as %s, malformed", raw, e.encode())
			}
		}
		e := &Error{Code: code, Message: msg, Data: data}
		out := e.encode()
		got, gotMsg, gotData, ok := wire.ReadError(out)
		if !ok || !json.Valid(out) {
			t.Fatalf("%+v encoded as %s, malformed", e, out)
		}
		if got != int64(code) {
			t.Fatalf("code %d encoded as %s", code, out)
		}
		if utf8.ValidString(msg) && gotMsg != msg {
			t.Fatalf("message %q encoded as %s", msg, out)
		}
		switch {
		case len(data) == 0:
			if gotData != nil {
				t.Fatalf("no data encoded as %s", out)
			}
		case json.Valid(data):
			if !bytes.Equal(compactJSON(gotData), compactJSON(data)) {
				t.Fatalf("data %s encoded as %s", data, out)
			}
		default:
			var s string
			if json.Unmarshal(gotData, &s) != nil || utf8.Valid(data) && s != string(data) {
				t.Fatalf("data %q, not JSON, encoded as %s", data, out)
			}
		}
	})
}

func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	json.Compact(&buf, b)
	return buf.Bytes()
}
