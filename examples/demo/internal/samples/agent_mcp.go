package samples

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/creachadair/jrpc2"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// The sample agent speaks MCP-over-ACP natively: it advertises
// mcpCapabilities.acp, so MCP servers declared with "type": "acp" reach it
// as they are, and it uses them through its ACP connection with
// mcp/connect, mcp/message and mcp/disconnect, which the conductor routes to
// whoever declared them. At the end of each prompt turn it calls the sample
// proxy's tool, if its session has that server, and reports what it said.

// An acpServer is an MCP server declared with ACP transport.
type acpServer struct {
	name, id string
	key      string // how mcp/connect names it: "acpId", or "serverId" in the Rust SDK's spelling
}

// acpServers returns the acp MCP servers declared in the params of a
// session set-up request.
func acpServers(params json.RawMessage) []acpServer {
	var p struct {
		MCPServers []struct {
			Type, Name, ID, ServerID string
		} `json:"mcpServers"`
	}
	json.Unmarshal(params, &p)
	var servers []acpServer
	for _, d := range p.MCPServers {
		switch {
		case d.Type != "acp":
		case d.ID != "":
			servers = append(servers, acpServer{d.Name, d.ID, "acpId"})
		case d.ServerID != "":
			servers = append(servers, acpServer{d.Name, d.ServerID, "serverId"})
		}
	}
	return servers
}

// useProxyTool calls the sample proxy's tool, if s has its server, as a
// tool call of the turn, and returns the turn's stop reason. What goes wrong
// on the MCP side is reported to the client; only a broken connection is an
// error.
func (a *agent) useProxyTool(ctx context.Context, s *session) (string, error) {
	var srv *acpServer
	for i := range s.mcp {
		if s.mcp[i].name == ProxyMCPServer {
			srv = &s.mcp[i]
		}
	}
	if srv == nil {
		return "end_turn", nil
	}
	const toolID = "call_2"
	if err := a.update(s, map[string]any{
		"sessionUpdate": "tool_call",
		"toolCallId":    toolID,
		"title":         ProxyMCPTool + ", an MCP tool that " + srv.name + " provides over ACP",
		"kind":          "other",
		"status":        "in_progress",
	}); err != nil {
		return "", err
	}
	text, problem, err := a.callMCPTool(ctx, srv, ProxyMCPTool)
	if err != nil {
		return "", err
	}
	status, say := "completed", "I also called "+ProxyMCPTool+", an MCP tool that "+srv.name+
		" provides through the ACP connection itself (MCP-over-ACP): "+text+"\n"
	if problem != "" {
		status, text, say = "failed", problem, "I could not use "+srv.name+"'s tool: "+problem+"\n"
	}
	if s.cancelled {
		status, say = "failed", ""
	}
	if err := a.update(s, map[string]any{
		"sessionUpdate": "tool_call_update",
		"toolCallId":    toolID,
		"status":        status,
		"content":       []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": text}}},
	}); err != nil {
		return "", err
	}
	if s.cancelled {
		return "cancelled", nil
	}
	return "end_turn", a.update(s, map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": say},
	})
}

// callMCPTool connects to srv, initializes MCP, calls tool without
// arguments and disconnects. It returns the text the tool answered with, or
// what went wrong.
func (a *agent) callMCPTool(ctx context.Context, srv *acpServer, tool string) (text, problem string, err error) {
	res, rpcErr, err := a.call(ctx, "mcp/connect", map[string]string{srv.key: srv.id}, a.dispatch)
	if err != nil || rpcErr != nil {
		return "", describeMCPError("mcp/connect", rpcErr), err
	}
	var conn struct {
		ConnectionID string `json:"connectionId"`
	}
	if err := json.Unmarshal(res, &conn); err != nil || conn.ConnectionID == "" {
		return "", "mcp/connect gave no connectionId", nil
	}
	defer func() {
		if err == nil {
			_, _, err = a.call(ctx, "mcp/disconnect", map[string]string{"connectionId": conn.ConnectionID}, a.dispatch)
		}
	}()
	mcp := func(method string, params any) (json.RawMessage, string, error) {
		res, rpcErr, err := a.call(ctx, "mcp/message", map[string]any{
			"connectionId": conn.ConnectionID, "method": method, "params": params,
		}, a.dispatch)
		return res, describeMCPError(method, rpcErr), err
	}

	if _, problem, err := mcp("initialize", map[string]any{
		"protocolVersion": mcpVersions[0],
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": AgentName, "version": "0.1.0"},
	}); problem != "" || err != nil {
		return "", problem, err
	}
	if err := a.notify("mcp/message", map[string]any{
		"connectionId": conn.ConnectionID, "method": "notifications/initialized",
	}); err != nil {
		return "", "", err
	}
	res, problem, err = mcp("tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
	if problem != "" || err != nil {
		return "", problem, err
	}
	var call struct {
		Content []contentBlock `json:"content"`
		IsError bool           `json:"isError"`
	}
	if err := json.Unmarshal(res, &call); err != nil {
		return "", "unreadable tools/call result", nil
	}
	text = promptText(call.Content)
	if call.IsError {
		return "", strings.TrimSpace(text), nil
	}
	return strings.TrimSpace(text), "", nil
}

func describeMCPError(method string, e *wire.Error) string {
	if e == nil {
		return ""
	}
	if e.Code == jrpc2.MethodNotFound && method == "mcp/connect" {
		return "the client side does not serve MCP over ACP (" + e.Message + ")"
	}
	return method + " failed: " + e.Message
}
