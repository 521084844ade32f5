package mcpbridge

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/acp-conductor/acp-conductor/internal/recent"
)

// The shim's subcommand and the environment variables through which a stdio
// declaration tells it where to connect and what to present.
const (
	ShimCommand = "mcp-shim"
	EnvSocket   = "ACP_CONDUCTOR_MCP_SOCKET"
	EnvToken    = "ACP_CONDUCTOR_MCP_TOKEN"
)

// StdioServer is an ACP McpServerStdio declaration: the agent launches
// Command with Args and Env and speaks MCP on its stdin and stdout. ACP v1
// tells it by its lack of a type; v2 requires Type "stdio".
type StdioServer struct {
	Type    string        `json:"type,omitempty"`
	Name    string        `json:"name"`
	Command string        `json:"command"`
	Args    []string      `json:"args"`
	Env     []EnvVariable `json:"env"`
}

// EnvVariable is an ACP EnvVariable.
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// HTTPServer is an ACP McpServerHttp declaration, with its "type" member.
type HTTPServer struct {
	Type    string       `json:"type"` // always "http"
	Name    string       `json:"name"`
	URL     string       `json:"url"`
	Headers []HTTPHeader `json:"headers"`
}

// HTTPHeader is an ACP HttpHeader.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ErrNoHTTP is returned by HTTP when the bridge was made without
// Options.HTTP.
var ErrNoHTTP = errors.New("mcpbridge: HTTP transport not enabled")

// ErrLongServerID is returned by HTTP for a server whose id is longer than
// a route may be (3072 bytes); Stdio declares any server.
var ErrLongServerID = errors.New("mcpbridge: server id too long for an HTTP route")

// Stdio registers the ACP-transport server serverID, named name, and returns
// the stdio declaration to give the agent in its place. Connections made with
// it arrive at Serve as Conns for serverID. Declaring a server again keeps its
// token, so an agent that reconnects with an older declaration still can.
func (b *Bridge) Stdio(serverID, name string) StdioServer {
	d := b.decls.declare(serverID, name)
	return StdioServer{
		Name:    name,
		Command: b.exe,
		Args:    []string{ShimCommand},
		Env: []EnvVariable{
			{Name: EnvSocket, Value: b.socket},
			{Name: EnvToken, Value: d.token},
		},
	}
}

// HTTP registers serverID like Stdio and returns a streamable HTTP
// declaration for it: a loopback URL whose path names the server, and the
// server's token as a bearer token in an Authorization header. The first
// call opens the HTTP listener.
func (b *Bridge) HTTP(serverID, name string) (HTTPServer, error) {
	if !routable(serverID) {
		return HTTPServer{}, fmt.Errorf("%w: %d bytes", ErrLongServerID, len(serverID))
	}
	t, err := b.httpTransport()
	if err != nil {
		return HTTPServer{}, err
	}
	d := b.decls.declare(serverID, name)
	return HTTPServer{
		Type:    "http",
		Name:    name,
		URL:     t.base + serverRoute(serverID),
		Headers: []HTTPHeader{{Name: "Authorization", Value: "Bearer " + d.token}},
	}, nil
}

// Revoke forgets serverID: from then on its token is refused, by the socket
// and by HTTP (its route is unknown), including on later requests of HTTP
// sessions already open. A client that presents the token is told why
// (the shim's refusal, HTTP 410 Gone), for the last 1024 tokens revoked.
// Conns are not closed; that is the caller's to do. Those admitted with
// the token report why from Revoked from then on (ErrRevoked if why is
// nil): one admitted just before Revoke may reach Serve's accept just
// after it, and its client is owed the reason.
func (b *Bridge) Revoke(serverID string, why error) { b.decls.revoke(serverID, why) }

// ErrRevoked is what Conn.Revoked reports for a token revoked with no
// reason given.
var ErrRevoked = errors.New("mcpbridge: server revoked")

// A declaration is one registered server and its secret.
type declaration struct {
	serverID, name string
	token          string // 64 hex digits
	grant          *grant // shared by every declaration of this token
}

// A grant is one token's standing. Declaring a server again makes a new
// declaration with the same token, and Conns admitted under the older one
// must still learn of the revocation.
type grant struct {
	revoked error // set by revoke, under the registry's lock
}

// registry maps tokens to declarations. It is keyed by the SHA-256 of the
// token so that the map lookup, whose timing depends on the key, reveals
// nothing about the token itself; the match is confirmed in constant time.
type registry struct {
	mu       sync.Mutex
	byID     map[string]*declaration
	byDigest map[[sha256.Size]byte]*declaration
	// gone keeps the last revoked tokens' declarations, keyed and
	// matched as live ones, so that a client that presents one is told
	// why its server is gone rather than that its token is unknown. Its
	// Limit, maxRevoked, is set with the maps, by the first declare (only a
	// declared token is revoked).
	gone recent.Map[[sha256.Size]byte, *declaration]
}

// maxRevoked bounds how many revoked tokens the registry remembers: a
// conductor whose sessions come and go must not grow with them, and a
// client that presents a token revoked longer ago is refused as with one
// never issued.
const maxRevoked = 1024

func (r *registry) declare(serverID, name string) *declaration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = make(map[string]*declaration)
		r.byDigest = make(map[[sha256.Size]byte]*declaration)
		r.gone.Limit = maxRevoked
	}
	var d *declaration
	if old, ok := r.byID[serverID]; ok {
		d = &declaration{serverID: serverID, name: name, token: old.token, grant: old.grant}
	} else {
		var secret [32]byte
		rand.Read(secret[:]) // never fails
		d = &declaration{serverID: serverID, name: name, token: hex.EncodeToString(secret[:]), grant: new(grant)}
	}
	r.byID[serverID] = d
	r.byDigest[sha256.Sum256([]byte(d.token))] = d
	return d
}

// revoked returns why d's token was revoked, or nil.
func (r *registry) revoked(d *declaration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return d.grant.revoked
}

// lookup returns the declaration whose token is token.
func (r *registry) lookup(token string) (*declaration, bool) {
	r.mu.Lock()
	d, ok := r.byDigest[sha256.Sum256([]byte(token))]
	r.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(d.token), []byte(token)) != 1 {
		return nil, false
	}
	return d, true
}

// whyRevoked returns why token was revoked, if it is among the last
// revoked, and the server it was for; the match is confirmed in constant
// time, as lookup's.
func (r *registry) whyRevoked(token string) (serverID string, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.gone.Get(sha256.Sum256([]byte(token)))
	if !ok || subtle.ConstantTimeCompare([]byte(d.token), []byte(token)) != 1 {
		return "", nil
	}
	return d.serverID, d.grant.revoked
}

// byServer returns serverID's declaration; the caller checks its token in
// constant time.
func (r *registry) byServer(serverID string) (*declaration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.byID[serverID]
	return d, ok
}

func (r *registry) revoke(serverID string, why error) {
	if why == nil {
		why = ErrRevoked
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.byID[serverID]; ok {
		digest := sha256.Sum256([]byte(d.token))
		delete(r.byID, serverID)
		delete(r.byDigest, digest)
		d.grant.revoked = why
		r.gone.Add(digest, d)
	}
}
