package mcpbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/creachadair/jrpc2"
)

// The shim opens its connection with one line and the bridge answers with
// one, before any MCP traffic:
//
//	→ {"mcpShim":1,"token":"<64 hex digits>"}
//	← {"ok":true}  or  {"error":"<why not>"}  or  {"error":"<why not>","code":-33001}
//
// The answer lets a refused shim say why on stderr rather than exit as if
// the server had simply ended. A code comes with a revoked token, whose
// holder was admitted once: the shim then tells its client too.
type hello struct {
	Version int    `json:"mcpShim"`
	Token   string `json:"token"`
}

type welcome struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
	// Code is set for a revoked token: the shim answers its client's
	// requests with this error, as a refused bridged connection is.
	Code jrpc2.Code `json:"code,omitempty"`
}

const shimVersion = 1

// handshakeTimeout bounds how long a peer may take to present its token.
// The shim sends it as soon as it connects.
var handshakeTimeout = 5 * time.Second

// maxHelloBytes bounds the shim's hello as the bridge reads it, and
// maxWelcomeBytes the bridge's answer as the shim reads it: a peer that has
// not shown a token gets no larger buffer than this.
const (
	maxHelloBytes   = 4 << 10
	maxWelcomeBytes = 4 << 10
)

var errBadToken = errors.New("unknown token")

// checkHello returns the declaration whose token the hello line presents.
func (b *Bridge) checkHello(line []byte) (*declaration, error) {
	var h hello
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("malformed handshake: %w", err)
	}
	if h.Version != shimVersion {
		return nil, fmt.Errorf("shim speaks version %d, bridge %d", h.Version, shimVersion)
	}
	d, ok := b.decls.lookup(h.Token)
	if !ok {
		if _, why := b.decls.whyRevoked(h.Token); why != nil {
			return nil, asRPCError(why)
		}
		return nil, errBadToken
	}
	return d, nil
}
