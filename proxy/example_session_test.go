package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// promptCounts is per-session state: how many prompts each session has
// had. A Proxy may serve many connections, and session ids are only
// unique within one, so the state belongs to one Serve call: made before
// it, dropped when it returns.
type promptCounts struct {
	mu sync.Mutex
	n  map[string]int // by session id
}

// handlers returns the handlers that keep the state. A session begins
// with the answer to session/new or session/fork, which carries its id,
// or with a session/load or session/resume that succeeds, which names it;
// it ends with session/close or session/delete. Many clients never close
// their sessions, so whatever a session holds should be small, or
// bounded by the proxy (keep the most recently used, say); all of it goes
// when the connection ends.
func (s *promptCounts) handlers() map[string]proxy.Handler {
	begin := func(fromAnswer bool) proxy.Handler {
		return func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
			result, err := r.Forward(ctx)
			if err != nil {
				return nil, err
			}
			id := sessionIDOf(r.Params)
			if fromAnswer {
				id = sessionIDOf(result)
			}
			if id != "" {
				s.mu.Lock()
				s.n[id] = 0
				s.mu.Unlock()
			}
			return result, nil
		}
	}
	end := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		// Forget it even if the agent fails the request: the client is
		// done with the session either way.
		s.mu.Lock()
		delete(s.n, sessionIDOf(r.Params))
		s.mu.Unlock()
		return r.Forward(ctx)
	}
	prompt := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		s.mu.Lock()
		if n, ok := s.n[sessionIDOf(r.Params)]; ok {
			s.n[sessionIDOf(r.Params)] = n + 1
		}
		s.mu.Unlock()
		return r.Forward(ctx)
	}
	return map[string]proxy.Handler{
		"session/new":    begin(true),
		"session/fork":   begin(true),
		"session/load":   begin(false),
		"session/resume": begin(false),
		"session/close":  end,
		"session/delete": end,
		"session/prompt": prompt,
	}
}

func (s *promptCounts) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.n)
}

// sessionIDOf returns the sessionId member of a JSON object, or "".
func sessionIDOf(obj json.RawMessage) string {
	var v struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(obj, &v)
	return v.SessionID
}

// A proxy that keeps state for each session, here a count of its
// prompts. The proxy does not say when a session begins or ends: its
// handlers see the requests that do, and the state of the sessions that
// are never closed goes when Serve returns.
func Example_sessionState() {
	state := &promptCounts{n: make(map[string]int)}
	p := &proxy.Proxy{FromPredecessor: state.handlers()}
	proxyIn, conductorOut := io.Pipe()
	conductorIn, proxyOut := io.Pipe()
	done := make(chan error)
	go func() { done <- p.Serve(context.Background(), proxyIn, proxyOut) }()
	fromProxy := bufio.NewScanner(conductorIn)
	exchange := func(request, answer string) {
		fmt.Fprintln(conductorOut, request)
		fromProxy.Scan() // the request, on to the agent as id 1, 2, ...
		fmt.Fprintln(conductorOut, answer)
		fromProxy.Scan() // the answer, back to the client
	}

	exchange(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/src","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	exchange(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s0","cwd":"/src","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`)
	exchange(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
	fmt.Println("open:", state)
	exchange(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"s1"}}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`)
	fmt.Println("after session/close:", state)

	conductorOut.Close()
	fmt.Println("Serve:", <-done) // the connection has ended, and with it every session
	// Output:
	// open: map[s0:0 s1:1]
	// after session/close: map[s0:0]
	// Serve: <nil>
}
