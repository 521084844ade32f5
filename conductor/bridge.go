package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/acp-conductor/acp-conductor/internal/wire"
	"github.com/acp-conductor/acp-conductor/mcpbridge"
)

// BridgeMode selects how MCP-over-ACP servers reach an agent that cannot use
// them natively.
type BridgeMode string

const (
	BridgeAuto  BridgeMode = "auto"  // HTTP when the agent supports it, else stdio
	BridgeStdio BridgeMode = "stdio" // a stdio shim: the conductor's own binary
	BridgeHTTP  BridgeMode = "http"  // a loopback HTTP server in the conductor, if the agent supports it, else stdio
)

// Transports the bridge can give an agent an MCP server over.
const (
	transportHTTP  = "http"
	transportStdio = "stdio"
)

// bridgeTransports lists, per mode, the transports it may bridge over, the
// preferred first; the agent's capabilities pick the first it supports.
var bridgeTransports = map[BridgeMode][]string{
	BridgeAuto:  {transportHTTP, transportStdio},
	BridgeHTTP:  {transportHTTP, transportStdio},
	BridgeStdio: {transportStdio},
}

// mcpVersion says how an ACP version has an agent advertise the MCP
// transports it can use. v1 makes stdio mandatory for every agent, so it
// has no stdio capability; v2 makes every transport opt-in, and its SDK's
// agents refuse a whole session set-up that declares a server over a
// transport they did not advertise (assertSupportedMcpServers: -32602).
type mcpVersion struct {
	name         string // for the log
	capabilities string // where the transports are advertised, for the log
	stdioBuiltIn bool   // the agent runs stdio servers without saying so
}

var mcpVersions = [...]mcpVersion{
	{name: "ACP v1", capabilities: "agentCapabilities.mcpCapabilities", stdioBuiltIn: true},
	{name: "ACP v2", capabilities: "capabilities.session.mcp", stdioBuiltIn: false},
}

func mcpVersionOf(v2 bool) mcpVersion {
	if v2 {
		return mcpVersions[1]
	}
	return mcpVersions[0]
}

// capability names the capability that advertises transport t.
func (v mcpVersion) capability(t string) string { return v.capabilities + "." + t }

// bridge rewrites acp MCP server declarations into ones the agent can use,
// and relays the connections the agent then opens (serveBridged).
type bridge struct {
	mode BridgeMode
	mcp  *mcpRoutes
	log  *zap.Logger
	// declare returns the replacement declaration for one server, over
	// HTTP or stdio; mcpbridge.ErrLongServerID when an HTTP route cannot
	// hold its id.
	declare func(serverID, name string, http bool) (json.RawMessage, error)

	noHTTPOnce sync.Once // the warning that mode http falls back to stdio
}

// newBridge starts the transports of the MCP bridge for an agent-mode chain.
// Stdio declarations run cfg.ShimExecutable (the conductor's own binary) as
// a shim.
func newBridge(cfg Config, log *zap.Logger, routes *mcpRoutes) (*bridge, *mcpbridge.Bridge, error) {
	mode := cfg.MCPBridge
	if mode == "" {
		mode = BridgeAuto
	}
	t, err := mcpbridge.New(mcpbridge.Options{
		Executable:      cfg.ShimExecutable,
		Logger:          log.With(zap.String("component", "mcp-bridge")),
		HTTP:            mode != BridgeStdio,
		HTTPIdleTimeout: cfg.MCPHTTPIdle,
		MaxMessageBytes: cfg.MaxMessageBytes,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mcp bridge: %w", err)
	}
	// A declaration carries its server's token, which the agent is to
	// present and nobody else to see: the trace, which records the
	// declaration on its way to the agent, writes it redacted, and a token
	// it could not redact fails the declaration rather than be recorded.
	stdio := func(id, name string) (json.RawMessage, error) {
		s := t.Stdio(id, name)
		for _, v := range s.Env {
			if v.Name == mcpbridge.EnvToken {
				if err := cfg.Trace.Redact(v.Value); err != nil {
					return nil, fmt.Errorf("mcp bridge: %w", err)
				}
			}
		}
		if routes.agentV2() {
			s.Type = "stdio"
		}
		return json.Marshal(s)
	}
	routes.revoke = t.Revoke
	b := &bridge{mode: mode, mcp: routes, log: log, declare: func(id, name string, http bool) (json.RawMessage, error) {
		if !http {
			return stdio(id, name)
		}
		s, err := t.HTTP(id, name)
		if err != nil {
			return nil, err
		}
		for _, h := range s.Headers {
			if token, ok := strings.CutPrefix(h.Value, "Bearer "); ok && h.Name == "Authorization" {
				if err := cfg.Trace.Redact(token); err != nil {
					return nil, fmt.Errorf("mcp bridge: %w", err)
				}
			}
		}
		return json.Marshal(s)
	}}
	return b, t, nil
}

// serveBridged relays one connection the agent opened to a bridged server:
// the conductor does the agent's part of MCP-over-ACP with the server's
// owner. mcp/connect first; then each MCP message from the agent's client
// goes to the owner in an mcp/message, the owner's answers and its own
// requests come back as plain MCP; when the client goes away, mcp/disconnect.
func (c *chain) serveBridged(ctx context.Context, conn *mcpbridge.Conn) {
	srv, ok := c.mcp.server(conn.ServerID)
	var p *peer
	if ok {
		name := c.bridged.take(srv.name)
		defer c.bridged.release(name)
		p = newPeer(name, -1, newLink(bridgeChannel{conn}, nil, c.hb, c.flow), c.log)
		ok = c.mcp.addBridged(p, conn.ServerID) // unless its last session just ended
	}
	if !ok {
		// Admitted just before its server ended, whose end revoked the
		// token with the reason, under the routes' lock.
		why, _ := errors.AsType[*wire.Error](conn.Revoked())
		if why == nil {
			why = wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available", conn.Name)
		}
		c.log.Warn("refused a bridged MCP connection: its server is gone", zap.String("server", conn.Name),
			zap.String("transport", conn.Transport), zap.String("reason", why.Message))
		refuseBridged(conn, why)
		return
	}
	defer c.mcp.dropBridged(p)
	defer p.logDropped()
	owner := c.peers[srv.owner]
	p.trace = c.trace
	p.ends = &bridgeEnds{host: c.peers[len(c.peers)-1], owner: owner}
	c.flow.join(p)
	defer c.flow.leave(p)
	log := p.log.With(zap.String("transport", conn.Transport))

	routed, refused := c.openBridged(ctx, srv, conn.ServerID, p, log)
	if routed == nil {
		if refused != nil {
			refuseBridged(conn, refused)
		}
		return
	}

	var g errgroup.Group
	l := p.link.Load()
	g.Go(func() error { l.writeLoop(p.log); return nil })
	for {
		line, err := conn.Recv()
		if big, ok := errors.AsType[*wire.OversizeError](err); ok {
			c.oversize(p, big)
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, mcpbridge.ErrClosed) {
				log.Debug("bridged MCP connection ended", zap.Error(err))
			}
			break
		}
		c.fromBridge(p, owner, routed, line)
		c.throttle(p, l)
	}

	if c.mcp.close(routed) { // else the owner went away (ownerGone), or the server ended (endBridged), first
		if routed.stateless == nil {
			c.disconnect(routed)
		} else {
			c.cancelStateless(routed)
		}
	}
	// The owner's own requests to this client can no longer be answered.
	failCalls(p.fail(errors.New("the MCP client disconnected")), wire.Errorf(codeInternalError, "MCP client of %s disconnected", srv.name))
	l.out.close()
	_ = g.Wait()
}

// openBridged opens the owner's side of a bridged connection: mcp/connect
// to a connect-binding owner; nothing to one that binds per request (it
// refuses mcp/connect as an unknown method), for which the conductor
// translates (mcpxlate.go). When the owner refuses, it returns the error
// the client is to hear; when the chain stops first, neither.
func (c *chain) openBridged(ctx context.Context, srv mcpServer, serverID string, p *peer, log *zap.Logger) (*mcpConn, *wire.Error) {
	if c.mcp.bindingOf(srv.owner) == bindingRequest {
		return c.mcp.openStateless(srv, serverID, p, nil), nil
	}
	var proposed json.RawMessage
	if ownerSpellings[srv.spelling].proposeID {
		proposed = c.mcp.newRequestID()
	}
	connect := connectParams(srv.spelling, serverID, proposed, nil)
	answer := make(chan *wire.Message, 1)
	d := c.toOwner(srv.owner, spell(srv.spelling, methodMCPConnect))
	c.relayCall(c.peers[srv.owner], &call{method: d.method, onResponse: func(m *wire.Message) bool { answer <- m; return true }},
		d, c.mcp.withSession(connect, serverID))
	var m *wire.Message
	select {
	case m = <-answer:
	case <-ctx.Done():
		return nil, nil
	}
	owner := c.peers[srv.owner].name
	if refusedConnect(m) {
		c.mcp.learn(srv.owner, bindingRequest)
		log.Debug("bridged MCP connection to an owner that binds per request", zap.String("owner", owner))
		return c.mcp.openStateless(srv, serverID, p, nil), nil
	}
	connID := connectionIDOf(m.Result, proposed)
	if m.Error != nil || connID == nil {
		log.Warn("the owner refused the MCP connection", zap.String("owner", owner), zap.ByteString("error", m.Error))
		why := "it answered mcp/connect without a connectionId"
		if m.Error != nil {
			why = errorMessage(m.Error)
		}
		return nil, wire.Errorf(codeMCPServerUnavailable, "%s refused the connection to MCP server %q: %s", owner, srv.name, why)
	}
	c.mcp.learn(srv.owner, bindingConnect)
	log.Debug("bridged MCP connection open", zap.String("owner", owner), zap.ByteString("connectionId", connID))
	return c.mcp.openBridged(srv.owner, srv.spelling, connID, p), nil
}

// fromBridge relays one MCP message from a bridged client to the server's
// owner: flattened into mcp/message on the connection, as the MCP-over-ACP
// RFD says, or translated for an owner that binds per request. A response
// answers one of the owner's own requests.
func (c *chain) fromBridge(p, owner *peer, conn *mcpConn, line []byte) {
	m, err := wire.Parse(line)
	if err != nil {
		p.rejected(line, err)
		if !errors.Is(err, wire.ErrNotJSON) {
			p.send(encodeError(wire.ParseErrorID(err), wire.Errorf(codeInvalidRequest, "%v", err)))
		}
		return
	}
	if m.IsResponse() {
		c.relayAnswer(p, m)
		return
	}
	if conn.stateless != nil {
		c.statelessCall(conn, p, m, m.Method, m.Params, nil)
		return
	}
	inner := m.Params
	if m.Method == mcpMethodCancelled && m.IsNotification() {
		var ok bool
		if inner, ok = mcpCancelled(p, inner); !ok {
			return
		}
	}
	params := connEnvelope(conn.ownerID, m.Method, inner, nil)
	d := c.toOwner(conn.owner, spell(conn.spelling, methodMCPMessage))
	if m.IsNotification() {
		c.relay(p, owner, nil, d, params)
		return
	}
	cl := &call{from: p, fromID: m.ID, method: methodMCPMessage}
	cl.onResponse = func(resp *wire.Message) bool {
		if resp.Error != nil {
			resp.Error = connErrorFor(resp.Error, conn.ownerID, "") // the client speaks MCP, of no connection
		}
		return false
	}
	c.relayCall(owner, cl, d, params)
}

// refuseBridged answers a bridged connection that will not be served:
// to a server the chain no longer has (its last session ended, or the
// proxy that declared it was restarted or bypassed, after the client was
// admitted), or one whose owner refused it. Each request of the client's
// gets e, an MCP error, at once, until it has been told so at an
// initialize, the handshake no client goes past; then the connection
// ends. A client that asks something else first (the MCP Go SDK's asks
// server/discover, then falls back to initialize) would else hear only a
// broken pipe at its initialize. A batch too long to keep that holds
// requests is answered as the chain answers one (chain.oversizeBatch):
// each request in it gets e, together in a batch, and the connection
// ends.
func refuseBridged(conn *mcpbridge.Conn, e *wire.Error) {
	for {
		line, err := conn.Recv()
		if big, ok := errors.AsType[*wire.OversizeError](err); ok {
			switch {
			case big.IsBatch:
				var unkept *wire.Error // those whose ids were not kept get it under null
				if big.BatchUnkept > 0 {
					unkept = e
				}
				if out := wire.RefuseBatch(big.Batch, e, unkept); out != nil {
					conn.Send(out)
					return
				}
			case big.ID != nil && !big.IsResponse, big.IDUnread && big.Method != "":
				conn.Send(encodeError(big.ID, e))
				return
			}
			continue
		}
		if err != nil {
			return
		}
		m, err := wire.Parse(line)
		if err != nil {
			return // a batch, or not JSON-RPC: the client sees the server close
		}
		if m.IsRequest() {
			conn.Send(encodeError(m.ID, e))
			if m.Method == mcpMethodInitialize {
				return
			}
		}
	}
}

func mustQuote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// bridgeChannel carries a link over a bridged MCP connection.
type bridgeChannel struct{ c *mcpbridge.Conn }

func (b bridgeChannel) Recv() ([]byte, error) { return b.c.Recv() }
func (b bridgeChannel) Close() error          { return b.c.Close() }

// SendBuffers sends each line the segments hold: a segment may hold several
// lines (the writer joins small ones) or part of one (a large value).
func (b bridgeChannel) SendBuffers(segments *net.Buffers) error {
	var partial []byte
	for _, seg := range *segments {
		for len(seg) > 0 {
			i := bytes.IndexByte(seg, '\n')
			if i < 0 {
				partial = append(partial, seg...)
				break
			}
			line := seg[:i]
			if partial != nil {
				line = append(partial, line...)
				partial = nil
			}
			if err := b.c.Send(line); err != nil {
				return err
			}
			seg = seg[i+1:]
		}
	}
	return nil
}

// rewrite replaces each acp entry of params.mcpServers with the bridge's
// declaration for it. The entry's other members (name, _meta, anything
// unknown) are kept; entries of other types are not touched. An entry the
// bridge can give the agent over no transport the agent advertised is
// left out, with a warning that names it and the capability it lacks: the
// agent would refuse the whole session for it, or fail to start it.
func (b *bridge) rewrite(params json.RawMessage) (json.RawMessage, error) {
	b.mcp.mu.Lock()
	agentHas := map[string]bool{transportHTTP: b.mcp.http, transportStdio: b.mcp.stdio}
	version := mcpVersionOf(b.mcp.v2)
	b.mcp.mu.Unlock()
	usable := func(t string) bool { return agentHas[t] && slices.Contains(bridgeTransports[b.mode], t) }
	transport := b.transport(agentHas)
	if b.mode == BridgeHTTP && transport == transportStdio {
		// An HTTP declaration would only be refused, or worse, ignored.
		b.noHTTPOnce.Do(func() {
			if b.log != nil {
				b.log.Warn(fmt.Sprintf("mcp_bridge is http, but the agent did not advertise %s: bridging MCP servers over stdio",
					version.capability(transportHTTP)))
			}
		})
	}
	var servers []json.RawMessage
	if err := json.Unmarshal(wire.Member(params, "mcpServers"), &servers); err != nil {
		return nil, err
	}
	kept := servers[:0:0]
	for _, raw := range servers {
		d, ok := declarationOf(raw)
		if !ok || d.Type != "acp" {
			kept = append(kept, raw)
			continue
		}
		if transport == "" {
			b.unbridged(d.Name, fmt.Sprintf("the agent (%s) advertises none of %s", version.name, b.needed(version)))
			continue
		}
		id, _ := d.serverID()
		repl, err := b.declare(id, d.Name, transport == transportHTTP)
		if errors.Is(err, mcpbridge.ErrLongServerID) {
			// A route is bounded; the shim reaches any server.
			if !usable(transportStdio) {
				b.unbridged(d.Name, fmt.Sprintf("its id (%d bytes) is too long for an HTTP route, and the agent (%s) did not advertise %s",
					len(id), version.name, version.capability(transportStdio)))
				continue
			}
			if b.log != nil {
				b.log.Warn("MCP server id too long for an HTTP route: bridged over stdio",
					zap.String("server", d.Name), zap.Int("idBytes", len(id)))
			}
			repl, err = b.declare(id, d.Name, false)
		}
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
		bridged, err := json.Marshal(entry)
		if err != nil {
			return nil, err
		}
		kept = append(kept, bridged)
	}
	list, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	return wire.SetPath(params, []string{"mcpServers"}, list)
}

// transport is the transport the bridge gives the agent servers over,
// the first of its mode's that the agent has, or "" when there is none.
func (b *bridge) transport(agentHas map[string]bool) string {
	for _, t := range bridgeTransports[b.mode] {
		if agentHas[t] {
			return t
		}
	}
	return ""
}

// reaches reports whether the bridge can give the agent, as its
// initialize answer described it, an MCP server over any transport.
func (b *bridge) reaches(r *mcpRoutes) bool {
	r.mu.Lock()
	agentHas := map[string]bool{transportHTTP: r.http, transportStdio: r.stdio}
	r.mu.Unlock()
	return b.transport(agentHas) != ""
}

// needed names the capabilities any of which would let the bridge reach
// the agent in this mode.
func (b *bridge) needed(v mcpVersion) string {
	var names []string
	for _, t := range bridgeTransports[b.mode] {
		names = append(names, v.capability(t))
	}
	s := strings.Join(names, " or ")
	if b.mode == BridgeStdio {
		s += " (mcp_bridge is stdio)"
	}
	return s
}

// unbridged warns that the acp MCP server name is not given to the agent,
// and why.
func (b *bridge) unbridged(name, why string) {
	if b.log != nil {
		b.log.Warn("MCP server not passed to the agent: the bridge cannot reach it over a transport the agent advertised",
			zap.String("server", name), zap.String("reason", why))
	}
}

// toBridge relays an owner's mcp/message to a bridged connection as the
// plain MCP message it carries.
func (c *chain) toBridge(to *peer, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	method, inner, err := wire.Unwrap(params)
	if err != nil {
		c.answerError(from, m, wire.Errorf(codeInvalidParams, "mcp/message without a method"), b)
		return
	}
	d := delivery{method: method}
	if m.IsNotification() {
		if method == mcpMethodCancelled {
			var ok bool
			if inner, ok = mcpCancelled(from, inner); !ok {
				return
			}
		}
		c.relay(from, to, nil, d, inner)
		return
	}
	c.relayCall(to, &call{from: from, fromID: m.ID, method: method, batch: b}, d, inner)
}
