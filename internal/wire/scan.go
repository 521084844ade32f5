package wire

import (
	"encoding/binary"
	"math/bits"
)

// The validator checks JSON in one forward pass, accepting exactly what
// encoding/json.Valid accepts (fuzzed against it): any bytes of 0x80 and
// above in strings, valid UTF-8 or not, repeated member names, and nesting
// as deep as 10000. It decodes nothing, and allocates nothing for a line
// nested up to 64 deep: the top level and a message's params are
// walked member by member (Parse notes where they lie), what nests in
// them by one loop (checkNested), and strings, most of a streamed
// message, eight bytes at a time. Every message the relay forwards goes through it
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

// checkValue checks the value that starts at i, at the given depth of
// nesting outside it: callers have skipped the space before it.
func checkValue(d []byte, i, depth int) int {
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '"':
		return checkString(d, i)
	case c == '{' || c == '[':
		return checkNested(d, i, depth)
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

// checkNested checks the array or object that starts at i, at the given
// depth of nesting outside it. It checks every value and member in it by
// one loop, not by a call for each, keeping which containers are open as
// a bit each (an object's set): a line nested 10000 deep costs 157 words,
// not a goroutine stack grown by 10000 frames, and a streamed update's
// params are checked in about 0.85 of the time (BenchmarkMembers).
func checkNested(d []byte, i, depth int) int {
	var (
		open   int      // containers open in this value
		kinds  uint64   // the first 64 containers' kinds, the outermost lowest
		deeper []uint64 // the kinds of those past 64, 64 a word: seldom any
	)
value: // a value starts at i
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; c {
	case '"':
		if i = checkString(d, i); i < 0 {
			return -1
		}
	case '{', '[':
		if depth+open >= maxDepth {
			return -1
		}
		var bit uint64
		if c == '{' {
			bit = 1
		}
		if open < 64 {
			kinds = kinds&^(1<<open) | bit<<open
		} else {
			w, b := (open-64)/64, (open-64)%64
			if w == len(deeper) {
				deeper = append(deeper, 0)
			}
			deeper[w] = deeper[w]&^(1<<b) | bit<<b
		}
		open++
		if i = skipSpace(d, i+1); i < len(d) && d[i] == c+2 { // '}' and ']' are '{' and '[' plus 2
			i++
			open--
			break
		}
		if c == '[' {
			goto value
		}
		goto member
	case 't':
		if i = checkLiteral(d, i, "true"); i < 0 {
			return -1
		}
	case 'f':
		if i = checkLiteral(d, i, "false"); i < 0 {
			return -1
		}
	case 'n':
		if i = checkLiteral(d, i, "null"); i < 0 {
			return -1
		}
	default:
		if c != '-' && (c < '0' || c > '9') {
			return -1
		}
		if i = checkNumber(d, i); i < 0 {
			return -1
		}
	}
	// A value ends at i: what follows it closes its container, or goes
	// on to the container's next value or member.
	for open > 0 {
		if i = skipSpace(d, i); i >= len(d) {
			return -1
		}
		var object bool
		if top := open - 1; top < 64 {
			object = kinds>>top&1 != 0
		} else {
			object = deeper[(top-64)/64]>>((top-64)%64)&1 != 0
		}
		switch d[i] {
		case ',':
			i = skipSpace(d, i+1)
			if object {
				goto member
			}
			goto value
		case '}':
			if !object {
				return -1
			}
		case ']':
			if object {
				return -1
			}
		default:
			return -1
		}
		i++
		open--
	}
	return i
member: // an object's member starts at i
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	if i = checkString(d, i); i < 0 {
		return -1
	}
	if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
		return -1
	}
	i = skipSpace(d, i+1)
	goto value
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
			w := binary.LittleEndian.Uint64(d[i:])
			if m := special(w); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				if endsAt(w, m) {
					return i + 1
				}
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

// endsAt reports whether the first byte special found in w, m being what
// it returned, is a quote, as it mostly is: the string ends there. Telling
// so from the word saves loading the byte again, a load that would wait
// for the count of the bytes before it.
func endsAt(w, m uint64) bool {
	quote := w ^ (lows * '"')
	return (quote-lows) & ^quote & m & -m != 0
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
