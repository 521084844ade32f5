package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzEachValidMember checks the one pass Parse makes against two others:
// encoding/json.Valid, then EachField. They must agree on validity, on
// being an object, and on every member, as slices of the input.
func FuzzEachValidMember(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[1,2,{"b":"c"}]}}`,
		`{}`, `[]`, `{"a":1} `, ` {"a" : "\u0041" , "b":null}`, `{"a":1}{`, `{"a":}`,
		`"x"`, ``, `{"a":1,"a":2}`, "{\"\xff\":1}", `{"a":1,}`, `{"a" 1}`, `{"m\u0065thod":"x"}`,
		`{"a":"0123456789abcdef\"x"}`, "{\"a\":\"01234567\x1f9abcdef\"}", `{"a":"01234567\\\"bcdef"}`,
		`{"a":-0.5e+7,"b":[true,false,null,{}],"c":"\u00e9\ud800"}`, `{"a":01}`, `{"a":1.}`, `{"a":1e}`,
		`{"a":tru}`, `{"a":"\u12g4"}`, `{"a":"\q"}`, "{\"a\":\"\xc3\xa9\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want [][2][]byte
		wantValid := json.Valid(data)
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

// eachValidMember makes the walk ParseInto makes, calling fn with each
// member's name and value, for the tests to compare with other parsers.
// It reports whether data is valid, and whether it is an object.
func eachValidMember(data []byte, fn func(key, val []byte)) (valid, isObject bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return onlySpace(data, checkValue(data, i, 0)), false
	}
	i, more := firstMember(data, i)
	for more {
		k := i
		var keyEnd, valStart, valEnd int
		if keyEnd, valStart, valEnd, i, more = checkMember(data, i, 1); i < 0 {
			return false, false
		}
		fn(data[k:keyEnd], data[valStart:valEnd])
	}
	if !onlySpace(data, i) {
		return false, false
	}
	return true, true
}

var updateLine = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk 12 of the answer, with some more words in it"}},"_meta":{"tag":7,"seq":12}}}`)

// BenchmarkMembers: validating a session/update and finding its members in
// one pass (Parse), against jsontext's validator (which the validator
// replaced) then EachField, and encoding/json.Valid alone.
func BenchmarkMembers(b *testing.B) {
	b.Run("one_pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eachValidMember(updateLine, func(k, v []byte) {})
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		opts := []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
		for b.Loop() {
			if jsontext.Value(updateLine).IsValid(opts...) {
				EachField(updateLine, func(k, v []byte) {})
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Valid(updateLine)
		}
	})
}

// TestValidDepth: arrays and objects nest as deep as encoding/json allows,
// and no deeper, without exhausting the stack.
func TestValidDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1, 100 * maxDepth} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			data := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
			if got, want := Valid(data), json.Valid(data); got != want {
				t.Errorf("Valid(%d times %s) = %v, encoding/json says %v", n, open, got, want)
			}
			_, object := eachValidMember(data, func(k, v []byte) {})
			if want := open != "[" && n <= maxDepth; object != want {
				t.Errorf("eachValidMember(%d times %s): object %v, want %v", n, open, object, want)
			}
		}
	}
}

// TestValidKinds: past the 64 containers whose kinds the validator keeps
// in one word, it still tells an array's close from an object's, as
// encoding/json does.
func TestValidKinds(t *testing.T) {
	for _, depth := range []int{63, 64, 65, 130, 200} {
		var open, close []string
		for i := range depth {
			if i%3 == 1 {
				open, close = append(open, `{"k":`), append(close, "}")
			} else {
				open, close = append(open, "["), append(close, "]")
			}
		}
		for _, swap := range []int{-1, 0, 40, 64, 65, 100, depth - 1} {
			if swap >= depth {
				continue
			}
			c := slices.Clone(close)
			if swap >= 0 { // the close of the container opened swap-th
				c[swap] = map[string]string{"]": "}", "}": "]"}[c[swap]]
			}
			slices.Reverse(c)
			data := []byte(strings.Join(open, "") + "1" + strings.Join(c, ""))
			if got, want := Valid(data), json.Valid(data); got != want {
				t.Errorf("depth %d, close %d swapped: Valid = %v, encoding/json says %v", depth, swap, got, want)
			}
			if want := swap < 0; Valid(data) != want {
				t.Errorf("depth %d, close %d swapped: Valid = %v, want %v", depth, swap, Valid(data), want)
			}
		}
	}
}

// TestValidAllocs: validating allocates nothing up to 64 containers deep,
// and past that only as the nesting doubles (the open containers' kinds
// grow by append): a few allocations at encoding/json's deepest.
func TestValidAllocs(t *testing.T) {
	for _, tc := range []struct {
		depth int
		most  float64
	}{{1, 0}, {64, 0}, {maxDepth, 16}} {
		data := []byte(strings.Repeat("[", tc.depth) + strings.Repeat("]", tc.depth))
		if got := testing.AllocsPerRun(10, func() { Valid(data) }); got > tc.most {
			t.Errorf("Valid(%d deep) makes %v allocations, want at most %v", tc.depth, got, tc.most)
		}
	}
}
