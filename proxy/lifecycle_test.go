package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// At the end of its input the proxy fails the calls that can no longer be
// answered, with ErrClosed that says so, naming the proxy, answers the
// successor's requests it relayed with the same error, waits for its
// handlers, sends what they answered, closes its output and returns nil,
// leaving no goroutine behind. The predecessor's relayed requests get no
// answer: a conductor has answered them itself (see Conn.shutdown).
func TestShutdownAtEOF(t *testing.T) {
	defer goleak.VerifyNone(t)
	callErr := make(chan error, 1)
	c := serve(t, &proxy.Proxy{
		Name: "tester",
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				_, err := r.Forward(ctx)
				callErr <- err
				return nil, err
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}`) // relayed, unanswered
	c.recv()
	for _, id := range []string{`"w1"`, `"w2"`} { // relayed toward the client, unanswered
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{}}}`)
		c.recv()
	}
	c.in.Close()

	if err := <-callErr; !errors.Is(err, proxy.ErrClosed) {
		t.Errorf("pending call: got %v, want ErrClosed", err)
	}
	c.expect(`{"jsonrpc":"2.0","id":"w1","error":{"code":-32603,"message":"proxy tester: its input ended before the answer came"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"w2","error":{"code":-32603,"message":"proxy tester: its input ended before the answer came"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"proxy tester: its input ended before the answer came"}}`)
	if line, ok := <-c.lines; ok {
		t.Errorf("proxy sent %s after its answer; want its output closed", line)
	}
	if err := c.wait(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// Cancelling Serve's context stops it, cancels its handlers and closes its
// output, even while a handler waits and a read is pending.
func TestShutdownOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	handlerErr := make(chan error, 1)
	started := make(chan struct{})
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				close(started)
				<-ctx.Done()
				handlerErr <- ctx.Err()
				return nil, ctx.Err()
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
	<-started
	c.cancel()
	if err := c.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: got %v, want context.Canceled", err)
	}
	if err := <-handlerErr; err == nil {
		t.Error("handler's context not cancelled")
	}
	for range c.lines { // closed
	}
}

// Cancelling Serve's context stops it even while a write to the conductor
// is blocked, as it is while the conductor does not read: the output is
// closed to interrupt the write, as the input is to interrupt a read.
// Otherwise a proxy told to stop (by SIGTERM, say) while its conductor
// does not read would stop only when killed.
func TestShutdownOnCancelWhileWriting(t *testing.T) {
	for name, pipe := range map[string]func() (io.ReadCloser, io.WriteCloser, error){
		"io.Pipe": func() (io.ReadCloser, io.WriteCloser, error) { r, w := io.Pipe(); return r, w, nil },
		"os.Pipe": func() (io.ReadCloser, io.WriteCloser, error) { return os.Pipe() },
	} {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			inR, inW, err := pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer inW.Close()
			outR, outW, err := pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer outR.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- (&proxy.Proxy{}).Serve(ctx, inR, outW) }()

			// A notification far longer than a pipe holds, relayed: once
			// its first byte is read, the rest of its write waits for a
			// reader that never comes.
			big := `{"jsonrpc":"2.0","method":"_big","params":{"s":"` + strings.Repeat("x", 1<<20) + `"}}` + "\n"
			go io.WriteString(inW, big)
			if _, err := io.ReadFull(outR, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Serve: got %v, want context.Canceled", err)
				}
			case <-time.After(timeout):
				t.Fatal("Serve did not return after its context was cancelled, its write blocked")
			}
		})
	}
}

// Serve reports a failed write, and stops.
func TestShutdownOnWriteError(t *testing.T) {
	defer goleak.VerifyNone(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	outR.CloseWithError(errors.New("conductor gone"))
	done := make(chan error, 1)
	go func() { done <- (&proxy.Proxy{}).Serve(context.Background(), inR, outW) }()
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`+"\n")
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "conductor gone") || !errors.Is(err, proxy.ErrClosed) {
			t.Errorf("Serve: got %v, want the write error, as ErrClosed", err)
		}
	case <-time.After(timeout):
		t.Fatal("Serve did not return")
	}
	inW.Close()
}

// $/cancel_request names a request by its id on the proxy's connection and
// is sent plain, even for a proxy/successor request; a wrapped one is
// accepted. For a relayed request the proxy cancels
// the request it sent in turn, and still passes the answer back; for a
// handled one it cancels the handler, whose own pending call is cancelled in
// turn.
func TestCancelRequest(t *testing.T) { synctest.Test(t, testCancelRequest) }

func testCancelRequest(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})

	c.send(`{"jsonrpc":"2.0","id":"r1","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r1"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"r1","result":{"stopReason":"cancelled"}}`)

	// From the successor's side: a plain cancel names the envelope's id.
	c.send(`{"jsonrpc":"2.0","id":"w1","method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"w1"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"Request cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"w1","error":{"code":-32800,"message":"Request cancelled"}}`)

	// The wrapped spelling of earlier conductors is accepted.
	c.send(`{"jsonrpc":"2.0","id":"w2","method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"$/cancel_request","params":{"requestId":"w2"}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"error":{"code":-32800,"message":"Request cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"w2","error":{"code":-32800,"message":"Request cancelled"}}`)

	c.send(`{"jsonrpc":"2.0","id":"h1","method":"session/load","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"h1"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":4}}`)
	// A handler's Forward passes the cancel on and still returns the
	// successor's answer, which is the caller's: ACP answers a cancelled
	// prompt with stopReason "cancelled", not an error.
	c.send(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"h1","result":{"stopReason":"cancelled"}}`)

	// Cancelling what is already answered, or unknown, does nothing.
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r1"}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}`)
	c.quiet()
}

// A cancel whose requestId is the request's id spelled otherwise (7.0 for
// 7, "\u0068" for "h") names the same request, as the TypeScript SDK reads
// it: relayed or handled, the request is cancelled in turn.
func TestCancelSpelledOtherwise(t *testing.T) { synctest.Test(t, testCancelSpelledOtherwise) }

func testCancelSpelledOtherwise(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})

	c.send(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7.0}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}}`)

	c.send(`{"jsonrpc":"2.0","id":"h1","method":"session/load","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"\u0068\u0031"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":"h1","result":{}}`)
}

// A response whose id is the proxy's, spelled otherwise (2.0, 3e0), is
// the answer to that request, as JSON.parse reads it; a fraction answers
// none, and the request is still answered by the id as the proxy gave it.
func TestResponseIDSpelledOtherwise(t *testing.T) { synctest.Test(t, testResponseIDSpelledOtherwise) }

func testResponseIDSpelledOtherwise(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})
	c.send(`{"jsonrpc":"2.0","id":"p1","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":1.0,"result":{"stopReason":"end_turn"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"p1","result":{"stopReason":"end_turn"}}`)

	c.send(`{"jsonrpc":"2.0","id":"h1","method":"session/load","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":0.2e1,"result":{"loaded":true}}`)
	c.expect(`{"jsonrpc":"2.0","id":"h1","result":{"loaded":true}}`)

	c.send(`{"jsonrpc":"2.0","id":"p2","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":3.5,"result":{"stopReason":"end_turn"}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"p2","result":{"stopReason":"cancelled"}}`)
}

// A cancel passed on keeps everything it carried but the id: _meta (W3C
// trace context, which the meta-propagation RFD reserves there) and
// members the proxy does not know, for a relayed request and for one a
// handler forwards alike.
func TestCancelRequestKeepsMeta(t *testing.T) { synctest.Test(t, testCancelRequestKeepsMeta) }

func testCancelRequestKeepsMeta(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})
	const meta = `"_meta":{"traceparent":"00-abc-def-01"},"x-extra":[1,{"k":"ü"}]`

	c.send(`{"jsonrpc":"2.0","id":"r1","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"r1",` + meta + `}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1,` + meta + `}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"r1","result":{"stopReason":"cancelled"}}`)

	c.send(`{"jsonrpc":"2.0","id":"w1","method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{` + meta + `,"requestId":"w1"}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{` + meta + `,"requestId":2}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"Request cancelled"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"w1","error":{"code":-32800,"message":"Request cancelled"}}`)

	c.send(`{"jsonrpc":"2.0","id":"h1","method":"session/load","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"h1",` + meta + `}}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3,` + meta + `}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":"h1","result":{}}`)
}

// A call whose context ends first returns the context's error, and the
// conductor hears that the answer is no longer wanted.
func TestCallContextDone(t *testing.T) {
	callErr := make(chan error, 1)
	c := serve(t, &proxy.Proxy{
		FromSuccessor: map[string]proxy.Handler{
			"_example/tick": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				defer cancel()
				_, err := r.Conn().Call(ctx, proxy.Predecessor, "_example/ask", nil)
				callErr <- err
				return nil, nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_example/tick"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"_example/ask"}`)
	c.expect(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
	if err := <-callErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call: got %v, want DeadlineExceeded", err)
	}
}

// Input that is not JSON-RPC is refused as JSON-RPC asks, under the id of
// what would be a request if it can be read, and the proxy carries on.
func TestMalformedInput(t *testing.T) { synctest.Test(t, testMalformedInput) }

func testMalformedInput(t *testing.T) {
	c := serve(t, &proxy.Proxy{})
	for _, tc := range []struct {
		in, id string
		code   int
	}{
		{`not json`, "null", -32700},
		{`{"jsonrpc":"2.0","id":1}`, "null", -32600},
		{`{"id":5,"method":"session/new","params":{}}`, "5", -32600},
		{`{"jsonrpc":"2.0","id":"s","method":7}`, `"s"`, -32600},
		{`{"jsonrpc":"2.0","id":[5],"method":"x"}`, "null", -32600},
		{`{"id":5,"result":{}}`, "null", -32600}, // a response's id is the proxy's own
		{`{"id":5,"method":"x"`, "null", -32700},
	} {
		c.send(tc.in)
		c.expectError(tc.id, tc.code)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"params":{}}}`)
	c.expectError("2", -32602)
	c.send(`{"jsonrpc":"2.0","id":99,"result":{}}`) // answers nothing: dropped
	c.quiet()
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{}}}`)
}

// A message longer than the limit is refused if it was a request, and
// fails the call it answers if it was a response.
func TestOversize(t *testing.T) {
	c := serve(t, &proxy.Proxy{MaxMessageBytes: 200})
	// Past the limit and the envelope's allowance (wire.EnvelopeOverhead).
	big := strings.Repeat("x", 200+5000)
	c.send(`{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{"text":"` + big + `"}}`)
	c.expectError(`"big"`, -32600)

	c.send(`{"jsonrpc":"2.0","id":"q","method":"session/prompt","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"text":"` + big + `"}}`)
	c.expectError(`"q"`, -32603)

	// Wherever the id and method come in the line.
	c.send(`{"jsonrpc":"2.0","params":{"text":"` + big + `"},"method":"session/prompt","id":"late"}`)
	c.expectError(`"late"`, -32600)
}

// A handler that panics fails its one request, with -32603, as net/http
// survives a handler's panic: not the proxy, with every session in it.
// The next request is served.
func TestHandlerPanic(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"_example/boom": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				var m map[string]int
				m["x"] = 1 // a nil map
				return nil, nil
			},
			"_example/ok": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage(`"fine"`), nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"_example/boom"}`)
	c.expectError("1", -32603)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"_example/ok"}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"result":"fine"}`)
}

// A handler tells why its context was cancelled from context.Cause: its
// caller's $/cancel_request is ErrCancelled, the proxy stopping (at the
// end of its input, or when Serve's context is done) is ErrClosed.
func TestHandlerCancelCause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stop  func(c *conductor)
		want  error
		wantE error // another error the cause is too, if any
	}{
		{"cancel_request", func(c *conductor) {
			c.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
		}, proxy.ErrCancelled, nil},
		{"input ended", func(c *conductor) { c.in.Close() }, proxy.ErrClosed, nil},
		{"Serve's context", func(c *conductor) { c.cancel() }, proxy.ErrClosed, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cause := make(chan error, 1)
			started := make(chan struct{})
			c := serve(t, &proxy.Proxy{
				Logger: slog.New(slog.DiscardHandler),
				FromPredecessor: map[string]proxy.Handler{
					"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
						close(started)
						<-ctx.Done()
						cause <- context.Cause(ctx)
						return nil, context.Cause(ctx)
					},
				},
			})
			c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
			<-started
			tc.stop(c)
			got := <-cause
			if !errors.Is(got, tc.want) || tc.wantE != nil && !errors.Is(got, tc.wantE) {
				t.Errorf("context.Cause = %v; want one that is %v (and %v)", got, tc.want, tc.wantE)
			}
			if tc.want == proxy.ErrCancelled {
				c.expectError("1", -32800) // as for context.Canceled
			}
		})
	}
}
