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
