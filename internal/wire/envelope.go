package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Envelope methods: a proxy and its conductor exchange everything that
// concerns the proxy's successor inside one of these. The underscore spelling
// is the Rust SDK's dialect; Dialects has them all.
const (
	MethodSuccessor       = "proxy/successor"
	MethodSuccessorRust   = "_proxy/successor"
	MethodProxyInitialize = "proxy/initialize"
	MethodProxyInitRust   = "_proxy/initialize"
	MethodInitialize      = "initialize"
	MethodCancelRequest   = "$/cancel_request"
)

// Unwrap returns the method and raw params carried by the params of a
// successor envelope, or of an mcp/message, which carries an MCP message the
// same way. Any other member (the envelope's own _meta, the connectionId)
// is not returned: it belongs to the carrier, or for a successor envelope
// may be the carried message's own (Message.AppendCarriedExtra). params
// must come from a parsed Message (and so be valid JSON); the result
// aliases it.
func Unwrap(params json.RawMessage) (method string, inner json.RawMessage, err error) {
	var methodVal []byte
	ok := len(params) > 0 && EachField(params, func(key, val []byte) {
		if bytes.IndexByte(key, '\\') >= 0 {
			key = decodedKey(key) // names are read as encoding/json reads them
		}
		switch string(key) {
		case `"method"`:
			methodVal = val
		case `"params"`:
			inner = val
		}
	})
	if !ok {
		return "", nil, fmt.Errorf("%w: envelope params must be an object", ErrNotJSONRPC)
	}
	return carried(methodVal, inner)
}

// carried returns what an envelope carries, given the raw values of its
// method and params members (the last of each; nil where absent).
func carried(methodVal, inner []byte) (string, json.RawMessage, error) {
	method, ok := methodName(methodVal)
	if !ok || method == "" {
		return "", nil, errEnvelopeMethod
	}
	if string(inner) == "null" {
		inner = nil
	}
	return method, inner, nil
}

// An envelope is what Parse notes of a message's params, when they are an
// object, as it checks them: where the two members an envelope carries lie
// in them, so that unwrapping one (Message.Unwrap) does not scan its params
// a second time. It is small, as every message carries one.
type envelope struct {
	of             *byte    // the first byte of the params noted; nil: none
	n              int32    // their length
	method, params [2]int32 // where those members' values lie in them ([1] 0: absent)
	extra          bool     // they have a member but those and _meta (see AppendCarriedExtra)
}

// checkParams checks the object at i, a message's params, as checkValue
// would, noting in env where its method and params members lie. It notes
// nothing where a name is spelled with escapes, and might be either.
func checkParams(d []byte, i int, env *envelope) int {
	start := i
	var e envelope
	i, more := firstMember(d, i)
	noted := len(d)-start <= math.MaxInt32
	for more {
		k := i
		var keyEnd, valStart, valEnd int
		// The params object is at depth 2, inside the message's.
		if keyEnd, valStart, valEnd, i, more = checkMember(d, i, 2); i < 0 {
			return -1
		}
		switch key := d[k:keyEnd]; string(key) {
		case `"method"`:
			e.method = [2]int32{int32(valStart - start), int32(valEnd - start)}
		case `"params"`:
			e.params = [2]int32{int32(valStart - start), int32(valEnd - start)}
		case `"_meta"`: // the envelope's own
		default:
			// Escaped, either name takes at least 13 bytes: a letter's
			// only escape is \uXXXX.
			if len(key) >= 13 && bytes.IndexByte(key, '\\') >= 0 {
				noted = false
			}
			e.extra = true // maybe the carried message's: AppendCarriedExtra tells
		}
	}
	if noted && i >= 0 {
		e.of, e.n = &d[start], int32(i-start)
		*env = e
	}
	return i
}

// Unwrap is Unwrap(m.Params), answered from what Parse noted of the params
// as it checked them, where it could.
func (m *Message) Unwrap() (string, json.RawMessage, error) {
	if !m.notedEnvelope() {
		return Unwrap(m.Params)
	}
	e := &m.env
	var methodVal, inner []byte
	if e.method[1] != 0 {
		methodVal = m.Params[e.method[0]:e.method[1]]
	}
	if e.params[1] != 0 {
		inner = m.Params[e.params[0]:e.params[1]]
	}
	return carried(methodVal, inner)
}

// notedEnvelope reports whether what Parse noted describes m.Params as
// they are: a later params member, or params set by hand, have no notes.
func (m *Message) notedEnvelope() bool {
	e := &m.env
	return e.of != nil && len(m.Params) == int(e.n) && &m.Params[0] == e.of
}

var errEnvelopeMethod = fmt.Errorf("%w: envelope has no method string", ErrNotJSONRPC)

// AppendWrapped appends a request (id != nil) or notification whose method is
// envelope and whose params carry method and params, without copying params
// more than once.
func AppendWrapped(buf []byte, id json.RawMessage, envelope, method string, params json.RawMessage) []byte {
	if params == nil {
		buf = AppendString(append(AppendHead(buf, id, envelope), `{"method":`...), method)
		return append(buf, "}}"...)
	}
	return append(append(AppendWrappedHead(buf, id, envelope, method), params...), "}}"...)
}

// WrappedSize is at least the length of what AppendWrapped appends, but
// for escapes in method, so that a buffer made for it never grows.
func WrappedSize(id json.RawMessage, envelope, method string, params json.RawMessage) int {
	const frame = len(`{"jsonrpc":"2.0","id":,"method":"","params":{"method":"","params":}}`)
	return frame + len(id) + len(envelope) + len(method) + len(params)
}

// AppendWrappedHead appends a successor envelope up to the params it
// carries, which the caller writes next, followed by "}}".
func AppendWrappedHead(buf []byte, id json.RawMessage, envelope, method string) []byte {
	buf = AppendString(append(AppendHead(buf, id, envelope), `{"method":`...), method)
	return append(buf, `,"params":`...)
}

// IsBatch reports whether line is a JSON array: a JSON-RPC batch.
func IsBatch(line []byte) bool {
	s := scanner{data: line}
	s.skipSpace()
	return s.pos < len(line) && line[s.pos] == '[' && Valid(line)
}

// EachElement calls fn with the raw bytes of each element of the JSON array
// in data, which must be valid JSON. Given invalid JSON anyway, it stops at
// the first element that is not a value.
func EachElement(data []byte, fn func(val []byte)) {
	s := scanner{data: data}
	s.skipSpace()
	if !s.consume('[') {
		return
	}
	for s.pos < len(s.data) {
		s.skipSpace()
		if s.consume(']') {
			return
		}
		s.consume(',')
		s.skipSpace()
		val := s.value()
		if len(val) == 0 {
			return // no value moved the walk on: invalid JSON
		}
		fn(val)
	}
}
