package mcpbridge

import (
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/creachadair/jrpc2"
	"go.uber.org/zap"
)

// Admission to the HTTP transport, checked before a body is read. Each
// declared server has a route of its own (its id, in base64url, so that any
// id makes one path segment) and its token travels in the declaration's
// Authorization header, as the official ACP SDK's bridge does: a URL ends
// up in logs and process listings, a header does not. The Host must be the
// listener's own address and an Origin, when a browser sends one, its own
// origin: a page that got the port through DNS rebinding names another.

// httpPathPrefix is followed, in a declaration's URL, by its server's route.
const httpPathPrefix = "/mcp/"

// maxRoute bounds the encoded id a request's path may carry, so that what
// an unauthenticated peer makes the bridge decode is small: it is the
// route of a 3072-byte id. A server with a longer id gets no route
// (routable), and HTTP refuses to declare it.
const maxRoute = 4096

func serverRoute(serverID string) string {
	return httpPathPrefix + base64.RawURLEncoding.EncodeToString([]byte(serverID))
}

// routable reports whether serverID is short enough to have a route.
func routable(serverID string) bool {
	return base64.RawURLEncoding.EncodedLen(len(serverID)) <= maxRoute
}

// routeServer returns the server id a path names, if it is a route made by
// serverRoute: one spelling per server.
func routeServer(path string) (string, bool) {
	enc, ok := strings.CutPrefix(path, httpPathPrefix)
	if !ok || len(enc) > maxRoute {
		return "", false
	}
	id, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || base64.RawURLEncoding.EncodeToString(id) != enc {
		return "", false
	}
	return string(id), true
}

// A refusal is why a request is not admitted, and how it is answered.
type refusal struct {
	status int
	code   jrpc2.Code
	reason string
}

// admit returns the declaration a request is for, or why it is refused.
func (t *httpTransport) admit(r *http.Request) (*declaration, *refusal) {
	for _, name := range []string{"Origin", "Authorization"} {
		if len(r.Header.Values(name)) > 1 {
			return nil, &refusal{http.StatusBadRequest, jrpc2.InvalidRequest, "duplicate " + name + " header"}
		}
	}
	if r.Host != t.host {
		// MCP's streamable HTTP transport asks for this against DNS
		// rebinding; the Go SDK answers it with 403 too.
		return nil, &refusal{http.StatusForbidden, jrpc2.InvalidRequest, "invalid Host header"}
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+t.host {
		return nil, &refusal{http.StatusForbidden, jrpc2.InvalidRequest, "origin not allowed"}
	}
	id, routed := routeServer(r.URL.Path)
	var d *declaration
	ok := routed
	if ok {
		d, ok = t.b.decls.byServer(id)
	}
	token, hasToken := bearer(r.Header.Get("Authorization"))
	if ok && hasToken && subtle.ConstantTimeCompare([]byte(token), []byte(d.token)) == 1 {
		return d, nil
	}
	if routed && hasToken {
		if gone := t.gone(id, token); gone != nil {
			return nil, gone
		}
	}
	if !ok {
		return nil, &refusal{http.StatusNotFound, jrpc2.MethodNotFound, "unknown MCP route"}
	}
	return nil, &refusal{http.StatusUnauthorized, jrpc2.InvalidRequest, "unauthorized"}
}

// gone returns the refusal of a request that presents a revoked token on
// its server's route: 410, saying why the server is gone. Only the
// token's holder learns why; anyone else is refused as before.
func (t *httpTransport) gone(id, token string) *refusal {
	serverID, why := t.b.decls.whyRevoked(token)
	if why == nil || serverID != id {
		return nil
	}
	e := asRPCError(why)
	return &refusal{http.StatusGone, e.Code, e.Message}
}

// bearer returns the token of an Authorization header of the Bearer scheme.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// refuse answers a request that was not admitted and logs it, with its
// method and path but never its headers. The connection is closed after
// the answer, so that a refused peer holds no descriptor in keep-alive.
func (t *httpTransport) refuse(w http.ResponseWriter, r *http.Request, why *refusal) {
	t.b.refusals.refused("refused MCP HTTP request", zap.String("reason", why.reason),
		zap.String("method", r.Method), zap.String("path", clipString(r.URL.Path, 256)), zap.String("remote", r.RemoteAddr))
	w.Header().Set("Connection", "close")
	if why.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeError(w, why.status, why.code, why.reason)
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
