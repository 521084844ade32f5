package mcpsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A Transport is an [mcp.Transport] over one MCP-over-ACP connection, for
// serving it with [mcp.Server.Connect] directly, with options of one's own;
// [Server] does that with none. Like every SDK transport, it is good for
// one Connect.
type Transport struct {
	Conn *proxy.MCPConn
}

var _ mcp.Transport = (*Transport)(nil)

// Connect implements [mcp.Transport].
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	if t.Conn == nil {
		return nil, errors.New("mcpsdk: Transport has no Conn")
	}
	conns.Store(t.Conn.ID(), t.Conn)
	return &connection{conn: t.Conn}, nil
}

// A connection is the SDK's view of an MCPConn: the same messages, decoded.
type connection struct {
	conn      *proxy.MCPConn
	closeOnce sync.Once
}

// Read implements [mcp.Connection]. The end of the connection, from either
// side, is io.EOF, as it is on the SDK's own transports.
func (c *connection) Read(ctx context.Context) (jsonrpc.Message, error) {
	raw, err := c.conn.Read(ctx)
	if errors.Is(err, proxy.ErrClosed) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, err
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("mcpsdk: reading %s: %w", raw, err)
	}
	return msg, nil
}

// Write implements [mcp.Connection].
func (c *connection) Write(ctx context.Context, msg jsonrpc.Message) error {
	raw, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpsdk: encoding: %w", err)
	}
	return c.conn.Write(ctx, raw)
}

// Close implements [mcp.Connection]: it ends the connection on the server's
// side.
func (c *connection) Close() error {
	c.closeOnce.Do(func() {
		conns.CompareAndDelete(c.conn.ID(), c.conn)
		c.conn.Close()
	})
	return nil
}

// SessionID implements [mcp.Connection]. The connection id, unique across
// the chain, serves as the SDK session's id, by which [Conn] finds the
// connection.
func (c *connection) SessionID() string { return c.conn.ID() }
