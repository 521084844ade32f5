package conductor

import (
	"reflect"
	"sync"
	"testing"

	"github.com/acp-conductor/acp-conductor/internal/wire"
)

func TestHop(t *testing.T) {
	const (
		init   = "initialize"
		pinit  = "proxy/initialize"
		rinit  = "_proxy/initialize"
		prompt = "session/prompt"
		update = "session/update"
	)
	agent := func(n int) topology { return topology{mode: AgentMode, proxies: n} }
	proxy := func(n int) topology { return topology{mode: ProxyMode, proxies: n} }
	tests := []struct {
		name      string
		topo      topology
		from      int
		enveloped bool
		method    string
		want      delivery
		wantErr   bool
	}{
		// Agent mode, no proxies: client and agent talk plainly.
		{"agent/0: client initialize reaches agent", agent(0), 0, false, init, delivery{to: 1, method: init}, false},
		{"agent/0: client prompt reaches agent", agent(0), 0, false, prompt, delivery{to: 1, method: prompt}, false},
		{"agent/0: agent update reaches client", agent(0), 1, false, update, delivery{to: 0, method: update}, false},
		{"agent/0: client may not send an envelope", agent(0), 0, true, prompt, delivery{}, true},
		{"agent/0: agent has no successor", agent(0), 1, true, prompt, delivery{}, true},

		// Agent mode, two proxies at positions 1 and 2, agent at 3.
		{"agent/2: client initialize becomes proxy/initialize", agent(2), 0, false, init, delivery{to: 1, method: pinit}, false},
		{"agent/2: proxy forwards initialize to next proxy as proxy/initialize", agent(2), 1, true, init, delivery{to: 2, method: pinit}, false},
		{"agent/2: last proxy forwards initialize to agent as initialize", agent(2), 2, true, init, delivery{to: 3, method: init}, false},
		{"agent/2: proxy/initialize never reaches the agent", agent(2), 2, true, pinit, delivery{to: 3, method: init}, false},
		{"agent/2: rust spelling never reaches the agent", agent(2), 2, true, rinit, delivery{to: 3, method: init}, false},
		{"agent/2: client prompt goes to first proxy plain", agent(2), 0, false, prompt, delivery{to: 1, method: prompt}, false},
		{"agent/2: proxy envelope goes to successor plain", agent(2), 1, true, prompt, delivery{to: 2, method: prompt}, false},
		{"agent/2: last proxy envelope reaches agent plain", agent(2), 2, true, prompt, delivery{to: 3, method: prompt}, false},
		{"agent/2: agent message reaches last proxy wrapped", agent(2), 3, false, update, delivery{to: 2, wrap: true, method: update}, false},
		{"agent/2: proxy message goes to predecessor wrapped", agent(2), 2, false, update, delivery{to: 1, wrap: true, method: update}, false},
		{"agent/2: first proxy message reaches client plain", agent(2), 1, false, update, delivery{to: 0, method: update}, false},
		{"agent/2: unknown methods route the same", agent(2), 1, true, "_x.dev/custom", delivery{to: 2, method: "_x.dev/custom"}, false},

		// Proxy mode, no proxies: the conductor is a pure passthrough proxy.
		{"proxy/0: parent's proxy/initialize goes back up as initialize", proxy(0), 0, false, pinit, delivery{to: 1, wrap: true, method: init}, false},
		{"proxy/0: parent's request goes up wrapped", proxy(0), 0, false, prompt, delivery{to: 1, wrap: true, method: prompt}, false},
		{"proxy/0: successor's message comes back plain", proxy(0), 0, true, update, delivery{to: 0, method: update}, false},

		// Proxy mode, two proxies at 1 and 2; the parent's successor side is 3.
		{"proxy/2: parent's proxy/initialize reaches first proxy", proxy(2), 0, false, pinit, delivery{to: 1, method: pinit}, false},
		{"proxy/2: rust proxy/initialize reaches first proxy", proxy(2), 0, false, rinit, delivery{to: 1, method: pinit}, false},
		{"proxy/2: last proxy's initialize goes up as initialize", proxy(2), 2, true, init, delivery{to: 3, wrap: true, method: init}, false},
		{"proxy/2: last proxy's envelope goes up wrapped", proxy(2), 2, true, prompt, delivery{to: 3, wrap: true, method: prompt}, false},
		{"proxy/2: parent's envelope reaches last proxy wrapped", proxy(2), 0, true, update, delivery{to: 2, wrap: true, method: update}, false},
		{"proxy/2: first proxy's message reaches parent plain", proxy(2), 1, false, update, delivery{to: 0, method: update}, false},
	}
	// Proxies 1..3 in agent mode, the agent at 4, proxy 2 bypassed.
	bp := topology{mode: AgentMode, proxies: 3, bypassed: []bool{2: true}}
	// Proxy 1 bypassed in proxy mode with one proxy: the parent talks to itself.
	bp1 := topology{mode: ProxyMode, proxies: 1, bypassed: []bool{1: true}}
	tests = append(tests, []struct {
		name      string
		topo      topology
		from      int
		enveloped bool
		method    string
		want      delivery
		wantErr   bool
	}{
		{"bypass: proxy 1's envelope skips proxy 2", bp, 1, true, prompt, delivery{to: 3, method: prompt}, false},
		{"bypass: initialize skipping a proxy still becomes proxy/initialize", bp, 1, true, init, delivery{to: 3, method: pinit}, false},
		{"bypass: proxy 3's message skips proxy 2, wrapped for proxy 1", bp, 3, false, update, delivery{to: 1, wrap: true, method: update}, false},
		{"bypass: agent's message still reaches proxy 3", bp, 4, false, update, delivery{to: 3, wrap: true, method: update}, false},
		{"bypass: the client still reaches proxy 1", bp, 0, false, prompt, delivery{to: 1, method: prompt}, false},
		{"bypass: all proxies gone in proxy mode", bp1, 0, false, prompt, delivery{to: 2, wrap: true, method: prompt}, false},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.topo.hop(tt.from, tt.enveloped, tt.method)
			if (err != nil) != tt.wantErr {
				t.Fatalf("route error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("hop(%d, %v, %q) = %+v, want %+v", tt.from, tt.enveloped, tt.method, got, tt.want)
			}
		})
	}
}

// fixedDialects gives the dialect of each position for route's tests.
type fixedDialects map[int]*wire.Dialect

func (f fixedDialects) dialectAt(pos int) *wire.Dialect {
	if d := f[pos]; d != nil {
		return d
	}
	return wire.RFD
}

func TestRouteClassifies(t *testing.T) {
	agent2 := topology{mode: AgentMode, proxies: 2}
	proxy2 := topology{mode: ProxyMode, proxies: 2}
	sealed := topology{mode: AgentMode, proxies: 2, sealed: true}
	rust1 := fixedDialects{1: wire.Rust}
	thinkwell2 := fixedDialects{2: wire.Thinkwell}
	tests := []struct {
		name      string
		topo      topology
		from      int
		line      string
		restarted bool
		dl        fixedDialects
		want      decision
	}{
		{"a response is completed", agent2, 3, `{"jsonrpc":"2.0","id":1,"result":{}}`, false, nil,
			decision{act: actComplete, src: 3}},
		{"a plain update to the client goes on as its line", agent2, 1, `{"jsonrpc":"2.0","method":"session/update","params":{}}`, false, nil,
			decision{act: actRelayLine, src: 1, d: delivery{to: 0, method: "session/update"}, raw: []byte(`{}`)}},
		{"an update with an escaped member name is re-encoded", agent2, 1, `{"jsonrpc":"2.0","m\u0065thod":"session/update","params":{}}`, false, nil,
			decision{act: actRelay, src: 1, d: delivery{to: 0, method: "session/update"}, raw: []byte(`{}`)}},
		{"an update to a proxy is wrapped", agent2, 3, `{"jsonrpc":"2.0","method":"session/update","params":{}}`, false, nil,
			decision{act: actRelay, src: 3, d: delivery{to: 2, wrap: true, method: "session/update"}, raw: []byte(`{}`)}},
		{"an envelope is unwrapped", agent2, 1, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"x":1}}}`, false, nil,
			decision{act: actRelay, src: 1, enveloped: true, d: delivery{to: 2, method: "session/update"}, raw: []byte(`{"x":1}`)}},
		{"a Rust envelope is unwrapped", agent2, 2, `{"jsonrpc":"2.0","method":"_proxy/successor","params":{"method":"session/update"}}`, false, nil,
			decision{act: actRelay, src: 2, enveloped: true, d: delivery{to: 3, method: "session/update"}}},
		{"a malformed envelope is refused", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":[1]}`, false, nil,
			decision{act: actRefuse, src: 1}},
		{"a cancel is translated", agent2, 0, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`, false, nil,
			decision{act: actCancel, src: 0, raw: []byte(`{"requestId":3}`)}},
		{"a wrapped cancel is translated", agent2, 1, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"$/cancel_request","params":{"requestId":3}}}`, false, nil,
			decision{act: actCancel, src: 1, enveloped: true, raw: []byte(`{"requestId":3}`)}},
		{"a cancel request (not notification) is relayed", agent2, 0, `{"jsonrpc":"2.0","id":1,"method":"$/cancel_request","params":{}}`, false, nil,
			decision{act: actRelay, src: 0, d: delivery{to: 1, method: "$/cancel_request"}, raw: []byte(`{}`)}},
		{"the client's initialize is hooked, remembered and timed", agent2, 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false, nil,
			decision{act: actRelay, src: 0, d: delivery{to: 1, method: "proxy/initialize"}, raw: []byte(`{}`), initialize: true, initTimer: true, proxyInit: wire.RFD}},
		{"proxy/initialize is spelled in the proxy's dialect", agent2, 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false, rust1,
			decision{act: actRelay, src: 0, d: delivery{to: 1, method: "_proxy/initialize"}, raw: []byte(`{}`), initialize: true, initTimer: true, proxyInit: wire.Rust}},
		{"a Thinkwell proxy is initialized with initialize", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{}}}`, false, thinkwell2,
			decision{act: actRelay, src: 1, enveloped: true, d: delivery{to: 2, method: "initialize"}, raw: []byte(`{}`), initialize: true, proxyInit: wire.Thinkwell}},
		{"a Thinkwell request envelope is unwrapped", agent2, 2, `{"jsonrpc":"2.0","id":1,"method":"_proxy/successor/request","params":{"method":"session/new","params":{}}}`, false, thinkwell2,
			decision{act: actRelay, src: 2, enveloped: true, d: delivery{to: 3, method: "session/new"}, raw: []byte(`{}`), setup: true}},
		{"a Thinkwell notification envelope is unwrapped", agent2, 2, `{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"session/cancel","params":{}}}`, false, thinkwell2,
			decision{act: actRelay, src: 2, enveloped: true, d: delivery{to: 3, method: "session/cancel"}, raw: []byte(`{}`)}},
		{"_mcp/message is the MCP router's, in the RFD's spelling", agent2, 2, `{"jsonrpc":"2.0","id":1,"method":"_mcp/message","params":{}}`, false, thinkwell2,
			decision{act: actMCP, src: 2, d: delivery{to: 1, wrap: true, method: "mcp/message"}, raw: []byte(`{}`)}},
		{"the last proxy's initialize reaches the agent, hooked only", agent2, 2, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{}}}`, false, nil,
			decision{act: actRelay, src: 2, enveloped: true, d: delivery{to: 3, method: "initialize"}, raw: []byte(`{}`), initialize: true}},
		{"a restarted proxy's initialize is answered here", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{}}}`, true, nil,
			decision{act: actAnswerInit, src: 1, enveloped: true, d: delivery{to: 2, method: "proxy/initialize"}, raw: []byte(`{}`), initialize: true, proxyInit: wire.RFD}},
		{"a restarted proxy's other requests are relayed", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new","params":{}}}`, true, nil,
			decision{act: actRelay, src: 1, enveloped: true, d: delivery{to: 2, method: "session/new"}, raw: []byte(`{}`), setup: true}},
		{"session/new is a set-up", agent2, 0, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}`, false, nil,
			decision{act: actRelay, src: 0, d: delivery{to: 1, method: "session/new"}, raw: []byte(`{}`), setup: true}},
		{"a set-up notification is never relayed as its line", agent2, 1, `{"jsonrpc":"2.0","method":"session/load","params":{}}`, false, nil,
			decision{act: actRelay, src: 1, d: delivery{to: 0, method: "session/load"}, raw: []byte(`{}`), setup: true}},
		{"mcp/connect goes to the MCP router", agent2, 3, `{"jsonrpc":"2.0","id":1,"method":"mcp/connect","params":{}}`, false, nil,
			decision{act: actMCP, src: 3, d: delivery{to: 2, wrap: true, method: "mcp/connect"}, raw: []byte(`{}`)}},
		{"mcp/message the router may know where routing does not", agent2, 3, `{"jsonrpc":"2.0","id":1,"method":"_proxy/successor","params":{"method":"mcp/message","params":{}}}`, false, nil,
			decision{act: actMCP, src: 3, enveloped: true, d: delivery{method: "mcp/message"}, raw: []byte(`{}`)}},
		{"an envelope in an envelope is refused", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"proxy/successor","params":{"method":"session/request_permission","params":{}}}}`, false, nil,
			decision{act: actRefuse, src: 1, enveloped: true}},
		{"an envelope in another dialect's envelope is refused", agent2, 2, `{"jsonrpc":"2.0","method":"_proxy/successor/notification","params":{"method":"_proxy/successor","params":{"method":"session/update"}}}`, false, nil,
			decision{act: actRefuse, src: 2, enveloped: true}},
		{"a proxy's proxy/initialize sent up is refused", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/initialize","params":{}}`, false, nil,
			decision{act: actRefuse, src: 1, raw: []byte(`{}`)}},
		{"a proxy's _proxy/initialize sent up is refused", agent2, 2, `{"jsonrpc":"2.0","id":1,"method":"_proxy/initialize","params":{}}`, false, nil,
			decision{act: actRefuse, src: 2, raw: []byte(`{}`)}},
		{"the agent's initialize sent up is refused", agent2, 3, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false, nil,
			decision{act: actRefuse, src: 3, raw: []byte(`{}`)}},
		{"the agent has no successor", agent2, 3, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/new"}}`, false, nil,
			decision{act: actRefuse, src: 3, enveloped: true}},

		// Proxy mode: the parent is position 0 and, for its envelopes, 3.
		{"the parent's Rust initialize teaches its dialect", proxy2, 0, `{"jsonrpc":"2.0","id":1,"method":"_proxy/initialize","params":{}}`, false, nil,
			decision{act: actRelay, src: 0, learn: wire.Rust, d: delivery{to: 1, method: "proxy/initialize"}, raw: []byte(`{}`), initialize: true, initTimer: true, proxyInit: wire.RFD}},
		{"a Thinkwell parent's marked initialize teaches its dialect", proxy2, 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"proxy":true}}}`, false, nil,
			decision{act: actRelay, src: 0, learn: wire.Thinkwell, d: delivery{to: 1, method: "proxy/initialize"}, raw: []byte(`{"_meta":{"proxy":true}}`), initialize: true, initTimer: true, proxyInit: wire.RFD}},
		{"an editor's initialize is refused: only a conductor starts a proxy", proxy2, 0, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false, nil,
			decision{act: actRefuse, src: 0}},
		{"the parent's envelope comes from its successor side", proxy2, 0, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{}}}`, false, nil,
			decision{act: actRelay, src: 3, enveloped: true, d: delivery{to: 2, wrap: true, method: "session/update"}, raw: []byte(`{}`)}},
		{"the parent's envelope may not carry initialize up", proxy2, 0, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"initialize","params":{}}}`, false, nil,
			decision{act: actRefuse, src: 3, enveloped: true, raw: []byte(`{}`)}},
		{"the last proxy's envelope goes up wrapped", proxy2, 2, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/prompt","params":{}}}`, false, nil,
			decision{act: actRelay, src: 2, enveloped: true, d: delivery{to: 3, wrap: true, method: "session/prompt"}, raw: []byte(`{}`)}},

		// A sealed client gets no more notifications; the rest goes on.
		{"an update for a sealed client is dropped", sealed, 1, `{"jsonrpc":"2.0","method":"session/update","params":{}}`, false, nil,
			decision{act: actDrop, src: 1, d: delivery{to: 0, method: "session/update"}, raw: []byte(`{}`)}},
		{"a sealed client's answers still come", sealed, 1, `{"jsonrpc":"2.0","id":1,"result":{}}`, false, nil,
			decision{act: actComplete, src: 1}},
		{"a request for a sealed client is relayed, for its caller to be failed", sealed, 1, `{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}`, false, nil,
			decision{act: actRelay, src: 1, d: delivery{to: 0, method: "session/request_permission"}, raw: []byte(`{}`)}},
		{"updates between components go on past a sealed client", sealed, 3, `{"jsonrpc":"2.0","method":"session/update","params":{}}`, false, nil,
			decision{act: actRelay, src: 3, d: delivery{to: 2, wrap: true, method: "session/update"}, raw: []byte(`{}`)}},

		// Members JSON-RPC does not define go on with the message they
		// came with: a plain one's top-level ones, a carried one's beside
		// its method and params in the envelope (not the envelope's).
		{"a request's unknown members go on", agent2, 0, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{},"x":[1]}`, false, nil,
			decision{act: actRelay, src: 0, d: delivery{to: 1, method: "session/prompt", extra: `,"x":[1]`}, raw: []byte(`{}`)}},
		{"a carried message's unknown members go on, the envelope's do not", agent2, 1, `{"jsonrpc":"2.0","id":1,"method":"proxy/successor","params":{"method":"session/prompt","params":{},"_meta":{},"x":2},"y":3}`, false, nil,
			decision{act: actRelay, src: 1, enveloped: true, d: delivery{to: 2, method: "session/prompt", extra: `,"x":2`}, raw: []byte(`{}`)}},
		{"a cancel's unknown members go on", agent2, 0, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1},"x":4}`, false, nil,
			decision{act: actCancel, src: 0, d: delivery{extra: `,"x":4`}, raw: []byte(`{"requestId":1}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := wire.Parse([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.topo.route(inbound{from: tt.from, msg: m, restarted: tt.restarted}, tt.dl)
			// An mcp/* message ordinary routing cannot deliver keeps its
			// refusal for when the MCP router declines it.
			wantErr := tt.want.act == actRefuse || tt.want.act == actMCP && tt.want.d.to == 0
			if (got.err != nil) != wantErr {
				t.Errorf("err = %v, want one: %v", got.err, wantErr)
			}
			got.err, tt.want.err = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("route(%d, %s) =\n\t%+v, want\n\t%+v", tt.from, tt.line, got, tt.want)
			}
		})
	}
}

// TestRouteAllocations: route runs for every message the relay carries,
// and allocates nothing but an envelope's inner method name, and that only
// when it is not one of the methods wire knows by name.
func TestRouteAllocations(t *testing.T) {
	topo := topology{mode: AgentMode, proxies: 2}
	for _, tt := range []struct {
		from int
		line string
		want float64
	}{
		{3, `{"jsonrpc":"2.0","method":"session/update","params":{"x":1}}`, 0},
		{0, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":1}}`, 0},
		{1, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{"x":1}}}`, 0},
		{1, `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"x/custom","params":{"x":1}}}`, 1},
	} {
		m, err := wire.Parse([]byte(tt.line))
		if err != nil {
			t.Fatal(err)
		}
		dl := fixedDialects{}
		if n := testing.AllocsPerRun(100, func() { topo.route(inbound{from: tt.from, msg: m}, dl) }); n != tt.want {
			t.Errorf("route(%s) allocates %v times, want %v", tt.line, n, tt.want)
		}
	}
}

// TestSealAndBypassBothHold seals the client while a proxy is bypassed, as
// a shutdown that drains may while a proxy fails: each replaces the
// topology with a changed copy, and neither change may be lost to the
// other, or a bypassed proxy would be routed to again, or the sealed
// client hear an agent streaming on.
func TestSealAndBypassBothHold(t *testing.T) {
	for i := range 100000 {
		c := &chain{}
		c.topo.Store(&topology{proxies: 2})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; c.seal() })
		wg.Go(func() { <-start; c.bypass(1) })
		close(start)
		wg.Wait()
		if tp := c.topo.Load(); !tp.sealed || len(tp.bypassed) < 2 || !tp.bypassed[1] {
			t.Fatalf("round %d: sealed %v, bypassed %v: a change was lost", i, tp.sealed, tp.bypassed)
		}
	}
}
