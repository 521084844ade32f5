package mcpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// A tool that asks the user before it acts: through the proxy's connection
// it sends session/request_permission to the client, in the ACP session
// the agent called it from, and waits for the answer. Call returns the
// client's error answer as a *proxy.Error, and proxy.ErrClosed if the
// proxy's connection ends first.
func Example_askTheClient() {
	server := mcp.NewServer(&mcp.Implementation{Name: "cleaner", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "clean", Description: "Deletes the build directory."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			c := mcpsdk.Conn(req.Session)
			if c == nil {
				return nil, nil, errors.New("clean: not served over MCP-over-ACP")
			}
			answer, err := c.Conn().Call(ctx, proxy.Predecessor, "session/request_permission", map[string]any{
				"sessionId": c.Session().ID,
				"toolCall":  map[string]any{"toolCallId": "clean-1", "title": "Delete " + c.Session().Cwd + "/build"},
				"options": []map[string]string{
					{"optionId": "yes", "name": "Delete it", "kind": "allow_once"},
					{"optionId": "no", "name": "Keep it", "kind": "reject_once"},
				},
			})
			if err != nil {
				return nil, nil, fmt.Errorf("clean: asking the user: %w", err)
			}
			var res struct {
				Outcome struct {
					Outcome  string `json:"outcome"`
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			}
			if err := json.Unmarshal(answer, &res); err != nil {
				return nil, nil, fmt.Errorf("clean: reading the answer: %w", err)
			}
			text := "The user kept the build directory."
			if res.Outcome.Outcome == "selected" && res.Outcome.OptionID == "yes" {
				text = "Deleted the build directory." // the deletion itself is left out
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})

	p := &proxy.Proxy{MCPServers: []*proxy.MCPServer{mcpsdk.Server("cleaner", server)}}
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
}
