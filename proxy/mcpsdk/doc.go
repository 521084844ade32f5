// Package mcpsdk serves MCP servers built with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) from an ACP proxy written with
// package proxy, over MCP-over-ACP: the agent reaches their tools through the
// conductor, and the proxy needs no process, port or file for them.
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1.0.0"}, nil)
//	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "say hi"}, greet)
//	p := &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("tools", server)}}
//	err := p.Serve(ctx, proxy.Stdin(), proxy.Stdout())
//
// Package proxy declares the server in every session and carries whole MCP
// messages between the agent's MCP client and a [proxy.MCPConn] for each
// connection the agent opens; this package is the SDK transport over that
// pipe ([Transport]). One *mcp.Server so serves every connection, in every
// session, at once, as it would serve stdio or HTTP. A tool handler learns
// which ACP session it works for, and so its working directory, from
// [Conn], which is nil when the same *mcp.Server serves a session over
// another transport (stdio, HTTP):
//
//	c := mcpsdk.Conn(req.Session)
//	if c == nil {
//		return nil, nil, errors.New("not served over MCP-over-ACP")
//	}
//	cwd := c.Session().Cwd
//
// This is a module of its own so that package proxy, and the proxies that do
// not use the SDK, do not depend on it.
package mcpsdk
