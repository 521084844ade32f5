package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-conductor/acp-conductor/internal/testio"
	"github.com/acp-conductor/acp-conductor/proxy"
)

func forwardHandler(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
	return r.Forward(ctx)
}

// A handler changes a request on its way to the agent and the answer on its
// way back; the rest of the params stays as it was.
func TestHandlerRewritesRequestAndAnswer(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				if r.From != proxy.Predecessor || r.IsNotification() {
					return nil, fmt.Errorf("from %v, notification %v", r.From, r.IsNotification())
				}
				params, err := proxy.EditMember(r.Params, "prompt", func(json.RawMessage) (json.RawMessage, error) {
					return json.RawMessage(`[{"type":"text","text":"rewritten"}]`), nil
				})
				if err != nil {
					return nil, err
				}
				r.Params = params
				result, err := r.Forward(ctx)
				if err != nil {
					return nil, err
				}
				return proxy.EditMember(result, "stopReason", func(json.RawMessage) (json.RawMessage, error) {
					return json.RawMessage(`"refusal"`), nil
				})
			},
		},
	})

	c.send(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s1", "prompt":[{"type":"text","text":"hi"}], "_meta":{"a":[1, 2]}}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1", "prompt":[{"type":"text","text":"rewritten"}], "_meta":{"a":[1, 2]}}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn", "_meta":{"b":true}}}`)
	c.expect(`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"refusal", "_meta":{"b":true}}}`)
}

// A handler answers a request from the agent side itself; the client never
// sees it.
func TestHandlerAnswersItself(t *testing.T) { synctest.Test(t, testHandlerAnswersItself) }

func testHandlerAnswersItself(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromSuccessor: map[string]proxy.Handler{
			"session/request_permission": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				if r.From != proxy.Successor {
					return nil, errors.New("wrong side")
				}
				return json.RawMessage(`{"outcome":{"outcome":"selected","optionId":"allow"}}`), nil
			},
		},
	})

	c.send(`{"jsonrpc":"2.0","id":"p1","method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"s1"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	c.quiet()
}

// A handler filters and rewrites notifications from the agent side.
func TestHandlerFiltersNotifications(t *testing.T) { synctest.Test(t, testHandlerFiltersNotifications) }

func testHandlerFiltersNotifications(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromSuccessor: map[string]proxy.Handler{
			"session/update": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				var p struct {
					Update struct {
						Kind string `json:"sessionUpdate"`
					} `json:"update"`
				}
				if err := json.Unmarshal(r.Params, &p); err != nil {
					return nil, err
				}
				switch p.Update.Kind {
				case "agent_thought_chunk":
					return nil, nil // dropped
				case "plan":
					r.Method = "_example/plan"
				}
				return r.Forward(ctx)
			},
		},
	})

	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"update":{"sessionUpdate":"agent_thought_chunk"}}}}`)
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"update":{"sessionUpdate":"plan"}}}}`)
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk"}}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"_example/plan","params":{"update":{"sessionUpdate":"plan"}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk"}}}`)
	c.quiet()
}

// A handler sends requests and notifications of its own to both sides before
// it forwards: a hidden prompt to the agent, a question to the client.
func TestHandlerOwnRequests(t *testing.T) {
	got := make(chan string, 2)
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				conn := r.Conn()
				hidden, err := conn.Call(ctx, proxy.Successor, "session/prompt", map[string]any{
					"sessionId": "s1",
					"prompt":    []map[string]string{{"type": "text", "text": "warm up"}},
				})
				if err != nil {
					return nil, err
				}
				got <- string(hidden)
				file, err := conn.Call(ctx, proxy.Predecessor, "fs/read_text_file", json.RawMessage(`{"sessionId":"s1","path":"/notes"}`))
				if err != nil {
					return nil, err
				}
				got <- string(file)
				if err := conn.Notify(ctx, proxy.Predecessor, "session/update", json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}`)); err != nil {
					return nil, err
				}
				if err := conn.Notify(ctx, proxy.Successor, "_example/hello", nil); err != nil {
					return nil, err
				}
				return r.Forward(ctx)
			},
		},
	})

	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"prompt":[{"text":"warm up","type":"text"}],"sessionId":"s1"}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	if h := <-got; h != `{"stopReason":"end_turn"}` {
		t.Errorf("hidden prompt answered %s", h)
	}
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/notes"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":{"content":"N"}}`)
	if f := <-got; f != `{"content":"N"}` {
		t.Errorf("read answered %s", f)
	}
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_example/hello"}}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
}

// What a handler returns instead of a result decides the error answer.
func TestHandlerErrors(t *testing.T) {
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"a": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return nil, &proxy.Error{Code: proxy.CodeAuthRequired, Message: "auth required", Data: json.RawMessage(`{"x":1}`)}
			},
			"b": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return nil, errors.New("boom")
			},
			"c": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return nil, fmt.Errorf("wrapped: %w", context.Canceled)
			},
			"d": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage(`{"broken"`), nil
			},
			"e": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage("{\n  \"ok\": true\n}"), nil
			},
			// The successor's error, changed, is sent as changed.
			"f": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				_, err := r.Forward(ctx)
				var e *proxy.Error
				if !errors.As(err, &e) {
					return nil, fmt.Errorf("not an *Error: %v", err)
				}
				e.Message = "changed: " + e.Message
				return nil, e
			},
		},
	})

	c.send(`{"jsonrpc":"2.0","id":1,"method":"a"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"auth required","data":{"x":1}}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"b"}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"boom"}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"c"}`)
	c.expectError("3", -32800)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"d"}`)
	c.expectError("4", -32603)
	c.send(`{"jsonrpc":"2.0","id":5,"method":"e"}`)
	c.expect(`{"jsonrpc":"2.0","id":5,"result":{"ok":true}}`)
	c.send(`{"jsonrpc":"2.0","id":6,"method":"f"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"f"}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no","data":[1, 2]}}`)
	c.expect(`{"jsonrpc":"2.0","id":6,"error":{"code":-32000,"message":"changed: no","data":[1,2]}}`)
}

// A request handler whose result is not JSON fails its request, with an
// error that names the proxy and the handler, and the proxy logs it: the
// caller alone would hear of it, and not which handler it was.
func TestHandlerInvalidResult(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{
		Name:   "rewriter",
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage(`{"stopReason":`), nil
			},
			"session/set_mode": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage{}, nil // as from an empty buffer
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"proxy rewriter: the session/prompt handler returned a result that is not JSON"}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/set_mode","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"proxy rewriter: the session/set_mode handler returned a result that is not JSON"}}`)
	c.in.Close()
	c.wait()
	for _, method := range []string{"session/prompt", "session/set_mode"} {
		if !strings.Contains(log.String(), `level=ERROR msg="handler returned a result that is not JSON" method=`+method) {
			t.Errorf("no error logged for the %s handler; log:\n%s", method, log.String())
		}
	}
}

// A request handler that returns neither a result nor an error answers
// "result": null, and the proxy warns of it once for each method; a null
// returned as JSON is taken as meant.
func TestHandlerNilResultWarns(t *testing.T) {
	var log testio.Buffer
	nothing := func(context.Context, *proxy.Request) (json.RawMessage, error) { return nil, nil }
	c := serve(t, &proxy.Proxy{
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		FromPredecessor: map[string]proxy.Handler{
			"session/set_mode": nothing,
			"_example/null": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return json.RawMessage("null"), nil
			},
		},
		FromSuccessor: map[string]proxy.Handler{"fs/write_text_file": nothing},
	})
	for _, id := range []string{"1", "2"} {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/set_mode","params":{}}`)
		c.expect(`{"jsonrpc":"2.0","id":` + id + `,"result":null}`)
	}
	c.send(`{"jsonrpc":"2.0","id":3,"method":"_example/null"}`)
	c.expect(`{"jsonrpc":"2.0","id":3,"result":null}`)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"proxy/successor","params":{"method":"fs/write_text_file","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":4,"result":null}`)
	c.in.Close()
	c.wait()

	var warned []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "nil result") {
			i := strings.Index(line, "method=")
			warned = append(warned, strings.TrimSpace(line[i:]))
		}
	}
	want := []string{"method=session/set_mode from=predecessor", "method=fs/write_text_file from=successor"}
	if !slices.Equal(warned, want) {
		t.Errorf("warnings: %q, want %q\nlog:\n%s", warned, want, log.String())
	}
}

// Serve warns of each handler keyed where it can never run, a misspelt
// ACP method among them, and of no other; the proxy serves all the same.
func TestHandlerNeverRunsWarns(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		FromPredecessor: map[string]proxy.Handler{
			"initialize":       forwardHandler,
			"proxy/initialize": forwardHandler,
			"session/prompt":   forwardHandler,
			"session/update":   forwardHandler,
			"$/cancel_request": forwardHandler,
			"_example/mine":    forwardHandler,
			"_example/Mine":    forwardHandler,
			"Session/Prompt":   forwardHandler,
			"session/prompt ":  forwardHandler,
		},
		FromSuccessor: map[string]proxy.Handler{
			"session/update":            forwardHandler,
			"session/prompt":            forwardHandler,
			"_proxy/successor":          forwardHandler,
			"mcp/connect":               forwardHandler,
			"session/requestPermission": forwardHandler,
			"fs/readTextFile":           forwardHandler,
			"MCP/Message":               forwardHandler,
		},
	})
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{}}}`)

	var warned []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "can never run") {
			i := strings.Index(line, "method=")
			warned = append(warned, strings.TrimSpace(line[i:]))
		}
	}
	want := []string{
		"method=$/cancel_request from=predecessor",
		"method=Session/Prompt from=predecessor",
		"method=proxy/initialize from=predecessor",
		`method="session/prompt " from=predecessor`,
		"method=session/update from=predecessor",
		"method=MCP/Message from=successor",
		"method=_proxy/successor from=successor",
		"method=fs/readTextFile from=successor",
		"method=session/prompt from=successor",
		"method=session/requestPermission from=successor",
	}
	if !slices.Equal(warned, want) {
		t.Errorf("warnings: %q, want %q\nlog:\n%s", warned, want, log.String())
	}
}

// The exported error codes are JSON-RPC's and ACP's, and a handler's error
// goes out with the code it names.
func TestErrorCodes(t *testing.T) {
	for name, c := range map[string]struct{ got, want int }{
		"ParseError":       {proxy.CodeParseError, -32700},
		"InvalidRequest":   {proxy.CodeInvalidRequest, -32600},
		"MethodNotFound":   {proxy.CodeMethodNotFound, -32601},
		"InvalidParams":    {proxy.CodeInvalidParams, -32602},
		"InternalError":    {proxy.CodeInternalError, -32603},
		"AuthRequired":     {proxy.CodeAuthRequired, -32000},
		"ResourceNotFound": {proxy.CodeResourceNotFound, -32002},
		"RequestCancelled": {proxy.CodeRequestCancelled, -32800},
	} {
		if c.got != c.want {
			t.Errorf("Code%s = %d, want %d", name, c.got, c.want)
		}
	}
	c := serve(t, &proxy.Proxy{FromPredecessor: map[string]proxy.Handler{
		"session/load": func(context.Context, *proxy.Request) (json.RawMessage, error) {
			return nil, &proxy.Error{Code: proxy.CodeResourceNotFound, Message: "no such session"}
		},
	}})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"no such session"}}`)
}

// An Error whose Data is not JSON is not lost: it goes out as a JSON
// string of its bytes, and the proxy warns, naming the handler.
func TestHandlerErrorDataNotJSON(t *testing.T) {
	var log testio.Buffer
	c := serve(t, &proxy.Proxy{
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(context.Context, *proxy.Request) (json.RawMessage, error) {
				return nil, &proxy.Error{Code: proxy.CodeInternalError, Message: "failed", Data: json.RawMessage(`not "json"`)}
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"failed","data":"not \"json\""}}`)
	c.in.Close()
	c.wait()
	if !strings.Contains(log.String(), `level=WARN msg="handler returned an Error whose Data is not JSON: sent as a JSON string" method=session/prompt`) {
		t.Errorf("no warning logged; log:\n%s", log.String())
	}
}

// A handler that holds its place past HoldWarning is warned of, naming its
// method and pointing at Detach; one that detaches, or waits for a peer,
// is not. The bubble's clock is fake: its sleeps take no time.
func TestHandlerHoldWarning(t *testing.T) { synctest.Test(t, testHandlerHoldWarning) }

func testHandlerHoldWarning(t *testing.T) {
	var log testio.Buffer
	released := map[bool]chan struct{}{false: make(chan struct{}), true: make(chan struct{})}
	block := func(detach bool) proxy.Handler {
		release := released[detach]
		return func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
			if detach {
				r.Detach()
			}
			<-release
			return json.RawMessage("{}"), nil
		}
	}
	c := serve(t, &proxy.Proxy{
		Logger:      slog.New(slog.NewTextHandler(&log, nil)),
		HoldWarning: 5 * time.Second,
		FromPredecessor: map[string]proxy.Handler{
			"_x/holds":    block(false),
			"_x/detaches": block(true),
			"session/new": forwardHandler,
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"_x/detaches"}`)
	time.Sleep(4 * time.Second)
	synctest.Wait()
	c.send(`{"jsonrpc":"2.0","id":3,"method":"_x/holds"}`)
	time.Sleep(4 * time.Second)
	synctest.Wait()
	if strings.Contains(log.String(), "held its place") {
		t.Fatalf("warned before HoldWarning had passed; log:\n%s", log.String())
	}
	time.Sleep(2 * time.Second)
	synctest.Wait()
	want := `level=WARN msg="a handler has held its place in the outgoing order for over 5s, holding up all later traffic both ways; a handler that waits on anything but its peers should call Request.Detach first" method=_x/holds from=predecessor`
	if got := strings.Count(log.String(), "held its place"); got != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("want one warning, for _x/holds:\n\t%s\nlog:\n%s", want, log.String())
	}
	close(released[false])
	c.expect(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	close(released[true])
	c.expect(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
}

// Each handler that holds its place past HoldWarning is warned of once,
// one queued behind another as well, after it has held its own place
// that long, however long it goes on holding it.
func TestHandlerHoldWarningEach(t *testing.T) { synctest.Test(t, testHandlerHoldWarningEach) }

func testHandlerHoldWarningEach(t *testing.T) {
	var log testio.Buffer
	release := make(chan struct{})
	block := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		<-release
		return json.RawMessage("{}"), nil
	}
	c := serve(t, &proxy.Proxy{
		Logger:          slog.New(slog.NewTextHandler(&log, nil)),
		HoldWarning:     5 * time.Second,
		FromPredecessor: map[string]proxy.Handler{"_x/first": block, "_x/second": block},
	})
	warnings := func(method string) int {
		return strings.Count(log.String(), "held its place in the outgoing order for over 5s, holding up all later traffic both ways; a handler that waits on anything but its peers should call Request.Detach first\" method="+method+" ")
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"_x/first"}`)
	time.Sleep(2 * time.Second)
	synctest.Wait()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"_x/second"}`)
	time.Sleep(4 * time.Second) // 6s
	synctest.Wait()
	if warnings("_x/first") != 1 || warnings("_x/second") != 0 {
		t.Fatalf("at 6s, want _x/first warned of once and _x/second not; log:\n%s", log.String())
	}
	time.Sleep(2 * time.Second) // 8s
	synctest.Wait()
	if warnings("_x/first") != 1 || warnings("_x/second") != 1 {
		t.Fatalf("at 8s, want each warned of once; log:\n%s", log.String())
	}
	time.Sleep(time.Minute)
	synctest.Wait()
	if got := strings.Count(log.String(), "held its place"); got != 2 {
		t.Errorf("%d warnings after a minute more, want 2; log:\n%s", got, log.String())
	}
	close(release)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"result":{}}`)
}

// A HoldWarning under MinHoldWarning is taken as MinHoldWarning: a
// handler is not warned of before then, nor the watcher woken continually.
func TestHandlerHoldWarningFloor(t *testing.T) { synctest.Test(t, testHandlerHoldWarningFloor) }

func testHandlerHoldWarningFloor(t *testing.T) {
	var log testio.Buffer
	release := make(chan struct{})
	c := serve(t, &proxy.Proxy{
		Logger:      slog.New(slog.NewTextHandler(&log, nil)),
		HoldWarning: time.Nanosecond,
		FromPredecessor: map[string]proxy.Handler{
			"_x/holds": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				<-release
				return json.RawMessage("{}"), nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"_x/holds"}`)
	time.Sleep(proxy.MinHoldWarning / 2)
	synctest.Wait()
	if strings.Contains(log.String(), "held its place") {
		t.Fatalf("warned before MinHoldWarning had passed; log:\n%s", log.String())
	}
	time.Sleep(proxy.MinHoldWarning)
	synctest.Wait()
	want := fmt.Sprintf("held its place in the outgoing order for over %v,", proxy.MinHoldWarning)
	if got := strings.Count(log.String(), "held its place"); got != 1 || !strings.Contains(log.String(), want) {
		t.Errorf("want one warning, %q; log:\n%s", want, log.String())
	}
	close(release)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
}

// stuckWarn is a log handler whose warning that a handler holds its place
// blocks until released, as a log written to a pipe nobody reads would.
type stuckWarn struct{ entered, release chan struct{} }

func (s stuckWarn) Enabled(context.Context, slog.Level) bool { return true }
func (s stuckWarn) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s stuckWarn) WithGroup(string) slog.Handler            { return s }
func (s stuckWarn) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "held its place") {
		close(s.entered)
		<-s.release
	}
	return nil
}

// A handler that returns while the warning that it held its place is
// being logged is answered at once: the log, however slow, holds up no
// traffic.
func TestHandlerHoldWarningLogsAside(t *testing.T) {
	log := stuckWarn{entered: make(chan struct{}), release: make(chan struct{})}
	defer close(log.release)
	c := serve(t, &proxy.Proxy{
		Logger:      slog.New(log),
		HoldWarning: 10 * time.Millisecond,
		FromPredecessor: map[string]proxy.Handler{
			"_x/holds": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				<-log.entered
				return json.RawMessage("{}"), nil
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"_x/holds"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"_x/note","params":{}}`) // queued behind the handler's place
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_x/note","params":{}}}`)
}
