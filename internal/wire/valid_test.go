package wire

import (
	"bytes"
	"testing"
)

// FuzzEachValidMember checks the one pass Parse makes against the two it
// replaces: Valid, then EachField. Both must agree on validity, on being an
// object, and on every member, as slices of the input.
func FuzzEachValidMember(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1,2,{"b":"c"}]}}`,
		`{}`, `[]`, `{"a":1} `, ` {"a" : "\u0041" , "b":null}`, `{"a":1}{`, `{"a":}`,
		`"x"`, ``, `{"a":1,"a":2}`, "{\"\xff\":1}", `{"a":1,}`, `{"a" 1}`, `{"m\u0065thod":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want [][2][]byte
		wantValid := Valid(data)
		wantObject := wantValid && EachField(data, func(k, v []byte) { want = append(want, [2][]byte{k, v}) })
		var got [][2][]byte
		valid, object := eachValidMember(data, func(k, v []byte) { got = append(got, [2][]byte{k, v}) })
		if valid != wantValid || valid && object != wantObject {
			t.Fatalf("eachValidMember(%q) = valid %v, object %v; want %v, %v", data, valid, object, wantValid, wantObject)
		}
		if !object {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("eachValidMember(%q) members %q, want %q", data, got, want)
		}
		for i := range want {
			if !bytes.Equal(got[i][0], want[i][0]) || !bytes.Equal(got[i][1], want[i][1]) {
				t.Fatalf("eachValidMember(%q) member %d = %q, want %q", data, i, got[i], want[i])
			}
		}
	})
}

var updateLine = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk 12 of the answer, with some more words in it"}},"_meta":{"tag":7,"seq":12}}}`)

// BenchmarkMembers: validating a session/update and finding its members in
// one pass (Parse), against Valid then EachField.
func BenchmarkMembers(b *testing.B) {
	b.Run("one_pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eachValidMember(updateLine, func(k, v []byte) {})
		}
	})
	b.Run("two_passes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Valid(updateLine) {
				EachField(updateLine, func(k, v []byte) {})
			}
		}
	})
}
