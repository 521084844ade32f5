package mcpsdk

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// Server returns an MCP server for [proxy.Proxy.MCPServers], declared to
// the agent as name, that serves every connection with s. The connection's
// session ends when the agent disconnects or the proxy stops.
func Server(name string, s *mcp.Server) *proxy.MCPServer {
	return &proxy.MCPServer{
		Name: name,
		Serve: func(ctx context.Context, c *proxy.MCPConn) error {
			return serve(ctx, s, c)
		},
	}
}

// serve runs one session of s on c until the client disconnects (which the
// SDK sees as the end of its input) or ctx is done.
func serve(ctx context.Context, s *mcp.Server, c *proxy.MCPConn) error {
	ss, err := s.Connect(ctx, &Transport{Conn: c}, nil)
	if err != nil {
		return fmt.Errorf("mcpsdk: connecting the server: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Close waits for the handlers in flight, whose contexts the end
		// of the connection has cancelled.
		ss.Close()
		err = <-done
	}
	if err != nil {
		return fmt.Errorf("mcpsdk: %w", err)
	}
	return nil
}

// conns holds the connection of every open Transport, by connection id,
// which is also the id of the SDK session on it.
var conns sync.Map

// Conn returns the MCP-over-ACP connection that ss runs on, or nil if it
// runs on another transport or has ended. Its Session says which ACP
// session the agent is working in; a tool handler calls it with
// req.Session.
func Conn(ss *mcp.ServerSession) *proxy.MCPConn {
	if ss == nil {
		return nil
	}
	c, _ := conns.Load(ss.ID())
	conn, _ := c.(*proxy.MCPConn)
	return conn
}
