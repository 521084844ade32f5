package proxy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A call made outside any handler, under a context no handler gave, goes
// last in the outgoing order and is answered.
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
