package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// ErrClosed is returned by calls that were, or would be, cut off by the end
// of the connection to the conductor. A [Conn.Call] or [Request.Forward]
// returns an error that is ErrClosed to errors.Is and says why, naming the
// proxy ([Proxy.Name]): a handler that returns it tells the caller so.
// Made once the connection has ended (after Serve has returned, say), a
// call or notification sends nothing, and its error says so. A
// request from the successor that the proxy relayed, unhandled, is answered
// with the same error when the proxy's input ends, since under a conductor
// the successor still reads; one from the predecessor is not, since the
// conductor has answered it already.
//
// When the proxy stops, a handler's context, and an [MCPServer]'s, is
// cancelled with a cause that is ErrClosed to errors.Is, and the error
// that stopped it, if any (the Serve context's, say): a handler that
// finds errors.Is(context.Cause(ctx), ErrClosed) knows that its answer
// will not be read.
var ErrClosed = errors.New("proxy: connection closed")

// ErrCancelled is, to errors.Is, the cause of a handler's context
// cancelled because its caller sent $/cancel_request for its request:
// errors.Is(context.Cause(ctx), ErrCancelled) tells it from a proxy that
// stops (ErrClosed). The caller still reads the answer, which may say
// what was done before the cancel (a prompt's stopReason "cancelled");
// Forward and Call waiting under such a context pass the cancel on and
// return the answer. A handler that returns it answers with [CodeRequestCancelled], as
// for context.Canceled.
var ErrCancelled = errors.New("proxy: request cancelled by its caller")

// Error codes, for [Error.Code]: JSON-RPC 2.0's, and those the ACP schema
// adds. They are untyped, as Code is an int, and named as the MCP Go SDK
// names its own.
const (
	CodeParseError     = -32700 // the message is not JSON
	CodeInvalidRequest = -32600 // the message is not a JSON-RPC request
	CodeMethodNotFound = -32601 // no one serves the method
	CodeInvalidParams  = -32602 // the params are not what the method takes
	CodeInternalError  = -32603 // the answerer failed; a handler's plain error answers so

	// ACP's.
	CodeAuthRequired     = -32000 // the agent needs authenticate first
	CodeResourceNotFound = -32002 // a session, file or the like does not exist
	CodeRequestCancelled = -32800 // the caller cancelled the request ($/cancel_request)
)

// A stopped is the cause of the contexts cancelled when the proxy stops,
// for why (nil at the end of its input).
type stopped struct {
	proxy string
	why   error
}

func (e *stopped) Error() string {
	if e.why == nil {
		return fmt.Sprintf("proxy %s: stopped: its input ended", e.proxy)
	}
	return fmt.Sprintf("proxy %s: stopped: %v", e.proxy, e.why)
}

func (e *stopped) Unwrap() []error {
	if e.why == nil {
		return []error{ErrClosed}
	}
	return []error{ErrClosed, e.why}
}

// A cutOff is the error of a call whose answer can no longer come: the
// proxy has stopped reading from its conductor. It is ErrClosed to
// errors.Is, and says why, naming the proxy, for whoever the proxy answers
// with it (under a conductor, the editor).
type cutOff struct {
	proxy string
	why   error // what stopped the reading; nil for the end of the input
}

func (e *cutOff) Error() string {
	if e.why == nil {
		return fmt.Sprintf("proxy %s: its input ended before the answer came", e.proxy)
	}
	return fmt.Sprintf("proxy %s: it stopped reading (%v) before the answer came", e.proxy, e.why)
}

func (e *cutOff) Unwrap() error { return ErrClosed }

// A notSent is the error of a call or notification made once the
// connection had ended: nothing was sent, so there is no answer to wait
// for. It is ErrClosed to errors.Is, and why, what ended it, too.
type notSent struct {
	proxy, method string
	why           error // what stopped the reading; nil for the end of the input
}

func (e *notSent) Error() string {
	if e.why == nil {
		return fmt.Sprintf("proxy %s: %s not sent: its connection had closed, its input ended", e.proxy, e.method)
	}
	return fmt.Sprintf("proxy %s: %s not sent: its connection had closed (%v)", e.proxy, e.method, e.why)
}

func (e *notSent) Unwrap() []error {
	if e.why == nil {
		return []error{ErrClosed}
	}
	return []error{ErrClosed, e.why}
}

// A writeError is the failed write that ended the connection. It is
// ErrClosed to errors.Is, as is every call it cuts off, and the write's
// error too.
type writeError struct{ err error }

func (e writeError) Error() string   { return "proxy: writing: " + e.err.Error() }
func (e writeError) Unwrap() []error { return []error{e.err, ErrClosed} }

// An Error is a JSON-RPC error object. [Conn.Call] and [Request.Forward]
// return one when the peer answers with an error, and a handler that returns
// one (or an error wrapping one) answers with it. An Error received from a
// peer and returned unmodified goes back byte for byte as it came. An
// error object that is malformed, not an integer code and a string message
// ("error": null, say), is received as the proxy's own -32603, naming the
// proxy and who answered, the error as it came in Data; a relayed answer
// is passed on so too. A code is an integer however it is written: 1.0
// and 1e3 are the codes 1 and 1000, as JSON-RPC reads a number (one past
// int's range reads as the nearest int). An answer with both a result and
// an error, which JSON-RPC forbids, is the error alone, returned or
// relayed, and the first from each side is logged; a result beside
// "error": null is the result.
//
// A handler that returns any other error answers with [CodeInternalError],
// or [CodeRequestCancelled] for [context.Canceled] and [ErrCancelled]. One
// that refuses a request returns an Error with a code of its own:
//
//	return nil, &proxy.Error{Code: proxy.CodeInvalidParams, Message: "my-proxy: no sessionId"}
//
// Data is sent as it is if it is JSON. Otherwise, lest it be lost, it is
// sent as a JSON string of its bytes, and the proxy logs a warning naming
// the handler: Data: json.RawMessage("disk full") arrives as
// "data":"disk full". Encode it with json.Marshal to send a value.
type Error struct {
	Code    int
	Message string
	Data    json.RawMessage // optional; JSON

	raw json.RawMessage // as received
}

func (e *Error) Error() string { return fmt.Sprintf("[%d] %s", e.Code, e.Message) }

// decodeError parses an error object received from a peer, as wire.Parse
// checks it: a code written 1.0 or 1e3 is the integer it is. One that
// check calls malformed never gets here (Conn.malformedError stands for
// it), but for safety reads as an internal error.
func decodeError(raw json.RawMessage) *Error {
	code, msg, data, ok := wire.ReadError(raw)
	if !ok {
		// Without raw: passed on, it must go as the well-formed error
		// it reads as, not as it came.
		return &Error{Code: int(jrpc2.InternalError), Message: "malformed error object: " + string(raw)}
	}
	e := &Error{raw: raw}
	// Int's range, where int is 32 bits: the nearest, as ReadError does.
	code = min(max(code, math.MinInt), math.MaxInt)
	e.Code, e.Message, e.Data = int(code), msg, bytes.Clone(data) // no alias of raw, which encode compares with
	return e
}

// encode returns e as an error object: as received, if it is unchanged.
func (e *Error) encode() json.RawMessage {
	if e.raw != nil {
		if got := decodeError(e.raw); got.Code == e.Code && got.Message == e.Message && bytes.Equal(got.Data, e.Data) {
			return e.raw
		}
	}
	// Not wire.Error, whose code is 32 bits: a peer's may be wider. Not
	// json.Marshal either, which escapes "&", "<" and ">" in Data that
	// is to go as it is (see wire.TestErrorAsItCame).
	out := strconv.AppendInt([]byte(`{"code":`), int64(e.Code), 10)
	out = wire.AppendString(append(out, `,"message":`...), e.Message)
	switch {
	case len(e.Data) == 0:
	case wire.Valid(e.Data):
		// One line, as json.Marshal would make it.
		buf := bytes.NewBuffer(append(out, `,"data":`...))
		json.Compact(buf, e.Data) // valid, so cannot fail
		out = buf.Bytes()
	default:
		// Dropped, the caller would never see it and its author never
		// know why: sent as a string, it reaches both (and is logged).
		out = wire.AppendString(append(out, `,"data":`...), string(e.Data))
	}
	return append(out, '}')
}

// errorObject returns the error object that answers a request for which a
// handler returned err.
func errorObject(err error) json.RawMessage {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.encode()
	case errors.Is(err, context.Canceled), errors.Is(err, ErrCancelled):
		return wire.Errorf(CodeRequestCancelled, "Request cancelled").Encode()
	default:
		return wire.Errorf(CodeInternalError, "%v", err).Encode()
	}
}
