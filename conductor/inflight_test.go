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
