package mcpbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// ErrClosed is returned by a Conn's methods once it has been closed on this
// side.
var ErrClosed = errors.New("mcpbridge: connection closed")

// The transports a Conn can arrive on.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// A Conn is one agent-side MCP connection to a declared server. Recv must be
// called from one goroutine at a time; Send and Close from any.
type Conn struct {
	ServerID  string // the id the server was declared with
	Name      string // the name it was declared with
	Transport string // TransportStdio or TransportHTTP

	t         transport
	decls     *registry    // that admitted it
	decl      *declaration // whose token it presented
	closeOnce sync.Once
	closeErr  error
}

// transport is what each kind of connection implements.
type transport interface {
	recv() ([]byte, error)
	send(msg []byte) error
	close() error
}

// Recv returns the next message from the agent's MCP client: one JSON-RPC
// object or batch, on one line. It returns io.EOF once the agent has ended the
// connection, and ErrClosed after Close. On stdio, a message over the size
// limit is reported as a *wire.OversizeError holding its first bytes, and
// Recv may be called again; over HTTP, the client gets 413 instead.
func (c *Conn) Recv() ([]byte, error) { return c.t.recv() }

// Send delivers a message to the agent's MCP client: a response to one of its
// requests, or a request or notification of the server's own. Over HTTP it
// only queues the message, up to a bound; on stdio it writes to the socket,
// and so blocks while the agent does not read, until Close. Like io.Writer's
// Write, it does not keep msg: the caller may reuse it once Send returns.
func (c *Conn) Send(msg []byte) error {
	msg, err := oneLine(msg)
	if err != nil {
		return err
	}
	return c.t.send(msg)
}

// Revoked returns the reason given to Bridge.Revoke once the token c was
// admitted with has been revoked, and nil until then.
func (c *Conn) Revoked() error { return c.decls.revoked(c.decl) }

// asRPCError returns why a server is gone as the JSON-RPC error its client
// is told: why itself if it is one (the conductor's -33001 naming the
// session that ended), else the SDKs' code for a closed connection.
func asRPCError(why error) *wire.Error {
	if e, ok := errors.AsType[*wire.Error](why); ok {
		return e
	}
	return &wire.Error{Code: codeConnectionClosed, Message: why.Error()}
}

// Close ends the connection. The agent's MCP client sees its server go away:
// the shim exits, or the HTTP session ends, after whatever was sent before.
// On HTTP, requests still waiting for a response are answered with an error.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.t.close() })
	return c.closeErr
}

// oneLine returns msg without line breaks, compacting it if it has any: the
// socket's framing and the conductor's ACP lines both carry a message as one
// line. JSON can hold a raw line break only as whitespace, so compacting
// loses nothing.
func oneLine(msg []byte) ([]byte, error) {
	if !bytes.ContainsAny(msg, "\r\n") {
		return msg, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, msg); err != nil {
		return nil, fmt.Errorf("mcpbridge: message is not JSON: %w", err)
	}
	return buf.Bytes(), nil
}
