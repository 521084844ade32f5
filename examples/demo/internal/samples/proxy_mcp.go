package samples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/proxy"
)

// The sample proxy offers the agent one MCP tool over MCP-over-ACP, to show
// that a proxy can be "behind" the agent as well as in front of it: the
// tool tells how many prompts the proxy has passed on in the session it is
// called from, something only the proxy knows. Package proxy declares the
// server in every session and carries its connections; the MCP server here
// is written by hand on the raw messages, to show how little MCP a tool
// needs (a real proxy would use an SDK, such as the one proxy/mcpsdk
// adapts).

// The names the sample agent looks for.
const (
	ProxyMCPServer = "sample-proxy"
	ProxyMCPTool   = "prompt_count"
)

// promptCounts counts the prompts the sample proxy passes on, by session.
type promptCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (pc *promptCounts) add(sessionID string) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.n[sessionID]++
}

func (pc *promptCounts) get(sessionID string) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.n[sessionID]
}

// mcpServer is the sample proxy's MCP server.
func (pc *promptCounts) mcpServer() *proxy.MCPServer {
	return &proxy.MCPServer{Name: ProxyMCPServer, Serve: pc.serveMCP}
}

// serveMCP answers the requests of one MCP connection until the client
// disconnects. Notifications (notifications/initialized among them) need
// nothing from this server, and it asks the client nothing, so it gets no
// responses.
func (pc *promptCounts) serveMCP(ctx context.Context, c *proxy.MCPConn) error {
	for {
		raw, err := c.Read(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw, &m) != nil || m.ID == nil || m.Method == "" {
			continue // a notification, or nothing this server can answer
		}
		resp := mcpResponse{JSONRPC: "2.0", ID: m.ID}
		resp.Result, resp.Error = pc.answerMCP(c, m.Method, m.Params)
		out, err := wire.Marshal(resp)
		if err == nil {
			err = c.Write(ctx, out)
		}
		if err != nil {
			return err
		}
	}
}

// An mcpResponse answers one MCP request: with a result, or an error.
type mcpResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *mcpError       `json:"error,omitempty"`
}

type mcpError struct {
	Code    jrpc2.Code `json:"code"`
	Message string     `json:"message"`
}

func mcpErrorf(code jrpc2.Code, format string, args ...any) *mcpError {
	return &mcpError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// mcpVersions are the MCP revisions this server speaks, newest first.
var mcpVersions = []string{"2025-06-18", "2025-03-26", "2024-11-05"}

func (pc *promptCounts) answerMCP(c *proxy.MCPConn, method string, params json.RawMessage) (json.RawMessage, *mcpError) {
	var result any
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(params, &p)
		version := mcpVersions[0]
		if slices.Contains(mcpVersions, p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
		result = map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]string{"name": ProxyMCPServer, "version": "0.1.0"},
		}
	case "ping":
		result = struct{}{}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{
			"name":        ProxyMCPTool,
			"description": "Tells how many prompts sample-proxy has passed on to the agent in this session.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		}}}
	case "tools/call":
		var p struct {
			Name string `json:"name"`
		}
		json.Unmarshal(params, &p)
		if p.Name != ProxyMCPTool {
			return nil, mcpErrorf(jrpc2.InvalidParams, "unknown tool %q", p.Name)
		}
		s := c.Session()
		n := pc.get(s.ID)
		text := fmt.Sprintf("sample-proxy has passed on %d prompt(s) in session %s.", n, s.ID)
		result = map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}}
	default:
		return nil, mcpErrorf(jrpc2.MethodNotFound, "method not found: %s", method)
	}
	b, err := wire.Marshal(result)
	if err != nil {
		return nil, mcpErrorf(jrpc2.InternalError, "%v", err)
	}
	return b, nil
}
