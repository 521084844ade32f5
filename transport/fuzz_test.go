package transport

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzReadStream feeds a server's SSE stream to the client's parser: it
// must deliver each event's data as one line, or stop with an error, never
// panic or hang.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"sessionId\":\"s\"}}\n\n"))
	f.Add([]byte(": keepalive\n\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: x\nid: 3\n\n"))
	f.Add([]byte("data:" + string(bytes.Repeat([]byte("x"), 300)) + "\n\n"))
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
