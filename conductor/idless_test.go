package conductor

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestIdlessAnswersLoggedSparingly: an agent that answers each
// $/cancel_request notification with an error under no id, or a null
// one (as Codex does), has those answers dropped, the first few logged
// with what they said and the rest counted, not one warning each.
func TestIdlessAnswersLoggedSparingly(t *testing.T) {
	for _, tt := range []struct{ name, line string }{
		{"null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}`},
		{"no id", `{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"}}`},
		{"unsent id", `{"jsonrpc":"2.0","id":"x9","error":{"code":-32601,"message":"Method not found"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, a, logs := observedChain(t)
			const answered = 100
			for range answered {
				a.send(tt.line)
			}
			stillWorks(t, e, a) // read after all of them, on the same pipe
			loggedSparingly(t, logs, "answers the conductor cannot match", answered, max(strayLogged, unsentLogged)+1, func(en observer.LoggedEntry) bool {
				return en.Level >= zap.WarnLevel && en.ContextMap()["peer"] == "agent"
			})
		})
	}
}
