package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// agentish serves a Conn like a tiny agent: it answers initialize,
// session/new (with a fresh session id) and session/prompt (after one
// session/update and, for a prompt asking for permission, a round trip
// through the client).
func agentish(ctx context.Context, c Conn, _ ConnInfo) {
	sessions := 0
	for {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Text      string `json:"text"`
			} `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		reply := func(result string) {
			_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`))
		}
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":1}`)
		case "session/new":
			sessions++
			reply(`{"sessionId":"s` + string(rune('0'+sessions)) + `"}`)
		case "session/prompt":
			sid := m.Params.SessionID
			_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`+sid+`","n":1}}`))
			if m.Params.Text == "permission" {
				_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":"perm","method":"session/request_permission","params":{"sessionId":"`+sid+`"}}`))
				for {
					ans, err := c.Read(ctx)
					if err != nil {
						return
					}
					if strings.Contains(string(ans), `"perm"`) {
						break
					}
				}
			}
			reply(`{"stopReason":"end_turn","sessionId":"` + sid + `"}`)
		}
	}
}

func newTestServer(t *testing.T, g *Guard) (*Server, string) {
	t.Helper()
	s := &Server{Serve: agentish}
	var h http.Handler = s
	if g != nil {
		h = g.Wrap(s)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { s.Close(); ts.Close() })
	return s, ts.URL + "/acp"
}

// converse runs initialize, session/new and a prompt with a permission
// round trip over c, and returns what arrived in order.
func converse(t *testing.T, c Conn) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	read := func() string {
		msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got = append(got, string(msg))
		return string(msg)
	}
	write := func(s string) {
		if err := c.Write(ctx, []byte(s)); err != nil {
			t.Fatalf("write %s: %v", s, err)
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	read()
	write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`)
	read()
	write(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","text":"permission"}}`)
	read() // the update
	if req := read(); !strings.Contains(req, "request_permission") {
		t.Fatalf("want the permission request, got %s", req)
	}
	write(`{"jsonrpc":"2.0","id":"perm","result":{"outcome":"allow"}}`)
	read()
	return got
}

func TestConversation(t *testing.T) {
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","n":1}}`,
		`{"jsonrpc":"2.0","id":"perm","method":"session/request_permission","params":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","sessionId":"s1"}}`,
	}
	for _, url := range []string{"ws", "http"} {
		t.Run(url, func(t *testing.T) {
			s, u := newTestServer(t, nil)
			if url == "ws" {
				u = "ws" + strings.TrimPrefix(u, "http")
			} else {
				// A server that refuses the upgrade makes Dial fall back.
				s.refuseUpgrade = true
			}
			c, err := Dial(context.Background(), u, DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, isHTTP := c.(*httpClient); isHTTP != (url == "http") {
				t.Fatalf("dialled %T", c)
			}
			got := converse(t, c)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			c.Close()
			waitIdle(t, s)
		})
	}
}

// waitIdle waits until s serves no connection: ending the client's side
// must end the server's. No new connection may start meanwhile.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	idle := make(chan struct{})
	go func() { s.wg.Wait(); close(idle) }() // each connection's run is done
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d connections still served after the client closed", s.Active())
	}
	if n := s.Active(); n != 0 {
		t.Fatalf("%d connections counted once all were done", n)
	}
}

func TestHTTPStatusCodes(t *testing.T) {
	s, u := newTestServer(t, nil)
	_ = s
	do := func(method, body string, h map[string]string) *http.Response {
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	json := map[string]string{"Content-Type": "application/json"}
	init := do("POST", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}`, json)
	body, _ := io.ReadAll(init.Body)
	cid := init.Header.Get(HeaderConnectionID)
	if init.StatusCode != 200 || cid == "" || string(body) != `{"jsonrpc":"2.0","id":7,"result":{"protocolVersion":1}}` {
		t.Fatalf("initialize: %s %q %s", init.Status, cid, body)
	}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", HeaderConnectionID: cid}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, tc := range []struct {
		name, method, body string
		h                  map[string]string
		want               int
	}{
		{"not JSON content", "POST", `{}`, map[string]string{"Content-Type": "text/plain"}, 415},
		{"batch", "POST", `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, json, 400},
		{"no connection", "POST", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`, json, 400},
		{"unknown connection", "POST", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`, map[string]string{"Content-Type": "application/json", HeaderConnectionID: "nope"}, 404},
		{"initialize again", "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, with(nil), 400},
		{"prompt without session header", "POST", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}`, with(nil), 400},
		{"mismatched session", "POST", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}`, with(map[string]string{HeaderSessionID: "s2"}), 400},
		{"accepted", "POST", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`, with(nil), 202},
		{"GET without Accept", "GET", ``, map[string]string{HeaderConnectionID: cid}, 406},
		{"GET without connection", "GET", ``, map[string]string{"Accept": "text/event-stream"}, 400},
		{"GET unknown connection", "GET", ``, map[string]string{"Accept": "text/event-stream", HeaderConnectionID: "nope"}, 404},
		{"PUT", "PUT", ``, nil, 405},
		{"DELETE without connection", "DELETE", ``, nil, 400},
	} {
		resp := do(tc.method, tc.body, tc.h)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
	}

	// The session/new answer waits on the connection's stream.
	sse := do("GET", "", map[string]string{"Accept": "text/event-stream", HeaderConnectionID: cid})
	if sse.StatusCode != 200 || sse.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %s %s", sse.Status, sse.Header.Get("Content-Type"))
	}
	second := do("GET", "", map[string]string{"Accept": "text/event-stream", HeaderConnectionID: cid})
	if second.StatusCode != http.StatusConflict {
		t.Errorf("a second GET of one stream: %s, want 409", second.Status)
	}
	second.Body.Close()
	br := bufio.NewReader(sse.Body)
	line, _ := br.ReadString('\n')
	if line != "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":\"s1\"}}\n" {
		t.Errorf("stream: %q", line)
	}
	del := do("DELETE", "", map[string]string{HeaderConnectionID: cid})
	del.Body.Close()
	if del.StatusCode != http.StatusAccepted {
		t.Errorf("DELETE: %s", del.Status)
	}
	// The stream ends with the connection.
	if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("stream after DELETE: %v", err)
	}
	sse.Body.Close()
	waitIdle(t, s)
}

func TestGuard(t *testing.T) {
	s, u := newTestServer(t, &Guard{Token: "s3cret", Loopback: true})
	for _, tc := range []struct {
		name string
		h    map[string]string
		want int
	}{
		{"no token", nil, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"wrong scheme", map[string]string{"Authorization": "Basic s3cret"}, 401},
		{"rebinding Host", map[string]string{"Authorization": "Bearer s3cret", "Host": "evil.example:80"}, 403},
		{"foreign Origin", map[string]string{"Authorization": "Bearer s3cret", "Origin": "https://evil.example"}, 403},
		{"null Origin", map[string]string{"Authorization": "Bearer s3cret", "Origin": "null"}, 403},
		{"good", map[string]string{"Authorization": "Bearer s3cret", "Origin": "http://localhost:3000"}, 200},
	} {
		req, _ := http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		resp := doWith(t, req, tc.h)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
		if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
	}
	// Only the good request made a connection; end it.
	s.Close()
	if n := s.Active(); n != 0 {
		t.Errorf("%d connections after Close", n)
	}

	// A WebSocket needs the token too.
	_, u2 := newTestServer(t, &Guard{Token: "s3cret", Loopback: true})
	if _, err := Dial(context.Background(), "ws"+strings.TrimPrefix(u2, "http"), DialOptions{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("WebSocket without a token: %v, want a 401", err)
	}
	c, err := Dial(context.Background(), "ws"+strings.TrimPrefix(u2, "http"), DialOptions{Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	if err != nil {
		t.Fatalf("WebSocket with the token: %v", err)
	}
	c.Close()

	// A WebSocket's Origin is judged by the Guard's rule, as a POST's is:
	// another loopback port passes, a foreign Origin does not; without a
	// Guard, the WebSocket library's own check (Origin's host is Host's).
	_, bare := newTestServer(t, nil)
	for _, tc := range []struct {
		url, origin string
		ok          bool
	}{
		{u2, "http://localhost:3000", true},
		{u2, "https://evil.example", false},
		{bare, "http://localhost:3000", false},
	} {
		h := http.Header{"Authorization": {"Bearer s3cret"}, "Origin": {tc.origin}}
		c, err := Dial(context.Background(), "ws"+strings.TrimPrefix(tc.url, "http"), DialOptions{Header: h})
		if (err == nil) != tc.ok {
			t.Errorf("WebSocket from Origin %s (Guard: %v): %v, want accepted %v", tc.origin, tc.url == u2, err, tc.ok)
		}
		if err == nil {
			c.Close()
		}
	}
}

// TestGuardRefusesWithoutBody: a refused request is answered at once, even
// when its body never comes. net/http reads a small unread body before it
// answers, to keep the connection alive; a client without the token that
// sends its headers and never its body would otherwise be left unanswered
// and hold its TCP connection for as long as it likes, which anyone who can
// reach the port could repeat until serve runs out of descriptors.
func TestGuardRefusesWithoutBody(t *testing.T) {
	_, u := newTestServer(t, &Guard{Token: "s3cret", Loopback: true})
	addr := strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/acp")
	for _, tc := range []struct {
		name, header string
		want         string
	}{
		{"no token", "", "401"},
		{"wrong token", "Authorization: Bearer nope\r\n", "401"},
		{"foreign Origin", "Authorization: Bearer s3cret\r\nOrigin: https://evil.example\r\n", "403"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /acp HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr, tc.header)
		// The deadline only bounds a failure: the answer comes at once.
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		status, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(status, " "+tc.want+" ") {
			t.Errorf("%s, its body not sent: %q, %v; want %s at once", tc.name, status, err, tc.want)
		}
	}
}

// TestDialRefused: a server's refusal of the credentials is a
// RefusedError, over a WebSocket and at a Streamable HTTP initialize alike,
// that says plainly what was refused and whether a token was sent, and
// never holds a header's value, even where the server echoes it.
func TestDialRefused(t *testing.T) {
	_, u := newTestServer(t, &Guard{Token: "s3cret-token", Loopback: true})
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden: "+strings.TrimSpace(r.Header.Get("Authorization")+" \x1b[31mhas no access\nsecond line"), http.StatusForbidden)
	}))
	defer echo.Close()
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	ws := "ws" + strings.TrimPrefix(u, "http")
	for _, tc := range []struct {
		name, url string
		opts      DialOptions
		want      string
	}{
		{"ws, no token", ws, DialOptions{}, ws + ": the server wants a token (401 Unauthorized)"},
		{"ws, wrong token", ws, DialOptions{Header: bearer("wrong-token")}, ws + ": the server refused the token (401 Unauthorized)"},
		{"http, no token", u, DialOptions{StreamableHTTP: true}, "initialize: " + u + ": the server wants a token (401 Unauthorized)"},
		{"http, wrong token", u, DialOptions{StreamableHTTP: true, Header: bearer("wrong-token")}, "initialize: " + u + ": the server refused the token (401 Unauthorized)"},
		{"ws, 403 echoing the token", "ws" + strings.TrimPrefix(echo.URL, "http"), DialOptions{Header: bearer("wrong-token")},
			"ws" + strings.TrimPrefix(echo.URL, "http") + ": the server refused the token or the request (403 Forbidden: forbidden: Bearer [redacted] [31mhas no access)"},
		{"http, 403 without a token", echo.URL, DialOptions{StreamableHTTP: true}, "initialize: " + echo.URL + ": the server refused the request (403 Forbidden: forbidden: [31mhas no access)"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := Dial(ctx, tc.url, tc.opts)
		if err == nil { // Streamable HTTP: refused at initialize
			err = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
			c.Close()
		}
		cancel()
		refused, ok := errors.AsType[*RefusedError](err)
		if !ok || err.Error() != tc.want || refused.Token != (tc.opts.Header != nil) {
			t.Errorf("%s: %v (%T)\nwant %s", tc.name, err, err, tc.want)
		}
	}
}

// TestDialErrorsHideQuery: a failure to reach a server, over a WebSocket or
// Streamable HTTP, names the URL without its query or fragment, which may
// hold a token: net/http's errors name the request's URL with them.
func TestDialErrorsHideQuery(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "://" + ln.Addr().String() + "/acp?token=s3cret#s3cretfrag"
	ln.Close() // nothing listens there now
	for _, tc := range []struct {
		url  string
		opts DialOptions
	}{
		{"ws" + u, DialOptions{}},
		{"http" + u, DialOptions{}},
		{"http" + u, DialOptions{StreamableHTTP: true}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := Dial(ctx, tc.url, tc.opts)
		if err == nil { // Streamable HTTP: fails at initialize
			err = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
			c.Close()
		}
		cancel()
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "/acp") {
			t.Errorf("Dial(%s, StreamableHTTP: %v): %v, want an error naming the URL without its query", tc.url, tc.opts.StreamableHTTP, err)
		}
	}
}

// TestStoppingRefusesNew: a connection opened while the server stops is
// refused with 503 saying that it is stopping, not that it has too many.
func TestStoppingRefusesNew(t *testing.T) {
	release := make(chan struct{})
	s := &Server{Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
		<-release // a chain still draining
	}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	post(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil).Body.Close()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	for deadline := time.Now().Add(10 * time.Second); s.ctx.Err() == nil; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the server never began to stop")
		}
	}
	r := post(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	if body := readAll(r); r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "the server is stopping") {
		t.Errorf("initialize while the server stops: %s %q, want 503 saying it is stopping", r.Status, body)
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestMaxConnections: a connection beyond the bound is refused with 503,
// over either profile, and a slot frees when a connection ends.
func TestMaxConnections(t *testing.T) {
	s, u := newTestServer(t, nil)
	s.MaxConnections = 1
	ctx := context.Background()
	first, err := Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), DialOptions{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a second WebSocket: %v, want 503", err)
	}
	h, _ := Dial(ctx, u, DialOptions{StreamableHTTP: true})
	if err := h.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a second connection over HTTP: %v, want 503", err)
	}
	first.Close()
	waitIdle(t, s)
	again, err := Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), DialOptions{})
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	again.Close()
}

// TestShutdown: Shutdown cancels each Serve's context but leaves its
// connection open, so that what it sends as it winds down reaches the
// client, over either transport; it returns once every Serve has. Given a
// context already done, it closes the connections of a Serve that does not
// wind down, and reports that.
func TestShutdown(t *testing.T) {
	for _, scheme := range []string{"ws", "http"} {
		t.Run(scheme, func(t *testing.T) {
			s := &Server{Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
				msg, err := c.Read(ctx)
				if err != nil {
					return
				}
				// Writes outlive ctx, as serve's chains' do (transport.Lines
				// under context.WithoutCancel): a WebSocket write under ctx
				// can have the library close the connection once ctx ends.
				out := context.WithoutCancel(ctx)
				c.Write(out, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
				<-ctx.Done()
				c.Write(out, []byte(`{"jsonrpc":"2.0","method":"bye","params":{"why":"`+context.Cause(ctx).Error()+`"}}`))
			}}
			ts := httptest.NewServer(s)
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := dialAndInitialize(t, ctx, scheme, ts.URL)
			defer c.Close()
			stopped := make(chan error, 1)
			go func() { stopped <- s.Shutdown(ctx) }()
			if msg, err := c.Read(ctx); err != nil || !strings.Contains(string(msg), `"bye","params":{"why":"the server is stopping"}`) {
				t.Errorf("after Shutdown the client read %s, %v; want what Serve sent as it ended, and why", msg, err)
			}
			if msg, err := c.Read(ctx); err == nil { // the end, which answers a WebSocket's close
				t.Errorf("after Serve returned the client read %s", msg)
			}
			if err := <-stopped; err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	t.Run("stuck", func(t *testing.T) {
		s := &Server{Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
			msg, _ := c.Read(ctx)
			c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
			c.Read(context.Background()) // until the connection is closed
		}}
		ts := httptest.NewServer(s)
		defer ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := dialAndInitialize(t, ctx, "ws", ts.URL)
		defer c.Close()
		done, stop := context.WithCancel(context.Background())
		stop()
		if err := s.Shutdown(done); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown of a stuck Serve: %v, want its context's error", err)
		}
		if _, err := c.Read(ctx); err == nil {
			t.Error("the stuck Serve's connection is still open")
		}
	})
}

// dialAndInitialize opens a connection to the server at u and has its
// initialize answered.
func dialAndInitialize(t *testing.T, ctx context.Context, scheme, u string) Conn {
	t.Helper()
	c, err := Dial(ctx, scheme+strings.TrimPrefix(u, "http")+"/acp", DialOptions{StreamableHTTP: scheme == "http"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHTTPBackpressure: over Streamable HTTP, a chain that writes more than
// MaxBuffered before its client reads waits for the client instead of
// losing the connection, as on stdio; the client then gets every message.
// A client that never reads has its connection closed after StallTimeout,
// and the write waiting for it fails.
func TestHTTPBackpressure(t *testing.T) {
	const size, n = 64 << 10, 40 // 2.5 MiB, through a bound of 1 MiB
	payload := strings.Repeat("x", size)
	for _, reads := range []bool{true, false} {
		t.Run(fmt.Sprintf("reads=%v", reads), func(t *testing.T) {
			failed := make(chan error, 1)
			stall := time.Minute
			if !reads {
				stall = 100 * time.Millisecond
			}
			s := &Server{MaxBuffered: 1 << 20, StallTimeout: stall, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
				for {
					msg, err := c.Read(ctx)
					if err != nil {
						return
					}
					id := string(wire.Member(msg, "id"))
					if !strings.Contains(string(msg), `"flood"`) {
						c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`))
						continue
					}
					for i := range n {
						if err := c.Write(ctx, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"x/update","params":{"i":%d,"t":"%s"}}`, i, payload))); err != nil {
							failed <- err
							return
						}
					}
					c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`))
				}
			}}
			ts := httptest.NewServer(s)
			defer func() { s.Close(); ts.Close() }()
			post := poster(t, http.DefaultClient, ts.URL)
			h := http.Header{"Content-Type": {"application/json"}}
			h.Set(HeaderConnectionID, post(h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`).Header.Get(HeaderConnectionID))
			post(h, `{"jsonrpc":"2.0","id":2,"method":"flood","params":{}}`)
			// With no stream open, the chain fills the bound: wait until a
			// write is over it (or, as before, closed the connection).
			for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
				s.mu.Lock()
				hc := s.http[h.Get(HeaderConnectionID)]
				s.mu.Unlock()
				if hc == nil {
					break
				}
				hc.mu.Lock()
				over := hc.buffered > s.MaxBuffered
				hc.mu.Unlock()
				if over {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the chain never filled the bound")
				}
			}
			if !reads {
				if err := <-failed; !errors.Is(err, ErrClosed) {
					t.Errorf("the write to a client that never reads: %v, want ErrClosed", err)
				}
				return
			}
			get, _ := http.NewRequest("GET", ts.URL, nil)
			get.Header = http.Header{"Accept": {"text/event-stream"}, HeaderConnectionID: h[HeaderConnectionID]}
			resp, err := http.DefaultClient.Do(get)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 2*size)
			for got := 0; ; {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("after %d of %d updates: %v", got, n, err)
				}
				if strings.Contains(line, `"x/update"`) {
					got++
				}
				if strings.Contains(line, `"id":2`) {
					if got != n {
						t.Errorf("the answer came after %d of %d updates", got, n)
					}
					break
				}
			}
		})
	}
}

// TestUnreadStreamEnds: once its connection has ended, a stream whose
// client reads nothing of it for StallTimeout ends, over HTTP/1.1 and
// HTTP/2 alike, rather than hold its GET, and all that is queued on it,
// for as long as the client keeps its TCP connection open: over HTTP/2 a
// client keeps a connection alive while it reads none of a stream, and
// could pin a connection's worth of messages with each stream it leaves
// unread after the connection ends (for not reading, or by DELETE).
func TestUnreadStreamEnds(t *testing.T) {
	const size, n = 64 << 10, 160 // 10 MiB, past the client's buffers
	payload := strings.Repeat("x", size)
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			ended := make(chan string, 1)
			s := &Server{MaxBuffered: 1 << 20, StallTimeout: 100 * time.Millisecond, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
				for {
					msg, err := c.Read(ctx)
					if err != nil {
						return
					}
					c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
					if !strings.Contains(string(msg), `"flood"`) {
						continue
					}
					for i := range n {
						if c.Write(ctx, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"x/update","params":{"sessionId":"s","i":%d,"t":"%s"}}`, i, payload))) != nil {
							return
						}
					}
				}
			}}
			s.streamEnded = func(session string) { ended <- session }
			ts := httptest.NewUnstartedServer(s)
			client := &http.Client{}
			if h2 {
				ts.Config.Protocols = new(http.Protocols)
				ts.Config.Protocols.SetUnencryptedHTTP2(true)
				tr := &http.Transport{Protocols: new(http.Protocols)}
				tr.Protocols.SetUnencryptedHTTP2(true)
				client.Transport = tr
			}
			ts.Start()
			defer func() { s.Close(); ts.Close() }()
			post := poster(t, client, ts.URL)
			h := http.Header{"Content-Type": {"application/json"}}
			h.Set(HeaderConnectionID, post(h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`).Header.Get(HeaderConnectionID))
			get, _ := http.NewRequest("GET", ts.URL, nil)
			get.Header = http.Header{"Accept": {"text/event-stream"}, HeaderConnectionID: h[HeaderConnectionID], HeaderSessionID: {"s"}}
			resp, err := client.Do(get)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close() // never read
			h.Set(HeaderSessionID, "s")
			post(h, `{"jsonrpc":"2.0","id":2,"method":"flood","params":{"sessionId":"s"}}`)
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatalf("the unread stream still runs 10s after its connection was taken for gone (connections served: %d)", s.Active())
			}
		})
	}
}

// poster returns a function that POSTs body with the headers h to url by
// client, and returns the response, its body closed.
func poster(t *testing.T, client *http.Client, url string) func(h http.Header, body string) *http.Response {
	return func(h http.Header, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header = h
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
}

// TestHTTPStatusErrorsRedact: a Streamable HTTP server (or a proxy before
// it) whose error page echoes the request's Authorization has the token
// left out of the error, at initialize and in a request's failed answer,
// which reach the log and the editor: only 401 and 403 were redacted.
func TestHTTPStatusErrorsRedact(t *testing.T) {
	const token = "s3cret-token-0123"
	var initOK atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.Header.Get(HeaderConnectionID) == "" && initOK.Load():
			w.Header().Set(HeaderConnectionID, "c1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
		default:
			http.Error(w, "bad gateway: "+r.Header.Get("Authorization"), http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	opts := DialOptions{StreamableHTTP: true, Header: http.Header{"Authorization": {"Bearer " + token}}}
	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := Dial(ctx, srv.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Write(ctx, initialize)
	c.Close()
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "502") {
		t.Errorf("initialize: %v, want a 502 without the token", err)
	}

	initOK.Store(true)
	if c, err = Dial(ctx, srv.URL, opts); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(ctx, initialize); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); err != nil { // initialize's answer
		t.Fatal(err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	answer, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(answer), token) || !strings.Contains(string(answer), "502") {
		t.Errorf("session/new answered %s, want a 502 without the token", answer)
	}
}

// TestGuardLogBounded: what a refused peer sent in Host and Origin is
// logged cut short, so that a peer without the token cannot have each of
// its requests write a header's worth (up to a megabyte) into the log.
func TestGuardLogBounded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	_, u := newTestServer(t, &Guard{Token: "s3cret", Loopback: true, Logger: zap.New(core)})
	long := strings.Repeat("a", 64<<10)
	for _, h := range []map[string]string{
		{"Host": long + ".example"},
		{"Origin": "http://" + long + ".example"},
	} {
		req, _ := http.NewRequest("GET", u, nil)
		if resp := doWith(t, req, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%v...: %s, want 403", h, resp.Status)
		}
	}
	entries := logs.FilterMessage("refused request").All()
	if len(entries) != 2 {
		t.Fatalf("%d refusals logged, want 2", len(entries))
	}
	for _, e := range entries {
		for k, v := range e.ContextMap() {
			if s, _ := v.(string); len(s) > 512 {
				t.Errorf("refusal logged %s of %d bytes", k, len(s))
			}
		}
	}
}

// TestUpgradeLogBounded: once a request is admitted, what its headers
// said is logged cut short too: the WebSocket library's error for a
// failed upgrade, which quotes the header it refused, and the User-Agent
// of a connection opened.
func TestUpgradeLogBounded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s, u := newTestServer(t, &Guard{Token: "s3cret", Loopback: true})
	s.Logger = zap.New(core) // before any request
	long := strings.Repeat("a", 64<<10)
	for _, h := range []map[string]string{
		{"Sec-WebSocket-Version": long},
		{"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": long},
		{"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "User-Agent": long},
	} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		doWith(t, req, h)
	}
	// A handler may log after its answer is on the way.
	for deadline := time.Now().Add(5 * time.Second); logs.FilterMessage("websocket upgrade failed").Len() < 2 ||
		logs.FilterMessage("connection opened").Len() < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("want 2 failed upgrades and a connection opened logged, got:\n%v", logs.All())
		}
		time.Sleep(time.Millisecond)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s, _ := v.(string); len(s) > 512 {
				t.Errorf("%q logged %s of %d bytes", e.Message, k, len(s))
			}
		}
	}
}

// TestReadRedactedNoPartialValue: a value the read stops inside of is
// not found whole, so it must not be pulled before the cut when an
// earlier value, redacted, shortens the text.
func TestReadRedactedNoPartialValue(t *testing.T) {
	token := strings.Repeat("k", 64)
	hdr := http.Header{"Authorization": {"Bearer " + token}}
	const n = 512
	longest := len(hdr.Get("Authorization"))
	// The second token begins past the cut, and is read only in part.
	body := token + strings.Repeat(".", n+longest-30-len(token)) + token
	got := readRedacted(strings.NewReader(body), n, hdr)
	if strings.Contains(got, token[:8]) {
		t.Errorf("readRedacted kept part of a value: %q", got)
	}
	// One the cut would split is still redacted whole.
	body = strings.Repeat(".", n-10) + token
	if got := readRedacted(strings.NewReader(body), n, hdr); strings.Contains(got, "kkkk") || !strings.Contains(got, "[redacted]") {
		t.Errorf("readRedacted of a value across the cut: %q", got)
	}
}

// doWith sends req with the headers h set ("Host" sets its Host), and
// returns its response, its body closed.
func doWith(t *testing.T, req *http.Request, h map[string]string) *http.Response {
	t.Helper()
	for k, v := range h {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
