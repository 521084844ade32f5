package transport

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestSSEEventTypes: the client delivers the data of an SSE event whose
// type is "message", or that names none, and skips, with a debug log, any
// other type: only message events carry JSON-RPC in Streamable HTTP. An
// event's type ends with it.
func TestSSEEventTypes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stream  string
		want    []string // delivered, in order
		skipped []string // the types logged as skipped
	}{
		{"no type", "data: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"message", "event: message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"message without the space", "event:message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"empty type", "event\ndata: {\"a\":1}\n\nevent:\ndata: {\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}, nil},
		{"another type", "event: ping\ndata: {\"a\":1}\n\ndata: {\"b\":2}\n\n", []string{`{"b":2}`}, []string{"ping"}},
		{"MCP's old endpoint event", "event: endpoint\ndata: /messages?session=1\n\n", nil, []string{"endpoint"}},
		{"types are case-sensitive", "event: Message\ndata: {\"a\":1}\n\n", nil, []string{"Message"}},
		{"the last type counts", "event: ping\nevent: message\ndata: {\"a\":1}\n\nevent: message\nevent: x\ndata: {\"b\":2}\n\n", []string{`{"a":1}`}, []string{"x"}},
		{"after the data", "data: {\"a\":1}\nevent: ping\n\n", nil, []string{"ping"}},
		{"a type without data ends", "event: ping\n\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}, nil},
		{"CR line endings", "event: ping\rdata: {\"a\":1}\r\revent: message\r\ndata: {\"b\":2}\r\n\r\n", []string{`{"b":2}`}, []string{"ping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			c := newHTTPClient("http://127.0.0.1:1/acp", DialOptions{MaxMessageBytes: 1 << 20, HTTPClient: http.DefaultClient, Logger: zap.New(core)})
			c.in = make(chan []byte, len(tc.stream)+1) // never blocks
			err := c.readStream(strings.NewReader(tc.stream), "")
			close(c.in)
			c.fail(ErrClosed)
			c.wg.Wait()
			if err != io.EOF {
				t.Errorf("readStream ended with %v, want EOF", err)
			}
			var got []string
			for msg := range c.in {
				got = append(got, string(msg))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("delivered %q, want %q", got, tc.want)
			}
			var skipped []string
			for _, e := range logs.All() {
				skipped = append(skipped, e.ContextMap()["event"].(string))
				if e.Level != zap.DebugLevel {
					t.Errorf("logged at %v: %s", e.Level, e.Message)
				}
			}
			if strings.Join(skipped, "\n") != strings.Join(tc.skipped, "\n") {
				t.Errorf("logged the types %q as skipped, want %q", skipped, tc.skipped)
			}
		})
	}
}
