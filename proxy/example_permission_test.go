package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A reviewDesk answers the agent's permission requests itself, with the
// decision of a reviewer other than the client's user, which may take a
// while. While it waits, the client may cancel the turn with
// session/cancel: the client then no longer answers the session's
// permission requests, and ACP asks whoever does to answer them
// {"outcome":{"outcome":"cancelled"}}. A proxy that answers them in the
// client's stead must do so itself, or the agent waits for ever.
type reviewDesk struct {
	decisions chan string // optionIds, from the reviewer

	mu      sync.Mutex
	pending map[string][]chan struct{} // by session; closed by session/cancel
}

func (d *reviewDesk) requestPermission(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	session := sessionIDOf(r.Params)
	cancelled := make(chan struct{})
	d.mu.Lock()
	d.pending[session] = append(d.pending[session], cancelled)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.pending[session] = slices.DeleteFunc(d.pending[session], func(c chan struct{}) bool { return c == cancelled })
		if len(d.pending[session]) == 0 {
			delete(d.pending, session)
		}
		d.mu.Unlock()
	}()
	// The reviewer may take minutes: all other traffic goes on meanwhile.
	r.Detach()
	update := map[string]any{"sessionId": session, "update": map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]string{"type": "text", "text": "waiting for the reviewer"},
	}}
	if err := r.Conn().Notify(ctx, proxy.Predecessor, "session/update", update); err != nil {
		return nil, err
	}
	select {
	case option := <-d.decisions:
		return json.Marshal(map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": option}})
	case <-cancelled:
		return json.RawMessage(`{"outcome":{"outcome":"cancelled"}}`), nil
	case <-ctx.Done(): // the agent withdrew the request, or the proxy stops
		return nil, context.Cause(ctx)
	}
}

// cancel passes session/cancel on to the agent, then answers the
// session's pending permission requests as cancelled.
func (d *reviewDesk) cancel(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	_, err := r.Forward(ctx)
	session := sessionIDOf(r.Params)
	d.mu.Lock()
	for _, c := range d.pending[session] {
		close(c)
	}
	delete(d.pending, session)
	d.mu.Unlock()
	return nil, err
}

// A proxy that answers the agent's permission requests itself answers
// them as cancelled when the client cancels the turn.
func Example_permissionCancelled() {
	desk := &reviewDesk{decisions: make(chan string), pending: make(map[string][]chan struct{})}
	p := &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/cancel": desk.cancel},
		FromSuccessor:   map[string]proxy.Handler{"session/request_permission": desk.requestPermission},
	}
	proxyIn, conductorOut := io.Pipe()
	conductorIn, proxyOut := io.Pipe()
	done := make(chan error)
	go func() { done <- p.Serve(context.Background(), proxyIn, proxyOut) }()
	fromProxy := bufio.NewScanner(conductorIn)
	next := func() { fromProxy.Scan(); fmt.Println(fromProxy.Text()) }

	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":"p1","method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"ok","name":"Allow","kind":"allow_once"}]}}}`)
	next() // the client hears that the proxy waits
	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	next() // the cancel, on to the agent
	next() // the permission request, answered

	conductorOut.Close()
	fmt.Println("Serve:", <-done)
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{"text":"waiting for the reviewer","type":"text"},"sessionUpdate":"agent_message_chunk"}}}
	// {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"}}}
	// {"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"cancelled"}}}
	// Serve: <nil>
}
