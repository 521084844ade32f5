package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recorder wraps the server's handler and keeps, for each request, its
// method and the headers a test asks about.
type recorder struct {
	next   http.Handler
	before func(w http.ResponseWriter, r *http.Request) // runs first, if set

	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, upgrade, cookie, version, body, session string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{
		method: r.Method, upgrade: r.Header.Get("Upgrade"),
		cookie: r.Header.Get("Cookie"), version: r.Header.Get(HeaderProtocolVersion),
		session: r.Header.Get(HeaderSessionID),
	})
	rec.mu.Unlock()
	if rec.before != nil {
		rec.before(w, r)
	}
	rec.next.ServeHTTP(w, r)
}

func (rec *recorder) all() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.reqs...)
}

// httpOnlyServer is a Streamable-HTTP-only server behind rec, as a proxy
// that breaks upgrades makes it.
func httpOnlyServer(t *testing.T, rec *recorder) (*Server, string) {
	t.Helper()
	s := &Server{Serve: agentish, refuseUpgrade: true}
	rec.next = s
	ts := httptest.NewServer(rec)
	t.Cleanup(func() { s.Close(); ts.Close() })
	return s, ts.URL + "/acp"
}

// TestProtocolVersionHeader: the server answers initialize with the
// negotiated version in Acp-Protocol-Version, refuses a request that names
// another with 400 and takes one that names none (the TypeScript SDK sends
// none); the client sends the negotiated version on every request after
// initialize.
func TestProtocolVersionHeader(t *testing.T) {
	rec := &recorder{}
	s, u := httpOnlyServer(t, rec)
	c, err := Dial(context.Background(), u, DialOptions{StreamableHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	converse(t, c)
	reqs := rec.all()
	if reqs[0].version != "" {
		t.Errorf("initialize carried %s %q", HeaderProtocolVersion, reqs[0].version)
	}
	for _, r := range reqs[1:] {
		if r.version != "1" {
			t.Errorf("a %s after initialize carried %s %q, want 1", r.method, HeaderProtocolVersion, r.version)
		}
	}

	// The server's side, over plain requests.
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	if v := init.Header.Get(HeaderProtocolVersion); v != "1" {
		t.Errorf("initialize answered with %s %q, want 1", HeaderProtocolVersion, v)
	}
	cid := init.Header.Get(HeaderConnectionID)
	for _, tc := range []struct {
		version string
		want    int
	}{{"", 202}, {"1", 202}, {" 1 ", 202}, {"2", 400}, {"2025-06-18", 400}} {
		resp := post(t, u, cid, `{"jsonrpc":"2.0","method":"x/note","params":{}}`, map[string]string{HeaderProtocolVersion: tc.version})
		body := readAll(resp)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %q: %s %s, want %d", HeaderProtocolVersion, tc.version, resp.Status, body, tc.want)
		}
		if tc.want == 400 && !strings.Contains(body, "negotiated protocol version 1") {
			t.Errorf("%s %q: the refusal does not say what was negotiated: %s", HeaderProtocolVersion, tc.version, body)
		}
	}
	c.Close()
	del(t, u, cid)
	waitIdle(t, s)
}

// TestClientCookies: the client keeps what the server sets with Set-Cookie
// (here on its first answer, the refused upgrade, as a load balancer
// pinning the client to one backend would) and sends it on every later
// request of the connection, as the RFD requires.
func TestClientCookies(t *testing.T) {
	rec := &recorder{before: func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") == "" {
			http.SetCookie(w, &http.Cookie{Name: "backend", Value: "b7", Path: "/", HttpOnly: true})
		}
	}}
	s, u := httpOnlyServer(t, rec)
	c, err := Dial(context.Background(), u, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*httpClient); !ok {
		t.Fatalf("dialled %T, want the Streamable HTTP fallback", c)
	}
	converse(t, c)
	c.Close()
	waitIdle(t, s)
	reqs := rec.all()
	if reqs[0].upgrade == "" || reqs[0].cookie != "" {
		t.Fatalf("the first request: %+v, want the upgrade attempt without a cookie", reqs[0])
	}
	if len(reqs) < 6 {
		t.Fatalf("only %d requests", len(reqs))
	}
	for i, r := range reqs[1:] {
		if r.cookie != "backend=b7" {
			t.Errorf("request %d (%s) carried Cookie %q, want backend=b7", i+1, r.method, r.cookie)
		}
	}
}

func post(t *testing.T, u, cid, body string, h map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if cid != "" {
		req.Header.Set(HeaderConnectionID, cid)
	}
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func del(t *testing.T, u, cid string) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", u, nil)
	req.Header.Set(HeaderConnectionID, cid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestGuardNonLoopback: off loopback (serve over TLS on a public address)
// any Host is accepted, but an Origin must name that host or an allowed
// one, so that a page elsewhere cannot drive the chain with a stolen token.
func TestGuardNonLoopback(t *testing.T) {
	s, u := newTestServer(t, &Guard{Token: "s3cret", AllowedHosts: []string{"tunnel.example"}})
	for _, tc := range []struct {
		name, host, origin string
		want               int
	}{
		{"no Origin", "devbox.example.com", "", 200},
		{"same-host Origin", "devbox.example.com:8443", "https://devbox.example.com", 200},
		{"allowed Origin", "devbox.example.com", "https://tunnel.example:3000", 200},
		{"foreign Origin", "devbox.example.com", "https://evil.example", 403},
		{"null Origin", "devbox.example.com", "null", 403},
	} {
		req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
	}
	s.Close()
}
