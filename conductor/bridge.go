package conductor

import (
	"encoding/json"
	"fmt"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// BridgeMode selects how MCP-over-ACP servers reach an agent that cannot use
// them natively.
type BridgeMode string

const (
	BridgeAuto  BridgeMode = "auto"  // HTTP when the agent supports it, else stdio
	BridgeStdio BridgeMode = "stdio" // a stdio shim: the conductor's own binary
	BridgeHTTP  BridgeMode = "http"  // a loopback HTTP server in the conductor
)

// bridge rewrites acp MCP server declarations into ones the agent can use,
// and relays the connections the agent then opens (serveBridged).
type bridge struct {
	mode BridgeMode
	mcp  *mcpRoutes
	// declare returns the replacement declaration for one server.
	declare func(serverID, name string, http bool) (json.RawMessage, error)
}

// rewrite replaces each acp entry of params.mcpServers with the bridge's
// declaration for it. The entry's other members (name, _meta, anything
// unknown) are kept; entries of other types are not touched.
func (b *bridge) rewrite(params json.RawMessage) (json.RawMessage, error) {
	http := b.mode == BridgeHTTP
	if b.mode == BridgeAuto {
		b.mcp.mu.Lock()
		http = b.mcp.http
		b.mcp.mu.Unlock()
	}
	var servers []json.RawMessage
	if err := json.Unmarshal(field(params, "mcpServers"), &servers); err != nil {
		return nil, err
	}
	for i, raw := range servers {
		var d acpDeclaration
		if json.Unmarshal(raw, &d) != nil || d.Type != "acp" {
			continue
		}
		id, _ := d.serverID()
		repl, err := b.declare(id, d.Name, http)
		if err != nil {
			return nil, fmt.Errorf("MCP server %q: %w", d.Name, err)
		}
		entry := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, err
		}
		delete(entry, "type")
		delete(entry, "id")
		delete(entry, "serverId")
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(repl, &fields); err != nil {
			return nil, err
		}
		for k, v := range fields {
			entry[k] = v
		}
		if servers[i], err = json.Marshal(entry); err != nil {
			return nil, err
		}
	}
	list, err := json.Marshal(servers)
	if err != nil {
		return nil, err
	}
	return wire.SetPath(params, []string{"mcpServers"}, list)
}

// toBridge delivers an owner's mcp/message to a bridged connection as the
// plain MCP message it carries.
func (c *chain) toBridge(to *peer, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	var method string
	var inner json.RawMessage
	wire.EachField(params, func(k, v []byte) {
		switch string(k) {
		case `"method"`:
			_ = json.Unmarshal(v, &method)
		case `"params"`:
			inner = v
		}
	})
	if method == "" {
		c.reject(from, m, wire.Errorf(codeInvalidParams, "mcp/message without a method"), b)
		return
	}
	d := delivery{method: method}
	if m.IsNotification() {
		to.send(c.encode(to, nil, d, inner))
		return
	}
	c.forward(to, &call{from: from, fromID: m.ID, method: method, batch: b}, d, inner)
}
