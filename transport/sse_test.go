package transport

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

// TestChainBatchSplit: a batch the chain writes reaches a Streamable HTTP
// client as its messages, each an event of its own (the RFD has no
// batches, and the TypeScript SDK's client skips an array), so that a
// request in it is answered; output that is no JSON-RPC message at all
// is dropped with a warning naming the connection.
func TestChainBatchSplit(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	answered := make(chan string, 1)
	s, u := newTestServer(t, nil)
	s.Logger = zap.New(core)
	s.Serve = func(ctx context.Context, c Conn, _ ConnInfo) {
		if msg, err := c.Read(ctx); err != nil || c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)) != nil {
			t.Errorf("initialize: %s, %v", msg, err)
			return
		}
		if _, err := c.Read(ctx); err != nil { // the client's go-ahead
			return
		}
		_ = c.Write(ctx, []byte(`42`))
		_ = c.Write(ctx, []byte(`[{"jsonrpc":"2.0","method":"x/note","params":{}},{"jsonrpc":"2.0","id":"q","method":"x/ask","params":{}}]`))
		msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		answered <- string(msg)
	}
	init := post(t, u, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil)
	init.Body.Close()
	cid := init.Header.Get(HeaderConnectionID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, br := openStream(t, ctx, u, cid, "")
	defer resp.Body.Close()
	post(t, u, cid, `{"jsonrpc":"2.0","method":"x/go"}`, nil).Body.Close()

	note, ask := event(t, br), event(t, br)
	if note != `{"jsonrpc":"2.0","method":"x/note","params":{}}` || ask != `{"jsonrpc":"2.0","id":"q","method":"x/ask","params":{}}` {
		t.Fatalf("the batch's messages arrived as %s and %s", note, ask)
	}
	post(t, u, cid, `{"jsonrpc":"2.0","id":"q","result":{}}`, nil).Body.Close()
	select {
	case got := <-answered:
		if got != `{"jsonrpc":"2.0","id":"q","result":{}}` {
			t.Errorf("the chain's request was answered %s", got)
		}
	case <-ctx.Done():
		t.Fatal("the chain's request was never answered")
	}
	var warned bool
	for _, e := range logs.All() {
		warned = warned || e.Message == "dropped chain output that is not a JSON-RPC message" && e.ContextMap()["connection"] == cid
	}
	if !warned {
		t.Errorf("no warning for the output that was no message: %v", logs.All())
	}
	del(t, u, cid)
	waitIdle(t, s)
}
