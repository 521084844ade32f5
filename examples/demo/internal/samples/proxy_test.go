package samples

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestProxy plays the conductor to the sample proxy: it must initialize its
// successor, put the note in front of every prompt without touching the rest,
// pass everything else through, and stop cleanly at the end of its input.
func TestProxy(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Proxy(context.Background(), inR, outW) }()
	ch := wire.NewLineChannel(outR, inW, 0)
	defer ch.Close()

	exchange := func(send, want string) {
		t.Helper()
		if err := ch.Send([]byte(send)); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			return
		}
		line, err := ch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != want {
			t.Fatalf("proxy sent\n\t%s\nwant\n\t%s", line, want)
		}
	}
	note := `{"text":"` + ProxyNote + `","type":"text"}`

	exchange(`{"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`)
	exchange(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}}}`)

	exchange(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[ {"type":"text", "text":"Hi"} ],"_meta":{"m":1}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[`+note+`, {"type":"text", "text":"Hi"} ],"_meta":{"m":1}}}}`)
	exchange(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s1"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`)
	exchange(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)

	exchange(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`,
		`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[`+note+`]}}}`)
	exchange(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)

	// A prompt that is not one goes on as it is, for the agent to refuse.
	exchange(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s1","prompt":"hi"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":"hi"}}}`)
	exchange(`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad prompt"}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad prompt"}}`)

	inW.Close()
	if line, err := ch.Recv(); err != io.EOF {
		t.Errorf("after its input ended the proxy sent %s, %v; want EOF", line, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Proxy: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Proxy did not return at the end of its input")
	}
}
