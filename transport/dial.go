package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return nil, refusal(u, resp, opts.Header)
		}
		return nil, fmt.Errorf("%s: %s", display(u), resp.Status)
	}
	return nil, fmt.Errorf("%s: %w", display(u), hideQuery(err))
}

// A RefusedError is a server's refusal of a connection for its credentials
// (401) or its rights (403), which its user can mend, unlike most failures
// to connect: its message says so plainly, and never holds the token.
type RefusedError struct {
	URL    string // as display shows it: no password, query or fragment
	Status string // "401 Unauthorized"
	Code   int
	// Token reports whether the request carried an Authorization header.
	Token bool
	// Reason is what a 403's body says, on one line, shortened, without
	// the request's header values: the causes of a 403 vary (serve's is a
	// Host or Origin it does not serve), a 401's do not.
	Reason string
}

func (e *RefusedError) Error() string {
	status := e.Status
	if e.Reason != "" {
		status += ": " + e.Reason
	}
	switch {
	case e.Code == http.StatusUnauthorized && e.Token:
		return fmt.Sprintf("%s: the server refused the token (%s)", e.URL, status)
	case e.Code == http.StatusUnauthorized:
		return fmt.Sprintf("%s: the server wants a token (%s)", e.URL, status)
	case e.Token:
		return fmt.Sprintf("%s: the server refused the token or the request (%s)", e.URL, status)
	}
	return fmt.Sprintf("%s: the server refused the request (%s)", e.URL, status)
}

// refusal describes resp, a 401 or 403 answer to a request with the
// headers hdr.
func refusal(u *url.URL, resp *http.Response, hdr http.Header) *RefusedError {
	e := &RefusedError{URL: display(u), Status: resp.Status, Code: resp.StatusCode, Token: hdr.Get("Authorization") != ""}
	if resp.StatusCode == http.StatusForbidden && resp.Body != nil {
		line, _, _ := strings.Cut(readRedacted(resp.Body, 512, hdr), "\n")
		e.Reason = shorten(redactHeaders(line, hdr), 80)
	}
	return e
}

// readRedacted returns the start of body, up to n bytes, without the
// values of hdr (redactHeaders). It reads further than n, by the longest
// value, so that a value the cut would split is still found whole; the
// text is cut before it is redacted, as redacting shortens it and would
// pull a value read only in part back before the cut.
func readRedacted(body io.Reader, n int, hdr http.Header) string {
	words := secretWords(hdr)
	longest := 0
	for _, w := range words {
		longest = max(longest, len(w))
	}
	b, _ := io.ReadAll(io.LimitReader(body, int64(n+longest)))
	s := string(b)
	cut := min(n, len(s))
	for moved := true; moved; { // a value kept whole may begin another
		moved = false
		for _, w := range words {
			for at := 0; at < cut; {
				i := strings.Index(s[at:], w)
				if i < 0 || at+i >= cut {
					break
				}
				if end := at + i + len(w); end > cut {
					cut, moved = end, true
				}
				at += i + 1
			}
		}
	}
	s = redactHeaders(s[:cut], hdr)
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// redactHeaders removes from s every word of a header value long enough to
// be a credential, lest a server that echoes what it refused have it shown.
func redactHeaders(s string, hdr http.Header) string {
	for _, w := range secretWords(hdr) {
		s = strings.ReplaceAll(s, w, "[redacted]")
	}
	return s
}

// secretWords returns the words of hdr's values long enough to be a
// credential.
func secretWords(hdr http.Header) []string {
	var words []string
	for _, vs := range hdr {
		for _, v := range vs {
			for _, w := range strings.Fields(v) {
				if len(w) >= 8 {
					words = append(words, w)
				}
			}
		}
	}
	return words
}

// shorten returns s printable and trimmed, cut on a character boundary
// past max bytes and marked there.
func shorten(s string, max int) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "")))
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max] + "..."
}

// display is u for messages: no password, query or fragment, which may hold
// credentials.
func display(u *url.URL) string {
	v := *u
	v.RawQuery, v.Fragment = "", ""
	return v.Redacted()
}

// hideQuery returns err with the query and fragment of the URL that a
// *url.Error in it names removed from its text, as display removes them:
// net/http's errors name a request's URL with them (without its password
// only), and they may hold a token. The URL is in the text of every error
// that wraps the *url.Error too, written when each was made, so the text
// is rewritten, not the *url.Error.
func hideQuery(err error) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil || u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery {
		return err
	}
	return &hiddenQuery{err, strings.ReplaceAll(err.Error(), ue.URL, display(u))}
}

// A hiddenQuery is an error whose text hides a URL's query (hideQuery).
type hiddenQuery struct {
	err error
	msg string
}

func (e *hiddenQuery) Error() string { return e.msg }
func (e *hiddenQuery) Unwrap() error { return e.err }
