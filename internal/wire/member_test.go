package wire

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestEachField(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string // key, value, key, value...
		ok   bool
	}{
		{`{}`, nil, true},
		{` { "a" : 1 , "b":{"c":[1,"}"]} } `, []string{`"a"`, `1`, `"b"`, `{"c":[1,"}"]}`}, true},
		{`{"a\"b":"x"}`, []string{`"a\"b"`, `"x"`}, true},
		{`[1]`, nil, false},
		{``, nil, false},
		// Invalid JSON, which callers must not pass, still ends the walk.
		{`{]`, nil, false},
		{`{"a":1]`, []string{`"a"`, `1`}, false},
		{`{"a" 1}`, nil, false},
		{`{"a":}`, nil, false},
		{`{1:2}`, nil, false},
		{`{,}`, nil, false},
		{`{:`, nil, false},
	} {
		var got []string
		ok := EachField([]byte(tt.in), func(key, val []byte) {
			got = append(got, string(key), string(val))
		})
		if ok != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("EachField(%s) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEachElement(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{`[]`, nil},
		{` [ 1 , {"a":[2]} , "]" ] `, []string{`1`, `{"a":[2]}`, `"]"`}},
		{`{}`, nil},
		// Invalid JSON, which callers must not pass, still ends the walk.
		{`[}`, nil},
		{`[:]`, nil},
		{`[1:2]`, []string{`1`}},
	} {
		var got []string
		EachElement([]byte(tt.in), func(val []byte) { got = append(got, string(val)) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("EachElement(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestMember(t *testing.T) {
	for _, tt := range []struct {
		obj, name, want string
	}{
		{`{"requestId":3}`, "requestId", "3"},
		{`{"r\u0065questId":3}`, "requestId", "3"},
		{`{"requestId":3,"requestId":"x"}`, "requestId", `"x"`},
		{`{"requestIdx":3}`, "requestId", ""},
		{`{"a":{"requestId":3}}`, "requestId", ""},
		{`[]`, "requestId", ""},
		{``, "requestId", ""},
	} {
		got := Member(json.RawMessage(tt.obj), tt.name)
		if string(got) != tt.want {
			t.Errorf("Member(%s, %q) = %s, want %s", tt.obj, tt.name, got, tt.want)
		}
		// Member agrees with encoding/json.
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(tt.obj), &m) == nil {
			if string(m[tt.name]) != string(got) {
				t.Errorf("Member(%s, %q) = %s, encoding/json says %s", tt.obj, tt.name, got, m[tt.name])
			}
		}
	}
}

// FuzzMember holds EachField and Member to encoding/json on valid objects,
// and EachField to ending on anything.
func FuzzMember(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[{"c":"}"}]}`, `{"\u0061":1,"a":2}`, `{"a\\":"\""}`, `{]`, `{"a" 1}`, `{"a":}`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		EachField(data, func(key, val []byte) { n++ })
		EachElement(data, func([]byte) {}) // must end
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		for name, want := range m {
			if got := Member(data, name); string(got) != string(want) {
				t.Fatalf("Member(%s, %q) = %s, encoding/json says %s", data, name, got, want)
			}
		}
		if n < len(m) {
			t.Fatalf("EachField(%s) saw %d members, encoding/json %d", data, n, len(m))
		}
	})
}
