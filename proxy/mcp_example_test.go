package proxy_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A proxy that gives the agent a tool, "where", which tells the agent the
// working directory of its session. The MCP server is written by hand on
// the raw messages, to show what an MCPConn carries; a real one would use
// an MCP SDK (see package github.com/acp-conductor/acp-conductor/proxy/mcpsdk).
func ExampleMCPServer() {
	where := &proxy.MCPServer{
		Name: "where",
		Serve: func(ctx context.Context, c *proxy.MCPConn) error {
			for {
				msg, err := c.Read(ctx) // io.EOF once the agent disconnects
				if err != nil {
					return err
				}
				var req struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.Unmarshal(msg, &req) != nil || req.ID == nil || req.Method == "" {
					continue // notifications need no answer
				}
				resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
				switch req.Method {
				case "initialize":
					resp["result"] = map[string]any{
						"protocolVersion": "2025-06-18",
						"capabilities":    map[string]any{"tools": map[string]any{}},
						"serverInfo":      map[string]string{"name": "where", "version": "1.0.0"},
					}
				case "tools/list":
					resp["result"] = map[string]any{"tools": []any{map[string]any{
						"name":        "where",
						"description": "Tells the session's working directory.",
						"inputSchema": map[string]any{"type": "object"},
					}}}
				case "tools/call":
					text := "The session works in " + c.Session().Cwd
					resp["result"] = map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}}
				case "ping":
					resp["result"] = map[string]any{}
				default:
					resp["error"] = map[string]any{"code": -32601, "message": "method not found"}
				}
				line, _ := json.Marshal(resp)
				if err := c.Write(ctx, line); err != nil {
					return err
				}
			}
		},
	}
	p := &proxy.Proxy{MCPServers: []*proxy.MCPServer{where}}
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
}
