package conductor

import (
	"encoding/json"
	"testing"

	"go.uber.org/zap"

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
