package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// SameID reports whether a and b, two ids as raw JSON values without
// surrounding space (as Parse and Member give them), name the same
// request: the same bytes, or the same value spelled otherwise (1, 1.0 and
// 1e0; "a" and "\u0061"), as the TypeScript SDK finds a request by the id
// JSON.parse made of its cancel's requestId. Numbers are compared as the
// doubles a JSON parser reads (one too large for a double is only ever its
// own bytes), strings as encoding/json decodes them, and anything else byte
// for byte. Equal bytes are looked at first, and are the common case.
func SameID(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return false // no id names no request
	}
	if bytes.Equal(a, b) {
		return true
	}
	switch {
	case isString(a) && isString(b):
		sa, ok := Unquote(a)
		if !ok {
			return false
		}
		sb, ok := Unquote(b)
		return ok && sa == sb
	case isNumber(a) && isNumber(b):
		fa, err := strconv.ParseFloat(string(a), 64)
		if err != nil {
			return false
		}
		fb, err := strconv.ParseFloat(string(b), 64)
		return err == nil && fa == fb
	}
	return false
}

// An ID is one id read once, to be compared with many as SameID compares
// two: a cancel that names no request by its very bytes looks through all
// those in flight, and reading its id again for each cost a parse, and for
// a string an allocation, per request.
type ID struct {
	raw  json.RawMessage
	kind byte    // idString, idNumber, or 0: only its own bytes
	s    []byte  // a string's value, UTF-8 (Unquote makes it so)
	f    float64 // a number's value
}

const (
	idString = 's'
	idNumber = 'n'
)

// ReadID reads id, a raw JSON value without surrounding space, for Same.
// It keeps id, which must not change while the ID is in use.
func ReadID(id json.RawMessage) ID {
	x := ID{raw: id}
	switch {
	case len(id) == 0:
	case plainString(id):
		x.kind, x.s = idString, id[1:len(id)-1]
	case isString(id):
		if s, ok := Unquote(id); ok {
			x.kind, x.s = idString, []byte(s)
		}
	case isNumber(id):
		if f, err := strconv.ParseFloat(string(id), 64); err == nil {
			x.kind, x.f = idNumber, f
		}
	}
	return x
}

// Same reports SameID(the id x was read from, b). An id in flight is most
// often a short integer or an ASCII string without escapes, each compared
// in one pass over its bytes; others are read as SameID reads them.
func (x *ID) Same(b json.RawMessage) bool {
	if len(x.raw) == 0 || len(b) == 0 {
		return false
	}
	if bytes.Equal(x.raw, b) {
		return true
	}
	switch x.kind {
	case idString:
		if plainString(b) {
			return bytes.Equal(b[1:len(b)-1], x.s)
		}
		if !isString(b) {
			return false
		}
		s, ok := Unquote(b)
		return ok && s == string(x.s)
	case idNumber:
		if n, ok := smallInt(b); ok {
			return float64(n) == x.f
		}
		if !isNumber(b) {
			return false
		}
		f, err := strconv.ParseFloat(string(b), 64)
		return err == nil && f == x.f
	}
	return false
}

// plainString reports whether v is one JSON string, in ASCII and
// without escapes, whose value is the bytes between its quotes.
func plainString(v []byte) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// smallInt reads v if it is an integer of at most 15 digits spelled as JSON
// spells it (no leading zero, no plus sign), which a double holds exactly,
// so that its float64 is the one strconv.ParseFloat would give.
func smallInt(v []byte) (int64, bool) {
	i := 0
	if v[0] == '-' {
		i++
	}
	if i == len(v) || len(v)-i > 15 || v[i] == '0' && len(v)-i > 1 {
		return 0, false
	}
	var n int64
	for _, c := range v[i:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if i == 1 {
		n = -n
	}
	return n, true
}

// isString reports whether v is exactly one JSON string: Unquote takes
// one without escapes on trust.
func isString(v []byte) bool { return v[0] == '"' && checkString(v, 0) == len(v) }

// isNumber reports whether v is exactly one JSON number: strconv reads
// more (0x1p3, 1_0, Inf) than JSON spells.
func isNumber(v []byte) bool {
	return (v[0] == '-' || '0' <= v[0] && v[0] <= '9') && checkNumber(v, 0) == len(v)
}

// IntOf returns the integer a numeric id is when it is not spelled as
// strconv writes it (5.0, 5e0 and 0.5e1 for 5), as a JSON parser reads it:
// the TypeScript SDK finds the request a response answers by the number
// JSON.parse made of its id, so a peer that re-encodes numbers is still
// answered. It reports false for anything else, and from 2^53 on, where a
// double no longer holds every integer and two spellings of different ids
// could read alike. Callers try the plain spelling first; this is their
// slow path.
func IntOf(id json.RawMessage) (int64, bool) {
	if len(id) == 0 || !isNumber(id) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(id), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int64(f), true
}
