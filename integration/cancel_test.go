package integration

import (
	"testing"
	"time"
)

// TestCancelRequestThroughProxies: a prompt the SDK editor abandons with
// $/cancel_request reaches the agent through each passthrough proxy (the
// independent Go one, the one built on the proxy library, the Python one),
// each translating the request id to the one it relayed the prompt under,
// and ends cancelled.
func TestCancelRequestThroughProxies(t *testing.T) {
	requireConductor(t)
	for _, tc := range []struct{ name, proxy string }{
		{"goproxy", goProxyCmd("go-proxy")},
		{"libproxy", libProxyCmd("lib-proxy")},
		{"python", pyProxyCmd("py-proxy")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 60*time.Second)
			cfg := clientConfig{Prompts: []string{"first"}, CancelRequestPrompt: "hang until $/cancel_request"}
			withMarker(t, &cfg)
			sum := runClient(t, ctx, cfg, agentModeArgs(tc.proxy, agentCmd("agent")))
			if len(sum.Sessions) != 1 || len(sum.Sessions[0].Prompts) != 2 {
				t.Errorf("sessions %+v", sum.Sessions)
			}
		})
	}
}
