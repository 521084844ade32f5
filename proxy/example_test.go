package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// A proxy process adds a note to every prompt and hides the agent's
// thoughts from the client; everything else passes through untouched.
func Example() {
	p := &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/prompt": addNote},
		FromSuccessor:   map[string]proxy.Handler{"session/update": hideThoughts},
	}
	if err := p.Serve(context.Background(), proxy.Stdin(), proxy.Stdout()); err != nil {
		log.Fatal(err)
	}
}

// addNote puts a text block at the start of the prompt, then sends the
// prompt on and returns the agent's answer as the answer.
func addNote(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	params, err := proxy.EditMember(r.Params, "prompt", func(prompt json.RawMessage) (json.RawMessage, error) {
		var blocks []json.RawMessage
		if err := json.Unmarshal(prompt, &blocks); err != nil {
			return nil, err
		}
		note := json.RawMessage(`{"type":"text","text":"Note: the tests run with 'make test'."}`)
		// Join the raw blocks rather than re-encode them: every byte of
		// the editor's blocks reaches the agent as it was.
		out := append([]byte("["), note...)
		for _, b := range blocks {
			out = append(append(out, ','), b...)
		}
		return append(out, ']'), nil
	})
	if err != nil {
		return nil, err
	}
	r.Params = params
	return r.Forward(ctx)
}

// hideThoughts forwards every session update except the agent's thoughts.
func hideThoughts(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	var p struct {
		Update struct {
			Kind string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if json.Unmarshal(r.Params, &p) == nil && p.Update.Kind == "agent_thought_chunk" {
		return nil, nil
	}
	return r.Forward(ctx)
}

// The same proxy on in-memory pipes, with the conductor played by hand: a
// prompt from the client goes on to the agent with the note in front, and
// the agent's answer comes back.
func ExampleProxy_Serve() {
	p := &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/prompt": addNote},
	}
	proxyIn, conductorOut := io.Pipe()
	conductorIn, proxyOut := io.Pipe()
	done := make(chan error)
	go func() { done <- p.Serve(context.Background(), proxyIn, proxyOut) }()
	fromProxy := bufio.NewScanner(conductorIn)

	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"Fix the build."}]}}`)
	fromProxy.Scan()
	fmt.Println(fromProxy.Text())

	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	fromProxy.Scan()
	fmt.Println(fromProxy.Text())

	conductorOut.Close()
	fmt.Println("Serve:", <-done)
	// Output:
	// {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"Note: the tests run with 'make test'."},{"type":"text","text":"Fix the build."}]}}}
	// {"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}
	// Serve: <nil>
}

// A prompt handler that tells the client how the turn went once the agent
// has answered. The client cancels the prompt with $/cancel_request, which
// cancels the handler's ctx: Forward still returns the agent's answer
// (stopReason "cancelled"), but a Notify under ctx would send nothing and
// return context.Canceled. The report goes under
// context.WithoutCancel(ctx), which keeps the handler's place, so it
// still reaches the client just before the answer.
func ExampleConn_Notify() {
	report := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		result, err := r.Forward(ctx)
		if err != nil {
			return nil, err
		}
		var answer struct {
			StopReason string `json:"stopReason"`
		}
		json.Unmarshal(result, &answer)
		update := map[string]any{"sessionId": "s1", "update": map[string]any{
			"sessionUpdate": "agent_message_chunk",
			"content":       map[string]string{"type": "text", "text": "turn ended: " + answer.StopReason},
		}}
		if err := r.Conn().Notify(context.WithoutCancel(ctx), proxy.Predecessor, "session/update", update); err != nil {
			return nil, err
		}
		return result, nil
	}
	p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{"session/prompt": report}}
	proxyIn, conductorOut := io.Pipe()
	conductorIn, proxyOut := io.Pipe()
	done := make(chan error)
	go func() { done <- p.Serve(context.Background(), proxyIn, proxyOut) }()
	fromProxy := bufio.NewScanner(conductorIn)
	next := func() { fromProxy.Scan(); fmt.Println(fromProxy.Text()) }

	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	next() // the prompt, on to the agent
	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	next() // the cancel, on to the agent under the proxy's own id
	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	next() // the report
	next() // the answer

	conductorOut.Close()
	fmt.Println("Serve:", <-done)
	// Output:
	// {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}
	// {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"content":{"text":"turn ended: cancelled","type":"text"},"sessionUpdate":"agent_message_chunk"}}}
	// {"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}}
	// Serve: <nil>
}

// A proxy that ends any prompt still running after a time limit. A turn
// ends with session/cancel, after which the agent answers the prompt with
// stopReason "cancelled". Bounding Forward with context.WithTimeout
// instead would abandon the answer: the client would get the error
// "context deadline exceeded", while an agent that stops a turn only on
// session/cancel, as most do, went on working.
func ExampleRequest_Forward_timeLimit() {
	const limit = 10 * time.Millisecond
	timeLimit := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		var prompt struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(r.Params, &prompt); err != nil {
			return nil, &proxy.Error{Code: proxy.CodeInvalidParams, Message: "time-limit: " + err.Error()}
		}
		answered := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-time.After(limit):
				cancel := map[string]string{"sessionId": prompt.SessionID}
				r.Conn().Notify(ctx, proxy.Successor, "session/cancel", cancel)
			case <-answered:
			}
		})
		defer wg.Wait()
		defer close(answered)
		return r.Forward(ctx)
	}
	p := &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{"session/prompt": timeLimit}}
	proxyIn, conductorOut := io.Pipe()
	conductorIn, proxyOut := io.Pipe()
	done := make(chan error)
	go func() { done <- p.Serve(context.Background(), proxyIn, proxyOut) }()
	fromProxy := bufio.NewScanner(conductorIn)
	next := func() { fromProxy.Scan(); fmt.Println(fromProxy.Text()) }

	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	next() // the prompt, on to the agent, which takes its time
	next() // the limit passes: the cancel
	fmt.Fprintln(conductorOut, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	next() // the agent's answer, back to the client

	conductorOut.Close()
	fmt.Println("Serve:", <-done)
	// Output:
	// {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}
	// {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"}}}
	// {"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}}
	// Serve: <nil>
}
