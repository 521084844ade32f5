package conductor

import (
	"encoding/json"
	"strings"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// The chain, as the router sees it, is a line of positions:
//
//	0        the client (the editor, or the parent conductor in proxy mode)
//	1..n     the proxies, in order
//	n+1      the agent (agent mode), or the parent conductor's successor
//	         side (proxy mode): what the parent delivers in proxy/successor
//	         envelopes and what the conductor sends up in them
//
// A position has at most one predecessor (position-1) and one successor
// (position+1). Every rule of the proxy-chains RFD is a statement about
// which position a message goes to next and how it is dressed on arrival;
// this file states them, and nothing else in the package decides where a
// message goes.

// A role is what sits at a position.
type role int

const (
	roleClient   role = iota // position 0
	roleProxy                // positions 1..n
	roleAgent                // position n+1 in agent mode
	roleUpstream             // position n+1 in proxy mode: the parent, as our successor
)

// topology is the shape of one chain.
type topology struct {
	mode     Mode
	proxies  int
	bypassed []bool // by position: proxies taken out of the chain
	// sealed is set once the client has been told that the chain stops
	// and its requests in flight failed (runner.abandonAll): what
	// comes for it after that is dropped (see route).
	sealed bool
}

func (t topology) last() int { return t.proxies + 1 }

func (t topology) role(pos int) role {
	switch {
	case pos == 0:
		return roleClient
	case pos <= t.proxies:
		return roleProxy
	case t.mode == ProxyMode:
		return roleUpstream
	default:
		return roleAgent
	}
}

// A delivery says how one request or notification goes on.
type delivery struct {
	to     int    // destination position
	wrap   bool   // relay inside a successor envelope
	method string // the method the destination sees inside or without the envelope
	// extra holds the members JSON-RPC does not define of the message
	// relayed (wire.Message.AppendExtra), which go on beside its method
	// and params; almost always empty. A string keeps delivery comparable.
	extra string
}

// hop decides where a request or notification goes next, given the
// position it came from, whether it arrived in a successor envelope (already
// unwrapped into method), and its method.
//
//   - A proxy's envelope goes to its successor; anything else it sends goes
//     to its predecessor.
//   - The client's messages go to position 1; in proxy mode, envelopes from
//     the parent come from its successor side (position n+1) and go to the
//     last proxy.
//   - The agent's messages go to the last proxy (or straight to the client).
//   - A message reaching a proxy from its successor is wrapped; one reaching
//     the parent's successor side is wrapped too; all others arrive plain.
//   - initialize becomes proxy/initialize for a proxy and initialize for the
//     agent or for the parent (which converts it in turn).
//   - A bypassed proxy is skipped, in either direction: its predecessor and
//     successor talk as if it had never been there.
func (t topology) hop(from int, enveloped bool, method string) (delivery, *wire.Error) {
	var to int
	switch t.role(from) {
	case roleClient:
		if enveloped {
			if t.mode != ProxyMode {
				return delivery{}, wire.Errorf(codeMethodNotFound, "%s: the conductor is the final agent here and has no successor", method)
			}
			// The parent delivers what our successor sent: treat it as coming
			// from position n+1.
			return t.hop(t.last(), false, method)
		}
		to = 1
	case roleProxy:
		if enveloped {
			to = from + 1
		} else {
			to = from - 1
		}
	case roleAgent, roleUpstream:
		if enveloped {
			return delivery{}, wire.Errorf(codeMethodNotFound, "%s: the agent has no successor", method)
		}
		to = from - 1
	}

	downstream := to > from
	for t.role(to) == roleProxy && to < len(t.bypassed) && t.bypassed[to] {
		if downstream {
			to++
		} else {
			to--
		}
	}
	d := delivery{to: to, method: method}
	switch t.role(to) {
	case roleProxy:
		d.wrap = !downstream
		if downstream && wire.IsInitialize(method) {
			d.method = wire.MethodProxyInitialize
		}
	case roleAgent:
		if wire.IsInitialize(method) {
			d.method = wire.MethodInitialize
		}
	case roleUpstream:
		d.wrap = true
		if wire.IsInitialize(method) {
			d.method = wire.MethodInitialize
		}
	case roleClient:
		// Position 0 of a proxy-mode conductor and the parent's successor
		// side are the same peer: a message travelling up from position 1
		// reaches the parent plain, exactly as an agent-mode client sees it.
	}
	return d, nil
}

// An action is what the relay does with one message, as route decides it.
type action uint8

const (
	actRelay      action = iota // send it to d.to as d says
	actRelayLine                // send the line itself, unchanged, to d.to
	actComplete                 // a response: return it to whoever asked
	actCancel                   // $/cancel_request: cancel the request's next hop
	actAnswerInit               // answer from the successor's recorded initialize
	actMCP                      // the MCP router's, if its tables know it; else actRelay
	actRefuse                   // answer a request with err; drop a notification
	actDrop                     // a notification for a sealed client: dropped, and counted
)

// An inbound is what the router is told about one message.
type inbound struct {
	from int           // the position it came from
	msg  *wire.Message // as parsed
	// restarted says that from is a restarted proxy whose successor is
	// initialized already: its initialize is answered by the conductor.
	restarted bool
}

// dialects tells the router how the peer at each position spells the proxy
// methods, which it learns at run time.
type dialects interface {
	dialectAt(pos int) *wire.Dialect
}

// A decision is everything the relay needs to carry out one message.
type decision struct {
	act action
	d   delivery        // the next hop, for actRelay, actRelayLine and actMCP
	err *wire.Error     // for actRefuse
	src int             // the position the message counts as coming from
	raw json.RawMessage // the params to relay (the envelope's inner params)

	enveloped bool // it arrived in a successor envelope
	setup     bool // a session set-up request: MCP declarations to note
	// For a relayed initialize request: hook its answer (which records
	// the params a proxy took, for a restart); bound it with the init
	// timer (the client's own).
	initialize, initTimer bool
	// proxyInit is, for an initialize reaching a proxy, the dialect it is
	// spelled in there (and whose params it takes).
	proxyInit *wire.Dialect
	// learn, if set, is the dialect the sender has shown it speaks.
	learn *wire.Dialect
}

// route classifies one message and decides how it goes on. It is the one
// place that does: the relay only carries out what it returns.
//
//   - A response is completed: it goes back to the peer that asked.
//   - A successor envelope is unwrapped; a malformed one is refused (-32602).
//   - A $/cancel_request notification cancels the request's next hop.
//   - A restarted proxy's initialize of its successor is answered by the
//     conductor while its replays last, with what the successor answered
//     the same params.
//   - mcp/* methods are offered to the MCP router (mcp.go) first.
//   - Everything else goes where hop says, with proxy/initialize spelled
//     in the dialect of the proxy it reaches.
//   - A notification that nothing on this hop changes goes on as the very
//     line it came in.
//   - A notification for a sealed client is dropped: the client has been
//     told the chain stops and its requests failed, so an agent's later
//     session/update would speak of a turn already over for it.
func (t *topology) route(in inbound, dl dialects) decision {
	m := in.msg
	if m.IsResponse() {
		return decision{act: actComplete, src: in.from}
	}
	dc := decision{src: in.from, raw: m.Params}
	method := m.Method
	if wire.IsSuccessor(method) {
		var err error
		if method, dc.raw, err = m.Unwrap(); err != nil {
			return decision{act: actRefuse, src: in.from, err: wire.Errorf(codeInvalidParams, "%s: %v", m.Method, err)}
		}
		dc.enveloped = true
		if wire.IsSuccessor(method) {
			// An envelope in an envelope would reach the next proxy as a
			// plain envelope, which it takes for its successor's: a proxy
			// could speak for the agent.
			return decision{act: actRefuse, src: in.from, enveloped: true,
				err: wire.Errorf(codeInvalidParams, "%s: an envelope may not carry another (%s)", m.Method, method)}
		}
	} else if in.from == 0 && t.mode == ProxyMode && m.IsRequest() {
		// Our parent initializes us in its dialect: speak it back.
		if pd := wire.ProxyInitDialect(method); pd != nil {
			dc.learn = pd
		} else if method == wire.MethodInitialize && wire.MarkedProxy(m.Params) {
			dc.learn = wire.Thinkwell
		} else if method == wire.MethodInitialize {
			// An editor: only a conductor starts a proxy.
			return decision{act: actRefuse, src: in.from, err: wire.Errorf(codeInvalidRequest,
				"initialize: this conductor runs in proxy mode, as a proxy in another conductor's chain, which initializes it with %s; an editor runs a chain with acp-conductor agent",
				wire.MethodProxyInitialize)}
		}
	}
	if mcp, ok := wire.MCPMethod(method); ok {
		method = mcp // spelled for its destination on the way out
	}
	var extra string
	if dc.enveloped || m.Extra() { // the common plain message: a flag's test, no call
		extra = extraOf(m, dc.enveloped)
	}
	if method == wire.MethodCancelRequest && m.IsNotification() {
		dc.act, dc.d.extra = actCancel, extra
		return dc
	}
	if in.from == 0 && dc.enveloped && t.mode == ProxyMode {
		dc.src = t.last() // the parent's envelopes come from its successor side
	}
	d, err := t.hop(in.from, dc.enveloped, method)
	if err == nil && d.to < dc.src && wire.IsInitialize(method) {
		// Initialization flows from the editor toward the agent only. A
		// proxy/initialize sent up would reach the editor, and its refusal
		// would teach the conductor a dialect for the editor.
		err = wire.Errorf(codeInvalidRequest, "%s: initialize goes only toward the agent", method)
	}
	if err != nil {
		if strings.HasPrefix(method, "mcp/") {
			// The MCP router may know it even where ordinary routing does
			// not: offer it, and refuse only if it declines.
			dc.act, dc.d.method, dc.err = actMCP, method, err
			return dc
		}
		dc.act, dc.err = actRefuse, err
		return dc
	}
	if t.sealed && d.to == 0 && m.IsNotification() {
		dc.act, dc.d = actDrop, d
		return dc
	}
	if d.method == wire.MethodProxyInitialize {
		dc.proxyInit = dl.dialectAt(d.to)
		d.method = dc.proxyInit.Initialize
	}
	d.extra = extra
	dc.d = d
	dc.setup = sessionSetup(method)
	switch {
	case dc.enveloped && in.restarted && m.IsRequest() && wire.IsInitialize(method):
		dc.act = actAnswerInit
	case strings.HasPrefix(method, "mcp/"):
		dc.act = actMCP
	case m.IsNotification() && m.Plain() && !dc.enveloped && !d.wrap && d.method == m.Method && !dc.setup:
		// Nothing in it changes on this hop (a session/update on its way
		// to the client, say): the line goes on as it came.
		dc.act = actRelayLine
	default:
		dc.act = actRelay
	}
	if m.IsRequest() && (wire.IsInitialize(d.method) || dc.proxyInit != nil) {
		dc.initialize = true
		dc.initTimer = in.from == 0 && !dc.enveloped
	}
	return dc
}

// extraOf returns the members JSON-RPC does not define of the message m
// is or, if enveloped, carries, to go on with it wherever it is relayed
// as itself: almost always none, found from what Parse noted.
func extraOf(m *wire.Message, enveloped bool) string {
	switch {
	case enveloped && m.CarriedExtra():
		return string(m.AppendCarriedExtra(nil))
	case !enveloped && m.Extra():
		return string(m.AppendExtra(nil))
	}
	return ""
}

// resend decides how an initialize request from src goes on again when
// the proxy it was pending on has failed and been bypassed: as route would
// send it now, toward the agent, to the bypassed proxy's successor. A
// proxy's initialize came in a successor envelope, the client's plain.
func (t *topology) resend(src int, dl dialects) decision {
	d, err := t.hop(src, t.role(src) == roleProxy, wire.MethodInitialize)
	if err != nil {
		return decision{act: actRefuse, src: src, err: err}
	}
	dc := decision{act: actRelay, src: src, initialize: true, initTimer: src == 0}
	if d.method == wire.MethodProxyInitialize {
		dc.proxyInit = dl.dialectAt(d.to)
		d.method = dc.proxyInit.Initialize
	}
	dc.d = d
	return dc
}

// MCP-over-ACP rules. The MCP tables (mcp.go) decide where an mcp/*
// message goes by the ids it carries, not by position; route only names
// which rule applies, from where the message comes and what it names.
// The connect binding (the RFD's, the Rust SDK's) opens a connection with
// mcp/connect and addresses each message by connectionId; the request
// binding (the TypeScript SDK's, MCP 2026-07-28) addresses each mcp/message
// by serverId and the caller's requestId.

// An mcpRule names how an mcp/* message is routed.
type mcpRule int

const (
	mcpOrdinary   mcpRule = iota // not the MCP tables' business: route by position
	mcpConnect                   // the agent opens a connection to a declared server
	mcpOnConn                    // a message on a connection (connect binding), either way
	mcpToServer                  // a message to a declared server (request binding): the agent's, or a call a proxy or the client makes or passes on
	mcpFromServer                // a server's message back to a request (request binding): to its caller (toCaller), else the agent
	mcpFromClient                // the client's message: a server's back, as mcpFromServer, if it declared the server; else by position
)

// An mcpSide is where an mcp/* message comes from, as the rules see it.
type mcpSide int

const (
	mcpServerSide mcpSide = iota // a proxy's notification, or an envelope: where servers' owners answer from
	mcpAgentSide                 // the agent, or in proxy mode the parent's successor side
	mcpCaller                    // a proxy's or the client's plain request: a call it makes or passes on toward a server
	mcpClientSide                // the client's notification
)

// mcpRules is the table: by side, method and the key the params carry
// (connectionId, serverId, or neither). In the request binding a caller's
// mcp/message is a request and a server's a notification (the schema's
// MessageMcpRequest and MessageMcpNotification); an owner built on the
// TypeScript SDK sends its notifications to its predecessor, plain, so a
// proxy's plain mcp/message is a server's unless it is a request, which
// goes on to the server, never back to the agent. The client's messages
// go to the first proxy, as all its others do, but where the MCP tables
// routed what they answer or must re-address them: on a connection (the
// agent's connectionId may not be the owner's), a call to a declared
// server, or a notification for a call to a server the client declared,
// which reached it straight from the caller and whose answer goes straight
// back: the notification must not fall behind the answer.
var mcpRules = map[mcpKey]mcpRule{
	{mcpAgentSide, methodMCPConnect, mcpKeyNone}:     mcpConnect,
	{mcpAgentSide, methodMCPConnect, mcpKeyServer}:   mcpConnect,
	{mcpAgentSide, methodMCPConnect, mcpKeyConn}:     mcpConnect, // @thinkwell/conductor proposes a connectionId
	{mcpAgentSide, methodMCPMessage, mcpKeyConn}:     mcpOnConn,
	{mcpAgentSide, methodMCPDisconnect, mcpKeyConn}:  mcpOnConn,
	{mcpServerSide, methodMCPMessage, mcpKeyConn}:    mcpOnConn,
	{mcpServerSide, methodMCPDisconnect, mcpKeyConn}: mcpOnConn,
	{mcpCaller, methodMCPMessage, mcpKeyConn}:        mcpOnConn,
	{mcpCaller, methodMCPDisconnect, mcpKeyConn}:     mcpOnConn,
	{mcpAgentSide, methodMCPMessage, mcpKeyServer}:   mcpToServer,
	{mcpCaller, methodMCPMessage, mcpKeyServer}:      mcpToServer,
	{mcpServerSide, methodMCPMessage, mcpKeyServer}:  mcpFromServer,
	{mcpClientSide, methodMCPMessage, mcpKeyConn}:    mcpOnConn,
	{mcpClientSide, methodMCPDisconnect, mcpKeyConn}: mcpOnConn,
	{mcpClientSide, methodMCPMessage, mcpKeyServer}:  mcpFromClient,
}

// toCaller says how a server's message about a call reaches the position
// that made it (mcpFromServer): the agent side as the owner's messages
// reach it; a proxy or the client plain, as the call's answer does, since
// the calls the conductor routes by their ids or passes on by position
// went from a proxy to its predecessor's side, or from the client.
func (t topology) toCaller(caller int, method string) delivery {
	if last := t.last(); caller == last {
		return delivery{to: last, wrap: t.role(last) == roleUpstream, method: method}
	}
	return delivery{to: caller, method: method}
}

type mcpKey struct {
	side   mcpSide
	method string
	key    mcpKeyKind
}

type mcpKeyKind int

const (
	mcpKeyNone   mcpKeyKind = iota
	mcpKeyConn              // params.connectionId: the connect binding
	mcpKeyServer            // params.serverId without a connectionId: the request binding
)

// routeMCP names the rule for an mcp/* message from src: a request if
// request, arrived in a successor envelope if enveloped. A connectionId
// wins over a serverId, so a connect-binding message that also names its
// server stays on its connection; an mcp/connect names its server as
// acpId, serverId or (from a Thinkwell parent) url or acp_url.
func (t topology) routeMCP(src int, enveloped, request bool, method string, params []byte) mcpRule {
	k := mcpKey{side: mcpServerSide, method: method}
	switch r := t.role(src); {
	case src == t.last():
		k.side = mcpAgentSide
	case enveloped || r != roleProxy && r != roleClient:
	case request:
		k.side = mcpCaller
	case r == roleClient:
		k.side = mcpClientSide
	}
	switch {
	case connID(params) != nil:
		k.key = mcpKeyConn
	case wire.Member(params, "serverId") != nil:
		k.key = mcpKeyServer
	}
	return mcpRules[k]
}
