package wire

import (
	"encoding/binary"
	"math/bits"
)

// A validator checks JSON in one forward pass, accepting exactly what
// encoding/json.Valid accepts (fuzzed against it): any bytes of 0x80 and
// above in strings, valid UTF-8 or not, repeated member names, and nesting
// as deep as 10000. It is a small recursive descent that decodes nothing
// and allocates nothing; strings, most of a streamed message, are scanned
// eight bytes at a time. Every message the relay forwards goes through it
// once, so it is on the hot path: BenchmarkMembers and BenchmarkRelay show
// what it costs against jsontext's general decoder, which it replaced.
type validator struct {
	data  []byte
	pos   int
	depth int
}

// maxDepth is encoding/json's nesting limit: arrays and objects may nest
// this deep, and no deeper.
const maxDepth = 10000

func (v *validator) skipSpace() {
	for v.pos < len(v.data) {
		switch v.data[v.pos] {
		case ' ', '\t', '\n', '\r':
			v.pos++
		default:
			return
		}
	}
}

// value checks the value at v.pos, after any space, and moves past it.
func (v *validator) value() bool {
	v.skipSpace()
	if v.pos >= len(v.data) {
		return false
	}
	switch c := v.data[v.pos]; {
	case c == '"':
		return v.str()
	case c == '{':
		return v.object(nil)
	case c == '[':
		return v.array()
	case c == '-' || '0' <= c && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *validator) literal(lit string) bool {
	if len(v.data)-v.pos < len(lit) || string(v.data[v.pos:v.pos+len(lit)]) != lit {
		return false
	}
	v.pos += len(lit)
	return true
}

// Eight-byte words for finding, in a string, the first byte that is a
// quote, a backslash or a control character.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special returns a word with the high bit set in each byte of w that is a
// quote, a backslash or below 0x20, and maybe in bytes after the first
// such byte (borrows travel upwards), never in bytes before it.
func special(w uint64) uint64 {
	quote := w ^ (lows * '"')
	slash := w ^ (lows * '\\')
	return ((quote - lows) | (slash - lows) | (w - lows*0x20)) & ^w & highs
}

// str checks the string at v.pos, its opening quote, and moves past it.
func (v *validator) str() bool {
	d, i := v.data, v.pos+1
	for {
		for len(d)-i >= 8 {
			if m := special(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for ; i < len(d); i++ {
			if c := d[i]; c == '"' || c == '\\' || c < 0x20 {
				break
			}
		}
		if i >= len(d) {
			return false
		}
		switch d[i] {
		case '"':
			v.pos = i + 1
			return true
		case '\\':
			i++
			if i >= len(d) {
				return false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(d)-i < 5 || !isHex(d[i+1]) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) {
					return false
				}
				i += 5
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number checks the number at v.pos and moves past it.
func (v *validator) number() bool {
	d, i := v.data, v.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return false
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return false
		}
		i = j
	}
	v.pos = i
	return true
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

func (v *validator) array() bool {
	if empty, ok := v.open(']'); empty || !ok {
		return ok
	}
	for {
		if !v.value() {
			return false
		}
		if more, ok := v.next(']'); !more {
			return ok
		}
	}
}

// open moves past the bracket or brace at v.pos, and past close if the
// array or object is empty, which it reports.
func (v *validator) open(close byte) (empty, ok bool) {
	if v.depth++; v.depth > maxDepth {
		return false, false
	}
	v.pos++
	v.skipSpace()
	if v.pos < len(v.data) && v.data[v.pos] == close {
		v.pos++
		v.depth--
		return true, true
	}
	return false, true
}

// next moves past what follows an element or member: a comma, and then
// it reports more, or close, and then it reports ok.
func (v *validator) next(close byte) (more, ok bool) {
	v.skipSpace()
	if v.pos >= len(v.data) {
		return false, false
	}
	switch v.data[v.pos] {
	case ',':
		v.pos++
		return true, true
	case close:
		v.pos++
		v.depth--
		return false, true
	}
	return false, false
}

// object checks the object at v.pos and moves past it, calling fn, when
// it is not nil, with each member's name (a raw JSON string) and value as
// slices of the data, in order.
func (v *validator) object(fn func(key, val []byte)) bool {
	if empty, ok := v.open('}'); empty || !ok {
		return ok
	}
	for {
		v.skipSpace()
		if v.pos >= len(v.data) || v.data[v.pos] != '"' {
			return false
		}
		k := v.pos
		if !v.str() {
			return false
		}
		key := v.data[k:v.pos]
		v.skipSpace()
		if v.pos >= len(v.data) || v.data[v.pos] != ':' {
			return false
		}
		v.pos++
		v.skipSpace()
		start := v.pos
		if !v.value() {
			return false
		}
		if fn != nil {
			fn(key, v.data[start:v.pos])
		}
		if more, ok := v.next('}'); !more {
			return ok
		}
	}
}

// end reports whether only space is left.
func (v *validator) end() bool {
	v.skipSpace()
	return v.pos == len(v.data)
}
