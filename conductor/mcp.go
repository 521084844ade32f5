package conductor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/acp-conductor/acp-conductor/internal/recent"
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
// Every spelling in the wild is accepted (ownerSpellings): the RFD's "id"
// with mcp/connect {"acpId"}, the Rust SDK's "serverId" with mcp/connect
// {"serverId"}, and that of @thinkwell/conductor and sacp-conductor up to
// 11, whose proxies declare {"type":"http","url":"acp:<uuid>"} and take
// _mcp/connect {"url"} or {"acp_url"}. Such a server's id is its URL.

// MCP-over-ACP methods.
const (
	methodMCPConnect    = "mcp/connect"
	methodMCPMessage    = "mcp/message"
	methodMCPDisconnect = "mcp/disconnect"
)

// sessionEnds and sessionSetup are switches, not maps: they are asked of
// every request relayed (sessionSetup of every notification too), and
// comparing with a few names costs less than hashing one.

// sessionEnds reports whether method is a request after whose success a
// session's MCP servers, and what the conductor opened for them, are of no
// more use.
func sessionEnds(method string) bool {
	switch method {
	case "session/close", "session/delete":
		return true
	}
	return false
}

// sessionSetup reports whether method is a request whose params may
// declare MCP servers.
func sessionSetup(method string) bool {
	switch method {
	case "session/new", "session/load", "session/resume", "session/fork":
		return true
	}
	return false
}

type mcpRoutes struct {
	mu      sync.Mutex
	servers map[string]mcpServer // by declared server id
	conns   map[string]*mcpConn  // by the connectionId the agent uses, as raw JSON
	owned   map[ownedID]*mcpConn // by owner and the connectionId it gave
	native  bool                 // the final agent speaks MCP-over-ACP itself
	http    bool                 // the final agent can reach MCP servers over HTTP
	stdio   bool                 // the final agent can run stdio MCP servers (mcpVersions)
	v2      bool                 // the final agent speaks ACP v2
	// unservable: nothing below the conductor can take an acp MCP server
	// (the agent has no native acp and the bridge reaches it over no
	// transport, or a v2 parent said none), so MCP-over-ACP is not
	// advertised (onInitialize).
	unservable bool
	// terminalKnown is set once the terminal (the agent, or the parent in
	// proxy mode) has answered an initialize: until then what it can serve
	// is not known, and an answer a proxy gave on its own is all there is.
	terminalKnown bool

	bindings map[int]binding // by owner position, once its answer to mcp/connect told
	// For request-binding callers of connect-binding owners: the one
	// connection per server, and those being opened.
	shared  map[string]*mcpConn
	opening map[string]*opening
	// For connect-binding callers of request-binding owners: the requests
	// the conductor sent for them, by serverId and requestId, decoded
	// (statelessRequest).
	requests map[[2]string]statelessCall
	// calls holds the request-binding calls relayed and not yet answered,
	// for the asked peer's notifications about each to reach the peer
	// that made it (mcpFromServer).
	calls  map[callRef]mcpCall
	lastID int64
	// bridged holds the bridged clients' connections, by the server each
	// is to, for the end of the server's last session to end them.
	bridged map[*peer]string
	// revoke, set with the bridge, makes a server's bridged declarations
	// stop working (mcpbridge.Bridge.Revoke); a client admitted just
	// before is refused with why.
	revoke func(serverID string, why error)
	// agentSpelling is the spelling of server ids the agent has used: ""
	// until it connects or calls, then "id" (mcp/connect {acpId}) or
	// "serverId".
	agentSpelling string
	// ended remembers why the agent's own connections that the end of
	// their server, or of its owner (restarted or bypassed), closed ended,
	// for its later use of one to be told why.
	ended endedConns
	// gone remembers why the servers the chain forgot ended (their last
	// session, their owner's restart), by server id, for an mcp/connect
	// or call to one to be told why rather than routed by position, as
	// to a server no one in the chain declared, which would reach a peer
	// that knows nothing of it; bounded as ended is.
	gone recent.Map[string, *wire.Error]
}

// maxEndedConns bounds how many connections the agent had that their
// server's end, or its owner's, closed are remembered (endedConns): an
// agent that never disconnects must not grow the conductor, and one that
// uses a connection after maxEndedConns more have ended is told it is
// unknown, as one never opened.
const maxEndedConns = 1024

// endedConns remembers, by the connectionId the agent used (raw JSON),
// the error that answers the agent's later use of its connections that
// ended with their server or its owner, the oldest forgotten first once
// it holds maxEndedConns.
type endedConns struct {
	recent.Map[string, *wire.Error]
}

// lookup returns why the connection the agent names as id ended, as
// byAgent finds a connection: by its bytes, else by its JSON value.
func (e *endedConns) lookup(id []byte) (*wire.Error, bool) {
	if why, ok := e.Get(string(id)); ok {
		return why, true
	}
	want := wire.ReadID(id)
	for k, why := range e.All() {
		if want.Same(json.RawMessage(k)) {
			return why, true
		}
	}
	return nil, false
}

// A binding is how an owner takes MCP-over-ACP traffic.
type binding int

const (
	bindingUnknown binding = iota
	bindingConnect         // mcp/connect, then mcp/message {connectionId}
	bindingRequest         // mcp/message {serverId, requestId}, answered {result} or {error}
	bindingEither          // either, as the caller speaks: a nested conductor (metaRequestBinding)
)

// bindingTakes says what an owner of each binding is sent as the caller
// sent it; the rest the conductor translates. An owner whose binding is
// unknown is asked with mcp/connect first.
var bindingTakes = [...]struct{ connect, request bool }{
	bindingUnknown: {},
	bindingConnect: {connect: true},
	bindingRequest: {request: true},
	bindingEither:  {connect: true, request: true},
}

// metaRequestBinding marks the mcp/connect a conductor sends to open the
// connection its request-binding callers would share (viaConnection). A
// conductor that gets it takes mcp/message {serverId, requestId} for every
// server it routes, so it refuses the connect, saying so in the error's
// data under the same key (mcpConnect): its parent then sends each call
// as it came, and the one translation, if any, is the nested conductor's,
// next to the owner. Two would turn an owner's {error} outcome into an
// ACP error on the way, which is a caller's cancellation to the SDK.
const metaRequestBinding = "acp-conductor/requestBinding"

// An ownedID is a connectionId as its owner gave it. Each owner picks its
// own ids, so two owners may well give the same one.
type ownedID struct {
	owner int
	id    string // raw JSON
}

type mcpServer struct {
	owner    int    // position of the component that declared it
	name     string // its declared name, for logs
	spelling string // its owner's, a key of ownerSpellings
	session  string // the ACP session whose set-up declared it, raw JSON, once known
	// others are the further sessions that declared it too (a provider
	// registered once declares its server in every session): closing one
	// of them leaves it served.
	others []string
	// pending counts the set-ups that declared it whose answer, which
	// names their session, has not come: closing another session while
	// one is pending leaves it served, as the agent was just given it.
	pending int
}

// declaredIn notes that session (raw JSON) declares s too.
func (s *mcpServer) declaredIn(session string) {
	switch {
	case session == "" || session == "null":
	case s.session == "":
		s.session = session
	case s.session != session && !slices.Contains(s.others, session):
		s.others = append(s.others, session)
	}
}

// declares reports whether session (raw JSON) is among those that declared s.
func (s *mcpServer) declares(session string) bool {
	return s.session == session || slices.Contains(s.others, session)
}

// sessionClosed forgets session among those that declared s, and reports
// whether none is left, nor a set-up still pending.
func (s *mcpServer) sessionClosed(session string) (unused bool) {
	if i := slices.Index(s.others, session); i >= 0 {
		s.others = slices.Delete(s.others, i, i+1)
		return false
	}
	if s.session != session {
		return false
	}
	s.session = ""
	if len(s.others) > 0 {
		s.session, s.others = s.others[0], s.others[1:]
		return false
	}
	return s.pending == 0
}

type mcpConn struct {
	owner    int
	spelling string // its owner's, a key of ownerSpellings
	serverID string
	ownerID  string // the connectionId the owner gave, raw JSON; "" for a stateless one
	agentID  string // the one the agent uses (see open); "" when bridged
	bridge   *peer  // the bridged connection, or nil when the agent holds it natively

	// forRequests marks the connection the conductor opened to a
	// connect-binding owner for request-binding callers; active holds their
	// requests in flight on it, for the owner's notifications to find.
	forRequests bool
	active      []activeRequest
	// stateless is set on a connection the conductor made for a
	// connect-binding caller of a request-binding owner: what the caller's
	// MCP client said of itself.
	stateless *mcpClient
	// calls holds, on a connection the agent holds natively, its requests
	// in flight to the owner, for the end of the server to answer: the
	// owner, told the connection is gone, need not.
	calls []*call
	// holding is set on a connection opened under the id a Thinkwell
	// parent proposed while its owner's binding is unknown: what the
	// parent sends on it before the owner answers mcp/connect waits in
	// held, in order, as only the answer tells how to say it (release).
	holding bool
	held    []func()
}

func newMCPRoutes() *mcpRoutes {
	return &mcpRoutes{
		stdio:   true, // until the agent answers initialize, as v1, where stdio is a given
		servers: map[string]mcpServer{}, conns: map[string]*mcpConn{}, owned: map[ownedID]*mcpConn{},
		bindings: map[int]binding{}, shared: map[string]*mcpConn{}, opening: map[string]*opening{},
		requests: map[[2]string]statelessCall{}, bridged: map[*peer]string{}, calls: map[callRef]mcpCall{},
		ended: endedConns{recent.Map[string, *wire.Error]{Limit: maxEndedConns}},
		gone:  recent.Map[string, *wire.Error]{Limit: maxEndedConns},
	}
}

// agentCapabilities notes what the final agent's InitializeResponse says it
// can do with MCP servers.
// ACP v1 says true, v2 an object (wire.MCPCapabilities); v1 has no stdio
// capability, as every v1 agent must run stdio servers (mcpVersions).
func (r *mcpRoutes) agentCapabilities(result json.RawMessage) {
	caps := wire.MCPCapabilities(result)
	has := func(name string) bool {
		v := string(wire.Member(caps, name))
		return v != "" && v != "false" && v != "null"
	}
	v2 := wire.IsV2(result)
	r.mu.Lock()
	r.native, r.http, r.v2 = has("acp"), has("http"), v2
	r.stdio = has("stdio") || mcpVersionOf(v2).stdioBuiltIn
	r.mu.Unlock()
}

// servable notes whether the chain below the conductor can take acp MCP
// servers, as its terminal's initialize answer showed.
func (r *mcpRoutes) servable(ok bool) {
	r.mu.Lock()
	r.unservable, r.terminalKnown = !ok, true
	r.mu.Unlock()
}

// unservableWhy says why MCP-over-ACP may not be advertised in an
// initialize answer of the ACP version v2 says, or "" if it may. Before
// the terminal has answered, only a version whose agents all run stdio
// servers (v1) is known to be reachable by the bridge; a v2 agent might
// list no transport at all.
func (r *mcpRoutes) unservableWhy(v2 bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.unservable:
		return "the agent takes no MCP server over any transport the bridge can use"
	case !r.terminalKnown && !mcpVersionOf(v2).stdioBuiltIn:
		return "a proxy answered initialize before the agent (or parent) did, so the MCP transports it takes are not known"
	}
	return ""
}

// agentV2 reports whether the agent's initialize settled on ACP v2.
func (r *mcpRoutes) agentV2() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.v2
}

// bindingOf returns what the owner at pos is known to bind by.
func (r *mcpRoutes) bindingOf(pos int) binding {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bindings[pos]
}

// learn records how the owner at pos binds, from what it answered. An
// owner that takes either binding still does when a caller's mcp/connect
// is answered with a connection.
func (r *mcpRoutes) learn(pos int, b binding) {
	r.mu.Lock()
	if r.bindings[pos] != bindingEither {
		r.bindings[pos] = b
	}
	r.mu.Unlock()
}

// agentSpoke notes the spelling the agent used for a server id. An agent
// that once used serverId is given serverId alone from then on.
func (r *mcpRoutes) agentSpoke(spelling string) {
	r.mu.Lock()
	if r.agentSpelling != "serverId" {
		r.agentSpelling = spelling
	}
	r.mu.Unlock()
}

func (r *mcpRoutes) agentIsNative() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.native
}

// acpDeclaration is the part of an McpServer entry the conductor reads.
type acpDeclaration struct {
	Type, Name, ID, ServerID, URL string

	at int // its index in mcpServers
}

// declarationOf reads an McpServer entry as the agent and the SDKs read
// it: each member by its exact name (encoding/json would match "ID" or
// "Type" too, which a JavaScript or Rust decoder does not), a member that
// is not a string as absent, and the entry on its own, so that a malformed
// one beside it hides nothing. Were the conductor to read another server
// than the agent, the agent's connection would be refused. ok is false
// if raw is not an object.
func declarationOf(raw json.RawMessage) (d acpDeclaration, ok bool) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return d, false
	}
	str := func(name string) string {
		var s string
		_ = json.Unmarshal(wire.Member(raw, name), &s) // absent or not a string: ""
		return s
	}
	return acpDeclaration{Type: str("type"), Name: str("name"), ID: str("id"), ServerID: str("serverId"), URL: str("url")}, true
}

// declarations returns the entries of the mcpServers of session set-up
// params, each as declarationOf reads it, and the session params name.
func declarations(params json.RawMessage) (session json.RawMessage, ds []acpDeclaration) {
	var servers []json.RawMessage
	if json.Unmarshal(wire.Member(params, "mcpServers"), &servers) != nil {
		return wire.Member(params, "sessionId"), nil
	}
	for i, raw := range servers {
		if d, ok := declarationOf(raw); ok {
			d.at = i
			ds = append(ds, d)
		}
	}
	return wire.Member(params, "sessionId"), ds
}

// acpURLScheme starts the URL of a server a Thinkwell-dialect component
// declares as {"type":"http","url":"acp:<uuid>"}: it lives in the
// declarer, as an acp server does, not behind an HTTP address.
const acpURLScheme = "acp:"

// serverID returns the id of the acp server d declares, and the spelling
// of its owner, or "" if d declares no acp server.
func (d acpDeclaration) serverID() (id, spelling string) {
	switch {
	case d.Type == "http" && strings.HasPrefix(d.URL, acpURLScheme):
		return d.URL, "url"
	case d.Type != "acp":
		return "", ""
	case d.ID != "":
		return d.ID, "id"
	}
	return d.ServerID, "serverId"
}

// An ownerSpelling is how the owner of an acp server names it, as its
// declaration showed, in the connect binding's messages to it.
type ownerSpelling struct {
	connect []string // the mcp/connect members that name the server
	// proposeID: mcp/connect carries a connectionId the conductor proposes,
	// which the owner may answer with or replace.
	proposeID bool
	// disconnect: the mcp/disconnect members that name the connection.
	disconnect []string
	// notifyDisconnect: mcp/disconnect is a notification, never answered.
	notifyDisconnect bool
	// methods, if set, spells the MCP-over-ACP methods whatever the
	// owner's proxy dialect (a Thinkwell editor or parent uses _mcp/*).
	methods *wire.Dialect
}

// ownerSpellings is the table, by the spelling declare records. The
// Thinkwell dialect's has two parents: @thinkwell/conductor sends
// _mcp/connect {connectionId, url} and takes {connectionId} back (or keeps
// its own); sacp-conductor sends {acp_url} and takes {connection_id}, and
// its proxies read _mcp/disconnect {connection_id}. The conductor sends
// both spellings, which each side's decoder ignores the other of, and
// reads either answer.
var ownerSpellings = map[string]ownerSpelling{
	"id":       {connect: []string{"acpId"}, disconnect: []string{"connectionId"}},
	"serverId": {connect: []string{"serverId"}, disconnect: []string{"connectionId"}},
	"url": {connect: []string{"url", "acp_url"}, proposeID: true, disconnect: []string{"connectionId", "connection_id"},
		notifyDisconnect: true, methods: wire.Thinkwell},
}

// spell returns an MCP-over-ACP method as an owner of spelling reads it;
// the relay spells it further for the owner's dialect.
func spell(spelling, method string) string {
	if d := ownerSpellings[spelling].methods; d != nil {
		return d.SpellMCP(method)
	}
	return method
}

// connectParams returns mcp/connect params that open a connection to
// serverID for an owner of spelling: proposed is the connectionId to
// propose, if any (required where the spelling says proposeID; an owner of
// another spelling may take it or answer another), and meta the caller's
// _meta, if any.
func connectParams(spelling, serverID string, proposed, meta json.RawMessage) json.RawMessage {
	sp := ownerSpellings[spelling]
	out := []byte{'{'}
	add := func(k string, v []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, mustQuote(k)...), ':'), v...)
	}
	if proposed != nil {
		add("connectionId", proposed)
	}
	for _, k := range sp.connect {
		add(k, mustQuote(serverID))
	}
	if meta != nil {
		add("_meta", meta)
	}
	return append(out, '}')
}

// disconnectParams returns mcp/disconnect params for the connection an
// owner of spelling knows as id (raw JSON).
func disconnectParams(spelling string, id []byte) json.RawMessage {
	out := []byte{'{'}
	for i, k := range ownerSpellings[spelling].disconnect {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, mustQuote(k)...), ':'), id...)
	}
	return append(out, '}')
}

// connectionIDOf returns the connectionId an owner answered mcp/connect
// with, in either spelling; proposed, if the owner took the one it was
// offered without saying so; nil if it gave none.
func connectionIDOf(result, proposed json.RawMessage) []byte {
	if id := wire.Member(result, "connectionId"); id != nil {
		return id
	}
	if id := wire.Member(result, "connection_id"); id != nil {
		return id
	}
	if proposed != nil && len(result) > 0 && result[0] == '{' {
		return proposed
	}
	return nil
}

// setupNamesSession reports whether a session set-up request names the
// session it declares servers for: session/load and session/resume do;
// the others learn it from the answer (setupAnswered): session/new, and
// session/fork, whose sessionId names the session it copies.
func setupNamesSession(method string) bool {
	return method == "session/load" || method == "session/resume"
}

// A setup is what declare recorded of a session set-up request, for its
// answer to complete (setupAnswered): the servers whose session the
// answer gives (session/new, session/fork), or, for a set-up that names
// its session, those it newly tied to that session.
type setup struct {
	method  string
	session string // raw JSON, for a set-up that names it
	ids     []string
}

// declare records owner as the owner of every acp server declared in params
// that has none yet, ties each to the session params name, or counts it
// pending its answer's session, and returns what the answer is to
// complete, and whether params declare any acp server. An acp entry
// without an id is refused (-32602), and nothing recorded: the agent's
// calls reach a server by its id, and the agent, or the bridge's shim,
// would be given one that no call can reach.
func (r *mcpRoutes) declare(owner int, method string, params json.RawMessage) (rec setup, found bool, e *wire.Error) {
	session, servers := declarations(params)
	for _, d := range servers {
		if id, _ := d.serverID(); id == "" && d.Type == "acp" {
			return rec, false, wire.Errorf(codeInvalidParams, "%s: mcpServers[%d] (%q) is an acp MCP server without an id: its serverId (or id) must be a non-empty string, by which its calls are routed", method, d.at, d.Name)
		}
	}
	rec.method = method
	if setupNamesSession(method) {
		rec.session = string(session)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range servers {
		id, spelling := d.serverID()
		if id == "" {
			continue
		}
		found = true
		r.gone.Delete(id) // declared anew
		s, ok := r.servers[id]
		if !ok {
			s = mcpServer{owner: owner, name: d.Name, spelling: spelling}
		}
		switch {
		case rec.session == "":
			s.pending++
		case s.declares(rec.session):
			r.servers[id] = s
			continue // the answer changes nothing
		default:
			s.declaredIn(rec.session)
		}
		r.servers[id] = s
		rec.ids = append(rec.ids, id)
	}
	return rec, found, nil
}

// setupAnswered completes what declare recorded of a set-up, given its
// answer (nil for a set-up sent as a notification, which none answers).
// Servers that only a failed set-up declared have no session to end with:
// they are ended now.
func (c *chain) setupAnswered(rec setup, resp *wire.Message) {
	c.endServers(c.mcp.setupAnswered(rec, resp))
}

func (r *mcpRoutes) setupAnswered(rec setup, resp *wire.Message) (e endedServers) {
	failed := resp == nil || resp.Error != nil
	if rec.session != "" && !failed {
		return e // declare tied them to the session
	}
	var session string // that the answer gives
	if !failed {
		session = string(wire.Member(resp.Result, "sessionId"))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range rec.ids {
		s, ok := r.servers[id]
		if !ok {
			continue
		}
		if rec.session != "" {
			// A failed load or resume: the session it named may not
			// exist, and will then never close.
			if !s.sessionClosed(rec.session) {
				r.servers[id] = s
				continue
			}
		} else {
			s.pending = max(0, s.pending-1)
			s.declaredIn(session)
			if s.session != "" || s.pending > 0 {
				r.servers[id] = s
				continue
			}
		}
		r.endLocked(id, wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available: the %s that declared it failed", s.name, rec.method).
			WithData(map[string]json.RawMessage{"serverId": dataString(id)}), &e)
	}
	return e
}

// metaSessionID is the _meta key under which the conductor tells an owner
// the ACP session that declared the server an MCP message is for. No
// schema names one (agent-client-protocol issue 243 asks for it).
const metaSessionID = "acp-conductor/sessionId"

// withSession returns mcp/connect or mcp/message params for serverID with
// the server's session in their _meta, once it is known.
func (r *mcpRoutes) withSession(params json.RawMessage, serverID string) json.RawMessage {
	r.mu.Lock()
	session := r.servers[serverID].session
	r.mu.Unlock()
	if session == "" || session == "null" {
		return params
	}
	out, err := wire.SetPath(params, []string{"_meta", metaSessionID}, json.RawMessage(session))
	if err != nil {
		return params
	}
	return out
}

func (r *mcpRoutes) server(id string) (mcpServer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.servers[id]
	return s, ok
}

// serverAt returns the server an mcp/connect names as target, in spelling
// (connectTarget): by URL, also an acp server declared under the id the
// URL carries (urlForm).
func (r *mcpRoutes) serverAt(target, spelling string) (mcpServer, string, bool) {
	if s, ok := r.server(target); ok || spelling != "url" {
		return s, target, ok
	}
	id := strings.TrimPrefix(target, acpURLScheme)
	s, ok := r.server(id)
	return s, id, ok
}

// goneAt returns why the server an mcp/connect names as target, in
// spelling, ended, if the chain had it (serverAt).
func (r *mcpRoutes) goneAt(target, spelling string) (*wire.Error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if why, ok := r.gone.Get(target); ok || spelling != "url" {
		return why, ok
	}
	return r.gone.Get(strings.TrimPrefix(target, acpURLScheme))
}

// answerGone answers m, a message to the server target that the chain
// no longer has, with why it ended, and reports false, for ordinary
// routing, if the chain never had it (or has forgotten it).
func (c *chain) answerGone(from *peer, m *wire.Message, target, spelling string, b *batch) bool {
	why, ok := c.mcp.goneAt(target, spelling)
	if ok {
		c.answerError(from, m, why, b)
	}
	return ok
}

// open records a connection to serverID that owner opened for the agent
// under ownerID, and returns the connectionId the agent is to use:
// ownerID, or if a connection of another owner already has that id, a
// variant of it, so that neither connection's messages reach the other's
// owner. It reports false, recording nothing, if the chain no longer has
// the server: its last session ended while the owner opened it.
func (r *mcpRoutes) open(owner int, spelling, serverID string, ownerID []byte) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.servers[serverID]; !ok {
		return "", false
	}
	agentID := string(ownerID)
	for n := 2; r.conns[agentID] != nil; n++ {
		agentID = variantID(ownerID, n)
	}
	c := &mcpConn{owner: owner, spelling: spelling, serverID: serverID, ownerID: string(ownerID), agentID: agentID}
	r.addAgentConnLocked(c)
	return agentID, true
}

// addAgentConnLocked records c, a connection the agent holds natively.
// An id the owner gives again names the new connection only.
func (r *mcpRoutes) addAgentConnLocked(c *mcpConn) {
	r.conns[c.agentID] = c
	r.owned[ownedID{c.owner, c.ownerID}] = c
	r.ended.Delete(c.agentID) // it names a connection again
}

// openProposed records a connection to owner's serverID opened under the
// id the agent proposed, before the owner has answered, or nil if the
// agent already has a connection under that id or the chain no longer
// has the server; confirm records the id the owner answered. Until the
// owner's binding is known, the connection holds what comes on it.
func (r *mcpRoutes) openProposed(owner int, spelling, serverID string, proposed []byte) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.servers[serverID]; !ok || r.conns[string(proposed)] != nil || r.owned[ownedID{owner, string(proposed)}] != nil {
		return nil
	}
	c := &mcpConn{owner: owner, spelling: spelling, serverID: serverID, ownerID: string(proposed), agentID: string(proposed),
		holding: !bindingTakes[r.bindings[owner]].connect}
	r.addAgentConnLocked(c)
	return c
}

// hold keeps route, the routing of a message that came on c, for release,
// and reports whether c holds.
func (r *mcpRoutes) hold(c *mcpConn, route func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.holding {
		c.held = append(c.held, route)
	}
	return c.holding
}

// release routes, in order, what c held and what comes while it does so,
// and then stops holding: nothing overtakes what came before it.
func (r *mcpRoutes) release(c *mcpConn) {
	for {
		r.mu.Lock()
		held := c.held
		c.held = nil
		if len(held) == 0 {
			c.holding = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		for _, route := range held {
			route()
		}
	}
}

// restate replaces early, a connection opened under the id a Thinkwell
// parent proposed, with one of the conductor's own to its owner, which
// binds per request, under the same id: the parent keeps using the id it
// proposed, whatever the answer says. What early held, the new one holds.
// It returns nil, and early keeps what it held, if the chain no longer
// has the server.
func (r *mcpRoutes) restate(early *mcpConn, srv mcpServer, serverID string) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeLocked(early)
	c := r.openStatelessLocked(srv, serverID, nil, []byte(early.agentID))
	if c != nil {
		c.holding, c.held = true, early.held
		early.held = nil
	}
	return c
}

func (r *mcpRoutes) confirm(c *mcpConn, ownerID []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if string(ownerID) == c.ownerID || r.owned[ownedID{c.owner, c.ownerID}] != c {
		return // as proposed, or closed meanwhile
	}
	delete(r.owned, ownedID{c.owner, c.ownerID})
	c.ownerID = string(ownerID)
	r.owned[ownedID{c.owner, c.ownerID}] = c
}

// openBridged records a connection that owner opened under ownerID for a
// bridged client, which the agent never sees.
func (r *mcpRoutes) openBridged(owner int, spelling string, ownerID []byte, bridge *peer) *mcpConn {
	c := &mcpConn{owner: owner, spelling: spelling, ownerID: string(ownerID), bridge: bridge}
	r.mu.Lock()
	r.owned[ownedID{owner, c.ownerID}] = c
	r.mu.Unlock()
	return c
}

// byAgent returns the connection the agent knows as id; byOwner the one
// owner gave id. The agent gets an owner's connectionId as the owner spelled
// it, and may name it back as its own encoder spells the same string
// ("c&1" for Go's "c\u00261"): failing the very bytes, the same JSON value
// names it, as a JSON reader reads it. That is rare, and costs a look at
// each connection.
func (r *mcpRoutes) byAgent(id []byte) *mcpConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.conns[string(id)]; c != nil {
		return c
	}
	want := wire.ReadID(id)
	for k, c := range r.conns {
		if want.Same(json.RawMessage(k)) {
			return c
		}
	}
	return nil
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

// dropOwner forgets every server the component at owner declared, revoking
// its bridged declarations with why it is gone, and every connection it
// opened, remembering why for those the agent holds natively (endedConns),
// and returns the bridged ones. The process now at owner (restarted) or
// none (bypassed) serves none of them; one that declares a server again
// owns it anew, under a new token.
func (r *mcpRoutes) dropOwner(owner int, why func(s mcpServer, id string) *wire.Error) (bridged []*peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gone := map[string]*wire.Error{} // why, by server id
	for id, s := range r.servers {
		if s.owner != owner {
			continue
		}
		delete(r.servers, id)
		gone[id] = why(s, id)
		r.gone.Add(id, gone[id])
		if r.revoke != nil {
			r.revoke(id, gone[id]) // under r.mu, as in endLocked
		}
	}
	for id, c := range r.shared {
		if c.owner == owner {
			delete(r.shared, id)
			continue
		}
		c.active = slices.DeleteFunc(c.active, func(a activeRequest) bool { return a.caller == owner })
	}
	for k, sc := range r.requests {
		if sc.conn.owner == owner {
			delete(r.requests, k)
		}
	}
	delete(r.bindings, owner) // a new process may bind otherwise
	// The new process, or none, made no call and was asked none: what it
	// sends about a call is not about these.
	r.forgetCallsLocked(func(ref callRef, c mcpCall) bool { return ref.asked == owner || c.caller == owner })
	for k, c := range r.owned {
		if k.owner != owner {
			continue
		}
		if c.agentID != "" && r.conns[c.agentID] == c && gone[c.serverID] != nil {
			// The agent's own, which it may go on using: it is told the
			// owner went away, as endLocked tells it its server ended.
			r.ended.Add(c.agentID, connEndedError(c.agentID, gone[c.serverID]))
		}
		r.closeLocked(c)
		if c.bridge != nil {
			bridged = append(bridged, c.bridge)
		}
	}
	return bridged
}

// bridgedOf returns the bridged connections to servers owner serves.
func (r *mcpRoutes) bridgedOf(owner int) []*peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bridged []*peer
	for k, c := range r.owned {
		if k.owner == owner && c.bridge != nil {
			bridged = append(bridged, c.bridge)
		}
	}
	return bridged
}

// addBridged records p, a bridged client's connection to serverID, so that
// the end of the server's last session ends it; it reports false if the
// chain no longer has the server.
func (r *mcpRoutes) addBridged(p *peer, serverID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.servers[serverID]; !ok {
		return false
	}
	r.bridged[p] = serverID
	return true
}

func (r *mcpRoutes) dropBridged(p *peer) {
	r.mu.Lock()
	delete(r.bridged, p)
	r.mu.Unlock()
}

// variantID returns a connectionId made from id for its nth holder,
// written without HTML escaping ("R&D~2", not "R\u0026D~2"): the
// conductor makes it up, so no peer has seen another spelling of it.
func variantID(id []byte, n int) string {
	var s string
	if json.Unmarshal(id, &s) != nil {
		s = string(id)
	}
	return string(wire.AppendString(nil, s+"~"+strconv.Itoa(n)))
}

// connID returns the connectionId of mcp/message or mcp/disconnect params,
// or sacp's connection_id.
func connID(params json.RawMessage) []byte {
	if id := wire.Member(params, "connectionId"); id != nil {
		return id
	}
	return wire.Member(params, "connection_id")
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

// connectTarget returns the server id an mcp/connect names, in any
// spelling, and the spelling of declarations that goes with it. A parent
// in proxy mode may connect by URL (@thinkwell/conductor, sacp).
func connectTarget(params json.RawMessage) (id, spelling string) {
	for _, s := range [...]struct{ member, spelling string }{{"acpId", "id"}, {"serverId", "serverId"}, {"url", "url"}, {"acp_url", "url"}} {
		if raw := wire.Member(params, s.member); raw != nil {
			if json.Unmarshal(raw, &id) == nil {
				return id, s.spelling
			}
		}
	}
	return "", ""
}

// routeMCP relays an mcp/* request or notification whose route the MCP
// tables decide, and reports whether it did. src is the position the message
// came from (the agent side is topo.last()), in a successor envelope if
// enveloped.
func (c *chain) routeMCP(src int, enveloped bool, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) bool {
	topo := c.topo.Load()
	switch topo.routeMCP(src, enveloped, m.IsRequest(), method, params) {
	case mcpConnect:
		return c.mcpConnect(from, m, params, b)
	case mcpOnConn:
		c.mcpOnConn(src, from, m, method, params, b)
		return true
	case mcpToServer:
		return c.mcpToServer(src, from, m, params, b)
	case mcpFromServer:
		c.mcpFromServer(from, m, params, b)
		return true
	case mcpFromClient:
		return c.mcpFromClient(src, from, m, params, b)
	}
	return false
}

// mcpConnect relays the agent's mcp/connect to the server's owner. An owner
// that refuses it as an unknown method binds per request: the conductor
// answers with a connection of its own and translates (mcpxlate.go).
func (c *chain) mcpConnect(from *peer, m *wire.Message, params json.RawMessage, b *batch) bool {
	id, spelling := connectTarget(params)
	srv, id, ok := c.mcp.serverAt(id, spelling)
	if !ok {
		return c.answerGone(from, m, id, spelling, b) // else not declared in this chain: ordinary routing
	}
	if wire.Member(wire.Member(params, "_meta"), metaRequestBinding) != nil {
		// A parent conductor's, for its request-binding callers: it can
		// send their calls as they are (metaRequestBinding).
		c.answerError(from, m, wire.Errorf(codeMethodNotFound, "%s not needed: mcp/message {serverId, requestId} reaches MCP server %q", methodMCPConnect, srv.name).
			WithData(map[string]json.RawMessage{metaRequestBinding: json.RawMessage("true")}), b)
		return true
	}
	if spelling != "url" {
		c.mcp.agentSpoke(spelling)
	}
	d := c.toOwner(srv.owner, spell(srv.spelling, methodMCPConnect))
	d.extra = mcpExtra(m)
	// A Thinkwell parent proposes the connectionId, and sends messages on
	// it without waiting for the answer.
	proposed := wire.Member(params, "connectionId")
	if ownerSpellings[srv.spelling].proposeID || spelling == "url" && srv.spelling != "url" {
		// Said the owner's way, proposing the caller's connectionId if it
		// gave one, with the caller's _meta.
		if proposed == nil && ownerSpellings[srv.spelling].proposeID {
			proposed = c.mcp.newRequestID()
		}
		params = connectParams(srv.spelling, id, proposed, wire.Member(params, "_meta"))
	}
	params = c.mcp.withSession(params, id)
	if m.IsNotification() {
		c.relay(from, c.peers[d.to], nil, d, params)
		return true
	}
	// The server's last session may end while the owner answers: the
	// connection is then refused, with why, rather than kept for a server
	// that is gone.
	gone := func() *wire.Error {
		return wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available: its last session ended while %s opened the connection", srv.name, c.peers[srv.owner].name).
			WithData(map[string]json.RawMessage{"serverId": dataString(id)})
	}
	if c.mcp.bindingOf(srv.owner) == bindingRequest {
		if conn := c.mcp.openStateless(srv, id, nil, keptID(spelling, proposed)); conn != nil {
			c.answerItself(from, m, json.RawMessage(`{"connectionId":`+conn.agentID+`}`), b)
		} else {
			c.answerError(from, m, gone(), b)
		}
		return true
	}
	// Open at once under the id a Thinkwell parent proposed, so that what
	// it sends before the answer reaches the owner after the connect; the
	// answer confirms it.
	var early *mcpConn
	if proposed != nil && spelling == "url" {
		early = c.mcp.openProposed(srv.owner, srv.spelling, id, proposed)
	}
	cl := &call{from: from, fromID: m.ID, method: methodMCPConnect, batch: b}
	if c.trace != nil {
		// As the caller sent them (out of its envelope, in its spelling),
		// should the conductor answer it (traceCallerAnswer).
		cl.method, cl.params = tracedAs(m)
	}
	cl.onResponse = func(resp *wire.Message) bool {
		if early == nil {
			c.connected(srv, id, proposed, nil, resp, gone)
			return false
		}
		// What the parent sent on the connection meanwhile follows the
		// answer, which says the connection is open.
		came := *resp
		held := c.connected(srv, id, proposed, early, resp, gone)
		if cl.to.trace != nil {
			cl.traceHooked(&came, resp) // before what it held goes on
		}
		line := encodeResponseTo(cl.fromID, resp)
		cl.answer(line.segments()...)
		c.mcp.release(held)
		return true
	}
	c.relayCall(c.peers[d.to], cl, d, params)
	return true
}

// connected records the connection the owner of srv opened, or refused,
// by its answer resp to a caller's mcp/connect, and shapes the answer for
// the caller. early is the connection opened at once under the id a
// Thinkwell parent proposed, or nil; it returns the connection that holds
// what the parent sent meanwhile.
func (c *chain) connected(srv mcpServer, id string, proposed json.RawMessage, early *mcpConn, resp *wire.Message, gone func() *wire.Error) (held *mcpConn) {
	if refusedConnect(resp) {
		c.mcp.learn(srv.owner, bindingRequest)
		var conn *mcpConn
		if early != nil {
			conn = c.mcp.restate(early, srv, id)
		} else {
			conn = c.mcp.openStateless(srv, id, nil, nil)
		}
		if conn == nil {
			resp.Error, resp.Result = gone().Encode(), nil
			return early // what it held is told it has no connection
		}
		resp.Error, resp.Result = nil, json.RawMessage(`{"connectionId":`+conn.agentID+`}`)
		return conn
	}
	cid := connectionIDOf(resp.Result, proposed)
	switch {
	case resp.Error != nil || cid == nil:
		if early != nil {
			c.mcp.close(early)
		}
	case early != nil:
		c.mcp.learn(srv.owner, bindingConnect)
		if c.mcp.confirm(early, cid); early.agentID != string(cid) || wire.Member(resp.Result, "connectionId") == nil {
			resp.Result = withConnectionID(resp.Result, early.agentID)
		}
	default:
		c.mcp.learn(srv.owner, bindingConnect)
		agentID, ok := c.mcp.open(srv.owner, srv.spelling, id, cid)
		switch {
		case !ok:
			// Never recorded: only this tells the owner it is unwanted.
			c.disconnect(&mcpConn{owner: srv.owner, spelling: srv.spelling, ownerID: string(cid)})
			resp.Error, resp.Result = gone().Encode(), nil
		case agentID != string(cid) || wire.Member(resp.Result, "connectionId") == nil:
			resp.Result = withConnectionID(resp.Result, agentID)
		}
	}
	return early
}

// keptID returns the connectionId a caller that connects as spelling
// proposed and keeps using, whatever the answer says: a Thinkwell
// parent's (by url). Any other caller takes the id it is answered.
func keptID(spelling string, proposed json.RawMessage) json.RawMessage {
	if spelling == "url" {
		return proposed
	}
	return nil
}

// refusedConnect reports whether an owner's answer to mcp/connect says it
// does not know the method: it binds per request.
func refusedConnect(resp *wire.Message) bool {
	return resp.Error != nil && errorCode(resp.Error) == codeMethodNotFound
}

// mcpOnConn relays a message on a connect-binding connection: from the
// agent to the owner, or from the owner to the agent or a bridged client.
func (c *chain) mcpOnConn(src int, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) {
	c.onConn(src, from, m, method, params, b, false)
}

// onConn is mcpOnConn; released is set when it routes what a connection
// held (mcpRoutes.release), which holding would keep again.
func (c *chain) onConn(src int, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch, released bool) {
	agentSide := src == c.topo.Load().last()
	id := connID(params)
	conn := c.mcp.byOwner(src, id)
	if agentSide {
		conn = c.mcp.byAgent(id)
	}
	if conn == nil {
		c.noConnection(agentSide, from, m, method, id, b)
		return
	}
	if agentSide && !released && c.mcp.hold(conn, func() { c.onConn(src, from, m, method, params, b, true) }) {
		return
	}
	var d delivery
	switch {
	case agentSide && conn.stateless != nil:
		c.fromConnectCaller(conn, from, m, method, params, b)
		return
	case agentSide:
		d = c.toOwner(conn.owner, spell(conn.spelling, method))
		if method == methodMCPDisconnect {
			c.mcp.close(conn)
			if ownerSpellings[conn.spelling].notifyDisconnect {
				// The owner answers none: the conductor does.
				c.relay(from, c.peers[d.to], nil, d, disconnectParams(conn.spelling, []byte(conn.ownerID)))
				if m.IsRequest() {
					c.answerItself(from, m, json.RawMessage(`{}`), b)
				}
				return
			}
		}
		if conn.ownerID != string(id) {
			params = withConnectionID(params, conn.ownerID)
		}
		if m.IsNotification() {
			var ok bool
			if params, ok = mcpCancelledOnConn(from, params); !ok {
				return
			}
		}
	case conn.forRequests:
		c.toRequestCaller(conn, from, m, params, b)
		return
	case conn.bridge != nil:
		c.toBridge(conn.bridge, from, m, params, b)
		return
	default: // the owner, to the agent
		d = c.toAgent(method)
		if conn.agentID != string(id) || wire.Member(params, "connectionId") == nil {
			params = withConnectionID(params, conn.agentID)
		}
		if m.IsNotification() {
			var ok bool
			if params, ok = mcpCancelledOnConn(from, params); !ok {
				return
			}
		}
	}
	d.extra = mcpExtra(m)
	to := c.peers[d.to]
	if m.IsNotification() {
		c.relay(from, to, nil, d, params)
		return
	}
	cl := &call{from: from, fromID: m.ID, method: method, batch: b}
	if agentSide && conn.agentID != conn.ownerID {
		cl.onResponse = func(resp *wire.Message) bool {
			if resp.Error != nil {
				resp.Error = connErrorFor(resp.Error, conn.ownerID, conn.agentID)
			}
			return false
		}
	}
	if agentSide && method == methodMCPMessage && !c.mcp.track(conn, cl) {
		c.noConnection(agentSide, from, m, method, id, b) // its server ended meanwhile
		return
	}
	c.relayCall(to, cl, d, params)
}

// noConnection answers a message on a connection the MCP tables do not
// have. One the agent had that ended with its server or its owner is
// told why, and its mcp/disconnect succeeds, since there is nothing left
// to close; any other is unknown.
func (c *chain) noConnection(agentSide bool, from *peer, m *wire.Message, method string, id []byte, b *batch) {
	if agentSide {
		if why, ok := c.mcp.endedConn(id); ok {
			switch {
			case method != methodMCPDisconnect:
				c.answerError(from, m, why, b)
			case m.IsRequest():
				c.answerItself(from, m, json.RawMessage(`{}`), b)
			}
			return
		}
	}
	c.answerError(from, m, wire.Errorf(codeInvalidParams, "%s: unknown MCP connection", method).
		WithData(map[string]json.RawMessage{"connectionId": id}), b)
}

// endedConn returns what answers the agent's use of the connection it
// names as id, if that connection ended with its server.
func (r *mcpRoutes) endedConn(id []byte) (*wire.Error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended.lookup(id)
}

// track adds cl, the agent's request on conn, a connection it holds
// natively, to those the end of its server answers (endLocked), until
// cl's answer; it reports false, adding nothing, if conn is closed.
func (r *mcpRoutes) track(conn *mcpConn, cl *call) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owned[ownedID{conn.owner, conn.ownerID}] != conn {
		return false
	}
	conn.calls = append(conn.calls, cl)
	next := cl.onResponse
	cl.onResponse = func(resp *wire.Message) bool {
		r.mu.Lock()
		conn.calls = slices.DeleteFunc(conn.calls, func(o *call) bool { return o == cl })
		r.mu.Unlock()
		if next != nil {
			return next(resp)
		}
		return false
	}
	return true
}

// mcpToServer relays a request-binding mcp/message from src (the agent,
// or a proxy or the client that makes or passes on a call) to the server's
// owner: as it is to an owner that binds per request, translated onto a
// connection to one that binds per connection. Until the owner's binding is
// known, the first message asks with mcp/connect.
func (c *chain) mcpToServer(src int, from *peer, m *wire.Message, params json.RawMessage, b *batch) bool {
	var serverID string
	if json.Unmarshal(wire.Member(params, "serverId"), &serverID) != nil {
		return false
	}
	srv, ok := c.mcp.server(serverID)
	if !ok {
		return c.answerGone(from, m, serverID, "serverId", b) // else not declared in this chain: ordinary routing
	}
	if src == c.topo.Load().last() {
		c.mcp.agentSpoke("serverId") // a proxy's spelling says nothing of the agent's
	}
	params = c.mcp.withSession(params, serverID)
	if bindingTakes[c.mcp.bindingOf(srv.owner)].request {
		c.callOwner(src, srv.owner, from, m, params, b)
		return true
	}
	c.viaConnection(srv, serverID, func(conn *mcpConn, e *wire.Error) {
		switch {
		case e != nil:
			c.answerError(from, m, e, b)
		case conn == nil: // the owner binds per request
			c.callOwner(src, srv.owner, from, m, params, b)
		default:
			c.toConnectOwner(src, conn, from, m, params, b)
		}
	})
	return true
}

// callOwner relays a request-binding mcp/message from src to the owner,
// which binds per request; a call is recorded (noteCall) until its answer,
// for the owner's notifications about it to find src.
func (c *chain) callOwner(src, owner int, from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	d := c.toOwner(owner, methodMCPMessage)
	d.extra = mcpExtra(m)
	to := c.peers[d.to]
	if m.IsNotification() {
		c.relay(from, to, nil, d, params)
		return
	}
	cl := &call{from: from, fromID: m.ID, method: methodMCPMessage, batch: b}
	cl.onResponse = c.mcp.noteCall(src, to.pos, params, cl, nil)
	c.relayCall(to, cl, d, params)
}

// mcpFromServer relays a request-binding owner's mcp/message (progress,
// subscription events) to the caller whose request it names: a
// connect-binding caller the conductor translates for; for a notification,
// whoever made the call it names, if the conductor relayed that call to
// from (noteCall); else the agent.
func (c *chain) mcpFromServer(from *peer, m *wire.Message, params json.RawMessage, b *batch) {
	if conn := c.mcp.statelessRequest(wire.Member(params, "serverId"), wire.Member(params, "requestId")); conn != nil {
		c.toConnectCaller(conn, from, m, params, b)
		return
	}
	d := c.toAgent(methodMCPMessage)
	if m.IsNotification() {
		if caller, ok := c.mcp.callerOf(from.pos, params); ok {
			d = c.topo.Load().toCaller(caller, methodMCPMessage)
		}
		d.extra = mcpExtra(m)
		c.relay(from, c.peers[d.to], nil, d, params)
		return
	}
	d.extra = mcpExtra(m)
	c.relayCall(c.peers[d.to], &call{from: from, fromID: m.ID, method: methodMCPMessage, batch: b}, d, params)
}

// mcpFromClient relays the client's mcp/message notification naming a
// server the client declared as that server's message back to its caller
// (mcpFromServer), and reports whether it did: a notification about
// anyone else's server goes by position, as the client's other messages.
func (c *chain) mcpFromClient(src int, from *peer, m *wire.Message, params json.RawMessage, b *batch) bool {
	var serverID string
	if json.Unmarshal(wire.Member(params, "serverId"), &serverID) != nil {
		return false
	}
	if srv, ok := c.mcp.server(serverID); !ok || srv.owner != src {
		return false
	}
	c.mcpFromServer(from, m, params, b)
	return true
}

// mcpExtra is extraOf for an mcp/* message the MCP tables relay as
// itself, re-addressed (not translated between bindings, which makes
// another message): what it carries that JSON-RPC does not define goes on
// with it.
func mcpExtra(m *wire.Message) string { return extraOf(m, wire.IsSuccessor(m.Method)) }

// relayToOwner relays a request or notification from the agent side to the
// owner at pos.
func (c *chain) relayToOwner(pos int, from *peer, m *wire.Message, method string, params json.RawMessage, b *batch) {
	d := c.toOwner(pos, method)
	to := c.peers[d.to]
	if m.IsNotification() {
		c.relay(from, to, nil, d, params)
		return
	}
	c.relayCall(to, &call{from: from, fromID: m.ID, method: method, batch: b}, d, params)
}

// toAgent says how a message from an owner reaches the agent side.
func (c *chain) toAgent(method string) delivery {
	topo := c.topo.Load()
	return topo.toCaller(topo.last(), method)
}

// ownerGone forgets the MCP servers declared and connections opened by the
// proxy at pos, which is being restarted or bypassed (how says which): the
// agent's messages on them are refused, with why for those it holds
// natively (endedConns), instead of reaching a process that never opened
// them, and the servers'
// bridged declarations are revoked, as at the end of their last session.
// It returns a function that ends the bridged connections, so that their
// MCP clients see the server go away (the shim exits, the HTTP session
// ends); call it once the calls pending on the old process have been
// answered, so that those answers reach the clients first.
func (c *chain) ownerGone(pos int, how string) (end func()) {
	owner := c.peers[pos].name
	bridged := c.mcp.dropOwner(pos, func(s mcpServer, id string) *wire.Error {
		return wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available: %s, the proxy that served it, was %s", s.name, owner, how).
			WithData(map[string]json.RawMessage{"serverId": dataString(id)})
	})
	return func() {
		for _, p := range bridged {
			p.link.Load().out.close() // the writer drains it, then closes the connection
		}
	}
}

// ownerEnded ends the bridged MCP connections to the servers of the peer
// at pos, which can answer nothing more as the chain stops (it failed,
// exited, or closed its input), so that their clients see their server go
// away (the shim exits) then, not once every component is gone: an agent
// may wait for its MCP servers to exit before it does. Call it once what
// was pending on the owner is answered, so that those answers reach the
// clients first. Unlike ownerGone, it leaves the routes: a client that
// comes later is refused with why the owner is gone.
func (c *chain) ownerEnded(pos int) {
	for _, p := range c.mcp.bridgedOf(pos) {
		p.link.Load().out.close() // the writer drains it, then closes the connection
	}
}

// toOwner says how a message from the agent side reaches the owner of an
// MCP server: as coming from its successor.
func (c *chain) toOwner(owner int, method string) delivery {
	return delivery{to: owner, wrap: c.topo.Load().role(owner) == roleProxy, method: method}
}

// onSessionSetup records the acp MCP servers a session set-up request
// declares on its way downstream (mcpRoutes.declare), and returns what its
// answer is to complete (setupAnswered), or why the request is refused.
// On its way to the agent each declaration is spelled as the agent reads
// it, or, for an agent that cannot use them natively, rewritten for the
// bridge; on its way to a parent whose dialect declares servers by URL, it
// is spelled so.
func (c *chain) onSessionSetup(src int, d delivery, params json.RawMessage) (json.RawMessage, setup, *wire.Error) {
	if d.to <= src {
		return params, setup{}, nil
	}
	rec, found, e := c.mcp.declare(src, d.method, params)
	if e != nil {
		return nil, setup{}, e
	}
	if found && c.topo.Load().role(d.to) == roleUpstream && c.peers[0].getDialect().MCPByURL {
		out, err := urlForm(params)
		if err != nil {
			c.log.Warn("could not turn acp declarations into acp: URL ones for the parent; passed on unchanged", zap.Error(err))
			return params, rec, nil
		}
		return out, rec, nil
	}
	if !found || c.topo.Load().role(d.to) != roleAgent {
		return params, rec, nil
	}
	if c.mcp.agentIsNative() || c.bridge != nil {
		out, err := acpForm(params)
		if err != nil {
			c.log.Warn("could not turn acp: URL declarations into acp ones for the agent; passed on unchanged", zap.Error(err))
			return params, rec, nil
		}
		params = out
	}
	if c.mcp.agentIsNative() {
		c.mcp.mu.Lock()
		spelling := c.mcp.agentSpelling
		c.mcp.mu.Unlock()
		out, err := respell(params, spelling)
		if err != nil {
			c.log.Warn("could not spell MCP server declarations for the agent; passed on unchanged", zap.Error(err))
			return params, rec, nil
		}
		return out, rec, nil
	}
	if c.bridge == nil {
		c.log.Warn("the agent does not support MCP-over-ACP and no bridge is configured; acp MCP servers passed on unchanged")
		return params, rec, nil
	}
	rewritten, err := c.bridge.rewrite(params)
	if err != nil {
		c.log.Warn("could not rewrite MCP server declarations for the bridge", zap.Error(err))
		return params, rec, nil
	}
	return rewritten, rec, nil
}

// declarationSpellings says which members name an acp server for an agent,
// by the spelling it has been seen to use: serverId is the current schema's
// and always there; the RFD's id is added for an agent that used it, and
// for one not yet seen, since readers of the schema ignore it.
var declarationSpellings = map[string][]string{
	"":         {"serverId", "id"},
	"id":       {"serverId", "id"},
	"serverId": {"serverId"},
}

// acpForm returns session set-up params whose Thinkwell-dialect
// declarations, {"type":"http","url":"acp:<uuid>","headers":[]}, are acp
// ones, {"type":"acp","serverId":"acp:<uuid>"}, with the rest of each
// entry (name, _meta, anything unknown) kept: an agent (or the bridge)
// reads an acp server only so, and an HTTP client would try to fetch the
// URL.
func acpForm(params json.RawMessage) (json.RawMessage, error) {
	return editDeclarations(params, func(raw json.RawMessage, d acpDeclaration) (json.RawMessage, error) {
		id, spelling := d.serverID()
		if spelling != "url" {
			return nil, nil
		}
		entry := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, err
		}
		delete(entry, "url")
		delete(entry, "headers")
		entry["type"], entry["serverId"] = mustQuote("acp"), mustQuote(id)
		return json.Marshal(entry)
	})
}

// urlForm is acpForm's inverse, for a parent of the Thinkwell dialect,
// which reads no other declaration: acp ones become
// {"type":"http","url":"acp:<id>","headers":[]}, with the rest of each
// entry kept. The parent connects by that URL (mcpRoutes.serverAt).
func urlForm(params json.RawMessage) (json.RawMessage, error) {
	return editDeclarations(params, func(raw json.RawMessage, d acpDeclaration) (json.RawMessage, error) {
		id, spelling := d.serverID()
		if id == "" || spelling == "url" {
			return nil, nil
		}
		entry := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, err
		}
		delete(entry, "id")
		delete(entry, "serverId")
		if !strings.HasPrefix(id, acpURLScheme) {
			id = acpURLScheme + id
		}
		entry["type"], entry["url"], entry["headers"] = mustQuote("http"), mustQuote(id), json.RawMessage("[]")
		return json.Marshal(entry)
	})
}

// editDeclarations returns params with each entry of mcpServers that edit
// returns a replacement for replaced, and params as they were if it
// replaces none.
func editDeclarations(params json.RawMessage, edit func(raw json.RawMessage, d acpDeclaration) (json.RawMessage, error)) (json.RawMessage, error) {
	return wire.EditMember(params, "mcpServers", func(list json.RawMessage) (json.RawMessage, error) {
		var servers []json.RawMessage
		if err := json.Unmarshal(list, &servers); err != nil {
			return nil, err
		}
		changed := false
		for i, raw := range servers {
			d, ok := declarationOf(raw)
			if !ok {
				continue
			}
			out, err := edit(raw, d)
			if err != nil {
				return nil, err
			}
			if out != nil {
				servers[i], changed = out, true
			}
		}
		if !changed {
			return nil, nil // EditMember keeps params as they were
		}
		return json.Marshal(servers)
	})
}

// respell returns session set-up params whose acp declarations carry the
// server id in each member the agent may read, and nothing else changed.
func respell(params json.RawMessage, agentSpelling string) (json.RawMessage, error) {
	return editDeclarations(params, func(raw json.RawMessage, d acpDeclaration) (json.RawMessage, error) {
		id, _ := d.serverID()
		if d.Type != "acp" || id == "" {
			return nil, nil
		}
		var out json.RawMessage
		for _, member := range declarationSpellings[agentSpelling] {
			if wire.Member(raw, member) != nil {
				continue
			}
			var err error
			if raw, err = wire.EditMember(raw, member, func(json.RawMessage) (json.RawMessage, error) { return mustQuote(id), nil }); err != nil {
				return nil, err
			}
			out = raw
		}
		return out, nil
	})
}

// onSessionEnd returns the response hook of a session/close or
// session/delete (method) on its way to the agent: once it succeeds, the
// servers declared in that session and no other are ended (endSession).
func (c *chain) onSessionEnd(method string, params json.RawMessage) func(*wire.Message) bool {
	session := string(wire.Member(params, "sessionId"))
	return func(resp *wire.Message) bool {
		if resp.Error == nil && session != "" {
			c.endSession(method, session)
		}
		return false
	}
}

// endSession forgets session (raw JSON), which method ended, among those
// that declared each server, and ends the servers no other session
// declares: the shared connection to each, and those the agent holds
// natively, are disconnected, and what callers still have in flight on
// them answered at once, with an error saying why (the owner, told the
// connection is gone, need not answer it); its bridged declarations are
// revoked and its bridged clients' connections ended, each of which its
// owner hears of as when the client goes away (serveBridged).
func (c *chain) endSession(method, session string) {
	c.endServers(c.mcp.sessionEnded(method, session))
}

// endServers ends what was open to servers the chain no longer has: each
// shared connection is disconnected and what callers still have in flight
// on it answered at once, with an error saying why (the owner, told the
// connection is gone, need not answer it); each connection the agent
// holds natively and each bridged client's likewise (endBridged), and
// the bridged ones then closed.
func (c *chain) endServers(e endedServers) {
	for _, g := range e.shared {
		c.disconnect(g.conn)
		for _, a := range g.active {
			abandon(a.call, g.why)
		}
	}
	for _, n := range e.native {
		// The owner first, as when the agent disconnects (mcpOnConn,
		// fromConnectCaller); then the agent's calls, whose hooks
		// forget what the conductor keeps for them.
		if n.conn.stateless != nil {
			c.cancelStateless(n.conn)
		} else {
			c.disconnect(n.conn)
		}
		failCalls(n.calls, n.why)
	}
	for _, b := range e.bridged {
		c.endBridged(b)
	}
}

// endBridged ends a bridged client's connection to a server the chain
// forgot. The owner is told first, as when the client goes away
// (serveBridged): mcp/disconnect, or for an owner that binds per request
// a cancel of each call. Then each call the client still has in flight is
// answered with why, ahead of the end of the connection, so that its MCP
// client is not left waiting (the owner's late answer is dropped).
func (c *chain) endBridged(b endedBridge) {
	switch {
	case b.conn == nil: // still opening, or its owner went first: serveBridged ends it
	case b.conn.stateless != nil:
		c.cancelStateless(b.conn)
	default:
		c.disconnect(b.conn)
	}
	failCalls(b.client.inFlightCalls(), b.why)
	b.client.link.Load().out.close() // the writer drains it, then closes the connection
}

// endedServers is what was open to servers the chain forgot, for
// endServers to end outside the routes' lock.
type endedServers struct {
	shared  []endedConn
	native  []endedConn
	bridged []endedBridge
}

// An endedBridge is a bridged client's connection to a server the chain
// forgot: conn is its connection to the owner, closed in the routes, if it
// was open; why is what its calls in flight are answered with.
type endedBridge struct {
	client *peer
	conn   *mcpConn
	why    *wire.Error
}

// An endedConn is a shared connection, or one the agent holds natively,
// to a server the chain forgot, with what was in flight on it (callers'
// requests on a shared one, the agent's calls on its own) and why it
// ended.
type endedConn struct {
	conn   *mcpConn
	active []activeRequest
	calls  []*call
	why    *wire.Error
}

// sessionEnded forgets session among those that declared each server, and
// forgets each server no other session declares, nor a set-up still
// pending (endLocked).
func (r *mcpRoutes) sessionEnded(method, session string) (e endedServers) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, s := range r.servers {
		if !s.sessionClosed(session) {
			r.servers[id] = s
			continue
		}
		r.endLocked(id, sessionEndedError(s, id, method, session), &e)
	}
	return e
}

// endLocked forgets the server id: it revokes its bridged declarations,
// tells a shared connection being opened to it that it is unwanted, and
// adds to e the shared connection, those the agent holds natively and the
// bridged clients' connections to end, for why, having closed them in the
// routes.
func (r *mcpRoutes) endLocked(id string, why *wire.Error, e *endedServers) {
	delete(r.servers, id)
	r.gone.Add(id, why)
	r.forgetCallsLocked(func(_ callRef, c mcpCall) bool { return c.serverID == id })
	if r.revoke != nil {
		// Under r.mu: a set-up that declares the server anew records it
		// (declare) before the bridge gives it a token, so the server is
		// either pending, and not ended, or given a new token, never this
		// one.
		r.revoke(id, why)
	}
	if op := r.opening[id]; op != nil {
		// Its owner has yet to answer mcp/connect: the answer will find
		// the connection unwanted.
		op.ended = why
		delete(r.opening, id)
	}
	for agentID, c := range r.conns {
		if c.serverID != id {
			continue
		}
		// The agent holds it natively, and may never disconnect: it ends
		// with its server, and the agent's later use of it is told why.
		r.ended.Add(agentID, connEndedError(agentID, why))
		if r.closeLocked(c) { // else its owner went away first, failing what it had
			e.native = append(e.native, endedConn{conn: c, calls: c.calls, why: why})
		}
		c.calls = nil
	}
	for p, to := range r.bridged {
		if to != id {
			continue
		}
		b := endedBridge{client: p, why: why}
		for _, c := range r.owned {
			if c.bridge == p && r.closeLocked(c) {
				b.conn = c
			}
		}
		e.bridged = append(e.bridged, b)
	}
	conn, ok := r.shared[id]
	if !ok {
		return
	}
	delete(r.shared, id)
	if !r.closeLocked(conn) {
		return // its owner went away first, failing what it had
	}
	e.shared = append(e.shared, endedConn{conn: conn, active: conn.active, why: why})
	conn.active = nil
}

// connEndedError is what answers the agent's use of the connection it
// knows as agentID (raw JSON) once that connection has ended with its
// server or its owner, for why.
func connEndedError(agentID string, why *wire.Error) *wire.Error {
	data := map[string]json.RawMessage{}
	_ = json.Unmarshal(why.Data, &data) // an object the conductor made
	data["connectionId"] = json.RawMessage(agentID)
	return wire.Errorf(why.Code, "MCP connection %s ended: %s", agentID, why.Message).WithData(data)
}

// connErrorFor returns e, an owner's error, naming the connection the
// caller knows as callerID (raw JSON; "" for none: a bridged client or a
// request-binding caller holds no connection) where it named the owner's
// ownerID, in its data and as "connection <id>" in its message (the
// conductor's own wording, which a nested conductor answers with). The
// owner's id means nothing to the caller, or another of its connections;
// the rest of the error, its cause, is kept.
func connErrorFor(e json.RawMessage, ownerID, callerID string) json.RawMessage {
	var data map[string]json.RawMessage
	if json.Unmarshal(wire.Member(e, "data"), &data) != nil || !sameID(data["connectionId"], ownerID) {
		return e
	}
	old, now := "connection "+ownerID, "connection"
	if delete(data, "connectionId"); callerID != "" {
		data["connectionId"] = json.RawMessage(callerID)
		now += " " + callerID
	}
	out, err := wire.EditMember(e, "message", func(raw json.RawMessage) (json.RawMessage, error) {
		var msg string
		if json.Unmarshal(raw, &msg) != nil {
			return raw, nil
		}
		return dataString(replaceID(msg, old, now)), nil
	})
	if err != nil {
		return e
	}
	if out, err = wire.EditMember(out, "data", func(json.RawMessage) (json.RawMessage, error) { return wire.Marshal(data) }); err != nil {
		return e
	}
	return out
}

// replaceID returns s with each old, which ends in a raw JSON id, replaced
// by now, where the id is whole: "connection 1" is not in "connection 12",
// which names another connection.
func replaceID(s, old, now string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			break
		}
		end := i + len(old)
		if end < len(s) && idByte(old[len(old)-1]) && idByte(s[end]) {
			b.WriteString(s[:end]) // a longer id
		} else {
			b.WriteString(s[:i])
			b.WriteString(now)
		}
		s = s[end:]
	}
	b.WriteString(s)
	return b.String()
}

// idByte reports whether c may continue a raw JSON number or literal (a
// string, object or array id ends itself).
func idByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '+' || c == '-'
}

// sameID reports whether raw and id (raw JSON) name the same id, however
// each is escaped. The owner chose the id, which may be an object or an
// array: == on those would panic.
func sameID(raw json.RawMessage, id string) bool {
	var a, b any
	return raw != nil && json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(id), &b) == nil && reflect.DeepEqual(a, b)
}

// dataString returns s, an id the conductor names in its own error data,
// as a JSON string written without HTML escaping ("R&D", not "R\u0026D"),
// as the data's other members, raw JSON as it came, are. (mustQuote's
// escaping stays in what the conductor relays, as peers have seen it.)
func dataString(s string) json.RawMessage { return wire.AppendString(nil, s) }

// sessionEndedError is what a request waits for in vain once method ended
// session (raw JSON), the last that declared the server s under id.
func sessionEndedError(s mcpServer, id, method, session string) *wire.Error {
	return wire.Errorf(codeMCPServerUnavailable, "MCP server %q is no longer available: %s ended session %s, which declared it", s.name, method, session).
		WithData(map[string]json.RawMessage{"serverId": dataString(id), "sessionId": json.RawMessage(session)})
}

// disconnect tells the owner of a connection the conductor opened that it
// is closed: with a request whose answer nobody needs, or the notification
// the owner's spelling has instead.
func (c *chain) disconnect(conn *mcpConn) {
	d := c.toOwner(conn.owner, spell(conn.spelling, methodMCPDisconnect))
	bye := disconnectParams(conn.spelling, []byte(conn.ownerID))
	if ownerSpellings[conn.spelling].notifyDisconnect {
		c.relay(nil, c.peers[conn.owner], nil, d, bye)
		return
	}
	c.relayCall(c.peers[conn.owner], &call{method: d.method, onResponse: func(*wire.Message) bool { return true }}, d, bye)
}
