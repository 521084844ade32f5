package conductor

import (
	"encoding/json"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// MCP-over-ACP routing. A component (the editor or a proxy) declares an MCP
// server {"type":"acp","id":X} in the mcpServers of a session set-up request
// it sends downstream; the conductor records that component as the server's
// owner. The agent's mcp/connect for X, and every mcp/message and
// mcp/disconnect on the connection it opens, then go straight to the owner
// (wrapped as coming from its successor when the owner is a proxy), and the
// owner's own mcp/message on that connection goes straight back: proxies in
// between never see them. Each owner picks its own connection ids; where two
// owners pick the same one, the agent is given a variant of the second
// (mcpRoutes.open), and messages on it are re-addressed both ways. When the
// agent cannot speak MCP-over-ACP itself,
// the declarations it receives are rewritten to stdio shims or loopback HTTP
// servers of the conductor's bridge, and the conductor plays the agent's
// part of the MCP-over-ACP exchange (bridge.go).
//
// Both spellings in the wild are accepted: the RFD's "id" with mcp/connect
// {"acpId"}, and the Rust SDK's "serverId" with mcp/connect {"serverId"}.

// MCP-over-ACP methods.
const (
	methodMCPConnect    = "mcp/connect"
	methodMCPMessage    = "mcp/message"
	methodMCPDisconnect = "mcp/disconnect"
)

// sessionSetup lists the requests whose params may declare MCP servers.
var sessionSetup = map[string]bool{
	"session/new": true, "session/load": true, "session/resume": true, "session/fork": true,
}

type mcpRoutes struct {
	mu      sync.Mutex
	servers map[string]mcpServer // by declared server id
	conns   map[string]*mcpConn  // by the connectionId the agent uses, as raw JSON
	owned   map[ownedID]*mcpConn // by owner and the connectionId it gave
	native  bool                 // the final agent speaks MCP-over-ACP itself
	http    bool                 // the final agent can reach MCP servers over HTTP
}

// An ownedID is a connectionId as its owner gave it. Each owner picks its
// own ids, so two owners may well give the same one.
type ownedID struct {
	owner int
	id    string // raw JSON
}

type mcpServer struct {
	owner    int    // position of the component that declared it
	name     string // its declared name, for logs
	spelling string // "id" (the RFD) or "serverId" (the Rust SDK)
}

type mcpConn struct {
	owner   int
	ownerID string // the connectionId the owner gave, raw JSON
	agentID string // the one the agent uses (see open); "" when bridged
	bridge  *peer  // the bridged connection, or nil when the agent holds it natively
}

func newMCPRoutes() *mcpRoutes {
	return &mcpRoutes{servers: map[string]mcpServer{}, conns: map[string]*mcpConn{}, owned: map[ownedID]*mcpConn{}}
}

// agentCapabilities notes what the final agent's InitializeResponse says it
// can do with MCP servers.
// ACP v1 says true, v2 an object (wire.MCPCapabilities).
func (r *mcpRoutes) agentCapabilities(result json.RawMessage) {
	caps := wire.MCPCapabilities(result)
	has := func(name string) bool {
		v := string(wire.Member(caps, name))
		return v != "" && v != "false" && v != "null"
	}
	r.mu.Lock()
	r.native, r.http = has("acp"), has("http")
	r.mu.Unlock()
}

func (r *mcpRoutes) agentIsNative() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.native
}

// acpDeclaration is the part of an McpServer entry the conductor reads.
type acpDeclaration struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	ID       string `json:"id"`
	ServerID string `json:"serverId"`
}

func (d acpDeclaration) serverID() (id, spelling string) {
	if d.ID != "" {
		return d.ID, "id"
	}
	return d.ServerID, "serverId"
}

// declare records owner as the owner of every acp server declared in params
// that has none yet, and reports whether params declare any acp server.
func (r *mcpRoutes) declare(owner int, params json.RawMessage) bool {
	var p struct {
		MCPServers []acpDeclaration `json:"mcpServers"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	found := false
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range p.MCPServers {
		id, spelling := d.serverID()
		if d.Type != "acp" || id == "" {
			continue
		}
		found = true
		if _, ok := r.servers[id]; !ok {
			r.servers[id] = mcpServer{owner: owner, name: d.Name, spelling: spelling}
		}
	}
	return found
}

func (r *mcpRoutes) server(id string) (mcpServer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[id]
	return s, ok
}

// open records a connection that owner opened for the agent under
// ownerID, and returns the connectionId the agent is to use: ownerID, or
// if a connection of another owner already has that id, a variant of it,
// so that neither connection's messages reach the other's owner.
func (r *mcpRoutes) open(owner int, ownerID []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	agentID := string(ownerID)
	for n := 2; r.conns[agentID] != nil; n++ {
		agentID = variantID(ownerID, n)
	}
	c := &mcpConn{owner: owner, ownerID: string(ownerID), agentID: agentID}
	r.conns[agentID] = c
	r.owned[ownedID{owner, c.ownerID}] = c
	return agentID
}

// openBridged records a connection that owner opened under ownerID for a
// bridged client, which the agent never sees.
func (r *mcpRoutes) openBridged(owner int, ownerID []byte, bridge *peer) *mcpConn {
	c := &mcpConn{owner: owner, ownerID: string(ownerID), bridge: bridge}
	r.mu.Lock()
	r.owned[ownedID{owner, c.ownerID}] = c
	r.mu.Unlock()
	return c
}

// byAgent returns the connection the agent knows as id; byOwner the one
// owner gave id.
func (r *mcpRoutes) byAgent(id []byte) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[string(id)]
}

func (r *mcpRoutes) byOwner(owner int, id []byte) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned[ownedID{owner, string(id)}]
}

// close forgets a connection, reporting false if it was forgotten already.
func (r *mcpRoutes) close(c *mcpConn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closeLocked(c)
}

func (r *mcpRoutes) closeLocked(c *mcpConn) bool {
	if c.agentID != "" && r.conns[c.agentID] == c {
		delete(r.conns, c.agentID)
	}
	k := ownedID{c.owner, c.ownerID}
	if r.owned[k] != c {
		return false
	}
	delete(r.owned, k)
	return true
}

// dropOwner forgets every server the component at owner declared and every
// connection it opened, and returns the bridged ones. The process now at
// owner (restarted) or none (bypassed) serves none of them; one that
// declares a server again owns it anew.
func (r *mcpRoutes) dropOwner(owner int) (bridged []*peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, s := range r.servers {
		if s.owner == owner {
			delete(r.servers, id)
		}
	}
	for k, c := range r.owned {
		if k.owner != owner {
			continue
		}
		r.closeLocked(c)
		if c.bridge != nil {
			bridged = append(bridged, c.bridge)
		}
	}
	return bridged
}

// variantID returns a connectionId made from id for its nth holder.
func variantID(id []byte, n int) string {
	var s string
	if json.Unmarshal(id, &s) != nil {
		s = string(id)
	}
	return string(mustQuote(fmt.Sprintf("%s~%d", s, n)))
}

// withConnectionID returns obj with its connectionId set to id.
func withConnectionID(obj json.RawMessage, id string) json.RawMessage {
	out, err := wire.EditMember(obj, "connectionId", func(json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(id), nil
	})
	if err != nil {
		return obj // it had a connectionId member: it is an object
	}
	return out
}

// field returns the raw value of one member of an object.
func field(obj json.RawMessage, name string) []byte {
	var v []byte
	if len(obj) > 0 {
		key := `"` + name + `"`
		wire.EachField(obj, func(k, val []byte) {
			if string(k) == key {
				v = val
			}
		})
	}
	return v
}

// connectTarget returns the server id an mcp/connect names, in either
// spelling.
func connectTarget(params json.RawMessage) string {
	for _, name := range []string{"acpId", "serverId"} {
		if raw := field(params, name); raw != nil {
			var id string
			if json.Unmarshal(raw, &id) == nil {
				return id
			}
		}
	}
	return ""
}

// routeMCP relays an mcp/* request or notification whose route the MCP
// tables decide, and reports whether it did. src is the position the message
// came from (the agent side is topo.last()).
func (c *chain) routeMCP(src int, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) bool {
	agentSide := src == c.topo.Load().last()
	switch {
	case method == methodMCPConnect && agentSide:
		srv, ok := c.mcp.server(connectTarget(params))
		if !ok {
			return false // not declared in this chain: ordinary routing
		}
		d := c.toOwner(srv.owner, method)
		if m.IsNotification() {
			c.deliver(from, c.peers[d.to], nil, d, params)
			return true
		}
		cl := &call{from: from, fromID: m.ID, method: method, batch: b}
		cl.onResponse = func(resp *wire.Message) bool {
			if id := field(resp.Result, "connectionId"); id != nil {
				if agentID := c.mcp.open(srv.owner, id); agentID != string(id) {
					resp.Result = withConnectionID(resp.Result, agentID)
				}
			}
			return false
		}
		c.forward(c.peers[d.to], cl, d, params)
		return true

	case method == methodMCPMessage || method == methodMCPDisconnect:
		id := field(params, "connectionId")
		conn := c.mcp.byOwner(src, id)
		if agentSide {
			conn = c.mcp.byAgent(id)
		}
		if conn == nil {
			c.reject(from, m, wire.Errorf(codeInvalidParams, "%s: unknown MCP connection", method).
				WithData(map[string]json.RawMessage{"connectionId": id}), b)
			return true
		}
		var d delivery
		switch {
		case agentSide:
			d = c.toOwner(conn.owner, method)
			if method == methodMCPDisconnect {
				c.mcp.close(conn)
			}
			if conn.ownerID != string(id) {
				params = withConnectionID(params, conn.ownerID)
			}
		case conn.bridge != nil:
			c.toBridge(conn.bridge, from, m, params, b)
			return true
		default: // the owner, to the agent
			last := c.topo.Load().last()
			d = delivery{to: last, wrap: c.topo.Load().role(last) == roleUpstream, method: method}
			if conn.agentID != string(id) {
				params = withConnectionID(params, conn.agentID)
			}
		}
		to := c.peers[d.to]
		if m.IsNotification() {
			c.deliver(from, to, nil, d, params)
		} else {
			c.forward(to, &call{from: from, fromID: m.ID, method: method, batch: b}, d, params)
		}
		return true
	}
	return false
}

// ownerGone forgets the MCP connections opened by the proxy at pos, which
// is being restarted or bypassed: the agent's messages on them are refused
// as on any unknown connection, instead of reaching a process that never
// opened them. It returns a function that ends the bridged ones, so that
// their MCP clients see the server go away (the shim exits, the HTTP
// session ends); call it once the calls pending on the old process have
// been answered, so that those answers reach the clients first.
func (c *chain) ownerGone(pos int) (end func()) {
	bridged := c.mcp.dropOwner(pos)
	return func() {
		for _, p := range bridged {
			p.link.Load().out.close() // the writer drains it, then closes the connection
		}
	}
}

// toOwner says how a message from the agent side reaches the owner of an
// MCP server: as coming from its successor.
func (c *chain) toOwner(owner int, method string) delivery {
	return delivery{to: owner, wrap: c.topo.Load().role(owner) == roleProxy, method: method}
}

// onSessionSetup records the acp MCP servers a session set-up request
// declares on its way downstream, and rewrites them for the bridge when it
// is about to reach an agent that cannot use them natively.
func (c *chain) onSessionSetup(src int, d delivery, params json.RawMessage) json.RawMessage {
	if d.to <= src || !c.mcp.declare(src, params) {
		return params
	}
	if c.topo.Load().role(d.to) != roleAgent || c.mcp.agentIsNative() {
		return params
	}
	if c.bridge == nil {
		c.log.Warn("the agent does not support MCP-over-ACP and no bridge is configured; acp MCP servers passed on unchanged")
		return params
	}
	rewritten, err := c.bridge.rewrite(params)
	if err != nil {
		c.log.Warn("could not rewrite MCP server declarations for the bridge", zap.Error(err))
		return params
	}
	return rewritten
}
