package trace

import (
	"bytes"
	"encoding/json"
)

// Event types, the "type" of an Event.
const (
	TypeRequest      = "request"
	TypeResponse     = "response"
	TypeNotification = "notification"
)

// Protocols, the "protocol" of an Event.
const (
	ProtocolACP = "acp"
	ProtocolMCP = "mcp"
)

// An Event is one line of a trace. Its fields follow the Rust conductor's
// TraceEvent, with connection added: requests and notifications carry
// params, responses carry is_error and payload (the result, or the error object). Method and
// protocol are written on responses too, and bytes on every event: the size
// of params or payload as it crossed the conductor, kept when the detail is
// Metadata and the payload itself is not.
type Event struct {
	Type     string          `json:"type"`
	TS       float64         `json:"ts"` // seconds since the trace began
	Protocol string          `json:"protocol"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	ID       json.RawMessage `json:"id,omitempty"` // requests and responses
	Method   string          `json:"method"`
	Session  string          `json:"session,omitempty"`
	Params   json.RawMessage `json:"params,omitempty"` // requests and notifications
	IsError  *bool           `json:"is_error,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"` // responses
	Bytes    int             `json:"bytes"`
	// Connection is the Acp-Connection-Id of the network connection whose
	// chain sent the event, in the one trace acp-conductor serve writes for
	// all its connections; absent in a trace of one chain.
	Connection string `json:"connection,omitempty"`
}

// Detail says how much of each message a trace keeps.
type Detail string

const (
	// Full keeps params, results and errors as they crossed the conductor.
	Full Detail = "full"
	// Metadata keeps the type, time, from, to, id, method, session and
	// sizes, and of an error only its code: a trace safe to share.
	Metadata Detail = "metadata"
)

// Details lists the accepted values of Detail.
var Details = []Detail{Full, Metadata}

var null = json.RawMessage("null")

// member returns the raw value of a top-level member of a JSON object, or
// nil. Trace input was validated by the relay, so a plain decode suffices.
func member(obj json.RawMessage, name string) json.RawMessage {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil
	}
	return m[name]
}

// stringMember returns a top-level string member of obj, or "".
func stringMember(obj json.RawMessage, name string) string {
	var s string
	if raw := member(obj, name); raw != nil && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// encode appends e as one line of JSON, without escaping HTML characters
// inside strings: a trace shows the bytes that were relayed.
func (e *Event) encode(buf *bytes.Buffer) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(e)
}
