package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Reading the members of a JSON object without decoding it. Names are read
// as encoding/json reads them: escapes decoded, invalid UTF-8 replaced, the
// last of repeated names counting.

// EachField calls fn with the raw key and value of each member of the JSON
// object in data, which must already be valid JSON. It reports false if data
// is not an object. Given invalid JSON anyway, it stops, reporting false, at
// the first member that is not a string, a colon and a value.
func EachField(data []byte, fn func(key, val []byte)) bool {
	s := scanner{data: data}
	s.skipSpace()
	if !s.consume('{') {
		return false
	}
	for s.pos < len(s.data) {
		s.skipSpace()
		if s.consume('}') {
			break
		}
		s.consume(',')
		s.skipSpace()
		// Each turn must move past a key, or invalid JSON would hold it
		// in place for ever.
		if s.pos == len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		key := s.value()
		s.skipSpace()
		if !s.consume(':') {
			return false
		}
		s.skipSpace()
		val := s.value()
		if len(val) == 0 {
			return false
		}
		fn(key, val)
	}
	return true
}

// Member returns the raw value of the member name of the JSON object obj,
// or nil if obj is not an object or has none. obj must be valid JSON, as
// every part of a parsed Message is. Names are compared as JSON decoders
// compare them, escapes decoded; of repeated names the last wins, as with
// encoding/json.
func Member(obj json.RawMessage, name string) json.RawMessage {
	if len(obj) == 0 {
		return nil
	}
	var val json.RawMessage
	EachField(obj, func(key, v []byte) {
		if keyIs(key, name) {
			val = v
		}
	})
	return val
}

// keyIs reports whether the raw JSON string key names name.
func keyIs(key []byte, name string) bool {
	if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
		return true
	}
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return false // as raw as it can be, and not name
	}
	s, ok := Unquote(key)
	return ok && s == name
}
