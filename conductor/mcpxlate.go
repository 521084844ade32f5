package conductor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// Translation between the two MCP-over-ACP bindings, for a caller and an
// owner that bind differently.
//
// A request-binding caller (mcp/message {serverId, requestId}) of a
// connect-binding owner: the conductor opens one connection per server with
// mcp/connect the first time a caller needs it, and sends each request on it
// as mcp/message {connectionId}; the owner's answer (an MCP result, or an
// error) comes back as the {result} or {error} the caller expects, and the
// owner's notifications go to the request they belong to (by progress
// token, else the one request in flight). The caller speaks stateless MCP
// (2026-07-28), which the owner's server must serve without an initialize,
// as the MCP SDKs do.
//
// A connect-binding caller (an agent's mcp/connect, or a bridged MCP
// client) of a request-binding owner: the conductor answers mcp/connect with
// a connection of its own, and sends each MCP request on it as one
// mcp/message {serverId, requestId}. Such an owner speaks MCP 2026-07-28
// only, so a legacy client's handshake is played by the conductor (the
// statelessRules table): initialize is answered from the owner's
// server/discover, or from the declaration when the owner has none (a
// discover that fails fails the initialize);
// notifications/initialized is absorbed; ping is answered {}, as MCP
// asks of either side; every later request gets the
// per-request _meta keys from what the client said in initialize. A
// 2026-07-28 client already sends them and passes straight through.

// MCP 2026-07-28's per-request _meta keys and its discovery method.
const (
	mcpStatelessVersion  = "2026-07-28"
	mcpMetaVersion       = "io.modelcontextprotocol/protocolVersion"
	mcpMetaCapabilities  = "io.modelcontextprotocol/clientCapabilities"
	mcpMetaClientInfo    = "io.modelcontextprotocol/clientInfo"
	mcpMethodDiscover    = "server/discover"
	mcpMethodInitialize  = "initialize"
	mcpMethodInitialized = "notifications/initialized"
	mcpMethodCancelled   = "notifications/cancelled"
	mcpMethodPing        = "ping"
)

// codeMCPBackendFailed is the binding's code for an owner that answered
// without a valid outcome (the TypeScript SDK's McpBindingErrorCode; the
// others are in errors.go).
const codeMCPBackendFailed = -33002

// activeRequest is a request-binding request in flight on a connection the
// conductor opened to a connect-binding owner.
type activeRequest struct {
	caller    int             // the position it came from
	requestID json.RawMessage // the caller's, raw JSON
	progress  string          // its params._meta.progressToken, raw JSON, if any
	call      *call           // as relayed to the owner, to answer if it never will
}

// An mcpClient is what a connect-binding caller's MCP client said of itself
// in initialize, for the _meta of its stateless requests.
type mcpClient struct {
	version      string          // the protocol version it asked for
	capabilities json.RawMessage // its ClientCapabilities
	info         json.RawMessage // its Implementation
}

// A statelessRule says what becomes of a connect-binding caller's MCP
// message on its way to a request-binding owner.
type statelessRule int

const (
	slAddMeta    statelessRule = iota // a request without the per-request _meta: add it
	slPass                            // a 2026-07-28 request: as it is
	slInitialize                      // answer initialize here
	slAbsorb                          // the handshake's notification: nobody needs it
	slCancel                          // MCP's cancellation: cancel the request it names
	slDrop                            // another notification: stateless MCP takes none
	slPong                            // ping: answer {} here
)

// statelessRules is the legacy × stateless table, by method and whether
// the message is a request; requests not listed go by their _meta.
var statelessRules = map[struct {
	method  string
	request bool
}]statelessRule{
	{mcpMethodInitialize, true}:   slInitialize,
	{mcpMethodInitialized, false}: slAbsorb,
	{mcpMethodCancelled, false}:   slCancel,
	// MCP 2026-07-28 has no ping, and its servers refuse it as unknown,
	// which a keep-alive takes for a dead server; what ping checks is the
	// connection, which is the conductor's.
	{mcpMethodPing, true}: slPong,
}

func statelessRuleFor(method string, request bool, params json.RawMessage) statelessRule {
	if r, ok := statelessRules[struct {
		method  string
		request bool
	}{method, request}]; ok {
		return r
	}
	switch {
	case !request:
		return slDrop
	case wire.Member(wire.Member(params, "_meta"), mcpMetaVersion) != nil:
		return slPass
	}
	return slAddMeta
}

// withStatelessMeta returns MCP params with the per-request _meta keys
// that are missing added from what client said of itself.
func withStatelessMeta(params json.RawMessage, client *mcpClient) json.RawMessage {
	caps := client.capabilities
	if caps == nil {
		caps = json.RawMessage(`{}`)
	}
	out, err := wire.EditMember(params, "_meta", func(meta json.RawMessage) (json.RawMessage, error) {
		for _, kv := range [...]struct {
			key string
			val json.RawMessage
		}{{mcpMetaVersion, mustQuote(mcpStatelessVersion)}, {mcpMetaCapabilities, caps}, {mcpMetaClientInfo, client.info}} {
			if kv.val == nil || wire.Member(meta, kv.key) != nil {
				continue
			}
			var err error
			if meta, err = wire.EditMember(meta, kv.key, func(json.RawMessage) (json.RawMessage, error) { return kv.val, nil }); err != nil {
				return nil, err
			}
		}
		return meta, nil
	})
	if err != nil {
		return params // not an object: the owner will say so
	}
	return out
}

// asInitialize makes the answer to the owner's server/discover, as
// fromOutcome left it, the answer to a legacy client's initialize. Method
// not found is an owner whose server has none: the result is built from
// the declaration. Any other error stays the initialize's: the owner's,
// or the conductor's when the server or its owner went first, which a
// made-up result would hide until the client's next call.
func asInitialize(resp *wire.Message, client *mcpClient, serverName string) {
	switch {
	case resp.Error == nil:
		resp.Result = initializeResult(client, serverName, resp.Result)
	case errorCode(resp.Error) == codeMethodNotFound:
		resp.Result, resp.Error = initializeResult(client, serverName, nil), nil
	}
}

// initializeResult is the conductor's answer to a legacy client's
// initialize: the owner's server/discover result in the shape of an
// InitializeResult, or, what it lacks (all of it, for a nil discover),
// built from the declaration.
func initializeResult(client *mcpClient, serverName string, discover json.RawMessage) json.RawMessage {
	version := client.version
	if version == "" {
		version = "2025-11-25"
	}
	var d struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Instructions json.RawMessage `json:"instructions,omitempty"`
	}
	res := map[string]json.RawMessage{"protocolVersion": mustQuote(version)}
	if discover != nil && json.Unmarshal(discover, &d) == nil && d.Capabilities != nil {
		res["capabilities"], res["serverInfo"] = d.Capabilities, d.ServerInfo
		if d.Instructions != nil {
			res["instructions"] = d.Instructions
		}
	}
	if res["capabilities"] == nil {
		res["capabilities"] = json.RawMessage(`{"tools":{}}`)
	}
	if res["serverInfo"] == nil {
		res["serverInfo"], _ = json.Marshal(map[string]string{"name": serverName, "version": "0"})
	}
	out, _ := json.Marshal(res)
	return out
}

// asOutcome turns a connect-binding answer into the request binding's
// carrier: an MCP result into {result}, an MCP error into {error}. A
// cancellation stays the ACP error it is.
func asOutcome(resp *wire.Message) {
	switch {
	case resp.Error != nil && errorCode(resp.Error) == codeCancelled:
	case resp.Error != nil:
		resp.Result, resp.Error = append(append([]byte(`{"error":`), resp.Error...), '}'), nil
	default:
		resp.Result = append(append([]byte(`{"result":`), resp.Result...), '}')
	}
}

// fromOutcome turns a request-binding answer into the connect binding's:
// {result} into the result, {error} into the error. An answer that is
// neither is a failure of the owner.
func fromOutcome(resp *wire.Message) {
	if resp.Error != nil {
		return
	}
	if r := wire.Member(resp.Result, "result"); r != nil {
		resp.Result = r
		return
	}
	if e := wire.Member(resp.Result, "error"); e != nil {
		resp.Result, resp.Error = nil, e
		return
	}
	resp.Result, resp.Error = nil, wire.Errorf(codeMCPBackendFailed, "invalid MCP-over-ACP response carrier").Encode()
}

// progressToken returns the raw progress token of MCP request params.
func progressToken(params json.RawMessage) string {
	return string(wire.Member(wire.Member(params, "_meta"), "progressToken"))
}

// connEnvelope returns mcp/message params carrying an MCP message on a
// connection; meta, if not nil, is the carrier's own _meta.
func connEnvelope(connectionID string, method string, params, meta json.RawMessage) json.RawMessage {
	out := append([]byte(`{"connectionId":`), connectionID...)
	return closeEnvelope(out, method, params, meta)
}

// requestEnvelope returns mcp/message params carrying an MCP request or
// notification of the request binding.
func requestEnvelope(serverID, requestID json.RawMessage, method string, params, meta json.RawMessage) json.RawMessage {
	out := append(append([]byte(`{"serverId":`), serverID...), `,"requestId":`...)
	out = append(out, requestID...)
	return closeEnvelope(out, method, params, meta)
}

func closeEnvelope(out []byte, method string, params, meta json.RawMessage) json.RawMessage {
	out = append(append(out, `,"method":`...), mustQuote(method)...)
	if params != nil {
		out = append(append(out, `,"params":`...), params...)
	}
	if meta != nil {
		out = append(append(out, `,"_meta":`...), meta...)
	}
	return append(out, '}')
}

// An opening is a shared connection whose mcp/connect awaits its owner's
// answer: what waits for it, and why, if the last session that declared
// its server ended meanwhile, it is no longer wanted.
type opening struct {
	waiting []func(*mcpConn, *wire.Error)
	ended   *wire.Error
}

// viaConnection calls fn with the connection request-binding callers share
// to serverID, opening it first; with a nil connection when the owner binds
// per request; or with the error that stops both.
func (c *chain) viaConnection(srv mcpServer, serverID string, fn func(*mcpConn, *wire.Error)) {
	r := c.mcp
	r.mu.Lock()
	if conn := r.shared[serverID]; conn != nil {
		r.mu.Unlock()
		fn(conn, nil)
		return
	}
	op, busy := r.opening[serverID]
	if !busy {
		op = &opening{}
		r.opening[serverID] = op
	}
	op.waiting = append(op.waiting, fn)
	r.mu.Unlock()
	if busy {
		return
	}
	var proposed json.RawMessage
	if ownerSpellings[srv.spelling].proposeID {
		proposed = r.newRequestID()
	}
	params := r.withSession(connectParams(srv.spelling, serverID, proposed, json.RawMessage(`{"`+metaRequestBinding+`":true}`)), serverID)
	d := c.toOwner(srv.owner, spell(srv.spelling, methodMCPConnect))
	cl := &call{method: d.method, onResponse: func(resp *wire.Message) bool {
		var conn *mcpConn
		var e *wire.Error
		cid := connectionIDOf(resp.Result, proposed)
		switch {
		case refusedConnect(resp) && wire.Member(wire.Member(resp.Error, "data"), metaRequestBinding) != nil:
			r.learn(srv.owner, bindingEither)
		case refusedConnect(resp):
			r.learn(srv.owner, bindingRequest)
		case resp.Error == nil && cid != nil:
			r.learn(srv.owner, bindingConnect)
			conn = &mcpConn{owner: srv.owner, spelling: srv.spelling, serverID: serverID, ownerID: string(cid), forRequests: true}
		default:
			e = wire.Errorf(codeMCPServerUnavailable, "MCP server %s: its owner refused the connection", srv.name).
				WithData(map[string]json.RawMessage{"serverId": dataString(serverID), "error": resp.Error})
		}
		r.mu.Lock()
		if r.opening[serverID] == op {
			delete(r.opening, serverID)
		}
		ended, waiting := op.ended, op.waiting
		if ended == nil && conn != nil {
			// Under the lock sessionEnded takes: the session cannot end
			// between this check and the connection's recording.
			r.owned[ownedID{conn.owner, conn.ownerID}] = conn
			r.shared[serverID] = conn
		}
		r.mu.Unlock()
		if ended != nil {
			if conn != nil {
				c.disconnect(conn) // never recorded: nothing else reaches it
			}
			conn, e = nil, ended
		}
		for _, fn := range waiting {
			fn(conn, e)
		}
		return true
	}}
	c.relayCall(c.peers[srv.owner], cl, d, params)
}

// toConnectOwner sends the mcp/message of a request-binding caller at src
// on the shared connection to a connect-binding owner.
func (c *chain) toConnectOwner(src int, conn *mcpConn, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	method, inner, err := wire.Unwrap(params)
	if err != nil {
		c.answerError(from, m, wire.Errorf(codeInvalidParams, "mcp/message without a method"), b)
		return
	}
	out := connEnvelope(conn.ownerID, method, inner, wire.Member(params, "_meta"))
	relayed := spell(conn.spelling, methodMCPMessage)
	if m.IsNotification() {
		c.relayToOwner(conn.owner, from, m, relayed, out, b)
		return
	}
	cl := &call{from: from, fromID: m.ID, method: relayed, batch: b}
	cl.onResponse = func(resp *wire.Message) bool {
		c.mcp.mu.Lock()
		conn.active = slices.DeleteFunc(conn.active, func(a activeRequest) bool { return a.call == cl })
		c.mcp.mu.Unlock()
		if resp.Error != nil {
			resp.Error = connErrorFor(resp.Error, conn.ownerID, "")
		}
		asOutcome(resp)
		return false
	}
	req := activeRequest{caller: src, requestID: append(json.RawMessage(nil), wire.Member(params, "requestId")...), progress: progressToken(inner), call: cl}
	c.mcp.mu.Lock()
	conn.active = append(conn.active, req)
	c.mcp.mu.Unlock()
	d := c.toOwner(conn.owner, relayed)
	c.relayCall(c.peers[d.to], cl, d, out)
}

// toRequestCaller relays a connect-binding owner's message on the shared
// connection to the request-binding caller's request it belongs to.
func (c *chain) toRequestCaller(conn *mcpConn, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	method, inner, err := wire.Unwrap(params)
	switch {
	case m.Method == methodMCPDisconnect || err != nil:
		c.answerError(from, m, wire.Errorf(codeInvalidParams, "%s: not an MCP message for this connection", m.Method), b)
		return
	case m.IsRequest():
		c.answerError(from, m, wire.Errorf(codeMethodNotFound,
			"%s: the caller binds per request (MCP %s), where servers send no requests", method, mcpStatelessVersion), b)
		return
	}
	token := progressToken(inner)
	if token == "" {
		token = string(wire.Member(inner, "progressToken"))
	}
	var reqID json.RawMessage
	var caller int
	c.mcp.mu.Lock()
	for _, a := range conn.active {
		if token != "" && a.progress == token || len(conn.active) == 1 {
			reqID, caller = a.requestID, a.caller
		}
	}
	c.mcp.mu.Unlock()
	if reqID == nil {
		from.unheeded("dropped an MCP notification no request in flight is waiting for", zap.String("method", method))
		return
	}
	d := c.topo.Load().toCaller(caller, methodMCPMessage)
	c.relay(from, c.peers[d.to], nil, d, requestEnvelope(mustQuote(conn.serverID), reqID, method, inner, nil))
}

// openStateless makes the connection a connect-binding caller (the agent,
// or with bridge set a bridged client) has to a request-binding owner. For
// the agent it returns nil if the chain no longer has the server: its last
// session ended while the owner answered mcp/connect. (A bridged client's
// goes with the client, which the end of the server ends: serveBridged.)
// The agent's connection takes the id agentID, if given and free: a
// Thinkwell parent uses the id it proposed, whatever the answer says.
func (r *mcpRoutes) openStateless(srv mcpServer, serverID string, bridge *peer, agentID []byte) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.openStatelessLocked(srv, serverID, bridge, agentID)
}

func (r *mcpRoutes) openStatelessLocked(srv mcpServer, serverID string, bridge *peer, agentID []byte) *mcpConn {
	if _, ok := r.servers[serverID]; !ok && bridge == nil {
		return nil
	}
	r.lastID++
	id := string(mustQuote("acp-conductor:" + strconv.FormatInt(r.lastID, 10)))
	c := &mcpConn{owner: srv.owner, serverID: serverID, ownerID: id, bridge: bridge, stateless: &mcpClient{}}
	if bridge == nil {
		c.agentID = id
		if agentID != nil && r.conns[string(agentID)] == nil {
			c.agentID = string(agentID)
		}
		r.addAgentConnLocked(c)
		return c
	}
	r.owned[ownedID{srv.owner, id}] = c // never addressed by the owner; kept for dropOwner
	return c
}

// A statelessCall is a request the conductor sent a request-binding owner
// for a connect-binding caller: on conn, from caller under its id.
type statelessCall struct {
	conn   *mcpConn
	caller *peer
	id     json.RawMessage
}

// statelessRequest returns the connection of a connect-binding caller for
// which the conductor sent request requestID to serverID, both raw JSON.
// They are compared as the strings they are, however the owner spells
// them: the conductor's encoder escapes "&", "<", ">" and U+2028, which
// the TypeScript SDK's JSON.stringify writes as they are.
func (r *mcpRoutes) statelessRequest(serverID, requestID []byte) *mcpConn {
	server, ok := wire.Unquote(serverID)
	if !ok {
		return nil
	}
	request, ok := wire.Unquote(requestID)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[[2]string{server, request}].conn
}

// cancelStateless cancels, at its request-binding owner, each request its
// caller still has in flight on conn, which is closing: with no connection
// of its own to end, the owner's handlers would otherwise run on for
// nobody.
func (c *chain) cancelStateless(conn *mcpConn) {
	c.mcp.mu.Lock()
	var open []statelessCall
	for _, sc := range c.mcp.requests {
		if sc.conn == conn {
			open = append(open, sc)
		}
	}
	c.mcp.mu.Unlock()
	for _, sc := range open {
		c.cancel(sc.caller, append(append([]byte(`{"requestId":`), sc.id...), '}'), "")
	}
}

// fromConnectCaller handles the agent's mcp/message or mcp/disconnect on a
// connection the conductor made to a request-binding owner.
func (c *chain) fromConnectCaller(conn *mcpConn, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) {
	if method == methodMCPDisconnect {
		c.mcp.close(conn)
		c.cancelStateless(conn)
		if m.IsRequest() {
			c.answerItself(from, m, json.RawMessage(`{}`), b)
		}
		return
	}
	inner, innerParams, err := wire.Unwrap(params)
	if err != nil {
		c.answerError(from, m, wire.Errorf(codeInvalidParams, "mcp/message without a method"), b)
		return
	}
	c.statelessCall(conn, from, m, inner, innerParams, b)
}

// statelessCall sends one MCP message of a connect-binding caller to a
// request-binding owner, as the statelessRules table says. m is the
// message that carried it, whose id the answer goes back under.
func (c *chain) statelessCall(conn *mcpConn, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) {
	srv, _ := c.mcp.server(conn.serverID)
	var answered func(*wire.Message) // what the answer becomes for the caller, after fromOutcome
	switch statelessRuleFor(method, m.IsRequest(), params) {
	case slAbsorb:
		return
	case slPong:
		c.answerItself(from, m, json.RawMessage(`{}`), b)
		return
	case slDrop:
		from.unheeded("dropped an MCP notification a stateless server takes no part in", zap.String("method", method))
		return
	case slCancel:
		// It names the request by the caller's id: the mcp/message's own
		// for a native agent, the MCP request's for a bridged client.
		c.cancel(from, params, "")
		return
	case slInitialize:
		var init struct {
			Version      string          `json:"protocolVersion"`
			Capabilities json.RawMessage `json:"capabilities"`
			ClientInfo   json.RawMessage `json:"clientInfo"`
		}
		_ = json.Unmarshal(params, &init)
		c.mcp.mu.Lock()
		*conn.stateless = mcpClient{version: init.Version, capabilities: init.Capabilities, info: init.ClientInfo}
		client := *conn.stateless
		c.mcp.mu.Unlock()
		// The owner's server/discover goes as the caller's own call, under
		// its initialize's id, so that what answers the caller's calls in
		// flight when the server or its owner goes answers this one too.
		method, params = mcpMethodDiscover, withStatelessMeta(json.RawMessage(`{}`), &client)
		answered = func(resp *wire.Message) { asInitialize(resp, &client, srv.name) }
	case slAddMeta:
		c.mcp.mu.Lock()
		client := *conn.stateless
		c.mcp.mu.Unlock()
		params = withStatelessMeta(params, &client)
	}
	serverID, reqID := mustQuote(conn.serverID), c.mcp.newRequestID()
	key := [2]string{conn.serverID, string(reqID[1 : len(reqID)-1])} // decoded, as statelessRequest looks them up
	c.mcp.mu.Lock()
	c.mcp.requests[key] = statelessCall{conn: conn, caller: from, id: bytes.Clone(m.ID)}
	c.mcp.mu.Unlock()
	out := c.mcp.withSession(requestEnvelope(serverID, reqID, method, params, nil), conn.serverID)
	cl := &call{from: from, fromID: m.ID, method: methodMCPMessage, batch: b}
	cl.onResponse = func(resp *wire.Message) bool {
		c.mcp.mu.Lock()
		delete(c.mcp.requests, key)
		c.mcp.mu.Unlock()
		fromOutcome(resp)
		if answered != nil {
			answered(resp)
		}
		return false
	}
	if conn.bridge == nil && !c.mcp.track(conn, cl) {
		// Its server ended meanwhile. (A bridged client's calls are its
		// link's, which the end of the server fails: endBridged.)
		c.mcp.mu.Lock()
		delete(c.mcp.requests, key)
		c.mcp.mu.Unlock()
		c.noConnection(true, from, m, methodMCPMessage, []byte(conn.agentID), b)
		return
	}
	d := c.toOwner(conn.owner, methodMCPMessage)
	c.relayCall(c.peers[d.to], cl, d, out)
}

// newRequestID returns a requestId for a request the conductor makes, as
// JSON.
func (r *mcpRoutes) newRequestID() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastID++
	return mustQuote(fmt.Sprintf("acp-conductor:%d", r.lastID))
}

// toConnectCaller relays a request-binding owner's message for a request
// the conductor made for a connect-binding caller: on the caller's
// connection, or plain to a bridged client.
func (c *chain) toConnectCaller(conn *mcpConn, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	method, inner, err := wire.Unwrap(params)
	if err != nil {
		c.answerError(from, m, wire.Errorf(codeInvalidParams, "mcp/message without a method"), b)
		return
	}
	if conn.bridge != nil {
		c.toBridge(conn.bridge, from, m, params, b)
		return
	}
	d := c.toAgent(methodMCPMessage)
	out := connEnvelope(conn.agentID, method, inner, nil)
	if m.IsNotification() {
		c.relay(from, c.peers[d.to], nil, d, out)
		return
	}
	c.relayCall(c.peers[d.to], &call{from: from, fromID: m.ID, method: methodMCPMessage, batch: b}, d, out)
}
