package trace

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Event types, the "type" of an Event.
const (
	TypeRequest      = "request"
	TypeResponse     = "response"
	TypeNotification = "notification"
	// TypeTrace is a line that is no message: in the Rust conductor's
	// format, a component's log line ({component, level, message,
	// fields}). Ours marks a gap: Fields.dropped messages the recorder
	// left out there, as its writer fell behind.
	TypeTrace = "trace"
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

	// A TypeTrace event has these, and none of the above but type and ts.
	Component string          `json:"component,omitempty"`
	Level     string          `json:"level,omitempty"`
	Message   string          `json:"message,omitempty"`
	Fields    json.RawMessage `json:"fields,omitempty"`
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
// nil. Trace input was validated by the relay.
func member(obj json.RawMessage, name string) json.RawMessage { return wire.Member(obj, name) }

// stringMember returns a top-level string member of obj, or "".
func stringMember(obj json.RawMessage, name string) string {
	s, _ := wire.Unquote(member(obj, name))
	return s
}

// appendTo appends e to buf as one line of JSON, as encoding/json would
// write it without escaping HTML characters (a trace shows the bytes that
// were relayed), but for the raw members: id, params and payload are
// written as they crossed the conductor, made compact only when they span
// lines. It fails only on a raw member that is not valid JSON, which the
// relay would not have passed on. encoding/json took about ten times as
// long (BenchmarkWrite), as much as the relay spends on the message.
func (e *Event) appendTo(buf []byte) ([]byte, error) {
	var err error
	buf = wire.AppendString(append(buf, `{"type":`...), e.Type)
	buf = strconv.AppendFloat(append(buf, `,"ts":`...), e.TS, 'f', -1, 64)
	if e.Type == TypeTrace {
		buf = wire.AppendString(append(buf, `,"component":`...), e.Component)
		buf = wire.AppendString(append(buf, `,"level":`...), e.Level)
		buf = wire.AppendString(append(buf, `,"message":`...), e.Message)
		if len(e.Fields) > 0 {
			buf, err = appendRaw(append(buf, `,"fields":`...), e.Fields, err)
		}
		return append(buf, "}\n"...), err
	}
	buf = wire.AppendString(append(buf, `,"protocol":`...), e.Protocol)
	buf = wire.AppendString(append(buf, `,"from":`...), e.From)
	buf = wire.AppendString(append(buf, `,"to":`...), e.To)
	if len(e.ID) > 0 {
		buf, err = appendRaw(append(buf, `,"id":`...), e.ID, err)
	}
	buf = wire.AppendString(append(buf, `,"method":`...), e.Method)
	if e.Session != "" {
		buf = wire.AppendString(append(buf, `,"session":`...), e.Session)
	}
	if len(e.Params) > 0 {
		buf, err = appendRaw(append(buf, `,"params":`...), e.Params, err)
	}
	if e.IsError != nil {
		buf = strconv.AppendBool(append(buf, `,"is_error":`...), *e.IsError)
	}
	if len(e.Payload) > 0 {
		buf, err = appendRaw(append(buf, `,"payload":`...), e.Payload, err)
	}
	buf = strconv.AppendInt(append(buf, `,"bytes":`...), int64(e.Bytes), 10)
	if e.Connection != "" {
		buf = wire.AppendString(append(buf, `,"connection":`...), e.Connection)
	}
	return append(buf, "}\n"...), err
}

// appendRaw appends v, made compact if it spans lines (a message that came
// over HTTP or a WebSocket may), and keeps the first error.
func appendRaw(buf []byte, v json.RawMessage, err error) ([]byte, error) {
	if bytes.IndexByte(v, '\n') < 0 && bytes.IndexByte(v, '\r') < 0 {
		return append(buf, v...), err
	}
	b := bytes.NewBuffer(buf)
	if cerr := json.Compact(b, v); cerr != nil && err == nil {
		err = cerr
	}
	return b.Bytes(), err
}
