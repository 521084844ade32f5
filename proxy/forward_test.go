package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/testio"
	"github.com/acp-conductor/acp-conductor/proxy"
)

// Unclaimed traffic goes through with params, ids and _meta exactly as they
// came; only the envelope changes.

func TestForwardFromPredecessor(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	c.send(`{"jsonrpc":"2.0","id":"a1","method":"session/new","params":{"cwd" : "/tmp","mcpServers":[ ],"_meta":{"traceparent":"00-abc-01"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{"cwd" : "/tmp","mcpServers":[ ],"_meta":{"traceparent":"00-abc-01"}}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1", "_meta":{"x":[1, 2.50]}}}`)
	c.expect(`{"jsonrpc":"2.0","id":"a1","result":{"sessionId":"s1", "_meta":{"x":[1, 2.50]}}}`)

	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1","_meta":{"why":"user"}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1","_meta":{"why":"user"}}}}`)

	// A request without params, and extension methods, go through too.
	c.send(`{"jsonrpc":"2.0","id":9,"method":"_vendor/ping"}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"_vendor/ping"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":null}`)
	c.expect(`{"jsonrpc":"2.0","id":9,"result":null}`)
}

func TestForwardFromSuccessor(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	// The envelope's own _meta belongs to the hop and stays behind.
	c.send(`{"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1","options":[],"_meta":{"k":"v"}},"_meta":{"hop":true}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","options":[],"_meta":{"k":"v"}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"},"_meta":{"r":1}}}`)
	c.expect(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"cancelled"},"_meta":{"r":1}}}`)

	// Any other member of the envelope's params is the carried message's
	// own, and goes on with it (TestUnknownMembersGoOn).
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"meta":{"hop":1},"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \u00e9\n"}}}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \u00e9\n"}}},"meta":{"hop":1}}`)
}

// Ids the conductor uses for plain and wrapped requests, and ids the proxy
// uses toward either side, never get mixed up.
func TestForwardBothWaysInterleaved(t *testing.T) {
	c := serve(t, &proxy.Proxy{})

	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"path":"/a"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"path":"/a"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":{"content":"A"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":"A"}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
}

// An error from the successor reaches the predecessor exactly as it was
// sent, whether relayed or passed back by a handler.
func TestForwardError(t *testing.T) {
	const errObj = `{"message":"no such session", "code":-32602,"data":{"sessionId":"s9","detail":[1, 2]},"extra":true}`
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})

	c.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":1,"error":` + errObj + `}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"error":` + errObj + `}`)

	c.send(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","id":2,"error":` + errObj + `}`)
	c.expect(`{"jsonrpc":"2.0","id":4,"error":` + errObj + `}`)
}

// An error's code is an integer however it is written, as JSON-RPC reads
// a number and as the wire's check of an error object has it: the *Error
// Forward returns has the code's value and the message, not a malformed
// error object's -32603, and a handler that answers with a new Error made
// of them sends that value, wider than 32 bits too.
func TestForwardErrorCodeSpelled(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/load": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				_, err := r.Forward(ctx)
				if e, ok := errors.AsType[*proxy.Error](err); ok {
					return nil, &proxy.Error{Code: e.Code, Message: e.Message, Data: e.Data}
				}
				return nil, fmt.Errorf("Forward returned %v, not an *Error", err)
			},
		},
	})
	for i, tt := range []struct{ answer, want string }{
		{`{"code":1.0,"message":"no"}`, `{"code":1,"message":"no"}`},
		{`{"code":-3.2e4,"message":"no","data":[1]}`, `{"code":-32000,"message":"no","data":[1]}`},
		{`{"code":1E3,"m\u0065ssage":"n\u00e9"}`, `{"code":1000,"message":"né"}`},
		{`{"code":3000000000,"message":"wide"}`, `{"code":3000000000,"message":"wide"}`},
		{`{"code":-32601,"message":"no","Message":"other"}`, `{"code":-32601,"message":"no"}`},
	} {
		relayAnswer(t, c, 10+i, "session/load", `"error":`+tt.answer)
		c.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":%s}`, 10+i, tt.want))
	}
}

// relayAnswer has the side that asks method (the predecessor session/*,
// the successor fs/*) ask it under id, and the other side answer the
// request the proxy relays with answer, the members after the id. The
// proxy's answer to the asker is the next line to read.
func relayAnswer(t *testing.T, c *conductor, id int, method, answer string) {
	t.Helper()
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, id, method)
	if strings.HasPrefix(method, "fs/") {
		req = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"proxy/successor","params":{"method":%q,"params":{}}}`, id, method)
	}
	c.send(req)
	relayed := idOf(t, c.recv())
	c.send(`{"jsonrpc":"2.0","id":` + relayed + `,` + answer + `}`)
}

// warnedOnceEachSide checks that of the lines of a text log that contain
// what, one was logged at WARN level from each side; it returns how many
// contain what.
func warnedOnceEachSide(t *testing.T, log, what string) (logged int) {
	t.Helper()
	warned := map[string]int{}
	for line := range strings.Lines(log) {
		if !strings.Contains(line, what) {
			continue
		}
		logged++
		if strings.Contains(line, "level=WARN") {
			_, from, _ := strings.Cut(line, "from=")
			from, _, _ = strings.Cut(from, " id=")
			warned[from]++
		}
	}
	if want := map[string]int{`"its successor"`: 1, `"its predecessor"`: 1}; !maps.Equal(warned, want) {
		t.Errorf("warnings by side: %v, want %v\nlog:\n%s", warned, want, log)
	}
	return logged
}

// An answer with both a result and an error, which JSON-RPC forbids, is
// taken as the error alone, relayed or returned by Forward, as the
// conductor takes it; the first from each side is warned of, with the
// result dropped, the rest counted, the count logged at debug level at
// the end. A result beside "error": null is the result.
func TestResponseWithBothMembers(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{
		Logger:          slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FromPredecessor: map[string]proxy.Handler{"session/load": forwardHandler},
	})
	const errObj = `{"code":-32000,"message":"no"}`
	for i, tt := range []struct {
		method, answer, want string // who asks: session/* the predecessor, fs/* the successor
	}{
		{"session/prompt", `"result":{"stopReason":"end_turn"},"error":` + errObj, `"error":` + errObj},
		{"session/prompt", `"error":` + errObj + `,"result":null`, `"error":` + errObj},
		{"session/load", `"result":{},"error":` + errObj, `"error":` + errObj},
		{"session/prompt", `"result":{"stopReason":"end_turn"},"error":null`, `"result":{"stopReason":"end_turn"}`},
		{"fs/read_text_file", `"result":{"content":""},"error":` + errObj, `"error":` + errObj},
	} {
		relayAnswer(t, c, 10+i, tt.method, tt.answer)
		c.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, 10+i, tt.want))
	}
	c.in.Close()
	c.wait()

	// The successor's three: one warned of, two counted; the predecessor's
	// one warned of.
	logged := warnedOnceEachSide(t, log.String(), "response with both result and error")
	if logged != 3 || !strings.Contains(log.String(), `level=DEBUG msg="response with both result and error, which JSON-RPC 2.0 forbids: taken as the error, its result dropped, in all" from="its successor" count=3`) {
		t.Errorf("%d responses with both members logged, want 3, the last a count of the successor's 3\nlog:\n%s", logged, log.String())
	}
}

// An answer whose error is not an object with an integer code and a string
// message, which the TypeScript SDK does not read as a response, reaches
// the asker as the proxy's -32603, naming the proxy and the side that
// answered, with the error as it came in data: relayed, and as the *Error
// Forward returns, whose fields say so. A well-formed error goes on as it
// came. The first malformed error from each side is warned of, the rest
// counted, the count logged at debug level at the end.
func TestResponseWithMalformedError(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{
		Name:   "tester",
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		FromPredecessor: map[string]proxy.Handler{
			// Answers with a new Error made of the fields of Forward's.
			"session/load": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				_, err := r.Forward(ctx)
				if e, ok := errors.AsType[*proxy.Error](err); ok {
					return nil, &proxy.Error{Code: e.Code, Message: e.Message, Data: e.Data}
				}
				return nil, fmt.Errorf("Forward returned %v, not an *Error", err)
			},
		},
	})
	const (
		bySuccessor   = `{"code":-32603,"message":"proxy tester: its successor answered with a malformed error, not an object with an integer code and a string message","data":%s}`
		byPredecessor = `{"code":-32603,"message":"proxy tester: its predecessor answered with a malformed error, not an object with an integer code and a string message","data":%s}`
	)
	for i, tt := range []struct {
		method string // who asks: session/* the predecessor, fs/* the successor
		answer string // the members after the id
		want   string // the error the asker gets
	}{
		{"session/prompt", `"error":null`, fmt.Sprintf(bySuccessor, `null`)},
		{"session/prompt", `"error":"boom"`, fmt.Sprintf(bySuccessor, `"boom"`)},
		{"session/prompt", `"error":{"code":"-32000","message":"no"}`, fmt.Sprintf(bySuccessor, `{"code":"-32000","message":"no"}`)},
		{"session/prompt", `"error":{"code":-32000.5,"message":"no"}`, fmt.Sprintf(bySuccessor, `{"code":-32000.5,"message":"no"}`)},
		{"session/prompt", `"error" : { "code" : 1 , "data" : "<&>" }`, fmt.Sprintf(bySuccessor, `{ "code" : 1 , "data" : "<&>" }`)},
		{"session/prompt", `"result":{"stopReason":"end_turn"},"error":[1]`, fmt.Sprintf(bySuccessor, `[1]`)},
		{"session/prompt", `"error":{"code":-32000,"message":"no","data":null}`, `{"code":-32000,"message":"no","data":null}`}, // as it came
		{"session/load", `"error":null`, fmt.Sprintf(bySuccessor, `null`)},
		{"fs/read_text_file", `"error":null`, fmt.Sprintf(byPredecessor, `null`)},
		{"fs/read_text_file", `"err\u006fr":{"message":"gone"}`, fmt.Sprintf(byPredecessor, `{"message":"gone"}`)},
	} {
		relayAnswer(t, c, 10+i, tt.method, tt.answer)
		if got, want := c.recv(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":%s}`, 10+i, tt.want); got != want {
			t.Errorf("answered with %s, the asker got\n%s\nwant\n%s", tt.answer, got, want)
		}
	}
	c.in.Close()
	c.wait()

	// Each side's first warned of, and a count of each side's at the end.
	logged := warnedOnceEachSide(t, log.String(), "answered as the proxy's -32603")
	if logged != 4 || !strings.Contains(log.String(), `in all" from="its successor" count=7`) || !strings.Contains(log.String(), `in all" from="its predecessor" count=2`) {
		t.Errorf("%d malformed errors logged, want 4, with counts of 7 from the successor and 2 from the predecessor\nlog:\n%s", logged, log.String())
	}
}

// TestBadAnswersFlood: a peer that answers every request badly, which
// it may do without end, cannot flood the proxy's log: the first of each
// kind is warned of, the rest counted, and the count logged at the end.
func TestBadAnswersFlood(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const flood = 200
	for i := range flood {
		relayAnswer(t, c, 10+2*i, "session/prompt", `"result":{},"error":{"code":1,"message":"no"}`)
		c.recv()
		relayAnswer(t, c, 11+2*i, "session/prompt", `"error":"boom"`)
		c.recv()
	}
	c.in.Close()
	c.wait()
	for _, what := range []string{"response with both result and error", "response with a malformed error"} {
		var lines []string
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, what) {
				lines = append(lines, line)
			}
		}
		if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[1], fmt.Sprintf(`in all" from="its successor" count=%d`, flood)) {
			t.Errorf("%d answers logged in %d lines %q, want 2: a warning and then the count", flood, len(lines), lines)
		}
	}
}

// A message's top-level members that JSON-RPC does not define reach its
// recipient as they came, after the members the proxy writes, wherever the
// proxy rebuilds it, as the conductor carries them: a relayed request
// under the proxy's id, and its answer under the caller's; a notification;
// a cancel; each way, and through a handler's Forward, whatever it makes
// of the message and of the answer it returns. Wrapped, they go in the
// envelope's params beside the carried method and params; unwrapped, those
// members of the params are the message's, but for the envelope's _meta
// and names JSON-RPC defines, and the envelope's own top-level members end
// with it. Each row is a conversation: "> " what the conductor sends, "< "
// what the proxy must send.
func TestUnknownMembersGoOn(t *testing.T) {
	edit := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		result, err := r.Forward(ctx)
		if err != nil {
			return nil, err
		}
		return proxy.EditMember(result, "edited", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage("true"), nil })
	}
	for _, tt := range []struct {
		name  string
		lines []string
	}{
		{"request from the predecessor, relayed", []string{
			`> {"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{"sessionId":"s1"},"x-trace":{"span":[1, 2]}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1"},"x-trace":{"span":[1, 2]}}}`,
		}},
		{"request without params from the predecessor, relayed", []string{
			`> {"jsonrpc":"2.0","id":"a","method":"_vendor/ping","x\u0041":null}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"_vendor/ping","x\u0041":null}}`,
		}},
		{"answer from the successor, relayed", []string{
			`> {"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`,
			`> {"x-first":0,"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"},"x-r":1}`,
			`< {"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"},"x-first":0,"x-r":1}`,
		}},
		{"request from the successor, relayed", []string{
			`> {"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"session/request_permission","params":{},"_meta":{"hop":1},"id":99,"x-trace":[1],"jsonrpc":"1.0"},"x-hop":2}`,
			`< {"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{},"x-trace":[1]}`,
		}},
		{"answer from the predecessor, relayed", []string{
			`> {"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}`,
			`> {"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"},"x-r":"a"}`,
			`< {"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"no"},"x-r":"a"}`,
		}},
		{"notification from the predecessor", []string{
			`> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"},"x-trace":"t"}`,
			`< {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"},"x-trace":"t"}}`,
		}},
		{"notification from the successor", []string{
			`> {"jsonrpc":"2.0","method":"proxy/successor","params":{"m\u0065thod":"session/update","x\u0041":1,"params":{"sessionId":"s1"},"_m\u0065ta":{}}}`,
			`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"},"x\u0041":1}`,
		}},
		{"cancel of a request relayed from the predecessor", []string{
			`> {"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`,
			`> {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"a"},"x-trace":1}`,
			`< {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1},"x-trace":1}`,
		}},
		{"cancel, wrapped, of a request relayed from the successor", []string{
			`> {"jsonrpc":"2.0","id":7,"method":"proxy/successor","params":{"method":"fs/write_text_file","params":{}}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{}}`,
			`> {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"$/cancel_request","params":{"requestId":7},"x-trace":2}}`,
			`< {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1},"x-trace":2}`,
		}},
		{"request from the predecessor through Forward", []string{
			`> {"jsonrpc":"2.0","id":"l","method":"session/load","params":{"sessionId":"s1"},"x-trace":1}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/load","params":{"sessionId":"s1"},"x-trace":1}}`,
		}},
		{"cancel of a request a handler forwarded", []string{
			`> {"jsonrpc":"2.0","id":"l","method":"session/load","params":{}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`,
			`> {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"l"},"x-c":1}`,
			`< {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1},"x-c":1}`,
		}},
		{"answer through Forward, which the handler edits", []string{
			`> {"jsonrpc":"2.0","id":"l","method":"session/load","params":{}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`,
			`> {"jsonrpc":"2.0","id":1,"result":{},"x-r":2}`,
			`< {"jsonrpc":"2.0","id":"l","result":{"edited":true},"x-r":2}`,
		}},
		{"request from the successor through Forward", []string{
			`> {"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"path":"/a"},"x-trace":1}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"path":"/a"},"x-trace":1}`,
		}},
		{"error answer through Forward", []string{
			`> {"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"fs/read_text_file","params":{"path":"/a"}}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"path":"/a"}}`,
			`> {"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"},"x-r":2}`,
			`< {"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"no"},"x-r":2}`,
		}},
		{"notification from the predecessor through Forward", []string{
			`> {"jsonrpc":"2.0","method":"_x/note","params":{},"x-trace":1}`,
			`< {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_x/note","params":{},"x-trace":1}}`,
		}},
		{"notification from the successor through Forward", []string{
			`> {"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_x/note","x-trace":2}}`,
			`< {"jsonrpc":"2.0","method":"_x/note","x-trace":2}`,
		}},
		{"proxy/initialize", []string{
			`> {"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1},"x-trace":1}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1},"x-trace":1}}`,
		}},
		{"the answer to initialize, as the proxy makes it", []string{
			`> {"jsonrpc":"2.0","id":0,"method":"proxy/initialize","params":{"protocolVersion":1}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{"protocolVersion":1}}}`,
			`> {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1},"x-r":2}`,
			`< {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"acp":true}}},"x-r":2}`,
		}},
		{"none", []string{
			`> {"jsonrpc":"2.0","id":"l","method":"session/load","params":{}}`,
			`< {"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/load","params":{}}}`,
			`> {"jsonrpc":"2.0","id":1,"result":{}}`,
			`< {"jsonrpc":"2.0","id":"l","result":{"edited":true}}`,
			`> {"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{}}`,
			`< {"jsonrpc":"2.0","id":2,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`,
			`> {"jsonrpc":"2.0","id":2,"result":{}}`,
			`< {"jsonrpc":"2.0","id":"p","result":{}}`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, &proxy.Proxy{
				FromPredecessor: map[string]proxy.Handler{"session/load": edit, "_x/note": forwardHandler},
				FromSuccessor:   map[string]proxy.Handler{"fs/read_text_file": forwardHandler, "_x/note": forwardHandler},
			})
			for _, line := range tt.lines {
				if send, ok := strings.CutPrefix(line, "> "); ok {
					c.send(send)
				} else {
					c.expect(strings.TrimPrefix(line, "< "))
				}
			}
		})
	}
}
