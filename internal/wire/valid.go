package wire

import (
	"bytes"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// validOptions make jsontext accept exactly what encoding/json.Valid
// accepts: JSON-RPC peers may repeat a member name or send invalid UTF-8 in
// strings, and such messages are forwarded as they are, not refused.
var validOptions = []jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
}

// Valid reports whether data is one valid JSON value, as encoding/json.Valid
// does. Every message the relay forwards is validated once, so this pass is
// on the hot path; jsontext's validator is the faster one (make bench, and
// BenchmarkRelay in ./conductor, show the difference).
func Valid(data []byte) bool {
	return jsontext.Value(data).IsValid(validOptions...)
}

// A memberDecoder is reused across messages: eachValidMember is on the hot
// path.
type memberDecoder struct {
	in  bytes.Buffer
	dec *jsontext.Decoder
}

var memberDecoders = sync.Pool{New: func() any { return new(memberDecoder) }}

// eachValidMember validates data as Valid does and, when it is an object,
// calls fn with each member's name and value as raw JSON, slices of data,
// in order: one pass where Valid and then EachField would make two. It
// reports whether data is valid, and whether it is an object. fn may be
// called before data turns out to be invalid.
func eachValidMember(data []byte, fn func(key, val []byte)) (valid, object bool) {
	d := memberDecoders.Get().(*memberDecoder)
	defer memberDecoders.Put(d)
	// From a bytes.Buffer the decoder reads data in place, without a copy.
	d.in = *bytes.NewBuffer(data)
	if d.dec == nil {
		d.dec = jsontext.NewDecoder(&d.in, validOptions...)
	} else {
		d.dec.Reset(&d.in, validOptions...)
	}
	defer func() { // keep no message alive in the pool
		d.in = bytes.Buffer{}
		d.dec.Reset(&d.in, validOptions...)
	}()
	dec := d.dec
	if dec.PeekKind() != '{' {
		return Valid(data), false
	}
	if _, err := dec.ReadToken(); err != nil {
		return false, false
	}
	// The offset after each value gives it as a slice of data itself.
	at := func(v jsontext.Value) []byte {
		end := int(dec.InputOffset())
		return data[end-len(v) : end]
	}
	for dec.PeekKind() != '}' {
		k, err := dec.ReadValue()
		if err != nil {
			return false, false
		}
		key := at(k)
		v, err := dec.ReadValue()
		if err != nil {
			return false, false
		}
		fn(key, at(v))
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return false, false
	}
	if _, err := dec.ReadToken(); err != io.EOF { // and nothing after it
		return false, false
	}
	return true, true
}
