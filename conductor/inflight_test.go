package conductor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

// TestInflightReusedID: a client that reuses an id while its first request
// with it is open has two requests in flight. Draining waits for both; a
// cancel by that id finds the later one, and the earlier once the later
// is answered.
func TestInflightReusedID(t *testing.T) {
	p := newPeer("client", 0, nil, zap.NewNop())
	first := &call{from: p, fromID: json.RawMessage(`7`)}
	second := &call{from: p, fromID: json.RawMessage(`7`)}
	other := &call{from: p, fromID: json.RawMessage(`"x"`)}
	for _, c := range []*call{first, second, other} {
		if e := p.track(c); e != nil {
			t.Fatal(e)
		}
	}
	idle := p.stopTaking(wire.Errorf(codeInternalError, "stopping"))
	if got := p.inFlight([]byte(`7`)); got != second {
		t.Errorf("cancel for 7 finds %p, want the later request %p", got, second)
	}
	for i, c := range []*call{second, other, first} {
		select {
		case <-idle:
			t.Fatalf("drained with %d requests in flight", p.inFlightCount())
		default:
		}
		c.done()
		if i == 0 {
			if got := p.inFlight([]byte(`7`)); got != first {
				t.Errorf("once the later is answered, cancel for 7 finds %p, want %p", got, first)
			}
		}
	}
	select {
	case <-idle:
	default:
		t.Fatalf("not drained with %d requests in flight", p.inFlightCount())
	}
	first.done() // answered twice: nothing changes
	if n := p.inFlightCount(); n != 0 {
		t.Errorf("%d requests in flight, want 0", n)
	}
}

// TestInflightSpelledOtherwise: a cancel finds the request whose id is the
// same value spelled otherwise, and the very bytes before that: 2^53+1 and
// 2^53, one double, are two requests.
func TestInflightSpelledOtherwise(t *testing.T) {
	p := newPeer("client", 0, nil, zap.NewNop())
	ids := []string{`7`, `"a"`, `9007199254740993`, `9007199254740992`}
	calls := map[string]*call{}
	for _, id := range ids {
		calls[id] = &call{from: p, fromID: json.RawMessage(id)}
		if e := p.track(calls[id]); e != nil {
			t.Fatal(e)
		}
	}
	for _, tt := range []struct{ cancel, want string }{
		{`7`, `7`},
		{`7.0`, `7`},
		{`0.7e1`, `7`},
		{`"\u0061"`, `"a"`},
		{`9007199254740993`, `9007199254740993`},
		{`9007199254740992`, `9007199254740992`},
		{`8`, ``},
		{`"7"`, ``},
		{`"A"`, ``},
	} {
		if got := p.inFlight([]byte(tt.cancel)); got != calls[tt.want] {
			t.Errorf("cancel for %s finds %v, want the request %s", tt.cancel, got, tt.want)
		}
	}
}

// TestInflightFindSpellings: a cancel finds a request by the same id
// however either is spelled, the newest of several, and the one with its
// very bytes before any other; a number is never a string, and an id that
// is no JSON number or string is only its own bytes.
func TestInflightFindSpellings(t *testing.T) {
	for _, tt := range []struct {
		inflight []string // oldest first
		cancel   string
		want     int // the index in inflight, or -1
	}{
		{[]string{`1`}, `1`, 0},
		{[]string{`1`}, `1.0`, 0},
		{[]string{`1`}, `1e0`, 0},
		{[]string{`1`}, `1E+0`, 0},
		{[]string{`1`}, `10e-1`, 0},
		{[]string{`1.0`}, `1`, 0},
		{[]string{`1e0`}, `1.0`, 0},
		{[]string{`-7`}, `-7.00`, 0},
		{[]string{`0`}, `-0`, 0},
		{[]string{`-0`}, `0`, 0},
		{[]string{`1234567890123456`}, `1.234567890123456e15`, 0},
		{[]string{`"a"`}, `"\u0061"`, 0},
		{[]string{`"\u0061"`}, `"a"`, 0},
		{[]string{`"p-1"`}, `"\u0070\u002D1"`, 0},
		{[]string{`"a/b"`}, `"a\/b"`, 0},
		{[]string{`"é"`}, `"\u00e9"`, 0},
		{[]string{`"\ud83d\ude00"`}, `"😀"`, 0},
		{[]string{"\"\xff\""}, `"\ufffd"`, 0},
		{[]string{`1.0`, `1e0`, `2`}, `1`, 1},
		{[]string{`1`, `1.0`}, `1`, 0},
		{[]string{`"\u0061"`, `"a"`, `"b"`}, `"\u0061"`, 0},
		{[]string{`1`, `2`}, `3`, -1},
		{[]string{`1`}, `"1"`, -1},
		{[]string{`"1"`}, `1`, -1},
		{[]string{`1`}, `01`, -1},
		{[]string{`1`}, `-1`, -1},
		{[]string{`1e400`}, `10e399`, -1},
		{[]string{`"a"`}, `"A"`, -1},
		{[]string{`"a"`}, `"\u0041"`, -1},
		{[]string{`null`}, `"null"`, -1},
		{[]string{`true`}, `true`, 0},
	} {
		var l callList
		calls := make([]*call, len(tt.inflight))
		for i, id := range tt.inflight {
			calls[i] = &call{fromID: json.RawMessage(id)}
			l.push(calls[i])
		}
		var want *call
		if tt.want >= 0 {
			want = calls[tt.want]
		}
		if got := l.find([]byte(tt.cancel)); got != want {
			t.Errorf("with %s in flight, a cancel for %s finds %v, want %v", tt.inflight, tt.cancel, got, want)
		}
	}
}

// TestInFlightBound: past its bound on requests in flight, a peer's next
// request is answered at once with an error that names the limit and the
// peer it would wait on, and is not relayed; it is logged once per peer.
// Once the peer asked answers one, the next request goes on. The client
// and the agent are bounded alike.
func TestInFlightBound(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	agent, agentStarted := scriptedComponent(t, t.TempDir(), "agent")
	e := startChain(t, Config{Agent: agent, Logger: zap.New(core), running: func(c *chain) {
		for _, p := range c.peers {
			p.maxInFlight = 2
		}
	}})
	a := agentStarted()
	ed := scriptedEditor(e)
	prompt := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"n":%d}}`, id, id)
	}

	ed.send(prompt(1))
	first := a.recvMsg()
	ed.send(prompt(2))
	a.recvMsg()
	for _, id := range []int{3, 4} {
		ed.send(prompt(id))
		m := ed.recvMsg()
		if string(m.ID) != fmt.Sprint(id) || errorCode(m.Error) != codeInternalError ||
			!strings.Contains(errorMessage(m.Error), `client has 2 requests in flight`) || !strings.Contains(errorMessage(m.Error), `"agent"`) {
			t.Fatalf("got %s, want prompt %d refused for the limit, naming the agent", m.Bytes(), id)
		}
	}
	a.reply(first, `{"stopReason":"end_turn"}`)
	if m := ed.recvMsg(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("got %s, want prompt 1 answered", m.Bytes())
	}
	ed.send(prompt(5))
	// The agent's next request is 5: neither 3 nor 4 reached it.
	if m := a.recvMsg(); string(m.Params) != `{"n":5}` {
		t.Fatalf("the agent got %s, want prompt 5", m.Bytes())
	}

	perm := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/request_permission","params":{"n":%d}}`, id, id)
	}
	a.send(perm(1))
	ed.recvMsg()
	a.send(perm(2))
	ed.recvMsg()
	a.send(perm(3))
	if m := a.recvMsg(); string(m.ID) != `"p3"` || !strings.Contains(errorMessage(m.Error), `agent has 2 requests in flight`) || !strings.Contains(errorMessage(m.Error), `"client"`) {
		t.Fatalf("the agent got %s, want its request refused for the limit, naming the client", m.Bytes())
	}
	if n := logs.FilterMessage(logTooMany).Len(); n != 2 {
		t.Errorf("the refusals were warned of %d times, want once for each peer", n)
	}
}

// BenchmarkInflightFindMiss measures a cancel whose id matches no request
// in flight, the path that looks for the same id spelled otherwise:
// BenchmarkInflightFindMiss/N/KIND, N requests in flight, under integer
// ids or string ids as the TypeScript SDK and acpx make them.
func BenchmarkInflightFindMiss(b *testing.B) {
	for _, n := range []int{8, 1024} {
		for _, kind := range []struct {
			name string
			id   func(int) string
		}{
			{"int", func(i int) string { return fmt.Sprint(i) }},
			{"string", func(i int) string { return fmt.Sprintf(`"req-%d"`, i) }},
		} {
			b.Run(fmt.Sprintf("%d/%s", n, kind.name), func(b *testing.B) {
				var l callList
				for i := range n {
					l.push(&call{fromID: json.RawMessage(kind.id(i))})
				}
				miss := []byte(kind.id(n)) // answered already, say
				for b.Loop() {
					if l.find(miss) != nil {
						b.Fatal("found a request that is not in flight")
					}
				}
			})
		}
	}
}

// A first request refused while the chain stops tells the shutdown's
// drain it was made only once its refusal is queued (refused, after
// refuseCall): told at track, the drain could close the client's output
// first, and the refusal, the only answer telling the editor why the chain
// failed (TestFailureBeforeFirstRequest), would be dropped.
func TestRefusedRequestToldAfterItsRefusal(t *testing.T) {
	p := newPeer("client", 0, nil, zap.NewNop())
	p.stopTaking(wire.Errorf(codeInternalError, "the agent failed"))
	if e := p.track(&call{from: p, method: "initialize"}); e == nil {
		t.Fatal("a request tracked while the peer may start no more")
	}
	select {
	case <-p.asked:
		t.Fatal("the drain was told of the request before its refusal was queued")
	default:
	}
	p.refused()
	select {
	case <-p.asked:
	default:
		t.Fatal("the drain was not told of the refused request")
	}
	p.refused() // a second refusal closes nothing twice
}

// An initialize in flight that retrack takes off because the chain stops
// leaves its peer idle, for the shutdown's drain, only once its refusal is
// queued (answerQueued): idle at once, the drain could close the client's
// output before the refusal reached it.
func TestRetrackRefusalKeepsDrainWaiting(t *testing.T) {
	p := newPeer("client", 0, nil, zap.NewNop())
	old := &call{from: p, method: "initialize", fromID: []byte("1")}
	if e := p.track(old); e != nil {
		t.Fatal(e)
	}
	idle := p.stopTaking(wire.Errorf(codeInternalError, "stopping"))
	if ok, e := p.retrack(old, &call{from: p, method: "initialize", fromID: []byte("1")}); ok || e == nil {
		t.Fatalf("retrack while stopping = %v, %v; want the refusal", ok, e)
	}
	select {
	case <-idle:
		t.Fatal("the peer was idle before its refusal was queued")
	default:
	}
	p.answerQueued()
	select {
	case <-idle:
	default:
		t.Fatal("the peer is not idle once its refusal is queued")
	}
}

// A request the conductor answers itself (failCalls, answerWith, abandon),
// which it may do on a goroutine the shutdown does not wait for (a
// restart's back-off given up, an initialize or replay timer's failure
// and the bypass it leads to), leaves its peer idle, for the shutdown's
// drain, only once its answer is queued: the write of that answer finds
// the drain still waiting.
func TestConductorAnswerKeepsDrainWaiting(t *testing.T) {
	for name, answer := range map[string]func(*call){
		"failCalls":  func(cl *call) { failCalls([]*call{cl}, wire.Errorf(codeInternalError, "gone")) },
		"answerWith": func(cl *call) { answerWith(cl, &wire.Message{Result: json.RawMessage(`{}`)}) },
		"abandon":    func(cl *call) { abandon(cl, errCancelled) },
	} {
		t.Run(name, func(t *testing.T) {
			l := &link{out: newOutbox(nil, nil), readDone: closedChan}
			p := newPeer("client", 0, l, zap.NewNop())
			var idle <-chan struct{}
			written, idleAtWrite := 0, false
			l.out.try = func(segs [][]byte) ([][]byte, error) {
				written++
				select {
				case <-idle:
					idleAtWrite = true
				default:
				}
				return nil, nil
			}
			cl := &call{from: p, fromID: []byte("1"), to: newPeer("agent", 1, nil, zap.NewNop()), method: "session/prompt"}
			if e := p.track(cl); e != nil {
				t.Fatal(e)
			}
			idle = p.stopTaking(wire.Errorf(codeInternalError, "stopping"))
			answer(cl)
			if written != 1 {
				t.Fatalf("%d answers written, want 1", written)
			}
			if idleAtWrite {
				t.Error("the peer was idle before its answer was queued")
			}
			select {
			case <-idle:
			default:
				t.Error("the peer is not idle once its answer is queued")
			}
		})
	}
}

// The shutdown waits for an answer owed to the client before closing its
// output (awaitOwed), but not for ever: one that never comes is counted
// as lost once owedBound has passed.
func TestAwaitOwedBounded(t *testing.T) {
	r := &runner{log: zap.NewNop()}
	p := newPeer("client", 0, nil, zap.NewNop())
	cl := &call{from: p, fromID: []byte("1"), method: "session/prompt"}
	if e := p.track(cl); e != nil {
		t.Fatal(e)
	}
	p.stopTaking(wire.Errorf(codeInternalError, "stopping"))
	if n := r.awaitOwed(p); n != 0 {
		t.Fatalf("awaitOwed = %d for a request in flight, which abandonAll answers; want 0", n)
	}
	if !cl.take() {
		t.Fatal("take found no request in flight")
	}
	if n := r.awaitOwed(p); n != 1 {
		t.Errorf("awaitOwed = %d with an answer owed that never came, want 1", n)
	}
	cl.told()
	if n := r.awaitOwed(p); n != 0 {
		t.Errorf("awaitOwed = %d once the answer is queued, want 0", n)
	}
}
