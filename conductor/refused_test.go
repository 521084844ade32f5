package conductor

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRefusedNotificationsLoggedSparingly: a peer that keeps sending
// notifications the conductor refuses has them dropped, the first few
// logged with their method and why, the rest counted, not one warning
// each; and the chain goes on working.
func TestRefusedNotificationsLoggedSparingly(t *testing.T) {
	for _, tt := range []struct{ name, from, line string }{
		// The agent has no successor to send an envelope to.
		{"agent", "agent", `{"jsonrpc":"2.0","method":"proxy/successor","params":{"method":"session/update","params":{}}}`},
		// An envelope must carry a method.
		{"client", "client", `{"jsonrpc":"2.0","method":"proxy/successor","params":{}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, a, logs := observedChain(t)
			const refused = 10000
			for range refused {
				if tt.from == "agent" {
					a.send(tt.line)
				} else {
					e.send(tt.line)
				}
			}
			stillWorks(t, e, a) // read after all of them, on the same pipe
			loggedSparingly(t, logs, "refused notifications", refused, refusedLogged+1, func(en observer.LoggedEntry) bool {
				return strings.Contains(en.Message, "dropped notification") && en.ContextMap()["peer"] == tt.from
			})
		})
	}
}

// TestUnawaitedAnswersLoggedSparingly: a component that answers a call
// again and again has the answers nobody awaits dropped, the first few
// logged with their id, the rest counted, not one line each; and the
// chain goes on working.
func TestUnawaitedAnswersLoggedSparingly(t *testing.T) {
	e, a, logs := observedChain(t)
	e.send(clientInit(0, "a"))
	m := a.recvMsg()
	const again = 10000
	for range again + 1 { // the first is awaited
		a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-a"}}`)
	}
	initializedFor(t, e, 0, "a")
	e.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	a.reply(a.recvMsg(), `{"sessionId":"s1"}`) // read after all of them, on the same pipe
	if m := e.recvMsg(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("session/new answered %s", m.Bytes())
	}
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	loggedSparingly(t, logs, "answers nobody awaits", again, unawaitedLogged+1, func(en observer.LoggedEntry) bool {
		return strings.Contains(en.Message, "nobody awaits") && en.ContextMap()["peer"] == "agent"
	})
}

// TestRejectedInputLoggedSparingly: a client that keeps writing lines
// that are not JSON-RPC has each answered with its error, the first few
// logged with what they said, the rest counted, not one warning each;
// and the chain goes on working.
func TestRejectedInputLoggedSparingly(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		code       int
	}{
		{"not JSON", `not json`, -32700},
		{"not JSON-RPC", `{"id":1}`, -32600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, a, logs := observedChain(t)
			const rejected = 10000
			for range rejected {
				e.send(tt.line)
			}
			for i := range rejected {
				m := e.recvMsg()
				if m.Error == nil || !strings.Contains(string(m.Error), fmt.Sprintf(`"code":%d`, tt.code)) {
					t.Fatalf("answer %d to %s: %s, want error %d", i, tt.line, m.Bytes(), tt.code)
				}
			}
			stillWorks(t, e, a)
			loggedSparingly(t, logs, "rejected lines", rejected, rejectedLogged+1, func(en observer.LoggedEntry) bool {
				return strings.Contains(en.Message, "rejected input") && en.ContextMap()["peer"] == "client"
			})
		})
	}
}

// TestBadResponsesLoggedSparingly: a component that keeps answering with
// both a result and an error, or with a malformed error, has the first
// of each logged in full and the rest counted, not one line each; and
// the chain goes on working.
func TestBadResponsesLoggedSparingly(t *testing.T) {
	for _, tt := range []struct{ name, line, said string }{
		{"both", `{"jsonrpc":"2.0","id":"x","result":{},"error":{"code":1,"message":"m"}}`, logBothAnswers},
		{"malformed", `{"jsonrpc":"2.0","id":"x","error":"boom"}`, logMalformedError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, a, logs := observedChain(t)
			const bad = 10000
			for range bad {
				a.send(tt.line)
			}
			stillWorks(t, e, a) // read after all of them, on the same pipe
			loggedSparingly(t, logs, tt.name+" responses", bad, 2, func(en observer.LoggedEntry) bool {
				return strings.HasPrefix(en.Message, tt.said) && en.ContextMap()["peer"] == "agent"
			})
		})
	}
}

// TestTooManyLoggedSparingly: a client that keeps asking past its bound
// on requests in flight has each request refused, the first refusal
// logged in full and the rest counted, not one line each.
func TestTooManyLoggedSparingly(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	agent, agentStarted := scriptedComponent(t, t.TempDir(), "agent")
	e := startChain(t, Config{Agent: agent, Logger: zap.New(core), running: func(c *chain) {
		for _, p := range c.peers {
			p.maxInFlight = 1
		}
	}})
	a := agentStarted()
	e.send(clientInit(0, "a"))
	m := a.recvMsg()
	const refused = 10000
	for i := range refused {
		e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{}}`, i+1))
	}
	for range refused {
		if m := e.recvMsg(); errorCode(m.Error) != codeInternalError {
			t.Fatalf("got %s, want a refusal for the limit", m.Bytes())
		}
	}
	a.reply(m, `{"protocolVersion":1,"agentInfo":{"name":"for-a"}}`)
	initializedFor(t, e, 0, "a")
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
	loggedSparingly(t, logs, "refusals for the limit", refused, 2, func(en observer.LoggedEntry) bool {
		return strings.HasPrefix(en.Message, logTooMany) && en.ContextMap()["peer"] == "client"
	})
}

// TestUnheededCancelsLoggedSparingly: a client that keeps cancelling
// requests not in flight has the cancels ignored, the first few logged
// with their id, the rest counted, not one line each; and the chain goes
// on working.
func TestUnheededCancelsLoggedSparingly(t *testing.T) {
	e, a, logs := observedChain(t)
	const ignored = 10000
	for i := range ignored {
		e.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, i))
	}
	stillWorks(t, e, a)
	loggedSparingly(t, logs, "cancels for no request in flight", ignored, unheededLogged+1, func(en observer.LoggedEntry) bool {
		return strings.Contains(en.Message, "not in flight") || strings.Contains(en.Message, "no request in flight")
	})
}

// observedChain starts a chain of the scripted agent alone, its log
// observed at debug level.
func observedChain(t *testing.T) (*editor, *scripted, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	agent, agentStarted := scriptedComponent(t, t.TempDir(), "agent")
	e := startChain(t, Config{Agent: agent, Logger: zap.New(core)})
	return e, agentStarted(), logs
}

// stillWorks checks that the chain still initializes, and ends well.
func stillWorks(t *testing.T, e *editor, a *scripted) {
	t.Helper()
	e.send(clientInit(0, "a"))
	answerInit(t, a, "a")
	initializedFor(t, e, 0, "a")
	if err := e.close(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// loggedSparingly checks that of the n events that match, at most few
// lines were logged, one of them counting all n.
func loggedSparingly(t *testing.T, logs *observer.ObservedLogs, what string, n, few int, match func(observer.LoggedEntry) bool) {
	t.Helper()
	var logged int
	counted := false
	for _, en := range logs.All() {
		if match(en) {
			logged++
			counted = counted || en.ContextMap()["count"] == int64(n)
		}
	}
	if logged > few {
		t.Errorf("logged %d lines for %d %s, want at most %d:\n%v", logged, n, what, few, logs.All())
	}
	if !counted {
		t.Errorf("no line counts the %d %s:\n%v", n, what, logs.All())
	}
}
