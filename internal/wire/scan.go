package wire

import (
	"encoding/binary"
	"math/bits"
)

// The validator checks JSON in one forward pass, accepting exactly what
// encoding/json.Valid accepts (fuzzed against it): any bytes of 0x80 and
// above in strings, valid UTF-8 or not, repeated member names, and nesting
// as deep as 10000. It is a small recursive descent that decodes nothing
// and allocates nothing; strings, most of a streamed message, are scanned
// eight bytes at a time. Every message the relay forwards goes through it
// once, so it is on the hot path: BenchmarkMembers and BenchmarkRelay show
// what it costs against jsontext's general decoder, which it replaced.
//
// Each step takes the data and the index it starts at and returns the
// index just past what it checked, or -1 where the data is not JSON: the
// position stays in a register rather than in a struct each step loads
// and stores: about a tenth less time per update than with the struct
// (both in one test binary, 30 alternating rounds).

// maxDepth is encoding/json's nesting limit: arrays and objects may nest
// this deep, and no deeper.
const maxDepth = 10000

// skipSpace returns the index of the first byte at or after i that is not
// space. Messages are mostly compact, so the test that ends the loop at
// any byte of a token comes first.
func skipSpace(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' {
		if c := d[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
		i++
	}
	return i
}

// checkValue checks the value that starts at i: callers have skipped the
// space before it.
func checkValue(d []byte, i, depth int) int {
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '"':
		return checkString(d, i)
	case c == '{':
		return checkObject(d, i, depth)
	case c == '[':
		return checkArray(d, i, depth)
	case c == '-' || '0' <= c && c <= '9':
		return checkNumber(d, i)
	case c == 't':
		return checkLiteral(d, i, "true")
	case c == 'f':
		return checkLiteral(d, i, "false")
	case c == 'n':
		return checkLiteral(d, i, "null")
	}
	return -1
}

func checkLiteral(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
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

// checkString checks the string whose opening quote is at i.
func checkString(d []byte, i int) int {
	i++
	for {
		for len(d)-i >= 8 {
			if m := special(binary.LittleEndian.Uint64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				goto stop // d[i] is the byte: no need to test it again
			}
			i += 8
		}
		for ; i < len(d); i++ {
			if c := d[i]; c == '"' || c == '\\' || c < 0x20 {
				break
			}
		}
		if i >= len(d) {
			return -1
		}
	stop:
		switch d[i] {
		case '"':
			return i + 1
		case '\\':
			i++
			if i >= len(d) {
				return -1
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(d)-i < 5 || !isHex(d[i+1]) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) {
					return -1
				}
				i += 5
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// checkNumber checks the number that starts at i.
func checkNumber(d []byte, i int) int {
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return -1
	case d[i] == '0':
		i++
	case '1' <= d[i] && d[i] <= '9':
		i = digits(d, i+1)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return -1
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
			return -1
		}
		i = j
	}
	return i
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// checkArray checks the array whose bracket is at i, at the given depth of
// nesting outside it.
func checkArray(d []byte, i, depth int) int {
	var more bool
	if depth++; depth > maxDepth {
		return -1
	}
	if i = skipSpace(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i = checkValue(d, i, depth); i < 0 {
			return -1
		}
		if i, more = next(d, i, ']'); !more {
			return i
		}
	}
}

// checkObject checks the object whose brace is at i, at the given depth
// of nesting outside it.
func checkObject(d []byte, i, depth int) int {
	if depth++; depth > maxDepth {
		return -1
	}
	i, more := firstMember(d, i)
	for more {
		_, _, _, i, more = checkMember(d, i, depth)
	}
	return i
}

// firstMember moves past the brace at i that opens an object, and the
// space after it: it reports more with the index of the first member, or
// returns the index past the close of an empty object.
func firstMember(d []byte, i int) (int, bool) {
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1, false
	}
	return i, true
}

// checkMember checks the member whose name starts at i, in an object whose
// members are at the given depth, and what follows it (see next). It
// returns where the name ends and where the value starts and ends, so the
// caller may slice them, and end, the index past a comma (more) or the
// object's close, or -1 where the data is not JSON. Parse makes the same
// steps for the top level itself (see ParseInto), where a params object
// is checked by checkParams.
func checkMember(d []byte, i, depth int) (keyEnd, valStart, valEnd, end int, more bool) {
	if i >= len(d) || d[i] != '"' {
		return 0, 0, 0, -1, false
	}
	if keyEnd = checkString(d, i); keyEnd < 0 {
		return 0, 0, 0, -1, false
	}
	if i = skipSpace(d, keyEnd); i >= len(d) || d[i] != ':' {
		return 0, 0, 0, -1, false
	}
	valStart = skipSpace(d, i+1)
	if valEnd = checkValue(d, valStart, depth); valEnd < 0 {
		return 0, 0, 0, -1, false
	}
	end, more = next(d, valEnd, '}')
	return keyEnd, valStart, valEnd, end, more
}

// next moves past what follows an element or member at i: a comma and
// the space after it, and then it reports more, or close. It returns -1
// for anything else.
func next(d []byte, i int, close byte) (int, bool) {
	if i = skipSpace(d, i); i < len(d) {
		switch d[i] {
		case ',':
			return skipSpace(d, i+1), true
		case close:
			return i + 1, false
		}
	}
	return -1, false
}

// onlySpace reports whether i is an index (not -1) after which only
// space is left.
func onlySpace(d []byte, i int) bool {
	return i >= 0 && skipSpace(d, i) == len(d)
}
