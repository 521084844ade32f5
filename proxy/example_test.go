package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"

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
