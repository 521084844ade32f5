package wire

import (
	"encoding/json"
	"strings"
)

// memberScan finds the top-level "id" and "method" of a JSON object given
// to it in pieces, and whether it has a "result" or "error", keeping
// nothing else: an over-long line is read past in fragments, and whoever
// sent it must still be answered wherever in the line those members are.
// Given an array, a batch, it finds the same of each object in it, and
// keeps the ids of its requests and responses, for each of them to be
// answered or failed. It is lenient: on input that is not JSON it finds
// what it can.
type memberScan struct {
	depth       int // of nesting; an object's members are at top()
	inStr, esc  bool
	state       scanState
	key         []byte // of the member being read, raw, capped
	val         []byte // of the member being read, if it is one we keep
	keep        bool   // whether val is being gathered
	keepID      bool   // whether it is the id's, not the method's
	gap         bool   // whitespace came after the start of val
	id, method  []byte // raw, as found, of the object being read
	hasResponse bool
	hadID       bool // it has an id member, kept in id or not

	started bool // something other than whitespace has come
	batch   bool // the line is an array: its entries are the objects read
	inObj   bool // the value whose members would be at top() is an object
	// A batch's requests and responses, in order: their ids one after
	// another in ids, each ending where its entry says. Bounded
	// (maxBatchEntries, maxBatchIDBytes): the line has no end the scan
	// can count on. unkept counts the requests not kept, past the bounds
	// or with an id that could not be (see result), unkeptResponses the
	// responses past the bounds.
	ids             []byte
	calls           []scannedCall
	unkept          int
	unkeptResponses int
}

// Bounds on what the scan keeps of an over-long batch, which may go on
// for as long as its sender writes: however long it is, what is kept of
// it, and the batch of refusals that answers it, stay a few MiB.
const (
	maxBatchEntries = 1 << 16
	maxBatchIDBytes = 1 << 20
)

// A scannedCall is one request or response of a batch, as the scan keeps
// it.
type scannedCall struct {
	end        int // of its id in memberScan.ids
	isResponse bool
}

// top is the depth of the members read: those of the line's object, or
// of each object in the line's array.
func (s *memberScan) top() int {
	if s.batch {
		return 2
	}
	return 1
}

type scanState uint8

const (
	beforeKey scanState = iota
	inKey
	afterKey
	inValue
)

// maxScanned caps a kept key or value: ids and method names are short.
const maxScanned = 1 << 10

func (s *memberScan) feed(b []byte) {
	for _, c := range b {
		s.byte(c)
	}
}

func (s *memberScan) byte(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.state == inKey {
				s.state = afterKey
				return
			}
		}
		if s.state == inKey {
			s.key = appendCapped(s.key, c)
		} else if s.keep {
			s.val = appendCapped(s.val, c)
		}
		return
	}
	switch c {
	case ' ', '\t', '\r', '\n':
		// A gap inside a kept value is kept (as one space, should the
		// value go on), so that "1 2" is no id, rather than the 12 its
		// sender never wrote.
		s.gap = s.keep && len(s.val) > 0
		return
	}
	if !s.started {
		s.started = true
		if c == '[' {
			s.batch, s.depth = true, 1
			return
		}
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == s.top() && s.inObj && s.state == beforeKey {
			s.state, s.key = inKey, s.key[:0]
			return
		}
	case '{', '[':
		s.depth++
		if s.depth == s.top() {
			s.state, s.inObj = beforeKey, c == '{'
			s.id, s.method, s.hasResponse, s.hadID = nil, nil, false, false
			return
		}
	case '}', ']':
		s.depth--
		if s.depth == s.top()-1 {
			s.endValue()
			if s.batch && s.inObj {
				s.endEntry()
			}
			s.inObj = false
			return
		}
	case ':':
		if s.depth == s.top() && s.state == afterKey {
			s.state = inValue
			k := string(s.key)
			if strings.IndexByte(k, '\\') >= 0 {
				// A name is read as encoding/json reads it, its escapes
				// decoded: "m\u0065thod" is a method, whose request is
				// answered like any other.
				if d, ok := Unquote([]byte(`"` + k + `"`)); ok {
					k = d
				}
			}
			s.keep, s.keepID, s.val, s.gap = k == "id" || k == "method", k == "id", s.val[:0], false
			switch k {
			case "result", "error":
				s.hasResponse = true
			case "id":
				// The last id counts, kept or not: one too long to keep
				// must not leave an earlier one standing.
				s.id, s.hadID = nil, true
			case "method":
				s.method = nil
			}
			return
		}
	case ',':
		if s.depth == s.top() {
			s.endValue()
			s.state = beforeKey
			return
		}
	}
	if s.keep {
		if s.gap {
			s.val = appendCapped(s.val, ' ')
		}
		s.val = appendCapped(s.val, c)
	}
	s.gap = false
}

// endValue records the member just read, if it is one that is kept.
func (s *memberScan) endValue() {
	if s.state == inValue && s.keep && len(s.val) <= maxScanned {
		v := append([]byte(nil), s.val...)
		if s.keepID {
			s.id = v
		} else {
			s.method = v
		}
	}
	s.keep = false
}

func appendCapped(b []byte, c byte) []byte {
	if len(b) > maxScanned {
		return b // over the cap: known to be too long, and no longer kept
	}
	return append(b, c)
}

// endEntry records the batch entry just read if it is a request or a
// response with a valid id: one that is owed an answer, or that answers.
// A request whose id was not kept is counted, to be answered under null;
// so is a response past the bounds, whose call cannot be told.
func (s *memberScan) endEntry() {
	id, method, isResponse := s.result()
	switch {
	case id != nil && (method != "" || isResponse):
		if len(s.calls) == maxBatchEntries || len(s.ids)+len(id) > maxBatchIDBytes {
			if isResponse {
				s.unkeptResponses++
			} else {
				s.unkept++
			}
			break
		}
		s.ids = append(s.ids, id...)
		s.calls = append(s.calls, scannedCall{end: len(s.ids), isResponse: isResponse})
	case method != "" && s.hadID:
		s.unkept++
	}
	s.id, s.method, s.hasResponse, s.hadID = nil, nil, false, false
}

// result returns what the scan found of the object last read: the id if
// it is a valid one, the method if it is a string, and whether the message
// is a response. An id too long to keep (over maxScanned), or not one
// JSON-RPC allows, is nil, and hadID says there was one. Of a batch, see
// entries.
func (s *memberScan) result() (id json.RawMessage, method string, isResponse bool) {
	if Valid(s.id) && validID(s.id) {
		id = s.id
	}
	if len(s.method) > 0 && s.method[0] == '"' {
		method, _ = Unquote(s.method)
	}
	return id, method, s.hasResponse && method == ""
}

// entries returns a batch's requests and responses, in order, their ids
// slices of one array.
func (s *memberScan) entries() []OversizeEntry {
	if len(s.calls) == 0 {
		return nil
	}
	out := make([]OversizeEntry, len(s.calls))
	start := 0
	for i, c := range s.calls {
		out[i] = OversizeEntry{ID: s.ids[start:c.end:c.end], IsResponse: c.isResponse}
		start = c.end
	}
	return out
}

// RefuseBatch returns the answer to a batch too long to keep, as JSON-RPC
// answers a batch: one array holding, under each request's id in entries,
// the error e, and, if unkept is set, unkept under null for the requests
// whose ids were not kept (OversizeError.BatchUnkept); nil when there is
// no request to answer. Responses in entries are skipped: they answer the
// receiver's own calls, which it fails itself. The conductor and the
// sample agent answer an over-long batch with it alike.
func RefuseBatch(entries []OversizeEntry, e, unkept *Error) []byte {
	refusal := e.Encode()
	out := []byte{'['}
	for _, en := range entries {
		if en.IsResponse {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		m := Message{ID: en.ID, Error: refusal}
		out = m.Append(out)
	}
	if unkept != nil {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = ErrorResponse(nil, unkept).Append(out)
	}
	if len(out) == 1 {
		return nil
	}
	return append(out, ']')
}
