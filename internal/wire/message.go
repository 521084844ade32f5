package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/creachadair/jrpc2"
)

// A Message is one JSON-RPC 2.0 request, notification or response. Its raw
// fields alias the bytes it was parsed from and are forwarded as they are.
type Message struct {
	ID     json.RawMessage // absent (nil) for notifications
	Method string          // empty for responses
	Params json.RawMessage // absent (nil) if the message had none
	Result json.RawMessage
	Error  json.RawMessage

	// Raw is the whole message as it was parsed.
	Raw json.RawMessage

	plain    bool     // see Plain
	badError bool     // see MalformedError
	extra    bool     // see Extra
	env      envelope // see Unwrap
}

// Plain reports whether Raw means to any reader exactly what m's fields
// say, so that a relay may forward Raw itself when it changes nothing: no
// top-level name is escaped or repeated. (A reader that takes the first of
// two "method" members, or does not decode an escaped name, could otherwise
// see a different message from Parse's.)
func (m *Message) Plain() bool { return m.plain }

// MalformedError reports whether m is a response whose error is not the
// object JSON-RPC 2.0 requires, with an integer "code" and a string
// "message": "error": null with no result beside it, say, which readers
// such as the TypeScript SDK refuse as no response at all. Parse notes it
// as it checks the error, so that asking costs nothing.
func (m *Message) MalformedError() bool { return m.badError }

// Extra reports whether m has a top-level member JSON-RPC 2.0 does not
// define (anything but jsonrpc, id, method, params, result and error),
// which a relay that rebuilds m must carry on (AppendExtra). Parse notes
// it as it reads the names, so that asking costs nothing.
func (m *Message) Extra() bool { return m.extra }

// IsRequest reports whether m is a request: a method and an id.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification: a method and no id.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// IsResponse reports whether m is a response: a result or error and no method.
func (m *Message) IsResponse() bool { return m.Method == "" }

// Errors returned by Parse. ErrNotJSON maps to JSON-RPC -32700 and
// ErrNotJSONRPC to -32600; an object that is no message comes as an
// *InvalidError, which wraps ErrNotJSONRPC and may say the id to answer.
var (
	ErrNotJSON    = errors.New("not valid JSON")
	ErrNotJSONRPC = errors.New("not a JSON-RPC 2.0 message")
)

// Parse reads one message from data. It validates data as JSON, then scans only
// its top level: nested values are kept as raw sub-slices of data, never
// decoded. data must not be modified while the message is in use.
//
// Parse reads a message as encoding/json would: member names are compared
// with their escapes decoded ("m\u0065thod" is "method"), and of a repeated
// member the last one counts. It requires "jsonrpc":"2.0", as JSON-RPC 2.0
// does and as every ACP and MCP SDK sends; a message without it is refused
// like any other invalid request.
func Parse(data []byte) (*Message, error) {
	m := new(Message)
	if err := ParseInto(m, data); err != nil {
		return nil, err
	}
	return m, nil
}

// ParseInto is Parse into a message of the caller's, which it overwrites:
// a relay that parses every line it reads reuses one message for those it
// is done with before the next, instead of allocating one for each. m is
// left unspecified when it returns an error.
func ParseInto(m *Message, data []byte) error {
	*m = Message{Raw: data}
	// What the members said, a bit each, in one word that the loop keeps
	// in a register across its calls: the members JSON-RPC defines, as
	// they are seen, and what was found in them.
	const (
		hasVersion, hasID, hasMethod, hasParams, hasResult, hasError = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5
		goodVersion, badMethod, odd, goodError, hasExtra             = 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10
	)
	var said uint16
	// The one pass that validates data and finds its members: see scan.go.
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		if !onlySpace(data, checkValue(data, i, 0)) {
			return ErrNotJSON
		}
		return fmt.Errorf("%w: not an object", ErrNotJSONRPC)
	}
	i, more := firstMember(data, i)
	for more {
		// checkMember's steps, but for the params object of what may be an
		// envelope, which checkParams checks, noting what an envelope
		// carries (see Message.Unwrap). A method named before its params,
		// as every SDK writes them, says whether it is one.
		if i >= len(data) || data[i] != '"' {
			return ErrNotJSON
		}
		k, keyEnd := i, checkString(data, i)
		if keyEnd < 0 {
			return ErrNotJSON
		}
		if i = skipSpace(data, keyEnd); i >= len(data) || data[i] != ':' {
			return ErrNotJSON
		}
		valStart, valEnd := skipSpace(data, i+1), 0
		errorObject := false // the value of an "error" so spelled is an error object
		switch {
		case valStart >= len(data) || data[valStart] != '{':
			valEnd = checkValue(data, valStart, 1)
		case string(data[k:keyEnd]) == `"params"` && (said&hasMethod == 0 || IsSuccessor(m.Method)):
			valEnd = checkParams(data, valStart, &m.env)
		case string(data[k:keyEnd]) == `"error"`:
			valEnd, errorObject = checkError(data, valStart)
		default:
			valEnd = checkValue(data, valStart, 1)
		}
		if valEnd < 0 {
			return ErrNotJSON
		}
		if i, more = next(data, valEnd, '}'); i < 0 {
			return ErrNotJSON
		}
		key, val := data[k:keyEnd], data[valStart:valEnd]
		var bit uint16
		decoded := false
	again:
		switch string(key) { // the compiler avoids allocating for this switch
		case `"jsonrpc"`:
			bit, said = hasVersion, said&^goodVersion
			if isVersion(val) {
				said |= goodVersion
			}
		case `"id"`:
			bit, m.ID = hasID, val
		case `"method"`:
			var ok bool
			bit, said = hasMethod, said&^badMethod
			if m.Method, ok = methodName(val); !ok {
				said |= badMethod
			}
		case `"params"`:
			bit, m.Params = hasParams, val
		case `"result"`:
			bit, m.Result = hasResult, val
		case `"error"`:
			bit, m.Error, said = hasError, val, said&^goodError
			// An escaped name was checked as any value: read it again.
			if errorObject || decoded && isErrorObject(val) {
				said |= goodError
			}
		default:
			// None of the names above is escaped; an escaped name may
			// decode to one.
			if !decoded && bytes.IndexByte(key, '\\') >= 0 {
				key, decoded, said = decodedKey(key), true, said|odd
				goto again
			}
			said |= hasExtra // a name JSON-RPC does not define
		}
		if said&bit != 0 {
			said |= odd // a name repeated
		}
		said |= bit
	}
	if !onlySpace(data, i) {
		return ErrNotJSON
	}
	if said&(hasResult|hasError) == hasResult|hasError && string(m.Error) == "null" {
		// A result with "error": null, as some encoders write a
		// response: the result is the answer.
		m.Error, said = nil, said&^hasError|odd
	}
	method, answer := said&hasMethod != 0, said&(hasResult|hasError) != 0
	var why string
	switch {
	case said&badMethod != 0:
		why = "method is not a string"
	case said&goodVersion == 0:
		why = `"jsonrpc" must be "2.0"`
	case method && answer:
		why = "both method and result/error"
	case method && m.Method == "":
		why = "empty method"
	case !method && !answer:
		why = "no method, result or error"
	case !method && m.ID == nil:
		why = "response without id"
	case m.ID != nil && !validID(m.ID):
		why = "id must be a string, number or null"
	default:
		m.plain = said&odd == 0
		m.badError = said&(hasError|goodError) == hasError
		m.extra = said&hasExtra != 0
		return nil
	}
	e := &InvalidError{Reason: why}
	switch {
	case method && !answer && m.ID != nil && validID(m.ID):
		e.ID = m.ID // what would be a request: its answer can name it
	case !method && m.ID != nil && validID(m.ID):
		e.ResponseID = m.ID // what would be a response: the call it answers can fail
	}
	return e
}

// An InvalidError is JSON that Parse refused as no JSON-RPC 2.0 message;
// it wraps ErrNotJSONRPC.
type InvalidError struct {
	Reason string
	// ID is the id of what would be a request (a method, no result or
	// error) as it came, if it is one JSON-RPC allows: JSON-RPC 2.0
	// answers an invalid request with null only when its id cannot be
	// read. It is nil otherwise, for a malformed response too, whose id
	// is the caller's own and must not look answered.
	ID json.RawMessage
	// ResponseID is the id of what would be a response (an id and no
	// method), if it is one JSON-RPC allows, so that the call
	// it answers can fail rather than wait for ever, as the TypeScript
	// SDK fails it (-32600). It is nil otherwise.
	ResponseID json.RawMessage
}

func (e *InvalidError) Error() string { return ErrNotJSONRPC.Error() + ": " + e.Reason }
func (e *InvalidError) Unwrap() error { return ErrNotJSONRPC }

// ParseErrorID returns the id to answer a line refused with err, by Parse
// or, too long to keep, by LineChannel.Recv: that of what would be a
// request (see InvalidError), or of the request the line was (see
// OversizeError, whose ID is read wherever in the line it is); or nil, for
// null.
func ParseErrorID(err error) json.RawMessage {
	if e, ok := errors.AsType[*InvalidError](err); ok {
		return e.ID
	}
	// A response's id is the receiver's own, and a batch's entries are
	// answered one by one: neither is answered under an id of the line.
	if e, ok := errors.AsType[*OversizeError](err); ok && e.Method != "" && !e.IsResponse && !e.IsBatch {
		return e.ID
	}
	return nil
}

// checkError checks the object at i, a response's error, as checkValue
// would, and reports whether it is an error object JSON-RPC 2.0 allows: its
// code an integer and its message a string, the last of each counting,
// names read with their escapes decoded, as JSON.parse reads them.
func checkError(d []byte, i int) (int, bool) {
	var code, msg bool
	i, more := firstMember(d, i)
	for more {
		k := i
		var keyEnd, valStart, valEnd int
		// The error object is at depth 2, inside the message's.
		if keyEnd, valStart, valEnd, i, more = checkMember(d, i, 2); i < 0 {
			return -1, false
		}
		errorMember(d[k:keyEnd], d[valStart:valEnd], &code, &msg)
	}
	return i, code && msg
}

// isErrorObject is checkError's verdict on val, a valid JSON value.
func isErrorObject(val []byte) bool {
	var code, msg bool
	ok := EachField(val, func(key, v []byte) { errorMember(key, v, &code, &msg) })
	return ok && code && msg
}

// errorMember notes in code and msg whether the member key: val of an
// error object is an integer code or a string message.
func errorMember(key, val []byte, code, msg *bool) {
	if bytes.IndexByte(key, '\\') >= 0 {
		key = decodedKey(key)
	}
	switch string(key) {
	case `"code"`:
		*code = isInteger(val)
	case `"message"`:
		*msg = val[0] == '"'
	}
}

// isInteger reports whether val, a valid JSON value, is a number whose
// value is an integer as a float64 reads it (JavaScript's Number.isInteger):
// -32601, and also 1.0 or 1e3; not 1.5, nor what overflows to infinity.
func isInteger(val []byte) bool {
	if c := val[0]; c != '-' && (c < '0' || c > '9') {
		return false
	}
	// The common case: digits alone, too few to overflow.
	if len(val) < 300 && bytes.IndexAny(val, ".eE") < 0 {
		return true
	}
	f, err := strconv.ParseFloat(string(val), 64)
	return err == nil && f == math.Trunc(f)
}

// ReadError reads raw, a response's error as it came, as Parse checks one:
// ok is false where Parse calls it malformed (MalformedError). Names are
// exact once their escapes are decoded, as JSON.parse reads them, and the
// last of each counts. The code is an integer however it is written: JSON
// has one kind of number, and 1.0 or -3e4 has an integer value, which is
// what JSON-RPC 2.0 asks of a code (and the TypeScript SDK checks, with
// Number.isInteger); one beyond int64's range reads as the nearest int64.
// data is the data member as it came, aliasing raw, or nil if there is
// none. raw must be valid JSON.
func ReadError(raw []byte) (code int64, message string, data json.RawMessage, ok bool) {
	var codeVal, msgVal []byte
	isObject := EachField(raw, func(key, val []byte) {
		if bytes.IndexByte(key, '\\') >= 0 {
			key = decodedKey(key)
		}
		switch string(key) {
		case `"code"`:
			codeVal = val
		case `"message"`:
			msgVal = val
		case `"data"`:
			data = val
		}
	})
	if !isObject || codeVal == nil || msgVal == nil || !isInteger(codeVal) {
		return 0, "", nil, false
	}
	if message, ok = Unquote(msgVal); !ok {
		return 0, "", nil, false
	}
	return integerValue(codeVal), message, data, true
}

// integerValue returns the value of val, a number isInteger accepts, as
// an int64: beyond its range, the nearest.
func integerValue(val []byte) int64 {
	if n, err := strconv.ParseInt(string(val), 10, 64); err == nil {
		return n
	}
	f, _ := strconv.ParseFloat(string(val), 64) // finite: isInteger read it
	switch {
	case f >= 0x1p63:
		return math.MaxInt64
	case f < -0x1p63:
		return math.MinInt64
	}
	return int64(f)
}

// decodedKey returns an escaped member name, a raw JSON string, with its
// escapes decoded and quoted again without any, so that it compares with
// the plain spelling of the same name.
func decodedKey(key []byte) []byte {
	s, ok := Unquote(key)
	if !ok {
		return key
	}
	return append(append(append(make([]byte, 0, len(s)+2), '"'), s...), '"')
}

// isVersion reports whether val is the JSON string "2.0", however spelled.
func isVersion(val []byte) bool {
	if string(val) == `"2.0"` {
		return true
	}
	s, ok := Unquote(val)
	return ok && s == Version
}

// validID reports whether id, a valid JSON value, is one JSON-RPC allows:
// a string, a number or null.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// methodName decodes v, a method's raw JSON value, taking the name of a
// known method without allocating; ok is false if v is not a string.
func methodName(v []byte) (string, bool) {
	if string(v) == `"session/update"` { // most messages: before the map
		return "session/update", true
	}
	if s, ok := knownMethods[string(v)]; ok { // no allocation
		return s, true
	}
	return Unquote(v)
}

// knownMethods are the methods most messages name, by their plain JSON
// spelling: Parse takes a method's string from here instead of allocating
// one for each message.
var knownMethods = func() map[string]string {
	m := make(map[string]string)
	for _, name := range []string{
		"session/update", "session/prompt", "session/new", "session/load", "session/cancel",
		"session/request_permission", "session/set_mode", "session/set_model", "session/list",
		"initialize", "authenticate", "fs/read_text_file", "fs/write_text_file",
		"terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release",
		MethodSuccessor, MethodSuccessorRust, MethodProxyInitialize, MethodProxyInitRust, MethodCancelRequest,
		"mcp/message", "mcp/connect", "mcp/disconnect", "_mcp/message", "_mcp/connect", "_mcp/disconnect",
	} {
		m[`"`+name+`"`] = name
	}
	return m
}()

// Unquote decodes the JSON string v, taking the allocation-free path when
// it holds no escapes; ok is false if v is not a JSON string. v must be one
// valid JSON value with nothing around it, as Member and Parse cut them:
// that path does not look for the quote that ends it (`"" ` reads as `"`).
func Unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// scanner walks already-validated JSON, so it need not report syntax errors.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) consume(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// value returns the raw bytes of the value starting at pos and moves past it.
func (s *scanner) value() []byte {
	start := s.pos
	depth := 0
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '"':
			s.skipString()
			if depth == 0 {
				return s.data[start:s.pos]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return s.data[start:s.pos]
			}
			if depth--; depth == 0 {
				s.pos++
				return s.data[start:s.pos]
			}
		case ',', ':', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return s.data[start:s.pos]
			}
		}
		s.pos++
	}
	return s.data[start:s.pos]
}

// skipString moves past the string starting at pos. It jumps from quote to
// quote (bytes.IndexByte is vectorized; strings are most of a payload's
// bytes): a quote ends the string unless an odd run of backslashes
// precedes it.
func (s *scanner) skipString() {
	open := s.pos
	for i := open + 1; ; {
		j := bytes.IndexByte(s.data[i:], '"')
		if j < 0 {
			s.pos = len(s.data)
			return
		}
		quote := i + j
		run := 0
		for k := quote - 1; k > open && s.data[k] == '\\'; k-- {
			run++
		}
		if run%2 == 0 {
			s.pos = quote + 1
			return
		}
		i = quote + 1
	}
}

// Version is the JSON-RPC version every message carries.
const Version = "2.0"

// Append appends the encoding of m to buf, with ID and the raw fields as they
// are.
func (m *Message) Append(buf []byte) []byte {
	if m.Method != "" {
		if m.Params == nil {
			return append(appendCall(buf, m.ID, m.Method), '}')
		}
		return append(append(AppendHead(buf, m.ID, m.Method), m.Params...), '}')
	}
	if m.Error != nil {
		buf = appendResponseHead(buf, m.ID, `,"error":`)
		return append(append(buf, m.Error...), '}')
	}
	buf = AppendResultHead(buf, m.ID)
	if m.Result == nil {
		buf = append(buf, "null"...)
	}
	return append(append(buf, m.Result...), '}')
}

// AppendHead appends a request (id != nil) or notification up to its
// params, which the caller writes next, followed by "}". Together they let
// a large params value be sent from where it was read, without a copy.
func AppendHead(buf []byte, id json.RawMessage, method string) []byte {
	return append(appendCall(buf, id, method), `,"params":`...)
}

// ResponseSize is at least the length of the response to id carrying
// result or e that Append makes, so that a buffer made for it never grows.
func ResponseSize(id, result, e json.RawMessage) int {
	const frame = len(`{"jsonrpc":"2.0","id":null,"result":null}`)
	return frame + len(id) + len(result) + len(e)
}

// AppendResultHead appends a response up to its result, which the caller
// writes next, followed by "}".
func AppendResultHead(buf []byte, id json.RawMessage) []byte {
	return appendResponseHead(buf, id, `,"result":`)
}

func appendCall(buf []byte, id json.RawMessage, method string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	if id != nil {
		buf = append(append(buf, `,"id":`...), id...)
	}
	return AppendString(append(buf, `,"method":`...), method)
}

func appendResponseHead(buf []byte, id json.RawMessage, member string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	buf = append(append(buf, `{"jsonrpc":"2.0","id":`...), id...)
	return append(buf, member...)
}

// Bytes returns the encoding of m.
func (m *Message) Bytes() []byte { return m.Append(nil) }

// AppendString appends s as a JSON string, as encoding/json writes it
// without escaping HTML characters (a string is relayed as it came).
func AppendString(buf []byte, s string) []byte {
	if needsEscape(s) {
		// A copy: handed to Marshal, an interface, s itself would escape,
		// and every caller's string would go on the heap for the sake of
		// this rare path.
		b, _ := Marshal(strings.Clone(s)) // a string always encodes
		return append(buf, b...)
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// needsEscape reports whether s has a byte that encoding/json may write
// otherwise than as itself: below 0x20, a quote, a backslash, or from 0x7f
// on. It tests eight bytes at a time, as the validator does (special), and
// the last eight again where the length is not a multiple of eight.
func needsEscape(s string) bool {
	if len(s) < 8 {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
				return true
			}
		}
		return false
	}
	for i := 0; len(s)-i >= 8; i += 8 {
		if escapedWord(s[i : i+8]) {
			return true
		}
	}
	return escapedWord(s[len(s)-8:])
}

// escapedWord is needsEscape for exactly eight bytes.
func escapedWord(b string) bool {
	w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	// From 0x7f on: the high bit, or 0x7f carried into it by adding 1 (a
	// carry out of 0xff is past a byte already found).
	return special(w)|(w|(w+lows))&highs != 0
}

// IntID returns the encoding of n as an id.
func IntID(n int64) json.RawMessage { return strconv.AppendInt(nil, n, 10) }

// An Error is a JSON-RPC error object.
type Error struct {
	Code    jrpc2.Code      `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("[%d] %s", e.Code, e.Message) }

// Encode returns e as a raw error object. Data goes as it is, and the
// message is written as AppendString writes a string: json.Marshal would
// escape "<", ">", "&" and U+2028 again inside raw JSON, so that data
// carrying an id as it came ("c&1") would name it otherwise ("c\u00261").
func (e *Error) Encode() json.RawMessage {
	b, err := Marshal(e)
	if err != nil { // only Data can fail, and it is raw JSON we built
		panic(err)
	}
	return b
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code jrpc2.Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithData returns a copy of e carrying v, encoded as JSON, as its data:
// raw JSON in v (an id, a peer's error) as it came (see Encode).
func (e *Error) WithData(v any) *Error {
	c := *e
	c.Data, _ = Marshal(v)
	return &c
}

// Marshal is json.Marshal without escaping <, > and & for HTML, which it
// does to strings and to raw JSON alike: a message's text and the raw JSON
// it relays stay as they came.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ErrorResponse returns a response to id carrying e.
func ErrorResponse(id json.RawMessage, e *Error) *Message {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &Message{ID: id, Error: e.Encode()}
}

// Request-cancelled code from ACP's request cancellation RFD.
const CodeRequestCancelled jrpc2.Code = -32800

// ParseError returns the error that answers a line Parse refused: -32700
// (parse error) for what is not JSON, -32600 (invalid request) for JSON
// that is not a JSON-RPC message, as JSON-RPC 2.0 section 5.1 assigns them.
func ParseError(err error) *Error {
	code := jrpc2.InvalidRequest
	if errors.Is(err, ErrNotJSON) {
		code = jrpc2.ParseError
	}
	return Errorf(code, "%v", err)
}
