package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"
)

// DialOptions configure Dial.
type DialOptions struct {
	// Header is sent with every request (Authorization, for one).
	Header http.Header
	// MaxMessageBytes bounds one message from the server. Zero means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int
	// HTTPClient makes the requests. Nil means one with a fresh cookie jar,
	// as the RFD requires clients to keep the server's cookies for the
	// connection's life.
	HTTPClient *http.Client
	// StreamableHTTP skips the WebSocket attempt for an http(s) URL, for
	// networks whose proxies pass HTTP but break upgrades.
	StreamableHTTP bool
	// PingInterval is how often a WebSocket connection pings the server;
	// one whose pong does not come within the interval is closed, and its
	// Read fails with ErrHeartbeat, so that a server whose network vanished
	// is noticed in seconds rather than when TCP gives up. Zero means
	// DefaultPingInterval; negative turns the heartbeat off.
	PingInterval time.Duration
	// Logger hears, at debug level, of what a Streamable HTTP server sent
	// that carries no message (an SSE event of another type than
	// "message"). Nil discards.
	Logger *zap.Logger

	// Tests: the heartbeat's timeout (zero: the interval), a function
	// called after each pong, and one after a late pong with no Read pending.
	pingTimeout time.Duration
	pong        func()
	unsure      func()
}

// Dial opens the client side of an ACP connection to rawURL. A ws:// or
// wss:// URL is a WebSocket; an http:// or https:// one is tried as a
// WebSocket first and spoken to over Streamable HTTP if the server refuses
// the upgrade. Over Streamable HTTP the first message written must be
// initialize.
func Dial(ctx context.Context, rawURL string, opts DialOptions) (Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.HTTPClient == nil {
		jar, _ := cookiejar.New(nil)
		opts.HTTPClient = &http.Client{Jar: jar}
	}
	switch u.Scheme {
	case "ws", "wss", "http", "https":
	default:
		return nil, fmt.Errorf("%s: not a ws, wss, http or https URL", display(u))
	}
	if opts.StreamableHTTP && (u.Scheme == "http" || u.Scheme == "https") {
		return newHTTPClient(u.String(), opts), nil
	}
	ws, resp, err := websocket.Dial(ctx, rawURL, &websocket.DialOptions{HTTPClient: opts.HTTPClient, HTTPHeader: opts.Header})
	if err == nil {
		hb := heartbeat{interval: pingInterval(opts.PingInterval), timeout: opts.pingTimeout, pong: opts.pong, unsure: opts.unsure}
		return newWSConn(ws, opts.MaxMessageBytes, hb), nil
	}
	refused := resp != nil && resp.StatusCode != http.StatusSwitchingProtocols
	if (u.Scheme == "http" || u.Scheme == "https") && refused && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return newHTTPClient(u.String(), opts), nil
	}
	if refused {
		return nil, fmt.Errorf("%s: %s", display(u), resp.Status)
	}
	return nil, fmt.Errorf("%s: %w", display(u), err)
}

// display is u for messages: no password, query or fragment, which may hold
// credentials.
func display(u *url.URL) string {
	v := *u
	v.RawQuery, v.Fragment = "", ""
	return v.Redacted()
}
