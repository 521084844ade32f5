package wire

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Members that JSON-RPC 2.0 does not define. The conductor rebuilds every
// message it re-addresses (a new id, an envelope put on or taken off), and
// what it does not understand must reach the recipient as it came: so the
// rebuilt message gets them back, after the members it writes, each name
// and value as the bytes that arrived, in their order. Finding them takes
// a scan of the message, which runs only where Parse noted that there are
// some.

// AppendExtra appends to buf the top-level members of m that JSON-RPC does
// not define (see Extra), each as `,name:value`, for a rebuilt m to carry
// before its closing brace. It appends nothing, at no cost, when there are
// none, or when m was not parsed.
func (m *Message) AppendExtra(buf []byte) []byte {
	if !m.extra {
		return buf
	}
	EachField(m.Raw, func(key, val []byte) {
		if !rpcMember(key) {
			buf = appendMember(buf, key, val)
		}
	})
	return buf
}

// AppendCarriedExtra is AppendExtra for the message a successor envelope
// m carries: the members of m's params beside that message's method and
// params, which are the carried message's own, as a relay that unwraps
// the envelope writes them on the message it delivers. The envelope's
// _meta is the envelope's, as the proxy-chains schema has it, and a name
// JSON-RPC defines (an "id" there, say) would change what the delivered
// message is: neither is carried. Going the other way, a relay that wraps
// a message puts what AppendExtra gives in the envelope's params, so that
// the members stay with the message they came with.
func (m *Message) AppendCarriedExtra(buf []byte) []byte {
	if !m.CarriedExtra() {
		return buf
	}
	EachField(m.Params, func(key, val []byte) {
		if !rpcMember(key) && !keyIs(key, "_meta") {
			buf = appendMember(buf, key, val)
		}
	})
	return buf
}

// AppendCallExtra appends a request (id != nil) or notification of method
// with params (nil for none) and extra, members JSON-RPC does not define,
// each `,name:value` (AppendExtra, AppendCarriedExtra). They go after
// method and params; wrapped in a successor envelope named envelope (not
// ""), inside its params, so that they stay with the message they came
// with. Such messages are rare, so the line is built whole, with room for
// the caller's newline, not in segments.
func AppendCallExtra(buf []byte, id json.RawMessage, envelope, method string, params, extra json.RawMessage) []byte {
	buf = slices.Grow(buf, WrappedSize(id, envelope, method, params)+len(extra)+1)
	if envelope != "" {
		buf = AppendString(append(AppendHead(buf, id, envelope), `{"method":`...), method)
	} else {
		buf = appendCall(buf, id, method)
	}
	if params != nil {
		buf = append(append(buf, `,"params":`...), params...)
	}
	buf = append(append(buf, extra...), '}')
	if envelope != "" {
		buf = append(buf, '}')
	}
	return buf
}

// CarriedExtra reports whether a successor envelope m may carry members
// that AppendCarriedExtra would give: false, at no cost, when Parse saw
// none in its params (the common case); true where it took no notes.
func (m *Message) CarriedExtra() bool { return !m.notedEnvelope() || m.env.extra }

// rpcMember reports whether the raw name key is one JSON-RPC 2.0 defines
// for a message's top level, read as Parse reads it, escapes decoded.
func rpcMember(key []byte) bool {
	if bytes.IndexByte(key, '\\') >= 0 {
		key = decodedKey(key)
	}
	switch string(key) {
	case `"jsonrpc"`, `"id"`, `"method"`, `"params"`, `"result"`, `"error"`:
		return true
	}
	return false
}

func appendMember(buf, key, val []byte) []byte {
	buf = append(append(append(buf, ','), key...), ':')
	return append(buf, val...)
}
