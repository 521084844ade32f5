package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/acp-conductor/acp-conductor/proxy"
)

// jitter lets other goroutines run for a random while, so that concurrent
// handlers finish in orders of their own: it varies the schedule, not the
// clock, and synchronises nothing.
func jitter() {
	for range rand.IntN(20) {
		runtime.Gosched()
	}
}

// Under load, with handlers running concurrently and slowly, the client sees
// the agent's traffic in exactly the order the agent sent it: every update
// before the answer that followed it. On an operating-system pipe, Serve
// writes much of it without its writer goroutine.
func TestOrderUnderLoad(t *testing.T) {
	t.Run("io.Pipe", func(t *testing.T) { testOrderUnderLoad(t, false) })
	t.Run("os.Pipe", func(t *testing.T) { testOrderUnderLoad(t, true) })
}

func testOrderUnderLoad(t *testing.T, osPipe bool) {
	slow := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		jitter()
		result, err := r.Forward(ctx)
		jitter()
		return result, err
	}
	for _, tt := range []struct {
		name string
		p    *proxy.Proxy
	}{
		{"relayed", &proxy.Proxy{}},
		{"handled", &proxy.Proxy{
			FromPredecessor: map[string]proxy.Handler{"session/prompt": slow},
			FromSuccessor: map[string]proxy.Handler{
				"session/update":             slow,
				"session/request_permission": slow,
			},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const sessions = 40
			var c *conductor
			if osPipe {
				c = serveOS(t, tt.p, false)
			} else {
				c = serve(t, tt.p)
			}

			// The client starts a prompt in every session.
			for k := range sessions {
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":{"sessionId":"s%d","prompt":[]}}`, k, k))
			}
			ours := make(map[string]json.RawMessage) // session -> id the prompt went on under
			for range sessions {
				var env struct {
					ID     json.RawMessage
					Params struct {
						Params struct {
							SessionID string
						}
					}
				}
				if err := json.Unmarshal([]byte(c.recv()), &env); err != nil {
					t.Fatal(err)
				}
				ours[env.Params.Params.SessionID] = env.ID
			}

			// The agents' traffic, interleaved at random across sessions but in
			// order within each: updates, a permission request, the answer.
			type step struct{ in, out string }
			script := make([][]step, sessions)
			for k := range sessions {
				s := fmt.Sprintf("s%d", k)
				update := func(n int) step {
					p := fmt.Sprintf(`{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","n":%d}}`, s, n)
					return step{
						`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":` + p + `}}`,
						`{"jsonrpc":"2.0","method":"session/update","params":` + p + `}`,
					}
				}
				script[k] = []step{
					update(1),
					update(2),
					{
						fmt.Sprintf(`{"jsonrpc":"2.0","id":"perm%d","method":"proxy/successor","params":{"method":"session/request_permission","params":{"sessionId":"%s"}}}`, k, s),
						fmt.Sprintf(`{"jsonrpc":"2.0","id":_,"method":"session/request_permission","params":{"sessionId":"%s"}}`, s),
					},
					update(3),
					{
						fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, ours[s]),
						fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","result":{"stopReason":"end_turn"}}`, k),
					},
				}
			}
			var want []string
			for len(script) > 0 {
				k := rand.IntN(len(script))
				st := script[k][0]
				if script[k] = script[k][1:]; len(script[k]) == 0 {
					script = append(script[:k], script[k+1:]...)
				}
				c.send(st.in)
				want = append(want, st.out)
			}

			anyID := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":\d+,"method"`)
			for i, w := range want {
				got := anyID.ReplaceAllString(c.recv(), `{"jsonrpc":"2.0","id":_,"method"`)
				if got != w {
					t.Fatalf("message %d:\n\tgot  %s\n\twant %s", i, got, w)
				}
			}
		})
	}
}

// A running handler holds its message's place: a cancel sent after a prompt
// goes on after it, however long the handler takes. (In a synctest bubble,
// synctest.Wait returns once the proxy has done all it can with what it
// read: then the handler, still running, lets go.)
func TestOrderHandlerHoldsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proceed := make(chan struct{})
		c := serve(t, &proxy.Proxy{
			FromPredecessor: map[string]proxy.Handler{
				"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
					<-proceed
					return r.Forward(ctx)
				},
			},
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1"}}`)
		c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
		synctest.Wait()
		close(proceed)
		c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"sessionId":"s1"}}}`)
		c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"sessionId":"s1"}}}`)
	})
}

// A handler that rewrites an answer delivers it before what the agent sent
// after the answer.
func TestOrderRewrittenAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		proceed := make(chan struct{})
		c := serve(t, &proxy.Proxy{
			FromPredecessor: map[string]proxy.Handler{
				"session/new": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
					result, err := r.Forward(ctx)
					if err != nil {
						return nil, err
					}
					<-proceed
					return proxy.EditMember(result, "modes", func(json.RawMessage) (json.RawMessage, error) {
						return json.RawMessage(`null`), nil
					})
				},
			},
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`)
		c.recv()
		c.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
		c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"sessionId":"s1"}}}`)
		synctest.Wait() // the update has arrived while the handler rewrites the answer
		close(proceed)
		c.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","modes":null}}`)
		c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1"}}`)
	})
}

// A handler waiting for a peer holds nothing up. Here a hidden prompt can
// only finish once the client has answered the agent's permission request,
// which passes the waiting handler both ways; once the hidden prompt is
// answered, the handler is back in order, ahead of what arrived after.
func TestOrderWaitingHandlerLetsTrafficPass(t *testing.T) {
	synctest.Test(t, testOrderWaitingHandlerLetsTrafficPass)
}

func testOrderWaitingHandlerLetsTrafficPass(t *testing.T) {
	proceed := make(chan struct{})
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				if _, err := r.Conn().Call(ctx, proxy.Successor, "session/prompt", json.RawMessage(`{"hidden":true}`)); err != nil {
					return nil, err
				}
				<-proceed
				return r.Forward(ctx)
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":"u1","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{"hidden":true}}}`)

	c.send(`{"jsonrpc":"2.0","id":"a1","method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{}}`)
	c.send(`{"jsonrpc":"2.0","id":2,"result":{"outcome":{"outcome":"selected","optionId":"ok"}}}`)
	c.expect(`{"jsonrpc":"2.0","id":"a1","result":{"outcome":{"outcome":"selected","optionId":"ok"}}}`)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"early":true}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"early":true}}}`)

	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"late":true}}`)
	synctest.Wait() // the late cancel has arrived while the handler runs again
	close(proceed)
	c.expect(`{"jsonrpc":"2.0","id":3,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{"late":true}}}`)
}

// A detached handler no longer holds later traffic back.
func TestOrderDetach(t *testing.T) {
	release := make(chan struct{})
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				r.Detach()
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return r.Forward(ctx)
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}`)
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":{}}}`)
	close(release)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
}

// A handler that resumes with an answer is ordered from the answer's arrival,
// not from its message's: here the writer is held up by another handler, and
// an update that arrived before the answer must still go first.
func TestOrderResumeTakesNewPlace(t *testing.T) {
	synctest.Test(t, testOrderResumeTakesNewPlace)
}

func testOrderResumeTakesNewPlace(t *testing.T) {
	release := make(chan struct{})
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"_example/slow": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				<-release // holds its place, and so everything behind it
				return json.RawMessage(`"slow"`), nil
			},
			"session/new": forwardHandler,
		},
	})
	c.send(`{"jsonrpc":"2.0","id":"a","method":"_example/slow"}`)
	c.send(`{"jsonrpc":"2.0","id":"b","method":"session/new","params":{}}`)
	synctest.Wait() // session/new is queued, under id 1, behind _example/slow
	c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"first":true}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	synctest.Wait() // the update and the answer are in
	close(release)
	c.expect(`{"jsonrpc":"2.0","id":"a","result":"slow"}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{}}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"first":true}}`)
	c.expect(`{"jsonrpc":"2.0","id":"b","result":{"sessionId":"s1"}}`)
}

// Through an operating-system pipe that the conductor is slow to read, so
// that it fills and the proxy must queue what it cannot write at once, and
// with handlers running concurrently, the proxy still sends everything in
// the order it arrived. Now and then the test reads everything sent so far,
// so that the queue is empty and the proxy writes without a hand-off.
func TestOrderFullPipe(t *testing.T) {
	slow := func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
		jitter()
		return r.Forward(ctx)
	}
	c := serveOS(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{"session/prompt": slow},
		FromSuccessor:   map[string]proxy.Handler{"session/update": slow},
	}, true)
	var want []string
	anyID := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":\d+,`)
	checked := 0
	check := func() { // receives and checks everything sent so far
		t.Helper()
		for ; checked < len(want); checked++ {
			got := anyID.ReplaceAllString(c.recv(), `{"jsonrpc":"2.0","id":_,`)
			if w := want[checked]; got != w {
				t.Fatalf("message %d:\n\tgot  %.100s\n\twant %.100s", checked, got, w)
			}
		}
	}
	for i := range 300 {
		pad := ""
		if rand.IntN(5) == 0 {
			pad = strings.Repeat("x", rand.IntN(40<<10))
		}
		p := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad)
		switch rand.IntN(4) {
		case 0: // handled, from the client
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/prompt","params":%s}`, i, p))
			want = append(want, `{"jsonrpc":"2.0","id":_,"method":"proxy/successor","params":{"method":"session/prompt","params":`+p+`}}`)
		case 1: // handled, from the agent
			c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":` + p + `}}`)
			want = append(want, `{"jsonrpc":"2.0","method":"session/update","params":`+p+`}`)
		case 2: // relayed, from the client
			c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":` + p + `}`)
			want = append(want, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/cancel","params":`+p+`}}`)
		default: // relayed, from the agent
			c.send(`{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"_example/note","params":` + p + `}}`)
			want = append(want, `{"jsonrpc":"2.0","method":"_example/note","params":`+p+`}`)
		}
		switch {
		case i == 50:
			c.startReading()
		case i > 50 && rand.IntN(20) == 0:
			check()
		}
	}
	check()
}

// What a handler sends under context.Background() goes past what it sent
// before in its own place, while an earlier handler holds its place up;
// under its ctx, or context.WithoutCancel(ctx), it keeps the order it was
// sent in (see Conn.Call).
func TestOrderMixedContexts(t *testing.T) { synctest.Test(t, testOrderMixedContexts) }

func testOrderMixedContexts(t *testing.T) {
	release := make(chan struct{})
	update := func(n int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)) }
	c := serve(t, &proxy.Proxy{
		FromPredecessor: map[string]proxy.Handler{
			"_example/slow": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				<-release // holds its place, and so everything behind it
				return json.RawMessage(`"slow"`), nil
			},
			"session/prompt": func(ctx context.Context, r *proxy.Request) (json.RawMessage, error) {
				conn := r.Conn()
				conn.Notify(ctx, proxy.Predecessor, "session/update", update(1))
				conn.Notify(context.Background(), proxy.Predecessor, "session/update", update(2))
				conn.Notify(context.WithoutCancel(ctx), proxy.Predecessor, "session/update", update(3))
				return r.Forward(ctx)
			},
		},
	})
	c.send(`{"jsonrpc":"2.0","id":"a","method":"_example/slow"}`)
	c.send(`{"jsonrpc":"2.0","id":"b","method":"session/prompt","params":{}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":2}}`)
	c.quiet() // the rest waits behind _example/slow
	close(release)
	c.expect(`{"jsonrpc":"2.0","id":"a","result":"slow"}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}`)
	c.expect(`{"jsonrpc":"2.0","method":"session/update","params":{"n":3}}`)
	c.expect(`{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`)
	c.send(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	c.expect(`{"jsonrpc":"2.0","id":"b","result":{"stopReason":"end_turn"}}`)
}
