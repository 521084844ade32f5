package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// sameIDRef is SameID as encoding/json has it: the same bytes, or two ids
// that decode to the same string or float64. An id comes without the space
// around it, and anything encoding/json cannot read as one value is only
// ever its own bytes.
func sameIDRef(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	va, oka := idValue(a)
	vb, okb := idValue(b)
	return oka && okb && va == vb
}

func idValue(v []byte) (any, bool) {
	if isSpace(v[0]) || isSpace(v[len(v)-1]) {
		return nil, false
	}
	var x any
	if json.Unmarshal(v, &x) != nil {
		return nil, false
	}
	switch x.(type) {
	case string, float64:
		return x, true
	}
	return nil, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// TestSameID: an id is the same however it is spelled, as JSON.parse (and
// encoding/json) reads it; a number is never a string.
func TestSameID(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true},
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`1`, `1E+0`, true},
		{`1`, `10e-1`, true},
		{`1`, `0.1e1`, true},
		{`100`, `1e2`, true},
		{`1.5`, `15e-1`, true},
		{`-7`, `-7.000`, true},
		{`-7`, `-7e0`, true},
		{`123456789012345`, `1.23456789012345e14`, true},   // 15 digits, read without a parse
		{`1234567890123456`, `1.234567890123456e15`, true}, // 16, parsed
		{`-`, `-0`, false},
		{`00`, `0`, false},
		{`-01`, `-1`, false},
		{`0`, `-0`, true}, // one double, as JSON.parse and a Map take it
		{`0`, `1e-400`, true},
		{`9007199254740993`, `9007199254740992`, true}, // one double
		{`1`, `2`, false},
		{`1`, `-1`, false},
		{`1`, `"1"`, false},
		{`1`, `01`, false}, // not JSON
		{`1`, `0x1p0`, false},
		{`1`, `1 `, false},
		{`1e400`, `1e400`, true},
		{`1e400`, `10e399`, false}, // no double: only its own bytes
		{`1e400`, `1e401`, false},
		{`"a"`, `"a"`, true},
		{`"a"`, `"\u0061"`, true},
		{`"p-1"`, `"\u0070\u002D1"`, true},
		{`"a/b"`, `"a\/b"`, true},
		{`"é"`, `"\u00e9"`, true},
		{`"😀"`, `"\ud83d\ude00"`, true},
		{`"\ud800"`, `"\ufffd"`, true}, // encoding/json reads a lone surrogate as U+FFFD
		{`"a"`, `"A"`, false},
		{`"ab"`, `"a"`, false},
		{`""`, `"\u0000"`, false},
		{"\"\xff\"", `"\ufffd"`, true}, // invalid UTF-8 reads as U+FFFD
		{`"a"`, `"\u0041"`, false},
		{`"a"`, `"a `, false},
		{`"a\"b"`, `"a"b"`, false},
		{`"1"`, `1`, false},
		{`null`, `null`, true},
		{`null`, `"null"`, false},
		{`true`, `true`, true},
		{`[1]`, `[1.0]`, false}, // no id
		{`{}`, `{ }`, false},
		{``, ``, false},
		{`1`, ``, false},
	} {
		if got := SameID(json.RawMessage(tt.a), json.RawMessage(tt.b)); got != tt.want {
			t.Errorf("SameID(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := SameID(json.RawMessage(tt.b), json.RawMessage(tt.a)); got != tt.want {
			t.Errorf("SameID(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
		if got := sameAsRead(tt.a, tt.b); got != tt.want {
			t.Errorf("ReadID(%s).Same(%s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := sameAsRead(tt.b, tt.a); got != tt.want {
			t.Errorf("ReadID(%s).Same(%s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
		if ref := sameIDRef([]byte(tt.a), []byte(tt.b)); ref != tt.want {
			t.Errorf("encoding/json has %s and %s the same: %v, the table %v", tt.a, tt.b, ref, tt.want)
		}
	}
}

// sameAsRead is SameID(a, b) as a cancel's search asks it: a read once.
func sameAsRead(a, b string) bool {
	x := ReadID(json.RawMessage(a))
	return x.Same(json.RawMessage(b))
}

// FuzzSameID holds SameID, and ReadID's Same, to encoding/json, both ways
// round.
func FuzzSameID(f *testing.F) {
	for _, p := range [][2]string{
		{`1`, `1.0`}, {`1`, `1e0`}, {`-0`, `0`}, {`1e400`, `1e400`}, {`1e400`, `2e400`},
		{`"a"`, `"\u0061"`}, {`"\ud800"`, `"\udc00"`}, {`"\xff"`, `"\ufffd"`}, {`"a`, `"a"`},
		{`1`, `"1"`}, {`null`, `null`}, {`0x10`, `16`}, {` 1`, `1`},
	} {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		got := SameID(a, b)
		if want := sameIDRef(a, b); got != want {
			t.Fatalf("SameID(%s, %s) = %v, encoding/json reads %v", a, b, got, want)
		}
		if back := SameID(b, a); back != got {
			t.Fatalf("SameID(%s, %s) = %v, but %v the other way round", a, b, got, back)
		}
		if read := sameAsRead(string(a), string(b)); read != got {
			t.Fatalf("ReadID(%s).Same(%s) = %v, SameID %v", a, b, read, got)
		}
		if read := sameAsRead(string(b), string(a)); read != got {
			t.Fatalf("ReadID(%s).Same(%s) = %v, SameID %v", b, a, read, got)
		}
	})
}

// intOfRef is IntOf as encoding/json has it: a value it reads as a float64
// that is a whole number smaller than 2^53 in size.
func intOfRef(id []byte) (int64, bool) {
	if len(id) == 0 {
		return 0, false
	}
	v, ok := idValue(id)
	f, isNum := v.(float64)
	if !ok || !isNum || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// TestIntOf: a numeric id is the integer JSON.parse makes of it, however
// spelled; a string or a fraction is none.
func TestIntOf(t *testing.T) {
	for _, tc := range []struct {
		id string
		n  int64
		ok bool
	}{
		{`5`, 5, true},
		{`5.0`, 5, true},
		{`5e0`, 5, true},
		{`0.5e1`, 5, true},
		{`50E-1`, 5, true},
		{`-3.00`, -3, true},
		{`-0`, 0, true},
		{`9007199254740991`, 1<<53 - 1, true},
		{`9007199254740991.0`, 1<<53 - 1, true},
		{`9007199254740992`, 0, false}, // from 2^53 on, not every integer is a double
		{`9007199254740993`, 0, false}, // read as 2^53
		{`5.5`, 0, false},
		{`1e400`, 0, false},
		{`"5"`, 0, false},
		{`null`, 0, false},
		{`5 `, 0, false},
		{`+5`, 0, false},
		{`05`, 0, false},
		{``, 0, false},
	} {
		n, ok := IntOf(json.RawMessage(tc.id))
		if n != tc.n || ok != tc.ok {
			t.Errorf("IntOf(%s) = %d, %v; want %d, %v", tc.id, n, ok, tc.n, tc.ok)
		}
	}
}

// FuzzIntOf holds IntOf to encoding/json.
func FuzzIntOf(f *testing.F) {
	for _, s := range []string{`5`, `5.0`, `5e0`, `-0.0`, `1e400`, `"5"`, `9007199254740993`, `0x5`, `5_0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		n, ok := IntOf(id)
		if wn, wok := intOfRef(id); n != wn || ok != wok {
			t.Fatalf("IntOf(%s) = %d, %v; encoding/json reads %d, %v", id, n, ok, wn, wok)
		}
	})
}
