package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// EditMember returns a copy of the JSON object obj with the value of its
// member name replaced by what edit returns. edit receives the old value, or
// nil if there is none, in which case the new member is added at the end. If
// edit returns an empty value, obj is returned unchanged. Every other byte of
// obj is kept, so a handler can change one field of a message's params, or of
// an answer, without decoding or disturbing the rest (such as _meta). A null
// or empty obj counts as {}. Names match as encoding/json reads them:
// escapes decoded, and each byte that is not valid UTF-8 read as U+FFFD.
func EditMember(obj json.RawMessage, name string, edit func(old json.RawMessage) (json.RawMessage, error)) (json.RawMessage, error) {
	orig := obj
	// JSON spells a name that is not valid UTF-8 with U+FFFD for each
	// invalid byte, as encoding/json writes and reads it: the member the
	// name stands for is the one so named, or the edit would add a second
	// member that reads as the first.
	key, _ := json.Marshal(name)
	if !utf8.ValidString(name) {
		json.Unmarshal(key, &name) // valid, so cannot fail
	}
	if t := bytes.Trim(obj, jsonSpace); len(t) == 0 || string(t) == "null" {
		obj = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	var (
		old        json.RawMessage
		start, end int // of old in obj
		members    int
	)
	for ; dec.More(); members++ {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotObject, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotObject, err)
		}
		if key == name { // the last one, if repeated, as decoders read it
			old, end = v, int(dec.InputOffset())
			start = end - len(v)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotObject, err)
	}
	closing := int(dec.InputOffset()) - 1
	if len(bytes.TrimLeft(obj[closing+1:], jsonSpace)) > 0 {
		// A decoder reading a stream would stop at the object; a message's
		// params end with it, so whatever follows is not JSON.
		return nil, fmt.Errorf("%w: data after the object", errNotObject)
	}

	val, err := edit(old)
	if err != nil {
		return nil, err
	}
	if len(val) == 0 {
		return orig, nil
	}
	if !Valid(val) {
		return nil, fmt.Errorf("new value of %q is not valid JSON", name)
	}
	if bytes.IndexByte(val, '\n') >= 0 { // a line must stay one line
		var buf bytes.Buffer
		json.Compact(&buf, val) // valid, so cannot fail
		val = buf.Bytes()
	}
	var out []byte
	if old != nil {
		out = make([]byte, 0, len(obj)-len(old)+len(val))
		out = append(append(append(out, obj[:start]...), val...), obj[end:]...)
		return out, nil
	}
	out = make([]byte, 0, len(obj)+len(key)+len(val)+2)
	out = append(out, obj[:closing]...)
	if members > 0 {
		out = append(out, ',')
	}
	out = append(append(append(out, key...), ':'), val...)
	return append(out, obj[closing:]...), nil
}

var errNotObject = errors.New("not a JSON object")

// jsonSpace is what JSON counts as white space (bytes.TrimSpace counts more).
const jsonSpace = " \t\r\n"

// SetPath sets the member at path inside the object obj to val, creating
// objects on the way, and keeps every other byte of obj.
func SetPath(obj json.RawMessage, path []string, val json.RawMessage) (json.RawMessage, error) {
	return EditMember(obj, path[0], func(old json.RawMessage) (json.RawMessage, error) {
		if len(path) == 1 {
			return val, nil
		}
		return SetPath(old, path[1:], val)
	})
}

// WithMCPOverACP advertises MCP-over-ACP in an InitializeResponse, keeping
// everything else as it is: what every proxy and the conductor must
// advertise, whatever the agent behind them supports. Where it goes depends
// on the protocol version the response settles on: ACP v1 puts it at
// agentCapabilities.mcpCapabilities.acp (true), v2 at
// capabilities.session.mcp.acp ({}). A v2 agent that declares no session
// capabilities supports no sessions, so no MCP servers: its answer is
// left alone rather than made to claim sessions.
func WithMCPOverACP(result json.RawMessage) (json.RawMessage, error) {
	if !isV2(result) {
		return SetPath(result, []string{"agentCapabilities", "mcpCapabilities", "acp"}, json.RawMessage("true"))
	}
	if t := bytes.TrimSpace(Member(Member(result, "capabilities"), "session")); len(t) == 0 || t[0] != '{' {
		return result, nil
	}
	return SetPath(result, []string{"capabilities", "session", "mcp", "acp"}, json.RawMessage("{}"))
}

// HasMCPOverACP reports whether an InitializeResponse advertises
// MCP-over-ACP where its version puts it (see WithMCPOverACP).
func HasMCPOverACP(result json.RawMessage) bool {
	v := string(bytes.TrimSpace(Member(MCPCapabilities(result), "acp")))
	return v != "" && v != "false" && v != "null"
}

// MCPCapabilities returns the raw MCP capabilities an InitializeResponse
// declares, from where its protocol version puts them (see WithMCPOverACP),
// or nil. In v1 a capability is true; in v2 it is an object.
func MCPCapabilities(result json.RawMessage) json.RawMessage {
	if !Valid(result) {
		return nil
	}
	if isV2(result) {
		return Member(Member(Member(result, "capabilities"), "session"), "mcp")
	}
	return Member(Member(result, "agentCapabilities"), "mcpCapabilities")
}

// IsV2 reports whether an initialize request or response settles on ACP
// version 2 or later.
func IsV2(obj json.RawMessage) bool { return isV2(obj) }

// isV2 reports whether an InitializeRequest or InitializeResponse is of ACP
// v2 or later, as its protocolVersion says. The version is read as the
// number it is, however it is spelled (2, 2.0, 2e0), as the SDKs read a JSON
// number: as a double. It must be a whole number.
func isV2(obj json.RawMessage) bool {
	if len(bytes.TrimSpace(obj)) == 0 || !Valid(obj) {
		return false
	}
	var v float64
	return json.Unmarshal(Member(obj, "protocolVersion"), &v) == nil && v >= 2 && v == math.Trunc(v)
}
