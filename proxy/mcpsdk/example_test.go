package mcpsdk_test

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/acp-conductor/acp-conductor/proxy"
	"github.com/acp-conductor/acp-conductor/proxy/mcpsdk"
)

// A proxy process that gives the agent one tool, which greets whoever it is
// asked to in the session's working directory, and passes everything else
// through untouched.
func Example() {
	type in struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			where := "somewhere"
			if c := mcpsdk.Conn(req.Session); c != nil {
				where = c.Session().Cwd
			}
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Hello, " + in.Name + ", in " + where},
			}}, nil, nil
		})

	p := &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("greeter", server)}}
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
}
