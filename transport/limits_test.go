package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// openStream GETs a stream of connection cid (session "" for the
// connection's own) and returns its reader once the server has accepted it.
func openStream(t *testing.T, ctx context.Context, u, cid, session string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(HeaderConnectionID, cid)
	if session != "" {
		req.Header.Set(HeaderSessionID, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %q: %s", session, resp.Status)
	}
	return resp, bufio.NewReader(resp.Body)
}

// event reads one SSE event's data line.
func event(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			return strings.TrimSpace(line[6:])
		}
	}
}

// TestSessionStreamBound: a connection holds messages for at most
// MaxSessionStreams sessions whose streams nobody receives. A client that
// prompts one more such session is refused with 400 saying why; once it
// reads a session's stream, the session no longer counts. GETs for sessions
// that come and go leave nothing behind.
func TestSessionStreamBound(t *testing.T) {
	ended := make(chan struct{})
	s, u := newTestServer(t, nil)
	s.MaxSessionStreams = 2
	var once sync.Once
	s.streamEnded = func(session string) {
		if session == "a" {
			once.Do(func() { close(ended) })
		}
	}
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	prompt := func(id int, session string) *http.Response {
		return post(t, u, cid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q}}`, id, session),
			map[string]string{HeaderSessionID: session})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Streams opened and closed for many sessions cost nothing after.
	for i := range 10 {
		sctx, scancel := context.WithCancel(ctx)
		resp, _ := openStream(t, sctx, u, cid, fmt.Sprintf("visit-%d", i))
		scancel()
		resp.Body.Close()
	}
	// Two sessions' answers may wait for their streams; a third may not.
	for i, sid := range []string{"a", "b"} {
		if resp := prompt(10+i, sid); resp.StatusCode != 202 {
			t.Fatalf("prompt for %s: %s %s", sid, resp.Status, readAll(resp))
		}
	}
	third := prompt(12, "c")
	body := readAll(third)
	if third.StatusCode != 400 || !strings.Contains(body, "2 sessions whose streams are not open") {
		t.Errorf("a third unopened session: %s %q, want 400 saying why", third.Status, body)
	}
	// Once a's stream has been read and closed, a no longer counts.
	resp, br := openStream(t, ctx, u, cid, "a")
	if ev := event(t, br) + event(t, br); !strings.Contains(ev, `"id":10`) {
		t.Fatalf("a's stream: %s", ev)
	}
	resp.Body.Close()
	select {
	case <-ended: // the server has seen that GET end
	case <-ctx.Done():
		t.Fatal("the server never saw a's stream end")
	}
	if r := prompt(13, "c"); r.StatusCode != 202 {
		t.Fatalf("a prompt for c after a's stream was read and closed: %s %s", r.Status, readAll(r))
	} else {
		r.Body.Close()
	}
	del(t, u, cid)
	waitIdle(t, s)
}

// TestSessionStreamBoundOutput: a chain that writes for one more session
// than may buffer, to a client that opens none of their streams, has its
// connection closed, which ends the connection's stream.
func TestSessionStreamBoundOutput(t *testing.T) {
	s := &Server{MaxSessionStreams: 3, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		if _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`))
		for i := 0; ; i++ {
			if err := c.Write(ctx, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s%d"}}`, i))); err != nil {
				return
			}
		}
	}}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	u := ts.URL
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	if init.StatusCode != 200 {
		t.Fatalf("initialize: %s", init.Status)
	}
	waitIdle(t, s)
	resp := post(t, u, init.Header.Get(HeaderConnectionID), `{"jsonrpc":"2.0","method":"x/note"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a POST to the closed connection: %s, want 404", resp.Status)
	}
}

// TestIdleTimeout: an HTTP connection whose client has no request in
// flight and no stream open for IdleTimeout is ended (its client vanished
// without DELETE); an initialize waiting for a slow chain is in flight, so
// not idle.
func TestIdleTimeout(t *testing.T) {
	checks := make(chan struct{}, 1)
	s := &Server{IdleTimeout: 40 * time.Millisecond, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		if _, err := c.Read(ctx); err != nil {
			return
		}
		// A chain slow to start: the initialize stays in flight across
		// idle checks made after the idle timeout had passed.
		start := time.Now()
		for n := 0; n < 3 || time.Since(start) <= 2*40*time.Millisecond; n++ {
			<-checks
		}
		_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`))
		_, _ = c.Read(ctx) // until the connection ends
	}}
	s.idleChecked = func() {
		select {
		case checks <- struct{}{}:
		default:
		}
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	init := post(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	if body := readAll(init); init.StatusCode != 200 {
		t.Fatalf("a slow initialize: %s %s", init.Status, body)
	}
	// Nobody opens the connection's stream: the connection ends.
	waitIdle(t, s)
}

// TestInitializeAnsweredThenEnded: a chain that answers initialize and ends
// at once: the POST still gets the answer, whichever the server notices
// first, and the connection is gone afterwards.
func TestInitializeAnsweredThenEnded(t *testing.T) {
	s := &Server{Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		if _, err := c.Read(ctx); err != nil {
			return
		}
		_ = c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`))
	}}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	for range 20 {
		init := post(t, ts.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
		body := readAll(init)
		if init.StatusCode != 200 || !strings.Contains(body, `"protocolVersion":1`) {
			t.Fatalf("initialize: %s %s", init.Status, body)
		}
	}
}

// closer serves a Conn like an agent whose sessions close: session/close
// is answered (with an error for session "busy"), after the answer to a
// prompt still held for the session, and a prompt is answered after one
// update, or held until its session closes if it says "hold".
func closer(ctx context.Context, c Conn, _ ConnInfo) {
	held := map[string]string{} // session -> the id of its held prompt
	for {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		m, err := wire.Parse(msg)
		if err != nil || m.ID == nil {
			continue
		}
		sid := wire.Member(m.Params, "sessionId")
		write := func(s string) { _ = c.Write(ctx, []byte(s)) }
		switch m.Method {
		case "initialize":
			write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":1}}`)
		case "session/prompt":
			if string(wire.Member(m.Params, "text")) == `"hold"` {
				held[string(sid)] = string(m.ID)
				continue
			}
			write(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + string(sid) + `}}`)
			write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"stopReason":"end_turn"}}`)
		case "session/close":
			if string(sid) == `"busy"` {
				write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32603,"message":"busy"}}`)
				continue
			}
			write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{}}`)
			if id, ok := held[string(sid)]; ok {
				delete(held, string(sid))
				write(`{"jsonrpc":"2.0","id":` + id + `,"result":{"stopReason":"cancelled"}}`)
			}
		}
	}
}

// TestSessionStreamEndsWithSession: once the answer to a session's
// session/close has gone out on its stream, with the answers still owed on
// it, the stream ends, so that a client that opens and closes sessions all
// day does not hold a GET (a TCP connection, over HTTP/1.1) and the
// server a goroutine for each. A close the agent refuses leaves the stream
// open; one answered before the stream is opened ends the stream once it
// has been read.
func TestSessionStreamEndsWithSession(t *testing.T) {
	s := &Server{Serve: closer}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); ts.Close() })
	u := ts.URL
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	send := func(id int, method, session, text string) {
		t.Helper()
		resp := post(t, u, cid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"sessionId":%q,"text":%q}}`, id, method, session, text),
			map[string]string{HeaderSessionID: session})
		if body := readAll(resp); resp.StatusCode != 202 {
			t.Fatalf("%s for %s: %s %s", method, session, resp.Status, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ended := func(br *bufio.Reader, session string) {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err == io.EOF && line == "" {
				return
			}
			if err != nil || line != "\n" { // an event's blank line
				t.Fatalf("%s's stream after its session closed: %q, %v; want its end", session, line, err)
			}
		}
	}

	resp, br := openStream(t, ctx, u, cid, "s1")
	defer resp.Body.Close()
	send(2, "session/prompt", "s1", "hold")
	send(3, "session/close", "s1", "")
	if ev := event(t, br); !strings.Contains(ev, `"id":3,"result":{}`) {
		t.Fatalf("s1's stream: %s, want the close's answer", ev)
	}
	if ev := event(t, br); !strings.Contains(ev, `"id":2,"result":{"stopReason":"cancelled"}`) {
		t.Fatalf("s1's stream: %s, want the held prompt's answer", ev)
	}
	ended(br, "s1")

	busy, bbr := openStream(t, ctx, u, cid, "busy")
	defer busy.Body.Close()
	send(4, "session/close", "busy", "")
	if ev := event(t, bbr); !strings.Contains(ev, `"id":4,"error"`) {
		t.Fatalf("busy's stream: %s, want the close's error", ev)
	}
	send(5, "session/prompt", "busy", "")
	if ev := event(t, bbr) + event(t, bbr); !strings.Contains(ev, `"id":5,"result"`) {
		t.Fatalf("busy's stream after a refused close: %s, want the prompt's update and answer", ev)
	}

	send(6, "session/close", "s2", "")
	late, lbr := openStream(t, ctx, u, cid, "s2")
	defer late.Body.Close()
	if ev := event(t, lbr); !strings.Contains(ev, `"id":6,"result":{}`) {
		t.Fatalf("s2's stream: %s, want the close's answer", ev)
	}
	ended(lbr, "s2")
	del(t, u, cid)
	waitIdle(t, s)
}

// TestClosedSession: the code of a close's error is read as the number
// it is, as the TypeScript SDK compares it, however it is spelled.
func TestClosedSession(t *testing.T) {
	for _, tt := range []struct {
		e    string
		want bool
	}{
		{``, true}, // a success
		{`{"code":-32002,"message":"no such session"}`, true},
		{`{"code":-32002.0,"message":"x"}`, true},
		{`{"code":-3.2002e4}`, true},
		{`{"code":-32002e0}`, true},
		{`{"code":-320020E-1}`, true},
		{`{"message":"x", "code" : -32002 }`, true},
		{`{"c\u006fde":-32002}`, true},
		{`{"code":-32002.5}`, false},
		{`{"code":32002}`, false},
		{`{"code":"-32002"}`, false},
		{`{"code":-32603,"message":"busy"}`, false},
		{`{"code":-32002,"code":-32603}`, false}, // the last of repeated names counts
		{`{"message":"x"}`, false},
		{`{"data":{"code":-32002}}`, false},
	} {
		var e json.RawMessage
		if tt.e != "" {
			e = json.RawMessage(tt.e)
		}
		if got := closedSession(e); got != tt.want {
			t.Errorf("closedSession(%s) = %v, want %v", tt.e, got, tt.want)
		}
	}
}

// TestClientLetsGoOfClosedSession: the client ends its GET of a session's
// stream once the answer to the session's session/close has come on it,
// even from a server that would hold the stream open; a close the agent
// refuses leaves the stream as it was.
func TestClientLetsGoOfClosedSession(t *testing.T) {
	ended := make(chan string, 10)
	rec := &recorder{}
	s := &Server{Serve: closer, refuseUpgrade: true, keepClosedStreams: true}
	s.streamEnded = func(session string) { ended <- session }
	rec.next = s
	ts := httptest.NewServer(rec)
	t.Cleanup(func() { s.Close(); ts.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.URL, DialOptions{StreamableHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string, answers int) {
		t.Helper()
		if err := c.Write(ctx, []byte(msg)); err != nil {
			t.Fatalf("write %s: %v", msg, err)
		}
		for range answers {
			if _, err := c.Read(ctx); err != nil {
				t.Fatalf("read after %s: %v", msg, err)
			}
		}
	}
	roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 1)
	for _, session := range []string{"s1", "busy"} {
		roundTrip(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+session+`"}}`, 2)
		roundTrip(`{"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"`+session+`"}}`, 1)
	}
	select {
	case session := <-ended:
		if session != "s1" {
			t.Fatalf("the stream of %q ended, want s1's", session)
		}
	case <-ctx.Done():
		t.Fatal("the client still holds the stream of a closed session")
	}
	roundTrip(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"busy"}}`, 2)
	gets := 0
	for _, r := range rec.all() {
		if r.method == "GET" && r.session == "busy" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("the client opened busy's stream %d times, want once: a refused close left it open", gets)
	}
}

// TestAbandonedPostCountsNothing: a request whose POST its client gave up
// on while the chain was not reading (it timed out) never reached the
// chain, so no answer will come for it: it holds no place among the
// sessions a connection may buffer, and a later prompt for another session
// is not refused for it.
func TestAbandonedPostCountsNothing(t *testing.T) {
	gate := make(chan struct{})
	s := &Server{MaxSessionStreams: 2, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
		<-gate // busy: what the client sends waits
		for {
			if _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}}
	ts := httptest.NewServer(s)
	defer func() { s.Close(); ts.Close() }()
	u := ts.URL
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	hc := s.lookup(cid)
	// Fill what the connection takes before the chain reads it.
	for i := 0; i < cap(hc.in); i++ {
		post(t, u, cid, `{"jsonrpc":"2.0","method":"x/note","params":{}}`, nil).Body.Close()
	}
	for i, session := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q}}`, 10+i, session)))
		req.Header = http.Header{"Content-Type": {"application/json"}, HeaderConnectionID: {cid}, HeaderSessionID: {session}}
		gaveUp := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			gaveUp <- err
		}()
		// Give up once the POST waits for the chain.
		for deadline, waiting := time.Now().Add(10*time.Second), false; !waiting; runtime.Gosched() {
			hc.mu.Lock()
			waiting = hc.awaited[session] > 0
			hc.mu.Unlock()
			if time.Now().After(deadline) {
				t.Fatalf("the POST for %s never waited for the chain", session)
			}
		}
		cancel()
		if err := <-gaveUp; err == nil {
			t.Fatalf("the POST for %s was taken, not given up on", session)
		}
	}
	close(gate)
	r := post(t, u, cid, `{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{"sessionId":"c"}}`, map[string]string{HeaderSessionID: "c"})
	if body := readAll(r); r.StatusCode != http.StatusAccepted {
		t.Errorf("a prompt for c after the POSTs for a and b were given up on: %s %q, want 202", r.Status, body)
	}
	del(t, u, cid)
	waitIdle(t, s)
}

// TestClientStreamOpenedLate: a session's stream whose GET outlasts the
// Write that opened it (its context ended first) is read all the same once
// the server accepts it, which then takes it for read: what the server
// sends for the session arrives.
func TestClientStreamOpenedLate(t *testing.T) {
	arrived, release, notify := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	s := &Server{refuseUpgrade: true, Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(wire.Member(msg, "id"))+`,"result":{}}`))
		select {
		case <-notify:
		case <-ctx.Done():
			return
		}
		c.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}`))
		<-ctx.Done()
	}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get(HeaderSessionID) == "s1" {
			close(arrived) // the client opens it once
			<-release
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }); s.Close(); ts.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ts.URL, DialOptions{StreamableHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}

	wctx, wcancel := context.WithCancel(ctx)
	wrote := make(chan error, 1)
	go func() {
		wrote <- c.Write(wctx, []byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`))
	}()
	<-arrived
	wcancel()
	if err := <-wrote; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want its context's end", err)
	}
	releaseOnce.Do(func() { close(release) })
	close(notify)
	msg, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(msg), `"session/update"`) {
		t.Fatalf("Read = %s, %v; want the session's update, from the stream opened late", msg, err)
	}
}

// TestOpenStreamsBound: one connection holds at most MaxStreams GETs open,
// its own stream's and its sessions', whether or not it has those
// sessions: one more gets 409, which costs the SDK's client that session
// alone; a stream that ends makes room.
func TestOpenStreamsBound(t *testing.T) {
	s, u := newTestServer(t, nil)
	s.MaxStreams = 3
	ended := make(chan string, 8)
	s.streamEnded = func(session string) { ended <- session }
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var open []*http.Response
	for _, sid := range []string{"", "never-a", "never-b"} {
		resp, _ := openStream(t, ctx, u, cid, sid)
		open = append(open, resp)
	}
	get := func(session string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(HeaderConnectionID, cid)
		req.Header.Set(HeaderSessionID, session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			open = append(open, resp)
			return 200, ""
		}
		return resp.StatusCode, readAll(resp)
	}
	if code, body := get("never-c"); code != http.StatusConflict || !strings.Contains(body, "3 streams open") {
		t.Fatalf("a fourth stream: %d %q, want 409 saying why", code, body)
	}
	open[1].Body.Close()
	if got := <-ended; got != "never-a" {
		t.Fatalf("stream of %q ended, want never-a's", got)
	}
	if code, body := get("never-c"); code != 200 {
		t.Fatalf("a stream once another has ended: %d %q", code, body)
	}
	for _, resp := range open {
		resp.Body.Close()
	}
	del(t, u, cid)
	waitIdle(t, s)
}
