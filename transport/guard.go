package transport

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
)

// A Guard admits a request to the endpoint only if it carries the bearer
// token and names a host a DNS rebinding page cannot: with a loopback
// listener, Host and any Origin must be loopback names (or AllowedHosts);
// otherwise an Origin must match Host or AllowedHosts. Refusals are logged
// with the client's address and the reason, never the token, and answered
// at once, without waiting for the request's body.
type Guard struct {
	// Token is the bearer token every request must carry; empty admits
	// any request (serve allows that only on loopback).
	Token string
	// Loopback says the listener is on a loopback address.
	Loopback bool
	// AllowedHosts are further host names (without port) accepted in Host
	// and Origin, for a server reached through a tunnel or a proxy.
	AllowedHosts []string
	Logger       *zap.Logger
}

// Wrap returns h behind g. A request it lets through admits the
// connection it came over, which AdmitListener would otherwise close.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	log := g.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var want [sha256.Size]byte
	if g.Token != "" {
		want = sha256.Sum256([]byte(g.Token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(status int, reason string) {
			log.Warn("refused request", zap.String("remote", r.RemoteAddr), zap.String("method", r.Method),
				zap.String("host", clip(r.Host)), zap.String("origin", clip(r.Header.Get("Origin"))), zap.String("reason", reason))
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="acp"`)
			}
			// Over HTTP/1.x, net/http reads an unread body of up to 256
			// KiB before it answers, to reuse the connection: a refused
			// client that never sends the body it announced would get
			// no answer and hold the connection for ever. Closing it
			// after the answer skips that read. (HTTP/2 resets the
			// stream instead, and would take this for a GOAWAY.)
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			http.Error(w, reason, status)
		}
		if !g.hostAllowed(hostname(r.Host)) {
			refuse(http.StatusForbidden, "forbidden Host")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(o, hostname(r.Host)) {
			refuse(http.StatusForbidden, "forbidden Origin")
			return
		}
		// The Origin was judged here, by the rule both transports follow.
		r = r.WithContext(context.WithValue(r.Context(), originJudged{}, true))
		if g.Token != "" {
			scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			// Hashing first makes the comparison's time independent of the
			// lengths too.
			got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				refuse(http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
		}
		admit(r.Context())
		h.ServeHTTP(w, r)
	})
}

func (g *Guard) listed(host string) bool {
	for _, h := range g.AllowedHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

func (g *Guard) hostAllowed(host string) bool {
	if !g.Loopback || g.listed(host) {
		return true
	}
	return IsLoopbackHost(host)
}

func (g *Guard) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // includes "null", sent by sandboxed and file: pages
	}
	oh := u.Hostname()
	switch {
	case g.listed(oh):
		return true
	case g.Loopback:
		return IsLoopbackHost(oh)
	default:
		return strings.EqualFold(oh, host)
	}
}

// originJudged marks a request whose Origin a Guard has accepted: a
// WebSocket upgrade then skips the WebSocket library's own check, which
// would refuse what the Guard allows (a loopback Origin on another port,
// an AllowedHosts name) for Streamable HTTP and the WebSocket alike.
type originJudged struct{}

// clip cuts a header value a peer chose, or an error quoting one, to a
// length fit for a log line: headers may be a megabyte long.
func clip(s string) string {
	const n = 256
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// hostname strips the port from a Host header.
func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]")
	}
	return strings.Trim(hostport, "[]")
}

// IsLoopbackHost reports whether host (no port) names this machine only:
// "localhost" or a loopback IP.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
