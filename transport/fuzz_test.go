package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// FuzzReadStream feeds a server's SSE stream to the client's parser: it
// must deliver each event's data as one line, or stop with an error, never
// panic or hang.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":\"s\"}}\n\n"))
	f.Add([]byte(": keepalive\n\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: x\nid: 3\n\n"))
	f.Add([]byte("data:" + string(bytes.Repeat([]byte("x"), 300)) + "\n\n"))
	f.Add([]byte("event: ping\ndata: {\"a\":1}\n\nevent:" + string(bytes.Repeat([]byte("y"), 300)) + "\ndata: 2\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := newHTTPClient("http://127.0.0.1:1/acp", DialOptions{MaxMessageBytes: 256, HTTPClient: http.DefaultClient})
		c.in = make(chan []byte, len(stream)+1) // never blocks
		_ = c.readStream(bytes.NewReader(stream), "")
		close(c.in)
		for msg := range c.in {
			if bytes.IndexByte(msg, '\n') >= 0 {
				t.Fatalf("a delivered message has a line break: %q", msg)
			}
		}
		c.fail(ErrClosed)
		c.wg.Wait()
	})
}

// FuzzPost sends arbitrary bodies to the endpoint: every one gets a status,
// and none may start a connection unless it is an initialize.
func FuzzPost(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`), "")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"x"}]`), "abc")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`), "c")
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\n\"method\":\"x\"}"), "")
	// agentish leaves an initialize it cannot read unanswered.
	s := &Server{Serve: agentish, InitTimeout: 50 * time.Millisecond}
	defer s.Close()
	f.Fuzz(func(t *testing.T, body []byte, conn string) {
		req := httptest.NewRequestWithContext(context.Background(), "POST", "/acp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if conn != "" {
			req.Header.Set(HeaderConnectionID, conn)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code == 0 {
			t.Fatalf("no status for %q", body)
		}
		if w.Code == http.StatusOK && w.Header().Get(HeaderConnectionID) == "" {
			t.Fatalf("200 without %s for %q", HeaderConnectionID, body)
		}
		if id := w.Header().Get(HeaderConnectionID); id != "" {
			if c := s.lookup(id); c != nil {
				c.Close()
			}
		}
	})
}

// sseEvents parses an SSE stream as the WHATWG spec says a client must
// (lines end in CR LF, LF or CR alone; a leading BOM is dropped; a field
// without a colon has an empty value; one space after the colon is
// dropped), returning the data of each event dispatched as a "message"
// event (the type of one whose "event" field is absent or empty), or nil
// where the spec dispatches one with no data. An event not ended by a
// blank line is never dispatched.
func sseEvents(stream []byte) [][]byte {
	stream = bytes.TrimPrefix(stream, []byte("\uFEFF"))
	var events [][]byte
	var data, typ []byte
	dataSeen := false
	for {
		i := bytes.IndexAny(stream, "\r\n")
		if i < 0 {
			return events // the rest is an unfinished line
		}
		line := stream[:i]
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
		if len(line) == 0 {
			if dataSeen && (len(typ) == 0 || string(typ) == "message") {
				events = append(events, bytes.TrimSuffix(data, []byte("\n")))
			}
			data, typ, dataSeen = nil, nil, false
			continue
		}
		field, value, colon := bytes.Cut(line, []byte(":"))
		if colon {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "data":
			data = append(append(data, value...), '\n')
			dataSeen = true
		case "event":
			typ = append([]byte(nil), value...)
		}
		// Anything else is a comment, or a field that carries no data.
	}
}

// FuzzSSE holds the client's SSE parser to the spec (sseEvents): each
// message event with data is delivered, in order, as its data on one line,
// compacted where it is JSON, and nothing else is.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
	f.Add([]byte(": keepalive\n\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: x\nid: 3\n\ndata:x"))
	f.Add([]byte("data: {\"a\":1}\r\rdata:{\"b\":2}\r\r"))
	f.Add([]byte("\uFEFFdata: {\"a\":1}\n\ndata\ndata: [1]\n\n"))
	f.Add([]byte("event: ping\ndata: {\"a\":1}\n\nevent:message\ndata: {\"b\":2}\n\nevent\rdata: [3]\r\r"))
	f.Add([]byte("event: x\n\ndata: 1\nevent: message\nevent: Message\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := newHTTPClient("http://127.0.0.1:1/acp", DialOptions{MaxMessageBytes: 1 << 20, HTTPClient: http.DefaultClient})
		c.in = make(chan []byte, len(stream)+1) // never blocks
		err := c.readStream(bytes.NewReader(stream), "")
		close(c.in)
		var got [][]byte
		for msg := range c.in {
			got = append(got, msg)
		}
		c.fail(ErrClosed)
		c.wg.Wait()
		if err != io.EOF {
			t.Fatalf("readStream ended with %v, want EOF", err)
		}
		var want [][]byte
		for _, e := range sseEvents(stream) {
			if len(bytes.TrimSpace(e)) > 0 { // an event of blank data carries no message
				want = append(want, compact(e))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("delivered %q, the spec's events are %q", got, want)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("message %d is %q, the spec's event %q", i, got[i], want[i])
			}
		}
	})
}

// FuzzLines: whatever a peer sends as one message, the stdio side reads
// it as one line, the same JSON where it is JSON; and whatever the stdio
// side writes, in whatever pieces, each line that is not blank goes out
// as one message, byte for byte.
func FuzzLines(f *testing.F) {
	f.Add([]byte("{\"a\":\n1}"), []byte("{\"x\":1}\n\n  \n{\"y\":\r\n"), 3)
	f.Add([]byte("not\r\njson"), []byte("a\nb"), 1)
	f.Fuzz(func(t *testing.T, msg, written []byte, cut int) {
		peer := &scripted{in: [][]byte{msg}}
		r, w := Lines(context.Background(), peer)
		line, err := bufio.NewReader(r).ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading %q: %v", msg, err)
		}
		line = line[:len(line)-1]
		if bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("message %q came out as %q", msg, line)
		}
		if !bytes.ContainsAny(msg, "\r\n") {
			if !bytes.Equal(line, msg) {
				t.Fatalf("message %q, one line already, came out as %q", msg, line)
			}
		} else if json.Valid(msg) {
			var want bytes.Buffer
			json.Compact(&want, msg)
			if !bytes.Equal(line, want.Bytes()) {
				t.Fatalf("message %q came out as %q, want %q", msg, line, want.Bytes())
			}
		} else if want := bytes.ReplaceAll(bytes.ReplaceAll(msg, []byte("\r"), []byte(" ")), []byte("\n"), []byte(" ")); !bytes.Equal(line, want) {
			t.Fatalf("message %q came out as %q", msg, line)
		}
		cut = min(max(cut, 0), len(written))
		w.Write(written[:cut])
		w.Write(written[cut:])
		var want [][]byte
		lines := bytes.Split(written, []byte("\n"))
		for _, l := range lines[:len(lines)-1] { // the last has no newline yet
			if len(bytes.TrimSpace(l)) > 0 {
				want = append(want, l)
			}
		}
		if len(peer.out) != len(want) {
			t.Fatalf("wrote %q: sent %q, want %q", written, peer.out, want)
		}
		for i := range want {
			if !bytes.Equal(peer.out[i], want[i]) {
				t.Fatalf("wrote %q: message %d is %q, want %q", written, i, peer.out[i], want[i])
			}
		}
	})
}

// scripted is a Conn that reads what it holds, then EOF, and keeps what
// is written to it.
type scripted struct {
	in  [][]byte
	out [][]byte
}

func (s *scripted) Read(ctx context.Context) ([]byte, error) {
	if len(s.in) == 0 {
		return nil, io.EOF
	}
	msg := s.in[0]
	s.in = s.in[1:]
	return msg, nil
}

func (s *scripted) Write(ctx context.Context, msg []byte) error {
	s.out = append(s.out, append([]byte(nil), msg...))
	return nil
}

func (s *scripted) Close() error { return nil }

// FuzzSessionOf holds what the transport reads of a message for its
// routing, the sessionId of params or a result and the protocolVersion of
// an initialize result, to what encoding/json (and so every SDK) reads.
func FuzzSessionOf(f *testing.F) {
	f.Add([]byte(`{"sessionId":"s1","x":{"sessionId":"no"}}`))
	f.Add([]byte(`{"session\u0049d":"s2"}`))
	f.Add([]byte(`{"sessionId":"a","sessionId":"b","protocolVersion":1}`))
	f.Add([]byte(`{"protocolVersion":"2025-06-18"}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		got := sessionOf(obj)
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return // the relay passes on only valid JSON
		}
		var want string
		if json.Unmarshal(m["sessionId"], &want) != nil {
			want = ""
		}
		if got != want {
			t.Fatalf("sessionOf(%s) = %q, encoding/json reads %q", obj, got, want)
		}
		var v any
		d := json.NewDecoder(bytes.NewReader(m["protocolVersion"]))
		d.UseNumber()
		wantVersion := ""
		if d.Decode(&v) == nil {
			switch v := v.(type) {
			case string:
				wantVersion = v
			case json.Number:
				wantVersion = string(bytes.TrimSpace(m["protocolVersion"]))
			}
		}
		if got := protocolVersionOf(obj); got != wantVersion {
			t.Fatalf("protocolVersionOf(%s) = %q, encoding/json reads %q", obj, got, wantVersion)
		}
	})
}

// FuzzClosedSession holds what closedSession reads of an error object
// from the agent to what encoding/json reads: a code equal to -32002 as a
// double, as the TypeScript SDK compares it.
func FuzzClosedSession(f *testing.F) {
	f.Add([]byte(`{"code":-32002,"message":"no such session"}`))
	f.Add([]byte(`{"code":-3.2002e4}`))
	f.Add([]byte(`{"code":-32002.0,"code":1}`))
	f.Add([]byte(`{"c\u006fde":"-32002"}`))
	f.Fuzz(func(t *testing.T, e []byte) {
		got := closedSession(e) // must not panic, whatever e is
		var m map[string]json.RawMessage
		if json.Unmarshal(e, &m) != nil || m == nil {
			return // a parsed message's error is a valid object
		}
		var code *float64
		want := json.Unmarshal(m["code"], &code) == nil && code != nil && *code == -32002
		if got != want {
			t.Fatalf("closedSession(%s) = %v, encoding/json reads %v", e, got, want)
		}
	})
}

// FuzzGuard: a loopback Guard admits a request only if its Host names
// this machine (or an allowed host) as net/url reads a URL with that
// authority, and so does its Origin, if any; and only with the token.
func FuzzGuard(f *testing.F) {
	f.Add("127.0.0.1:8765", "", "Bearer tok")
	f.Add("localhost", "http://localhost:3000", "bearer  tok ")
	f.Add("[::1]:80", "null", "Bearer tok")
	f.Add("evil.example:80", "http://127.0.0.1", "Bearer tok")
	f.Add("tunnel.example", "https://TUNNEL.example:1", "Bearer tok")
	g := &Guard{Token: "tok", Loopback: true, AllowedHosts: []string{"tunnel.example"}}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) }))
	f.Fuzz(func(t *testing.T, host, origin, auth string) {
		req := httptest.NewRequestWithContext(context.Background(), "POST", "/acp", nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 299 {
			return
		}
		local := func(name string) bool { return IsLoopbackHost(name) || strings.EqualFold(name, "tunnel.example") }
		// A Host net/url cannot read (a port that is not a number) is no
		// name a browser sends for a page's own host; its host part is
		// judged all the same.
		if u, err := url.Parse("http://" + host); err == nil && !local(u.Hostname()) {
			t.Fatalf("admitted Host %q, which names %q", host, u.Hostname())
		}
		if origin != "" {
			if u, err := url.Parse(origin); err != nil || !local(u.Hostname()) {
				t.Fatalf("admitted Origin %q, which names %v (%v)", origin, u, err)
			}
		}
		if scheme, tok, _ := strings.Cut(auth, " "); !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) != "tok" {
			t.Fatalf("admitted Authorization %q", auth)
		}
	})
}

// FuzzWebSocket sends a text frame of anything to the server, whose
// Serve reads it through Lines as the conductor's stdio side would and
// echoes each line back as one message: a frame comes back exactly as
// Lines made it one line, or not at all when it is blank; and a binary
// frame is ignored.
func FuzzWebSocket(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	f.Add([]byte("{\"a\":\r\n1}"))
	f.Add([]byte("not\njson"))
	f.Add([]byte(" \t"))
	s := &Server{Serve: func(ctx context.Context, c Conn, _ ConnInfo) {
		r, w := Lines(ctx, c)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			w.Write(append(sc.Bytes(), '\n'))
		}
	}}
	ts := httptest.NewServer(s)
	f.Cleanup(func() { s.Close(); ts.Close() })
	u := "ws" + strings.TrimPrefix(ts.URL, "http") + "/acp"
	f.Fuzz(func(t *testing.T, msg []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, u, DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ws := c.(*wsConn).ws
		if err := ws.Write(ctx, websocket.MessageBinary, []byte("binary\n{}")); err != nil {
			t.Fatal(err)
		}
		if err := c.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
		const end = `{"end":true}`
		if err := c.Write(ctx, []byte(end)); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for {
			m, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			if string(m) == end {
				break
			}
			got = append(got, m)
		}
		want := compact(msg)
		if len(bytes.TrimSpace(want)) == 0 {
			if len(got) != 0 {
				t.Fatalf("blank frame %q came back as %q", msg, got)
			}
			return
		}
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("frame %q came back as %q, want %q", msg, got, want)
		}
	})
}
