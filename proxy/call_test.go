package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A call made outside any handler, under a context no handler gave, goes
// out and is answered.
func TestCallOutsideHandler(t *testing.T) {
	answers := make(chan string, 1)
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"_example/go": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				conn := r.Conn()
				go func() {
					result, err := conn.Call(context.Background(), proxy.Predecessor, "_example/ask", nil)
					if err != nil {
						answers <- err.Error()
						return
					}
					answers <- string(result)
				}()
				return nil, nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","method":"_example/go"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"_example/ask"}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":"yes"}`)
	select {
	case got := <-answers:
		if got != `"yes"` {
			t.Fatalf("Call returned %s", got)
		}
	case <-time.After(timeout):
		t.Fatal("Call did not return")
	}
}

// A handler that asks the client under a context no handler gave, as a
// handler bounding its wait with context.WithTimeout(context.Background(),
// ...) does, gets its answer: the request does not queue behind the place
// the handler itself holds. What arrived meanwhile goes on once the handler
// is done with its place, and the proxy goes on serving.
func TestCallUnderBackgroundInHandler(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"Background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"WithTimeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, &proxy.Proxy{
				FromPredecessor: map[string]proxy.Handler{
					"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
						bg, cancel := tt.ctx()
						defer cancel()
						if err := r.Conn().Notify(bg, proxy.Predecessor, "session/update", json.RawMessage(`{"sessionId":"s1"}`)); err != nil {
							return nil, err
						}
						answer, err := r.Conn().Call(bg, proxy.Predecessor, "session/request_permission", json.RawMessage(`{"sessionId":"s1"}`))
						if err != nil {
							return nil, err
						}
						if string(answer) != `"yes"` {
							return nil, fmt.Errorf("permission: %s", answer)
						}
						return r.Forward(ctx)
					},
				},
			})
			c.send(`{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{"sessionId":"s1"}}`)
			c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`)
			c.expect(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1"}}`)
			// Another session's traffic, behind the prompt's place.
			c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s2"}}}`)
			c.send(`{"jsonrpc":"2.0","id":1,"result":"yes"}`)
			c.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1"}}}`)
			c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2"}}`)
			c.send(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
			c.expect(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)
			c.send(`{"jsonrpc":"2.0","id":"n2","method":"session/new","params":{}}`)
			c.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/new","params":{}}}`)
		})
	}
}

// JSON-RPC params are an object or an array. Call and Notify refuse any
// other value rather than send a message its peer can only refuse (the
// TypeScript SDK answers -32602, and drops a notification with no word
// back), and a null, such as a nil pointer encodes to, sends no params, as
// nil does.
func TestCallParamsStructured(t *testing.T) {
	type update struct {
		SessionID string `json:"sessionId"`
	}
	errs := make(chan error, 8)
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"_example/go": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				conn := r.Conn()
				for _, params := range []any{"text", 42, true, json.RawMessage(` "text"`)} {
					errs <- conn.Notify(ctx, proxy.Predecessor, "_example/note", params)
					_, err := conn.Call(ctx, proxy.Predecessor, "_example/ask", params)
					errs <- err
				}
				var none *update
				if err := conn.Notify(ctx, proxy.Predecessor, "_example/none", none); err != nil {
					return nil, err
				}
				if err := conn.Notify(ctx, proxy.Predecessor, "_example/none", json.RawMessage(" null ")); err != nil {
					return nil, err
				}
				return conn.Call(ctx, proxy.Predecessor, "_example/ask", none)
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"_example/go"}`)
	c.expect(`{"jsonrpc":"2.0","method":"_example/none"}`)
	c.expect(`{"jsonrpc":"2.0","method":"_example/none"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"_example/ask"}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	for range 8 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "object or array") {
			t.Errorf("scalar params: got error %v, want one saying params are an object or array", err)
		}
	}
}

// A call or notification made once Serve has returned sends nothing, and
// says so: there was no answer to wait for.
func TestCallAfterServe(t *testing.T) {
	conns := make(chan *proxy.Conn, 1)
	c := serve(t, &proxy.Proxy{
		Name: "tester",
		FromPredecessor: map[string]proxy.Handler{
			"_example/go": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				conns <- r.Conn()
				return nil, nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","method":"_example/go"}`)
	conn := <-conns
	c.in.Close()
	c.wait()

	_, err := conn.Call(context.Background(), proxy.Predecessor, "_example/ask", nil)
	if !errors.Is(err, proxy.ErrClosed) || err.Error() != "proxy tester: _example/ask not sent: its connection had closed, its input ended" {
		t.Errorf("Call after Serve: %v; want ErrClosed, saying it was not sent", err)
	}
	err = conn.Notify(context.Background(), proxy.Successor, "_example/tell", nil)
	if !errors.Is(err, proxy.ErrClosed) || !strings.Contains(err.Error(), "_example/tell not sent") {
		t.Errorf("Notify after Serve: %v; want ErrClosed, saying it was not sent", err)
	}
}
