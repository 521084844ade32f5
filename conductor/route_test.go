package conductor

import (
	"testing"
)

func TestRoute(t *testing.T) {
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
			got, err := tt.topo.route(tt.from, tt.enveloped, tt.method)
			if (err != nil) != tt.wantErr {
				t.Fatalf("route error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("route(%d, %v, %q) = %+v, want %+v", tt.from, tt.enveloped, tt.method, got, tt.want)
			}
		})
	}
}
