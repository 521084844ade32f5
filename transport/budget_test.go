package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// rawPost sends a POST's headers and the start of its body, then closes
// its side of the TCP connection, and returns the answer's status. A
// server that reads the body before judging the headers fails to read it.
func rawPost(t *testing.T, u string, h map[string]string, length int, start string) int {
	t.Helper()
	addr := strings.TrimPrefix(strings.TrimSuffix(u, "/acp"), "http://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails, not a pass
	var b strings.Builder
	fmt.Fprintf(&b, "POST /acp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, length)
	for k, v := range h {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + start)
	if _, err := nc.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	_ = nc.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("no answer to a POST whose body never came: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPostJudgedBeforeBody: a POST for an unknown connection, or one whose
// Content-Length exceeds MaxMessageBytes, is answered from its headers,
// without its body (here never sent whole).
func TestPostJudgedBeforeBody(t *testing.T) {
	s, u := newTestServer(t, nil)
	s.MaxMessageBytes = 1 << 20
	if got := rawPost(t, u, map[string]string{HeaderConnectionID: "nope"}, 1000, "{"); got != http.StatusNotFound {
		t.Errorf("unknown connection: status %d, want 404", got)
	}
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	if got := rawPost(t, u, map[string]string{HeaderConnectionID: cid}, 2<<20, "{"); got != http.StatusRequestEntityTooLarge {
		t.Errorf("Content-Length beyond the bound: status %d, want 413", got)
	}
}

// TestPendingBodiesBounded: the bytes of POST bodies a chain has not taken
// are bounded per connection and over all of them: a POST beyond either
// waits, its body unread, until the chain reads or the connection that
// holds them ends.
func TestPendingBodiesBounded(t *testing.T) {
	// A chain that answers initialize, then reads one message per gate.
	gate := make(chan struct{})
	s := &Server{MaxMessageBytes: 1000, MaxPendingBytes: 3000, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
		for {
			select {
			case <-gate:
				if _, err := c.Read(ctx); err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}}
	waiting := make(chan struct{}, 4)
	s.bodyWaits = func() { waiting <- struct{}{} }
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	connect := func() string {
		resp := post(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
		resp.Body.Close()
		return resp.Header.Get(HeaderConnectionID)
	}
	// 480 bytes each: four fit a connection's 2000, the fifth does not.
	note := fmt.Sprintf(`{"jsonrpc":"2.0","method":"x/note","params":{"pad":%q}}`, strings.Repeat("x", 480-55))
	if len(note) != 480 {
		t.Fatalf("note is %d bytes", len(note))
	}
	send := func(cid string) int {
		resp := post(t, ts.URL, cid, note, nil)
		resp.Body.Close()
		return resp.StatusCode
	}
	// sendBeyond sends a POST that must wait, then lets free run and
	// checks the POST then goes through.
	sendBeyond := func(what, cid string, free func()) {
		t.Helper()
		done := make(chan int, 1)
		go func() { done <- send(cid) }()
		select {
		case <-waiting:
		case got := <-done:
			t.Fatalf("%s: taken (status %d) while there was no room for it", what, got)
		}
		free()
		if got := <-done; got != http.StatusAccepted {
			t.Fatalf("%s, once there is room: status %d, want 202", what, got)
		}
	}
	a, b := connect(), connect()
	for i := range 4 {
		if got := send(a); got != http.StatusAccepted {
			t.Fatalf("a's POST %d: status %d, want 202", i, got)
		}
	}
	sendBeyond("a's POST beyond its connection's bound", a, func() { gate <- struct{}{} })
	// 1920 held by a; b's second brings it to 2880, its third would pass 3000.
	for i := range 2 {
		if got := send(b); got != http.StatusAccepted {
			t.Fatalf("b's POST %d: status %d, want 202", i, got)
		}
	}
	sendBeyond("b's POST beyond the server's bound", b, func() { del(t, ts.URL, a) })
}

// TestIDLengthBound: a session id (Acp-Session-Id) or a request id longer
// than MaxIDLength is refused with 400, as the TypeScript SDK's server
// refuses one: the connection would keep it while the session's stream or
// the answer is pending. One of MaxIDLength is accepted.
func TestIDLengthBound(t *testing.T) {
	_, u := newTestServer(t, nil)
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	long, ok := strings.Repeat("s", MaxIDLength+1), strings.Repeat("s", MaxIDLength)
	prompt := func(id, session string) int {
		resp := post(t, u, cid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"x/ask","params":{}}`, id),
			map[string]string{HeaderSessionID: session})
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := prompt("2", long); got != http.StatusBadRequest {
		t.Errorf("POST with a long %s: status %d, want 400", HeaderSessionID, got)
	}
	if got := prompt(`"`+long[2:]+`"`, "s1"); got != http.StatusBadRequest {
		t.Errorf("POST with a long request id: status %d, want 400", got)
	}
	if got := prompt(`"`+ok[2:]+`"`, ok); got != http.StatusAccepted {
		t.Errorf("POST with ids of %d bytes: status %d, want 202", MaxIDLength, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header = http.Header{"Accept": {"text/event-stream"}, HeaderConnectionID: {cid}, HeaderSessionID: {long}}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET with a long %s: status %d, want 400", HeaderSessionID, resp.StatusCode)
	}
}

// TestUnendingBodyTimesOut: a chunked body that never ends holds
// MaxMessageBytes of the server's budget while it is read, so that every
// POST behind it would wait for ever; it is answered 408 once BodyTimeout
// has passed, and a POST behind it goes through.
func TestUnendingBodyTimesOut(t *testing.T) {
	s, u := newTestServer(t, nil)
	s.MaxMessageBytes, s.MaxPendingBytes, s.BodyTimeout = 1000, 1000, 300*time.Millisecond
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)

	addr := strings.TrimPrefix(strings.TrimSuffix(u, "/acp"), "http://")
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails, not a pass
	fmt.Fprintf(nc, "POST /acp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", addr, HeaderConnectionID, cid)
	done := make(chan int, 1)
	go func() {
		resp := post(t, u, cid, `{"jsonrpc":"2.0","method":"x/note","params":{}}`, nil)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("no answer to a body that never ends: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("unending body: status %d, want 408", resp.StatusCode)
	}
	if got := <-done; got != http.StatusAccepted {
		t.Errorf("a POST behind it: status %d, want 202", got)
	}
}

// TestBodyOnlyForPost: a request other than a POST that announces a body
// it does not send is answered at once, whatever else is wrong with it
// (here a GET without Accept, a PUT); net/http would otherwise wait for the
// body before sending the answer, for ever.
func TestBodyOnlyForPost(t *testing.T) {
	_, u := newTestServer(t, nil)
	addr := strings.TrimPrefix(strings.TrimSuffix(u, "/acp"), "http://")
	for _, method := range []string{"GET", "PUT"} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })                     // before the server's, which waits for it
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang fails, not a pass
		fmt.Fprintf(nc, "%s /acp HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n", method, addr)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("%s with a body never sent: no answer: %v", method, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s with a body: status %d, want 400", method, resp.StatusCode)
		}
	}
}
