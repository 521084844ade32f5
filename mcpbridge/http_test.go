package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

const (
	acceptBoth = "application/json, text/event-stream"
	acceptJSON = "application/json"
)

// An httpClient speaks the streamable HTTP transport by hand.
type httpClient struct {
	t       *testing.T
	hc      *http.Client
	url     string
	header  http.Header // the declaration's
	session string
}

// newHTTPClient returns a client that uses decl's URL and headers.
func newHTTPClient(t *testing.T, decl HTTPServer) *httpClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	h := http.Header{}
	for _, kv := range decl.Headers {
		h.Add(kv.Name, kv.Value)
	}
	return &httpClient{t: t, hc: &http.Client{Transport: tr, Timeout: 20 * time.Second}, url: decl.URL, header: h}
}

func (c *httpClient) do(ctx context.Context, method, accept, body string, header ...string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.session != "" {
		req.Header.Set(headerSession, c.session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch {
		case header[i] == "Host":
			req.Host = header[i+1]
		case header[i+1] == "":
			req.Header.Del(header[i])
		default:
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func (c *httpClient) post(accept, body string, header ...string) *http.Response {
	c.t.Helper()
	return c.do(c.t.Context(), http.MethodPost, accept, body, header...)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// events reads SSE message events from a response body.
type events struct {
	body io.Closer
	sc   *bufio.Scanner
}

func sse(t *testing.T, resp *http.Response) *events {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q; want an SSE stream", resp.StatusCode, ct)
	}
	return &events{body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

// next returns the data of the next message event, or "" at the end.
func (e *events) next() string {
	var data string
	for e.sc.Scan() {
		line := e.sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			return data
		}
	}
	return ""
}

// initialize opens a session on a bridge whose accept is parked, and
// returns its Conn.
func initialize(t *testing.T, c *httpClient, conns chan *Conn) *Conn {
	t.Helper()
	type result struct {
		resp *http.Response
		body string
	}
	done := make(chan result, 1)
	go func() {
		resp := c.post(acceptJSON, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		done <- result{resp, readAll(t, resp)}
	}()
	conn := next(t, conns)
	if msg, err := recv(t, conn); err != nil || !strings.Contains(string(msg), `"initialize"`) {
		t.Fatalf("Recv = %s, %v", msg, err)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}`))
	r := <-done
	if r.resp.StatusCode != http.StatusOK || r.resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("initialize: status %d, %q", r.resp.StatusCode, r.resp.Header.Get("Content-Type"))
	}
	if r.body != `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}` {
		t.Errorf("initialize body: %s", r.body)
	}
	c.session = r.resp.Header.Get(headerSession)
	if c.session == "" {
		t.Fatal("no Mcp-Session-Id")
	}
	for _, ch := range c.session {
		if ch < 0x21 || ch > 0x7e {
			t.Fatalf("session id %q is not visible ASCII", c.session)
		}
	}
	return conn
}

// async runs f and returns a channel for its response and body.
func async(t *testing.T, f func() *http.Response) chan string {
	ch := make(chan string, 1)
	go func() {
		resp := f()
		ch <- resp.Status + " " + resp.Header.Get("Content-Type") + "\n" + readAll(t, resp)
	}()
	return ch
}

func wait(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no HTTP response")
		return ""
	}
}

func httpBridge(t *testing.T, opts Options) (*Bridge, chan *Conn, *httpClient) {
	t.Helper()
	opts.HTTP = true
	accept, conns := parked()
	b := startBridge(t, opts, accept)
	decl, err := b.HTTP("srv-1", "tools")
	if err != nil {
		t.Fatal(err)
	}
	return b, conns, newHTTPClient(t, decl)
}

func TestHTTPDeclaration(t *testing.T) {
	b, err := New(Options{HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	decl, err := b.HTTP("srv-1", "tools")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(decl.URL)
	if err != nil {
		t.Fatal(err)
	}
	if decl.Type != "http" || decl.Name != "tools" || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != "/mcp/c3J2LTE" {
		t.Errorf("declaration = %+v", decl)
	}
	// The token travels in a header, never in the URL.
	token := env(b.Stdio("srv-1", "tools"))[EnvToken]
	if strings.Contains(decl.URL, token) {
		t.Errorf("URL %s carries the server's token", decl.URL)
	}
	if len(decl.Headers) != 1 || decl.Headers[0] != (HTTPHeader{Name: "Authorization", Value: "Bearer " + token}) {
		t.Errorf("headers = %+v, want the token as a bearer token", decl.Headers)
	}
	// Loopback by construction: the listener is bound to 127.0.0.1.
	addr := b.http.ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() || addr.IP.String() != "127.0.0.1" {
		t.Errorf("listening on %v", addr)
	}
	got, _ := json.Marshal(decl)
	if want := `{"type":"http","name":"tools","url":"` + decl.URL + `","headers":[{"name":"Authorization","value":"Bearer ` + token + `"}]}`; string(got) != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	// Any id makes one path segment, and its route names only it; one too
	// long to have a route is refused, rather than declared at a URL the
	// bridge would answer with 404.
	if _, err := b.HTTP(strings.Repeat("x", 3073), "tools"); !errors.Is(err, ErrLongServerID) {
		t.Errorf("a 3073-byte id: %v, want ErrLongServerID", err)
	}
	for _, id := range []string{"", "a/b?c#d", "ünï", strings.Repeat("x", 300), strings.Repeat("x", 3072)} {
		d, err := b.HTTP(id, "tools")
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimPrefix(d.URL, "http://"+addr.String())
		if got, ok := routeServer(p); !ok || got != id || strings.Count(p, "/") != 2 {
			t.Errorf("server %q: route %s names %q, %v", id, p, got, ok)
		}
	}
}

// TestHTTPRefused sends requests that must not reach a server: unknown
// routes, missing or wrong tokens, a foreign Host or Origin, duplicate
// credentials. Each gets its status and a JSON-RPC error, is logged with
// its method and path but not its token, and closes its connection.
func TestHTTPRefused(t *testing.T) {
	defer func(d time.Duration) { refusalInterval = d }(refusalInterval)
	refusalInterval = 0 // log each one, to check what is logged
	log, logs := observed()
	b, conns, c := httpBridge(t, Options{Logger: log})
	u, _ := url.Parse(c.url)
	token := strings.TrimPrefix(c.header.Get("Authorization"), "Bearer ")
	wrong := strings.Repeat("0", 64)
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize"}`
	for _, tc := range []struct {
		name   string
		path   string
		header []string
		status int
	}{
		{"root", "/", nil, http.StatusNotFound},
		{"no route", "/mcp/", nil, http.StatusNotFound},
		{"other server", serverRoute("srv-2"), nil, http.StatusNotFound},
		{"non-canonical route", u.Path + "=", nil, http.StatusNotFound},
		{"trailing slash", u.Path + "/", nil, http.StatusNotFound},
		{"token as path (the old URL)", "/mcp/" + token, []string{"Authorization", ""}, http.StatusNotFound},
		{"no token", u.Path, []string{"Authorization", ""}, http.StatusUnauthorized},
		{"wrong token", u.Path, []string{"Authorization", "Bearer " + wrong}, http.StatusUnauthorized},
		{"token prefix", u.Path, []string{"Authorization", "Bearer " + token[:63]}, http.StatusUnauthorized},
		{"other scheme", u.Path, []string{"Authorization", "Basic " + token}, http.StatusUnauthorized},
		{"token in query", u.Path + "?token=" + token, []string{"Authorization", ""}, http.StatusUnauthorized},
		{"foreign Host", u.Path, []string{"Host", "evil.example:" + u.Port()}, http.StatusForbidden},
		{"localhost Host", u.Path, []string{"Host", "localhost:" + u.Port()}, http.StatusForbidden},
		{"other port", u.Path, []string{"Host", "127.0.0.1:1"}, http.StatusForbidden},
		{"foreign Origin", u.Path, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"null Origin", u.Path, []string{"Origin", "null"}, http.StatusForbidden},
		{"rebinding Origin", u.Path, []string{"Origin", "http://127.0.0.1.evil.example:" + u.Port()}, http.StatusForbidden},
		{"other local Origin", u.Path, []string{"Origin", "http://localhost:3000"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := newHTTPClient(t, HTTPServer{URL: "http://" + u.Host + tc.path, Headers: []HTTPHeader{{"Authorization", "Bearer " + token}}})
			n := logs.Len()
			resp := bad.post(acceptBoth, init, tc.header...)
			body := readAll(t, resp)
			if resp.StatusCode != tc.status || !strings.Contains(body, `"id":null,"error"`) || !resp.Close {
				t.Errorf("%s: %s %s (close %v), want %d with a JSON-RPC error, closing", tc.path, resp.Status, body, resp.Close, tc.status)
			}
			if tc.status == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("401 without WWW-Authenticate: Bearer")
			}
			entries := logs.All()[n:]
			if len(entries) != 1 || entries[0].Message != "refused MCP HTTP request" {
				t.Fatalf("logged %v", entries)
			}
			f := entries[0].ContextMap()
			if f["method"] != "POST" || f["path"] != strings.Split(tc.path, "?")[0] {
				t.Errorf("logged %v, want the method and path", f)
			}
			for _, v := range f {
				if s := fmt.Sprint(v); strings.Contains(s, token) && tc.name != "token as path (the old URL)" || strings.Contains(s, wrong) {
					t.Errorf("the log shows a presented token: %v", f)
				}
			}
		})
	}
	// Two Authorization headers, even with the right token first.
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(init))
	req.Header["Authorization"] = []string{"Bearer " + token, "Bearer " + wrong}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("two Authorization headers: %s, want 400", resp.Status)
	}
	select {
	case conn := <-conns:
		t.Errorf("a refused request reached server %s", conn.ServerID)
	default:
	}
	// The bridge's own origin is allowed, like no Origin at all.
	resp = c.post(acceptBoth, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Origin", "http://"+u.Host)
	readAll(t, resp)
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the bridge's own Origin: %s", resp.Status)
	}
	next(t, conns)
	b.Revoke("srv-1", nil)
	resp = c.post(acceptBoth, init)
	if body := readAll(t, resp); resp.StatusCode != http.StatusGone || !strings.Contains(body, ErrRevoked.Error()) {
		t.Errorf("revoked server: %s %s, want 410 saying it was revoked", resp.Status, body)
	}
}

func TestHTTPSessionRequests(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	if conn.ServerID != "srv-1" || conn.Name != "tools" || conn.Transport != TransportHTTP {
		t.Errorf("Conn = %q %q %q", conn.ServerID, conn.Name, conn.Transport)
	}

	// A notification is accepted with 202 and reaches Recv.
	resp := c.post(acceptBoth, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusAccepted || body != "" {
		t.Errorf("notification: %s %q", resp.Status, body)
	}
	if msg, _ := recv(t, conn); string(msg) != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("Recv = %s", msg)
	}

	// A request accepting SSE is answered on its own stream, after the
	// server messages sent while it is open (there is no GET stream).
	got := async(t, func() *http.Response {
		return c.post(acceptBoth, "{\"jsonrpc\":\"2.0\",\n\"id\":\"a\",\"method\":\"tools/list\"}")
	})
	if msg, _ := recv(t, conn); string(msg) != `{"jsonrpc":"2.0","id":"a","method":"tools/list"}` {
		t.Errorf("Recv = %s (want the POST on one line)", msg)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`))
	conn.Send([]byte(`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`))
	want := "200 OK text/event-stream\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"tools\":[]}}\n\n"
	if s := wait(t, got); s != want {
		t.Errorf("SSE response:\n%s\nwant\n%s", s, want)
	}

	// Accepting JSON only, a batch gets its responses as an array.
	got = async(t, func() *http.Response {
		return c.post(acceptJSON, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":2,"method":"b"}]`)
	})
	if msg, _ := recv(t, conn); !strings.HasPrefix(string(msg), `[{"jsonrpc":"2.0","id":1`) {
		t.Errorf("Recv = %s, want the batch", msg)
	}
	conn.Send([]byte(`[{"jsonrpc":"2.0","id":2,"result":"B"},{"jsonrpc":"2.0","id":1,"result":"A"}]`))
	if s := wait(t, got); s != "200 OK application/json\n"+`[{"jsonrpc":"2.0","id":2,"result":"B"},{"jsonrpc":"2.0","id":1,"result":"A"}]` {
		t.Errorf("batch response: %s", s)
	}
}

func TestHTTPServerRequestOverGET(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)

	// Sent before the client listens, a request waits for the stream.
	if err := conn.Send([]byte(`{"jsonrpc":"2.0","id":"s1","method":"roots/list"}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := c.do(ctx, http.MethodGet, "text/event-stream", "")
	defer resp.Body.Close()
	ev := sse(t, resp)
	if got := ev.next(); got != `{"jsonrpc":"2.0","id":"s1","method":"roots/list"}` {
		t.Errorf("GET stream: %s", got)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":"s2","method":"ping"}`))
	if got := ev.next(); got != `{"jsonrpc":"2.0","id":"s2","method":"ping"}` {
		t.Errorf("GET stream: %s", got)
	}
	// The client's responses come back as POSTs.
	for _, answer := range []string{`{"jsonrpc":"2.0","id":"s1","result":{"roots":[]}}`, `{"jsonrpc":"2.0","id":"s2","result":{}}`} {
		r := c.post(acceptBoth, answer)
		readAll(t, r)
		if r.StatusCode != http.StatusAccepted {
			t.Errorf("POST of a response: %s", r.Status)
		}
		if msg, _ := recv(t, conn); string(msg) != answer {
			t.Errorf("Recv = %s, want %s", msg, answer)
		}
	}
	// With the GET stream open, server messages go there, not to a POST.
	got := async(t, func() *http.Response { return c.post(acceptBoth, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`) })
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`))
	if e := ev.next(); !strings.Contains(e, "notifications/message") {
		t.Errorf("GET stream: %s", e)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}`))
	if s := wait(t, got); strings.Contains(s, "notifications/message") || !strings.Contains(s, `"id":5`) {
		t.Errorf("POST stream: %s", s)
	}
}

func TestHTTPDelete(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	get := c.do(ctx, http.MethodGet, "text/event-stream", "")
	ev := sse(t, get)

	resp := c.do(t.Context(), http.MethodDelete, "", "")
	readAll(t, resp)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %s", resp.Status)
	}
	if _, err := recv(t, conn); err != io.EOF {
		t.Errorf("Recv after DELETE: %v, want io.EOF", err)
	}
	if e := ev.next(); e != "" {
		t.Errorf("GET stream went on after DELETE: %s", e)
	}
	ev.body.Close()
	if err := conn.Send([]byte(`{"jsonrpc":"2.0","method":"x"}`)); !errors.Is(err, io.EOF) {
		t.Errorf("Send after DELETE: %v, want io.EOF", err)
	}
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		r := c.do(t.Context(), method, acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		readAll(t, r)
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("%s after DELETE: %s, want 404", method, r.Status)
		}
	}
}

func TestHTTPCloseAnswersPending(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	got := async(t, func() *http.Response { return c.post(acceptJSON, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`) })
	recv(t, conn)
	conn.Close()
	s := wait(t, got)
	if !strings.HasPrefix(s, "200 OK application/json\n") || !strings.Contains(s, `"id":3,"error":{"code":-32000`) {
		t.Errorf("pending request after Close: %s", s)
	}
	r := c.post(acceptBoth, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	readAll(t, r)
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("after Close: %s, want 404", r.Status)
	}
}

// TestHTTPRevokedCloseAnswersPending: a request pending when its server is
// revoked and its Conn closed is answered with why the server is gone,
// not as if the connection had merely closed: the conductor answers what
// it relayed itself, and this is what it never could.
func TestHTTPRevokedCloseAnswersPending(t *testing.T) {
	b, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	got := async(t, func() *http.Response { return c.post(acceptJSON, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`) })
	recv(t, conn)
	b.Revoke("srv-1", wire.Errorf(-33001, "MCP server %q is no longer available: its session ended", "tools"))
	conn.Close()
	s := wait(t, got)
	if want := `{"jsonrpc":"2.0","id":3,"error":{"code":-33001,"message":"MCP server \"tools\" is no longer available: its session ended"}}`; !strings.HasPrefix(s, "200 OK application/json\n") || !strings.Contains(s, want) {
		t.Errorf("pending request after Revoke and Close: %s; want %s", s, want)
	}
}

func TestHTTPAbandonedRequestIsCancelled(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":"slow","method":"tools/call"}`))
		req.Header = c.header.Clone()
		req.Header.Set("Accept", acceptBoth)
		req.Header.Set(headerSession, c.session)
		if resp, err := c.hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body) // until the cancel
			resp.Body.Close()
		}
	}()
	recv(t, conn)
	cancel()
	<-done
	msg, err := recv(t, conn)
	var m testMsg
	json.Unmarshal(msg, &m)
	if err != nil || m.Method != "notifications/cancelled" || !strings.Contains(string(m.Params), `"requestId":"slow"`) {
		t.Errorf("Recv = %s, %v; want notifications/cancelled for \"slow\"", msg, err)
	}
	// Its late response is dropped, and the session goes on.
	conn.Send([]byte(`{"jsonrpc":"2.0","id":"slow","result":{}}`))
	got := async(t, func() *http.Response { return c.post(acceptJSON, `{"jsonrpc":"2.0","id":"slow","method":"ping"}`) })
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","id":"slow","result":{"pong":true}}`))
	if s := wait(t, got); !strings.Contains(s, "pong") {
		t.Errorf("after an abandoned request: %s", s)
	}
}

func TestHTTPSessionless(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	got := async(t, func() *http.Response {
		return c.post(acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			headerProtocol, "2026-07-28")
	})
	conn := next(t, conns)
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`))
	conn.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`))
	s := wait(t, got)
	if !strings.HasPrefix(s, "200 OK text/event-stream\n") || !strings.Contains(s, "notifications/progress") || !strings.Contains(s, `"tools":[]`) {
		t.Errorf("sessionless request: %s", s)
	}
	if _, err := recv(t, conn); err != io.EOF {
		t.Errorf("a sessionless Conn after its response: %v, want io.EOF", err)
	}

	// Revision 2026-07-28 gives method-not-found a 404 of its own.
	got = async(t, func() *http.Response {
		return c.post(acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, headerProtocol, "2026-07-28")
	})
	conn = next(t, conns)
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`))
	if s := wait(t, got); s != "404 Not Found application/json\n"+`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}` {
		t.Errorf("method not found: %s", s)
	}
	// Earlier revisions answer it with 200.
	got = async(t, func() *http.Response {
		return c.post(acceptJSON, `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, headerProtocol, "2025-11-25")
	})
	conn = next(t, conns)
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`))
	if s := wait(t, got); !strings.HasPrefix(s, "200 OK") {
		t.Errorf("method not found before 2026-07-28: %s", s)
	}
}

// TestHTTPErrorStatusCodeSpelled: from revision 2026-07-28 an error's
// HTTP status follows its code as wire.Parse reads it, an integer however
// it is written (the TypeScript SDK's Number.isInteger): -32601.0 is
// method-not-found and gets its 404, as -32601 does. One with no status
// of its own starts the usual event stream.
func TestHTTPErrorStatusCodeSpelled(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	const sse = "200 OK text/event-stream"
	for _, tt := range []struct {
		code string
		head string // the status and content type
	}{
		{"-32601", "404 Not Found application/json"},
		{"-32601.0", "404 Not Found application/json"},
		{"-3.2601e4", "404 Not Found application/json"},
		{"-32602.00", "400 Bad Request application/json"},
		{"-32022E0", "400 Bad Request application/json"},
		{"-32601.5", sse},
		{"-32603.0", sse},
	} {
		got := async(t, func() *http.Response {
			return c.post(acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, headerProtocol, "2026-07-28")
		})
		conn := next(t, conns)
		recv(t, conn)
		answer := `{"jsonrpc":"2.0","id":1,"error":{"code":` + tt.code + `,"message":"no"}}`
		conn.Send([]byte(answer))
		if s := wait(t, got); !strings.HasPrefix(s, tt.head+"\n") || !strings.Contains(s, answer) {
			t.Errorf("code %s: got\n%s\nwant %s with %s", tt.code, s, tt.head, answer)
		}
	}
}

func TestHTTPIdleSessionEnds(t *testing.T) {
	_, conns, c := httpBridge(t, Options{HTTPIdleTimeout: 100 * time.Millisecond})
	conn := initialize(t, c, conns)
	if _, err := recv(t, conn); err != io.EOF {
		t.Errorf("Recv of an idle session: %v, want io.EOF", err)
	}
	r := c.post(acceptBoth, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	readAll(t, r)
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("after idle: %s, want 404", r.Status)
	}
}

func TestHTTPFailedInitializeEndsSession(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	got := async(t, func() *http.Response {
		return c.post(acceptBoth, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	})
	conn := next(t, conns)
	recv(t, conn)
	conn.Send([]byte(`{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"unsupported version"}}`))
	if s := wait(t, got); !strings.Contains(s, "unsupported version") {
		t.Errorf("initialize: %s", s)
	}
	if _, err := recv(t, conn); err != io.EOF {
		t.Errorf("after a failed initialize: %v, want io.EOF", err)
	}
}

func TestHTTPBadRequests(t *testing.T) {
	_, conns, c := httpBridge(t, Options{MaxMessageBytes: 256})
	for _, tc := range []struct {
		method, body string
		session      string
		status       int
	}{
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,`, "", http.StatusBadRequest},
		{http.MethodPost, `[]`, "", http.StatusBadRequest},
		{http.MethodPost, `{"id":1}`, "", http.StatusBadRequest},
		{http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, "", http.StatusBadRequest},
		{http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]`, "", http.StatusBadRequest},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", 300) + `"}`, "", http.StatusRequestEntityTooLarge},
		{http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "no-such-session", http.StatusNotFound},
		{http.MethodGet, "", "", http.StatusBadRequest},
		{http.MethodGet, "", "no-such-session", http.StatusNotFound},
		{http.MethodDelete, "", "", http.StatusBadRequest},
		{http.MethodPut, "", "", http.StatusMethodNotAllowed},
	} {
		c.session = tc.session
		resp := c.do(t.Context(), tc.method, acceptBoth, tc.body)
		body := readAll(t, resp)
		if resp.StatusCode != tc.status || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s: %s %s, want %d with a JSON-RPC error", tc.method, tc.body, resp.Status, body, tc.status)
		}
	}
	select {
	case conn := <-conns:
		t.Errorf("a bad request made a Conn for %s", conn.ServerID)
	default:
	}
}

// TestHTTPInvalidRequestID: an invalid request POSTed alone is refused
// under its id, as it came, when the id can be read, as JSON-RPC 2.0 and
// the conductor's own input answer it; under null when it cannot, for
// what is not JSON, for what would be a response, and for a batch, which
// is refused whole.
func TestHTTPInvalidRequestID(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	for _, tc := range []struct {
		body, want string
	}{
		{`{"jsonrpc":"1.0","id":5,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: \"jsonrpc\" must be \"2.0\""}}`},
		{` {"jsonrpc":"2.0","id":"a\u0062","method":""} `,
			`{"jsonrpc":"2.0","id":"a\u0062","error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: empty method"}}`},
		{`{"jsonrpc":"2.0","id":7.0,"method":3}`,
			`{"jsonrpc":"2.0","id":7.0,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: method is not a string"}}`},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list"`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"not valid JSON"}}`},
		{`{"jsonrpc":"2.0","id":5}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: no method, result or error"}}`},
		{`[{"jsonrpc":"2.0","id":5,"method":""}]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"not a JSON-RPC 2.0 message: empty method"}}`},
	} {
		resp := c.post(acceptBoth, tc.body)
		if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || body != tc.want {
			t.Errorf("POST %s: %s\n%s\nwant 400\n%s", tc.body, resp.Status, body, tc.want)
		}
	}
	select {
	case conn := <-conns:
		t.Errorf("an invalid request made a Conn for %s", conn.ServerID)
	default:
	}
}

func TestHTTPDuplicateRequestID(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	got := async(t, func() *http.Response { return c.post(acceptJSON, `{"jsonrpc":"2.0","id":7,"method":"a"}`) })
	recv(t, conn)
	r := c.post(acceptJSON, `{"jsonrpc":"2.0","id":7,"method":"b"}`)
	readAll(t, r)
	if r.StatusCode != http.StatusBadRequest {
		t.Errorf("a second request with a pending id: %s, want 400", r.Status)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":7,"result":"a"}`))
	if s := wait(t, got); !strings.Contains(s, `"result":"a"`) {
		t.Errorf("first request: %s", s)
	}
}

func TestHTTPKeepAlive(t *testing.T) {
	defer func(d time.Duration) { keepAliveInterval = d }(keepAliveInterval)
	keepAliveInterval = 20 * time.Millisecond
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	resps := make(chan *http.Response, 1)
	go func() { resps <- c.post(acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"slow"}`) }()
	recv(t, conn)
	var resp *http.Response
	select {
	case resp = <-resps:
	case <-time.After(10 * time.Second):
		t.Fatal("no response to a slow request: its stream never started")
	}
	defer resp.Body.Close()
	// The request is pending: the stream carries keep-alive comments until
	// the answer comes.
	body := bufio.NewReader(resp.Body)
	var got strings.Builder
	for !strings.Contains(got.String(), ":\n\n") {
		line, err := body.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended before a keep-alive: %q, %v", got.String(), err)
		}
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	rest, err := io.ReadAll(body)
	if err != nil || !strings.Contains(string(rest), `"id":1,"result"`) {
		t.Errorf("slow SSE response: %q then %q, %v", got.String(), rest, err)
	}
}

func TestHTTPServeStopsWithOpenStreams(t *testing.T) {
	b, err := New(Options{HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	accept, conns := parked()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, accept) }()
	decl, _ := b.HTTP("srv-1", "tools")
	c := newHTTPClient(t, decl)
	conn := initialize(t, c, conns)
	get := c.do(t.Context(), http.MethodGet, "text/event-stream", "")
	defer get.Body.Close()
	pending := async(t, func() *http.Response { return c.post(acceptBoth, `{"jsonrpc":"2.0","id":1,"method":"slow"}`) })
	recv(t, conn)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop")
	}
	if s := wait(t, pending); !strings.Contains(s, `"error"`) {
		t.Errorf("request pending at shutdown: %s", s)
	}
	io.Copy(io.Discard, get.Body)
}

// TestHTTPBacklogBounded: what waits for a client that opens no stream is
// bounded in messages and in bytes, though one message of any size is
// taken.
func TestHTTPBacklogBounded(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	for i := range maxQueued {
		if err := conn.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	if err := conn.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)); !errors.Is(err, errBacklogFull) {
		t.Errorf("Send beyond the backlog: %v", err)
	}

	big := func(n int) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", n) + `"}}`)
	}
	c.session = "" // a session of its own
	conn = initialize(t, c, conns)
	if err := conn.Send(big(maxQueuedBytes + 1)); err != nil {
		t.Fatalf("Send of one message past the bound to an empty backlog: %v", err)
	}
	if err := conn.Send(big(1)); !errors.Is(err, errBacklogFull) {
		t.Errorf("Send behind it: %v", err)
	}
	c.session = ""
	conn = initialize(t, c, conns)
	n := 0
	for ; n <= maxQueuedBytes>>20; n++ {
		if err := conn.Send(big(1 << 20)); errors.Is(err, errBacklogFull) {
			break
		} else if err != nil {
			t.Fatalf("Send %d: %v", n, err)
		}
	}
	if n != maxQueuedBytes>>20-1 {
		t.Errorf("the backlog took %d messages of 1 MiB, want %d", n, maxQueuedBytes>>20-1)
	}
}

func TestHTTPSecondGETReplacesFirst(t *testing.T) {
	_, conns, c := httpBridge(t, Options{})
	conn := initialize(t, c, conns)
	first := c.do(t.Context(), http.MethodGet, "text/event-stream", "")
	defer first.Body.Close()
	ev1 := sse(t, first)
	second := c.do(t.Context(), http.MethodGet, "text/event-stream", "")
	defer second.Body.Close()
	ev2 := sse(t, second)
	if e := ev1.next(); e != "" {
		t.Errorf("replaced GET stream carried %s", e)
	}
	conn.Send([]byte(`{"jsonrpc":"2.0","id":"s1","method":"ping"}`))
	if e := ev2.next(); e != `{"jsonrpc":"2.0","id":"s1","method":"ping"}` {
		t.Errorf("second GET stream: %s", e)
	}
}

// TestHTTPListenerOnDemand: a bridge that may serve HTTP opens no port until
// a server is declared over HTTP, and serves it from then on, whether Serve
// started before or after.
func TestHTTPListenerOnDemand(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprint("serving before the declaration: ", early), func(t *testing.T) {
			accept, conns := parked()
			b, err := New(Options{HTTP: true})
			if err != nil {
				t.Fatal(err)
			}
			b.Stdio("srv-0", "stdio tools")
			if b.http != nil {
				t.Fatal("HTTP listener opened with no HTTP declaration")
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			serve := func() { go func() { done <- b.Serve(ctx, accept) }() }
			if early {
				serve()
			}
			decl, err := b.HTTP("srv-1", "tools")
			if err != nil {
				t.Fatal(err)
			}
			if !early {
				serve()
			}
			initialize(t, newHTTPClient(t, decl), conns)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
			b.Close()
		})
	}
	closed, err := New(Options{HTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if _, err := closed.HTTP("srv-1", "tools"); !errors.Is(err, ErrClosed) || closed.http != nil {
		t.Errorf("HTTP after Close: %v, want ErrClosed and no listener", err)
	}
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.HTTP("srv-1", "tools"); !errors.Is(err, ErrNoHTTP) {
		t.Errorf("HTTP without Options.HTTP: %v, want ErrNoHTTP", err)
	}
}

// TestHTTPConnectionsCapped holds maxHTTPConns connections that never send
// a request: the bridge accepts no more until one is done, so they cost it
// a bounded number of descriptors; a real request gets in once one goes.
func TestHTTPConnectionsCapped(t *testing.T) {
	defer func(d time.Duration) { headerTimeout = d }(headerTimeout)
	headerTimeout = time.Hour // only the test ends them
	full := reach(t, &httpConnsChanged, maxHTTPConns)
	b, conns, c := httpBridge(t, Options{})
	u, _ := url.Parse(c.url)
	var silent []net.Conn
	for range maxHTTPConns {
		nc, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	waitClosed(t, full, "every connection slot taken")
	got := async(t, func() *http.Response {
		return c.post(acceptJSON, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	})
	if n := b.http.ln.open.Load(); n != maxHTTPConns || len(conns) != 0 {
		t.Errorf("%d connections open, %d served; want %d, none served", n, len(conns), maxHTTPConns)
	}
	silent[0].Close()
	next(t, conns)
	if s := wait(t, got); !strings.HasPrefix(s, "202") {
		t.Errorf("once a connection was free: %s", s)
	}
}

// TestHTTPSilentConnectionDropped: a connection that sends no request
// headers within headerTimeout is closed.
func TestHTTPSilentConnectionDropped(t *testing.T) {
	defer func(d time.Duration) { headerTimeout = d }(headerTimeout)
	headerTimeout = 50 * time.Millisecond
	empty := reach(t, &httpConnsChanged, 0)
	_, _, c := httpBridge(t, Options{})
	u, _ := url.Parse(c.url)
	nc, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "POST "+u.Path+" HTTP/1.1\r\n") // and nothing more
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(nc); err != nil {
		t.Errorf("the bridge kept a silent connection open: %v", err)
	}
	waitClosed(t, empty, "its slot freed") // the slot is given back after the close
}
